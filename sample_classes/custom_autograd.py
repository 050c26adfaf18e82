"""Python custom classes whose custom ops have autograd formulas (``register_autograd``), for the ``backward`` rows
of the coverage matrix (``tests/unit/matrix/test_backward.py``). Not imported by ``sample_classes``.

* :class:`Gain`, a constant (value) class holding ``factor``: ``samples_autograd::gain(x, g) = x * g.factor``,
  whose autograd formula calls a custom op of its own, ``samples_autograd::gain_backward(grad, g) = grad *
  g.factor``, with a correct fake. CORRECT: compiled gradients are eager's, and eager's are the finite
  differences'.
* :class:`GainBackwardFakeWrong`, the same class registered on its own, with ``samples_autograd::gain_bwfake``,
  whose backward op ``samples_autograd::gain_backward_wrong`` has a fake of the wrong shape (one row fewer than
  ``grad``): eager runs the real kernels and is right; AOTAutograd traces the backward with the fake while
  compiling (aot_eager, inductor), and the autograd engine rejects the gradient's shape.
* :class:`GainFormulaIgnoresState`, registered on its own, with ``samples_autograd::gain_nostate``, whose formula
  returns ``grad * 1.0`` instead of ``grad * g.factor``: every backend agrees with eager, and eager is wrong, which
  ``torch.autograd.gradcheck`` (finite differences) shows.
* :class:`Quantizer`, a constant class holding a rounding ``step`` and a ``bound`` (in steps), with
  ``samples_autograd::ste_quantize(x, q) = round(x / q.step).clamp(-q.bound, q.bound) * q.step`` (quantize, then
  dequantize: an FP8/int8 recipe's fake quantization) and a straight-through gradient, the usual one for it:
  ``samples_autograd::ste_quantize_backward(grad, x, q) = grad`` where ``|x / q.step| <= q.bound``, 0 where the
  forward clipped. CORRECT: compiled gradients are eager's; ``torch.autograd.gradcheck`` fails on it (the forward
  is flat, its finite differences zero), as it does on every straight-through estimator.
* :class:`LossScale`, a symbolic class holding a ``label`` and a ``scale`` (registered ``USE_REAL``), with
  ``samples_autograd::loss_scaled(x, s) = x * s.scale``, whose autograd formula reads ``s.scale``: the forward's
  kernel runs on the object passed in, the formula is traced while compiling (AOTAutograd), reading ``scale`` on the
  real object and baking it in. Its ``guard_fn`` returns ``label`` and ``scale``. CORRECT.
* :class:`LossScaleGuardMissesScale`, the same with ``samples_autograd::loss_scaled_stale``, whose ``guard_fn`` returns
  ``label`` alone: forward results stay right, and a program compiled for one object gives another object with the
  same label the first one's gradient (an FP8 recipe's scaling state in a new user's trial).

Registered through whichever API the running torch has (:mod:`sample_classes.custom_classes`).
"""

from __future__ import annotations

import torch

from .custom_classes import _SymbolicBase, register_constant, register_symbolic

__all__ = ["Gain", "GainBackwardFakeWrong", "GainFormulaIgnoresState", "gain", "gain_backward", "gain_bwfake",
           "gain_backward_wrong", "gain_nostate", "Quantizer", "ste_quantize", "ste_quantize_backward", "LossScale",
           "LossScaleGuardMissesScale", "loss_scaled", "loss_scaled_stale"]


@register_constant
class Gain:
    """A constant custom class: a gain ``factor`` (a Python float) that its ops multiply a tensor by."""

    def __init__(self, factor: float):
        self.factor = factor

    def __eq__(self, other):
        return type(other) is type(self) and self.factor == other.factor

    def __hash__(self):
        return hash((type(self).__name__, self.factor))

    def __fx_repr__(self):
        name = type(self).__name__
        return f"{name}({self.factor!r})", {name: type(self)}

    def __repr__(self):
        return f"{type(self).__name__}({self.factor!r})"


