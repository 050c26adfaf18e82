"""``--torchbind-load`` specs without applying them: their forms (:func:`parse_spec`), where their files and
modules are found, the lines that apply them in a standalone reproducer (:func:`repro_lines`), and the class
selectors of the run applying them (:func:`selected_classes`, for a load module that builds only what the run
checks). Imports neither torch nor the process layer; applying a spec (loading a library after probing it in a
forked worker, importing a module, calling its function) is :mod:`conformance.process.loading`.

Accepted forms, applied in the order given:

* ``path/to/libfoo.so`` (any existing file ending in ``.so``, ``.dylib`` or ``.dll``): ``torch.ops.load_library``;
* ``path/to/fakes.py``: imported as a module from that file;
* ``path/to/fakes.py:function``: the file imported as above, then ``function()`` is called with no arguments;
* ``package.module``: imported with ``importlib.import_module``;
* ``package.module:function``: imported, then ``function()`` is called with no arguments.

Relative file paths are tried against the invocation directory (the CWD), then the rootdir. A module spec is
imported from ``sys.path`` first; when its top-level package/module is not on ``sys.path``, it is looked for
(``name.py``, a package directory ``name/``, or anything else Python imports as ``name``) in the invocation
directory, then the rootdir (:func:`find_beside`).

:func:`repro_lines` emits the same loading for a standalone reproducer script, with absolute paths (including a
``sys.path.insert`` for a module that lives in the invocation directory or the rootdir), so the script runs from
any directory.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import sys
from pathlib import Path

from ..core.results import ConformanceError

__all__ = ["LoadError", "LIB_SUFFIXES", "parse_spec", "repro_lines", "existing_path", "find_beside", "search_dirs",
           "is_dotted_name", "selected_classes", "selecting"]

#: The suffixes of a library spec (also ``name.so.1``).
LIB_SUFFIXES = (".so", ".dylib", ".dll")

_selection: list[tuple[str, ...] | None] = []  # the selectors of the run loading now, innermost last
_runs = 0  # pytest runs of the plugin that applied their load specs in this process


def selected_classes() -> tuple[str, ...] | None:
    """The class selectors (``--torchbind-class`` / ``torchbind_classes``: ``ns::Cls``, ``ns::*``) of the pytest run
    whose ``--torchbind-load`` specs are being applied now, for a load module that builds or loads only what the
    run checks (``sample_classes`` builds only the selected namespaces' C++ sources). ``None`` outside that
    loading, for any run after the first in this process, and for a run started while a test runs
    (``PYTEST_CURRENT_TEST`` is set: pytest's in-process or subprocess runs inside a test suite, whose later runs
    may select other classes from modules imported once): such a module should then load everything."""
    return _selection[-1] if _selection else None


@contextlib.contextmanager
def selecting(selectors):
    """While the plugin applies a run's load specs: :func:`selected_classes` returns ``selectors`` (a tuple) for
    the first run in this process that no test started, ``None`` for others."""
    global _runs
    _runs += 1
    _selection.append(tuple(selectors) if _runs == 1 and "PYTEST_CURRENT_TEST" not in os.environ else None)
    try:
        yield
    finally:
        _selection.pop()


class LoadError(ConformanceError):
    """A ``--torchbind-load`` spec failed; the message carries the spec and the underlying error."""


def parse_spec(spec: str) -> tuple[str, str, str]:
    """Split a spec into ``(kind, target, function)``: kind ``library`` (target: the path as given), ``file``
    (target: the ``.py`` path as given) or ``module`` (target: the dotted name); function is ``""`` when none.
    A ``.py`` path followed by ``:name`` is a file with a function (split at the last colon, so a colon earlier in
    the path, such as a Windows drive letter, stays in the path); anything else with a colon is ``module:function``."""
    if spec.endswith(LIB_SUFFIXES) or ".so." in os.path.basename(spec):
        return "library", spec, ""
    if spec.endswith(".py"):
        return "file", spec, ""
    head, sep, func = spec.rpartition(":")
    if sep and head.endswith(".py") and func.isidentifier():
        return "file", head, func
    module, _, func = spec.partition(":")
    return "module", module, func


def repro_lines(spec: str, rootdir: Path | None = None) -> list[str]:
    """Python lines that apply ``spec`` in a standalone reproducer script, runnable from any directory.

    Files (libraries, ``.py`` files, ``file.py:function``) are named by absolute path when they exist (relative
    paths tried against the CWD, then ``rootdir``). A module whose top-level package/module lives in the invocation
    directory (the CWD) or ``rootdir``, or is found there by the search :func:`find_beside` does, gets an
    ``import sys`` / ``sys.path.insert(0, '<absolute dir>')`` before its ``import`` line. Never raises for a bad
    spec: the lines then name the spec as given, and :func:`conformance.process.loading.apply_load_spec` reports the
    error.
    """
    kind, target, func = parse_spec(spec)
    path = existing_path(target, rootdir)
    where = str(path) if path is not None else target
    if kind == "library":
        return [f"torch.ops.load_library({where!r})"]
    if kind == "file":
        if func:
            return ["import runpy", f"runpy.run_path({where!r})[{func!r}]()"]
        return ["import runpy", f"runpy.run_path({where!r})"]
    lines = []
    if is_dotted_name(target):
        directory = _module_home(target.split(".")[0], rootdir)
        if directory is not None:
            lines += ["import sys", f"sys.path.insert(0, {str(directory)!r})"]
    return lines + [f"import {target}"] + ([f"{target}.{func}()"] if func else [])


def is_dotted_name(name: str) -> bool:
    """Whether ``name`` is a dotted module name (``pkg.mod``): identifiers separated by dots."""
    return all(part.isidentifier() for part in name.split("."))


def search_dirs(rootdir: Path | None) -> list[Path]:
    """Where a top-level module missing from ``sys.path`` is looked for: the invocation directory, then rootdir."""
    dirs: list[Path] = []
    for base in (Path.cwd(), rootdir):
        if base is not None and Path(base).resolve() not in dirs:
            dirs.append(Path(base).resolve())
    return dirs


def find_beside(top: str, rootdir: Path | None) -> Path | None:
    """The first search directory (see :func:`search_dirs`) from which ``top`` can be imported, or ``None``."""
    for directory in search_dirs(rootdir):
        if importlib.machinery.PathFinder.find_spec(top, [str(directory)]) is not None:
            return directory
    return None


def _module_home(top: str, rootdir: Path | None) -> Path | None:
    """The directory a reproducer must put on ``sys.path`` to import the top-level module ``top``: the search
    directory (the CWD or rootdir) it is, or would be, imported from; ``None`` when it comes from elsewhere
    (site-packages, the standard library, a ``PYTHONPATH`` entry) or is found nowhere."""
    module = sys.modules.get(top)
    mod_spec = getattr(module, "__spec__", None) if module is not None else None
    if module is None or mod_spec is None:
        try:
            mod_spec = importlib.machinery.PathFinder.find_spec(top)  # sys.path, "" meaning the CWD
        except Exception:  # an odd sys.path entry or finder: fall back to the search
            mod_spec = None
    if mod_spec is None:
        return find_beside(top, rootdir)
    if mod_spec.submodule_search_locations:  # a package: its directory's parent
        locations = [Path(loc).parent for loc in mod_spec.submodule_search_locations]
    elif mod_spec.origin and os.path.isabs(mod_spec.origin):
        locations = [Path(mod_spec.origin).parent]
    else:  # built-in or frozen
        return None
    searched = search_dirs(rootdir)
    for location in locations:
        if location.resolve() in searched:
            return location.resolve()
    for location in locations:
        if not _on_fresh_path(location.resolve()):
            return location.resolve()  # on sys.path only because this process put it there (a conftest, pytest)
    return None


def _on_fresh_path(directory: Path) -> bool:
    """Whether a fresh interpreter started with this environment finds modules in ``directory`` without help:
    it is under the installation's prefixes (the standard library, site-packages, a virtualenv's) or a
    ``PYTHONPATH`` entry."""
    roots = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    roots |= {Path(p).resolve() for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    return any(directory == root or root in directory.parents for root in roots)


def existing_path(spec: str, rootdir: Path | None) -> Path | None:
    """The file ``spec`` names, absolute: against the CWD, then ``rootdir``; ``None`` when neither has it."""
    for base in (Path.cwd(), rootdir):
        if base is None:
            continue
        p = (base / spec).resolve()
        if p.is_file():
            return p
    return None
