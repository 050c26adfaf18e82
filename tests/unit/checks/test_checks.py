"""Individual checks on hand-made fakes and example factories (in-process, torch's shipped classes)."""

from __future__ import annotations

import contextlib
import itertools

import pytest
import torch
from torch._library.fake_class_registry import _full_qual_class_name, global_fake_class_registry

import conformance
from conformance.runner import run_class
from conformance.core.registry import REGISTRY
from conformance.runner import Engine
from conftest import needs_torch_testlib

pytestmark = needs_torch_testlib  # torch's own TorchBind test classes

CONTAINS = "_TorchScriptTesting::_ContainsTensor"


@contextlib.contextmanager
def fake_registered(qualname, fake):
    """Register ``fake`` straight into torch's registry (bypassing register_fake_class's own checks)."""
    key = _full_qual_class_name(qualname)
    old = global_fake_class_registry._registered_class.get(key)
    global_fake_class_registry._registered_class[key] = fake
    try:
        yield
    finally:
        if old is None:
            global_fake_class_registry._registered_class.pop(key, None)
        else:
            global_fake_class_registry._registered_class[key] = old


@pytest.fixture
def factories():
    """An empty registry for @conformance.examples, and an engine of its own (its contexts start new)."""
    with REGISTRY.scratch():
        yield Engine()


def test_unflatten_must_be_a_classmethod(torch_test_classes):
    class PlainUnflatten:
        def __obj_unflatten__(self, flat):  # not a classmethod
            return self

        def get(self):
            return None

    with fake_registered(CONTAINS, PlainUnflatten):
        [outcome] = run_class(CONTAINS, only={"fake_class"})
    assert outcome.failures[0].rule == "fake_class.unflatten-not-classmethod"


def test_method_inherited_from_object_does_not_count(torch_test_classes):
    outcomes = run_class("_TorchScriptTesting::_Foo", only={"coverage"})
    [eq] = [o for o in outcomes if o.target == "__eq__"]
    assert eq.failures[0].rule == "coverage.method-missing"
    assert "only inherited from object" in eq.failures[0].summary


def test_signature_catch_alls_and_annotations(torch_test_classes):
    class Loose:
        def __init__(self, t):
            self.t = t

        @classmethod
        def __obj_unflatten__(cls, flat):
            return cls(**dict(flat))

        def get(self, *args, **kwargs) -> int:
            return self.t

    with fake_registered(CONTAINS, Loose):
        [outcome] = run_class(CONTAINS, only={"signature"})
    details = outcome.failures[0].details
    assert outcome.failures[0].rule == "signature.var-positional"  # the first problem listed
    assert any("*args" in d for d in details) and any("**kwargs" in d for d in details)
    assert "return: annotated int, C++ returns Tensor" in details


def test_user_example_factory_is_called_for_every_fresh_object(torch_test_classes, factories):
    calls = itertools.count()

    @conformance.examples("_TorchScriptTesting::_Foo")
    def foos():
        next(calls)
        return [torch.classes._TorchScriptTesting._Foo(10, 20), torch.classes._TorchScriptTesting._Foo(1, 1)]

    examples = factories.context("_TorchScriptTesting::_Foo").example_set.examples
    assert [e.build().info() for e in examples[:2]] == [200, 1]
    first, second = examples[0].build(), examples[0].build()
    assert first is not second
    assert next(calls) > 4
    assert examples[0].code()[-1].endswith(".foos())[0]")


def test_nondeterministic_factory_is_reported(torch_test_classes, factories):
    counter = itertools.count(1)

    @conformance.examples("_TorchScriptTesting::_Foo")
    def drifting():
        n = next(counter)
        return [torch.classes._TorchScriptTesting._Foo(n, n)]

    [outcome] = run_class("_TorchScriptTesting::_Foo", only={"examples"})
    assert outcome.failures and outcome.failures[0].rule == "examples.rebuild-differs"


def test_factory_returning_the_wrong_class(torch_test_classes, factories):
    conformance.examples("_TorchScriptTesting::_Foo")(lambda: [torch.zeros(1)])
    [outcome] = run_class("_TorchScriptTesting::_Foo", only={"examples"})
    assert outcome.failures[0].rule == "examples.unbuildable"
    assert "returned Tensor at index 0, not a _TorchScriptTesting::_Foo" in outcome.failures[0].summary
    # Checks that need objects are skipped, pointing at the examples item.
    [sig] = [o for o in run_class("_TorchScriptTesting::_Foo", only={"agreement"}) if o.target == "add_tensor"]
    assert sig.reason and "::examples" in sig.reason


def test_examples_reach_empty_and_non_empty_states(torch_test_classes):
    examples = Engine().context("_TorchScriptTesting::_TensorQueue").example_set.examples
    sizes = {e.build().size() for e in examples}
    assert 0 in sizes and max(sizes) >= 2
    assert any(e.steps and e.steps[0].label == "push" for e in examples)


def test_examples_api_rejects_bad_names():
    with pytest.raises(ValueError, match="expected 'namespace::Class'"):
        conformance.examples("NoNamespace")


def test_a_dunder_only_inherited_from_object_is_reached_silently():
    # Plain torch: a fake without __str__ gives object's string under torch.compile, with no error.
    import sample_classes  # noqa: F401 - builds and loads the samples
    import sample_classes.fakes_patterns as patterns
    from sample_classes.broken import BrokenFake

    fake = patterns.FakeBag
    no_str = type("FakeBagNoStr", fake.__bases__,
                  {k: v for k, v in vars(fake).items() if k not in ("__str__", "__dict__", "__weakref__")})
    with BrokenFake(name="bag_no_str", qualname="samples_patterns::Bag", check="coverage", method="__str__",
                    rule="no __str__", fake_class=no_str).installed():
        bag = torch.classes.samples_patterns.Bag([1, 2])
        torch._dynamo.reset()
        try:
            got = torch.compile(lambda b, x: (x, str(b)), backend="aot_eager", fullgraph=True)(bag, torch.ones(1))[1]
        finally:
            torch._dynamo.reset()
        assert str(bag) == "Bag(2)" and got.startswith("<") and "FakeBagNoStr object at" in got
        [outcome] = [o for o in run_class("samples_patterns::Bag", only={"coverage"}) if o.target == "__str__"]
    assert outcome.failures[0].summary == (
        "the fake class does not define __str__ (only inherited from object); a traced program's call to it reaches "
        "object's __str__ on the fake instead of the C++ method, with no error (str(obj) compiles and gives another "
        "string than eager)")
