"""Python annotation source for schema types and for the values of ``__obj_flatten__``.

The annotations are written as real objects (``list[torch.Tensor]``, ``Optional[int]``), so the ``signature``
check (``torch.jit.annotations.ann_to_type``) compares them with the schema's types. A type the generated module
cannot name as a real object — another TorchBind class, ``Any`` — gives ``None``: the parameter stays unannotated.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["type_annotation", "return_annotation", "value_annotation"]

_SIMPLE = {
    "TensorType": "torch.Tensor",
    "IntType": "int",
    "SymIntType": "int",
    "FloatType": "float",
    "SymFloatType": "float",
    "BoolType": "bool",
    "SymBoolType": "bool",
    "StringType": "str",
    "NoneType": "None",
    "DeviceObjType": "torch.device",
}


def type_annotation(t: torch._C.Type) -> str | None:
    """The annotation source for the schema type ``t`` (``Tensor?[]`` -> ``list[Optional[torch.Tensor]]``), or
    ``None`` when it is left unannotated (``Any``, a TorchBind class, a type without a Python spelling)."""
    kind = t.kind()
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind == "OptionalType":
        inner = type_annotation(t.getElementType())
        return None if inner is None else f"Optional[{inner}]"
    if kind == "ListType":
        inner = type_annotation(t.getElementType())
        return None if inner is None else f"list[{inner}]"
    if kind == "TupleType":
        parts = [type_annotation(e) for e in t.elements()]
        if any(p is None for p in parts):
            return None
        return f"tuple[{', '.join(parts)}]" if parts else "tuple[()]"
    if kind == "DictType":
        k, v = type_annotation(t.getKeyType()), type_annotation(t.getValueType())
        return None if k is None or v is None else f"dict[{k}, {v}]"
    return None


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
