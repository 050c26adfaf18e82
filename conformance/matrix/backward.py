"""A backward row's scenario and how its cell runs, for either kind of class (the kind supplies the op row's
scenario, the program and the objects of each run: :mod:`conformance.matrix.torchbind.backward`,
:mod:`conformance.matrix.custom.backward`). What a backward row is and how gradients are taken and compared:
:mod:`conformance.matrix.gradients`.

The program is compiled or exported with the first run's object, then each run calls it with floating-point inputs
that require grad and differentiates the loss; plain eager does the same on a twin object, in the same context (a
column's autocast included). Any step that raises is a :class:`~conformance.matrix.gradients.BackwardFailed` naming
the op, the custom ops its backward calls and the stage, with torch's exception as its cause.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from ..core.evidence import collecting, uncounted
from ..core.results import exception_line
from .backends import Backend
from .cell import FOLLOWS_FROM_FAKE, GRADIENT_DIFFERS, Difference
from .gradients import (BackwardFailed, CustomOps, Gradients, GradientRun, OpCall, fake_mismatches,
                        formula_column, gradient_differences, not_applicable, numeric_check, requiring_grad)
from .limitation_evidence import failure_chain

__all__ = ["BackwardScenario", "BackwardRun", "make_backward", "run_backward", "reports_formula"]


@dataclasses.dataclass(frozen=True)
class BackwardRun:
    """One call of a backward row's program: ``label`` (for messages), ``make()`` a new object in the run's state,
    ``args(obj)`` the program's arguments with that object (new tensors on every call)."""

    label: str
    make: Callable[[], Any]
    args: Callable[[Any], tuple]


@dataclasses.dataclass
class BackwardScenario:
    """A backward row: ``base`` is the op row's scenario (what a backend prepares the program with; the limitation
    table reads its attributes through this one), ``module(obj)`` a new eager program, ``runs`` its calls,
    ``inputs`` the names of its floating-point inputs, ``backward_ops`` the custom ops eager's backward called
    (``backward_calls``: each call, with its arguments and result),
    ``numeric`` the differences of eager's gradient from finite differences (once per row; reported by the cell of
    :func:`~conformance.matrix.gradients.formula_column` alone) and ``notes`` what the cells add (e.g. why that
    check did not run or could not judge: a flat forward, or which cell reports a wrong formula).
    ``stale_hint(i)``: the kind's reason why the program may have kept run 0's object for run ``i`` (e.g. the two
    objects' equal ``guard_fn`` values), or ``None``; added where a run's compiled gradient is run 0's."""

    row: str
    op: str
    base: Any
    module: Callable[[Any], torch.nn.Module]
    runs: tuple[BackwardRun, ...]
    inputs: tuple[str, ...]
    gradients: Gradients
    backward_ops: tuple[str, ...] = ()
    backward_calls: list[OpCall] = dataclasses.field(default_factory=list)
    numeric: tuple[Difference, ...] = ()
    notes: tuple[str, ...] = ()
    telling: bool = True
    stale_hint: Callable[[int], str | None] | None = None

    def __getattr__(self, name: str) -> Any:  # dynamic, placement, kind, class_kind, calls, has_object_input...
        if name.startswith("__") or name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    @property
    def program_lines(self) -> list[str]:
        """What a backward cell adds to the op row's program."""
        names = ", ".join(self.inputs)
        return ["# backward: with every floating-point input requiring grad (" + names + "),",
                "#   loss = sum((out * w).sum() for each floating-point output out), w fixed random weights",
                f"#   torch.autograd.grad(loss, [{names}])"
                + (f"; the backward calls {', '.join(self.backward_ops)}" if self.backward_ops else "")]

    @property
    def backward_text(self) -> str:
        """The op and the custom ops its backward calls, for messages."""
        calls = f" (its backward calls {', '.join(self.backward_ops)})" if self.backward_ops else ""
        return f"the backward of {self.op}{calls}"


