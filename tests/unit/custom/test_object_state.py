"""The state of a custom class's object, as the checks compare it: objects without ``__dict__``, memo fields, fresh
copies, and the compiling checks with dynamo disabled. Each rule beside the plain Python/torch lines that show why
it is needed. (The rules that need classes registered for the test, or a pytest run:
tests/integration/test_custom_object_state.py.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from conformance.custom.state import fresh_copy, learn_memos, state_of, twin_differences
from conformance.runner import Engine, run_class
from conformance.core.settings import Settings


# ----- objects without __dict__ -----------------------------------------------------------------------------------

def test_a_generator_has_a_state_and_it_changes_with_manual_seed():
    g = torch.Generator().manual_seed(0)
    assert not hasattr(g, "__dict__")
    before = state_of(g)
    assert before["device"] == torch.device("cpu") and before["guard_fn(obj)"] is not None
    assert any(isinstance(v, torch.Tensor) for v in before.values())  # the RNG state, from its own __reduce__
    g.manual_seed(5)
    assert twin_differences(torch.Generator().manual_seed(0), g)  # a different seed is a different state
    assert not twin_differences(torch.Generator().manual_seed(0), torch.Generator().manual_seed(0))


PYBIND = textwrap.dedent("""
    import sys, torch, torch.distributed as dist
    from conformance.custom.state import fresh_copy, state_of
    pg = dist.ProcessGroup(dist.HashStore(), 0, 1)
    print("state:", sorted(state_of(pg)))
    print("copy:", fresh_copy(pg))
    sys.stdout.flush()
    if sys.argv[1:] == ["reduce"]:
        pg.__reduce__()   # pybind11's inherited __reduce__: the process dies here
    print("alive")
""")


@pytest.mark.process  # starts interpreters (one of them dies on purpose)
def test_a_pybind_object_is_read_through_its_properties_and_never_reduced():
    # plain pybind11: the inherited __reduce__ aborts the process
    died = subprocess.run([sys.executable, "-c", PYBIND, "reduce"], capture_output=True, text=True, timeout=300)
    assert died.returncode != 0 and "alive" not in died.stdout, died.stdout + died.stderr
    assert "instance allocation failed" in died.stderr
    # the gate reads its properties and registered members instead, and never copies it
    ok = subprocess.run([sys.executable, "-c", PYBIND], capture_output=True, text=True, timeout=300)
    assert "alive" in ok.stdout, ok.stdout + ok.stderr
    assert "'group_desc'" in ok.stdout and "copy: None" in ok.stdout


# ----- memo fields ------------------------------------------------------------------------------------------------

class Mesh:
    """Like DeviceMesh: __hash__ caches its value in a field."""

    def __init__(self, n: int):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, Mesh) and self.n == other.n

    def __hash__(self):
        if not hasattr(self, "_hash"):
            self._hash = hash(self.n)
        return self._hash


class Counted:
    """A cache written by a helper method, so only hashing a new object shows it."""

    def __init__(self, n: int):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, Counted) and self.n == other.n

    def __hash__(self):
        return self._cached()

    def _cached(self):
        self.__dict__.setdefault("memo", hash(self.n))
        return self.memo


def test_memo_fields_are_not_state():
    a, b = Mesh(2), Mesh(2)
    hash(a)
    assert vars(a) != vars(b)  # plain Python: one was hashed, the other not
    assert not twin_differences(a, b)  # the gate: the same state (__hash__ assigns self._hash)
    c, d = Counted(3), Counted(3)
    learn_memos(Counted(3))  # hashing a new object shows what the hash caches
    hash(c)
    assert vars(c) != vars(d) and not twin_differences(c, d)
    assert twin_differences(Counted(3), Counted(4)) == ["n"]


def test_a_fresh_copy_is_another_object_in_the_same_state():
    box = Mesh(1)
    assert fresh_copy(box) is not box and not twin_differences(fresh_copy(box), box)


def test_with_dynamo_disabled_the_compiling_checks_skip_saying_so(monkeypatch):
    import sample_classes.custom_classes  # noqa: F401 - registers the samples

    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")
    # plain torch: nothing is compiled, so a compiled program is eager itself and cannot disagree with it
    calls = []
    program = torch.compile(lambda x: calls.append(1) or x + 1, backend="eager", fullgraph=True)
    program(torch.ones(1)), program(torch.ones(1))
    assert calls == [1, 1]  # the Python body ran on every call: no graph was traced
    for name, check in (("StepperGuardMissesStep", "guards"), ("AffineEqIgnoresOffset", "guards")):
        outcomes = [o for o in run_class(f"sample_classes.custom_classes.{name}", skip={"matrix"},
                                         engine=Engine(Settings(examples=10))) if o.check == check]
        assert outcomes and all(o.status == "skipped" and "TORCHDYNAMO_DISABLE" in o.summary for o in outcomes), \
            [o.render() for o in outcomes]
