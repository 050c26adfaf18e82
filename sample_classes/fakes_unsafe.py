"""Fake classes for the ``samples_unsafe`` C++ classes, whose C++ code crashes or hangs on purpose.

These fakes are CORRECT: they do what the C++ methods were meant to do (csrc/samples_unsafe.cpp documents each
bug), so everything a conformance run reports for these classes is the C++ side's doing:

* ``samples_unsafe::CrashyStack.pop()`` on an empty stack: SIGSEGV in C++ (the fake raises ``IndexError``);
  ``wait_for(n)`` with ``n > size()``: C++ spins forever (the fake returns ``size()``, as C++ would once a
  producer had pushed).
* ``samples_unsafe::OverflowPickle``: its ``__setstate__`` crashes (SIGSEGV) on a non-empty state, so
  ``copy.deepcopy`` -- and with it torch's fakification -- of a non-empty object kills the process.
* ``samples_unsafe::Leaky``: ``grow(n)`` leaks ``n`` blocks of ``block_mb`` MiB (resident, never freed, written
  at one MiB per millisecond); the fake counts them. Its examples come from :func:`leaky_examples` (blocks of
  :data:`LEAKY_BLOCK_MB` MiB, no derived states), so ``agreement[grow]`` leaks 768 MiB in C++ (``grow(2)``,
  ``grow(1)``, ``grow(3)``): a run with ``--torchbind-memory-limit=100MiB`` fails it for the memory limit.

Not imported by ``sample_classes``; load it explicitly, e.g.
``pytest --torchbind-load=sample_classes.fakes_unsafe --torchbind-class='samples_unsafe::*'``, and only with the
plugin's process isolation on (the default on Linux). Importing it registers the fakes (idempotently).
"""

import torch

from .fakes import register_fake_classes

__all__ = ["FakeCrashyStack", "FakeOverflowPickle", "FakeLeaky", "FAKE_CLASSES", "LEAKY_BLOCK_MB", "leaky_examples",
           "register"]

#: MiB per block of the ``samples_unsafe::Leaky`` examples.
LEAKY_BLOCK_MB = 128


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


class FakeLeaky:
    def __init__(self, block_mb: int, held_mb: int) -> None:
        self.block_mb, self.held_mb = block_mb, held_mb

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def grow(self, n: int) -> int:
        self.held_mb += max(n, 0) * self.block_mb
        return self.held_mb

    def held(self) -> int:
        return self.held_mb


FAKE_CLASSES = {
    "samples_unsafe::CrashyStack": FakeCrashyStack,
    "samples_unsafe::OverflowPickle": FakeOverflowPickle,
    "samples_unsafe::Leaky": FakeLeaky,
}


def leaky_examples():
    """The ``samples_unsafe::Leaky`` examples: one object leaking blocks of :data:`LEAKY_BLOCK_MB` MiB (the
    generated constructor arguments, 1-3 MiB, would leak too little to show)."""
    return [torch.classes.samples_unsafe.Leaky(LEAKY_BLOCK_MB)]


def register(force: bool = False) -> None:
    """Register the fakes above (idempotent; see sample_classes.fakes.register), and :func:`leaky_examples` (without
    derived states: each would leak again whenever it is built) in the process's registry, once."""
    register_fake_classes(FAKE_CLASSES, force)
    from conformance.core.registry import REGISTRY

    if leaky_examples not in REGISTRY.factories("samples_unsafe::Leaky"):
        REGISTRY.add_factory("samples_unsafe::Leaky", leaky_examples, derive=False)


register()
