"""Correct fakes for the ``samples_limits`` classes (``sample_classes/csrc/samples_limits.cpp``): classes that meet
torch's limits in the coverage matrix.

``Vocab`` binds ``__contains__``, ``__getitem__`` and ``__len__`` taking a str token (after a text library's
vocabulary); ``Stash.store(t)`` keeps the tensor it is given, which strict export hands it as a FakeTensor while it
traces the real object; the op ``stash_scale`` has a CUDA kernel only. The fakes agree with C++: what the matrix
reports on these classes is torch's doing.

Imported by ``sample_classes`` (registration is idempotent).
"""

from __future__ import annotations

import torch

from torch._library.simple_registry import singleton as _simple_registry

from .fakes import register_fake_classes

__all__ = ["FakeVocab", "FakeStash", "FAKE_CLASSES", "OP_FAKES", "register"]

_lib: torch.library.Library | None = None


class FakeVocab:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = list(tokens)

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def __contains__(self, token: str) -> bool:
        return token in self.tokens

    def __getitem__(self, token: str) -> int:
        return self.tokens.index(token) if token in self.tokens else -1

    def __len__(self) -> int:
        return len(self.tokens)

    def append_token(self, token: str) -> None:
        self.tokens.append(token)


class FakeStash:
    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def store(self, t: torch.Tensor) -> None:
        self.t = t

    def get(self) -> torch.Tensor:
        return self.t.clone()


def stash_scale_fake(stash, x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)  # x * stash.t.sum(): x's shape and dtype


FAKE_CLASSES = {
    "samples_limits::Vocab": FakeVocab,
    "samples_limits::Stash": FakeStash,
}
OP_FAKES = {"samples_limits::stash_scale": stash_scale_fake}


def register(force: bool = False) -> None:
    """Register the fakes above, idempotently (``force``: replace fakes registered already)."""
    global _lib
    register_fake_classes(FAKE_CLASSES, force)
    for qualname, fn in OP_FAKES.items():
        if _simple_registry.find(qualname).fake_impl.kernel is not None and not force:
            continue
        if _lib is None:
            _lib = torch.library.Library("samples_limits", "FRAGMENT")
        torch.library.register_fake(qualname, fn, lib=_lib)


register()
