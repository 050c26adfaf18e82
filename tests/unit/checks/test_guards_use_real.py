"""``guards`` on a ``USE_REAL`` member that changes its object (a new user's trial, issue 31): torch evaluates a
``USE_REAL`` member once, on the real object, while compiling, and bakes the result into the program, so the program
returns the first result on every later call whatever ``guard_fn`` returns. The trial's verdict blamed ``guard_fn``
for not covering 'temperature' (a field the member never reads); the verdict names the real cause. Shown first with
plain torch: even a ``guard_fn`` covering every field leaves the program stale.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.runner import run_class

from conftest import REGISTRATION_SOURCE, engine_of

SOURCE = REGISTRATION_SOURCE + '''
class Sampling(Base):
    """The trial's SamplingState: _bump advances the RNG offset and is registered USE_REAL."""
    def __init__(self, temperature: float = 1.0, seed: int = 0):
        if temperature <= 0:
            raise ValueError("temperature must be positive")
        self.temperature, self.seed, self.offset = temperature, seed, 0
    def set_temperature(self, t: float):
        if t <= 0:
            raise ValueError("temperature must be positive")
        self.temperature = t
    def _bump(self) -> int:
        self.offset += 1
        return self.offset

class SamplingById(Sampling):
    """guard_fn=id, as the trial wrote it ("the state is per request")."""

class SamplingFullyGuarded(Sampling):
    """guard_fn covers every field: still stale."""

symbolic(guard_fn=lambda s: [id(s)], temperature=1, _bump=1)(SamplingById)
symbolic(guard_fn=lambda s: [s.temperature, s.seed, s.offset], temperature=1, _bump=1)(SamplingFullyGuarded)
'''


@pytest.fixture(scope="module")
def ur():
    name = "guards_use_real"
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(SOURCE, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - ours
    return module


def test_plain_torch_a_use_real_member_that_changes_its_object_is_stale_whatever_guard_fn_returns(ur):
    torch._dynamo.reset()
    program = torch.compile(lambda s: s._bump(), backend="eager", fullgraph=True)
    obj = ur.SamplingFullyGuarded(0.5)
    assert [program(obj) for _ in range(3)] == [1, 1, 1]  # evaluated once, while compiling; baked in
    assert obj.offset == 1  # the program never calls it again
    twin = ur.SamplingFullyGuarded(0.5)
    assert [twin._bump() for _ in range(3)] == [1, 2, 3]  # eager
    torch._dynamo.reset()


@pytest.mark.parametrize("cls", ["SamplingById", "SamplingFullyGuarded"])
def test_guards_names_the_use_real_member_not_guard_fn(ur, cls):
    [outcome] = [o for o in run_class(f"guards_use_real.{cls}", only={"guards"},
                                      engine=engine_of(None, Settings(examples=10))) if o.target == "_bump"]
    assert outcome.status is Status.FAILED, outcome.render()
    [failure] = outcome.failures
    text = failure.render(outcome.qualname, outcome.target)
    assert failure.rule == "guards.compiled-differs", text
    assert f"{cls}._bump is registered USE_REAL, but calling it changes the object (offset: 0 -> 1)" in text, text
    assert "no guard_fn can fix this): register _bump as INLINED" in text and "or make it a custom op" in text
    assert "is not guarded" not in text and "'temperature'" not in text  # guard_fn is not the cause
    assert failure.details == ("eager:    2", "compiled: 1")


def test_a_use_real_member_that_only_reads_passes(ur):
    # temperature is only read, and guard_fn covers it: after set_temperature the program recompiles; no cause
    # to name, no failure.
    [outcome] = [o for o in run_class("guards_use_real.SamplingFullyGuarded", only={"guards"},
                                      engine=engine_of(None, Settings(examples=10))) if o.target == "temperature"]
    assert outcome.status is Status.PASSED, outcome.render()
