"""The differential check: call sequences on the real object and its fake, shrunk, reproduced as a script.

The sequence-dependent broken fakes in ``sample_classes.broken`` (check ``differential``) agree with C++ on every
single call from every example state, so only a sequence exposes them; each must be caught with a short
sequence whose printed script, run on its own, shows the disagreement. The correct fakes must pass over the
default budget, derandomized and with a random seed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import hypothesis
import hypothesis.core
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch._prims_common import is_non_overlapping_and_dense_or_false as is_non_overlapping_and_dense

import conformance
from conformance.torchbind import differential as engine
from conformance.engine import arguments as strategies
from conformance.torchbind.differential import driver
from conformance.checks import all_checks
from conformance.checks.torchbind.differential import differential as differential_check
from conformance.engine.loading import repro_lines
from conformance.runner import run_class
from conformance.core.registry import REGISTRY
from conformance.runner import Engine
from conformance.core.settings import DEFAULT_EXAMPLES, Settings
from conformance.engine.values import ArgumentSet, Value

from conftest import TORCH_SPEC

SEQUENCE_BUGS = ["queue_pop_keeps", "config_add_no_evict", "queue_pop_empty_last"]
CI = settings.get_profile(engine.CI_PROFILE)
RANDOM = settings(settings.get_profile(engine.DEV_PROFILE), database=None)


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library, registers the correct fakes

    return "samples"


_ENGINES = [Engine()]  # the engine context_for() uses: the last one (fixtures push their own)


def context_for(qualname):
    return _ENGINES[-1].context(qualname)


@contextlib.contextmanager
def _using(engine: Engine):
    _ENGINES.append(engine)
    try:
        yield engine
    finally:
        _ENGINES.remove(engine)


@pytest.fixture
def overrides():
    """An empty registry for conformance.strategy, and an engine of its own."""
    with REGISTRY.scratch(), _using(Engine()) as engine:
        yield engine


@pytest.fixture
def load_code():
    """Makes context_for() use an engine whose reproducers load the given --torchbind-load specs."""
    depth = len(_ENGINES)

    def use(*specs):
        lines = [line for spec in specs for line in repro_lines(spec)]
        _ENGINES.append(Engine(Settings(load_code=tuple(lines))))

    yield use
    del _ENGINES[depth:]


def _bug(name):
    from sample_classes.broken import by_name

    return by_name(name)


def _run_script(path, timeout=240):
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})


# ----- the sequence-dependent broken fakes --------------------------------------------------------------------


@pytest.mark.parametrize("name", SEQUENCE_BUGS)
def test_sequence_bug_passes_every_single_call_check(samples, name):
    bug = _bug(name)
    assert bug.check == "differential"
    others = {c.name for c in all_checks()} - {"differential", "matrix"}
    with bug.installed():
        outcomes = run_class(bug.qualname, only=others)
    assert {o.check for o in outcomes} >= {"agreement", "return_type", "roundtrip", "signature", "deepcopy"}
    assert [(o.check, o.target, o.status) for o in outcomes if o.status != "passed"] == []


@pytest.mark.process
@pytest.mark.parametrize("name", SEQUENCE_BUGS)
def test_sequence_bug_is_caught_with_a_short_sequence_and_a_script_that_shows_it(samples, name, tmp_path,
                                                                                 load_code):
    bug = _bug(name)
    load_code("sample_classes", f"sample_classes.broken:install_{name}")
    with bug.installed():
        run = engine.run_differential(context_for(bug.qualname), settings=CI, examples=engine.DEFAULT_EXAMPLES)
    drift = run.drift
    assert drift is not None, f"{name} ({bug.rule}) was not caught: {run.summary()}"
    assert drift.steps[-1][0].label == bug.method
    calls = len(drift.steps) + (drift.phase in ("observer", "state"))
    assert 2 <= calls <= 4, [r.code(a) for r, a in drift.steps]  # needs two calls; shrunk to a handful
    script = engine.repro_script(context_for(bug.qualname), drift)
    path = tmp_path / f"repro_{name}.py"
    path.write_text(script)
    result = _run_script(path)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "<-- DIFFERS" in out and "DISAGREEMENT: the C++ object and its fake differ at" in out, out
    for rule, args in drift.steps:
        assert rule.code(args) in out
    if drift.observer:
        assert f"obj.{drift.observer}()" in out


def test_the_check_reports_the_method_the_sequence_and_the_reproducer(samples, load_code):
    bug = _bug("config_add_no_evict")
    load_code("sample_classes", "sample_classes.broken:install_config_add_no_evict")
    with bug.installed(), settings_loaded(engine.CI_PROFILE):
        [outcome] = run_class("samples::Config", only={"differential"}, engine=_ENGINES[-1])
    [failure] = outcome.failures
    assert outcome.check == "differential" and failure.target == "add"
    # drifted: an observer after the calls, or a fake made from the C++ object's state, disagrees
    assert failure.summary.startswith("after ")
    assert failure.rule in ("differential.observer-drifts", "differential.state-drifts"), failure.rule
    text = outcome.render()
    assert "shortest failing sequence found" in text
    assert "obj.add(" in failure.call
    assert "| sample_classes.broken.install_config_add_no_evict()" in text
    assert "| observe(1, ['total', 'tags', 'stats'], state_changed=True)" in text


# ----- values past the small ones -------------------------------------------------------------------------


def test_a_fake_wrong_only_past_small_values_passes_single_calls_and_fails_the_differential(samples):
    """A formula copied from a one-node setup (a step past 8 counted as 8): the fixed argument sets of the
    single-call checks stay in -2..8 and agree; the differential draws ints up to INT_BOUND and names the method.
    Plain torch: a compiled program reads the fake's result for a step of 16 and burns it in."""
    from conformance.engine.type_strategies import INT_BOUND

    bug = _bug("counter_increment_one_node")
    with bug.installed():
        torch._dynamo.reset()
        try:
            program = torch.compile(lambda c, x: x + c.increment(16), backend="eager", fullgraph=True)
            assert program(torch.classes.samples.Counter(2), torch.zeros(1)).tolist() == [10.0]  # the fake's 2 + 8
        finally:
            torch._dynamo.reset()
        assert torch.classes.samples.Counter(2).increment(16) == 18  # eager
        outcomes = run_class(bug.qualname, only={"agreement", "custom_op", "differential"},
                             engine=Engine(Settings(examples=DEFAULT_EXAMPLES)))
    by_check = {(o.check, o.target): o for o in outcomes}
    assert by_check[("agreement", "increment")].status == "passed"  # its fixed draws are small
    differential = by_check[("differential", None)]
    assert differential.status == "failed", differential.render()
    [failure] = differential.failures
    assert failure.target == "increment" and failure.rule in _DRIFT_RULES, failure.rule
    step = int(failure.call.split("obj.increment(", 1)[1].split(")", 1)[0])
    assert 8 < step <= INT_BOUND  # shrunk to a value past the small range, not below it
    assert f"int arguments without a strategy drawn from -2..8 and -{INT_BOUND}..{INT_BOUND}" in \
        _passing_summary(samples)