@register_constant
class GainBackwardFakeWrong(Gain):
    """Broken: the fake of the backward op of ``samples_autograd::gain_bwfake`` returns the wrong shape."""


@register_constant
class GainFormulaIgnoresState(Gain):
    """Broken: the autograd formula of ``samples_autograd::gain_nostate`` ignores ``factor``."""


def _save(ctx, inputs, output):
    ctx.gain = inputs[1]


# ----- correct: gain, and its backward op gain_backward -----------------------------------------------------------
@torch.library.custom_op("samples_autograd::gain", mutates_args=())
def gain(x: torch.Tensor, g: Gain) -> torch.Tensor:
    """``x * g.factor``: a new tensor, ``x``'s shape."""
    return x * g.factor


@gain.register_fake
def _gain_fake(x, g):
    return torch.empty_like(x)


@torch.library.custom_op("samples_autograd::gain_backward", mutates_args=())
def gain_backward(grad: torch.Tensor, g: Gain) -> torch.Tensor:
    """The gradient of ``gain`` with respect to ``x``: ``grad * g.factor``."""
    return grad * g.factor


@gain_backward.register_fake
def _gain_backward_fake(grad, g):
    return torch.empty_like(grad)


gain.register_autograd(lambda ctx, grad: (gain_backward(grad, ctx.gain), None), setup_context=_save)


# ----- broken: the backward op's fake has the wrong shape -------------------------------------------------------
@torch.library.custom_op("samples_autograd::gain_bwfake", mutates_args=())
def gain_bwfake(x: torch.Tensor, g: GainBackwardFakeWrong) -> torch.Tensor:
    """``x * g.factor``, as ``gain``; only the fake of its backward op is wrong."""
    return x * g.factor


@gain_bwfake.register_fake
def _gain_bwfake_fake(x, g):
    return torch.empty_like(x)


@torch.library.custom_op("samples_autograd::gain_backward_wrong", mutates_args=())
def gain_backward_wrong(grad: torch.Tensor, g: GainBackwardFakeWrong) -> torch.Tensor:
    """``grad * g.factor``: right; its fake is not."""
    return grad * g.factor


@gain_backward_wrong.register_fake
def _gain_backward_wrong_fake(grad, g):
    return grad.new_empty((grad.shape[0] - 1, *grad.shape[1:]))  # the defect: one row fewer than grad


gain_bwfake.register_autograd(lambda ctx, grad: (gain_backward_wrong(grad, ctx.gain), None), setup_context=_save)


# ----- broken: the formula ignores the object's state -----------------------------------------------------------
@torch.library.custom_op("samples_autograd::gain_nostate", mutates_args=())
def gain_nostate(x: torch.Tensor, g: GainFormulaIgnoresState) -> torch.Tensor:
    """``x * g.factor``, as ``gain``; its autograd formula is wrong."""
    return x * g.factor


@gain_nostate.register_fake
def _gain_nostate_fake(x, g):
    return torch.empty_like(x)


gain_nostate.register_autograd(lambda ctx, grad: (grad * 1.0, None), setup_context=_save)  # the defect: no factor


# ----- correct: a straight-through estimator (the forward is flat, the gradient a choice) ------------------------
@register_constant
class Quantizer:
    """A constant custom class: a rounding ``step`` (in ``[1e-3, 1e3]``) and a ``bound`` (the largest magnitude, in
    steps, a quantized value takes, in ``[1, 1e6]``: 127 for int8, 448 for FP8 E4M3 with step 1). Raises
    ``ValueError`` for others."""

    def __init__(self, step: float, bound: float):
        if not (1e-3 <= step <= 1e3) or not (1.0 <= bound <= 1e6):
            raise ValueError(f"step must be in [1e-3, 1e3] and bound in [1, 1e6], got {step!r}, {bound!r}")
        self.step, self.bound = step, bound

    def __eq__(self, other):
        return type(other) is type(self) and (self.step, self.bound) == (other.step, other.bound)

    def __hash__(self):
        return hash((type(self).__name__, self.step, self.bound))

    def __fx_repr__(self):
        return f"Quantizer({self.step!r}, {self.bound!r})", {"Quantizer": Quantizer}

    def __repr__(self):
        return f"Quantizer({self.step!r}, {self.bound!r})"


