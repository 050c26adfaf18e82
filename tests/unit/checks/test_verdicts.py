"""Verdicts a CI gate can trust: no item passes without having compared anything, binding patterns that are
correct are not reported (def_static methods, c10::IValue results, dunders, object arguments), and rules torch
enforces at compile time are found by the conformance checks themselves (flatten keys kept as attributes,
flattened tensors that are copies)."""

from __future__ import annotations

import pytest
import torch

import conformance
from conformance.matrix.torchbind.run import run_cell
from conformance.matrix.torchbind.rows import row_names, scenario
from conformance.runner import run_class
from conformance.runner import Engine
from conftest import engine_of

PATTERNS = ("samples_patterns::Versioned", "samples_patterns::AnyBox", "samples_patterns::Bag",
            "samples_patterns::CopyingHolder")


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library, registers the correct fakes

    return "samples_patterns"


@pytest.fixture(scope="module")
def broken_cpp(samples):
    import sample_classes.fakes_broken  # noqa: F401

    return "samples_broken"


def _outcomes(qualname, **kw):
    return {(o.check, o.target): o for o in run_class(qualname, **kw)}


# ----- no false green ----------------------------------------------------------------------------------------


def test_no_per_call_check_passes_when_no_object_can_be_fakified(broken_cpp):
    # FlattenWrongStructure's __obj_flatten__ is malformed: no example object can be fakified.
    outcomes = _outcomes("samples_broken::FlattenWrongStructure", only={"flatten", "roundtrip", "agreement",
                                                                          "return_type", "differential"})
    assert outcomes[("roundtrip", None)].status == "failed"
    for key in [("agreement", "get"), ("return_type", "get"), ("differential", None)]:
        outcome = outcomes[key]
        assert outcome.status == "skipped", key
        assert outcome.reason == ("no example object of samples_broken::FlattenWrongStructure could be fakified, "
                                  "so nothing was compared (see torchbind[samples_broken.FlattenWrongStructure]::"
                                  "roundtrip)")


def test_without_flatten_the_skip_points_at_the_flatten_item(broken_cpp, samples):
    from sample_classes.fakes_broken import FakeFlattenDup
    from torch._library.fake_class_registry import global_fake_class_registry

    key = "__torch__.torch.classes.samples_broken.NoFlatten"
    global_fake_class_registry._registered_class[key] = FakeFlattenDup  # any fake: it cannot be used anyway
    try:
        outcomes = _outcomes("samples_broken::NoFlatten", only={"agreement"})
    finally:
        global_fake_class_registry._registered_class.pop(key)
    [outcome] = outcomes.values()
    assert outcome.status == "skipped" and outcome.reason.endswith("::flatten)")


def test_with_roundtrip_baselined_nothing_turns_green(pytester, broken_cpp):
    baseline = pytester.path / "b.json"
    args = ("-p", "no:cacheprovider", "--torchbind-load=sample_classes",
            "--torchbind-load=sample_classes.fakes_broken", "--torchbind-class=samples_broken::FlattenWrongStructure",
            "--torchbind-checks=flatten,roundtrip,agreement,return_type,custom_op,differential",
            f"--torchbind-baseline={baseline}", "--torchbind-isolation=none", "-rA")
    pytester.runpytest_inprocess(*args, "--torchbind-accept")
    result = pytester.runpytest_inprocess(*args)
    assert result.ret == 0
    outcomes = result.parseoutcomes()
    assert "passed" not in outcomes, result.stdout.str()  # every item is a known failure or a skip
    assert outcomes["xfailed"] >= 2 and outcomes["skipped"] >= 2


# ----- no false red --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("qualname", PATTERNS)
def test_correct_fakes_of_the_binding_patterns_pass(samples, qualname):
    outcomes = run_class(qualname, skip={"matrix"})
    bad = [(o.check, o.target, o.reason, o.render()) for o in outcomes
           if o.status == "failed" or (o.status == "skipped" and "could be fakified" in (o.reason or ""))]
    assert bad == []


def test_def_static_methods_are_part_of_the_class(samples):
    ctx = Engine().context("samples_patterns::Versioned")
    assert set(ctx.info.static_methods) == {"version", "clamp"}
    outcomes = _outcomes("samples_patterns::Versioned", only={"coverage", "extra_methods", "signature"})
    assert ("coverage", "clamp") not in outcomes  # a fake need not define a static method
    assert outcomes[("extra_methods", None)].status == "passed"
    assert outcomes[("signature", "clamp")].status == "passed"  # both have it: the signature is checked
    from sample_classes.broken import by_name

    with by_name("versioned_static_signature").installed():
        outcome = _outcomes("samples_patterns::Versioned", only={"signature"})[("signature", "clamp")]
    assert outcome.status == "failed" and outcome.failures[0].rule == "signature.arity"
    assert "the fake takes 3 positional argument(s) after self, C++ takes 2" in outcome.failures[0].details


