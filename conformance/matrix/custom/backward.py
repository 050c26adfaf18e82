"""A Python custom class's backward rows (``<op>.backward``): the op row's program and sequence of objects
(:mod:`conformance.matrix.custom.rows`), differentiated at each object (:mod:`conformance.matrix.backward`).
"""

from __future__ import annotations

from ...core.evidence import collecting
from ...custom.context import CustomClassContext
from ..backward import BackwardRun, BackwardScenario, make_backward
from ..gradients import op_of_backward_row
from .rows import scenario

__all__ = ["is_backward_row", "backward_scenario"]


def is_backward_row(ctx: CustomClassContext, row: str) -> bool:
    """Whether ``row`` is one of the class's backward rows."""
    op_row = op_of_backward_row(row)
    return op_row is not None and any(op.short_name == op_row for op in ctx.info.ops)


def backward_scenario(ctx: CustomClassContext, row: str) -> BackwardScenario:
    """The :class:`~conformance.matrix.backward.BackwardScenario` of a backward row (made for each cell, as the op
    row's scenario is). Raises :class:`~conformance.core.results.NotApplicable` as the op's row does, or when
    eager's outputs do not require grad on the row's inputs."""
    op_row = op_of_backward_row(row)
    op = next(o for o in ctx.info.ops if o.short_name == op_row)
    base = scenario(ctx, op_row)
    runs = tuple(BackwardRun(label, make, lambda obj: (*base.inputs(), obj)) for label, make in base.steps)

    def call_fresh(args: tuple):  # the program on a new first object (the object is the last argument)
        return base.module()(*args[:-1], base.steps[0][1]())

    with collecting():
        return make_backward(row, op.qualname, base, lambda obj: base.module(), runs, call_fresh)
