"""How a Python custom class's matrix cell runs (the hooks of :class:`conformance.matrix.cell.Rows`): the row's
program is compiled or exported with the first object of its sequence (:mod:`conformance.matrix.custom.rows`), then
called with each object of the sequence while plain eager runs on a twin built the same way; outputs must be equal,
and for a symbolic class the objects' states afterwards too. What torch does not support is an entry of the
limitation table with ``kind="custom"`` (:mod:`conformance.matrix.limitations`). A failed cell of an op row carries
a standalone script that does the same (:mod:`conformance.matrix.custom.repro`), a backward row's cell too.
"""

from __future__ import annotations

from typing import Any

import torch

from ...custom.context import CustomClassContext, show, state_of
from ...custom.state import changed_fields
from ...engine.compare import value_differences
from ..backends import Backend
from ..backward import BackwardScenario, run_backward
from ..cell import OUTPUT_DIFFERS, STALE_RESULT, STATE_DIFFERS, Difference, Rows
from ..explain import STAYED, FakeCause, cannot_tell
from ..gradients import CustomOps, fake_mismatches
from .backward import backward_scenario, is_backward_row
from .repro import cell_repro
from .rows import CustomScenario, custom_rows, scenario
from ...engine import torch_api

__all__ = ["CustomRows", "ROWS", "run_cell"]


class CustomRows(Rows):
    """The rows of a Python custom class (:func:`~conformance.matrix.custom.rows.custom_rows`), each an op called
    with a sequence of objects."""

    def names(self, ctx: CustomClassContext) -> list[str]:
        return custom_rows(ctx)

    def qualname(self, ctx: CustomClassContext) -> str:
        return ctx.info.name

    def is_backward_row(self, ctx: CustomClassContext, row: str) -> bool:
        return is_backward_row(ctx, row)

    def scenario(self, ctx: CustomClassContext, row: str) -> CustomScenario | BackwardScenario:
        if self.is_backward_row(ctx, row):
            return backward_scenario(ctx, row)
        return scenario(ctx, row)

    def program(self, scn: CustomScenario | BackwardScenario) -> str:
        if isinstance(scn, BackwardScenario):
            return "\n".join([self.program(scn.base).rstrip("\n"), *scn.program_lines]) + "\n"
        return scn.program + "\n# objects, in order:\n" + "\n".join(f"#   {label}" for label, _ in scn.steps)

    def label(self, ctx: CustomClassContext, row: str, backend: Backend, program: str) -> str:
        return f"{row} of {ctx.info.name} through {backend.title} (compile and run)"

    def run(self, ctx: CustomClassContext, scn: CustomScenario, backend: Backend) -> list[Difference]:
        """Compile/export with the first object, then call the program with each object of the sequence, dynamo's
        caches reset before and after."""
        try:
            torch_api.dynamo_reset()
            # One recompilation per object at most: never dynamo's limit, past which it would run eagerly unseen.
            with torch_api.dynamo_config.patch(recompile_limit=max(torch_api.dynamo_config.recompile_limit,
                                                                len(scn.steps) + 1),
                                            fail_on_recompile_limit_hit=True):
                return run_backward(scn, backend) if isinstance(scn, BackwardScenario) else _run(ctx, scn, backend)
        finally:
            torch_api.dynamo_reset()

    def under_autocast(self, scn: CustomScenario) -> CustomScenario:
        """``scn`` itself (:meth:`run` makes eager's reference, under the caller's autocast), once plain eager ran
        the program on the first object under that autocast: raises what it raised. Another kind of scenario,
        which makes eager's results in :meth:`run` too, is returned as it is."""
        if type(scn) is CustomScenario:
            scn.module()(*scn.inputs(), scn.steps[0][1]())
        return scn

    def repro(self, ctx: CustomClassContext, scn: CustomScenario | BackwardScenario, backend: Backend) -> str | None:
        return cell_repro(ctx, scn, backend)  # a backward row's too: its gradients' script

    def fake_cause(self, ctx: CustomClassContext, scn: CustomScenario | BackwardScenario,
                   backend: Backend) -> FakeCause | None:
        """For an op row: the custom ops the program calls in plain eager on the first object, each op's fake run
        on fake copies of the same arguments (:func:`~conformance.matrix.gradients.fake_mismatches`); the first
        whose shapes or dtypes are not the op's names its ``fake_kernel`` item (a compiled or exported program is
        built from the fakes' results, so its outputs, or its compiling, follow from them). ``None`` for a backward
        row (:func:`~conformance.matrix.backward.run_backward` says it there), when every fake agrees, or when
        eager raises."""
        if not isinstance(scn, CustomScenario):
            return None
        try:
            with CustomOps() as recorded:
                scn.module()(*scn.inputs(), scn.steps[0][1]())
        except Exception:  # noqa: BLE001 - eager raising is the cell's own finding, not a fake's
            return None
        by_name = {op.qualname: op for op in ctx.info.ops}
        for call in recorded.calls:  # the first op of the class's whose fake is wrong
            op = by_name.get(call.name)
            wrong = fake_mismatches([call], "its call in plain eager") if op is not None else []
            if wrong:
                return FakeCause((f"{ctx.info.test_name}::fake_kernel[{op.short_name}]",), wrong[0])
        return None

    def notes(self, scn: CustomScenario | BackwardScenario) -> list[str]:
        if isinstance(scn, BackwardScenario):
            return list(scn.notes)
        return [f"not compared: {label}: eager on one cannot stand for the program on the other"
                for label in scn.untwinned]

    def unsure(self, ctx: CustomClassContext, scn: CustomScenario | BackwardScenario, backend: Backend) -> list[str]:
        if isinstance(scn, BackwardScenario):
            return [] if scn.telling else [cannot_tell(
                f"no object after the first changes eager's gradient of {scn.op} on these arguments",
                "give objects that do (@conformance.examples)")]
        if not scn.telling:
            return [cannot_tell(f"no object drawn after the first changes {scn.op.qualname}'s output on these "
                                "arguments", "give objects that do (@conformance.examples, or strategies for the "
                                "op's arguments)")]
        return [cannot_tell(f"{label.split('; ', 1)[-1]} leaves {scn.op.qualname}'s output on these arguments as the "
                            "first object's", "give objects whose value of that field changes the output "
                            "(@conformance.examples), or arguments on which it does (strategies)")
                for label in scn.silent]


