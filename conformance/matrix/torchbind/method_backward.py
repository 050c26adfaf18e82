"""A TorchBind class's method backward rows (``<method>.backward``, for a method taking and returning a tensor,
:func:`~conformance.matrix.torchbind.rows.method_backward_rows`): the method row's program (``r0 = obj.scale(x0)``)
and objects, differentiated as an op's backward row is (:mod:`conformance.matrix.backward`). Run 0 is on the traced
object, run 1 on the method row's object in another state, each with that run's inputs.

What the cells meet is torch's, not the class's: a C++ method has no autograd formula of its own; in plain eager
autograd records the aten ops the method runs, so its output carries a gradient back to its tensor arguments. Every
backend but plain eager calls the method through ``torch.ops.higher_order.call_torchbind`` (dynamo emits it for
``obj.method(...)``; an exported program's graph holds it), whose ``Autograd`` kernel is torch's
``autograd_not_implemented(call_torchbind, deferred_error=True)``: where a tensor argument requires grad, the
method's result is detached and wrapped in a ``DelayedError`` node, so the output requires grad and carries no
gradient back to the inputs. That is the ``torchbind-method-autograd`` limitation
(:mod:`conformance.matrix.limitations`, its evidence read off torch by
:func:`conformance.matrix.autograd_evidence.method_autograd_not_implemented`); no backend's gradient can show a
class's fault here. What the class still decides is the forward: a fake whose result makes the compiled program
raise fails the cell as it fails the method row (``matrix.follows-from-fake``, naming the ``agreement`` item).
"""

from __future__ import annotations

import dataclasses

from ...core.evidence import collecting
from ...core.results import NotApplicable
from ...torchbind.context import ClassContext
from ..backward import BackwardRun, BackwardScenario, make_backward
from ..gradients import op_of_backward_row
from .rows import method_backward_rows, scenario
from .scenarios import Scenario

__all__ = ["is_method_backward_row", "method_backward_scenario", "WHOSE_GRADIENT"]

#: What every cell of a method backward row ends with: whose the gradient is, so that a reader of a cell the
#: limitation covers knows that no class could have made it pass, and what the class's own part is.
WHOSE_GRADIENT = ("a C++ method has no autograd formula of its own: plain eager differentiates the aten ops it runs, "
                  "while a traced or exported program calls it through call_torchbind, so whether the gradient "
                  "reaches the inputs is torch's to decide, not the class's (torch 2.13 and 2.14.1 drop it: "
                  "torchbind-method-autograd); the class's part is the forward, e.g. a fake whose shapes make a "
                  "compiled backward raise")


def is_method_backward_row(ctx: ClassContext, row: str) -> bool:
    """Whether ``row`` is one of the class's method backward rows (planned from the schemas alone)."""
    return op_of_backward_row(row) is not None and row in method_backward_rows(ctx)


def method_backward_scenario(ctx: ClassContext, row: str) -> BackwardScenario:
    """The :class:`~conformance.matrix.backward.BackwardScenario` of a method backward row, cached in the context as
    the other rows' scenarios are (eager's n/a too: it is decided once per class). Raises
    :class:`~conformance.core.results.NotApplicable` as the method's row does, or when eager's outputs do not
    require grad on the row's inputs (a method whose result does not depend on its floating-point tensors)."""
    cached = ctx.scenarios.get(row)
    if isinstance(cached, NotApplicable):
        raise cached
    if cached is not None:
        return cached
    method = op_of_backward_row(row)
    base: Scenario = scenario(ctx, method)
    runs = (BackwardRun("run 0 (the traced object)", base.first.build, lambda obj: base.args(obj, 0)),
            BackwardRun("run 1 (an object in another state)" if base.second is not base.first else
                        "run 1 (an object in the traced state)", base.second.build, lambda obj: base.args(obj, 1)))

    def call_fresh(args: tuple):  # the program on a new object of run 0's state (the object is argument 0)
        return base.module(None)(base.first.build(), *args[1:])

    name = f"{ctx.info.qualname}.{method}"
    try:
        with collecting():
            made = make_backward(row, name, base, base.module, runs, call_fresh)
            cached = ctx.scenarios[row] = dataclasses.replace(made, notes=(*made.notes, WHOSE_GRADIENT))
    except NotApplicable as exc:  # said of an op ("has an autograd formula, but ..."): said here of the method
        said = str(exc).replace(f"{name} has an autograd formula, but ", f"{name} takes and returns a tensor, but ")
        ctx.scenarios[row] = NotApplicable(said)
        raise ctx.scenarios[row] from exc
    return cached
