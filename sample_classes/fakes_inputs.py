"""Fakes for the ``samples_inputs`` C++ classes (csrc/samples_inputs.cpp): classes with preconditions.

``FakePagedCache`` and the ``samples_inputs::gather`` op fake are CORRECT; ``FakeRealEngine`` is the kind of stale
fake a library keeps after switching its class to ``tracing_mode() == "real"`` (torch never calls it: it lacks
``run`` and annotates ``scale`` wrongly, and must not be judged). :data:`BROKEN` holds broken variants, each
breaking one rule, for the tests (``with BROKEN["gather_not_implemented"].installed(): ...``).

What the adopter gives (example objects in the states the checks need, argument strategies that respect the
preconditions, the raw-pointer method excluded) is in :mod:`sample_classes.adopter_inputs`, written against the
public API only. Not imported by ``sample_classes``; load both explicitly::

    pytest --torchbind-load=sample_classes --torchbind-load=sample_classes.fakes_inputs \\
        --torchbind-load=sample_classes.adopter_inputs --torchbind-class='samples_inputs::*'

Importing this module registers the fakes (idempotently).
"""

from __future__ import annotations

import torch

from .broken import BrokenFake, _variant
from .fakes import register_fake_classes, register_op_fakes

__all__ = ["FakePagedCache", "FakeRealEngine", "fake_gather", "FAKE_CLASSES", "BROKEN", "register"]


class FakePagedCache:
    def __init__(self, block_size: int, capacity: int, blocks: list[torch.Tensor]) -> None:
        self.block_size = block_size
        self.capacity = capacity
        self.blocks = list(blocks)

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def append(self, block: torch.Tensor) -> None:
        if block.dim() != 1 or block.shape[0] != self.block_size or block.dtype != torch.float32:
            raise RuntimeError(f"PagedCache.append: expected a float32 block of shape [{self.block_size}]")
        self.blocks.append(block.clone())
        if len(self.blocks) > self.capacity:
            self.blocks.pop(0)

    def get(self, i: int) -> torch.Tensor:
        if not 0 <= i < len(self.blocks):
            raise IndexError(f"PagedCache.get: index {i} out of range")
        return self.blocks[i].clone()

    def evict_oldest(self) -> torch.Tensor:
        if not self.blocks:
            raise RuntimeError("PagedCache.evict_oldest: the cache is empty")
        return self.blocks.pop(0)

    def size(self) -> int:
        return len(self.blocks)

    def block_numel(self) -> int:
        return self.block_size

    def scratch(self, n: int) -> torch.Tensor:
        return torch.empty(n, self.block_size)

    def exec_rawptr(self, ptr: int, n: int) -> int:
        raise NotImplementedError("exec_rawptr reads raw memory; it cannot be traced")

    def __eq__(self, other) -> bool:
        other = getattr(other, "wrapped_obj", other)  # a FakeScriptObject while tracing
        return (isinstance(other, FakePagedCache) and (self.block_size, self.capacity, len(self.blocks))
                == (other.block_size, other.capacity, len(other.blocks)))


class FakeRealEngine:  # stale: torch never uses it (tracing_mode() returns "real")
    def __init__(self, scale: int) -> None:
        self.scale_ = scale

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(dict(flattened)["scale"])

    def scale(self) -> float:
        return float(self.scale_)


def fake_gather(idx: torch.Tensor, cache) -> torch.Tensor:
    if idx.dim() != 1 or idx.dtype != torch.int64:
        raise RuntimeError("gather: expected a 1-d int64 index")
    # A method, not cache.wrapped_obj: the op gets a FakeScriptObject while tracing, the real object in strict export.
    return torch.empty(idx.shape[0], cache.block_numel())


def fake_gather_backward(grad: torch.Tensor, idx: torch.Tensor, cache) -> torch.Tensor:
    if idx.dim() != 1 or grad.dim() != 2 or grad.shape[0] != idx.shape[0] or grad.shape[1] != cache.block_numel():
        raise RuntimeError("gather_backward: expected grad of shape [len(idx), block_size]")
    return torch.zeros(cache.size(), cache.block_numel())


FAKE_CLASSES = {"samples_inputs::PagedCache": FakePagedCache, "samples_inputs::RealEngine": FakeRealEngine}
OP_FAKES = {"samples_inputs::gather": fake_gather, "samples_inputs::gather_backward": fake_gather_backward}


def register() -> None:
    """Register the fake classes and the op fake (idempotent)."""
    register_fake_classes(FAKE_CLASSES)
    register_op_fakes(OP_FAKES)


register()


# --- broken variants: each breaks one rule ----------------------------------------------------------------


def _gather_not_implemented(idx, cache):
    raise NotImplementedError("gather has no fake implementation yet")


def _gather_transposed(idx, cache):  # the strides of empty_like on a transposed buffer: C++ returns contiguous
    return torch.empty(cache.block_numel(), idx.shape[0]).t()


def _gather_backward_per_index(grad, idx, cache):  # the shape of grad, not of the blocks it lands on
    return torch.zeros(idx.shape[0], cache.block_numel())


def _unflatten_swapped(cls, flattened):  # reads the fields by position, two of them swapped
    return cls(flattened[1][1], flattened[0][1], flattened[2][1])


def _append_accepts_anything(self, block):  # no precondition: returns where C++ raises (a note, not a failure)
    self.blocks.append(block.clone())
    if len(self.blocks) > self.capacity:
        self.blocks.pop(0)


def _cache(name: str, check: str, method: str | None, rule: str, fake_class=FakePagedCache, **op_fakes):
    return BrokenFake(name=name, qualname="samples_inputs::PagedCache", check=check, method=method, rule=rule,
                      fake_class=fake_class, op_fakes={f"samples_inputs::{k}": v for k, v in op_fakes.items()})


BROKEN = {bf.name: bf for bf in (
    _cache("gather_not_implemented", "custom_op", "gather",
           "the gather fake only raises NotImplementedError: every program calling gather fails to compile",
           gather=_gather_not_implemented),
    _cache("gather_no_fake", "custom_op", "gather",
           "gather has no Python fake: every program calling it on a traced object fails to compile",
           gather=None),
    _cache("gather_transposed", "custom_op", "gather",
           "the gather fake returns a transposed result where C++ returns a contiguous one (inductor asserts "
           "on the strides)", gather=_gather_transposed),
    _cache("gather_backward_per_index", "custom_op", "gather_backward",
           "the gather_backward fake returns one row per index where C++ returns one per block",
           gather_backward=_gather_backward_per_index),
    _cache("cache_unflatten_swapped", "agreement", "block_numel",
           "__obj_unflatten__ reads block_size from the capacity slot and back: block_numel() answers with the "
           "capacity (roundtrip notes the swap: torch reads neither int of the fake itself)",
           fake_class=_variant(FakePagedCache, "FakePagedCacheSwapped",
                               __obj_unflatten__=classmethod(_unflatten_swapped))),
    _cache("cache_append_accepts_anything", "agreement", "append",
           "the fake append accepts blocks C++ rejects (noted, not failed: torch raises at run time there)",
           fake_class=_variant(FakePagedCache, "FakePagedCacheLax", append=_append_accepts_anything)),
)}
