"""An adopter's strategy that draws random tensors (``torch.randn(3)``): every build of one drawn value is the same
tensor, so eager and a compiled program get the same inputs. Two draws gave them different inputs, and a
correct hoisted class failed ``guards`` with a difference no program made (blamed on ``hoist=True``)."""

from __future__ import annotations

import sys
import types

import pytest
import torch
from hypothesis import strategies as st

import conformance
from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.engine.values import Value, draws_randomly
from conformance.runner import run_class

from conftest import REGISTRATION_SOURCE, engine_of

SOURCE = REGISTRATION_SOURCE + '''
class Gain(Base):
    def __init__(self, k: float):
        self.k = k
    def __eq__(self, other):
        return type(other) is type(self) and other.k == self.k
    def __hash__(self):
        return hash(self.k)
    def __fx_repr__(self):
        return f"Gain({self.k!r})", {"Gain": Gain}

register(Gain, "value", hoist=True)

@torch.library.custom_op("random_values::gain", mutates_args=())
def gain(x: torch.Tensor, g: Gain) -> torch.Tensor:
    return x * g.k

@gain.register_fake
def _(x, g):
    return torch.empty_like(x)
'''


@pytest.fixture(scope="module")
def module():
    name = "random_values"
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    exec(compile(SOURCE, f"<{name}>", "exec"), mod.__dict__)  # noqa: S102 - ours
    return mod


def test_every_build_of_a_random_value_is_the_same_tensor_and_the_generator_is_left_alone():
    value = Value("torch.randn(3)")
    assert draws_randomly(value.code) and not draws_randomly("torch.arange(3.0)")
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    assert torch.equal(value.make(), value.make())
    assert torch.equal(torch.rand(1), expected_next)  # the process's generator is as it was
    assert torch.equal(Value("torch.ones(2).uniform_()").make(), Value("torch.ones(2).uniform_()").make())


def test_a_strategy_drawing_random_tensors_gives_a_correct_hoisted_class_no_false_failure(module):
    def register():
        conformance.strategy("random_values.Gain", "random_values::gain", arg="x")(lambda: st.just("torch.randn(3)"))
        conformance.strategy("random_values.Gain", "__init__")(lambda: st.sampled_from(["2.0", "3.0", "-1.0"]))

    # Plain torch: the class is right; only two draws of the input differ.
    assert not torch.equal(torch.randn(3), torch.randn(3))
    x = torch.randn(3)
    torch._dynamo.reset()
    compiled = torch.compile(lambda t, g: module.gain(t, g), backend="eager", fullgraph=True)
    assert torch.equal(compiled(x, module.Gain(2.0)), module.gain(x, module.Gain(2.0)))
    torch._dynamo.reset()
    [outcome] = run_class("random_values.Gain", only={"guards"}, engine=engine_of(register, Settings(examples=10)))
    assert outcome.status is Status.PASSED, outcome.render()
