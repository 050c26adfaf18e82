"""--torchbind-reuse fails closed: what a verdict depends on is in its key unless listed as data with a reason, and a
kept entry that is damaged in any way is a miss (the item runs), never an error.

Each test shows the change that the key used to miss: the plugin's options (``--torchbind-isolation=none``, under
which a hang or an out-of-memory worker is never caught, and ``--torchbind-memory-limit``), hypothesis's seed and
profile settings, the environment variables torch reads for compiling (``TORCHDYNAMO_DISABLE=1`` runs every
"compiled" program eagerly), and any edit of the user's module outside a function's own source (a helper ``__eq__``
calls, a module-level list an examples factory reads, a helper module a fake imports). Then the store: entries
damaged in several ways are misses, and end to end a damaged cache makes the items run and the report complete.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import types
from pathlib import Path

import hypothesis
import pytest
import torch
from hypothesis import settings

import conformance
from conformance.core.results import Cell, Evidence, Failure, Verdict
from conformance.plugin.options import INI_KEYS
from conformance.plugin.reuse import KeyMaker, ReuseStore
from conformance.plugin.reuse_key import ENV_NOT_IN_KEY, OPTIONS_NOT_IN_KEY
from conformance.runner import Engine

from conftest import REGISTRATION_SOURCE, engine_of

QUEUE = "samples::TensorQueue"


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # builds (cached) and loads the TorchBind samples and their fakes

    return sample_classes


def key(engine: Engine | None = None, qualname: str = QUEUE, item: str = "agreement[pop]", context=None,
        config=None) -> str:
    engine = engine or Engine()
    maker = KeyMaker(context or engine.context, engine.registry, engine.settings, config=config)
    return maker.key(qualname, item.split("[")[0], item)


# ----- the plugin's options -------------------------------------------------------------------------------------

def test_every_option_and_ini_value_is_in_the_key_unless_listed(samples, pytester):
    """The options the key used to leave out: a hang or an OOM that passed under --torchbind-isolation=none or
    --torchbind-memory-limit=0 (nothing stops it there) was read back under the default, which would fail it."""
    base = key(config=pytester.parseconfig())
    assert key(config=pytester.parseconfig()) == base
    for args in (["--torchbind-isolation=none"], ["--torchbind-memory-limit=0"], ["--torchbind-check-repro=off"],
                 ["--torchbind-timeout=7"], ["--torchbind-load=mylib.fakes"]):
        assert key(config=pytester.parseconfig(*args)) != base, args
    pytester.makeini("[pytest]\ntorchbind_isolation = none\n")
    assert key(config=pytester.parseconfig()) != base  # the ini's value too
    pytester.makeini("[pytest]\n")
    # Where reports go, the reuse switch and which items run change no verdict: listed, with reasons.
    for args in (["--torchbind-report=r.json"], ["--torchbind-reuse=on"], ["--torchbind-checks=agreement"],
                 ["--torchbind-backends=eager"], ["--torchbind-class=samples::TensorQueue"]):
        assert key(config=pytester.parseconfig(*args)) == base, args
    # Fail closed: any option of the plugin not listed, today's or one added later, changes the key.
    config = pytester.parseconfig()
    names = [n for n in vars(config.option) if n.startswith("torchbind_")]
    assert {"torchbind_isolation", "torchbind_memory_limit", "torchbind_timeout"} <= set(names)
    for name in names:
        changed = pytester.parseconfig()
        setattr(changed.option, name, "a value no run gives")
        assert (key(config=changed) == base) == (name in OPTIONS_NOT_IN_KEY), name
    assert set(OPTIONS_NOT_IN_KEY) <= {*names, *INI_KEYS}  # the list names real options
    assert all(reason for reason in OPTIONS_NOT_IN_KEY.values())


def test_the_store_gives_the_key_maker_the_config_of_pytests_cache(samples, pytester):
    """How the plugin builds its store (conformance.plugin.run): with ``config.cache``, whose config the keys then read."""
    engine = Engine()
    none, default = pytester.parseconfigure("--torchbind-isolation=none"), pytester.parseconfigure()
    keys = []
    for config in (none, default):
        maker = KeyMaker(engine.context, engine.registry, engine.settings)
        store = ReuseStore(config.cache, maker)
        keys.append(store.keys.key(QUEUE, "agreement", "agreement[pop]"))
    assert keys[0] != keys[1]


# ----- the environment and hypothesis ---------------------------------------------------------------------------

def test_torchs_compile_environment_variables_are_in_the_key(samples, monkeypatch):
    base = key()
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")  # every compiled program runs eagerly: a failing cell passes
    disabled = key()
    assert disabled != base
    for name, value in (("TORCHINDUCTOR_FREEZING", "1"), ("TORCH_COMPILE_DISABLE", "1")):
        with monkeypatch.context() as m:
            m.setenv(name, value)
            assert key() != disabled, name
    # Where caches and logs go changes no result (listed, with reasons); nor does a variable torch does not read.
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TORCH_COMPILE_DEBUG_DIR", "REUSE_TEST_UNRELATED"):
        with monkeypatch.context() as m:
            m.setenv(name, "/tmp/elsewhere")
            assert key() == disabled, name
    assert "TORCHINDUCTOR_CACHE_DIR" in ENV_NOT_IN_KEY and all(ENV_NOT_IN_KEY.values())


settings.register_profile("reuse-closed-db", database=None)  # only the database differs from the default
settings.register_profile("reuse-closed-health", suppress_health_check=list(hypothesis.HealthCheck))


def test_hypothesis_seed_and_every_profile_setting_are_in_the_key(samples, monkeypatch):
    base, profile = key(), settings._current_profile  # the suite's own profile, put back after
    monkeypatch.setattr(hypothesis.core, "global_force_seed", 12345)  # --hypothesis-seed=12345
    seeded = key()
    assert seeded != base
    monkeypatch.setattr(hypothesis.core, "global_force_seed", 54321)
    assert key() != seeded
    monkeypatch.setattr(hypothesis.core, "global_force_seed", None)
    assert key() == base
    for name in ("reuse-closed-db", "reuse-closed-health"):
        settings.load_profile(name)
        try:
            assert key() != base, name
        finally:
            settings.load_profile(profile)
    assert key() == base


# ----- the user's source files ----------------------------------------------------------------------------------

SPEC = '''
import conformance
from sample_classes.custom_classes import register_constant

from . import helpers
import outside_helper  # installed in a site-packages directory: pinned by its version, not read

SIZES = [1, 2]


def _key(obj):
    return helpers.ident(obj.a, obj.b)


@register_constant
class Spec:
    def __init__(self, a, b):
        self.a, self.b = a, b
    def __eq__(self, other):
        return isinstance(other, Spec) and _key(self) == _key(other)
    def __hash__(self):
        return hash(_key(self))
    def __fx_repr__(self):
        return f"Spec({self.a!r}, {self.b!r})", {"Spec": Spec}


def spec_examples():
    return [Spec(n, n) for n in SIZES]


def later():
    from . import lazy  # not imported yet: found without running it
    return lazy
'''

FAKE = '''
import torch


def _pop_result(queue):
    return queue.queue.pop(0)


class FakeQueue:
    def __init__(self, queue):
        self.queue = queue

    @classmethod
    def __obj_unflatten__(cls, flat):
        return cls(**dict(flat))

    def pop(self):
        return _pop_result(self)
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A package of the user's (``<name>pkg``: a custom class, its examples factory and helpers) and a module
    installed in a ``site-packages`` directory, importable; the modules are unique to the test."""
    name = f"closed{abs(hash(str(tmp_path))) % 10 ** 8}"
    pkg = tmp_path / "proj" / f"{name}pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("def ident(a, b):\n    return (a, b)\n")
    (pkg / "lazy.py").write_text("X = 1\n")
    (pkg / "spec.py").write_text(SPEC)
    (tmp_path / "proj" / f"{name}fake.py").write_text(FAKE)
    site = tmp_path / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "outside_helper.py").write_text("Y = 1\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(tmp_path / "proj"))
    spec = importlib.import_module(f"{name}pkg.spec")
    fake = importlib.import_module(f"{name}fake")
    return types.SimpleNamespace(pkg=pkg, spec=spec, fake=fake, site=site, root=tmp_path / "proj", name=name,
                                 qualname=torch._library.opaque_object.get_opaque_type_name(spec.Spec))


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_edits_outside_a_functions_own_source_change_the_key(samples, project):
    """A helper that __eq__ calls, a module-level list the examples factory reads, a module they import (also one
    not imported yet): the verdicts rest on them, so they are in the key as whole files."""
    def spec_key():
        engine = engine_of(lambda: conformance.examples(project.qualname)(project.spec.spec_examples))
        return key(engine, qualname=project.qualname, item="eq_hash")

    base = spec_key()
    assert spec_key() == base
    edits = [(project.pkg / "spec.py", "return helpers.ident(obj.a, obj.b)", "return helpers.ident(obj.a, 0)"),
             (project.pkg / "spec.py", "SIZES = [1, 2]", "SIZES = [1, 2, 3]"),
             (project.pkg / "helpers.py", "return (a, b)", "return (a,)"),
             (project.pkg / "lazy.py", "X = 1", "X = 2")]
    for path, old, new in edits:
        _edit(path, old, new)
        assert spec_key() != base, (path.name, new)
        _edit(path, new, old)
        assert spec_key() == base, path.name
    (project.pkg / "__init__.py").write_text("Z = 1\n")  # the package's __init__ ran when spec was imported
    assert spec_key() != base
    (project.pkg / "__init__.py").write_text("")
    # A package installed in site-packages is not read (its version stands for it), nor is the standard library.
    (project.site / "outside_helper.py").write_text("Y = 2\n")
    assert spec_key() == base


def test_a_helper_beside_a_torchbind_fake_changes_the_key(samples, project):
    engine = Engine()
    real = engine.context(QUEUE)

    class Info:  # the real TensorQueue's schemas, with the fake class of the user's module (ClassInfo looks it up)
        fake_class = project.fake.FakeQueue

        def __getattr__(self, name):
            return getattr(real.info, name)

    ours = types.SimpleNamespace(kind="torchbind", info=Info())

    def fake_key():
        return key(engine, context=lambda q: ours if q == QUEUE else engine.context(q))

    base = fake_key()
    fake = project.root / f"{project.name}fake.py"
    _edit(fake, "return queue.queue.pop(0)", "return queue.queue.pop()")  # outside the fake class's own source
    assert fake_key() != base
    assert key(engine) == key(Engine())  # the real fake's key does not read this file


# ----- damaged entries ------------------------------------------------------------------------------------------

class Cache(dict):
    def set(self, k, v):
        self[k] = json.loads(json.dumps(v))


NODE = "torchbind[py:m.Good]::matrix[good-eager]"
CELL = {"qualname": "m.Good", "row": "good", "backend": "eager", "row_index": 0, "backend_index": 0,
        "status": "passed", "reason": "", "details": [], "program": "def f(x): ...", "limitation": None, "repro": ""}
VERDICT = Verdict("matrix", "m.Good", "good-eager", notes=["a note"], evidence=Evidence({"output": 3}),
                  cell=Cell.from_json(CELL))
FAILURE = Failure("differs", cpp="1", fake="2", details=("a", "b"), rule="matrix.x").to_json()


def _failed(data: dict) -> dict:
    """``data`` (a kept verdict) as a known failure, kept whole."""
    return {**data, "status": "failed", "failures": [FAILURE], "summary": "m.Good.good-eager: differs"}


def _damaged(entry: dict) -> list[tuple[str, object]]:
    data, cell = entry["verdict"], entry["verdict"]["cell"]
    failed = _failed(data)  # kept as it is (see below): each damage below is the only one
    return [
        ("not a dict", "not a dict"), ("a list", [entry]),
        ("no verdict", {k: v for k, v in entry.items() if k != "verdict"}),
        ("an unknown field", {**entry, "extra": 1}), ("a key of another type", {**entry, "key": 3}),
        ("the verdict a list", {**entry, "verdict": [data]}),
        ("notes not strings", {**entry, "verdict": {**data, "notes": [1, {"x": 2}]}}),
        ("notes a string", {**entry, "verdict": {**data, "notes": "a note"}}),
        ("no summary", {**entry, "verdict": {k: v for k, v in data.items() if k != "summary"}}),
        ("a summary the verdict does not give", {**entry, "verdict": {**data, "summary": "all fine"}}),
        ("an unknown verdict field", {**entry, "verdict": {**data, "colour": "red"}}),
        ("evidence not counts", {**entry, "verdict": {**data, "evidence": {"output": "3"}}}),
        ("evidence a list", {**entry, "verdict": {**data, "evidence": [3]}}),
        ("a status never kept", {**entry, "verdict": {**data, "status": "unsupported"}}),
        ("a lost verdict", {**entry, "verdict": {**data, "lost": True}}),
        ("a cell with an unknown field", {**entry, "verdict": {**data, "cell": {**cell, "colour": "red"}}}),
        ("a cell missing a field",
         {**entry, "verdict": {**data, "cell": {k: v for k, v in cell.items() if k != "row"}}}),
        ("a cell index of another type", {**entry, "verdict": {**data, "cell": {**cell, "row_index": "0"}}}),
        ("a cell status torch has no name for", {**entry, "verdict": {**data, "cell": {**cell, "status": "great"}}}),
        ("a cell of another class", {**entry, "verdict": {**data, "cell": {**cell, "qualname": "m.Other"}}}),
        ("a cell that is a list", {**entry, "verdict": {**data, "cell": list(cell.items())}}),
        ("a check the node id does not name", {**entry, "verdict": {**data, "check": "guards"}}),
        ("an item the node id does not name", {**entry, "verdict": {**data, "item": "matrix[bad-eager]"}}),
        ("a failure without its failures", {**entry, "verdict": {**data, "status": "failed"}}),
        ("failures without a failure", {**entry, "verdict": {**data, "failures": [FAILURE]}}),
        ("a failure with an unknown field", {**entry, "verdict": {**failed, "failures": [{**FAILURE, "colour": 1}]}}),
        ("a failure's details not strings",
         {**entry, "verdict": {**failed, "failures": [{**FAILURE, "details": [1]}]}}),
        ("another node id", {**entry, "nodeid": "torchbind[py:m.Good]::guards[good]"}),
    ]


def test_a_damaged_entry_is_a_miss_whatever_the_damage():
    cache = Cache()
    store = ReuseStore(cache, keys=None)
    store.store(NODE, "k1", VERDICT)
    kept = store.lookup(NODE, "k1")
    assert kept is not None and dataclasses.replace(kept, notes=kept.notes[:1]) == VERDICT
    assert kept.notes[1].startswith("reused from ")
    [path] = cache
    good = cache[path]
    for what, damaged in _damaged(good):
        cache[path] = damaged
        assert store.lookup(NODE, "k1") is None, what
    cache[path] = good
    assert store.lookup(NODE, "k1") is not None
    # A kept known failure, with its failures whole, is no miss.
    cache[path] = {**good, "verdict": _failed(good["verdict"])}
    assert store.lookup(NODE, "k1").failures[0].to_json() == FAILURE

    class Unreadable(Cache):
        def get(self, k, default):
            raise ValueError("a cache file pytest cannot decode")

    assert ReuseStore(Unreadable(cache), keys=None).lookup(NODE, "k1") is None


# ----- end to end -----------------------------------------------------------------------------------------------

GOOD = REGISTRATION_SOURCE + '''


@constant
class Good:
    def __init__(self, a: int, b: int):
        self.a, self.b = a, b
    def __eq__(self, other):
        return isinstance(other, Good) and (self.a, self.b) == (other.a, other.b)
    def __hash__(self):
        return hash((self.a, self.b))
    def __fx_repr__(self):
        return f"Good({self.a!r}, {self.b!r})", {"Good": Good}


@torch.library.custom_op("reuse_closed::good", mutates_args=())
def good(x: torch.Tensor, g: Good) -> torch.Tensor:
    return x * g.a + g.b


@good.register_fake
def _(x, g):
    return torch.empty_like(x)
'''


def _reused(report: Path) -> set[str]:
    return {v["item"] for c in json.loads(report.read_text())["classes"] for v in c["verdicts"]
            if v["notes"] and v["notes"][-1].startswith("reused from ")}


@pytest.mark.process
def test_another_memory_limit_runs_again_and_a_damaged_cache_is_a_miss_end_to_end(pytester):
    """A verdict kept under --torchbind-memory-limit=0 (no limit) is not read back under the default limit; and an
    entry damaged in the cache (a cell with an unknown field, notes that are not strings, a missing field) makes
    its item run, with every item reported and nothing raised from pytest's internals."""
    pytester.makepyfile(reuseclosed=GOOD)
    report = pytester.path / "report.json"
    args = ["--torchbind-load=reuseclosed", "--torchbind-class=reuseclosed.*", "--torchbind-reuse=on",
            "--torchbind-backends=eager", "--torchbind-examples=5", "--torchbind-isolation=none",
            "--torchbind-check-repro=off", f"--torchbind-report={report}", "-rA"]
    cold = pytester.runpytest_subprocess(*args, "--torchbind-memory-limit=0")
    assert cold.ret == 0, cold.stdout.str()[-3000:]
    items = {v["item"] for c in json.loads(report.read_text())["classes"] for v in c["verdicts"]}
    assert "matrix[good-eager]" in items and len(items) >= 4, items
    default = pytester.runpytest_subprocess(*args)
    assert default.ret == 0 and not _reused(report), "kept under no memory limit, read back under the default"
    warm = pytester.runpytest_subprocess(*args)
    assert warm.ret == 0 and _reused(report) == items, "the same options in a fresh interpreter: the same keys"

    entries = {}
    for path in (pytester.path / ".pytest_cache" / "v" / "torchbind" / "reuse").iterdir():
        entry = json.loads(path.read_text())
        entries[entry["nodeid"].partition("::")[2]] = (path, entry)
    damaged = {}
    cell_path, cell_entry = entries["matrix[good-eager]"]
    cell_entry["verdict"]["cell"]["colour"] = "red"  # Cell.__init__() got an unexpected keyword argument
    cell_path.write_text(json.dumps(cell_entry))
    damaged["matrix[good-eager]"] = cell_path
    others = sorted(i for i in entries if i != "matrix[good-eager]")
    path, entry = entries[others[0]]
    entry["verdict"]["notes"] = [1, {"two": 2}]  # a pytest-internal traceback once
    path.write_text(json.dumps(entry))
    damaged[others[0]] = path
    path, entry = entries[others[1]]
    del entry["verdict"]["summary"]
    path.write_text(json.dumps(entry))
    damaged[others[1]] = path
    path, entry = entries[others[2]]
    path.write_text(json.dumps(entry)[:-5])  # cut short: not JSON
    damaged[others[2]] = path

    mended = pytester.runpytest_subprocess(*args)
    text = mended.stdout.str() + mended.stderr.str()
    assert mended.ret == 0 and "INTERNALERROR" not in text and "Traceback" not in text, text[-3000:]
    assert _reused(report) == items - set(damaged)  # the damaged entries ran; the others were reused
    verdicts = {v["item"] for c in json.loads(report.read_text())["classes"] for v in c["verdicts"]}
    assert verdicts == items
    assert [c["status"] for c in json.loads(report.read_text())["classes"][0]["cells"]] == ["passed"]
    mended.stdout.fnmatch_lines([f"torchbind: {len(items) - len(damaged)} of {len(items)} verdicts reused*"])