_DRIFT_RULES = ("differential.call-differs", "differential.observer-drifts", "differential.state-drifts")


def _passing_summary(samples) -> str:
    run = engine.run_differential(context_for("samples::Counter"), settings=CI, examples=20)
    assert run.drift is None
    return run.summary()


# ----- correct fakes --------------------------------------------------------------------------------------


@pytest.mark.budget
@pytest.mark.parametrize("qualname", ["samples::TensorQueue", "samples::Counter", "samples::Config"])
def test_correct_fakes_pass_over_the_default_budget_repeatedly(samples, qualname):
    ctx, budget = context_for(qualname), engine.DEFAULT_EXAMPLES
    runs = [engine.run_differential(ctx, settings=CI, examples=budget)]
    runs.append(engine.run_differential(ctx, settings=RANDOM, seed=1, examples=budget))
    for run in runs:
        assert run.drift is None, run.summary()
        assert run.settings.max_examples == budget
        assert run.sequences >= budget and run.steps > run.sequences


def test_plan_splits_observers_from_steps_and_favours_state_changing_calls(samples):
    plan = engine.plan_for(context_for("samples::TensorQueue"))
    assert plan.observers == ["top", "size", "clone_queue", "get_raw_queue"]
    assert [(r.label, r.weight) for r in plan.rules] == [
        ("push", 3), ("pop", 3), ("for_each_add_", 1), ("for_each_add_", 1), ("push_scaled", 3),
        ("queue_size_like", 1)]
    assert [r.op is not None for r in plan.rules] == [False, False, False, True, True, True]
    # push_scaled takes the object as its third argument: the rule calls it there.
    [scaled] = [r for r in plan.rules if r.label == "push_scaled"]
    assert scaled.callee.position == 2 and scaled.code(scaled.ordinary).endswith(", obj)")
    config = engine.plan_for(context_for("samples::Config"))
    # total(fallback=None) observes without arguments, and is still a step: its argument is worth drawing.
    assert config.observers == ["total", "tags", "stats"] and "total" in [r.name for r in config.rules]


