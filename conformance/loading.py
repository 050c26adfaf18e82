"""Apply ``--torchbind-load`` specs: load C++ libraries, import fake-class modules, call set-up functions.

Accepted forms, applied in the order given:

* ``path/to/libfoo.so`` (any existing file ending in ``.so``, ``.dylib`` or ``.dll``): ``torch.ops.load_library``;
* ``path/to/fakes.py``: imported as a module from that file;
* ``package.module``: imported with ``importlib.import_module``;
* ``package.module:function``: imported, then ``function()`` is called with no arguments.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path

import torch

__all__ = ["LoadError", "apply_load_spec", "repro_lines"]

_LIB_SUFFIXES = (".so", ".dylib", ".dll")


class LoadError(Exception):
    """A ``--torchbind-load`` spec failed; the message carries the spec and the underlying error."""


def _format(spec: str, what: str, exc: BaseException) -> LoadError:
    tb = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return LoadError(f"--torchbind-load={spec!r}: {what} failed:\n{tb}")


def _kind(spec: str) -> str:
    if spec.endswith(_LIB_SUFFIXES) or ".so." in os.path.basename(spec):
        return "library"
    return "file" if spec.endswith(".py") else "module"


def repro_lines(spec: str, rootdir: Path | None = None) -> list[str]:
    """Python lines that apply ``spec`` in a standalone reproducer script (absolute paths for files)."""
    kind = _kind(spec)
    path = _existing_path(spec, rootdir)
    where = str(path) if path is not None else spec
    if kind == "library":
        return [f"torch.ops.load_library({where!r})"]
    if kind == "file":
        return ["import runpy", f"runpy.run_path({where!r})"]
    module, _, func = spec.partition(":")
    return [f"import {module}"] + ([f"{module}.{func}()"] if func else [])


def _registrations() -> tuple[int, int]:
    """How many custom-class method schemas and operator schemas torch knows (both grow when a torch extension
    library registers something at load time)."""
    return len(torch._C._jit_get_custom_class_schemas()), len(torch._C._jit_get_all_schemas())


def _mapped(path: Path) -> bool:
    """Whether the process has already mapped this file (loading it again registers nothing new). Linux reads
    ``/proc/self/maps``; elsewhere torch's own record of loaded libraries is used."""
    real = os.path.realpath(path)
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any(line.rstrip().endswith(real) for line in maps)
    except OSError:
        return real in {os.path.realpath(p) for p in getattr(torch.ops, "loaded_libraries", ())}


def apply_load_spec(spec: str, rootdir: Path | None = None) -> None:
    """Apply one spec (see module docstring). Relative paths are tried against the CWD, then ``rootdir``.

    Raises :class:`LoadError` carrying the underlying exception text when the library does not load or loads but
    registers no TorchBind class and no operator (not a torch extension), the module cannot be imported
    (missing, syntax error, raises on import) or the function fails.
    """
    path = _existing_path(spec, rootdir)
    kind = _kind(spec)
    if kind == "library":
        if path is None:
            raise LoadError(f"--torchbind-load={spec!r}: library file not found")
        already = _mapped(path)
        before = _registrations()
        try:
            torch.ops.load_library(str(path))
        except (Exception, SystemExit) as exc:  # any loader error becomes a usage error
            raise _format(spec, "loading the library", exc) from exc
        if not already and _registrations() == before:
            raise LoadError(f"--torchbind-load={spec!r}: {path} loaded but registered no TorchBind class and no "
                            "operator: it is not a torch extension library (one built with TORCH_LIBRARY / "
                            "torch::class_)")
        return
    if kind == "file":
        if path is None:
            raise LoadError(f"--torchbind-load={spec!r}: Python file not found")
        _import_file(spec, path)
        return
    module_name, _, func_name = spec.partition(":")
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise LoadError(
            f"--torchbind-load={spec!r}: expected a .so path, a .py path, a module name or module:function"
        )
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:
        raise _format(spec, f"importing {module_name}", exc) from exc
    if func_name:
        func = getattr(module, func_name, None)
        if not callable(func):
            raise LoadError(f"--torchbind-load={spec!r}: {module_name} has no function {func_name!r}")
        try:
            func()
        except (Exception, SystemExit) as exc:
            raise _format(spec, f"calling {module_name}.{func_name}()", exc) from exc


def _existing_path(spec: str, rootdir: Path | None) -> Path | None:
    for base in (Path.cwd(), rootdir):
        if base is None:
            continue
        p = (base / spec).resolve()
        if p.is_file():
            return p
    return None


def _import_file(spec: str, path: Path) -> None:
    name = f"_torchbind_load_{path.stem}_{abs(hash(str(path))):x}"
    if name in sys.modules:
        return
    try:
        mod_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module
        mod_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise _format(spec, f"importing {path}", exc) from exc
