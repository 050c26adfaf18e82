"""Fakes for ``samples_evidence::Span`` (csrc/samples_evidence.cpp): the correct one, and one whose
``__obj_unflatten__`` reads the flattened pairs by position the wrong way round (``lo`` and ``hi`` swapped).

Span's flattened keys ``lo`` and ``hi`` are also its getters' names, so both fakes keep the values as ``_lo`` /
``_hi`` and serve them through ``lo()`` / ``hi()``. Not imported by ``sample_classes``: a test imports this module
(the correct fake registers on import) and swaps in :class:`FakeSpanSwapped` with :func:`install_swapped`.
"""

from __future__ import annotations

import torch

from .fakes import register_fake_classes

__all__ = ["FakeSpan", "FakeSpanSwapped", "register", "install_swapped"]


class FakeSpan:
    """The interval ``[lo, hi]``; ``lo`` and ``hi`` are ints, as C++ flattens them."""

    def __init__(self, lo: int, hi: int) -> None:
        self._lo, self._hi = lo, hi

    @classmethod
    def __obj_unflatten__(cls, flattened):
        state = dict(flattened)
        return cls(state["lo"], state["hi"])

    def lo(self) -> int:
        return self._lo

    def hi(self) -> int:
        return self._hi

    def width(self) -> int:
        return self._hi - self._lo

    def clamp(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    def __len__(self) -> int:
        raise RuntimeError("Span has no length; use width()")


class FakeSpanSwapped(FakeSpan):
    """Reads the pairs by position, the wrong way round: ``lo`` gets the flattened ``hi`` and the reverse."""

    @classmethod
    def __obj_unflatten__(cls, flattened):
        (_, first), (_, second) = flattened
        return cls(second, first)


def register(force: bool = False) -> None:
    """Register :class:`FakeSpan` for ``samples_evidence::Span`` (idempotent unless ``force``)."""
    register_fake_classes({"samples_evidence::Span": FakeSpan}, force)


def install_swapped() -> None:
    """Register :class:`FakeSpanSwapped` in place of the correct fake."""
    register_fake_classes({"samples_evidence::Span": FakeSpanSwapped}, force=True)


register()
