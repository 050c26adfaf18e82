"""Hypothesis strategies of argument values derived from TorchScript types (a schema argument's type, or a Python
annotation turned into one by :func:`conformance.engine.jit_types.annotation_type`), each drawn value written as Python
source (:class:`~conformance.engine.values.Value`) so that reproducers can print it. What the walk does not model is
sampled from :func:`conformance.engine.values.candidates`. :mod:`conformance.engine.arguments` layers the adopter's overrides on
top."""

from __future__ import annotations

import string

import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .jit_types import TypeHandler, walk
from .values import Value, candidates, tensor_code, union_members
from . import torch_api

__all__ = ["tensor_strategy", "value_strategy"]


# ----- strategies derived from schema types ----------------------------------------------------------------

_DTYPES = ("float32", "float64", "int64", "bool")
_LAYOUTS = ("contiguous", "transposed", "sliced")


def tensor_strategy() -> SearchStrategy[Value]:
    """Tensors as :class:`Value` source: rank 0–3 with sizes 0–3 (so 0-dim and 0-size tensors occur), dtype
    float32 / float64 / int64 / bool, layout contiguous / transposed / strided slice. Shrinks towards a 0-dim
    float32 tensor.

    No tensor requires grad: ``call_torchbind`` runs a fake method below autograd, so a tensor a fake computes and
    stores never requires grad while the C++ object's does — every fake would differ. Add
    ``.requires_grad_()`` in a :func:`strategy` override to test it anyway.
    """
    spec = st.tuples(st.lists(st.integers(0, 3), max_size=3).map(tuple), st.sampled_from(_DTYPES),
                     st.sampled_from(_LAYOUTS))
    return spec.map(lambda s: Value(tensor_code(s)))


def _join(template: str, parts) -> Value:
    extra = tuple(e for p in parts for e in p.extra)
    return Value(template.format(", ".join(p.code for p in parts)), extra)


#: The widest integer the search draws (``wide`` strategies): past one node's 8 ranks and any small count, to
#: multi-node world sizes and block counts (1024 ranks), yet small enough that a size drawn from it allocates at most
#: a few MiB (a 1024 x 1024 float32 tensor is 4 MiB).
INT_BOUND = 1024


def value_strategy(jit_type: torch_api.JitType, resolver=None, wide: bool = False) -> SearchStrategy[Value]:
    """A hypothesis strategy of :class:`Value` (Python source) for a TorchScript type from a schema.

    ``jit_type`` is a ``torch._C.Type`` (``schema.arguments[i].type``): Tensor (:func:`tensor_strategy`), int
    (-2..8; with ``wide``, also -:data:`INT_BOUND`..:data:`INT_BOUND`, the small range first, so hypothesis
    shrinks towards it: what the differential search draws, where the fixed argument sets stay small), float (finite, -4..4), bool, str (short, including ``''``), lists (0–3 elements), Optional (``None``
    or a value), tuples, dicts, a TorchBind class (the values ``resolver(qualified_name)`` gives, as in
    :func:`conformance.engine.values.candidates`), and the enum-like scalar types ``candidates`` knows (ScalarType,
    Device, ...). Raises :class:`conformance.engine.values.UnsupportedType` for anything else.
    """
    return walk(jit_type, _Strategies(resolver, wide))


def _int_values(wide: bool = False) -> SearchStrategy[Value]:
    small = st.integers(-2, 8)
    ints = st.one_of(small, st.integers(-INT_BOUND, INT_BOUND)) if wide else small
    return ints.map(lambda i: Value(repr(i)))


def _float_values() -> SearchStrategy[Value]:
    return st.floats(-4, 4, allow_nan=False, allow_infinity=False).map(lambda f: Value(repr(f)))


def _bool_values() -> SearchStrategy[Value]:
    return st.sampled_from((Value("False"), Value("True")))


def _str_values() -> SearchStrategy[Value]:
    return st.text(alphabet=string.ascii_lowercase[:3] + ":_ ", max_size=4).map(lambda s: Value(repr(s)))


class _Strategies(TypeHandler[SearchStrategy[Value]]):
    """:func:`value_strategy` through :func:`conformance.engine.jit_types.walk`; what it does not model is sampled from
    :func:`conformance.engine.values.candidates`."""

    def __init__(self, resolver, wide: bool = False):
        self.resolver = resolver
        self.wide = wide

    def on_tensor(self, typ):
        return tensor_strategy()

    def on_optional(self, typ, elem):
        return st.one_of(st.just(Value("None")), self.walk(elem))

    def on_union(self, typ, members):  # each member type that can be generated; raises when none can
        return st.one_of(*union_members(self, typ, members))

    def on_list(self, typ, elem):
        inner = self.walk(elem)
        return st.lists(inner, max_size=3).map(lambda vs: _join("[{}]", vs))

    def on_tuple(self, typ, elems):
        parts = [self.walk(t) for t in elems]
        return st.tuples(*parts).map(lambda vs: _join("({},)" if len(vs) == 1 else "({})", vs))

    def on_dict(self, typ, key, value):
        keys, vals = self.walk(key), self.walk(value)
        return st.lists(st.tuples(keys, vals), max_size=2).map(
            lambda kvs: Value("{" + ", ".join(f"{k.code}: {v.code}" for k, v in kvs) + "}",
                              tuple(e for k, v in kvs for e in (*k.extra, *v.extra))))

    def on_int(self, typ):
        return _int_values(self.wide)

    def on_float(self, typ):
        return _float_values()

    def on_bool(self, typ):
        return _bool_values()

    def on_str(self, typ):
        return _str_values()

    def other(self, typ):
        text = str(typ)  # other kinds spelled like a scalar (SymIntType prints as ``int``)
        if text in ("int", "SymInt"):
            return _int_values(self.wide)
        if text == "float":
            return _float_values()
        if text == "bool":
            return _bool_values()
        if text == "str":
            return _str_values()
        return st.sampled_from(candidates(typ, self.resolver))  # ClassType, ScalarType, Device, ...; may raise
