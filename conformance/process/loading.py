"""Apply ``--torchbind-load`` specs (their forms: :mod:`conformance.engine.loading`): load C++ libraries, import
fake-class modules, call set-up functions. Used by the plugin (:mod:`conformance.plugin.run`) and the scaffold.

A directory is refused (``is a directory``), except a package directory named as a module. A library is first
loaded once in a forked child process (where ``os.fork`` is safe, on Linux; :class:`~conformance.process.Supervisor`):
a library whose static initializers crash (a ``TORCH_LIBRARY`` block or a global constructor that segfaults) then
fails with a message naming it and the signal, instead of ending pytest with a silent exit status 139. When loading
fails, the message shows the dynamic loader's own reason (``undefined symbol: ...``, a wrong ELF class, a missing
dependency), which torch keeps in the ``OSError``'s ``__cause__``. A module's or ``.py`` file's code (its import,
its function) runs once, in the pytest process, with the two ways it could end pytest silently taken away:
``os._exit()`` raises instead (a usage error naming the module, not a pytest that exits 0 with no output), and each
library it loads with ``torch.ops.load_library`` is first tried in a forked child as above. The schema strings of
the ops it defines with ``torch.library.Library.define`` are kept (:mod:`conformance.engine.op_definitions`): the
dispatcher forgets which Python custom class an argument takes.

A module spec whose top-level package/module is not on ``sys.path`` but is found in the invocation directory or the
rootdir (:func:`~conformance.engine.loading.find_beside`) gets that directory inserted at the front of ``sys.path``
(once), the way pytest makes the modules beside a ``conftest.py`` importable. So ``pytest --torchbind-load=myfakes``
and ``python -m pytest --torchbind-load=myfakes`` behave the same.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import traceback
from pathlib import Path

import torch

from ..engine.op_definitions import recording
from ..engine.loading import (LoadError, existing_path, file_module_name, find_beside, is_dotted_name, parse_spec,
                              search_dirs)
from .supervisor import Supervisor, isolation_available
from .lost import WorkerLost
from ..core.breadcrumbs import Tracer
from ..engine import torch_api

__all__ = ["LoadError", "apply_load_spec", "PROBE_TIMEOUT"]

#: Seconds the forked child that tries a library first may take to load it.
PROBE_TIMEOUT = 120.0


def _format(spec: str, what: str, exc: BaseException) -> LoadError:
    """The error for a spec whose ``what`` raised ``exc``: its message, then each ``__cause__`` (or unsuppressed
    ``__context__``) in turn, e.g. the dynamic loader's reason behind ``torch.ops.load_library``'s ``OSError``."""
    lines = ["".join(traceback.format_exception_only(type(exc), exc)).strip()]
    seen = {id(exc)}
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        text = "".join(traceback.format_exception_only(type(cause), cause)).strip()
        lines.append(f"caused by: {text}")
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    return LoadError(f"--torchbind-load={spec!r}: {what} failed:\n" + "\n".join(lines))


def _registrations() -> tuple[int, int]:
    """How many custom-class method schemas and operator schemas torch knows (both grow when a torch extension
    library registers something at load time)."""
    return len(torch_api.custom_class_schemas()), len(torch_api.all_schemas())


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
    """Apply one spec (see module docstring).

    Relative file paths are tried against the CWD (the invocation directory), then ``rootdir``. A module spec is
    imported from ``sys.path``; if its top-level package/module is not found there, it is looked for in the CWD,
    then ``rootdir`` (``name.py``, a package directory ``name/``, ...), and the first directory that has it is
    inserted at the front of ``sys.path`` (unless already there) before importing again.

    Raises :class:`LoadError` carrying the underlying exception text (and its cause chain) when the spec names a
    directory (not a package named as a module); the library file is missing, does not load, crashes the process
    that loads it (tried first in a forked child, see :func:`_probe_library`), or loads but registers no TorchBind
    class and no operator (not a torch extension); the Python file is
    missing or cannot be imported; the spec is no valid form; the module is found nowhere (the message names the
    directories searched) or cannot be imported (syntax error, raises on import); the function is missing, not
    callable or raises; or the module's code (its import or its function) calls ``os._exit()`` or loads a library
    (``torch.ops.load_library``) whose static initializers crash or exit the process (see :func:`_guarded`).
    """
    kind, target, func_name = parse_spec(spec)
    directory = _named_directory(kind, target, rootdir)
    if directory is not None:
        raise LoadError(f"--torchbind-load={spec!r}: {directory} is a directory; name the library file (.so) in it, "
                        "a .py file, or an importable module")
    path = existing_path(target, rootdir)
    if kind == "library":
        if path is None:
            raise LoadError(f"--torchbind-load={spec!r}: library file not found")
        already = _mapped(path)
        if not already:
            _probe_library(spec, path)
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
        module = _guarded(spec, f"importing {path}", lambda: _import_file(spec, path, rootdir))
        if func_name:
            _guarded(spec, f"calling {path}:{func_name}()", lambda: _call(spec, module, str(path), func_name))
        return
    module_name = target
    if not is_dotted_name(module_name) or (":" in spec and not func_name.isidentifier()):
        raise LoadError(f"--torchbind-load={spec!r}: expected a .so path, a .py path, path/to/file.py:function, "
                        "a module name or module:function")
    module = _guarded(spec, f"importing {module_name}", lambda: _import_module(spec, module_name, rootdir))
    if func_name:
        _guarded(spec, f"calling {module_name}.{func_name}()", lambda: _call(spec, module, module_name, func_name))


class _Exited(BaseException):
    """Raised in place of ``os._exit(status)`` while a load module's code runs (:func:`_guarded`); not an
    ``Exception``, so the module's own ``except Exception`` does not swallow it."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


