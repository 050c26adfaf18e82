"""The checks on the sample classes: correct fakes pass, and each deliberately broken fake is caught by the
check for the rule it breaks, naming the method."""

from __future__ import annotations

import pytest

from conformance.kinds import expand_selector
from conformance.runner import Engine, run_class
from conformance.core.settings import DEFAULT_EXAMPLES, Settings

#: The differential test's budget in these sweeps over every check: its explicit two-call sequences plus a few
#: random ones. Its own rule (``check == "differential"``) gets the default budget, and
#: tests/unit/torchbind/test_differential.py runs the correct fakes over the default budget repeatedly.
SWEEP = Settings(examples=10)


#: The rule id each broken fake breaks: its check reports it with a failure of that id (for the differential's,
#: hypothesis may find the drift through a call, an observer or the state first).
_DRIFT = ("differential.call-differs", "differential.observer-drifts", "differential.state-drifts")
RULE_IDS = {
    "counter_no_fake_class": "fake_class.missing", "queue_missing_top": "coverage.method-missing",
    "counter_missing_reset": "coverage.method-missing", "counter_extra_peek": "extra_methods.unknown-method",
    "queue_push_arity": "signature.arity", "config_add_default": "signature.default-value",
    "config_add_kwname": "signature.arg-name", "counter_value_annotation": "signature.return-type",
    "config_tag_no_default": "signature.required-count", "counter_value_float": "return_type.wrong-type",
    "queue_clone_queue_tuple": "return_type.wrong-type", "config_stats_list": "return_type.wrong-type",
    "counter_increment_off_by_one": "agreement.result-differs", "queue_pop_empty_shape": "agreement.result-differs",
    "config_total_dtype": "agreement.result-differs", "queue_size_raises": "agreement.fake-raises",
    "queue_size_off_by_one": "agreement.result-differs",
    "counter_unflatten_raises": "roundtrip.fakify-raises", "op_for_each_add_missing": "custom_op.no-fake",
    "op_counter_scale_dtype": "custom_op.result-differs", "versioned_static_signature": "signature.arity",
    "anybox_get_str": "return_type.returned-type", "bag_len_off_by_one": "agreement.result-differs",
    "bag_merge_reads_real_object": "agreement.fake-raises", "queue_flatten_keys_renamed": "roundtrip.key-missing",
    "op_push_scaled_pushes_nothing": _DRIFT, "queue_pop_keeps": _DRIFT, "config_add_no_evict": _DRIFT,
    "queue_pop_empty_last": _DRIFT, "counter_increment_one_node": _DRIFT,
}


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library, registers the correct fakes

    return expand_selector("samples::*")


def _broken():
    from sample_classes.broken import BROKEN_FAKES

    return BROKEN_FAKES


def test_there_are_three_sample_classes(samples):
    assert samples == ["samples::Config", "samples::Counter", "samples::TensorQueue"]


@pytest.mark.parametrize("qualname", ["samples::Config", "samples::Counter", "samples::TensorQueue"])
def test_correct_fakes_pass_every_check(samples, qualname):
    outcomes = run_class(qualname, skip={"matrix"}, engine=Engine(SWEEP))
    checks = {o.check for o in outcomes}
    assert {"fake_class", "coverage", "signature", "return_type", "flatten", "roundtrip", "agreement",
            "deepcopy"} <= checks
    not_passed = [(o.check, o.target, o.reason, o.render())
                  for o in outcomes if o.status != "passed"]
    assert not_passed == []


def test_every_check_has_a_broken_fake():
    from sample_classes.broken import BROKEN_FAKES

    assert sorted(b.name for b in BROKEN_FAKES) == sorted(RULE_IDS)
    assert {b.check for b in BROKEN_FAKES} >= {"fake_class", "coverage", "extra_methods", "signature",
                                               "return_type", "agreement", "roundtrip", "custom_op"}


@pytest.mark.parametrize("broken", _broken(), ids=lambda b: b.name)
def test_broken_fake_is_caught_by_its_check(samples, broken):
    # A differential bug gets the default budget; any other bug is looked for by every other check (the
    # differential check's own runs on broken fakes are tests/unit/torchbind/test_differential.py's).
    if broken.check == "differential":
        settings, skip = Settings(examples=DEFAULT_EXAMPLES), {"matrix"}
    else:
        settings, skip = SWEEP, {"matrix", "differential"}
    with broken.installed():
        outcomes = run_class(broken.qualname, skip=skip, engine=Engine(settings))
    failures = [(o, f) for o in outcomes for f in o.failures]
    hits = [(o, f) for o, f in failures if o.check == broken.check and broken.method in (None, f.target or o.target)]
    assert hits, (f"{broken.name} ({broken.rule}) was not reported by {broken.check}"
                  f"[{broken.method}]; got {[(o.check, f.target or o.target) for o, f in failures]}")
    expected = RULE_IDS[broken.name]
    assert {f.rule for _, f in hits} & ({expected} if isinstance(expected, str) else set(expected)), \
        (broken.name, expected, [f.rule for _, f in hits])
    outcome, failure = hits[0]
    text = failure.render(outcome.qualname, outcome.target)
    assert broken.qualname in text
    if broken.method:
        assert broken.method in text
    # The checks run without internal errors even on broken fakes.
    assert not [f for _, f in failures if "could not complete" in f.summary]
    # Every failure names the rule it breaks, one of its own check's (docs/reference/checks.md lists them).
    assert [(o.check, f.rule) for o, f in failures if not f.rule.startswith(f"{o.check}.")] == []


