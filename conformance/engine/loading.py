"""``--torchbind-load`` specs without applying them: their forms (:func:`parse_spec`), where their files and
modules are found, the lines that apply them in a standalone reproducer (:func:`repro_lines`), and the class
selectors of the run applying them (:func:`selected_classes`, for a load module that builds only what the run
checks). Imports neither torch nor the process layer; applying a spec (loading a library after probing it in a
forked worker, importing a module, calling its function) is :mod:`conformance.process.loading`.

Accepted forms, applied in the order given:

* ``path/to/libfoo.so`` (any existing file ending in ``.so``, ``.dylib`` or ``.dll``): ``torch.ops.load_library``;
* ``path/to/fakes.py``: imported as a module from that file, named by :func:`file_module_name` (its stem,
  ``fakes``, unless another module has that name), so a Python custom class it registers is ``fakes.Cls``;
* ``path/to/fakes.py:function``: the file imported as above, then ``function()`` is called with no arguments;
* ``package.module``: imported with ``importlib.import_module``;
* ``package.module:function``: imported, then ``function()`` is called with no arguments.

Relative file paths are tried against the invocation directory (the CWD), then the rootdir. A module spec is
imported from ``sys.path`` first; when its top-level package/module is not on ``sys.path``, it is looked for
(``name.py``, a package directory ``name/``, or anything else Python imports as ``name``) in the invocation
directory, then the rootdir (:func:`find_beside`).

:func:`repro_lines` emits the same loading for a standalone reproducer script, with absolute paths (including a
``sys.path.insert`` for a module that lives in the invocation directory or the rootdir, and a ``.py`` file imported
by its path under the same module name), so the script runs from any directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import keyword
import os
import re
import sys
from pathlib import Path

from ..core.results import ConformanceError

__all__ = ["LoadError", "LIB_SUFFIXES", "parse_spec", "repro_lines", "load_lines", "existing_path", "find_beside", "search_dirs",
           "is_dotted_name", "selected_classes", "selecting", "file_module_name", "renamed_files",
           "FILE_MODULE_PREFIX"]

#: The suffixes of a library spec (also ``name.so.1``).
LIB_SUFFIXES = (".so", ".dylib", ".dll")

#: The start of the module name of a ``.py`` file whose stem cannot be its name (:func:`file_module_name`).
FILE_MODULE_PREFIX = "_torchbind_load_"

_file_modules: dict[Path, str] = {}  # each .py file named by a spec in this process -> its module name
_renamed: dict[Path, str] = {}  # each of those given a digest name -> why its stem could not be the name
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


def load_lines(specs: list[str], rootdir: Path | None = None) -> list[str]:
    """:func:`repro_lines` of each spec in order, with each ``import sys`` and each ``sys.path.insert`` of one
    directory kept once (the first): the top of every reproducer of a run."""
    out: list[str] = []
    for spec in specs:
        for line in repro_lines(spec, rootdir):
            if line in out and (line == "import sys" or line.startswith("sys.path.insert(0, ")):
                continue
            out.append(line)
    return out


def repro_lines(spec: str, rootdir: Path | None = None) -> list[str]:
    """Python lines that apply ``spec`` in a standalone reproducer script, runnable from any directory.

    Files (libraries, ``.py`` files, ``file.py:function``) are named by absolute path when they exist (relative
    paths tried against the CWD, then ``rootdir``). A ``.py`` file is imported from that path under the module name
    the plugin gives it (:func:`file_module_name`), once, with ``importlib.util.spec_from_file_location``, so the
    classes it registers have the names they have in the plugin's run; a module name that is such a file's (a
    class's ``__module__``) gets the same lines. A module whose top-level package/module lives in the invocation
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
        if path is None:
            return ["import runpy", f"runpy.run_path({where!r})" + (f"[{func!r}]()" if func else "")]
        return _file_lines(path, file_module_name(path, rootdir), func)
    loaded = _loaded_file(target)
    if loaded is not None:  # a module a .py spec imported by path (a class's module): imported the same way
        return _file_lines(loaded, target, func)
    lines = []
    if is_dotted_name(target):
        directory = _module_home(target.split(".")[0], rootdir)
        if directory is not None:
            lines += ["import sys", f"sys.path.insert(0, {str(directory)!r})"]
    return lines + [f"import {target}"] + ([f"{target}.{func}()"] if func else [])


def file_module_name(path: Path, rootdir: Path | None = None) -> str:
    """The module name the ``.py`` file ``path`` is imported under (``--torchbind-load=path/to/fakes.py``): the
    same in every run of the same command, so the classes the file registers (``fakes.Cls``) and the test ids
    naming them are too.

    The file's stem (``fakes``) when it is an identifier, not a keyword, and no other module has or would get that
    name: no different module of that name in ``sys.modules``, none importable from ``sys.path`` (the standard
    library's ``json``, an installed package) or from the invocation directory or ``rootdir`` (where a module spec
    is looked for, :func:`find_beside`), and no other file given that name earlier in this process. Otherwise
    ``_torchbind_load_<stem>_<12 hex digits of the SHA-256 of the resolved path>`` (characters of the stem that
    cannot be in a name become ``_``), and :func:`renamed_files` says why. A file keeps its name for the life of
    the process. Raises nothing."""
    path = Path(path).resolve()
    name = _file_modules.get(path)
    if name is not None and _module_is(sys.modules.get(name), path) is not False:
        return name
    stem = path.stem
    taken = _stem_taken(stem, path, rootdir)
    if taken is not None:
        digest = hashlib.sha256(os.fsencode(str(path))).hexdigest()[:12]
        stem = FILE_MODULE_PREFIX + re.sub(r"\W", "_", stem) + f"_{digest}"
        _renamed[path] = taken
    else:
        _renamed.pop(path, None)
    _file_modules[path] = stem
    return stem


def renamed_files() -> dict[Path, tuple[str, str]]:
    """The ``.py`` files given a digest name by :func:`file_module_name` in this process: resolved path ->
    ``(module name, why its stem could not be the name)``, in the order they were named. Raises nothing."""
    return {p: (_file_modules[p], why) for p, why in _renamed.items() if p in _file_modules}


def _stem_taken(stem: str, path: Path, rootdir: Path | None) -> str | None:
    """Why ``path`` cannot be imported as the module ``stem`` without taking the place of another module, or
    ``None`` when it can (see :func:`file_module_name`)."""
    if not stem.isidentifier() or keyword.iskeyword(stem):
        return f"{stem!r} is not a Python module name"
    for other, name in _file_modules.items():
        if name == stem and other != path:
            return f"{other} was imported as {stem!r} first"
    present = sys.modules.get(stem)
    same = _module_is(present, path)
    if same is not None:
        return None if same else f"the module {stem!r} is already imported (from " \
            f"{getattr(present, '__file__', None) or 'no file'})"
    try:
        found = [importlib.util.find_spec(stem)]
        found += [importlib.machinery.PathFinder.find_spec(stem, [str(d)]) for d in search_dirs(rootdir)]
    except Exception as exc:  # an odd finder or sys.path entry: do not guess, take the name no module can have
        return f"whether {stem!r} names another module could not be found out ({type(exc).__name__})"
    for spec in found:
        if spec is not None and not _same_file(spec.origin, path):
            return f"{stem!r} would import {spec.origin or 'another module'}"
    return None


def _module_is(module, path: Path) -> bool | None:
    """Whether ``module`` was imported from the file ``path``; ``None`` for no module."""
    if module is None:
        return None
    return _same_file(getattr(module, "__file__", None), path)


def _same_file(origin, path: Path) -> bool:
    if not isinstance(origin, str) or not os.path.isabs(origin):
        return False  # built-in, frozen, a namespace package
    try:
        return Path(origin).resolve() == path
    except (OSError, RuntimeError):
        return False


def _loaded_file(name: str) -> Path | None:
    """The ``.py`` file a spec imported by its path as the module ``name`` (:func:`file_module_name`), when
    ``sys.modules`` holds it; ``None`` otherwise."""
    for path, given in _file_modules.items():
        if given == name and _module_is(sys.modules.get(name), path):
            return path
    return None


def _file_lines(path: Path, name: str, func: str) -> list[str]:
    """Reproducer lines importing the file ``path`` as the module ``name`` (once, as the plugin does), then
    calling its function ``func`` (none when ``""``)."""
    module = f"sys.modules[{name!r}]"
    lines = ["import importlib.util", "import sys",
             f"if {name!r} not in sys.modules:",
             f"    {module} = importlib.util.module_from_spec(importlib.util.spec_from_file_location({name!r}, "
             f"{str(path)!r}))",
             f"    {module}.__spec__.loader.exec_module({module})"]
    return lines + ([f"{module}.{func}()"] if func else [])


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
