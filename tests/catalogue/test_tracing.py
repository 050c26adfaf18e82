"""The ``tracing`` check: tracing a program (torch.compile, export non-strict, export strict) leaves the caller's
object as eager would, untouched. Each rule shown first with plain torch, then the verdict the plugin gives on the
sample classes (sample_classes/custom_classes.py and the TorchBind samples)."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.runner import Engine, run_class

MOD = "sample_classes.custom_classes"
STAGES = ("compile state", "export non-strict state", "export strict state")


@pytest.fixture(scope="module")
def cc():
    import sample_classes.custom_classes as module

    return module


@pytest.fixture(scope="module")
def torchbind_samples():
    import sample_classes  # noqa: F401 - builds (cached) and loads the TorchBind samples, registers their fakes
    import sample_classes.fakes_limits  # noqa: F401 - samples_limits::Stash and its fake


def tracing_of(name: str):
    """The one ``tracing`` item of the class ``name``."""
    [outcome] = run_class(name, only={"tracing"}, engine=Engine(Settings(examples=10)))
    assert outcome.check == "tracing"
    return outcome


class _Take(torch.nn.Module):
    def forward(self, obj, x):
        obj.take()
        return x + 1


# ----- an INLINED member that changes its object while it is traced -----------------------------------------------


def test_plain_torch_tracing_an_inlined_member_changes_the_real_object(cc):
    # torch.compile: the backend is handed the graph after dynamo traced it and before anything ran.
    obj, at_trace = cc.GaugeInlinedAdvances(2), []

    def backend(gm, inputs):
        at_trace.append(obj.level)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(_Take(), backend=backend, fullgraph=True)(obj, torch.ones(2))
    torch._dynamo.reset()
    assert at_trace == [3]  # take() -> advance(), a USE_REAL member, ran on the caller's object while tracing
    for strict in (False, True):  # export only traces: eager never ran, yet the object moved on
        obj = cc.GaugeInlinedAdvances(2)
        torch.export.export(_Take(), (obj, torch.ones(2)), strict=strict)
        assert obj.level == 3
    # The correct Gauge's INLINED doubled() reads through a USE_REAL member and changes nothing.
    gauge = cc.Gauge(2)

    class Doubled(torch.nn.Module):
        def forward(self, obj, x):
            return x * obj.doubled()

    torch.export.export(Doubled(), (gauge, torch.ones(2)), strict=False)
    assert gauge.level == 2


def test_an_inlined_member_that_changes_the_object_fails_naming_the_stage_and_the_member(cc):
    outcome = tracing_of(f"{MOD}.GaugeInlinedAdvances")
    assert outcome.status == Status.FAILED
    by_target = {f.target: f for f in outcome.failures}
    assert {f.rule for f in outcome.failures} == {"tracing.object-changed"}
    take = by_target["take"]
    assert take.summary.startswith("compile changed the real object while tracing a program that calls the INLINED "
                                   "member take (level changed)"), take.summary
    assert take.details == ("state level: before 0, after compile 1",)
    assert take.call == "obj.take()" and "obj.take()" in take.program
    assert "torch.compile(Program(), backend=backend, fullgraph=True)(obj, torch.ones(2))" in take.repro
    # The USE_REAL member it calls changes the object by itself, and is named too.
    assert by_target["advance"].summary.startswith("compile changed the real object while tracing a program that "
                                                   "calls the USE_REAL member advance")


# ----- correct classes pass, on evidence ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Affine", "Stepper", "Gauge", "Ticker"])
def test_correct_custom_classes_pass_with_every_stage_compared(cc, name):
    outcome = tracing_of(f"{MOD}.{name}")
    assert outcome.status == Status.PASSED, outcome.render()
    assert set(outcome.evidence.counts) == set(STAGES)


def test_a_stage_that_cannot_trace_the_program_is_skipped_and_named(cc):
    # GaugeInlinedReadsLevel.bump reads an unregistered field: torch.compile and strict export cannot trace it (the
    # inlined check fails it); this check compares what could be traced and names the rest.
    outcome = tracing_of(f"{MOD}.GaugeInlinedReadsLevel")
    assert outcome.status == Status.PASSED, outcome.render()
    [note] = outcome.notes
    assert note.startswith("not compared: compile of obj.bump(") and "UnsafeScriptObjectError" in note


# ----- TorchBind classes -------------------------------------------------------------------------------------------


def test_the_tensor_queue_passes_with_every_stage_compared(torchbind_samples):
    outcome = tracing_of("samples::TensorQueue")
    assert outcome.status == Status.PASSED, outcome.render()
    assert set(STAGES) <= set(outcome.evidence.counts)


def test_plain_torch_only_strict_export_leaves_a_fake_tensor_in_the_stash(torchbind_samples):
    class Store(torch.nn.Module):
        def forward(self, obj, x, t):
            obj.store(t)
            return x + 1

    for strict in (False, True):
        stash = torch.classes.samples_limits.Stash(torch.zeros(2, 3))
        torch.export.export(Store(), (stash, torch.ones(2), torch.ones(2, 3)), strict=strict)
        assert isinstance(stash.__obj_flatten__()[0][1], FakeTensor) == strict


def test_strict_exports_change_to_a_torchbind_object_is_noted_as_torchs_behaviour(torchbind_samples):
    # torch documents it (call_torchbind warns); the class cannot prevent it, as the matrix's export_strict cell says.
    outcome = tracing_of("samples_limits::Stash")
    assert outcome.status == Status.PASSED, outcome.render()
    [note] = [n for n in outcome.notes if n.startswith("export strict changed")]
    assert note.startswith("export strict changed the real object while tracing a program that calls the method "
                           "store (state[0][1] left a FakeTensor): torch's documented behaviour"), note
    assert set(STAGES) <= set(outcome.evidence.counts)


def test_a_torchbind_class_without_a_fake_class_is_not_called_and_says_why():
    """torch's ``_nnapi::Compilation`` has a Python constructor and no fake class; some of its methods crash the
    process on a fresh object. No stage can trace a program taking an object torch cannot fakify, so the check
    calls none of them: a skip pointing at the ``fake_class`` item (the process survives to say so)."""
    outcome = tracing_of("_nnapi::Compilation")
    assert outcome.status == Status.SKIPPED
    assert "no fake class registered for _nnapi::Compilation" in outcome.summary, outcome.summary


class Keyed:
    """A constant class that gives each object its own key (``uuid4``), which ``__eq__`` compares; ``keyed_scale``
    reads only ``factor`` and needs a 2-d input."""

    def __init__(self, factor: float):
        import uuid

        self.factor, self.key = factor, uuid.uuid4().hex

    def __eq__(self, other):
        return isinstance(other, Keyed) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __fx_repr__(self):
        return f"Keyed({self.factor!r})", {"Keyed": Keyed}


def _register_keyed():
    from sample_classes.custom_classes import register_constant

    register_constant(Keyed)

    @torch.library.custom_op("tracing_catalogue::keyed_scale", mutates_args=())
    def keyed_scale(x: torch.Tensor, k: Keyed) -> torch.Tensor:
        if x.dim() != 2:
            raise ValueError(f"keyed_scale needs a 2-d x, got {x.dim()}-d")
        return x * k.factor

    @keyed_scale.register_fake
    def _(x, k):
        return torch.empty_like(x)


_register_keyed()


def test_a_class_giving_each_object_its_own_key_is_read_not_rebuilt_and_a_refused_input_is_named():
    """Reading an object's state twice is compared on the same object (two objects of a class that keys each one
    differ without any read changing them); an op that rejects the drawn input says what it raised and on which
    input."""
    outcome = tracing_of(f"{__name__}.Keyed")
    text = outcome.reason if outcome.status == Status.SKIPPED else " ".join(outcome.notes)
    assert "reading the object's state changes it" not in text, text
    assert "ValueError: keyed_scale needs a 2-d x, got" in text and "with a0 = " in text, text


def test_a_class_giving_each_object_its_own_key_is_compared_on_one_object():
    """Given a 2-d input, the program runs in eager and every stage is compared: the state read twice is the same
    object's (two objects of a class that keys each one differ, though no read changes either)."""
    import conformance
    from hypothesis import strategies as st

    from conformance.runner import run_class as run
    from conftest import engine_of

    def register():
        conformance.strategy("tracing_catalogue::keyed_scale", arg="x")(
            lambda: st.just("torch.ones(2, 3)"))

    [outcome] = run(f"{__name__}.Keyed", only={"tracing"}, engine=engine_of(register, Settings(examples=10)))
    assert outcome.status == Status.PASSED, outcome.render()
    assert not any("reading the object's state changes it" in n for n in outcome.notes), outcome.notes
    assert {s: outcome.evidence.counts.get(s) for s in STAGES} == {s: 1 for s in STAGES}


