"""Python annotation source for schema types and for the values of ``__obj_flatten__``.

The annotations are written as real objects (``list[torch.Tensor]``, ``Optional[int]``), so the ``signature``
check (``torch.jit.annotations.ann_to_type``) compares them with the schema's types. A type the generated module
cannot name as a real object — another TorchBind class, ``Any`` — gives ``None``: the parameter stays unannotated.
"""

from __future__ import annotations

from typing import Any

import torch

from ..engine.jit_types import TypeHandler, walk
from ..engine import torch_api

__all__ = ["type_annotation", "return_annotation", "value_annotation"]


def type_annotation(t: torch_api.JitType) -> str | None:
    """The annotation source for the schema type ``t`` (``Tensor?[]`` -> ``list[Optional[torch.Tensor]]``), or
    ``None`` when it is left unannotated (``Any``, a TorchBind class, a type without a Python spelling)."""
    return walk(t, _Annotation())


class _Annotation(TypeHandler["str | None"]):
    """:func:`type_annotation` through :func:`conformance.engine.jit_types.walk`: ``None`` for every kind not named here."""

    def other(self, typ):
        return None

    def on_tensor(self, typ):
        return "torch.Tensor"

    def on_int(self, typ):
        return "int"

    on_symint = on_int

    def on_float(self, typ):
        return "float"

    on_symfloat = on_float

    def on_bool(self, typ):
        return "bool"

    on_symbool = on_bool

    def on_str(self, typ):
        return "str"

    def on_none(self, typ):
        return "None"

    def on_device(self, typ):
        return "torch.device"

    def on_optional(self, typ, elem):
        inner = self.walk(elem)
        return None if inner is None else f"Optional[{inner}]"

    def on_list(self, typ, elem):
        inner = self.walk(elem)
        return None if inner is None else f"list[{inner}]"

    def on_tuple(self, typ, elems):
        parts = [self.walk(e) for e in elems]
        if any(p is None for p in parts):
            return None
        return f"tuple[{', '.join(parts)}]" if parts else "tuple[()]"

    def on_dict(self, typ, key, value):
        k, v = self.walk(key), self.walk(value)
        return None if k is None or v is None else f"dict[{k}, {v}]"


def return_annotation(schema: torch.FunctionSchema) -> str | None:
    """The return annotation of a method or op: ``None`` source for no result, the single result's type, or a
    ``tuple[...]`` of several results; ``None`` (no annotation) where a result cannot be annotated."""
    returns = schema.returns
    if not returns:
        return "None"
    parts = [type_annotation(r.type) for r in returns]
    if any(p is None for p in parts):
        return None
    return parts[0] if len(parts) == 1 else f"tuple[{', '.join(parts)}]"


def value_annotation(values: list[Any]) -> str | None:
    """The annotation of an ``__obj_flatten__`` entry from its values on several example objects (a list's
    element type from the non-empty lists among them); ``None`` when no simple annotation fits all of them."""
    kinds = set()
    for v in values:
        if isinstance(v, torch.Tensor):
            kinds.add("torch.Tensor")
        elif isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, (int, float, str)):
            kinds.add(type(v).__name__)
        elif v is None:
            kinds.add("None")
        elif isinstance(v, list):
            inner = value_annotation([e for e in v]) if v else ""
            kinds.add(f"list:{inner}")
        else:
            return None
    lists = {k for k in kinds if k.startswith("list:")}
    if lists:
        if kinds - lists:
            return None
        inner = {k[5:] for k in lists} - {""}
        if len(inner) == 1 and None not in inner and "None" not in inner:
            return f"list[{inner.pop()}]"
        return "list" if not inner else None
    if "None" in kinds and len(kinds) == 2:
        other = (kinds - {"None"}).pop()
        return f"Optional[{other}]"
    return kinds.pop() if len(kinds) == 1 else None