@torch.library.custom_op("samples_autograd::ste_quantize", mutates_args=())
def ste_quantize(x: torch.Tensor, q: Quantizer) -> torch.Tensor:
    """``x`` rounded to a multiple of ``q.step``, clipped to ``q.bound`` steps: a new tensor, ``x``'s shape."""
    return torch.round(x / q.step).clamp(-q.bound, q.bound) * q.step


@ste_quantize.register_fake
def _ste_quantize_fake(x, q):
    return torch.empty_like(x)


@torch.library.custom_op("samples_autograd::ste_quantize_backward", mutates_args=())
def ste_quantize_backward(grad: torch.Tensor, x: torch.Tensor, q: Quantizer) -> torch.Tensor:
    """The straight-through gradient of ``ste_quantize``: ``grad`` where ``x`` was not clipped, 0 where it was."""
    return grad * ((x / q.step).abs() <= q.bound).to(grad.dtype)


@ste_quantize_backward.register_fake
def _ste_quantize_backward_fake(grad, x, q):
    return torch.empty_like(grad)


def _save_quantizer(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.quantizer = inputs[1]


def _ste_quantize_grad(ctx, grad):
    (x,) = ctx.saved_tensors
    return ste_quantize_backward(grad, x, ctx.quantizer), None


ste_quantize.register_autograd(_ste_quantize_grad, setup_context=_save_quantizer)


# ----- a symbolic class whose backward reads a field: guard_fn must return it -----------------------------------
@register_symbolic(guard_fn=lambda s: [s.label, s.scale], use_real=("scale",))
class LossScale(_SymbolicBase):
    """A symbolic custom class: a ``label`` and a loss ``scale`` (finite, in ``[1e-3, 1e3]``; ``ValueError``
    otherwise) that ``update`` changes."""

    def __init__(self, label: str, scale: float):
        self.label = label
        self.scale = self._checked(scale)

    @staticmethod
    def _checked(scale: float) -> float:
        if not (1e-3 <= abs(scale) <= 1e3):
            raise ValueError(f"scale must be finite with |scale| in [1e-3, 1e3], got {scale!r}")
        return float(scale)

    def update(self, scale: float) -> None:
        self.scale = self._checked(scale)

    def __repr__(self):
        return f"{type(self).__name__}({self.label!r}, {self.scale!r})"


@register_symbolic(guard_fn=lambda s: [s.label], use_real=("scale",))
class LossScaleGuardMissesScale(LossScale):
    """Broken: ``guard_fn`` leaves out ``scale``, which only the backward of ``samples_autograd::loss_scaled_stale``
    reads while compiling."""


def _save_scale(ctx, inputs, output):
    ctx.scaling = inputs[1]


@torch.library.custom_op("samples_autograd::loss_scaled", mutates_args=())
def loss_scaled(x: torch.Tensor, s: LossScale) -> torch.Tensor:
    """``x * s.scale``: a new tensor, ``x``'s shape; its formula is ``grad * s.scale``."""
    return x * s.scale


@torch.library.custom_op("samples_autograd::loss_scaled_stale", mutates_args=())
def loss_scaled_stale(x: torch.Tensor, s: LossScaleGuardMissesScale) -> torch.Tensor:
    """``x * s.scale``, as ``loss_scaled``; only its class's ``guard_fn`` is wrong."""
    return x * s.scale


for _op in (loss_scaled, loss_scaled_stale):
    _op.register_fake(lambda x, s: torch.empty_like(x))
    _op.register_autograd(lambda ctx, grad: (grad * ctx.scaling.scale, None), setup_context=_save_scale)