def test_installed_restores_the_correct_fake(samples):
    from sample_classes.broken import by_name

    assert all(o.status == "passed" for o in run_class("samples::Counter", only={"agreement"}))
    with by_name("counter_increment_off_by_one").installed():
        assert any(o.status == "failed" for o in run_class("samples::Counter", only={"agreement"}))
    assert all(o.status == "passed" for o in run_class("samples::Counter", only={"agreement"}))


@pytest.fixture(scope="module")
def broken_cpp(samples):
    import sample_classes.fakes_broken  # noqa: F401

    return "samples_broken"


def _failures(qualname, check):
    return [f for o in run_class(qualname, only={check}) for f in o.failures]


def test_flatten_with_duplicate_names_and_aliasing_tensors(broken_cpp):
    failures = _failures("samples_broken::FlattenDup", "flatten")
    assert any(f.rule == "flatten.duplicate-name" and "repeats the name(s) 't'" in f.summary for f in failures), \
        failures
    assert any(f.rule == "flatten.aliased-tensors" for f in failures), failures


def test_flatten_that_changes_state(broken_cpp):
    rules = [f.rule for f in _failures("samples_broken::FlattenMutates", "flatten")]
    assert "flatten.nondeterministic" in rules, rules


def test_bad_tracing_mode(broken_cpp):
    [failure] = _failures("samples_broken::BadTracingMode", "tracing_mode")
    assert failure.cpp == "returned 'sometimes'"


def test_lossy_pickle_is_caught_by_deepcopy(broken_cpp):
    [failure] = _failures("samples_broken::LossyPickle", "deepcopy")
    assert failure.rule == "deepcopy.state-lost"
    assert any("deep copy gave" in d for d in failure.details), failure.details


def test_class_without_flatten_is_not_fakifiable(broken_cpp):
    [failure] = _failures("samples_broken::NoFlatten", "flatten")
    assert failure.rule == "flatten.missing"
    assert "tracing_mode" in failure.details[0]
    [no_fake] = _failures("samples_broken::NoFlatten", "fake_class")
    assert no_fake.rule == "fake_class.missing"


def test_flatten_with_the_wrong_structure(broken_cpp):
    failures = _failures("samples_broken::FlattenWrongStructure", "flatten")  # one per example object
    assert failures and all(f.rule == "flatten.structure" for f in failures), failures
    assert all(f.summary == "__obj_flatten__ returned the wrong structure: Expect flat x to be a "
                                         "tuple of tuples." for f in failures), failures
    assert failures[0].cpp.startswith("returned (Tensor(shape="), failures[0].cpp
    roundtrip = _failures("samples_broken::FlattenWrongStructure", "roundtrip")
    assert roundtrip and all(f.rule == "roundtrip.fakify-raises" for f in roundtrip)


def test_constructor_that_rejects_every_generated_argument(broken_cpp):
    outcomes = {(o.check, o.target): o for o in run_class("samples_broken::PickyInit", skip={"matrix"})}
    [failure] = outcomes[("examples", None)].failures
    assert failure.rule == "examples.unbuildable"
    assert failure.summary.startswith("could not build any samples_broken::PickyInit object: "
                                      "obj = torch.classes.samples_broken.PickyInit(")
    assert "RuntimeError: PickyInit needs n == 4242" in failure.summary
    assert "@conformance.examples('samples_broken::PickyInit')" in outcomes[("examples", None)].render()
    # Every check that needs an object is skipped, pointing at the examples item.
    assert outcomes[("agreement", "get")].reason == ("no example objects of samples_broken::PickyInit (see "
                                                      "torchbind[samples_broken.PickyInit]::examples)")


@pytest.mark.process
def test_main_job_on_the_samples_passes(pytester, samples):
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--torchbind-load=sample_classes",
                                           "--torchbind-class=samples::*", "-k", "not matrix")
    assert result.ret == 0, result.stdout.str()[-3000:]
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] > 40 and "failed" not in outcomes and "skipped" not in outcomes


@pytest.mark.process
def test_broken_fake_installed_from_the_command_line(pytester, samples):
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--torchbind-load=sample_classes",
        "--torchbind-load=sample_classes.broken:install_queue_pop_empty_shape",
        "--torchbind-class=samples::TensorQueue", "-k", "agreement")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED torchbind[[]samples.TensorQueue[]]::agreement[[]pop[]]*"])
    # The reproducer loads exactly what the command line loaded.
    result.stdout.fnmatch_lines(["*| import sample_classes", "*| import sample_classes.broken",
                                 "*| sample_classes.broken.install_queue_pop_empty_shape()"])
