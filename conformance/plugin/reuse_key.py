"""The parts of a reuse key (:mod:`conformance.plugin.reuse`) that fail closed: what is *not* in the key is listed here, as
data with its reason, and everything else of its kind is in.

* the plugin's options and ini values (:func:`options_part`): every ``--torchbind-*`` option and ``torchbind_*`` ini
  key except those in :data:`OPTIONS_NOT_IN_KEY` (the report's path, the reuse switch itself, which items run);
  an option added to the plugin later is in the key without anyone remembering to add it;
* the environment variables torch reads for compiling (:func:`environment_part`): every variable whose name starts
  with one of :data:`ENV_PREFIXES` except those in :data:`ENV_NOT_IN_KEY` (where caches and logs go);
* hypothesis (:func:`hypothesis_part`): its version, the profile loaded, ``--hypothesis-seed``, and every setting of
  the profile and of the differential test's settings except those in :data:`HYPOTHESIS_NOT_IN_KEY`;
* the user's Python files (:func:`module_files`): the whole source file of every module that defines a class's
  fake, custom class, op kernel, example factory or strategy, and of the project's own modules those import, found
  by reading their ``import`` statements — so an edit to a helper that ``__eq__`` calls, to a module-level list a
  factory reads, or to a module a fake imports, changes the key. Installed packages (``site-packages``), the
  standard library, torch and this plugin are not walked: their versions and the plugin's own sources stand for
  them.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["OPTIONS_NOT_IN_KEY", "ENV_PREFIXES", "ENV_NOT_IN_KEY", "HYPOTHESIS_NOT_IN_KEY", "options_part",
           "environment_part", "hypothesis_part", "module_files", "unwrapped", "standard_dirs"]

#: The plugin's options (``config.option`` names) and ini keys left out of the key, each with why it cannot change
#: an item's verdict. Every other ``torchbind_*`` option and ini key is in the key.
OPTIONS_NOT_IN_KEY: dict[str, str] = {
    "torchbind_report": "where the coverage-matrix report is written",
    "torchbind_reuse": "the reuse switch itself: a run with it off refreshes the entries a run with it on reads",
    "torchbind_class": "which classes run: the item's class is in its key",
    "torchbind_classes": "which classes run (ini): the item's class is in its key",
    "torchbind_checks": "which checks run: the item's check is in its key",
    "torchbind_backends": "which matrix backends run: the item's cell (row and backend) is in its key",
    "torchbind_baseline": "which baseline file: the item's own entry (reason, torch releases) is in its key",
    "torchbind_accept": "rewrites the baseline file after the run; no item runs differently",
}

#: Environment variables torch reads for compilation: names starting with these are in the key.
ENV_PREFIXES = ("TORCHDYNAMO_", "TORCHINDUCTOR_", "TORCH_COMPILE_")

#: Variables with those prefixes left out of the key, each with why it cannot change a result.
ENV_NOT_IN_KEY: dict[str, str] = {
    "TORCHINDUCTOR_CACHE_DIR": "where inductor keeps compiled artefacts; a cached program is the program compiled "
                               "from the same graph (CI keeps this directory between runs)",
    "TORCH_COMPILE_DEBUG_DIR": "where torch.compile's debug output (TORCH_COMPILE_DEBUG) is written",
    "TORCHINDUCTOR_WORKER_LOGPATH": "where inductor's compile workers write their log",
    "TORCHINDUCTOR_PROFILE_OUTPUT": "where inductor's kernel profile is written",
}

#: hypothesis settings left out of the key (names of ``hypothesis.settings`` attributes), each with its reason.
HYPOTHESIS_NOT_IN_KEY: dict[str, str] = {
    "verbosity": "how much hypothesis prints",
    "print_blob": "whether a failure prints a reproduction blob",
}


def options_part(config: Any) -> list[Any]:
    """The plugin's options and ini values of the pytest ``config`` (its ``option`` namespace and
    :func:`conformance.plugin.options.INI_KEYS` through ``getini``), all but :data:`OPTIONS_NOT_IN_KEY`, as given (the
    command line's value and the ini's value each: where a value comes from changes the key, never a verdict).
    ``None`` (a key computed outside pytest) gives a part no pytest run gives."""
    if config is None:
        return ["<no pytest config>"]
    from .options import INI_KEYS

    given = sorted((name, repr(value)) for name, value in vars(config.option).items()
                   if name.startswith("torchbind_") and name not in OPTIONS_NOT_IN_KEY)
    ini = [(name, repr(config.getini(name))) for name in INI_KEYS if name not in OPTIONS_NOT_IN_KEY]
    return ["options", *given, "ini", *ini]


def environment_part(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The variables of ``environ`` (default ``os.environ``) with a name in :data:`ENV_PREFIXES` and not in
    :data:`ENV_NOT_IN_KEY`, sorted: ``TORCHDYNAMO_DISABLE=1`` runs every compiled program eagerly."""
    environ = os.environ if environ is None else environ
    return sorted((name, value) for name, value in environ.items()
                  if name.startswith(ENV_PREFIXES) and name not in ENV_NOT_IN_KEY)