def test_an_ivalue_result_accepts_any_annotation_and_is_held_to_what_cpp_returned(samples):
    outcomes = _outcomes("samples_patterns::AnyBox", only={"signature", "return_type"})
    assert outcomes[("signature", "get")].status == "passed"  # annotated Union[int, Tensor]; the schema says Any
    assert outcomes[("return_type", "get")].status == "passed"
    from sample_classes.broken import by_name

    with by_name("anybox_get_str").installed():
        outcome = _outcomes("samples_patterns::AnyBox", only={"return_type"})[("return_type", "get")]
    [failure] = outcome.failures
    assert failure.rule == "return_type.returned-type"
    assert failure.summary.startswith("the schema's return type is Any (a c10::IValue); on this call C++ "
                                      "returned a int")
    assert failure.fake == "result: expected int, got str '0'"


def test_object_arguments_reach_the_fake_fakified(samples):
    # FakeBag.merge and __eq__ read other.wrapped_obj: only a FakeScriptObject has it.
    outcomes = _outcomes("samples_patterns::Bag", only={"agreement"})
    assert outcomes[("agreement", "merge")].status == "passed"
    assert outcomes[("agreement", "__eq__")].status == "passed"
    from sample_classes.broken import by_name

    with by_name("bag_merge_reads_real_object").installed():
        outcome = _outcomes("samples_patterns::Bag", only={"agreement"})[("agreement", "merge")]
    assert outcome.status == "failed" and outcome.failures[0].rule == "agreement.fake-raises"


def test_dunders_get_matrix_rows_through_their_operators(samples):
    ctx = Engine().context("samples_patterns::Bag")
    rows = row_names(ctx)
    for row in ("__len__", "__eq__", "operator.len", "operator.contains", "operator.getitem", "operator.eq",
                "operator.str"):
        assert row in rows
    assert "r0 = len(obj)" in scenario(ctx, "operator.len").source
    eq = scenario(ctx, "operator.eq")
    assert "def forward(self, obj, x0):" in eq.source and "r0 = obj == x0" in eq.source  # the other Bag: an input
    assert all(not c.call.callee.name.startswith("__") for c in scenario(ctx, "sequence").calls)
    # The eager reference runs the operator on the real object; a faithful backend reproduces it.
    from conformance.matrix.backends import Backend

    faithful = Backend("faithful", "test", "faithful", lambda scn, module, args: module)
    assert run_cell(ctx, "operator.len", faithful).status == "passed"


def test_tensors_attr_without_tensor_methods_says_so(samples):
    [outcome] = [o for o in run_class("samples_patterns::Versioned", only={"matrix"}, backends=("eager",))
                 if o.target == "tensors.attr-eager"]
    assert (outcome.cell.status, outcome.reason) == (
        "skipped", "no eager reference: no method that returns a tensor or nothing runs in eager on the example "
                   "objects")
    assert outcome.cell.reason == outcome.reason


# ----- rules torch enforces at compile time --------------------------------------------------------------------


def test_the_fake_must_keep_every_flattened_key_as_an_attribute(samples):
    from sample_classes.broken import by_name

    with by_name("queue_flatten_keys_renamed").installed():
        outcome = _outcomes("samples::TensorQueue", only={"roundtrip"})[("roundtrip", None)]
    failure = outcome.failures[0]
    assert failure.rule == "roundtrip.key-missing"
    assert failure.summary == ("the fake keeps no attribute for the __obj_flatten__ key(s) 'queue', 'init_tensor_'; "
                               "torch.compile reads getattr(fake, key) for every flattened key")
    assert failure.target == "__obj_unflatten__" and failure.fake == "FakeTensorQueueRenamed has attributes _init, _items"


def test_flattened_tensors_must_be_copies(samples):
    outcome = _outcomes("samples_patterns::Holder", only={"flatten"})[("flatten", None)]
    details = [d for f in outcome.failures for d in f.details]
    assert "__obj_flatten__ 't' shares storage with argument 0 of the constructor" in details
    assert "__obj_flatten__ 't' shares storage with the result of obj.get()" in details
    assert outcome.failures[0].rule == "flatten.shares-caller-storage"
    for qualname in ("samples_patterns::CopyingHolder", "samples::TensorQueue", "samples::Config"):
        assert _outcomes(qualname, only={"flatten"})[("flatten", None)].status == "passed", qualname


def test_the_aliasing_rule_is_what_dynamo_enforces(samples):
    holder = torch.classes.samples_patterns.Holder(torch.ones(2))
    compiled = torch.compile(lambda h, t: h.get() + t, backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="is aliasing"):
        compiled(holder, holder.get())
    copying = torch.classes.samples_patterns.CopyingHolder(torch.ones(2))
    torch._dynamo.reset()
    assert torch.equal(compiled(copying, copying.get()), torch.full((2,), 2.0))


# ----- example objects -------------------------------------------------------------------------------------------


def test_derive_false_keeps_only_the_factorys_states(samples):
    def queues():
        return [torch.classes.samples.TensorQueue(torch.zeros(2))]

    engine = engine_of(lambda: conformance.examples("samples::TensorQueue", derive=False)(queues))
    examples = engine.context("samples::TensorQueue").example_set.examples
    assert [e.steps for e in examples] == [()]
    engine = engine_of(lambda: conformance.examples("samples::TensorQueue")(queues))
    assert any(e.steps for e in engine.context("samples::TensorQueue").example_set.examples)
