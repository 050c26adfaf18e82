"""Python custom classes whose ops are registered the way inference engines and training libraries register
theirs: ``torch.library.Library(ns, "FRAGMENT").define(...)`` with ``impl`` and ``register_fake``, never
``torch.library.custom_op``, through a helper that infers the schema from the function's annotations (an engine's
``direct_register_custom_op``), and out-variant ops that write their result into a ``Tensor(a!)`` argument and
return ``()`` (the shape of every attention and KV-cache op of an inference engine).

* :class:`KVScale` (constant): the scales a KV-cache write applies, ``k_scale`` and ``v_scale`` (floats).
  Its ops, namespace ``samples_libops``:

  - ``scaled_store(Tensor key, KVScale s, Tensor(a!) cache) -> ()``: writes ``key * s.k_scale + s.v_scale`` into
    ``cache`` (out-variant; defined by :func:`direct_register_custom_op`);
  - ``scale_query(Tensor q, KVScale s) -> Tensor``: ``q * s.k_scale`` (defined with a schema string literal).

* :class:`KVScaleEqIgnoresV`: broken, ``__eq__`` and ``__hash__`` ignore ``v_scale``, which only the out-variant op
  reads. Plain torch: one program compiled for ``KVScale(2, 1)`` is reused for ``KVScale(2, 5)`` (dynamo's guard is
  ``__eq__``), so the second call writes the first object's values into the cache (3 where eager writes 7).

* :class:`CacheLayer` (constant): a layer index, taken by ``store_declared`` (writes ``cache``, declared
  ``Tensor(a!)``: correct) and ``store_undeclared`` (writes ``cache`` without declaring it: broken).

The adopter's strategies (:mod:`conformance`) give each op a cache of the key's shape, as a library's tests do.
"""

from __future__ import annotations

import torch

import conformance

from .custom_classes import register_constant

__all__ = ["KVScale", "KVScaleEqIgnoresV", "CacheLayer", "direct_register_custom_op", "LIB"]

NAMESPACE = "samples_libops"
LIB = torch.library.Library(NAMESPACE, "FRAGMENT")


def direct_register_custom_op(op_name: str, op_func, mutates_args: tuple[str, ...], fake_impl,
                              target_lib: torch.library.Library = LIB,
                              dispatch_key: str = "CompositeExplicitAutograd") -> None:
    """Register ``op_func`` as the op ``<ns>::op_name`` the way an inference engine's helper does: the schema
    inferred from its annotations (``torch.library.infer_schema``, which names a custom class by
    ``get_opaque_type_name``), ``Library.define``, ``Library.impl`` at ``dispatch_key`` and ``fake_impl`` as the
    fake kernel."""
    schema = torch.library.infer_schema(op_func, mutates_args=mutates_args)
    target_lib.define(op_name + schema)
    target_lib.impl(op_name, op_func, dispatch_key)
    torch.library.register_fake(f"{target_lib.ns}::{op_name}", lib=target_lib)(fake_impl)


@register_constant
class KVScale:
    """A constant custom class: the scales of a KV-cache write (``k_scale``, ``v_scale``: Python floats)."""

    def __init__(self, k_scale: float, v_scale: float):
        self.k_scale = k_scale
        self.v_scale = v_scale

    def __eq__(self, other):
        return type(other) is type(self) and (self.k_scale, self.v_scale) == (other.k_scale, other.v_scale)

    def __hash__(self):
        return hash((type(self).__name__, self.k_scale, self.v_scale))

    def __fx_repr__(self):
        name = type(self).__name__
        return f"{name}({self.k_scale!r}, {self.v_scale!r})", {name: type(self)}

    def __repr__(self):
        return f"{type(self).__name__}({self.k_scale!r}, {self.v_scale!r})"


@register_constant
class KVScaleEqIgnoresV(KVScale):
    """Broken: equality and hash ignore ``v_scale`` (consistently with each other), which only
    ``scaled_store`` reads."""

    def __eq__(self, other):
        return type(other) is type(self) and self.k_scale == other.k_scale

    def __hash__(self):
        return hash((type(self).__name__, self.k_scale))


def scaled_store(key: torch.Tensor, s: KVScale, cache: torch.Tensor) -> None:
    """Write ``key * s.k_scale + s.v_scale`` into ``cache`` (``key``'s shape and dtype)."""
    cache.copy_(key * s.k_scale + s.v_scale)


def _scaled_store_fake(key, s, cache):  # unannotated, as most fakes are: the op is known from define's string
    return None


direct_register_custom_op("scaled_store", scaled_store, mutates_args=("cache",), fake_impl=_scaled_store_fake)

LIB.define("scale_query(Tensor q, sample_classes.library_ops.KVScale s) -> Tensor")  # the class named as written


def _scale_query(q, s):
    return q * s.k_scale


LIB.impl("scale_query", _scale_query, "CompositeExplicitAutograd")


@torch.library.register_fake(f"{NAMESPACE}::scale_query", lib=LIB)
def _scale_query_fake(q, s):
    return torch.empty_like(q)


# ----- an op that writes an argument its schema does not declare written ----------------------------------------


@register_constant
class CacheLayer:
    """A constant custom class: the layer a KV-cache op writes for (``index``, an int), as an engine's layer-name
    class is. Its ops: ``store_declared(Tensor key, CacheLayer layer, Tensor(a!) cache) -> ()`` (CORRECT) and
    ``store_undeclared(Tensor key, CacheLayer layer, Tensor cache) -> ()`` (BROKEN: it writes ``cache`` too, but its
    schema does not say so, so torch.compile takes ``cache`` as unchanged and inductor reads its old value after
    the op)."""

    def __init__(self, index: int):
        self.index = index

    def __eq__(self, other):
        return type(other) is type(self) and self.index == other.index

    def __hash__(self):
        return hash((type(self).__name__, self.index))

    def __fx_repr__(self):
        return f"CacheLayer({self.index!r})", {"CacheLayer": CacheLayer}

    def __repr__(self):
        return f"CacheLayer({self.index!r})"


def _store(key, layer, cache):
    cache.copy_(key + layer.index)


LIB.define("store_declared(Tensor key, sample_classes.library_ops.CacheLayer layer, Tensor(a!) cache) -> ()")
LIB.define("store_undeclared(Tensor key, sample_classes.library_ops.CacheLayer layer, Tensor cache) -> ()")
for _name in ("store_declared", "store_undeclared"):
    LIB.impl(_name, _store, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{_name}", lib=LIB)(lambda key, layer, cache: None)


# ----- the adopter's inputs: a cache of the key's shape, and scales that tell objects apart ---------------------

for _cls in ("KVScale", "KVScaleEqIgnoresV"):
    conformance.strategy(f"{__name__}.{_cls}", f"{NAMESPACE}::scaled_store")(
        lambda: __import__("hypothesis").strategies.sampled_from(
            ["torch.arange(4.0), torch.zeros(4)", "torch.ones(2, 3), torch.zeros(2, 3)"]))
    conformance.strategy(f"{__name__}.{_cls}", "__init__")(
        lambda: __import__("hypothesis").strategies.sampled_from(["2.0, 1.0", "2.0, 5.0", "0.5, 1.0", "3.0, 0.0"]))
for _name in ("store_declared", "store_undeclared"):
    conformance.strategy(f"{__name__}.CacheLayer", f"{NAMESPACE}::{_name}")(
        lambda: __import__("hypothesis").strategies.sampled_from(["torch.arange(4.0), torch.zeros(4)"]))