def _settings_values(settings: Any) -> list[tuple[str, str]]:
    from hypothesis import _settings

    names = getattr(_settings, "all_settings", None)
    if names is None:  # another hypothesis: the whole repr (every setting), which fails closed
        return [("repr", repr(settings))]
    return [(name, repr(getattr(settings, name))) for name in sorted(names) if name not in HYPOTHESIS_NOT_IN_KEY]


def hypothesis_part(examples: int | None) -> list[Any]:
    """hypothesis's version, the name of the profile loaded (``--hypothesis-profile``), the seed
    (``--hypothesis-seed``, ``hypothesis.core.global_force_seed``), and the settings of that profile and of the
    differential test run with ``examples`` (:func:`conformance.engine.search.hypothesis_settings`, which
    also reads ``CI``), every setting but :data:`HYPOTHESIS_NOT_IN_KEY`."""
    import hypothesis
    import hypothesis.core

    from ..engine.search import hypothesis_settings

    return [hypothesis.__version__, hypothesis.settings.get_current_profile_name(),
            repr(hypothesis.core.global_force_seed), _settings_values(hypothesis.settings.default),
            _settings_values(hypothesis_settings(examples))]


# ----- the user's source files ----------------------------------------------------------------------------------

def unwrapped(obj: Any) -> Any:
    """The function a callable stands for: through closures that hold it in a free variable named ``func``/``fn``
    (torch's registration wrappers), then ``inspect.unwrap`` (``functools.wraps``)."""
    seen = 0
    while seen < 5 and callable(obj) and getattr(obj, "__closure__", None):
        inner = dict(zip(obj.__code__.co_freevars, (c.cell_contents for c in obj.__closure__)))
        wrapped = inner.get("func") or inner.get("fn")
        if not callable(wrapped):
            break
        obj, seen = wrapped, seen + 1
    return inspect.unwrap(obj) if callable(obj) else obj


def standard_dirs() -> list[Path]:
    """The standard library's directories (``lib-dynload`` included) of the Python this runs on, resolved; in a
    virtualenv, those of the Python it was made from (``sysconfig``'s paths with the base prefixes: the
    virtualenv's own ``platstdlib`` is the directory above its ``site-packages``)."""
    import sysconfig

    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix, "installed_base": sys.base_prefix,
            "installed_platbase": sys.base_exec_prefix}
    paths = sysconfig.get_paths(vars=base)
    return sorted({Path(paths[name]).resolve() for name in ("stdlib", "platstdlib") if paths.get(name)})


def _installed(path: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in path.parts)


def _covered_dirs() -> tuple[list[Path], list[Path]]:
    """torch's and this plugin's directories (their versions and the plugin's sources are in the key), and the
    standard library's (Python's version is)."""
    import torch

    import conformance

    # this module's package (conformance/plugin/..), and the one the run part hashes the sources of
    own = {Path(__file__).resolve().parents[1], Path(conformance.__file__).resolve().parent}
    return [Path(torch.__file__).resolve().parent, *sorted(own)], standard_dirs()


def _covered(path: Path, dirs: tuple[list[Path], list[Path]]) -> bool:
    """Whether ``path`` (resolved) belongs to what the key covers otherwise (:func:`_covered_dirs`); a package
    installed under the standard library (a Python outside a virtualenv keeps ``site-packages`` there) does not."""
    own, standard = dirs
    return any(path.is_relative_to(d) for d in own) or (not _installed(path) and any(
        path.is_relative_to(d) for d in standard))


def _module_of(obj: Any) -> tuple[str, Path] | None:
    """The name and source file of the module that defines ``obj`` (a function or class), if it has one."""
    name = getattr(obj, "__module__", None)
    try:
        file = inspect.getsourcefile(obj)
    except TypeError:
        file = None
    if not file:
        module = sys.modules.get(name or "")
        file = getattr(module, "__file__", None)
    if not file or not str(file).endswith(".py"):
        return None
    return (name or str(file)), Path(file).resolve()


def _find_spec(name: str) -> Any:
    """The spec of module ``name`` without running any module's code: importlib's own finders, through the search
    path of its parent package's spec when the parent is not imported (``find_spec`` would import it)."""
    parent = name.rpartition(".")[0]
    if not parent or parent in sys.modules:
        return importlib.util.find_spec(name)
    spec = _find_spec(parent)
    if spec is None or not spec.submodule_search_locations:
        return None
    return importlib.machinery.PathFinder.find_spec(name, list(spec.submodule_search_locations))


