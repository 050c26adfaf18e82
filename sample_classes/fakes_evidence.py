"""Fakes for ``samples_evidence::Span`` (csrc/samples_evidence.cpp): the correct one, and one whose
``__obj_unflatten__`` reads the flattened pairs by position the wrong way round (``lo`` and ``hi`` swapped); and
for ``samples_evidence::Ticketer``, whose C++ ``next()`` reads a process-wide counter.

Span's flattened keys ``lo`` and ``hi`` are also its getters' names, so both fakes keep the values as ``_lo`` /
``_hi`` and serve them through ``lo()`` / ``hi()``. Not imported by ``sample_classes``: a test imports this module
(the correct fake registers on import) and swaps in :class:`FakeSpanSwapped` with :func:`install_swapped`.
"""

from __future__ import annotations

import torch

from .fakes import register_fake_classes

__all__ = ["FakeSpan", "FakeSpanSwapped", "FakeTicketer", "FakeLedger", "register", "install_swapped"]


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


class FakeTicketer:
    """``next()`` as a fresh process's first call gives it: C++ counts tickets in a process-wide static, which no
    fake (and no flattened state) can carry."""

    def __init__(self, base: int) -> None:
        self.base = base

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def next(self) -> int:
        return self.base + 1


class FakeLedger:
    """``spend(x)`` books an entry and returns a tensor of ``x``'s shape (its value depends on ``x``'s data)."""

    def __init__(self, entries: int) -> None:
        self.entries_ = entries

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(dict(flattened)["entries"])

    def spend(self, x: torch.Tensor) -> torch.Tensor:
        self.entries_ += 1
        return torch.empty_like(x)

    def entries(self) -> int:
        return self.entries_


def register(force: bool = False) -> None:
    """Register the correct fakes of this module (idempotent unless ``force``)."""
    register_fake_classes({"samples_evidence::Span": FakeSpan, "samples_evidence::Ticketer": FakeTicketer,
                           "samples_evidence::Ledger": FakeLedger}, force)


def install_swapped() -> None:
    """Register :class:`FakeSpanSwapped` in place of the correct fake."""
    register_fake_classes({"samples_evidence::Span": FakeSpanSwapped}, force=True)


register()