def make_backward(row: str, op: str, base: Any, module: Callable[[Any], torch.nn.Module],
                  runs: tuple[BackwardRun, ...], call_fresh: Callable[[tuple], Any],
                  stale_hint: Callable[[int], str | None] | None = None) -> BackwardScenario:
    """The backward scenario of ``op``'s row ``base``: eager's run 0 gives the loss weights and the custom ops the
    backward calls; ``call_fresh(args)`` runs the program on a new object of run 0's state with ``args`` (the
    finite-difference check calls it once per perturbation); ``stale_hint``: see :class:`BackwardScenario`. Raises
    :class:`~conformance.core.results.NotApplicable` when eager's outputs do not require grad on these inputs (no
    floating-point input, or none the outputs depend on)."""
    with collecting():  # choosing the scenario compares eager with eager: no backend's evidence
        first = runs[0]
        obj = first.make()
        args, inputs = requiring_grad(first.args(obj))
        if not inputs:
            raise not_applicable(op, "the row's inputs have no floating-point tensor")
        try:
            outputs = module(obj)(*args)
        except Exception as exc:  # noqa: BLE001 - eager rejects the program with inputs that require grad
            raise not_applicable(op, f"plain eager raises {exception_line(exc, limit=300)} with its floating-point "
                                     "inputs requiring grad") from exc
        gradients = Gradients(outputs)

        def eager_stage(what: str, exc: BaseException) -> Exception:
            return exc

        obj2, recorder = first.make(), CustomOps()
        try:
            result = gradients.run(lambda a: module(obj2)(*a), first.args(obj2), eager_stage, backward=recorder)
        except Exception as exc:  # noqa: BLE001 - eager's own backward raises: nothing to compare with
            raise not_applicable(op, f"plain eager's backward raises {exception_line(exc, limit=300)}") from exc
        if result.grads is None:
            raise not_applicable(op, "plain eager's outputs do not require grad on the row's inputs")
        numeric, note = numeric_check(call_fresh, first.args(first.make()), op)
        names = tuple(f"input {i}" for i in range(len(inputs)))
        telling = len(runs) > 1 and _grads_change(gradients, module, runs, eager_stage)
    notes = (note,) if note else ()
    column = formula_column()
    if numeric and column is not None:  # one fault of eager's formula: one failure per row, the others say where
        notes += (f"eager's own gradient of {op} disagrees with finite differences (matrix.gradient-wrong): a fault "
                  "of its autograd formula, which every backend runs alike, so one cell of the row reports it, "
                  f"matrix[{row}-{column}]; the row's other cells judge only their backend's gradients against "
                  "eager's",)
    return BackwardScenario(row, op, base, module, runs, names, gradients, tuple(recorder.names), recorder.calls,
                            tuple(numeric), notes, telling, stale_hint)


def _grads_change(gradients: Gradients, module, runs: tuple[BackwardRun, ...], stage) -> bool:
    """Whether a later run's eager gradient differs from run 0's object's on that run's inputs: only then can a
    backward that kept the traced object's state be told from a right one."""
    from ..engine.compare import value_differences

    for run in runs[1:]:
        obj, traced = run.make(), runs[0].make()
        got = gradients.run(lambda a: module(obj)(*a), run.args(obj), stage)
        kept = gradients.run(lambda a: module(traced)(*a), run.args(traced), stage)
        if value_differences(kept.grads, got.grads, "gradient"):
            return True
    return False


def run_backward(scn: BackwardScenario, backend: Backend) -> list[Difference]:
    """Compile or export the program with run 0's object, then differentiate each run through it and through plain
    eager; every difference (each run's gradients against eager's first, a run whose compiled gradient is run 0's
    object's said first; then, in :func:`~conformance.matrix.gradients.formula_column`'s cell alone, eager's own
    gradient against finite differences: ``matrix.gradient-wrong`` is that cell's rule only where the backend
    reproduces eager).
    Raises :class:`~conformance.matrix.gradients.BackwardFailed` when a step raises, unless it was the
    compile that traces the backward with the ops' fakes and the fake of an op the backward calls returns other
    shapes than the op on eager's own call: then the failure follows from that fake (``matrix.follows-from-fake``),
    and the difference says so first."""
    try:
        return _run_backward(scn, backend)
    except BackwardFailed as exc:
        wrong = fake_mismatches(scn.backward_calls) if exc.traced_backward else []
        if not wrong:
            raise
        return Difference.each(FOLLOWS_FROM_FAKE, [f"{wrong[0]}: {exc}", *wrong[1:]])


