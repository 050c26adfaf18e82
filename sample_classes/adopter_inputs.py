"""What an adopter of the gate writes for ``samples_inputs::PagedCache``, using only the public API
(``conformance.examples``, ``conformance.strategy``, hypothesis strategies).

``PagedCache``'s methods and its ``gather`` op have preconditions (a block of the cache's block size, an index
within its length); generated arguments break them, so without this module the per-call items skip saying that
nothing was compared. With it:

* example objects in the states the checks need: empty, one block, full (an append evicted the oldest);
* argument strategies that depend on the object they are for (a factory taking the object): blocks of its block
  size, indices within its length, ``gather`` indices within its length, and the whole argument list of
  ``gather_backward``, whose precondition spans two arguments (a grad of shape [len(idx), block size]);
* ``exec_rawptr(ptr, n)`` dereferences its int: no made-up int is safe, so it is excluded — nothing calls it, its
  call-based items skip, and ``coverage``/``signature`` still apply.

Load it after the library and its fakes: ``--torchbind-load=sample_classes.fakes_inputs
--torchbind-load=sample_classes.adopter_inputs``.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

import conformance

CACHE = "samples_inputs::PagedCache"


@conformance.examples(CACHE)
def caches():
    """Empty, one block, and full after an eviction (block size 3, capacity 2)."""
    make = torch.classes.samples_inputs.PagedCache
    yield make(3, 2)
    one = make(3, 2)
    one.append(torch.arange(3, dtype=torch.float32))
    yield one
    full = make(3, 2)
    for k in range(3):
        full.append(torch.full((3,), float(k)))
    yield full


@conformance.strategy(CACHE, "append", arg=0)
def blocks(cache):
    """A float32 block of the cache's block size."""
    size = cache.block_numel()
    return st.integers(0, 9).map(lambda k: f"torch.full(({size},), {k}.0)")


@conformance.strategy(CACHE, "get", arg=0)
def indices(cache):
    """An index within the cache's length (none for an empty cache)."""
    n = cache.size()
    return st.integers(0, n - 1) if n else st.nothing()


@conformance.strategy(CACHE, "samples_inputs::gather", arg="idx")
def gather_indices(cache):
    """A 1-d int64 tensor of indices within the cache's length (none for an empty cache)."""
    n = cache.size()
    if not n:
        return st.nothing()
    return st.lists(st.integers(0, n - 1), min_size=1, max_size=3).map(lambda ks: f"torch.tensor({ks})")


@conformance.strategy(CACHE, "samples_inputs::gather_backward")
def gather_backward_arguments(cache):
    """The whole argument list, because its precondition spans two arguments: indices within the cache's length
    and a grad of shape [len(idx), block size]."""
    n, size = cache.size(), cache.block_numel()
    if not n:
        return st.nothing()
    return st.lists(st.integers(0, n - 1), min_size=1, max_size=3).map(
        lambda ks: f"torch.ones({len(ks)}, {size}), torch.tensor({ks})")


@conformance.strategy(CACHE, "scratch", arg=0)
def scratch_rows():
    """scratch(n) returns torch::empty rows: n >= 1 makes its values garbage (compared by metadata only)."""
    return st.integers(1, 3)


@conformance.strategy(CACHE, "__eq__", arg=0)
def other_caches():
    """Another cache to compare with: equal to an example, or not."""
    return st.sampled_from(["torch.classes.samples_inputs.PagedCache(3, 2)",
                            "torch.classes.samples_inputs.PagedCache(4, 2)"])


conformance.strategy(CACHE, "exec_rawptr")(lambda: None)  # dereferences its int: never call it
