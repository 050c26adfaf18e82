"""A Python custom class's backward rows (``<op>.backward``): the op row's program and sequence of objects
(:mod:`conformance.matrix.custom.rows`), differentiated at each object (:mod:`conformance.matrix.backward`). Where
a compiled gradient is the first object's, the cell says why torch may have kept it: a symbolic class's
``guard_fn`` returning the same values for both objects, or a constant class's ``__eq__`` calling them equal, and
names the ``guards`` item that judges it.
"""

from __future__ import annotations

from ...core.evidence import collecting
from ...custom.context import CustomClassContext, same_value
from ...custom.discovery import CustomOpInfo
from ...custom.state import twin_differences
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
        return make_backward(row, op.qualname, base, lambda obj: base.module(), runs, call_fresh,
                             lambda i: _guard_cause(ctx, op, base.steps[0][1](), base.steps[i][1]()))


def _guard_cause(ctx: CustomClassContext, op: CustomOpInfo, first, other) -> str | None:
    """Why torch may have run the program compiled for ``first`` on ``other`` without compiling again: a symbolic
    class whose ``guard_fn`` returns equal values for both (torch guards a symbolic object by its type and those
    values), a constant class that is not hoisted whose ``__eq__`` calls them equal (torch guards it with
    ``__eq__``); ``None`` otherwise. Raises nothing."""
    info, item = ctx.info, f"the guards[{op.short_name}] item judges it"
    fields = ", ".join(map(repr, twin_differences(first, other)))
    differ = f" (they differ in {fields})" if fields else ""
    try:
        if info.kind == "symbolic":
            if info.guard_fn is None:
                return (f"{info.name} has no guard_fn, so torch guards its objects by type alone and reused the "
                        f"program compiled for the first object{differ}, whose backward read that object's state "
                        f"while compiling; {item}")
            a, b = info.guard_fn(first), info.guard_fn(other)
            if not same_value(a, b):
                return None
            return (f"guard_fn returns {a!r} for both objects{differ}, so torch reused the program compiled for the "
                    "first, whose backward read that object's state while compiling: guard_fn leaves out a field the "
                    f"backward reads; {item}")
        if info.kind == "constant" and not info.hoist and bool(first == other):
            return (f"{info.cls.__qualname__}.__eq__ calls the two objects equal{differ}, so torch reused the program "
                    f"compiled for the first; {item}")
    except Exception:  # noqa: BLE001 - guard_fn or __eq__ raising: the gradient lines say what differs
        return None
    return None