@pytest.mark.parametrize("name", SEQUENCE_BUGS)
def test_two_call_sequences_run_first_so_a_random_profile_catches_them_too(samples, name):
    bug = _bug(name)
    plan = engine.plan_for(context_for(bug.qualname))
    explicit = driver._explicit_programs(plan)
    labels = {tuple(plan.rules[i].label for i, _ in steps) for _, steps in explicit}
    assert ("add", "add") in labels if bug.qualname == "samples::Config" else {("push", "pop"), ("pop", "pop")} <= labels
    assert len(explicit) <= driver.MAX_EXPLICIT
    with bug.installed():
        run = engine.run_differential(context_for(bug.qualname), settings=RANDOM, examples=1)
    assert run.drift is not None and run.drift.steps[-1][0].label == bug.method


def test_passing_item_says_what_it_drove_and_what_it_left_out(samples, capsys):
    with _bug("queue_missing_top").installed(), _using(Engine(Settings(examples=10))):
        assert differential_check(context_for("samples::TensorQueue"), None) == []
    out = capsys.readouterr().out
    assert "samples::TensorQueue: " in out and "rules: push, pop" in out and "observers: size()" in out
    assert "not driven: top: not driven, the fake class does not define it " \
           "(see torchbind[samples.TensorQueue]::coverage[top])" in out


# ----- strategies -----------------------------------------------------------------------------------------


def test_tensor_strategy_reaches_every_dtype_layout_and_degenerate_shape():
    seen = set()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(engine.tensor_strategy())
    def draw(value):
        t = value.make()
        seen.add(str(t.dtype))
        seen.add(("dim", min(t.dim(), 2)))
        if t.numel() == 0:
            seen.add("0-size")
        if t.dim() >= 2 and t.numel() > 1 and not t.is_contiguous() and is_non_overlapping_and_dense(t):
            seen.add("transposed")
        if t.numel() > 1 and not is_non_overlapping_and_dense(t):
            seen.add("sliced")
        assert eval(value.code, {"torch": torch}).shape == t.shape  # the source rebuilds the same tensor

    draw()
    assert seen >= {"torch.float32", "torch.float64", "torch.int64", "torch.bool", ("dim", 0), ("dim", 1),
                    ("dim", 2), "0-size", "transposed", "sliced"}


def test_value_strategies_follow_the_schema_types(samples):
    ctx = context_for("samples::Config")
    schemas = ctx.info.methods
    kinds = {"fallback": schemas["total"].arguments[1].type, "xs": schemas["extend"].arguments[1].type,
             "name": schemas["tag"].arguments[1].type, "alpha": schemas["add"].arguments[2].type}
    strategies = {k: engine.value_strategy(t, ctx.class_values) for k, t in kinds.items()}
    made = {k: set() for k in kinds}

    @settings(max_examples=100, derandomize=True, database=None)
    @given(st.fixed_dictionaries(strategies))
    def draw(values):
        for k, v in values.items():
            x = v.make()
            made[k].add(type(x).__name__ if not isinstance(x, list) else f"list{len(x)}")

    draw()
    assert made["fallback"] == {"NoneType", "Tensor"}
    assert {"list0", "list1"} <= made["xs"] and made["name"] == {"str"} and made["alpha"] == {"float"}
    with pytest.raises(conformance.engine.values.UnsupportedType):
        engine.value_strategy(torch._C.AnyType.get())


def test_argument_override_is_used_for_every_call(samples, overrides):
    conformance.strategy("samples::Counter", "increment", arg=0)(lambda: st.sampled_from(["7", "-7"]))
    with _bug("counter_increment_off_by_one").installed():
        run = engine.run_differential(context_for("samples::Counter"), settings=CI)
    increments = [a for r, a in run.drift.steps if r.name == "increment"]
    assert increments and all(a.code() in ("7", "-7") for a in increments)


def test_whole_method_override_and_exclusion(samples, overrides):
    # Without pop the broken pop is never called, so nothing drifts; the item says pop was left out.
    conformance.strategy("samples::TensorQueue", "pop")(lambda: None)
    with _bug("queue_pop_keeps").installed():
        run = engine.run_differential(context_for("samples::TensorQueue"), settings=CI, examples=20)
    assert run.drift is None
    assert "pop: not driven, excluded by conformance.strategy" in run.plan.notes
    # A whole argument list as source text, keyword included.
    conformance.strategy("samples::Config", "add")(lambda: st.just("torch.ones(2, 2), alpha=0.5"))
    with _bug("config_add_no_evict").installed():
        run = engine.run_differential(context_for("samples::Config"), settings=CI)
    assert run.drift.steps[-1][1] == ArgumentSet((Value("torch.ones(2, 2)"),), (("alpha", Value("0.5")),))


