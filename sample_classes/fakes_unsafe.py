"""Fake classes for the ``samples_unsafe`` C++ classes, whose C++ code crashes or hangs on purpose.

These fakes are CORRECT: they do what the C++ methods were meant to do (csrc/samples_unsafe.cpp documents each
bug), so everything a conformance run reports for these classes is the C++ side's doing:

* ``samples_unsafe::CrashyStack.pop()`` on an empty stack: SIGSEGV in C++ (the fake raises ``IndexError``);
  ``wait_for(n)`` with ``n > size()``: C++ spins forever (the fake returns ``size()``, as C++ would once a
  producer had pushed).
* ``samples_unsafe::OverflowPickle``: its ``__setstate__`` crashes (SIGSEGV) on a non-empty state, so
  ``copy.deepcopy`` -- and with it torch's fakification -- of a non-empty object kills the process.

Not imported by ``sample_classes``; load it explicitly, e.g.
``pytest --torchbind-load=sample_classes.fakes_unsafe --torchbind-class='samples_unsafe::*'``, and only with the
plugin's process isolation on (the default on Linux). Importing it registers the fakes (idempotently).
"""

import torch
from .fakes import register_fake_classes

__all__ = ["FakeCrashyStack", "FakeOverflowPickle", "FAKE_CLASSES", "register"]


class FakeCrashyStack:
    def __init__(self, items: list[torch.Tensor]) -> None:
        self.items = list(items)

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def push(self, t: torch.Tensor) -> None:
        self.items.append(t)

    def pop(self) -> torch.Tensor:
        return self.items.pop()

    def size(self) -> int:
        return len(self.items)

    def wait_for(self, n: int) -> int:
        return len(self.items)


class FakeOverflowPickle:
    def __init__(self, items: list[torch.Tensor]) -> None:
        self.items = list(items)

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def push(self, t: torch.Tensor) -> None:
        self.items.append(t)

    def size(self) -> int:
        return len(self.items)


FAKE_CLASSES = {
    "samples_unsafe::CrashyStack": FakeCrashyStack,
    "samples_unsafe::OverflowPickle": FakeOverflowPickle,
}


def register(force: bool = False) -> None:
    """Register the fakes above (idempotent; see sample_classes.fakes.register)."""
    register_fake_classes(FAKE_CLASSES, force)


register()
