"""A TorchBind class's backward rows (``op.<name>.backward``): the op row's program and objects
(:mod:`conformance.matrix.torchbind.rows`), differentiated (:mod:`conformance.matrix.backward`). Run 0 is on the
traced object, run 1 on the op row's object in another state, each with that run's inputs.
"""

from __future__ import annotations

from ...core.evidence import collecting
from ...core.results import NotApplicable
from ...torchbind.context import ClassContext
from ..backward import BackwardRun, BackwardScenario, make_backward
from ..gradients import op_of_backward_row
from .method_backward import is_method_backward_row, method_backward_scenario
from .rows import OP_PREFIX, scenario
from .scenarios import Scenario

__all__ = ["is_backward_row", "backward_scenario"]


def is_backward_row(ctx: ClassContext, row: str) -> bool:
    """Whether ``row`` is one of the class's backward rows (an op's, or a method's:
    :mod:`conformance.matrix.torchbind.method_backward`)."""
    op_row = op_of_backward_row(row)
    return op_row is not None and (any(OP_PREFIX + op.short_name == op_row for op in ctx.info.ops)
                                   or is_method_backward_row(ctx, row))


def backward_scenario(ctx: ClassContext, row: str) -> BackwardScenario:
    """The :class:`~conformance.matrix.backward.BackwardScenario` of a backward row, cached in the context as the
    other rows' scenarios are. Raises :class:`~conformance.core.results.NotApplicable` as the op's row does, or when
    eager's outputs do not require grad on the row's inputs."""
    cached = ctx.scenarios.get(row)
    if isinstance(cached, NotApplicable):  # eager differentiates nothing here: the row's every cell says so
        raise cached
    if cached is not None:
        return cached
    if is_method_backward_row(ctx, row):
        return method_backward_scenario(ctx, row)
    op_row = op_of_backward_row(row)
    base: Scenario = scenario(ctx, op_row)
    differentiated = next(o for o in ctx.info.ops if OP_PREFIX + o.short_name == op_row).qualname
    runs = (BackwardRun("run 0 (the traced object)", base.first.build, lambda obj: base.args(obj, 0)),
            BackwardRun("run 1 (an object in another state)" if base.second is not base.first else
                        "run 1 (an object in the traced state)", base.second.build, lambda obj: base.args(obj, 1)))

    def call_fresh(args: tuple):  # the program on a new object of run 0's state (the object is argument 0)
        return base.module(None)(base.first.build(), *args[1:])

    try:
        with collecting():
            cached = ctx.scenarios[row] = make_backward(row, differentiated, base, base.module, runs, call_fresh)
    except NotApplicable as exc:
        ctx.scenarios[row] = exc
        raise
    return cached

