"""--torchbind-reuse: a pass is read back from pytest's cache while nothing its verdict depends on changed.

First the key, component by component (each change gives another key; nothing changed gives the same one), then
the gate end to end in other processes: a rerun reuses every settled verdict (passes, skips such as unsupported
cells, the baseline's known failures while their entry stays) and says so, never a failure the baseline does not
list; a changed class re-runs its own items only; off, --cache-clear and a run without pytest's cache.

The long scenario's runs are forked from one interpreter that has imported torch (``runpytest_forked``), so they
share its hash seed and its imports; one of them, and the runs of the crash test here and of
``test_reuse_closed.py``'s memory-limit test, start fresh interpreters, so a key that changed with the hash seed or
with what the interpreter had imported before the run would fail them.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import types
from pathlib import Path

import pytest
import torch
from hypothesis import settings

import conformance
from conformance.plugin.reuse import KeyMaker, source_of
from conformance.runner import Engine
from conformance.core.settings import Settings

from conftest import REGISTRATION_SOURCE, engine_of, run_inprocess
from sample_classes.custom_classes import register_constant

QUEUE, COUNTER = "samples::TensorQueue", "samples::Counter"
settings.register_profile("reuse-test", max_examples=3)  # a user's profile with another budget


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # builds (cached) and loads the TorchBind samples and their fakes

    return sample_classes


def key(engine: Engine | None = None, qualname: str = QUEUE, item: str = "agreement[pop]",
        context=None) -> str:
    engine = engine or Engine()
    return KeyMaker(context or engine.context, engine.registry, engine.settings).key(qualname, item.split("[")[0],
                                                                                     item)


def test_the_key_is_stable_and_names_the_item(samples):
    assert key() == key()  # two runs, nothing changed
    assert len({key(), key(item="agreement[top]"), key(item="signature[pop]"), key(qualname=COUNTER)}) == 4


def test_options_torch_and_the_plugin_change_the_key(samples, monkeypatch, tmp_path):
    base = key()
    assert key(Engine(Settings(examples=7))) != base
    assert key(Engine(Settings(device="cuda"))) != base
    assert key(Engine(Settings(load_code=("import mylib.fakes",)))) != base
    # Options that only choose which items run do not change an item's key.
    assert key(Engine(Settings(checks=("agreement",), backends=("eager",)))) == base
    with monkeypatch.context() as m:
        m.setattr(torch, "__version__", "2.99.0")
        assert key() != base
    with monkeypatch.context() as m:
        m.setattr(conformance, "__version__", "9.9.9")
        assert key() != base
    # The plugin's own sources: a copy of the package with one check edited.
    package = tmp_path / "conformance"
    shutil.copytree(conformance.__file__.rsplit("/", 1)[0], package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    with monkeypatch.context() as m:
        m.setattr(conformance, "__file__", str(package / "__init__.py"))
        copied = key()
        assert copied == base  # the same bytes
        (package / "checks" / "torchbind" / "agreement.py").write_text((package / "checks" / "torchbind" / "agreement.py").read_text() + "\n#")
        assert key() != copied


def test_loaded_library_bytes_change_the_key(samples, monkeypatch, tmp_path):
    library = tmp_path / "libmine.so"
    library.write_bytes(b"\x7fELF one")
    monkeypatch.setattr(torch.ops, "loaded_libraries", {*torch.ops.loaded_libraries, str(library)})
    before = key()
    library.write_bytes(b"\x7fELF two")  # rebuilt in place
    assert key() != before


def test_a_changed_fake_method_or_op_fake_changes_that_class_only(samples):
    from sample_classes.broken import installed_broken

    base, other = key(), key(qualname=COUNTER)
    for broken in ("queue_pop_keeps", "op_push_scaled_pushes_nothing"):  # a fake method; a custom op's fake
        with installed_broken(broken):
            assert key() != base, broken
            assert key(qualname=COUNTER) == other, broken
    assert key() == base  # the correct fakes back: the old key, so the old passes count again


def test_examples_strategies_and_schemas_change_the_key(samples):
    import conformance as c

    def factory():
        @c.examples(QUEUE)
        def queues():
            return []

    def strategy():
        from hypothesis import strategies as st

        c.strategy(QUEUE, "push", "x")(lambda: st.just("torch.ones(2)"))  # draws the source of a tensor

    base = key(engine_of())
    assert key(engine_of(factory)) != base
    assert key(engine_of(strategy)) != base
    # A C++ schema that changed (a rebuilt library with another signature): the class's methods as torch reports.
    engine = Engine()
    real = engine.context(QUEUE)
    methods = dict(real.info.methods)
    methods["pop"] = torch._C.parse_schema("pop(__torch__.torch.classes.samples.TensorQueue _0, int n) -> Tensor")
    changed = types.SimpleNamespace(kind="torchbind", info=dataclasses.replace(real.info, methods=methods))
    assert key(engine, context=lambda q: changed) != key(engine)


def test_timeout_hypothesis_profile_and_extension_modules_change_the_key(samples, monkeypatch, tmp_path):
    engine = Engine()

    def with_options(*options):
        return KeyMaker(engine.context, engine.registry, engine.settings, options).key(QUEUE, "agreement",
                                                                                       "agreement[pop]")

    assert with_options(60.0) == with_options(60.0) != with_options(5.0)
    base, profile = key(), settings._current_profile  # the suite's own profile, put back after
    settings.load_profile("reuse-test")
    try:
        assert key() != base
    finally:
        settings.load_profile(profile)
    assert key() == base
    # A C++ library loaded by importing a Python extension (not through torch.ops.load_library), rebuilt.
    ext = tmp_path / "_mine.cpython-311-x86_64-linux-gnu.so"
    ext.write_bytes(b"one")
    monkeypatch.setitem(__import__("sys").modules, "mylib_ext_for_test", types.SimpleNamespace(__file__=str(ext)))
    before = key()
    ext.write_bytes(b"three")
    assert key() != before


@register_constant
class ReuseSpec:
    """A constant custom class registered here, with a custom op whose fake the test swaps."""

    def __init__(self, k: float):
        self.k = k

    def __eq__(self, other):
        return isinstance(other, ReuseSpec) and self.k == other.k

    def __hash__(self):
        return hash(self.k)

    def __fx_repr__(self):
        return f"ReuseSpec({self.k!r})", {"ReuseSpec": ReuseSpec}


@torch.library.custom_op("reuse_unit::apply", mutates_args=())
def _apply(x: torch.Tensor, s: ReuseSpec) -> torch.Tensor:
    return x * s.k


def _apply_fake(x, s):
    return torch.empty_like(x)


_apply.register_fake(_apply_fake)


def test_a_custom_ops_fake_and_kernel_change_the_key():
    name = torch._library.opaque_object.get_opaque_type_name(ReuseSpec)
    base = key(qualname=name, item="guards[apply]")
    try:
        _apply.register_fake(lambda x, s: x.new_empty(x.shape))  # another fake body
        assert key(qualname=name, item="guards[apply]") != base
    finally:
        _apply.register_fake(_apply_fake)
    assert key(qualname=name, item="guards[apply]") == base


def test_a_class_named_in_the_schemas_is_part_of_the_key(samples):
    """A method taking another class: that class's examples and fake are this class's arguments."""
    from sample_classes.broken import installed_broken

    engine = Engine()
    real = engine.context(QUEUE)
    methods = dict(real.info.methods)
    methods["count_of"] = torch._C.parse_schema(
        "count_of(__torch__.torch.classes.samples.TensorQueue _0, __torch__.torch.classes.samples.Counter c) -> int")
    uses_counter = types.SimpleNamespace(kind="torchbind", info=dataclasses.replace(real.info, methods=methods))

    def context(q):
        return uses_counter if q == QUEUE else engine.context(q)

    base = key(engine, context=context)
    with installed_broken("counter_unflatten_raises"):
        assert key(engine, context=context) != base  # Counter's fake changed
        assert key(engine) == key(Engine())  # the real TensorQueue names no Counter: its key stays


def test_two_classes_naming_each_other_get_keys_that_do_not_depend_on_order(samples):
    from sample_classes.broken import installed_broken

    engine = Engine()

    def naming(qualname, other, ns_name):
        real = engine.context(qualname)
        methods = dict(real.info.methods)
        methods["with_other"] = torch._C.parse_schema(
            f"with_other(__torch__.torch.classes.{qualname.replace('::', '.')} _0, "
            f"__torch__.torch.classes.{ns_name} o) -> int")
        return types.SimpleNamespace(kind="torchbind", info=dataclasses.replace(real.info, methods=methods))

    queue, counter = naming(QUEUE, COUNTER, "samples.Counter"), naming(COUNTER, QUEUE, "samples.TensorQueue")

    def context(q):
        return {QUEUE: queue, COUNTER: counter}[q]

    def keys(first: str) -> dict[str, str]:
        maker = KeyMaker(context, engine.registry, engine.settings)
        order = [first, *({QUEUE, COUNTER} - {first})]
        return {q: maker.key(q, "agreement", "agreement[size]") for q in order}

    base = keys(QUEUE)
    assert keys(COUNTER) == base  # whichever class is asked first
    with installed_broken("queue_pop_keeps"):  # TensorQueue's fake changes: Counter's key too (its argument)
        changed = keys(COUNTER)
        assert changed == keys(QUEUE)
        assert changed[QUEUE] != base[QUEUE] and changed[COUNTER] != base[COUNTER]


def test_the_store_keeps_verdicts_by_node_id_and_key_and_ignores_damaged_entries():
    from conformance.core.results import Evidence, Failure, Verdict
    from conformance.plugin.reuse import ReuseStore

    class Cache(dict):
        def set(self, k, v):
            self[k] = json.loads(json.dumps(v))

    cache = Cache()
    store = ReuseStore(cache, keys=None)
    verdict = Verdict("eq_hash", "a.B", None, evidence=Evidence({"state": 2}))
    store.store("torchbind[a.B]::eq_hash", "k1", verdict)
    kept = store.lookup("torchbind[a.B]::eq_hash", "k1")
    assert dataclasses.replace(kept, notes=[]) == verdict and kept.summary == "passed"
    [note] = kept.notes  # says when the verdict was recorded, and under which key
    assert note.startswith("reused from ") and note.endswith("UTC, key k1")
    assert store.lookup("torchbind[a.B]::eq_hash", "k2") is None  # another key
    assert store.lookup("torchbind[a.B]::fx_repr", "k1") is None  # another item
    [path] = cache
    data = cache[path]["verdict"]
    for damaged in ({**cache[path], "verdict": None}, {**cache[path], "verdict": {**data, "status": "failed"}},
                    {**cache[path], "verdict": {**data, "status": "weird"}}, {**cache[path], "failure": "text"},
                    {**cache[path], "date": 3}, "not a dict"):
        cache[path] = damaged
        assert store.lookup("torchbind[a.B]::eq_hash", "k1") is None
    # A known failure is kept with its failures, which the item renders and raises again.
    failed = Verdict.of_failures("agreement", "a.B", "m", [Failure("differs", cpp="1", fake="2", rule="agreement.x")])
    store.store("torchbind[a.B]::agreement[m]", "k3", failed)
    kept = store.lookup("torchbind[a.B]::agreement[m]", "k3")
    assert kept.render() == failed.render() and kept.render().startswith("a.B.m: differs")
    assert kept.summary == "a.B.m: differs" and kept.failures[0].rule == "agreement.x"


def test_the_summary_line_counts_what_was_reused():
    from conformance.core.results import Status, Verdict
    from conformance.plugin.recorder import reuse_line

    note = ["reused from 2026-11-25 09:00 UTC, key 0123456789ab"]
    verdicts = [Verdict("c", "q", None, Status.PASSED, notes=note), Verdict("c", "q", None, Status.FAILED, notes=note),
                Verdict("c", "q", None, Status.SKIPPED, notes=[])]
    assert reuse_line(verdicts, reading=True) == (
        "torchbind: 2 of 3 verdicts reused from earlier runs (1 passed, 1 known failure; --torchbind-reuse=off runs "
        "them again)")
    verdicts.append(Verdict("c", "q", None, Status.FAILED, notes=note))
    assert "(1 passed, 2 known failures;" in reuse_line(verdicts, reading=True)
    fresh = [Verdict("c", "q", None, Status.PASSED)]
    assert reuse_line(fresh, reading=True).startswith("torchbind: 0 of 1 verdicts reused: none was kept")
    assert reuse_line(fresh, reading=False) is None and reuse_line([], reading=True) is None


def test_what_is_settled_and_kept():
    from conformance.core.results import Failure, Outcome
    from conformance.plugin.reuse import settled

    passed = Outcome("agreement", QUEUE, "pop")
    skipped = Outcome.skip("matrix", QUEUE, "pop-aoti", "unsupported: AOTInductor accepts ...")
    failed = Outcome.of_failures("agreement", QUEUE, "pop", [Failure("differs")])
    assert settled(passed, False) and settled(skipped, False)
    assert settled(failed, expected_to_fail=True)  # a known failure of the baseline
    assert not settled(failed, expected_to_fail=False)  # a failure the baseline does not list: always runs
    failed.lost = True  # its process crashed or hung: nothing a rerun would say again
    assert not settled(failed, expected_to_fail=True)


def test_an_outcome_judged_without_an_example_a_crash_took_is_not_settled(samples):
    from conformance.torchbind.examples import ExampleSet
    from conformance.plugin.reuse import settled
    from conformance.runner import plan, run_target

    engine = Engine()
    (unit,) = plan(COUNTER, engine, only=["flatten"])
    assert settled(run_target(unit, engine), expected_to_fail=False)
    # Preparation left one example out: building it crashed the isolation worker (a timeout on a busy machine
    # does the same), so every verdict of the class was reached without that state.
    ctx = engine.context(COUNTER)
    ctx._examples = ExampleSet(ctx._examples.examples, [], None, [("Counter(3)", "crashed a worker process")])
    outcome = run_target(unit, engine)
    assert outcome.status.value == "passed" and outcome.lost
    assert not settled(outcome, expected_to_fail=False)


def test_the_baseline_entry_is_part_of_the_key(samples):
    engine = Engine()
    maker = KeyMaker(engine.context, engine.registry, engine.settings)
    plain = maker.key(QUEUE, "agreement", "agreement[pop]")
    listed = maker.key(QUEUE, "agreement", "agreement[pop]", "baseline: the fake is wrong")
    assert plain == maker.key(QUEUE, "agreement", "agreement[pop]", None)
    assert len({plain, listed, maker.key(QUEUE, "agreement", "agreement[pop]", "baseline: another reason")}) == 3


def test_standard_library_and_torch_extension_modules_are_not_in_the_key(samples, monkeypatch, tmp_path):
    import sys
    import sysconfig

    from conformance.plugin import reuse

    # Where this Python keeps them: the standard library's (lib-dynload) and torch's are left out, an installed
    # package's is in, also in a virtualenv (whose own platstdlib is the directory above its site-packages) and
    # outside one (where site-packages lies under the standard library).
    standard, torch_dir = reuse._standard_dirs(), Path(torch.__file__).resolve().parent
    assert reuse._left_out(standard[0] / "lib-dynload" / "_lsprof.so", standard, torch_dir)
    assert reuse._left_out(torch_dir / "lib" / "libtorch_python.so", standard, torch_dir)
    for installed in (Path(sysconfig.get_paths()["platlib"]), standard[0] / "site-packages"):
        assert not reuse._left_out(installed.resolve() / "mylib" / "_C.so", standard, torch_dir), installed

    # End to end, with real files: a rebuilt standard-library extension changes no key, a rebuilt package does.
    std = tmp_path / "python" / "lib"
    monkeypatch.setattr(reuse, "_standard_dirs", lambda: [std.resolve()])
    files = {"_lsprof_for_test": std / "lib-dynload" / "_lsprof.so",
             "mylib_c_for_test": std / "site-packages" / "mylib" / "_C.so"}
    for name, path in files.items():
        path.parent.mkdir(parents=True)
        path.write_bytes(b"one")
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(__file__=str(path)))
    before = key()
    files["_lsprof_for_test"].write_bytes(b"three")
    assert key() == before
    files["mylib_c_for_test"].write_bytes(b"three")
    assert key() != before


def test_extensions_imported_after_the_snapshot_change_no_key(samples, monkeypatch, tmp_path):
    import sys

    engine = Engine()
    maker = KeyMaker(engine.context, engine.registry, engine.settings)
    maker.snapshot()  # what the plugin does once its --torchbind-load specs are loaded
    before = key()
    # A test of the user's imports another package's extension later in the run.
    ext = tmp_path / "site-packages" / "other" / "_ext.so"
    ext.parent.mkdir(parents=True)
    ext.write_bytes(b"one")
    monkeypatch.setitem(sys.modules, "other_ext_for_test", types.SimpleNamespace(__file__=str(ext)))
    assert maker.key(QUEUE, "agreement", "agreement[pop]") == before
    assert key() != before  # a run that had imported it before its snapshot counts it


def test_source_of_follows_torchs_registration_wrappers():
    def func(x):
        return x + 1

    def inner(*a):
        return func(*a)

    assert "return x + 1" in source_of(inner)
    assert source_of(len).startswith("<no source: builtins.len")


# ----- end to end ------------------------------------------------------------------------------------------------

# Each class in its own module: a module's whole file is in the key of the classes it defines.
HEADER = REGISTRATION_SOURCE + "import os\n"

GOOD = HEADER + '''
@constant
class Good:
    def __init__(self, a: int, b: int):
        self.a, self.b = a, b
    def __eq__(self, other):
        if os.environ.get("REUSE_T_EQ_FORGETS_B"):  # a switch the key cannot see
            return isinstance(other, Good) and self.a == other.a
        return isinstance(other, Good) and (self.a, self.b) == (other.a, other.b)
    def __hash__(self):
        return hash((self.a, self.b))
    def __fx_repr__(self):
        return f"Good({self.a!r}, {self.b!r})", {"Good": Good}

@torch.library.custom_op("reuse_t::good", mutates_args=())
def good(x: torch.Tensor, g: Good) -> torch.Tensor:
    return x * g.a + g.b

@good.register_fake
def _(x, g):
    return torch.empty_like(x)
'''

BAD = HEADER + '''
@constant
class Bad:
    """__eq__ forgets b."""
    def __init__(self, a: int, b: int):
        self.a, self.b = a, b
    def __eq__(self, other):
        return isinstance(other, Bad) and self.a == other.a
    def __hash__(self):
        return hash(self.a)
    def __fx_repr__(self):
        return f"Bad({self.a!r}, {self.b!r})", {"Bad": Bad}

@torch.library.custom_op("reuse_t::bad", mutates_args=())
def bad(x: torch.Tensor, g: Bad) -> torch.Tensor:
    return x * g.a + g.b

@bad.register_fake
def _(x, g):
    return torch.empty_like(x)
'''


def _items(result, status: str) -> set[str]:
    return {line.split(" ", 1)[1].split(" - ")[0] for line in result.stdout.lines if line.startswith(status + " ")}


def _reused(path) -> set[str]:
    """Items whose verdict in the JSON report at ``path`` says it was reused (its last note)."""
    return {f"torchbind[py:{c['qualname']}]::{v['item']}" for c in json.loads(path.read_text())["classes"]
            for v in c["verdicts"] if v["notes"] and v["notes"][-1].startswith("reused from ")}


@pytest.mark.process
def test_a_rerun_reuses_settled_verdicts_never_a_failure_and_a_changed_class_reruns_alone(pytester, monkeypatch):
    pytester.makepyfile(reusegood=GOOD, reusebad=BAD, reusemod="import reusegood, reusebad\n")
    report = pytester.path / "report.json"
    args = ["--torchbind-load=reusemod", "--torchbind-class=reuse[gb]*.*", "--torchbind-reuse=on",
            "--torchbind-backends=eager,export", "--torchbind-examples=20", "--torchbind-isolation=none", "-rA",
            f"--torchbind-report={report}"]
    cold = pytester.runpytest_forked(*args)
    passed, failed = _items(cold, "PASSED"), _items(cold, "FAILED")
    assert failed == {"torchbind[py:reusebad.Bad]::guards[bad]", "torchbind[py:reusebad.Bad]::matrix[bad-eager]"}
    # torch.export bakes a constant object into the program: a known torch limitation, the cells are unsupported.
    unsupported = {"torchbind[py:reusegood.Good]::matrix[good-export]",
                   "torchbind[py:reusebad.Bad]::matrix[bad-export]"}
    # Every check that applies to the classes passes (their number grows with the plugin's checks).
    n = len(passed)
    assert n >= 6 and not _reused(report), cold.stdout.str()[-3000:]
    cold.assert_outcomes(passed=n, failed=2, skipped=2)
    cold.stdout.fnmatch_lines([f"torchbind: 0 of {n + 4} verdicts reused: none was kept under the same key*"])

    warm = pytester.runpytest_forked(*args)
    assert (_items(warm, "PASSED"), _items(warm, "FAILED")) == (passed, failed)
    warm.assert_outcomes(passed=n, failed=2, skipped=2)
    assert _reused(report) == passed | unsupported  # every pass and skip; the failures ran again
    assert "reusebad.Bad.bad: Bad.__eq__ ignores 'b'" in warm.stdout.str()
    warm.stdout.fnmatch_lines(
        [f"torchbind: {n + 2} of {n + 4} verdicts reused from earlier runs ({n} passed, 2 skipped; *"])
    assert "unsupported: torch.export bakes a constant custom class object" in warm.stdout.str()  # -rs as before
    matrix = [cell for c in json.loads(report.read_text())["classes"] for cell in c["cells"]]
    assert sorted(c["status"] for c in matrix) == ["failed", "passed", "unsupported", "unsupported"], (
        "reused cells keep their place in the matrix report")

    # One class's module changes: its items run again, the other class's settled verdicts are still reused.
    source = (pytester.path / "reusegood.py").read_text()
    # (another size: Python would take a .pyc written in the same second for a file of the same size as current)
    (pytester.path / "reusegood.py").write_text(source.replace("return hash((self.a, self.b))",
                                                              "return hash((self.b, self.a, 1))"))
    edited = pytester.runpytest_forked(*args)
    assert _items(edited, "FAILED") == failed
    assert _reused(report) == {i for i in passed | unsupported if "reusebad.Bad]" in i}

    # The baseline's known failures (strict xfails) are kept under a key holding their entry: the first run with
    # the baseline runs them, the next reuses them, and an entry taken out of the file runs its item again.
    pytester.runpytest_forked(*args, "--torchbind-baseline=b.json", "--torchbind-accept")
    baseline = json.loads((pytester.path / "b.json").read_text())
    assert set(baseline["known_failures"]) == failed
    first = pytester.runpytest_forked(*args, "--torchbind-baseline=b.json")
    first.assert_outcomes(passed=n, skipped=2, xfailed=2)
    assert not failed & _reused(report)
    # A fresh interpreter (its own hash seed, nothing imported before the run) reads back what the forked runs
    # kept, baseline entries included.
    second = pytester.runpytest_subprocess(*args, "--torchbind-baseline=b.json")
    second.assert_outcomes(passed=n, skipped=2, xfailed=2)
    assert _reused(report) == passed | unsupported | failed
    del baseline["known_failures"]["torchbind[py:reusebad.Bad]::guards[bad]"]
    (pytester.path / "b.json").write_text(json.dumps(baseline))
    dropped = pytester.runpytest_forked(*args, "--torchbind-baseline=b.json")
    dropped.assert_outcomes(passed=n, skipped=2, xfailed=1, failed=1)
    assert _items(dropped, "FAILED") == {"torchbind[py:reusebad.Bad]::guards[bad]"}
    assert "torchbind[py:reusebad.Bad]::guards[bad]" not in _reused(report)
    assert "reusebad.Bad.bad: Bad.__eq__ ignores 'b'" in dropped.stdout.str()
    # An xfail marker of the user's own (not the baseline's) keeps nothing: the failure runs on every rerun.
    pytester.makeconftest('''
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid == "torchbind[py:reusebad.Bad]::guards[bad]":
            item.add_marker(pytest.mark.xfail(reason="the user's own marker"))
''')
    for _ in range(2):
        own = pytester.runpytest_forked(*args, "--torchbind-baseline=b.json")
        own.assert_outcomes(passed=n, skipped=2, xfailed=2)
        assert "torchbind[py:reusebad.Bad]::guards[bad]" not in _reused(report)
    (pytester.path / "conftest.py").unlink()
    # A kept pass that the baseline now lists runs again: it passes, which a strict xfail reports as XPASS(strict).
    baseline["known_failures"]["torchbind[py:reusegood.Good]::guards[good]"] = {"reason": "listed by mistake"}
    (pytester.path / "b.json").write_text(json.dumps(baseline))
    listed = pytester.runpytest_forked(*args, "--torchbind-baseline=b.json")
    assert "XPASS(strict)" in listed.stdout.str() and "torchbind[py:reusegood.Good]::guards[good]" in _items(
        listed, "FAILED")
    assert "torchbind[py:reusegood.Good]::guards[good]" not in _reused(report)  # it ran: its key holds the entry

    # Off, or a cleared cache: everything runs.
    pytester.runpytest_forked(*args[:2], "--torchbind-reuse=off", *args[3:])
    assert not _reused(report)
    pytester.runpytest_forked(*args, "--cache-clear")
    assert not _reused(report)

    # A change the key cannot see (an environment variable Good.__eq__ reads), run once with reuse off as the docs
    # say: that run refreshes what was kept, so the next run with reuse on shows the failure, never the old pass.
    good = "torchbind[py:reusegood.Good]::guards[good]"
    pytester.runpytest_forked(*args)
    assert good in _reused(report)
    monkeypatch.setenv("REUSE_T_EQ_FORGETS_B", "1")
    off = pytester.runpytest_forked(*args[:2], "--torchbind-reuse=off", *args[3:])
    assert good in _items(off, "FAILED") and not _reused(report)
    on = pytester.runpytest_forked(*args)
    assert good in _items(on, "FAILED") and good not in _reused(report)
    monkeypatch.delenv("REUSE_T_EQ_FORGETS_B")
    assert good in _items(pytester.runpytest_forked(*args), "PASSED") and good not in _reused(report)


def test_reuse_needs_pytests_cache_and_a_known_value(pytester):
    result = run_inprocess(pytester, "--torchbind-class=samples::TensorQueue", "--torchbind-reuse=on")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--torchbind-reuse=on (ini torchbind_reuse) keeps verdicts in pytest's cache, which this run switched "
            "off") in result.stderr.str()
    pytester.makeini("[pytest]\ntorchbind_reuse = yes\n")
    result = pytester.runpytest_inprocess("--torchbind-class=samples::TensorQueue", "--torchbind-isolation=none")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "torchbind_reuse: expected on or off, got 'yes'" in result.stderr.str()


@pytest.mark.process
def test_a_crash_is_never_kept_nor_what_was_judged_without_the_example_it_took(pytester, samples):
    # PagedCache without its adopter module: building an example calls exec_rawptr, which dereferences a made-up
    # int and crashes the worker (that state is left out), and the flatten check crashes on the same call.
    report = pytester.path / "report.json"
    args = ["--torchbind-load=sample_classes", "--torchbind-class=samples_inputs::PagedCache",
            "--torchbind-class=samples::Counter", "--torchbind-checks=examples,flatten,signature",
            "--torchbind-reuse=on", f"--torchbind-report={report}"]

    def reused() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {"samples_inputs::PagedCache": set(), "samples::Counter": set()}
        for c in json.loads(report.read_text())["classes"]:
            out[c["qualname"]] |= {v["item"] for v in c["verdicts"] if v["notes"]
                                   and v["notes"][-1].startswith("reused from ")}
        return out

    cold = pytester.runpytest_subprocess(*args)
    assert "building an example object crashed" in cold.stdout.str() and "killed by SIGSEGV" in cold.stdout.str()
    pytester.runpytest_subprocess(*args)
    kept = reused()
    assert kept["samples_inputs::PagedCache"] == set(), kept  # the crash, and every verdict reached without it
    assert {"examples", "flatten"} <= kept["samples::Counter"] and len(kept["samples::Counter"]) > 2, kept
