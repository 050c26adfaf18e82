"""Python custom classes whose custom ops' fake kernels (``register_fake``) are compared with the real ops, for the
plugin's own tests (``tests/unit/custom/test_fake_kernels.py``).

* :class:`Crop`, a constant (value) class: ``samples_opfake::crop(x, c)`` is ``x[c.start:c.start + c.length]``
  (a copy), and its fake gives that shape, reading the object (a constant object reaches a fake kernel as the real
  object).
* :class:`CropFakeKeepsShape`, the same class registered on its own, with ``samples_opfake::crop_wrong``, whose
  fake returns ``x``'s shape: eager and a program compiled with the ``eager`` or ``aot_eager`` backend give the
  cropped tensor (the real kernel runs), while tracing under ``FakeTensorMode`` and torch.compile with inductor
  (which plans its buffers from the fake's shape) do not.
* :class:`CropHoisted`, :class:`Crop` registered with ``hoist=True`` and no members: its objects are graph inputs
  and reach fake kernels as ``FakeScriptObject`` objects, so ``samples_opfake::crop``'s fake, which reads
  ``start``, cannot run while torch.compile traces (eager and export, which pass the real object, are fine).
* :class:`Tiles`, a symbolic (reference) class: ``samples_opfake::tile(x, t)`` stacks ``t.count()`` copies of
  ``x``; its fake reads ``count``, a ``USE_REAL`` member, as a symbolic class's fake may. torch.compile and export
  run it; AOTInductor calls the fake with ``None`` for the object while compiling (a known torch limitation,
  ``custom-aoti-object``).

Registered through whichever API the running torch has (:mod:`sample_classes.custom_classes`).
"""

from __future__ import annotations

import torch

from .custom_classes import _SymbolicBase, register_constant, register_symbolic

__all__ = ["Crop", "CropFakeKeepsShape", "CropHoisted", "crop", "crop_wrong", "Tiles", "tile"]


@register_constant
class Crop:
    """A window ``[start, start + length)`` along a tensor's first dimension (both non-negative)."""

    def __init__(self, start: int, length: int):
        if start < 0 or length < 0:
            raise ValueError(f"Crop: start and length must be non-negative, got {start}, {length}")
        self.start = start
        self.length = length

    def __eq__(self, other):
        return type(other) is type(self) and (self.start, self.length) == (other.start, other.length)

    def __hash__(self):
        return hash((type(self).__name__, self.start, self.length))

    def __fx_repr__(self):
        name = type(self).__name__
        return f"{name}({self.start!r}, {self.length!r})", {name: type(self)}

    def __repr__(self):
        return f"{type(self).__name__}({self.start!r}, {self.length!r})"


def _cropped(x: torch.Tensor, c: Crop) -> torch.Tensor:
    if x.dim() == 0:
        raise ValueError("crop needs a tensor with at least one dimension")
    return x[c.start:c.start + c.length].clone(memory_format=torch.contiguous_format)


@torch.library.custom_op("samples_opfake::crop", mutates_args=())
def crop(x: torch.Tensor, c: Crop) -> torch.Tensor:
    """``x[c.start:c.start + c.length]``, a new contiguous tensor."""
    return _cropped(x, c)


@crop.register_fake
def _crop_fake(x, c):
    size = x.shape[0]
    return x.new_empty((max(0, min(size, c.start + c.length) - min(size, c.start)), *x.shape[1:]))


@register_constant
class CropFakeKeepsShape(Crop):
    """Broken: the fake kernel of ``samples_opfake::crop_wrong`` returns ``x``'s shape, not the cropped one."""


@torch.library.custom_op("samples_opfake::crop_wrong", mutates_args=())
def crop_wrong(x: torch.Tensor, c: CropFakeKeepsShape) -> torch.Tensor:
    """The same as ``samples_opfake::crop``; only its fake is wrong."""
    return _cropped(x, c)


@crop_wrong.register_fake
def _crop_wrong_fake(x, c):
    return torch.empty_like(x)  # the defect: the real op returns c.length rows (or fewer)


@register_constant(hoist=True)
class CropHoisted(Crop):
    """Broken as hoisted: ``samples_opfake::crop``'s fake reads ``start`` and ``length``, which a hoisted object
    does not carry while tracing (no member is registered)."""


@register_symbolic(guard_fn=lambda t: [t.times], use_real=("count",))
class Tiles(_SymbolicBase):
    """A symbolic custom class: how many copies ``samples_opfake::tile`` stacks, read through the ``USE_REAL``
    member ``count()``."""

    def __init__(self, times: int):
        if times < 0:
            raise ValueError(f"Tiles: times must be non-negative, got {times}")
        self.times = times

    def count(self) -> int:
        return self.times


@torch.library.custom_op("samples_opfake::tile", mutates_args=())
def tile(x: torch.Tensor, t: Tiles) -> torch.Tensor:
    """``t.count()`` copies of ``x`` stacked along a new first dimension."""
    return x.unsqueeze(0).expand(t.count(), *x.shape).clone(memory_format=torch.contiguous_format)


@tile.register_fake
def _tile_fake(x, t):
    return x.new_empty((t.count(), *x.shape))  # count is a USE_REAL member: read on the real object
