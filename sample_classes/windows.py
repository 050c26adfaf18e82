"""Symbolic (reference) custom classes written the way a communications library writes its memory window: a window
over a buffer of some shape and dtype, taken by an op registered through ``torch.library.Library.define`` + ``impl``
+ ``register_fake`` that views a flat tensor as the window's shape.

The fake kernel reads the window's ``rows`` and ``cols``, registered ``USE_REAL`` members (evaluated on the real
object while compiling).

* :class:`Window` (CORRECT): ``guard_fn`` returns the shape and the dtype, everything the op's output depends on.
* :class:`WindowByBytes` (BROKEN): ``guard_fn`` returns the size in bytes only, as a library that checks buffer
  sizes does. A ``[2, 3]`` and a ``[3, 2]`` float32 window guard the same, so torch.compile reuses a program
  compiled for one on the other. With dynamo's ``eager`` backend the reused graph calls the op again and returns
  the right shape; inductor compiled the op as an extern kernel whose output it asserts to have the traced size
  and stride (``assert_size_stride``), so the reused program raises.

Ops, namespace ``samples_win``: ``view_as_window(Tensor x, Window w)`` and ``view_as_window_bytes(Tensor x,
WindowByBytes w)``, each ``x[:numel].reshape(w.shape)`` (``x`` holds at least ``numel`` elements).
"""

from __future__ import annotations

import math

import torch

from .custom_classes import _SymbolicBase, register_symbolic

__all__ = ["Window", "WindowByBytes", "LIB"]

NAMESPACE = "samples_win"
LIB = torch.library.Library(NAMESPACE, "FRAGMENT")


class _Base(_SymbolicBase):
    def __init__(self, rows: int, cols: int):
        if rows < 1 or cols < 1:
            raise ValueError(f"a window has at least one row and one column, got {rows} x {cols}")
        self.rows, self.cols = rows, cols
        self.dtype = torch.float32

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    def nbytes(self) -> int:
        return math.prod(self.shape) * torch.empty((), dtype=self.dtype).element_size()

    def __repr__(self):
        return f"{type(self).__name__}({self.rows!r}, {self.cols!r})"


@register_symbolic(guard_fn=lambda w: [w.rows, w.cols, str(w.dtype)], use_real=("rows", "cols"))
class Window(_Base):
    """CORRECT: ``guard_fn`` covers the shape and the dtype."""


@register_symbolic(guard_fn=lambda w: [w.nbytes()], use_real=("rows", "cols"))
class WindowByBytes(_Base):
    """BROKEN: ``guard_fn`` covers the size in bytes, not the shape."""


def _view(x: torch.Tensor, w) -> torch.Tensor:
    return x[: math.prod(w.shape)].reshape(w.shape).clone()


def _view_fake(x, w):
    return x.new_empty((w.rows, w.cols))  # rows and cols are USE_REAL members: read on the real object


LIB.define("view_as_window(Tensor x, sample_classes.windows.Window w) -> Tensor")
LIB.impl("view_as_window", _view, "CompositeExplicitAutograd")
torch.library.register_fake(f"{NAMESPACE}::view_as_window", lib=LIB)(_view_fake)

LIB.define("view_as_window_bytes(Tensor x, sample_classes.windows.WindowByBytes w) -> Tensor")
LIB.impl("view_as_window_bytes", _view, "CompositeExplicitAutograd")
torch.library.register_fake(f"{NAMESPACE}::view_as_window_bytes", lib=LIB)(_view_fake)
