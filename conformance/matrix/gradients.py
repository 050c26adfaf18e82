"""The ``backward`` rows of the coverage matrix, the part both kinds of class share: which custom ops get one, the
loss a row differentiates, the gradients of one run, and how they are compared with plain eager's.

An op taking the class gets a backward row (``op.<name>.backward`` for a TorchBind class, ``<name>.backward`` for
a Python custom class: the op's row, then the variant, as ``sequence.attr`` is the sequence's) when it has an
autograd formula and its schema has a tensor argument and a tensor result (:func:`has_backward`, read off the
dispatcher without building an object). An op with no autograd formula gets none: autograd raises (or warns) on its
outputs in eager too, so there is nothing to compare.

The row's program is the op's own row's program; a cell calls it with every floating-point tensor input requiring
grad, reduces its floating-point outputs to ``loss = sum((out * w).sum())`` (``w``: fixed random weights, the same
for eager and the backend) and takes ``torch.autograd.grad(loss, inputs)`` outside the program, so the backward a
backend compiled (AOTAutograd's, for ``aot_eager`` and ``inductor``: its fakes, the backward op's fake included, run
while compiling) is the one that runs. Gradients are compared with eager's by ``value_differences`` (the
``torch.testing.assert_close`` tolerances every matrix comparison uses). Eager's own gradient is checked once per
row against finite differences (``torch.autograd.gradcheck``, in float64 where the op accepts it): a formula that
is wrong in eager, e.g. one that ignores the object's state, is as wrong in every backend, so it fails one cell of
the row (:func:`formula_column`'s) and the others say so in a note. Where gradcheck fails, its
Jacobians say why (:func:`judge_jacobians`): where the forward is flat by steps (a rounding or quantizing op, whose
straight-through gradient is a choice) or jumps, finite differences judge nothing, and the cells say so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from ..engine.torch_api import custom_ops
from torch.autograd.gradcheck import GradcheckError
from torch.utils._python_dispatch import TorchDispatchMode

from ..core.results import NotApplicable, exception_line
from ..engine.compare import value_differences
from .cell import GRADIENT_DIFFERS, GRADIENT_WRONG, Difference
from ..engine import torch_api

__all__ = ["BACKWARD", "has_backward", "backward_row", "op_of_backward_row", "Gradients",
           "GradientRun", "BackwardFailed", "gradient_differences", "numeric_check", "CustomOps", "OpCall",
           "fake_mismatches", "requiring_grad", "not_applicable", "MISSING_GRADIENT", "judge_jacobians", "EPS",
           "ATOL", "RTOL", "COARSE", "formula_column"]

#: The suffix of a backward row's name (``op.gather.backward``).
BACKWARD = ".backward"
#: How a difference that a backend's outputs carry no gradient begins (the limitation table's evidence).
MISSING_GRADIENT = "no gradient flows back"
_AUTOGRAD_KEYS = ("Autograd", "AutogradCPU", "CompositeImplicitAutograd")
_NOT_CUSTOM = frozenset({"aten", "prim", "prims", "higher_order"})


def has_backward(qualname: str, schema: torch.FunctionSchema) -> bool:
    """Whether the op ``qualname`` (``ns::op`` or ``ns::op.overload``) gets a backward row: the dispatcher has an
    autograd kernel for it (``torch._C._dispatch_has_kernel_for_dispatch_key``: the ``Autograd`` kernel
    ``torch.library.register_autograd`` registers, a C++ ``AutogradCPU`` one, or a ``CompositeImplicitAutograd``
    decomposition; for an op ``torch.library.custom_op`` defined, a formula its ``register_autograd`` gave), and
    its schema takes a tensor and returns one. Builds no object; raises nothing."""
    tensor = lambda t: "Tensor" in str(t)  # noqa: E731 - Tensor, Tensor?, Tensor[]
    if not any(tensor(a.type) for a in schema.arguments) or not any(tensor(r.type) for r in schema.returns):
        return False
    # torch.library.custom_op registers an Autograd kernel for every op it defines, which raises "no autograd formula
    # was registered" until register_autograd gives it one: such an op has a formula only when its OpDef holds one.
    opdef = custom_ops.OPDEFS.get(qualname.split(".")[0])
    if opdef is not None:
        return opdef._backward_fn is not None
    try:
        return any(torch_api.dispatch_has_kernel_for_dispatch_key(qualname, key) for key in _AUTOGRAD_KEYS)
    except RuntimeError:  # an op the dispatcher no longer knows
        return False


def backward_row(op_row: str) -> str:
    """The backward row of an op's row (``op.gather`` -> ``op.gather.backward``)."""
    return op_row + BACKWARD


