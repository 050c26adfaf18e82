"""Python custom classes whose custom op multiplies matrices, for the coverage matrix's ``autocast`` column (CPU
autocast to bfloat16; ``tests/unit/matrix/test_autocast.py``). Not imported by ``sample_classes``.

Both classes hold ``k``, and their op is ``x @ (k * W)`` for a fixed 3x3 matrix ``W``; under
``torch.autocast("cpu", dtype=torch.bfloat16)`` eager's result is bfloat16. What torch.compile does with each
(torch 2.13 and 2.14.1, CPU; the test pins it with plain torch beside the plugin's verdict):

* :class:`Mixer` and ``samples_autocast::mix``, which declares its autocast rule
  (``torch.library.register_autocast(op, "cpu", torch.bfloat16)``: its floating-point inputs are cast to bfloat16
  and its kernel runs with autocast off, in eager and in a compiled program alike). CORRECT: aot_eager under
  autocast gives eager's bfloat16 result.
* :class:`MixerAmbient` and ``samples_autocast::mix_ambient``, without an autocast rule: its kernel's matmul
  follows whatever autocast is on when it runs. Eager runs it under the caller's autocast (bfloat16); a compiled
  program runs its graph with autocast off (AOTAutograd disables it at run time, pytorch#86515), so the same kernel
  computes in float32: the compiled program's output is float32 where eager's is bfloat16 (``assert_close``: dtype
  differs). BROKEN under autocast only: without autocast both give float32.
* :class:`MixerFloat32Only` and ``samples_autocast::mix_float32``, whose autocast rule casts to bfloat16 but whose
  kernel accepts float32 only: plain eager itself raises under autocast, so the column has no reference (n/a,
  saying what eager raised); without autocast every column runs it.

Registered through whichever API the running torch has (:mod:`sample_classes.custom_classes`).
"""

from __future__ import annotations

import torch

from .custom_classes import register_constant

__all__ = ["Mixer", "MixerAmbient", "MixerFloat32Only", "mix", "mix_ambient", "mix_float32", "WEIGHT"]

#: The fixed matrix both ops scale by ``k``.
WEIGHT = torch.tensor([[1.0, 0.5, -0.25], [0.125, 2.0, 0.75], [-1.5, 0.375, 1.0]])


class _Weighted:
    """What both classes share: ``k`` (a Python float), equality and hash by it, and the op's matrix ``k * W``."""

    def __init__(self, k: float):
        self.k = k

    def __eq__(self, other):
        return type(other) is type(self) and self.k == other.k

    def __hash__(self):
        return hash((type(self).__name__, self.k))

    def __fx_repr__(self):
        name = type(self).__name__
        return f"{name}({self.k!r})", {name: type(self)}

    def __repr__(self):
        return f"{type(self).__name__}({self.k!r})"

    def weight(self) -> torch.Tensor:
        """``k * W`` (float32)."""
        return WEIGHT * self.k


@register_constant
class Mixer(_Weighted):
    """A constant custom class whose op ``samples_autocast::mix`` declares its autocast rule."""


@register_constant
class MixerAmbient(_Weighted):
    """Broken under autocast: ``samples_autocast::mix_ambient`` has no autocast rule, so its kernel's precision
    depends on the autocast around it at run time, which torch.compile turns off."""


@torch.library.custom_op("samples_autocast::mix", mutates_args=())
def mix(x: torch.Tensor, m: Mixer) -> torch.Tensor:
    """``x @ m.weight()``, in ``x``'s dtype (under autocast the rule below has cast ``x`` already)."""
    return x @ m.weight().to(x.dtype)


@mix.register_fake
def _mix_fake(x, m):
    return x.new_empty((*x.shape[:-1], WEIGHT.shape[1]))


torch.library.register_autocast("samples_autocast::mix", "cpu", torch.bfloat16)


@torch.library.custom_op("samples_autocast::mix_ambient", mutates_args=())
def mix_ambient(x: torch.Tensor, m: MixerAmbient) -> torch.Tensor:
    """``x @ m.weight()``: bfloat16 under an ambient CPU autocast, float32 without one."""
    return x @ m.weight()


@mix_ambient.register_fake
def _mix_ambient_fake(x, m):
    return x.new_empty((*x.shape[:-1], WEIGHT.shape[1]))


@register_constant
class MixerFloat32Only(_Weighted):
    """A constant custom class whose op ``samples_autocast::mix_float32`` rejects the bfloat16 its autocast rule
    casts to: eager under autocast raises."""


@torch.library.custom_op("samples_autocast::mix_float32", mutates_args=())
def mix_float32(x: torch.Tensor, m: MixerFloat32Only) -> torch.Tensor:
    """``x @ m.weight()``; raises unless ``x`` is float32."""
    torch._check(x.dtype == torch.float32, lambda: f"mix_float32 takes float32 only, got {x.dtype}")
    return x @ m.weight()


@mix_float32.register_fake
def _mix_float32_fake(x, m):
    return x.new_empty((*x.shape[:-1], WEIGHT.shape[1]))


torch.library.register_autocast("samples_autocast::mix_float32", "cpu", torch.bfloat16)