def _guarded(spec: str, what: str, work):
    """``work()`` (importing a module or ``.py`` file of ``spec``, or calling its function), with the two ways its
    code could end pytest taken away, each a :class:`LoadError` naming the spec and ``what`` ran: ``os._exit()``
    (which would end pytest with that status and no output; it raises :class:`_Exited` while ``work`` runs), and a
    library loaded with ``torch.ops.load_library`` whose static initializers crash or exit -- each library not
    mapped yet is first tried in a child process, as one given to ``--torchbind-load`` is
    (:func:`_probe_library`)."""
    state: dict = {"exit": None, "refused": None}
    real_exit, own_load = os._exit, "load_library" in vars(torch.ops)
    real_load = torch.ops.load_library

    def exit_instead(status):
        if state["exit"] is None:
            state["exit"] = status
        raise _Exited(status)

    def load_library(path, *args, **kwargs):
        library = Path(os.fspath(path))
        if library.is_file() and not _mapped(library):
            os._exit = real_exit  # the child process it forks ends with the real one
            try:
                _probe_library(spec, library.resolve(), via=what)
            except LoadError as exc:
                state["refused"] = state["refused"] or exc
                raise
            finally:
                os._exit = exit_instead
        return real_load(path, *args, **kwargs)

    os._exit, torch.ops.load_library = exit_instead, load_library
    # A crash while the module's own code runs (a segfault, an abort, a fatal signal) cannot be turned into an error
    # without running the module twice: faulthandler at least prints the Python stack that names it, where the
    # process would otherwise end without a word (pytest's own faulthandler starts after configuration).
    dumping = faulthandler.is_enabled()
    if not dumping:
        with contextlib.suppress(Exception):  # no usable stderr (a captured or closed stream): nothing to print to
            faulthandler.enable(file=sys.__stderr__)
    try:
        with recording():  # the schema strings its ops are defined with (a class's type, which torch forgets)
            result = work()
    except (_Exited, LoadError):
        if state["refused"] is None and state["exit"] is None:
            raise
        result = None
    finally:
        if not dumping:
            faulthandler.disable()
        os._exit = real_exit
        if own_load:
            torch.ops.load_library = real_load
        else:
            del torch.ops.load_library
    if state["refused"] is not None:
        raise state["refused"] from None
    if state["exit"] is not None:
        silent = " with no output" if state["exit"] == 0 else ""
        raise LoadError(f"--torchbind-load={spec!r}: {what} called os._exit({state['exit']!r}), which would have "
                        f"ended pytest with status {state['exit']!r}{silent}: a module given to --torchbind-load must "
                        "report an error by raising an exception, not end the program")
    return result


def _import_module(spec: str, module_name: str, rootdir: Path | None):
    top = module_name.split(".")[0]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != top or top in sys.modules:
            raise _format(spec, f"importing {module_name}", exc) from exc
    except (Exception, SystemExit) as exc:
        raise _format(spec, f"importing {module_name}", exc) from exc
    directory = find_beside(top, rootdir)
    if directory is None:
        where = " or ".join(str(d) for d in search_dirs(rootdir))
        raise LoadError(f"--torchbind-load={spec!r}: no module named {top!r}: not on sys.path, and no {top}.py or "
                        f"package directory {top}/ in {where}")
    if not any(_same_dir(entry, directory) for entry in sys.path):
        sys.path.insert(0, str(directory))
    importlib.invalidate_caches()
    try:
        return importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:
        raise _format(spec, f"importing {module_name} (from {directory})", exc) from exc


