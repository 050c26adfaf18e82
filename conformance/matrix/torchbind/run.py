"""How a TorchBind class's matrix cell runs (the hooks of :class:`conformance.matrix.cell.Rows`): the program is
compiled or exported with the first object and run twice — the second time on an object in another state, on the
same attribute object again, or with the program's attribute set to an object in another state — and each run's
outputs and the objects' final states (``__obj_flatten__``) must equal eager's; for ahead-of-time backends, tracing
must leave the traced object unchanged ("tracing must not mutate the real object or cause side effects", PT2
custom-class notes).
"""

from __future__ import annotations

import dataclasses

import torch

from ...core.results import NotApplicable, exception_line
from ...engine.compare import flat_state_differences
from ...torchbind.context import ClassContext
from ...torchbind.examples import read_state
from ..backends import Backend
from ..backends.export_strict import fake_tensors_left
from ..backward import BackwardScenario, run_backward
from ..cell import STATE_DIFFERS, TRACING_CHANGED_OBJECT, Difference, Rows
from ..explain import FakeCause, cannot_tell
from .backward import backward_scenario, is_backward_row
from .explain import fake_cause, output_differences, state_differences
from .repro import cell_repro
from .rows import row_family, row_names, scenario
from .scenarios import Scenario, argument_objects
from .sweep import sweep_differences

__all__ = ["TorchBindRows", "ROWS", "run_cell"]


