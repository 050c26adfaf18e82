"""Fake classes for the deliberately broken ``samples_broken`` C++ classes.

These fakes are CORRECT relative to the C++ methods: whatever a conformance
checker reports for these classes is the fault of the C++ side
(csrc/samples_broken.cpp).  ``samples_broken::NoFlatten`` deliberately has no
fake class.

Not imported by ``sample_classes``; load it explicitly, e.g.
``pytest --torchbind-load=sample_classes.fakes_broken``.  Importing it
registers the fakes (idempotently).
"""

import torch
from .fakes import register_fake_classes

__all__ = [
    "FakeFlattenDup",
    "FakeFlattenMutates",
    "FakeBadTracingMode",
    "FakeLossyPickle",
    "FakeFlattenWrongStructure",
    "FakePickyInit",
    "FAKE_CLASSES",
    "register",
]


class FakeFlattenDup:
    """C++ flattens to (("t", t), ("t", t.view(-1))): the first "t" is the real one."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    @classmethod
    def __obj_unflatten__(cls, flattened):
        # dict(flattened) would keep the LAST "t" (the flattened view), so
        # take the first entry explicitly.
        for name, value in flattened:
            if name == "t":
                return cls(value)
        raise KeyError("t")

    def get(self) -> torch.Tensor:
        return self.t


class FakeFlattenMutates:
    def __init__(self, n: int) -> None:
        self.n = n

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def get(self) -> int:
        return self.n


class FakeBadTracingMode:
    def __init__(self, v: int) -> None:
        self.v = v

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def get(self) -> int:
        return self.v

    def tracing_mode(self) -> str:
        return "sometimes"


class FakeLossyPickle:
    def __init__(self, items: list[int]) -> None:
        self.items = list(items)

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def push(self, x: int) -> None:
        self.items.append(x)

    def size(self) -> int:
        return len(self.items)


class FakeFlattenWrongStructure:
    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(flattened[0])

    def get(self) -> torch.Tensor:
        return self.t


class FakePickyInit:
    def __init__(self, n: int) -> None:
        self.n = n

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def get(self) -> int:
        return self.n


FAKE_CLASSES = {
    "samples_broken::FlattenDup": FakeFlattenDup,
    "samples_broken::FlattenMutates": FakeFlattenMutates,
    "samples_broken::BadTracingMode": FakeBadTracingMode,
    "samples_broken::LossyPickle": FakeLossyPickle,
    "samples_broken::FlattenWrongStructure": FakeFlattenWrongStructure,
    "samples_broken::PickyInit": FakePickyInit,
    # samples_broken::NoFlatten: no fake class on purpose.
}


def register(force: bool = False) -> None:
    """Register the fakes above (idempotent; see sample_classes.fakes.register)."""
    register_fake_classes(FAKE_CLASSES, force)


register()