def _same_dir(entry: str, directory: Path) -> bool:
    """Whether a ``sys.path`` entry is ``directory`` ("" is the CWD at import time, so it is never counted)."""
    if not entry or not isinstance(entry, str):
        return False
    try:
        return Path(entry).resolve() == directory
    except (OSError, RuntimeError):
        return False


def _call(spec: str, module, owner: str, func_name: str) -> None:
    func = getattr(module, func_name, None)
    if not callable(func):
        raise LoadError(f"--torchbind-load={spec!r}: {owner} has no function {func_name!r}")
    try:
        func()
    except (Exception, SystemExit) as exc:
        raise _format(spec, f"calling {owner}:{func_name}()" if owner.endswith(".py") else
                      f"calling {owner}.{func_name}()", exc) from exc


def _named_directory(kind: str, target: str, rootdir: Path | None) -> Path | None:
    """The directory ``target`` names (against the CWD, then ``rootdir``) when it is one and cannot mean a module:
    any directory for a library or ``.py`` spec; for a module spec, a directory without ``__init__.py`` (it would
    import as an empty namespace package) unless a regular module of that name is importable from ``sys.path``."""
    found = None
    for base in (Path.cwd(), rootdir):
        if base is not None and (Path(base) / target).is_dir():
            found = (Path(base) / target).resolve()
            break
    if found is None:
        return None
    if kind == "module" and is_dotted_name(target):
        if (found / "__init__.py").is_file():
            return None
        try:
            mod_spec = importlib.machinery.PathFinder.find_spec(target.split(".")[0])
        except Exception:  # an odd sys.path entry or finder: let the import report it
            return None
        if mod_spec is not None and mod_spec.origin not in (None, "namespace"):
            return None
    return found


def _probe_library(spec: str, path: Path, via: str | None = None) -> None:
    """Load the library once in a supervised worker process (Linux only) and raise
    :class:`LoadError` when the worker dies by a signal (its static initializers crashed), exits the process from
    an initializer, or does not finish within :data:`PROBE_TIMEOUT` seconds. A Python error in the worker says
    nothing (loading the library here reports it). ``via``: what of the spec loads it (``"importing mymod"``),
    for a library a load module loads."""
    if not isolation_available():
        return
    tracer = Tracer()

    def load(_key: str) -> bool:
        try:
            with tracer.calling(f"loading {path}"):
                type(torch.ops).load_library(torch.ops, str(path))  # torch's own, not a guard's (_guarded)
        except Exception:  # noqa: BLE001 - the real load in the pytest process reports it
            pass
        return True

    supervisor = Supervisor(load, timeout=PROBE_TIMEOUT, tracer=tracer, timeout_option="the load probe's limit",
                            item_limit=PROBE_TIMEOUT)  # the whole probe, not only the timed load, within the limit
    supervisor.register("load")
    try:
        lost = supervisor.run("load")
    finally:
        supervisor.close()
    if not isinstance(lost, WorkerLost):
        return
    tried = "Tried in a child process first, so that pytest could report it"
    spec = f"{spec!r}: {via}, which loads {path} with torch.ops.load_library" if via else repr(spec)
    if lost.kind == "hang":
        raise LoadError(f"--torchbind-load={spec}: loading {path} did not finish within {PROBE_TIMEOUT:g} s "
                        "(tried in a child process first): the library's static initializers (TORCH_LIBRARY blocks, "
                        "globals) hang")
    if lost.status is not None:
        raise LoadError(f"--torchbind-load={spec}: loading {path} exited the process with status {lost.status}; "
                        f"the library's static initializers (TORCH_LIBRARY blocks, globals) called exit(). {tried}")
    raise LoadError(f"--torchbind-load={spec}: loading {path} crashed the process: {lost.cause}; the library's "
                    f"static initializers (TORCH_LIBRARY blocks, globals) crashed. {tried}")


def _import_file(spec: str, path: Path, rootdir: Path | None):
    """Import ``path`` as a module of its own, named by :func:`~conformance.engine.loading.file_module_name` (its
    stem unless another module has that name), once per process, and return it. A module ``sys.modules`` already
    holds from the same file (imported by a ``conftest.py``, or by an earlier spec) is returned as it is."""
    name = file_module_name(path, rootdir)
    if name in sys.modules:
        return sys.modules[name]
    try:
        mod_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module
        mod_spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if not isinstance(exc, (Exception, SystemExit)):
            raise
        raise _format(spec, f"importing {path}", exc) from exc
    return module