class TorchBindRows(Rows):
    """The rows of a TorchBind class (:func:`~conformance.matrix.torchbind.rows.row_names`), each a program over
    its object run twice."""

    side = "torch"  # a hang while compiling is torch's compiler, unless the stacks say otherwise

    def names(self, ctx: ClassContext) -> list[str]:
        return row_names(ctx)

    def qualname(self, ctx: ClassContext) -> str:
        return ctx.info.qualname

    def cannot_run(self, ctx: ClassContext) -> str | None:
        """No fake class (for a class that does not trace with the real object), or example objects whose
        ``__obj_flatten__`` raises: no backend can fakify the object."""
        try:
            if not ctx.traces_with_real_object:
                ctx.require_fake()  # without a fake class no backend can fakify the object; fake_class reports it
        except NotApplicable as exc:
            return f"{exc}: no backend can fakify the object"
        flatten_error = ctx.example_set.flatten_error
        if flatten_error:  # every cell compares flattened states, and no backend can fakify such an object
            return (f"the matrix compares the object's flattened state after each program, and {ctx.info.qualname}."
                    f"__obj_flatten__() raised {flatten_error} on the example objects, so no backend can fakify it "
                    f"either (see {ctx.info.test_name}::flatten)")
        return None

    def is_backward_row(self, ctx: ClassContext, row: str) -> bool:
        return is_backward_row(ctx, row)

    def scenario(self, ctx: ClassContext, row: str) -> Scenario | BackwardScenario:
        if is_backward_row(ctx, row):
            return backward_scenario(ctx, row)
        return scenario(ctx, row)

    def program(self, scn: Scenario | BackwardScenario) -> str:
        if isinstance(scn, BackwardScenario):
            return "\n".join([scn.base.code().rstrip("\n"), *scn.program_lines]) + "\n"
        return scn.code()

    def label(self, ctx: ClassContext, row: str, backend: Backend, program: str):
        return lambda: f"scenario {row} of {ctx.info.qualname} through {backend.title} (compile and run)\n{program}"

    def run(self, ctx: ClassContext, scn: Scenario, backend: Backend) -> list[Difference]:
        """Compile/export, run twice, and list every difference from the eager reference (of the gradients, for a
        backward row)."""
        if isinstance(scn, BackwardScenario):
            return run_backward(scn, backend)
        return _run(scn, backend)

    def under_autocast(self, scn: Scenario) -> Scenario:
        """A copy of ``scn`` whose eager reference is made now, under the caller's autocast (the row's own, made
        without it, stays cached for the other columns). Another kind of scenario, which makes eager's results in
        :meth:`run`, is returned as it is."""
        if type(scn) is not Scenario:
            return scn
        again = dataclasses.replace(scn)
        again.reference  # noqa: B018 - made here, under the autocast; raises what eager raised
        return again

    def cache(self, ctx: ClassContext) -> dict:
        return ctx.cells_by_program

    def preface(self, scn: Scenario | BackwardScenario) -> list[str]:
        if isinstance(scn, BackwardScenario):
            return []
        return [f"{path}: its values differ between two identical eager runs (uninitialised memory, e.g. "
                "torch::empty), so it is compared by shape, dtype and device only"
                for path in sorted(scn.reference.unstable)]

    def repro(self, ctx: ClassContext, scn: Scenario | BackwardScenario, backend: Backend) -> str | None:
        return cell_repro(ctx, scn, backend)  # a backward row's too: its gradients' script

    def fake_cause(self, ctx: ClassContext, scn: Scenario | BackwardScenario, backend: Backend):
        # A backward row's forward is the op row's: a fake that makes that one wrong makes this one wrong too. Its
        # gradients come from the library's autograd formula (and the fakes of the ops it calls), which the replay
        # does not compare: an agreeing forward does not make its failure torch's.
        if isinstance(scn, BackwardScenario):
            cause = fake_cause(ctx, scn.base, backend)
            return cause if isinstance(cause, FakeCause) else None
        return fake_cause(ctx, scn, backend)

    def family(self, row: str) -> str:
        return row_family(row)

    def for_backend(self, scn: Scenario | BackwardScenario, backend: Backend) -> Scenario | BackwardScenario:
        """A swapped attribute scenario runs with the same object again through a backend that runs its own copy of
        the object (:attr:`~conformance.matrix.backends.Backend.swaps_attribute`)."""
        if isinstance(scn, Scenario) and scn.swap and not backend.swaps_attribute:
            return scn.unswapped
        return scn

    def told(self, scn: Scenario | BackwardScenario, backend: Backend) -> bool:
        """A backend that runs its own copy of the object (AOTInductor) is compared on outputs alone, so only an
        output that changes tells (:meth:`Scenario.tells`)."""
        if isinstance(scn, Scenario):
            return scn.tells(states=backend.state_visible)
        return scn.telling

    def unsure(self, ctx: ClassContext, scn: Scenario | BackwardScenario, backend: Backend) -> list[str]:
        if self.told(scn, backend):
            return []
        if isinstance(scn, BackwardScenario):
            return [cannot_tell("run 1's eager gradient is the one an object in the traced state gives",
                                "give example objects in states the op's gradient depends on (@conformance.examples)")]
        if scn.kept or (scn.telling and not backend.state_visible):
            what = ("no other object can be given to the program, and the same object run again gives eager the "
                    "traced object's output" if scn.kept else
                    "only the program's outputs are compared, and run 1 gives eager the traced object's output")
            return [cannot_tell(
                f"{backend.title} runs its own copy of the program's attribute object ({what})",
                "give the row state-changing calls whose effect its other calls' results read (arguments the "
                "class's mutating methods accept: conformance.strategy), so that run 1 differs; the row's "
                "torch.compile and export cells run it with the attribute swapped")]
        return [cannot_tell(
            "no example object gives this program another eager output than the traced object",
            "give example objects in states the row's calls read differently (@conformance.examples; the examples "
            "keep one object per __obj_flatten__ state), or argument strategies under which they do "
            "(conformance.strategy)")]

    def notes(self, scn: Scenario) -> list[str]:
        """How the scenario was chosen, and which objects it ran on beyond runs 0 and 1
        (:mod:`~conformance.matrix.torchbind.sweep`)."""
        notes = list(getattr(scn, "notes", ()))
        sweep = scn.sweep if isinstance(scn, Scenario) else ()  # a backward row runs its two objects only
        if sweep:
            notes.append(f"also ran on {len(sweep)} further example object{'s' if len(sweep) > 1 else ''} with run 1's "
                         f"inputs: {', '.join(e.label for e in sweep)}")
        return notes


