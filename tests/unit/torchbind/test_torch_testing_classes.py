"""The real input: torch's own TorchBind test classes (libtorchbind_test.so, namespace _TorchScriptTesting).

Every finding is pinned, so a change in what the plugin reports on real code is a visible test change. The
docs/explanation/findings.md lists the same findings with their explanation.
"""

from __future__ import annotations

from pathlib import Path

from conformance.kinds import expand_selector
from conformance.runner import Engine, run_class
from conformance.core.settings import Settings
from conftest import needs_torch_testlib

pytestmark = needs_torch_testlib  # torch's own TorchBind test classes

NO_FAKE_NO_FLATTEN = ["_DefaultArgs", "_ElementwiseInterpreter", "_FooGetterSetter", "_FooGetterSetterLambda",
                      "_FooReadWrite", "_LambdaInit", "_NoInit", "_PickleTester", "_ReLUClass",
                      "_ScalarTypeClass", "_StackString", "_StaticMethod"]

EXPECTED = {
    # torch's fakes disagree with their C++ classes
    ("_TensorQueue", "agreement", "pop"),        # empty pop: C++ returns init tensor, fake torch.empty([])
    ("_TensorQueue", "custom_op", "queue_pop"),  # same disagreement through the op's fake
    ("_TensorQueue", "coverage", "top"),
    ("_TensorQueue", "coverage", "clone_queue"),
    ("_TensorQueue", "coverage", "get_raw_queue"),
    ("_Foo", "coverage", "info"),
    ("_Foo", "coverage", "increment"),
    ("_Foo", "coverage", "add"),
    ("_Foo", "coverage", "__eq__"),
    ("_Foo", "coverage", "combine"),
    ("_Foo", "custom_op", "takes_foo_cia"),          # no Python fake: the op cannot take a FakeScriptObject
    ("_ContainsTensor", "agreement", "get"),         # get() returns a contiguous tensor; the fake keeps strides
    ("_FlattenWithTensorOp", "agreement", "get"),    # flatten returns t.sin(): dtype differs for int inputs
    ("_StackString", "deepcopy", None),              # __setstate__ ignores the state it is given
    # __obj_flatten__ hands out a tensor the caller holds (dynamo: UnsafeScriptObjectError "... is aliasing ...")
    ("_ContainsTensor", "flatten", None),            # the constructor's tensor, uncloned
    ("_TensorQueue", "flatten", None),               # the pushed tensors, uncloned (as in the seed)
    # differential (call sequences): the same single-call disagreement, shrunk to one call ...
    ("_TensorQueue", "differential", None),          # pop() on the empty example
    # ... and a two-call drift: C++ get() returns a fresh tensor each time, the fake returns its stored tensor,
    # so two get() results alias each other on the fake side only
    ("_ContainsTensor", "differential", None),
    ("_FlattenWithTensorOp", "differential", None),
    *((name, "fake_class", None) for name in NO_FAKE_NO_FLATTEN),
    *((name, "flatten", None) for name in NO_FAKE_NO_FLATTEN),
}


#: The verdict catalogue's folder, whose cross-check of named items this test shares.
CATALOGUE = Path(__file__).resolve().parents[2] / "catalogue"


def test_findings_on_torch_shipped_classes(torch_test_classes, monkeypatch):
    monkeypatch.syspath_prepend(str(CATALOGUE))  # run alone, pytest has not put the catalogue on sys.path
    from test_torch_builtin_torchbind import assert_references_collected

    found, engine = set(), Engine(Settings(examples=10))  # the differential findings need no more than this
    for qualname in expand_selector("_TorchScriptTesting::*"):
        outcomes = run_class(qualname, skip={"matrix"}, engine=engine)
        assert_references_collected(qualname, outcomes, engine)  # every item a verdict names is one of the class's
        for outcome in outcomes:
            for failure in outcome.failures:
                assert "could not complete" not in failure.summary, outcome.render()
                found.add((qualname.split("::")[1], outcome.check, outcome.target))
    assert found == EXPECTED


def test_a_class_without_constructor_is_a_skip_asking_for_examples(torch_test_classes):
    """_NoInit binds no constructor: nothing to build objects from, so the plugin cannot judge it and says what to
    give (a skip; it used to fail "has no constructor")."""
    [outcome] = run_class("_TorchScriptTesting::_NoInit", only={"examples"})
    assert outcome.status == "skipped"
    assert outcome.reason.startswith("_TorchScriptTesting::_NoInit has no constructor usable from Python")
    assert "@conformance.examples('_TorchScriptTesting::_NoInit')" in outcome.reason


def test_an_op_the_real_class_rejects_everywhere_is_not_compared(torch_test_classes):
    # takes_foo_python_meta has only a Python Meta kernel: eager raises on every call (no CPU kernel), so no
    # program using it runs and there is nothing to hold its fake to. Not a failure, not a pass: a skip that says
    # so, and a note that the fake returns where C++ raises.
    [outcome] = [o for o in run_class("_TorchScriptTesting::_Foo", only={"custom_op"})
                 if o.target == "takes_foo_python_meta"]
    assert outcome.status == "skipped"
    # One error whatever the object and arguments: said as such, not as arguments to draw differently.
    assert outcome.reason.startswith("the C++ op raised the same error on all ")
    assert "nothing was compared" in outcome.reason
    assert "NotImplementedError" in outcome.reason or "Could not run" in outcome.reason


def test_tensor_queue_empty_pop_finding_is_explained(torch_test_classes):
    [outcome] = [o for o in run_class("_TorchScriptTesting::_TensorQueue", only={"agreement"}) if o.target == "pop"]
    [failure] = outcome.failures
    assert failure.call == "obj.pop()"
    assert failure.cpp.startswith("returned Tensor(shape=[2, 3]")
    assert failure.fake.startswith("returned Tensor(shape=[]")
    assert "result.shape: C++ [2, 3], fake []" in failure.details
