"""Correct fake classes for the ``samples_patterns`` C++ classes (csrc/samples_patterns.cpp).

Each class uses a binding pattern a gate must judge right: ``Versioned`` has ``def_static`` methods (the fake may
define them as staticmethods, or leave them out), ``AnyBox.get`` returns ``c10::IValue`` (schema type ``Any``),
``Bag`` binds Python dunder methods and ``merge`` takes another ``Bag`` (a ``FakeScriptObject`` while tracing),
``Holder``'s ``__obj_flatten__`` hands out the tensor its constructor got (a C++ bug: its fake is correct) and
``CopyingHolder`` is the same class done right.

Imported by ``sample_classes`` (registration is idempotent).
"""

from __future__ import annotations

from typing import Union

import torch

from .fakes import register_fake_classes

__all__ = ["FakeVersioned", "FakeAnyBox", "FakeBag", "FakeHolder", "FakeCopyingHolder", "FAKE_CLASSES", "register"]


class FakeVersioned:
    def __init__(self, n: int) -> None:
        self.n = n

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def bump(self, by: int) -> int:
        self.n += by
        return self.n

    def value(self) -> int:
        return self.n

    @staticmethod
    def version() -> int:
        return 3

    @staticmethod
    def clamp(x: int, hi: int) -> int:
        return min(x, hi)


class FakeAnyBox:
    def __init__(self, tag: int, items: list[torch.Tensor]) -> None:
        self.tag = tag
        self.items = list(items)

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def put(self, t: torch.Tensor) -> None:
        self.items.append(t.clone())

    def get(self) -> Union[int, torch.Tensor]:
        # C++ returns an IValue: the tag while empty, the last tensor afterwards.
        return self.items[-1].clone() if self.items else self.tag


def _xs(other) -> list[int]:
    """The elements of another Bag as a fake method receives it: a ``FakeScriptObject`` wrapping a ``FakeBag``
    while torch.compile or non-strict export traces — but strict export hands the fake the real ``ScriptObject``
    (the coverage matrix shows it), so read that through its ``__obj_flatten__``."""
    if isinstance(other, torch.ScriptObject):
        return list(dict(other.__obj_flatten__())["xs"])
    return other.wrapped_obj.xs


class FakeBag:
    def __init__(self, xs: list[int]) -> None:
        self.xs = list(xs)

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def add(self, x: int) -> None:
        self.xs.append(x)

    def merge(self, other) -> None:
        self.xs.extend(_xs(other))

    def __len__(self) -> int:
        return len(self.xs)

    def __contains__(self, x: int) -> bool:
        return x in self.xs

    def __getitem__(self, i: int) -> int:
        if not -len(self.xs) <= i < len(self.xs):
            raise RuntimeError("Bag index out of range")
        return self.xs[i]

    def __eq__(self, other) -> bool:
        return self.xs == _xs(other)

    __hash__ = None  # defines __eq__, so not hashable (as in C++: no __hash__ is bound)

    def __str__(self) -> str:
        return f"Bag({len(self.xs)})"


class FakeHolder:
    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def get(self) -> torch.Tensor:
        return self.t  # C++ returns its own tensor each time (the same storage)


class FakeCopyingHolder:
    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    @classmethod
    def __obj_unflatten__(cls, flattened):  # in the class itself: register_fake_class looks in its __dict__
        return cls(**dict(flattened))

    def get(self) -> torch.Tensor:
        return self.t.clone()  # C++ returns a copy each time


FAKE_CLASSES = {
    "samples_patterns::Versioned": FakeVersioned,
    "samples_patterns::AnyBox": FakeAnyBox,
    "samples_patterns::Bag": FakeBag,
    "samples_patterns::Holder": FakeHolder,
    "samples_patterns::CopyingHolder": FakeCopyingHolder,
}


def register(force: bool = False) -> None:
    """Register the fakes above (idempotent; see sample_classes.fakes.register)."""
    register_fake_classes(FAKE_CLASSES, force)


register()
