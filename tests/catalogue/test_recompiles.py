"""The ``recompiles`` check: a program compiled for one object of a Python custom class is reused for objects built
the same way. Each rule shown first with plain torch (torch's own compile counter and recompile reasons), then the
verdict the plugin gives on the sample classes (sample_classes/custom_classes.py) and on classes written here.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from torch._dynamo.testing import CompileCounter
from torch._dynamo.utils import guard_failures

import conformance
from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.runner import Engine, run_class

from conftest import engine_of

MOD = "sample_classes.custom_classes"


@pytest.fixture(scope="module")
def cc():
    import sample_classes.custom_classes as module

    return module


def counted_calls(op, objects):
    """One program calling ``op(x, obj)`` (dynamo, fullgraph, torch's CompileCounter backend) called with each of
    ``objects``: ``(compiles, torch's recompile reasons, first line each)``."""
    torch._dynamo.reset()
    counter = CompileCounter()
    program = torch.compile(lambda x, s: op(x, s), backend=counter, fullgraph=True)
    for obj in objects:
        program(torch.ones(1), obj)
    reasons = [r.splitlines()[0] for rs in guard_failures.values() for r in rs]
    torch._dynamo.reset()
    return counter.frame_count, reasons


def recompiles_of(name: str, engine: Engine | None = None):
    """The ``recompiles`` items of the class ``name``, by target."""
    outcomes = run_class(name, only={"recompiles"}, engine=engine or Engine(Settings(examples=30)))
    assert {o.check for o in outcomes} == {"recompiles"}
    return {o.target: o for o in outcomes}


# ----- constant (value) types -----------------------------------------------------------------------------------


def test_plain_torch_identity_equality_compiles_once_per_object(cc):
    assert counted_calls(cc.affine, [cc.Affine(2.0, 1.0) for _ in range(3)]) == (1, [])
    compiles, reasons = counted_calls(cc.affine, [cc.AffineEqIdentity(2.0, 1.0) for _ in range(3)])
    assert compiles == 3
    assert reasons and all("== AffineEqIdentity(2.0, 1.0)" in r for r in reasons)  # the __eq__ guard
    a, a2 = cc.AffineEqIdentity(2.0, 1.0), cc.AffineEqIdentity(2.0, 1.0)
    assert vars(a) == vars(a2) and a != a2


def test_recompiles_names_the_op_the_count_and_torchs_guard(cc):
    [failure] = recompiles_of(f"{MOD}.AffineEqIdentity")["affine"].failures
    assert failure.rule == "recompiles.twins-recompile"
    text = failure.render(f"{MOD}.AffineEqIdentity", "affine")
    assert "a program calling samples_custom::affine compiled 3 times for 3 AffineEqIdentity objects built the same " \
           "way (one compile suffices)" in text
    assert "torch's guard `x[1] == AffineEqIdentity(" in text  # the reason torch recorded, as it wrote it
    assert "the __eq__ guard fails: for two objects built the same way a == a2 is False" in text
    assert "compiles: 3 for 3 calls (torch._dynamo.testing.CompileCounter)" in text
    assert "counter = CompileCounter()" in failure.repro and "guard_failures" in failure.repro
    passed = recompiles_of(f"{MOD}.Affine")["affine"]
    assert passed.status == Status.PASSED and not passed.notes
    assert passed.evidence.counts["compiled call of a twin"] == 3  # evidence: three twins through one program


def test_the_reproducer_shows_the_recompiles(cc, tmp_path):
    import subprocess
    import sys

    [failure] = recompiles_of(f"{MOD}.AffineEqIdentity")["affine"].failures
    script = tmp_path / "repro.py"
    script.write_text(failure.repro)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "compiles: 3" in out.stdout and "AffineEqIdentity(" in out.stdout


# ----- symbolic (reference) types --------------------------------------------------------------------------------


def test_plain_torch_a_guard_fn_returning_the_id_compiles_once_per_object(cc):
    assert counted_calls(cc.scale, [cc.Stepper(2) for _ in range(3)]) == (1, [])
    compiles, reasons = counted_calls(cc.scale, [cc.StepperGuardById(2) for _ in range(3)])
    assert compiles == 3 and reasons and all("___check_opaque_guard_fn" in r for r in reasons)
    s = cc.StepperGuardById(2)
    program = torch.compile(lambda s: s.get_step(), backend="eager", fullgraph=True)
    assert program(s) == 2
    s.bump(3)
    assert program(s) == 5  # sound: guard_fn covers step (the guards check passes), only wasteful
    torch._dynamo.reset()


def test_recompiles_names_guard_fn_and_its_values(cc):
    items = recompiles_of(f"{MOD}.StepperGuardById")
    [failure] = items["scale"].failures
    assert failure.rule == "recompiles.twins-recompile"
    text = failure.render(f"{MOD}.StepperGuardById", "scale")
    assert "a program calling samples_custom::scale compiled 3 times for 3 StepperGuardById objects" in text
    assert "torch's guard `___check_opaque_guard_fn` failed for each new object" in text
    assert "the guard_fn guard fails: guard_fn returned [" in text and "for another built the same way" in text
    assert recompiles_of(f"{MOD}.Stepper")["scale"].status == Status.PASSED
    # Wasteful, not unsound: every other item of the class passes, guards (a change to step is guarded) included.
    others = run_class(f"{MOD}.StepperGuardById", skip={"matrix"}, engine=Engine(Settings(examples=30)))
    assert {(o.check, o.target): o.status for o in others if o.status != Status.PASSED} == \
        {("recompiles", "scale"): Status.FAILED}
    assert {("guards", "get_step"), ("guards", "scale")} <= {(o.check, o.target) for o in others}


def test_the_other_samples_pass_or_say_why_not(cc):
    """Wrong equality that keeps twins equal, hoisted classes, an op changing its object: one compile each; an op
    that does not compile is the fake_kernel item's finding."""
    for name in ("AffineEqIgnoresOffset", "AffineHashById", "AffineHoisted", "AffineReprDropsOffset",
                 "StepperGuardMissesStep", "Ticker"):
        for target, outcome in recompiles_of(f"{MOD}.{name}").items():
            assert outcome.status == Status.PASSED, (name, target, outcome.render())
    widen = recompiles_of(f"{MOD}.StepperFakeReadsStep")["widen"]
    assert widen.status == Status.SKIPPED and "the fake_kernel[widen] item judges" in widen.reason


# ----- objects that differ only in a field no result depends on: a note, never a failure -------------------------


class Labelled:
    """A constant class whose ``__eq__`` compares a ``label`` that the op taking it never reads."""

    def __init__(self, factor: float, label: str):
        self.factor, self.label = factor, label

    def __eq__(self, other):
        return isinstance(other, Labelled) and (self.factor, self.label) == (other.factor, other.label)

    def __hash__(self):
        return hash((self.factor, self.label))

    def __fx_repr__(self):
        return f"Labelled({self.factor!r}, {self.label!r})", {"Labelled": Labelled}

    def __repr__(self):  # torch writes the guard with it
        return f"Labelled({self.factor!r}, {self.label!r})"


class Rejected:
    """A constant class whose op rejects every object."""

    def __init__(self, n: int):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, Rejected) and self.n == other.n

    def __hash__(self):
        return hash(self.n)

    def __fx_repr__(self):
        return f"Rejected({self.n!r})", {"Rejected": Rejected}


_SERIALS = itertools.count()


class Serial:
    """A constant class that numbers its objects and compares the number (a type tag per object): no two objects
    are equal, and the op taking it never reads the number."""

    def __init__(self, factor: float):
        self.factor, self.serial = factor, next(_SERIALS)

    def __eq__(self, other):
        return isinstance(other, Serial) and (self.factor, self.serial) == (other.factor, other.serial)

    def __hash__(self):
        return hash((self.factor, self.serial))

    def __fx_repr__(self):
        return f"Serial({self.factor!r})", {"Serial": Serial}

    def __repr__(self):
        return f"Serial({self.factor!r})#{self.serial}"


def _register():
    from sample_classes.custom_classes import register_constant

    register_constant(Labelled)
    register_constant(Rejected)
    register_constant(Serial)

    @torch.library.custom_op("recompiles_catalogue::times_serial", mutates_args=())
    def times_serial(x: torch.Tensor, s: Serial) -> torch.Tensor:
        return x * s.factor

    @times_serial.register_fake
    def _(x, s):
        return torch.empty_like(x)

    @torch.library.custom_op("recompiles_catalogue::times", mutates_args=())
    def times(x: torch.Tensor, s: Labelled) -> torch.Tensor:
        return x * s.factor

    @times.register_fake
    def _(x, s):
        return torch.empty_like(x)

    @torch.library.custom_op("recompiles_catalogue::refuse", mutates_args=())
    def refuse(x: torch.Tensor, r: Rejected) -> torch.Tensor:
        raise ValueError("this op accepts no object")

    @refuse.register_fake
    def _(x, r):
        return torch.empty_like(x)

    return times, times_serial


_times, _times_serial = _register()


def labelled():
    return [Labelled(2.0, "a"), Labelled(2.0, "b"), Labelled(3.0, "a")]


def test_plain_torch_a_field_no_result_reads_still_recompiles():
    compiles, reasons = counted_calls(_times, [Labelled(2.0, "a"), Labelled(2.0, "a"), Labelled(2.0, "b")])
    assert compiles == 2 and reasons and "== Labelled(2.0, 'a')" in reasons[0]
    assert torch.equal(_times(torch.ones(1), Labelled(2.0, "a")), _times(torch.ones(1), Labelled(2.0, "b")))


def test_a_recompile_for_a_field_no_result_reads_is_a_note():
    engine = engine_of(lambda: conformance.examples(f"{__name__}.Labelled")(labelled), Settings(examples=10))
    outcome = recompiles_of(f"{__name__}.Labelled", engine)["times"]
    assert outcome.status == Status.PASSED and not outcome.failures, outcome.render()
    [note] = outcome.notes
    assert "recompiles_catalogue::times gives the same result for Labelled(" in note
    assert "compiled again for an object that differs only in label" in note
    assert "Not a finding: those inputs may just not tell label apart" in note  # never advice to drop a guard
    assert "torch's guard: `x[1] == Labelled(" in note and "2 compiles so far" in note
    assert outcome.evidence.counts["compiled call of an object giving the same result"] == 1


def test_plain_torch_objects_numbered_by_their_class_recompile_per_object():
    compiles, reasons = counted_calls(_times_serial, [Serial(2.0) for _ in range(3)])
    assert compiles == 3 and reasons and "== Serial(2.0)#" in reasons[0]


def test_objects_the_class_numbers_one_by_one_recompile_per_object_and_fail():
    """No two objects are twins (the class gives each its own serial number, which __eq__ compares), yet the user
    builds them with one constructor call and the op gives them one result: every new object compiles the program
    again (torch raises at its recompile_limit under fullgraph=True), so the rule fails, naming the field."""
    outcome = recompiles_of(f"{__name__}.Serial")["times_serial"]
    assert outcome.status == Status.FAILED, outcome.render()
    [failure] = outcome.failures
    assert failure.rule == "recompiles.twins-recompile"
    text = failure.render(outcome.qualname, outcome.target)
    assert "compiled 3 times for 3 Serial objects built the same way (the class gives each object its own " \
           "'serial', and the op gives them the same result" in text, text
    assert "torch's guard `x[1] == Serial(" in text
    assert "the __eq__ guard fails: for two objects built the same way a == a2 is False" in text
    assert outcome.evidence.counts["compiled call of an object built the same way"] == 3


def test_an_op_that_rejects_every_object_is_not_a_pass():
    outcome = recompiles_of(f"{__name__}.Rejected")["refuse"]
    assert outcome.status == Status.SKIPPED
    assert "raised ValueError in eager" in outcome.reason and "the check compared nothing" in outcome.reason
    assert f"@conformance.examples({f'{__name__}.Rejected'!r})" in outcome.reason


# ----- TorchBind classes: twins never recompile (why the check has no TorchBind variant) -------------------------


def test_plain_torch_torchbind_twins_compile_once():
    """dynamo guards a ScriptObject on its ``__obj_flatten__()`` values, never its identity: twins reuse the
    program, for an op and for methods; only another state (a specialised int) compiles again."""
    import sample_classes  # noqa: F401 - builds (cached) and loads the TorchBind samples

    def compiles(fn, make):
        torch._dynamo.reset()
        counter = CompileCounter()
        program = torch.compile(fn, backend=counter, fullgraph=True)
        for obj in make():
            program(torch.ones(2), obj)
        reasons = [r.splitlines()[0] for rs in guard_failures.values() for r in rs]
        torch._dynamo.reset()
        return counter.frame_count, reasons

    counters = lambda *ns: [torch.classes.samples.Counter(n) for n in ns]  # noqa: E731
    queues = lambda: [torch.classes.samples.TensorQueue(torch.ones(2)) for _ in range(3)]  # noqa: E731
    assert compiles(lambda x, c: torch.ops.samples.counter_scale(c, x), lambda: counters(3, 3, 3)) == (1, [])
    assert compiles(lambda x, c: c.scale(x), lambda: counters(3, 3, 3)) == (1, [])
    assert compiles(lambda x, q: torch.ops.samples.queue_size_like(q, x), queues) == (1, [])
    assert compiles(lambda x, q: x + q.top(), queues) == (1, [])
    n, reasons = compiles(lambda x, c: torch.ops.samples.counter_scale(c, x), lambda: counters(0, 1, 2))
    assert n == 2 and "__obj_flatten__()" in reasons[0]  # state, not identity