def _run(scn: Scenario, backend: Backend) -> list[Difference]:
    """Compile/export, run twice, and list every difference from the eager reference."""
    ref = scn.reference
    diffs: list[Difference] = []
    traced = scn.first.build()
    before = read_state(traced, scn.first.tracer)
    module = scn.module(traced)
    try:
        runner = backend.prepare(scn, module, scn.args(traced, 0))
    except Exception as exc:
        changed = _traced_object_changed(scn, before, traced) if backend.ahead_of_time else []
        if changed:  # tracing ran the real object's code, changed it, then failed: the change is the cause
            return Difference.each(TRACING_CHANGED_OBJECT, changed + [
                f"then {backend.group} {backend.title} failed: {exception_line(exc, limit=300)}"])
        raise
    changed = _traced_object_changed(scn, before, traced) if backend.ahead_of_time else []
    if changed:  # strict export traced the real object (with fake tensors): say so
        diffs += Difference.each(TRACING_CHANGED_OBJECT, changed)
        traced = scn.first.build()  # run on an object in the intended state anyway
    for run in (0, 1):
        if scn.placement == "input":
            if run == 0 and not backend.ahead_of_time:
                obj = traced  # torch.compile traces on its first call, with this object
            else:
                obj = (scn.first if run == 0 else scn.second).build()
        else:
            # The object the program holds: the traced one, or the program's own copy when loading rebuilt it
            # (torch.export.load deserializes attribute constants).
            held = getattr(runner, "obj", None)
            obj = held if isinstance(held, torch.ScriptObject) else traced
            if run == 1 and scn.swap:  # the attribute of the program's module (export) or of the compiled one
                obj = scn.second.build()
                setattr(runner if isinstance(held, torch.ScriptObject) else module, "obj", obj)
        args = scn.args(obj, run)
        out = runner(*args)
        diffs += output_differences(scn, run, out, backend.side, scalars_as_tensors=backend.scalars_as_tensors)
        if backend.state_visible:
            diffs += state_differences(scn, run, read_state(obj, scn.first.tracer), backend.side)
            # Every other object the program was given (an op's second object of the class) ends as in eager.
            for k, (other, expected) in enumerate(zip(argument_objects(args, obj), ref.argument_states[run])):
                diffs += Difference.each(STATE_DIFFERS, flat_state_differences(
                    expected, read_state(other, scn.first.tracer),
                    f"run {run} state of the argument object {k + 1} (not the row's own object)",
                    ("eager", backend.side)))
    if scn.sweep:
        def run_on(obj):
            if scn.placement == "attr":
                held = getattr(runner, "obj", None)
                setattr(runner if isinstance(held, torch.ScriptObject) else module, "obj", obj)
            return runner(*scn.args(obj, 1))

        diffs += sweep_differences(scn, run_on, backend.side, states=backend.state_visible,
                                   scalars_as_tensors=backend.scalars_as_tensors)
    return diffs


def _traced_object_changed(scn: Scenario, before, traced) -> list[str]:
    """What tracing left in the real object it traced with (FakeTensors, or a changed state), as the first lines
    of a cell's differences; none when it left the object as it was, or when its state cannot be read."""
    try:
        after = read_state(traced, scn.first.tracer)
    except Exception:  # noqa: BLE001 - a state that no longer reads: nothing to show
        return []
    left = fake_tensors_left(after)
    changed = [] if left else flat_state_differences(before, after, "state", ("before", "after"))
    return left or (["tracing changed the real object used to trace: " + "; ".join(changed)] if changed else [])


#: The TorchBind kind's rows.
ROWS = TorchBindRows()
#: Run one cell of a TorchBind class: :meth:`conformance.matrix.cell.Rows.run_cell` with its rows.
run_cell = ROWS.run_cell