# ----- the reproducer runs with torch and the user's module only ---------------------------------------------------


@pytest.mark.process
def test_a_custom_class_reproducer_needs_nothing_of_the_plugin(tmp_path, monkeypatch):
    import importlib
    import os

    from conftest import REGISTRATION_SOURCE

    from conformance.engine.reproducers import run_fresh

    # The trial's SamplingState, in a module of its own: _bump, a USE_REAL member, advances the RNG offset.
    (tmp_path / "tracing_sampling.py").write_text(REGISTRATION_SOURCE + """
@symbolic(guard_fn=lambda s: [s.offset], _bump=1)
class Sampling(Base):
    def __init__(self, seed: int = 0):
        self.seed, self.offset = seed, 0
    def _bump(self) -> int:
        self.offset += 1
        return self.offset
""")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    importlib.import_module("tracing_sampling")
    outcome = tracing_of("tracing_sampling.Sampling")
    bump = {f.target: f for f in outcome.failures}["_bump"]
    assert "conformance" not in bump.repro, bump.repro  # it imported conformance.custom.state for state_of
    assert "print('before:', vars(obj))" in bump.repro.splitlines()
    # Run fresh from an empty directory with the plugin made unimportable: it shows the change by itself.
    run = run_fresh("import sys\nsys.modules['conformance'] = None  # no plugin\n" + bump.repro)
    assert run.returncode == 0, run.stderr[-2000:]
    shown = dict(ln.split(": ", 1) for ln in run.stdout.splitlines() if ln.startswith(("before", "traced")))
    assert shown["before"].endswith("'offset': 0}") and shown["traced"].endswith("'offset': 1}"), run.stdout


class _Slotted:
    __slots__ = ("level", "__weakref__")

    def __init__(self):
        self.level = 0


class _Pickled:
    def __init__(self):
        self.level = 0

    def __getstate__(self):
        return {"level": self.level}


def test_the_reproducers_state_line_reads_what_state_of_reads():
    from conformance.checks.tracing import _state_source
    from conformance.custom.state import state_of

    for obj in (_Slotted(), _Pickled(), _gauge()):
        source = _state_source(obj)
        assert eval(source, {"obj": obj}) == state_of(obj), (type(obj), source)  # noqa: S307 - ours


def _gauge():
    import sample_classes.custom_classes as module

    return module.GaugeInlinedAdvances(2)
