"""The fake for ``samples_lists::Batch`` (csrc/samples_lists.cpp): a holder whose methods take tensors only as a
list. ``FakeBatch`` is CORRECT.

``store(xs)`` keeps the tensors as given and ``total()`` reads them when called, so a compiler that reuses the
buffer of a tensor the program computed and handed over makes ``total()`` read other numbers: the matrix's
``computed`` row computes each element of the list in the program for such a class
(tests/unit/matrix/test_computed_lists.py).

Not imported by ``sample_classes``; load it explicitly::

    pytest --torchbind-load=sample_classes --torchbind-load=sample_classes.fakes_lists \\
        --torchbind-class='samples_lists::Batch'

Importing this module registers the fake (idempotently).
"""

from __future__ import annotations

import torch

from .fakes import register_fake_classes

__all__ = ["FakeBatch", "FAKE_CLASSES", "register"]


class FakeBatch:
    def __init__(self, items: list[torch.Tensor]) -> None:
        self.items = list(items)

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def store(self, xs: list[torch.Tensor]) -> None:
        self.items.extend(xs)

    def total(self) -> torch.Tensor:
        total = torch.zeros(())
        for x in self.items:
            total = total + x.sum()
        return total

    def count(self) -> int:
        return len(self.items)


FAKE_CLASSES = {"samples_lists::Batch": FakeBatch}


def register() -> None:
    """Register the fake class (idempotent)."""
    register_fake_classes(FAKE_CLASSES)


register()