def _run(ctx: CustomClassContext, scn: CustomScenario, backend: Backend) -> list[Difference]:
    """Compile/export with the first object, then call the program with each object of the sequence, and for a
    constant class with a method that changes it in place, once more with the very object it was compiled with,
    changed so; every difference from eager on a twin object."""
    reference = scn.module()
    prepared_with = scn.steps[0][1]()
    program = backend.prepare(scn, scn.module(), (*scn.inputs(), prepared_with))
    traced = reference(*scn.inputs(), scn.steps[0][1]())  # eager on an object like the one traced
    diffs: list[Difference] = []
    ran_on = []  # the object the program ran on in each step (exported with: prepared_with, for the first)
    for label, make in scn.steps:
        expected_obj, obj = make(), make()
        ran_on.append(prepared_with if label.startswith("first") and backend.ahead_of_time else obj)
        try:
            expected = reference(*scn.inputs(), expected_obj)
        except Exception:  # noqa: BLE001 - an object the op rejects in eager: not a comparison
            if label.startswith("first"):
                raise
            continue
        diffs += _compare(ctx, backend, label, expected, program(*scn.inputs(), obj), traced, expected_obj, obj)
    for step, code, mutate in scn.in_place:
        twin, obj = scn.steps[step][1](), ran_on[step]
        mutate(twin)
        mutate(obj)
        try:
            expected = reference(*scn.inputs(), twin)
        except Exception:  # noqa: BLE001 - the op rejects the changed object in eager: not a comparison
            continue
        label = (f"changed in place: {code} on the object the program ran on in step {step + 1} (torch guards a "
                 "constant object by == against the object it compiled with, which stays equal to itself)")
        was = reference(*scn.inputs(), scn.steps[step][1]())
        diffs += _compare(ctx, backend, label, expected, program(*scn.inputs(), obj), was, twin, obj,
                          "the object before the change")
    return diffs


def _compare(ctx: CustomClassContext, backend: Backend, label: str, expected: Any, got: Any, traced: Any,
             expected_obj: Any, obj: Any, was: str = "the first object") -> list[Difference]:
    """The differences of one call of the program (``got``, on ``obj``) from eager's (``expected``, on
    ``expected_obj``): the output (stale when it is eager's on ``was``, ``traced``, and eager's here differs), and
    for a symbolic class on a backend whose runs change the object, its state afterwards."""
    diffs: list[Difference] = []
    differences = value_differences(expected, got, "output")
    if differences:
        line, rule = f"{label}: eager {show(expected)}, {backend.side} {show(got)}", OUTPUT_DIFFERS
        if not label.startswith("first") and value_differences(traced, expected):
            # What a program holding the first object baked in returns: the traced object's eager output.
            line += f"; eager on {was} gives {show(traced)}"
            if not value_differences(traced, got):
                line, rule = f"{line}: {STAYED}", STALE_RESULT
        diffs += Difference.each(rule, [line] + [f"{label}: {d}" for d in differences])
    if ctx.info.kind == "symbolic" and backend.state_visible:
        before, after = state_of(expected_obj), state_of(obj)
        # Two objects: a field held by identity (a communicator) is compared by the state of what it holds.
        diffs += Difference.each(STATE_DIFFERS, [
            f"{label}: object state {k}: eager {before.get(k)!r}, {backend.side} {after.get(k)!r}"
            for k in changed_fields(before, after, held_by_state=True)])
    return diffs


#: The Python custom class kind's rows.
ROWS = CustomRows()
#: Run one cell of a Python custom class: :meth:`conformance.matrix.cell.Rows.run_cell` with its rows.
run_cell = ROWS.run_cell