def test_override_mistakes_are_reported(samples, overrides):
    conformance.strategy("samples::Counter", "incremnt")(lambda: st.just(""))
    with pytest.raises(ValueError, match="named 'incremnt'; methods: increment, value, reset, scale; "
                                         "ops .*: samples::counter_scale"):
        engine.plan_for(context_for("samples::Counter"))
    REGISTRY.clear()
    overrides.clear()
    conformance.strategy("samples::Counter", "increment", arg="step")(lambda: st.just("1"))
    with pytest.raises(ValueError, match="arg='step'"):
        engine.plan_for(context_for("samples::Counter"))
    with pytest.raises(ValueError, match="namespace::Class"):
        conformance.strategy("Counter", "increment")
    with pytest.raises(TypeError, match="draw Python source"):
        strategies._as_value(object())


# ----- settings and hypothesis's own options ----------------------------------------------------------------


class settings_loaded:
    """Load a hypothesis profile for a block (as --hypothesis-profile does) and restore the previous one."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.previous = settings.get_current_profile_name()
        settings.load_profile(self.name)

    def __exit__(self, *exc):
        settings.load_profile(self.previous)


def test_profiles_ci_dev_and_the_users_choice(monkeypatch):
    with settings_loaded("default"):
        monkeypatch.setenv("CI", "1")
        ci = engine.hypothesis_settings()
        monkeypatch.delenv("CI")
        dev = engine.hypothesis_settings()
    assert ci.derandomize and ci.database is None and ci.deadline is None
    assert not dev.derandomize and dev.database is not None and dev.deadline is None
    assert ci.max_examples == dev.max_examples == DEFAULT_EXAMPLES
    settings.register_profile("users-own", stateful_step_count=7, derandomize=True, database=None,
                              deadline=1000)
    with settings_loaded("users-own"):
        mine = engine.hypothesis_settings(11)
    assert (mine.stateful_step_count, mine.max_examples, mine.deadline) == (7, 11, None)


def test_hypothesis_seed_option_seeds_the_run(samples, monkeypatch):
    ctx = context_for("samples::Counter")

    def steps():
        return [engine.run_differential(ctx, settings=RANDOM, examples=15).steps for _ in range(2)]

    monkeypatch.setattr(hypothesis.core, "global_force_seed", 1234)  # what --hypothesis-seed=1234 sets
    first, second = steps()
    assert first == second


@pytest.mark.process
def test_plugin_item_fails_with_the_reproducer(pytester, samples, monkeypatch):
    monkeypatch.setenv("CI", "1")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--torchbind-load=sample_classes",
        "--torchbind-load=sample_classes.broken:install_queue_pop_empty_last",
        "--torchbind-class=samples::TensorQueue", "--torchbind-checks=differential", "--hypothesis-seed=5")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([
        "FAILED torchbind[[]samples.TensorQueue[]]::differential*",
    ])
    result.stdout.fnmatch_lines(["*samples::TensorQueue.pop: *", "*shortest failing sequence found*",
                                 "*| sample_classes.broken.install_queue_pop_empty_last()", "*| step(1, *"])


@pytest.mark.process
def test_an_op_taking_the_object_third_is_driven_and_reproduced(samples, tmp_path, load_code):
    bug = _bug("op_push_scaled_pushes_nothing")
    load_code("sample_classes", f"sample_classes.broken:install_{bug.name}")
    with bug.installed():
        run = engine.run_differential(context_for(bug.qualname), settings=CI)
    drift = run.drift
    assert drift is not None and drift.steps[-1][0].label == "push_scaled", run.summary()
    assert drift.steps[-1][0].code(drift.steps[-1][1]).endswith(", obj)")  # the object where the schema has it
    path = tmp_path / "repro_push_scaled.py"
    path.write_text(engine.repro_script(context_for(bug.qualname), drift))
    result = _run_script(path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "torch.ops.samples.push_scaled.default(" in result.stdout and "<-- DIFFERS" in result.stdout


# ----- torch's own classes ----------------------------------------------------------------------------------


@pytest.mark.process
def test_finds_the_aliasing_drift_in_torchs_contains_tensor(torch_test_classes, tmp_path, load_code):
    load_code(TORCH_SPEC)
    ctx = context_for("_TorchScriptTesting::_ContainsTensor")
    run = engine.run_differential(ctx, settings=CI)
    drift = run.drift
    assert [r.code(a) for r, a in drift.steps] == ["obj.get()"] and drift.observer == "get"
    assert drift.details == ["get(): C++ aliases nothing, fake aliases result of step 1"]
    path = tmp_path / "repro_contains_tensor.py"
    path.write_text(engine.repro_script(ctx, drift))
    result = _run_script(path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "aliasing [result of step 1]   <-- DIFFERS" in result.stdout, result.stdout
