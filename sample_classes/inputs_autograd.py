"""Custom ops with autograd formulas over the ``samples_inputs`` TorchBind class ``PagedCache``
(csrc/samples_inputs.cpp), defined in Python (``torch.library``) in the namespace ``samples_inputs_autograd``, for
the ``backward`` rows of the coverage matrix (``tests/unit/matrix/test_backward.py``).

``PagedCache`` is traced with its fake class (a ``FakeScriptObject``):

* ``lookup(table, idx, cache) = table[idx] + gather(idx, cache)``: a learned table plus the cached blocks; its
  autograd formula (``register_autograd``) returns ``samples_inputs::gather_backward(grad, idx, cache)`` for the
  table. CORRECT in eager and export. torch.compile with AOTAutograd (aot_eager, inductor) drops its gradient: an
  op called with a ``FakeScriptObject`` is dispatched in Python, where the ``AutogradCPU`` key falls through
  (``torch/_ops.py`` ``TorchBindOpOverload._fallthrough_keys``), so the compiled program's output does not require
  grad (the limitation ``torchbind-op-autograd``).
* ``weighted(x, cache) = x * cache.size()``, whose formula returns ``grad * cache.size()``: CORRECT.
* ``weighted_nostate``, whose formula returns ``grad * 1.0``, ignoring the cache's size: every backend agrees with
  eager, and eager disagrees with finite differences (``torch.autograd.gradcheck``).

A backward op's fake of the wrong shape cannot fail a TorchBind cell: with a ``FakeScriptObject`` AOTAutograd traces
no backward (above), so torch never runs it (``BROKEN["gather_backward_per_index"]`` of
:mod:`sample_classes.fakes_inputs` leaves every backward cell as it was; the tests pin it).

Not imported by ``sample_classes``, and registered into a ``torch.library.Library`` that :func:`unregister` drops:
the ops are ops of the class, so while registered every run that selects them has their rows. Load it after
the library and its fakes::

    pytest --torchbind-load=sample_classes --torchbind-load=sample_classes.fakes_inputs \\
        --torchbind-load=sample_classes.adopter_inputs --torchbind-load=sample_classes.inputs_autograd \\
        --torchbind-class='samples_inputs::*'

Importing it registers the ops (:func:`register`, idempotent) and the argument strategies they need.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

import conformance

from . import fakes_inputs  # noqa: F401 - loads samples_inputs and registers gather_backward's fake

__all__ = ["NAMESPACE", "register", "unregister"]

NAMESPACE = "samples_inputs_autograd"
_CACHE = "__torch__.torch.classes.samples_inputs.PagedCache"
_library: torch.library.Library | None = globals().get("_library")  # kept by importlib.reload


def _lookup(table, idx, cache):
    if table.dim() != 2 or tuple(table.shape) != (cache.size(), cache.block_numel()):
        raise RuntimeError(f"lookup: expected a table of shape [{cache.size()}, {cache.block_numel()}], got "
                           f"{list(table.shape)}")
    return table.index_select(0, idx) + torch.ops.samples_inputs.gather(idx, cache)


def _lookup_fake(table, idx, cache):
    return table.new_empty(idx.shape[0], cache.block_numel())


def _save_idx(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])
    ctx.cache = inputs[2]


def _lookup_backward(ctx, grad):
    (idx,) = ctx.saved_tensors
    return torch.ops.samples_inputs.gather_backward(grad.contiguous(), idx, ctx.cache), None, None


def _save_cache(ctx, inputs, output):
    ctx.cache = inputs[1]


def _weighted(x, cache):
    return x * cache.size()


def _like(x, cache):
    return torch.empty_like(x)


def register() -> None:
    """Define the ops, their kernels, fakes and autograd formulas (idempotent; after :func:`unregister`, again)."""
    global _library
    if _library is not None:
        return
    lib = torch.library.Library(NAMESPACE, "FRAGMENT")
    lib.define(f"lookup(Tensor table, Tensor idx, {_CACHE} cache) -> Tensor")
    lib.impl("lookup", _lookup, "CPU")
    torch.library.register_fake(f"{NAMESPACE}::lookup", _lookup_fake, lib=lib)
    torch.library.register_autograd(f"{NAMESPACE}::lookup", _lookup_backward, setup_context=_save_idx, lib=lib)
    for name, formula in (("weighted", lambda ctx, grad: (grad * ctx.cache.size(), None)),
                          ("weighted_nostate", lambda ctx, grad: (grad * 1.0, None))):  # the defect: no size
        lib.define(f"{name}(Tensor x, {_CACHE} cache) -> Tensor")
        lib.impl(name, _weighted, "CPU")
        torch.library.register_fake(f"{NAMESPACE}::{name}", _like, lib=lib)
        torch.library.register_autograd(f"{NAMESPACE}::{name}", formula, setup_context=_save_cache, lib=lib)
    _library = lib


def unregister() -> None:
    """Drop every op :func:`register` defined, with its kernels, fakes and formulas."""
    global _library
    if _library is not None:
        _library._destroy()
        _library = None


@conformance.strategy("samples_inputs::PagedCache", f"{NAMESPACE}::lookup")
def lookup_arguments(cache):
    """A table of the cache's shape and indices within its length (none for an empty cache)."""
    n, size = cache.size(), cache.block_numel()
    if not n:
        return st.nothing()
    return st.lists(st.integers(0, n - 1), min_size=1, max_size=3).map(
        lambda ks: f"torch.linspace(-1.0, 1.0, {n * size}).reshape({n}, {size}), torch.tensor({ks})")


register()
