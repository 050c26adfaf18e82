"""Fakes for ``samples_stale::Vocab`` (csrc/samples_stale.cpp): a vocabulary whose lookups read a default index;
and for ``samples_stale::Toggle``, a counter with a switch its C++ ``__obj_flatten__`` omits.

``FakeToggle`` is CORRECT, yet starts disabled whatever the C++ object's switch is (no fake can make up for the
omission): a matrix cell that compiles again for a Toggle switched on fails, and names the class's flatten
(tests/unit/matrix/test_matrix_stale.py).

``FakeVocab`` is CORRECT. :data:`BROKEN` holds ``vocab_constant_default``, a fake whose ``get_default_index`` and
``__getitem__`` return a constant (0) instead of the object's default index: ``agreement`` names both methods, and
every matrix cell whose traced program burns that constant in fails with a pointer back to the agreement item;
``vocab_setter_keeps_nothing``, whose ``set_default_index`` keeps nothing (its result, None, is right: the
``differential`` item, and a matrix cell naming the setter, not the getter after it); and ``vocab_lookup_scalar``, whose ``lookup`` returns shape ``[]``: inductor cells fail with "wrong number of
dimensions", pointing back to ``agreement[lookup]``. (``with BROKEN["vocab_constant_default"].installed(): ...``.)

A correct fake does not keep a program's results fresh: torch.export burns an int result (``vocab["unknown"]``,
``get_default_index()``) into the program as a constant, so the exported program returns the traced vocabulary's
default for every other vocabulary; torch.compile guards on the flattened state and recompiles. The coverage
matrix shows both numbers (tests/unit/matrix/test_matrix_stale.py).

Not imported by ``sample_classes``; load it explicitly::

    pytest --torchbind-load=sample_classes --torchbind-load=sample_classes.fakes_stale \\
        --torchbind-class='samples_stale::Vocab'

Importing this module registers the fake (idempotently).
"""

from __future__ import annotations

import torch

from .broken import BrokenFake, _variant
from .fakes import register_fake_classes

__all__ = ["FakeVocab", "FakeToggle", "FAKE_CLASSES", "BROKEN", "register"]


class FakeVocab:
    def __init__(self, tokens: list[str], default_index: int) -> None:
        self.tokens = list(tokens)
        self.default_index = default_index

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def __getitem__(self, token: str) -> int:
        return self.tokens.index(token) if token in self.tokens else self.default_index

    def __len__(self) -> int:
        return len(self.tokens)

    def get_default_index(self) -> int:
        return self.default_index

    def set_default_index(self, index: int) -> None:
        self.default_index = index

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.where(ids < len(self.tokens), ids, torch.full_like(ids, self.default_index))


class FakeToggle:
    def __init__(self, ticks: int) -> None:
        self.ticks = ticks
        self.enabled = False  # not in __obj_flatten__: a fake made from a C++ Toggle always starts disabled

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def tick(self) -> None:
        self.ticks += 1

    def is_enabled(self) -> bool:
        return self.enabled

    def enable(self) -> None:
        self.enabled = True

    def count(self) -> int:
        return self.ticks


FAKE_CLASSES = {"samples_stale::Vocab": FakeVocab, "samples_stale::Toggle": FakeToggle}


def register() -> None:
    """Register the fake class (idempotent)."""
    register_fake_classes(FAKE_CLASSES)


register()


# --- a broken variant -----------------------------------------------------------------------------------------


def _constant_default(self) -> int:  # the default index a fake author assumed, not the object's
    return 0


def _constant_getitem(self, token: str) -> int:
    return self.tokens.index(token) if token in self.tokens else 0


def _set_default_keeps_nothing(self, index: int) -> None:  # a setter stub: returns None as C++ does, keeps nothing
    return None


def _lookup_scalar(self, ids: torch.Tensor) -> torch.Tensor:  # a reduction where C++ maps ids elementwise
    return torch.where(ids < len(self.tokens), ids, torch.full_like(ids, self.default_index)).sum()


BROKEN = {bf.name: bf for bf in (
    BrokenFake(name="vocab_constant_default", qualname="samples_stale::Vocab", check="agreement",
               method="get_default_index",
               rule="get_default_index and __getitem__ return 0 for the default index, whatever the object holds",
               fake_class=_variant(FakeVocab, "FakeVocabConstantDefault", get_default_index=_constant_default,
                                   __getitem__=_constant_getitem)),
    BrokenFake(name="vocab_lookup_scalar", qualname="samples_stale::Vocab", check="agreement", method="lookup",
               rule="lookup returns shape [] where C++ returns the ids' shape (inductor's generated code asserts the "
                    "fake's shape: 'wrong number of dimensions')",
               fake_class=_variant(FakeVocab, "FakeVocabLookupScalar", lookup=_lookup_scalar)),
    BrokenFake(name="vocab_setter_keeps_nothing", qualname="samples_stale::Vocab", check="differential",
               method="set_default_index",
               rule="set_default_index returns None as C++ does but keeps nothing, so a later get_default_index "
                    "(itself correct) returns the old index",
               fake_class=_variant(FakeVocab, "FakeVocabSetterKeepsNothing",
                                   set_default_index=_set_default_keeps_nothing)),
)}
