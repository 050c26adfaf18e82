"""Constant (value) custom classes written the way a training library writes its FP8 quantizer: a scale and a usage
flag that the library's code changes as it goes (``set_usage(rowwise=...)``), with an op registered through
``torch.library.Library.define`` + ``impl`` + ``register_fake``.

* :class:`Quantizer` (CORRECT): ``with_usage(rowwise)`` returns a new quantizer; the object never changes.
* :class:`MutableQuantizer` (BROKEN): ``set_usage(rowwise)`` changes the object in place. torch.compile guards a
  constant object by ``==`` against the object it compiled with, which it keeps, and an object changed in place
  stays equal to itself: a program compiled before ``set_usage`` keeps returning the old result.

Ops, namespace ``samples_quant``, defined with schema string literals: ``quantize(Tensor x, Quantizer q)`` and
``quantize_mutable(Tensor x, MutableQuantizer q)``, each ``x * q.scale`` for row-wise usage and ``-(x * q.scale)``
for column-wise (a stand-in for the transposed layout).
"""

from __future__ import annotations

import torch

from .custom_classes import register_constant

__all__ = ["Quantizer", "MutableQuantizer", "LIB"]

NAMESPACE = "samples_quant"
LIB = torch.library.Library(NAMESPACE, "FRAGMENT")


class _Base:
    def __init__(self, scale: float, rowwise: bool = True):
        self.scale = scale
        self.rowwise = rowwise

    def __eq__(self, other):
        return type(other) is type(self) and (self.scale, self.rowwise) == (other.scale, other.rowwise)

    def __hash__(self):
        return hash((type(self).__name__, self.scale, self.rowwise))

    def __fx_repr__(self):
        name = type(self).__name__
        return f"{name}({self.scale!r}, {self.rowwise!r})", {name: type(self)}

    def __repr__(self):
        return f"{type(self).__name__}({self.scale!r}, {self.rowwise!r})"


@register_constant
class Quantizer(_Base):
    """CORRECT: a new quantizer for another usage; the object itself never changes."""

    def with_usage(self, rowwise: bool) -> Quantizer:
        return Quantizer(self.scale, rowwise)


@register_constant
class MutableQuantizer(_Base):
    """BROKEN: ``set_usage`` changes the object in place, which no compiled program sees."""

    def set_usage(self, rowwise: bool) -> None:
        self.rowwise = rowwise


def _quantize(x: torch.Tensor, q) -> torch.Tensor:
    scaled = x * q.scale
    return scaled if q.rowwise else -scaled


def _quantize_fake(x, q):
    return torch.empty_like(x)


LIB.define("quantize(Tensor x, sample_classes.quantizers.Quantizer q) -> Tensor")
LIB.impl("quantize", _quantize, "CompositeExplicitAutograd")
torch.library.register_fake(f"{NAMESPACE}::quantize", lib=LIB)(_quantize_fake)

LIB.define("quantize_mutable(Tensor x, sample_classes.quantizers.MutableQuantizer q) -> Tensor")
LIB.impl("quantize_mutable", _quantize, "CompositeExplicitAutograd")
torch.library.register_fake(f"{NAMESPACE}::quantize_mutable", lib=LIB)(_quantize_fake)