def _locate(name: str) -> tuple[Path, str] | None:
    """The source file of module ``name`` and the package its relative imports resolve in, or ``None``."""
    module = sys.modules.get(name)
    if module is not None:
        file, package = getattr(module, "__file__", None), getattr(module, "__package__", None)
        is_package = hasattr(module, "__path__")
    else:
        try:
            spec = _find_spec(name)
        except (ImportError, ValueError, AttributeError):
            return None
        if spec is None:
            return None
        file, package, is_package = spec.origin, None, spec.submodule_search_locations is not None
    if not file or not str(file).endswith(".py"):
        return None
    return Path(file).resolve(), package or (name if is_package else name.rpartition(".")[0])


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _imported_names(source: bytes, package: str) -> set[str]:
    """Every module an ``import`` statement of ``source`` (anywhere: at the top, in a function) may load, with its
    parent packages (importing ``a.b`` runs ``a/__init__.py``); ``from m import x`` names ``m.x`` too (``x`` may
    be a submodule). Relative imports resolve in ``package``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.update(_prefixes(alias.name))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                try:
                    base = importlib.util.resolve_name("." * node.level + base, package)
                except (ImportError, ValueError):
                    continue
            if base:
                names.update(_prefixes(base))
                names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def module_files(objects: Iterable[Any], memo: dict | None = None) -> list[tuple[str, str]]:
    """``(module, SHA-256 of its file)`` for the modules that define ``objects`` (functions, classes; a class
    counts with its bases and the functions in its namespace) and for the project's own modules they import,
    directly or through each other, sorted. A defining module counts wherever it is installed; an imported one only
    outside ``site-packages``/``dist-packages`` (a package installed there is pinned by its version), and never
    torch's, this plugin's or the standard library's. ``memo``: a dict kept between calls of one run (a file is
    read and parsed once). Unreadable files count as such (the key changes when they become readable)."""
    memo = {} if memo is None else memo
    if "<dirs>" not in memo:
        memo["<dirs>"] = _covered_dirs()
    dirs = memo["<dirs>"]
    roots: dict[Path, str] = {}
    for obj in objects:
        for item in _defining(obj):
            found = _module_of(item)
            if found is not None and not _covered(found[1], dirs):
                name, path = found
                roots.setdefault(path, name)
                for prefix in _prefixes(name)[:-1]:  # its packages' __init__ ran when it was imported
                    located = _locate(prefix)
                    if located is not None and not _installed(located[0]) and not _covered(located[0], dirs):
                        roots.setdefault(located[0], prefix)
    todo = list(roots.items())
    files: dict[Path, str] = {}
    while todo:
        path, name = todo.pop()
        if path in files:
            continue
        files[path] = name
        digest, imports = _read(path, name, memo)
        for imported in sorted(imports):
            located = _locate(imported)
            if located is not None and located[0] not in files and not _installed(located[0]) \
                    and not _covered(located[0], dirs):
                todo.append((located[0], imported))
    return sorted((name, _read(path, name, memo)[0]) for path, name in files.items())


def _read(path: Path, name: str, memo: dict) -> tuple[str, set[str]]:
    """The digest of the file at ``path`` and the modules it imports (package from module ``name``), memoised."""
    if path not in memo:
        try:
            data = path.read_bytes()
        except OSError as exc:
            memo[path] = (f"unreadable: {type(exc).__name__}", set())
        else:
            module = sys.modules.get(name)
            package = getattr(module, "__package__", None) if module is not None else None
            if package is None:
                package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            memo[path] = (hashlib.sha256(data).hexdigest(), _imported_names(data, package))
    return memo[path]


def _defining(obj: Any) -> list[Any]:
    """What defines ``obj``: a class with its bases (outside builtins) and the functions in each namespace (a
    class built with ``type()`` has methods from elsewhere); a function unwrapped (:func:`unwrapped`)."""
    if isinstance(obj, type):
        out: list[Any] = []
        for klass in obj.__mro__:
            if klass.__module__ == "builtins":
                continue
            out.append(klass)
            for value in vars(klass).values():
                func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                func = func.fget if isinstance(func, property) else func
                if inspect.isfunction(func):
                    out.append(unwrapped(func))
        return out
    if isinstance(obj, functools.partial):
        return _defining(obj.func)
    obj = unwrapped(obj)
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return [getattr(obj, "__func__", obj)]
    return _defining(type(obj)) if callable(obj) else []  # a callable object: its class