def _run_backward(scn: BackwardScenario, backend: Backend) -> list[Difference]:
    first = scn.runs[0]
    traced = first.make()
    try:
        runner = backend.prepare(scn.base, scn.module(traced), first.args(traced))
    except Exception as exc:  # noqa: BLE001 - named by its stage
        raise BackwardFailed(f"{'exporting' if backend.ahead_of_time else 'compiling'} the program of "
                             f"{scn.backward_text} through {backend.side} raised {_innermost(exc)}") from exc
    diffs: list[Difference] = []
    for i, run in enumerate(scn.runs):
        eager_obj = run.make()
        expected = scn.gradients.run(lambda a: scn.module(eager_obj)(*a), run.args(eager_obj),
                                     lambda what, exc: exc)
        obj = traced if i == 0 and not backend.ahead_of_time else run.make()
        got = scn.gradients.run(lambda a: runner(*a), run.args(obj), _stage(scn, backend, i))
        found = gradient_differences(run.label, list(scn.inputs), expected, got, backend.side, scn.op)
        if found and i > 0:
            found = _kept_first(scn, backend, i, expected, got) + found
        diffs += found
    # The backend's own differences first: the cell's rule is theirs when it has any; eager's formula, wrong in every
    # backend alike, is reported once per row (formula_column's cell), and is that cell's rule only where the backend
    # reproduces eager; the other cells carry a note (make_backward).
    return diffs + (list(scn.numeric) if reports_formula(scn, backend) else [])


def reports_formula(scn: BackwardScenario, backend: Backend) -> bool:
    """Whether the cell of ``scn`` through ``backend`` reports eager's own gradient against finite differences (the
    row's ``numeric`` differences): the cell of :func:`~conformance.matrix.gradients.formula_column`'s backend, or
    every cell where no backend differentiates. Raises nothing."""
    column = formula_column()
    return bool(scn.numeric) and (column is None or backend.name == column)


def _kept_first(scn: BackwardScenario, backend: Backend, i: int, expected: GradientRun,
                got: GradientRun) -> list[Difference]:
    """A line for run ``i`` whose gradient through the backend (``got``) is not eager's (``expected``) but what eager
    gives on run 0's object with run ``i``'s inputs: the program kept the object it was compiled or exported with
    (the kind's :attr:`BackwardScenario.stale_hint` says why it may have); ``[]`` otherwise."""
    if expected.grads is None or got.grads is None:
        return []
    from ..engine.compare import value_differences

    run, first = scn.runs[i], scn.runs[0]
    traced = first.make()
    with uncounted():  # only to name the cause: the verdict rests on the comparison with eager's gradient
        try:
            kept = scn.gradients.run(lambda a: scn.module(traced)(*a), run.args(traced), lambda what, exc: exc)
        except Exception:  # noqa: BLE001 - eager rejects run 0's object on these inputs: no cause to name
            return []
        if kept.grads is None or value_differences(kept.grads, got.grads, "gradient") or \
                not value_differences(kept.grads, expected.grads, "gradient"):
            return []
    hint = scn.stale_hint(i) if scn.stale_hint is not None else None
    return [Difference(GRADIENT_DIFFERS, f"{run.label}: the gradient through {backend.side} is the one plain eager "
                                         "gives on the first object (the one the program was "
                                         f"{'exported' if backend.ahead_of_time else 'compiled'} with): its backward "
                                         "kept that object's state" + (f"; {hint}" if hint else ""))]


def _stage(scn: BackwardScenario, backend: Backend, run: int) -> Callable[[str, BaseException], Exception]:
    def stage(what: str, exc: BaseException) -> Exception:
        if what == "forward" and run == 0 and backend.dynamo:
            return BackwardFailed(f"compiling {scn.backward_text} through {backend.side} raised {_innermost(exc)} "
                                  "(on the first call dynamo traces the program, and AOTAutograd, for a backend that "
                                  "uses it, the forward and the backward, with the ops' fakes)", traced_backward=True)
        if what == "forward":
            where = f"the forward of run {run}, for {scn.backward_text}, through {backend.side}"
        else:
            where = f"the backward (torch.autograd.grad) of run {run}, {scn.backward_text}, through {backend.side}"
        return BackwardFailed(f"{where} raised {_innermost(exc)}")

    return stage


def _innermost(exc: BaseException) -> str:
    """What raised, as its innermost exception's line (a compiler's wrapper, ``BackendCompilerFailed``, only says
    which backend raised it)."""
    return exception_line(failure_chain(exc)[-1], limit=300)