def op_of_backward_row(row: str) -> str | None:
    """The op row a backward row differentiates, or ``None`` when ``row`` is not a backward row."""
    return row[: -len(BACKWARD)] if row.endswith(BACKWARD) else None


class BackwardFailed(RuntimeError):
    """A backward cell's compile, forward or backward raised: the message names the op, the custom ops its backward
    calls and the stage; the exception torch raised is its ``__cause__`` (the limitation table matches that one).
    ``traced_backward``: it was raised by the compile that traces the backward with the ops' fakes."""

    def __init__(self, message: str, traced_backward: bool = False) -> None:
        super().__init__(message)
        self.traced_backward = traced_backward


@dataclasses.dataclass(frozen=True)
class OpCall:
    """One call of a custom op eager's backward made: the op (``ns::op``), the ``OpOverload``, its arguments and
    what it returned."""

    name: str
    func: Any
    args: tuple
    kwargs: dict
    result: Any


class CustomOps(TorchDispatchMode):
    """Records the calls of custom ops (not ``aten``/``prims``) dispatched while it is active (``calls``)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[OpCall] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if getattr(func, "namespace", "aten") not in _NOT_CUSTOM:
            self.calls.append(OpCall(func.name().removesuffix(".default"), func, args, dict(kwargs or {}), result))
        return result

    @property
    def names(self) -> list[str]:
        """The ops called, each once, in order."""
        return list(dict.fromkeys(call.name for call in self.calls))


def fake_mismatches(calls: list[OpCall], where: str = "its call in eager's backward") -> list[str]:
    """For each recorded call whose op's fake, run on fake copies of the same arguments (``FakeTensorMode``; a
    TorchBind object fakified), returns other shapes or dtypes than the op returned: a line naming the op and both,
    ending with ``where`` the call was made. Calls whose fake cannot be run that way are left out. Raises
    nothing."""
    from ..engine.torch_api import maybe_to_fake_obj
    from ..engine.torch_api import FakeTensorMode

    found = []
    for call in calls:
        try:
            with FakeTensorMode() as mode:
                def fake(value: Any, mode=mode) -> Any:
                    if isinstance(value, torch.Tensor):
                        return mode.from_tensor(value)
                    return maybe_to_fake_obj(mode, value) if isinstance(value, torch.ScriptObject) else value

                got = call.func(*pytree.tree_map(fake, call.args), **pytree.tree_map(fake, call.kwargs))
        except Exception:  # noqa: BLE001 - a fake that cannot run on these copies: no comparison
            continue
        real = [t for t in pytree.tree_leaves(call.result) if isinstance(t, torch.Tensor)]
        faked = [t for t in pytree.tree_leaves(got) if isinstance(t, torch.Tensor)]
        meta = lambda ts: ", ".join(f"{list(t.shape)} {t.dtype}" for t in ts)  # noqa: E731
        if len(real) != len(faked) or any(tuple(r.shape) != tuple(f.shape) or r.dtype != f.dtype
                                          for r, f in zip(real, faked)):
            found.append(f"the fake of {call.name} returns {meta(faked)} where {call.name} returns {meta(real)} on "
                         f"the same arguments ({where})")
    return found


def _leaves(args: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def requiring_grad(args: tuple) -> tuple[tuple, list[torch.Tensor]]:
    """``args`` with every floating-point tensor (in lists too) replaced by a detached copy that requires grad, and
    those copies in order."""
    made: list[torch.Tensor] = []

    def leaf(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            made.append(t.detach().clone().requires_grad_())
            return made[-1]
        return t

    out = tuple(pytree.tree_map(leaf, a) if isinstance(a, (list, tuple, torch.Tensor)) else a for a in args)
    return out, made


@dataclasses.dataclass
class GradientRun:
    """One run's result: ``requires_grad`` of each floating-point output, and ``grads`` (one per floating-point
    input, ``None`` where the loss does not depend on it), or ``None`` when no output requires grad; ``dtypes``: the
    dtype of each floating-point output of the forward."""

    requires_grad: list[bool]
    grads: list[torch.Tensor | None] | None
    dtypes: tuple[torch.dtype, ...] = ()


class Gradients:
    """The loss of a row and how a run's gradients are taken: ``weights[i]`` multiplies floating-point output ``i``
    (fixed, from eager's first outputs)."""

    def __init__(self, outputs: Any) -> None:
        gen = torch.Generator().manual_seed(0)
        self.weights = [torch.randn(o.shape, generator=gen).to(o.dtype) for o in _leaves(outputs)]

    def run(self, call: Callable[[tuple], Any], args: tuple, stage: Callable[[str, BaseException], Exception],
            backward: Any = None) -> GradientRun:
        """Call ``call`` on ``args`` with floating-point inputs requiring grad, then differentiate the loss (inside
        the context ``backward``, when given); ``stage(what, exc)`` makes the exception raised when a step
        fails."""
        args, inputs = requiring_grad(args)
        try:
            outputs = call(args)
        except Exception as exc:  # noqa: BLE001 - named by its stage
            raise stage("forward", exc) from exc
        outs = _leaves(outputs)
        flags, dtypes = [o.requires_grad for o in outs], tuple(o.dtype for o in outs)
        if not any(flags):
            return GradientRun(flags, None, dtypes)
        loss = sum((o * w.to(o.device)).sum() for o, w in zip(outs, self.weights) if o.requires_grad)
        try:
            with backward if backward is not None else contextlib.nullcontext():
                grads = torch.autograd.grad(loss, inputs, allow_unused=True)
        except Exception as exc:  # noqa: BLE001 - named by its stage
            raise stage("backward", exc) from exc
        return GradientRun(flags, list(grads), dtypes)


def gradient_differences(label: str, names: list[str], expected: GradientRun, got: GradientRun, side: str,
                         op: str) -> list[Difference]:
    """Every way run ``label``'s gradients through a backend (``got``, on ``side``) differ from eager's
    (``expected``); ``names``: the floating-point inputs, by position; ``op`` the op differentiated."""
    missing = [i for i, (e, g) in enumerate(zip(expected.requires_grad, got.requires_grad)) if e and not g]
    if missing:
        return [Difference(GRADIENT_DIFFERS, f"{label}: {MISSING_GRADIENT} through {op}: output "
                           f"{', '.join(map(str, missing))} of {side} does not require grad where eager's does, so "
                           "the loss has no gradient for the inputs")]
    if expected.grads is None or got.grads is None:
        return []
    diffs: list[Difference] = []
    for name, e, g in zip(names, expected.grads, got.grads):
        lines = value_differences(e, g, f"{label}: gradient of {name}")
        by = (f"; greatest absolute difference {float((g.double() - e.double()).abs().max()):.6g}"
              if lines and isinstance(e, torch.Tensor) and isinstance(g, torch.Tensor) and e.shape == g.shape
              and e.numel() else "")
        diffs += [Difference(GRADIENT_DIFFERS, f"{line} (eager vs {side}{by})") for line in lines]
    if diffs and expected.dtypes != got.dtypes:  # the forward already differs: the backward only carries it on
        names_of = lambda ds: ", ".join(str(d).removeprefix("torch.") for d in ds)  # noqa: E731
        diffs.insert(0, Difference(GRADIENT_DIFFERS, (
            f"{label}: the forward's outputs already differ in dtype (eager {names_of(expected.dtypes)}, {side} "
            f"{names_of(got.dtypes)}), so the gradients differ as a consequence: the forward row's cell of this "
            "column reports the cause")))
    return diffs


def numeric_check(call: Callable[[tuple], Any], args: tuple, op: str) -> tuple[list[Difference], str | None]:
    """Eager's gradient of ``call`` (the program on a fresh object) against finite differences:
    ``torch.autograd.gradcheck`` on float64 copies of the floating-point inputs, and where it fails, the Jacobians it
    compares (:func:`judge_jacobians`). Returns the differences (rule ``matrix.gradient-wrong``, a fact about eager's
    formula, the same for every backend) and a note where the check could not judge: the op rejects float64 inputs,
    its forward is flat on these inputs (a rounding or quantizing op, whose straight-through gradient is a choice
    finite differences cannot judge), or it disagrees only where the forward jumps. Raises nothing."""
    double = tuple(pytree.tree_map(lambda t: t.double() if isinstance(t, torch.Tensor) and t.is_floating_point()
                                   else t, a) if isinstance(a, (list, tuple, torch.Tensor)) else a for a in args)
    args64, inputs = requiring_grad(double)
    positions = [i for i, a in enumerate(args64) if isinstance(a, torch.Tensor) and a.requires_grad]
    if len(positions) != len(inputs):  # a list of tensors: gradcheck takes tensors, not lists
        return [], f"the gradient of {op} is not checked against finite differences (a list of tensor inputs)"

    def fn(*xs):
        full = list(args64)
        for i, x in zip(positions, xs):
            full[i] = x
        return tuple(_leaves(call(tuple(full))))

    try:
        torch.autograd.gradcheck(fn, tuple(inputs), fast_mode=True)
    except GradcheckError as exc:
        return judge_jacobians(fn, tuple(inputs), op, exc)
    except Exception as exc:  # noqa: BLE001 - the op or its backward rejects float64: no finite differences to trust
        return [], (f"the gradient of {op} is not checked against finite differences: in float64 it raised "
                    f"{exception_line(exc, limit=150)}")
    return [], None


#: torch.autograd.gradcheck's defaults: the step of its finite differences and the tolerances it compares with.
EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-3
#: The coarser steps that tell a piecewise-constant forward (it moves by steps: a rounding) from a constant one.
COARSE = (1e-4, 1e-2, 1.0, 1e2, 1e4)
#: gradcheck's module (``torch.autograd.gradcheck`` is its function), whose Jacobian helpers the check reads.
_GRADCHECK = importlib.import_module("torch.autograd.gradcheck")


def judge_jacobians(fn: Callable[..., tuple], inputs: tuple, op: str,
                    failed: Exception) -> tuple[list[Difference], str | None]:
    """Why ``torch.autograd.gradcheck`` failed on ``fn`` (``failed``), from the Jacobians it compares: eager's
    formula's (gradcheck's ``_check_analytical_jacobian_attributes``) and the finite differences' (its
    ``_get_numerical_jacobian``, at its step :data:`EPS`, a quarter of it, and the :data:`COARSE` steps). Each entry
    (an input element, an output element) is

    * smooth: its finite difference is not zero and hardly moves from one fine step to the other: judged;
    * a jump: it moves otherwise (a quarter of the step gives zero, or four times as much: the output jumped
      between ``x - eps`` and ``x + eps``): finite differences say nothing of a gradient there, not judged;
    * flat by steps: zero at both fine steps, not at a coarse one (a rounding or quantizing forward, piecewise
      constant): the gradient there is a choice (a straight-through estimator), not judged;
    * constant: zero at every step: the derivative is 0, judged.

    A judged entry where the formula differs from the finite differences by more than gradcheck's tolerances
    (:data:`ATOL`, :data:`RTOL`) makes the formula wrong (``matrix.gradient-wrong``), with the largest one and both
    values; otherwise a note says what was not judged. Where gradcheck's helpers cannot run, gradcheck's own message
    is the difference. Raises nothing."""
    try:
        outputs = fn(*inputs)
        jacobian = lambda eps: _GRADCHECK._get_numerical_jacobian(fn, inputs, outputs, eps=eps)  # noqa: E731
        wide, narrow = jacobian(EPS), jacobian(EPS / 4)  # [input][output]
        formula = [_GRADCHECK._check_analytical_jacobian_attributes(inputs, out, 0.0, False)  # [output][input]
                   for out in outputs]
        coarse = [jacobian(eps) for eps in COARSE]
    except Exception:  # noqa: BLE001 - gradcheck's helpers refuse what gradcheck refused: its message says why
        text = " ".join(str(failed).split())
        return [Difference(GRADIENT_WRONG, f"eager's own gradient of {op} (its autograd formula) disagrees with "
                           f"finite differences (torch.autograd.gradcheck, float64): {text[:600]}")], None
    count = dict(entries=0, smooth=0, jumps=0, stepped=0, wrong=0, unjudged=0)
    worst: tuple[float, str] | None = None
    for j, x in enumerate(inputs):
        for i, out in enumerate(outputs):
            w, n, a = wide[j][i], narrow[j][i], formula[i][j].to(torch.float64)
            fine_flat = (w.abs() <= ATOL) & (n.abs() <= ATOL)
            smooth = ~fine_flat & ((n - w).abs() <= 0.5 * w.abs())  # a smooth forward's hardly moves with the step
            moved = torch.zeros_like(fine_flat)
            for c in coarse:
                moved |= c[j][i] != 0
            stepped, jump = fine_flat & moved, ~fine_flat & ~smooth
            judged = ~stepped & ~jump
            differs = (a - w).abs() > ATOL + RTOL * w.abs()
            bad = judged & differs
            for key, mask in (("smooth", smooth), ("jumps", jump), ("stepped", stepped), ("wrong", bad),
                              ("unjudged", ~judged & differs)):
                count[key] += int(mask.sum())
            count["entries"] += w.numel()
            if bad.any():
                gap = torch.where(bad, (a - w).abs(), torch.zeros_like(w))
                k = int(gap.argmax())
                row, col = divmod(k, max(out.numel(), 1))
                size = float(gap.flatten()[k])
                if worst is None or size > worst[0]:
                    worst = (size, f"d output {i}{_at(out, col)} / d input {j}{_at(x, row)} is "
                                   f"{float(a.flatten()[k]):.6g} by the formula, {float(w.flatten()[k]):.6g} by "
                                   f"finite differences (difference {size:.6g})")
    if worst is not None:
        return [Difference(GRADIENT_WRONG, f"eager's own gradient of {op} (its autograd formula, in plain eager) "
                           f"disagrees with finite differences (torch.autograd.gradcheck's, float64, step {EPS:g}) "
                           f"on {count['wrong']} of {count['entries']} Jacobian entries; the largest: {worst[1]}. "
                           "Every backend runs the same formula: the formula's fault, not the backend's")], None
    jumped = f", and jumps at {count['jumps']}" if count["jumps"] else ""
    if not count["smooth"] and count["unjudged"]:
        return [], (f"eager's gradient of {op} is not the finite differences' (torch.autograd.gradcheck, float64, "
                    f"fails), but the forward is flat on these inputs (piecewise constant: of {count['entries']} "
                    f"Jacobian entries, {count['stepped']} are zero at gradcheck's step {EPS:g} and move only at a "
                    f"coarser one{jumped}): the gradient of a rounding or quantizing forward, a straight-through "
                    "estimator, is a choice by design that finite differences cannot judge; the cells compare the "
                    "backend's gradient with eager's alone")
    if count["unjudged"]:
        return [], (f"eager's gradient of {op} differs from finite differences (torch.autograd.gradcheck, float64) "
                    f"only where the forward is flat by steps or jumps ({count['unjudged']} of {count['entries']} "
                    "Jacobian entries), where finite differences judge no gradient; elsewhere they agree")
    return [], (f"torch.autograd.gradcheck (fast mode, float64) fails on eager's gradient of {op}, but the full "
                "Jacobians it compares agree within its tolerances: not judged")


def _at(t: torch.Tensor, flat: int) -> str:
    """Element ``flat`` (a row-major index) of ``t``, as ``[i, j]`` (nothing for a 0-d tensor)."""
    if t.dim() == 0:
        return ""
    return "[" + ", ".join(str(int(i)) for i in torch.unravel_index(torch.tensor(flat), t.shape)) + "]"


def formula_column() -> str | None:
    """The one column whose backward cells report ``matrix.gradient-wrong``: the first backend, in column order, that
    can differentiate a program here (no :attr:`~conformance.matrix.backends.Backend.no_backward`, and dynamo
    enabled for a ``torch.compile`` one): ``eager`` (torch.compile's eager backend), ``export`` with dynamo disabled.
    Eager's formula is the same in every backend, so one fault is one failure per row, not one per column; the
    choice reads neither ``--torchbind-backends`` nor ``-k``, so a cell's verdict never depends on which other cells
    run (the reuse key leaves the backends out). ``None`` when no backend differentiates. Raises nothing."""
    from ..engine.dynamo_state import dynamo_disabled
    from .backends import all_backends

    off = dynamo_disabled() is not None
    return next((b.name for b in all_backends() if not b.no_backward and not (b.dynamo and off)), None)


def not_applicable(op: str, why: str) -> NotApplicable:
    """The n/a of a backward row whose op eager does not differentiate on the row's inputs."""
    return NotApplicable(f"{op} has an autograd formula, but {why}: no gradient to compare")
