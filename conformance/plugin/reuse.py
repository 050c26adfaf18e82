"""Reuse of settled verdicts (``--torchbind-reuse=on``): an item that passed (or was skipped, or failed the way the
baseline expects) is not run again while nothing it depends on has changed; its verdict is read back from pytest's
cache (``config.cache``, under ``torchbind/reuse/``), so CI keeps it between runs with its usual
``.pytest_cache`` step.

An item's **key** is a SHA-256 over everything its verdict depends on that the plugin can see. It fails closed:
what is left out is listed, with its reason, as data in :mod:`conformance.plugin.reuse_key`, and everything else of its
kind is in.

* the run: torch's, pytest's and the plugin's versions and the bytes of the plugin's own sources (every check,
  backend and program generator), the bytes of every library torch loaded (``torch.ops.loaded_libraries``) and the
  path, size and modification time of every Python extension module imported, the load specs, every option and
  ini value of the plugin but those that only say where reports go or which items run
  (:data:`~conformance.plugin.reuse_key.OPTIONS_NOT_IN_KEY`), the environment variables torch reads for compiling
  (``TORCHDYNAMO_*``, ``TORCHINDUCTOR_*``, ``TORCH_COMPILE_*`` but cache and log locations), and hypothesis: its
  version, profile, settings and ``--hypothesis-seed``;
* the class: a TorchBind class's schemas (methods, constructors, static methods, the ops taking it), the source of
  its fake class and of those ops' fakes and Python kernels, and the parts of the classes its schemas name; a
  Python custom class's source (its classes up to torch's bases), its registration (kind, ``hoist``, members,
  ``guard_fn``'s source) and its ops' kernels and fakes; for both, the adopter's ``@conformance.examples``
  factories and ``conformance.strategy`` overrides for the class, and the whole source files of the modules that
  define any of these and of the project's own modules they import (:func:`~conformance.plugin.reuse_key.module_files`);
* the item: its check and target (a coverage-matrix cell: its row and backend; its program is generated from the
  class and the plugin's sources above).

What it cannot see is in the docs (docs/how-to/reuse.md): other environment variables, files a fake or a factory
reads, the machine.

An entry read back is used only when it has exactly the shape this module writes (:func:`entry_ok`); a damaged
one is a miss and the item runs.

What is kept (:func:`settled`) is a verdict the same key gives again and that leaves the gate green: a pass, a
skip (an unsupported matrix cell, a known torch limitation from the plugin's own table; a check that cannot run
for the target), and a known failure of the baseline (a strict xfail: the entry's reason is part of its key, so
an edited or removed entry runs the item). A failure the baseline does not list is never kept: it runs again
every time, so a red gate always shows a fresh result, and nothing that failed is ever reported as passed. An
item whose process crashed or hung is not kept either. Imports torch lazily (only when keys are computed).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import inspect
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..core.qualname import item_of_id
from ..core.results import REUSED, Cell, Failure, Status, Verdict
from .reuse_key import environment_part, hypothesis_part, module_files, options_part, standard_dirs, unwrapped

__all__ = ["ReuseStore", "KeyMaker", "CACHE_PREFIX", "REUSED", "reused_note", "settled", "source_of",
           "class_sources"]

#: The prefix of the plugin's entries in pytest's cache (``.pytest_cache/v/torchbind/reuse/...``).
CACHE_PREFIX = "torchbind/reuse"
#: Bumped when the key's recipe changes, so entries written by another recipe never match.
KEY_RECIPE = 3


def _hash(parts: Iterable[Any]) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else repr(part).encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _file_bytes(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        return f"unreadable {path}: {type(exc).__name__}".encode()


def source_of(obj: Any) -> str:
    """The source of a function or class (``inspect.getsource``); for a closure that wraps a function in a free
    variable named ``func``/``fn`` (torch's registration wrappers), the wrapped function's
    (:func:`~conformance.plugin.reuse_key.unwrapped`). Without source (a builtin, a C extension): its module and
    qualified name, so a change of name still shows."""
    obj = unwrapped(obj)
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return f"<no source: {getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(type(obj)))}>"


def class_sources(cls: type) -> list[Any]:
    """The sources of ``cls`` and its bases outside torch and the standard library (a subclass inherits what its
    bases define), each with the sources of the functions in its namespace: a class built with ``type()`` (a fake
    copied with one method swapped) has no source of its own, but its methods do."""
    out: list[Any] = []
    for klass in cls.__mro__:
        module = klass.__module__ or ""
        if module == "builtins" or module.split(".")[0] in ("torch", "enum", "abc", "typing"):
            continue
        out.append(source_of(klass))
        for name, value in vars(klass).items():
            func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            func = func.fget if isinstance(func, property) else func
            if inspect.isfunction(func):
                out.append((name, source_of(func)))
    return out


def _op_sources(qualname: str) -> list[Any]:
    """The sources of what an op runs: for a ``torch.library.custom_op``, its Python kernel, its fake
    (``register_fake``) and its per-device kernels (``register_kernel``), read from the op's definition (torch's
    registered fake is a wrapper around it); for any op, the fake kernel registered with
    ``torch.library.register_fake`` under its full name (``ns::op`` or ``ns::op.overload``)."""
    from ..engine.torch_api import OPDEFS, simple_registry

    out: list[Any] = []
    opdef = OPDEFS.get(qualname)
    if opdef is not None:
        out.append(source_of(opdef._init_fn))
        out.append(source_of(opdef._abstract_fn) if opdef._abstract_fn is not None else "<no fake>")
        out += sorted((str(device), source_of(fn)) for device, fn in getattr(opdef, "_backend_fns", {}).items())
    entry = simple_registry.singleton.find(qualname)
    kernel = getattr(getattr(entry, "fake_impl", None), "kernel", None)
    out.append("<no registered fake kernel>" if kernel is None else source_of(kernel.func))
    return out


def _op_callables(qualnames: Iterable[str]) -> list[Any]:
    """The Python functions of the ops ``qualnames`` (:func:`_op_sources`' kernels and fakes), for their modules."""
    from ..engine.torch_api import OPDEFS, simple_registry

    out: list[Any] = []
    for qualname in qualnames:
        opdef = OPDEFS.get(qualname)
        if opdef is not None:
            out += [opdef._init_fn, *([opdef._abstract_fn] if opdef._abstract_fn is not None else []),
                    *getattr(opdef, "_backend_fns", {}).values()]
        kernel = getattr(getattr(simple_registry.singleton.find(qualname), "fake_impl", None), "kernel", None)
        out += [kernel.func] if kernel is not None else []
    return out


def _standard_dirs() -> list[Path]:
    """The standard library's directories (:func:`conformance.plugin.reuse_key.standard_dirs`)."""
    return standard_dirs()


def _left_out(path: Path, standard: list[Path], torch_dir: Path) -> bool:
    """Whether the extension module at ``path`` (resolved) stays out of the key: one of torch's own, or one of the
    standard library's (under ``standard``, :func:`_standard_dirs`), never an installed package's (a
    ``site-packages`` or ``dist-packages`` directory, which a Python outside a virtualenv keeps under its
    standard library)."""
    if path.is_relative_to(torch_dir):
        return True
    installed = any(part in ("site-packages", "dist-packages") for part in path.parts)
    return not installed and any(path.is_relative_to(d) for d in standard)


def _extension_modules() -> list[tuple[str, int, int]]:
    """Python extension modules imported in this process (a C++ library loaded by importing ``pkg._C`` is not in
    ``torch.ops.loaded_libraries``): path, size and modification time each (reading every extension's bytes would
    cost more than the items a rerun saves). The standard library's and torch's own are left out
    (:func:`_left_out`): the Python and torch versions stand for them, and which of them a process happens to
    have imported (a profiler's ``_lsprof``, a module torch imports lazily) says nothing about the class; an
    installed package's (``pip install .`` of the library under test) is always in."""
    import torch

    standard, torch_dir = _standard_dirs(), Path(torch.__file__).resolve().parent
    out = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        if path.endswith((".so", ".pyd")) and not _left_out(Path(path).resolve(), standard, torch_dir):
            try:
                st = Path(path).stat()
            except OSError:
                continue
            out.append((path, st.st_size, st.st_mtime_ns))
    return sorted(set(out))


_CLASS_NAME = re.compile(r"__torch__\.torch\.classes\.(\w+)\.(\w+)")


class KeyMaker:
    """Computes item keys for one run: ``context(qualname)`` gives a class context
    (:meth:`conformance.runner.Engine.context`), ``registry`` the adopter's factories and strategies
    (:class:`~conformance.core.registry.Registry`), ``settings`` the run's :class:`~conformance.core.settings.Settings`,
    ``config`` the run's pytest config, whose plugin options and ini values are in the key
    (:func:`~conformance.plugin.reuse_key.options_part`; ``None``: a key no pytest run gives; :class:`ReuseStore` fills it
    in from pytest's cache when it is not given).
    The run's part and each class's part are computed once; :meth:`snapshot` fixes which extension modules count
    (call it once the run has loaded its libraries and fakes)."""

    def __init__(self, context: Callable[[str], Any], registry: Any, settings: Any, options: Iterable[Any] = (),
                 config: Any = None):
        self._context, self._registry, self._settings = context, registry, settings
        self._options = tuple(options)  # further run options that change a verdict (the call timeout)
        self.config = config
        self._files: dict = {}  # source files read for module_files, once per run
        self._run: str | None = None
        self._classes: dict[str, str] = {}
        self._own: dict[str, tuple[str, list[str]]] = {}  # qualname -> (its own part, the classes it names)
        self._extensions: list[tuple[str, int, int]] | None = None

    def snapshot(self) -> None:
        """Take the Python extension modules imported by now (:func:`_extension_modules`) as the run's: the
        plugin calls it when the run has loaded its ``--torchbind-load`` specs, so an extension a test of the
        user's imports later in the same run (``scipy``, say) changes no key, whatever the order items run in.
        Without a snapshot, the first key takes one."""
        self._extensions = _extension_modules()

    def run_part(self) -> str:
        if self._run is None:
            import pytest
            import torch

            s = self._settings
            searches = hypothesis_part(s.examples)  # imports what it reads before a snapshot is taken
            if self._extensions is None:
                self.snapshot()

            import conformance

            package = Path(conformance.__file__).parent
            sources = sorted(package.rglob("*.py"))
            libraries = sorted(getattr(torch.ops, "loaded_libraries", ()))
            self._run = _hash([KEY_RECIPE, torch.__version__, conformance.__version__, sys.version_info[:2],
                               pytest.__version__,
                               *[(str(p.relative_to(package)), _file_bytes(p)) for p in sources],
                               *[(lib, _file_bytes(lib)) for lib in libraries], *self._extensions,
                               s.load_code, s.examples, s.device, s.check_reproducers, self._options,
                               options_part(self.config), environment_part(), searches])
        return self._run

    def class_part(self, qualname: str) -> str:
        """The part of the key of the class ``qualname``: its own parts (:meth:`_own_part`) and those of every
        class its schemas name, directly or through another class (their examples and fakes are this class's
        arguments while tracing), in one sorted list, so two classes naming each other each get the same part
        whichever is asked first. Raises ``KeyError`` for a class torch does not know; a named one it does not
        know counts by its name."""
        if qualname not in self._classes:
            closure: dict[str, str] = {}
            todo = [qualname]
            while todo:
                name = todo.pop()
                if name in closure:
                    continue
                try:
                    closure[name], named = self._own_part(name)
                except KeyError:
                    if name == qualname:
                        raise
                    closure[name], named = "<unknown class>", []
                todo += named
            self._classes[qualname] = _hash([qualname, *sorted(closure.items())])
        return self._classes[qualname]

    def _own_part(self, qualname: str) -> tuple[str, list[str]]:
        """The hash of what the class ``qualname`` itself is made of (schemas, fake class, ops and their fakes and
        kernels, registration, examples, strategies) and the TorchBind classes its schemas name."""
        if qualname not in self._own:
            ctx = self._context(qualname)
            parts: list[Any] = [qualname, ctx.kind]
            info = ctx.info
            named: list[str] = []
            defined: list[Any] = []  # what the user's modules define: their whole files are in the key
            if ctx.kind == "torchbind":
                schemas = [*(str(s) for s in info.methods.values()), *(str(s) for s in info.constructors),
                           *(str(s) for s in info.static_methods.values()), *(str(op.schema) for op in info.ops)]
                parts += sorted((name, str(schema)) for name, schema in info.methods.items())
                parts += [str(s) for s in info.constructors]
                parts += sorted((name, str(schema)) for name, schema in info.static_methods.items())
                parts += [(op.qualname, str(op.schema), *_op_sources(op.qualname)) for op in info.ops]
                parts += class_sources(info.fake_class) if info.fake_class is not None else ["<no fake class>"]
                defined += [info.fake_class] if info.fake_class is not None else []
                named = sorted({f"{ns}::{name}" for text in schemas for ns, name in _CLASS_NAME.findall(text)}
                               - {qualname})
            else:
                parts += class_sources(info.cls)
                defined += [info.cls, *([info.guard_fn] if info.guard_fn is not None else [])]
                parts += [info.kind, info.hoist, sorted(info.members.items()),
                          source_of(info.guard_fn) if info.guard_fn is not None else None]
                parts += [(op.qualname, str(op.schema), *_op_sources(op.qualname)) for op in info.ops]
            parts += [source_of(f) for f in self._registry.factories(qualname)]
            # A strategy given as such (not a factory): its repr names what it draws.
            parts += sorted((repr(k), source_of(f) if callable(f) else repr(f))
                            for k, f in self._registry.strategies(qualname).items())
            parts += sorted(self._registry.observers(qualname).items())  # conformance.strategy(..., observer=)
            defined += [*_op_callables(op.qualname for op in info.ops), *self._registry.factories(qualname),
                        *self._registry.strategies(qualname).values()]
            parts += module_files(defined, self._files)
            self._own[qualname] = (_hash(parts), named)
        return self._own[qualname]

    def key(self, qualname: str, check: str, item_name: str, expected: str | None = None) -> str:
        """The key of the item ``item_name`` (``check[target]``) of check ``check`` on the class ``qualname``;
        ``expected``: the reason of the baseline's xfail on the item, ``None`` when the baseline does not list
        it."""
        return _hash([self.run_part(), self.class_part(qualname), check, item_name, expected])


def reused_note(date: str, key: str) -> str:
    """The line a reused item reports (``-rA``, JSON, HTML): when its verdict was recorded, and the key's prefix."""
    return f"{REUSED}{date}, key {key[:12]}"


def settled(verdict: Verdict, expected_to_fail: bool) -> bool:
    """Whether ``verdict`` is kept for reuse: a pass, a skip (an unsupported cell, a target the check cannot run
    for), or a failure the baseline lists (``expected_to_fail``: the item is a strict xfail) — never a failure
    the baseline does not list, and never a verdict without a result of the check's own
    (:attr:`~conformance.core.results.Verdict.lost`)."""
    if verdict.lost:
        return False
    if verdict.status is Status.FAILED:
        return expected_to_fail
    return verdict.status in (Status.PASSED, Status.SKIPPED)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_optional_text(value: Any) -> bool:
    return value is None or isinstance(value, str)


#: The fields of a kept entry, each with the test its value must pass. An entry with any other field, a missing
#: one, or a value of another shape is a miss.
ENTRY_FIELDS: dict[str, Callable[[Any], bool]] = {
    "nodeid": _is_text, "key": _is_text, "date": _is_text, "verdict": lambda v: isinstance(v, dict)}
#: The fields of a kept verdict (:meth:`~conformance.core.results.Verdict.to_json`), each with its test: every
#: one is required, and a lost verdict is never kept.
VERDICT_FIELDS: dict[str, Callable[[Any], bool]] = {
    "item": _is_text, "check": _is_text, "target": _is_optional_text,
    "status": lambda v: v in {s.value for s in (Status.PASSED, Status.SKIPPED, Status.FAILED)},
    "summary": _is_text, "baseline": lambda v: v is False, "notes": _is_str_list,
    "evidence": lambda v: isinstance(v, dict) and all(isinstance(k, str) and _is_count(n) for k, n in v.items()),
    "qualname": _is_text, "reason": _is_optional_text, "lost": lambda v: v is False,
    "failures": lambda v: isinstance(v, list) and all(_failure_ok(f) for f in v),
    "cell": lambda v: v is None or isinstance(v, dict),
}
#: How a :class:`~conformance.core.results.Cell` or :class:`~conformance.core.results.Failure` field's
#: annotation is checked in a kept verdict; a field whose annotation is not here (one added later) makes every
#: kept verdict that has one a miss until it is.
_FIELD_TYPES: dict[str, Callable[[Any], bool]] = {
    "str": _is_text, "int": _is_count, "list[str]": _is_str_list, "str | None": _is_optional_text,
    "tuple[str, ...]": _is_str_list,
    "Status": lambda v: isinstance(v, str) and v in {s.value for s in Status},
}


def _typed_ok(value: Any, cls: type) -> bool:
    """Whether ``value`` is a dict with exactly the fields of the dataclass ``cls``, each of its type."""
    fields = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    return isinstance(value, dict) and set(value) == set(fields) and \
        all(fields[name] in _FIELD_TYPES and _FIELD_TYPES[fields[name]](v) for name, v in value.items())


def _failure_ok(failure: Any) -> bool:
    return _typed_ok(failure, Failure)


def entry_ok(entry: Any, nodeid: str) -> bool:
    """Whether ``entry`` has the shape :meth:`ReuseStore.store` writes for the item ``nodeid``: the fields of
    :data:`ENTRY_FIELDS` and :data:`VERDICT_FIELDS` and nothing else, each of its type (notes: a list of strings;
    evidence: counts by name; failures and the matrix cell: exactly their classes' fields), the item the node id
    names, a cell of the verdict's class, failures exactly when the status is a failure, and a verdict that
    :meth:`~conformance.core.results.Verdict.from_json` reads back to the same dict. Never raises: a damaged
    entry is a miss."""
    if not (isinstance(entry, dict) and set(entry) == set(ENTRY_FIELDS)
            and all(ok(entry[name]) for name, ok in ENTRY_FIELDS.items()) and entry["nodeid"] == nodeid):
        return False
    data = entry["verdict"]
    if set(data) != set(VERDICT_FIELDS) or not all(ok(data[name]) for name, ok in VERDICT_FIELDS.items()):
        return False
    if item_of_id(nodeid) != data["item"] or not (data["item"] == data["check"]
                                                         or data["item"].startswith(data["check"] + "[")):
        return False
    cell = data["cell"]
    if cell is not None and not (_typed_ok(cell, Cell) and cell["qualname"] == data["qualname"]):
        return False
    if (data["status"] == Status.FAILED.value) != bool(data["failures"]):  # a failure has its failures, and only one
        return False
    try:
        return Verdict.from_json(data).to_json() == data
    except (TypeError, ValueError, KeyError):
        return False


class ReuseStore:
    """Settled verdicts kept in pytest's cache: ``cache`` is ``config.cache`` (``get(key, default)`` /
    ``set(key, value)``); one entry per node id holding the item's key, the date of its verdict, and the verdict
    (:meth:`~conformance.core.results.Verdict.to_json`). ``reading``: kept verdicts are read back
    (``--torchbind-reuse=on``); a store that does not read (``--torchbind-reuse=off``) only refreshes the entries
    an earlier run left (:meth:`holds`), so a change the key cannot see, run once with reuse off, is not read
    back as it was. A ``keys`` maker without a pytest config gets the one pytest's cache belongs to (its
    ``_config``, the config it was made for), so the run's options are in every key."""

    def __init__(self, cache: Any, keys: KeyMaker, reading: bool = True):
        self.cache, self.keys, self.reading = cache, keys, reading
        if keys is not None and keys.config is None:
            keys.config = getattr(cache, "_config", None)

    @staticmethod
    def _path(nodeid: str) -> str:
        return f"{CACHE_PREFIX}/{hashlib.sha256(nodeid.encode()).hexdigest()[:32]}"

    def lookup(self, nodeid: str, key: str) -> Verdict | None:
        """The kept verdict of ``nodeid`` when its key is ``key``, with a note saying when it was recorded
        (:func:`reused_note`), else ``None``: also for an entry that is damaged in any way or was written by
        something else (:func:`entry_ok`), and for one pytest's cache cannot read back: the item runs."""
        try:
            entry = self.cache.get(self._path(nodeid), None)
        except Exception:  # noqa: BLE001 - whatever a damaged cache file raises: a miss, never an error
            return None
        if not entry_ok(entry, nodeid) or entry["key"] != key:
            return None
        verdict = Verdict.from_json(entry["verdict"])
        verdict.notes.append(reused_note(entry["date"], entry["key"]))
        return verdict

    def holds(self, nodeid: str) -> bool:
        """Whether an entry for ``nodeid`` is kept (whatever its key)."""
        return self.cache.get(self._path(nodeid), None) is not None

    def forget(self, nodeid: str) -> None:
        """Drop the entry of ``nodeid``, if there is one (nothing is written otherwise)."""
        if self.holds(nodeid):
            self.cache.set(self._path(nodeid), None)

    def store(self, nodeid: str, key: str, verdict: Verdict) -> None:
        """Keep ``verdict``, the verdict of ``nodeid``, under ``key``
        (:meth:`~conformance.core.results.Verdict.to_json`, with the date)."""
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        self.cache.set(self._path(nodeid), {"nodeid": nodeid, "key": key, "date": now, "verdict": verdict.to_json()})
