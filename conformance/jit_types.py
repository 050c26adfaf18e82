"""TorchScript types: Python annotations to ``torch._C.Type`` and run-time values against a schema type.

Annotations are converted with ``torch.jit.annotations.ann_to_type`` — the converter TorchScript itself uses —
so ``list[torch.Tensor]``, ``Optional[int]`` and ``tuple[int, float]`` compare equal to the schema's
``Tensor[]``, ``int?`` and ``(int, float)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.jit.annotations import ann_to_type

from .compare import describe, script_class_name

__all__ = ["annotation_type", "annotation_accepts", "return_type", "value_mismatch"]


def annotation_type(annotation: Any) -> torch._C.Type | None:
    """The TorchScript type of a Python annotation, or ``None`` if TorchScript cannot express it."""
    try:
        return ann_to_type(annotation, None)
    except Exception:  # noqa: BLE001 - unknown annotations are simply not compared
        return None


def annotation_accepts(annotated: torch._C.Type, schema_type: torch._C.Type) -> bool:
    """Whether a fake's annotation (as a TorchScript type) fits the schema type: equal, except that ``Any``
    anywhere in the annotation accepts whatever the schema has there (``-> Any``, ``List[Any]``,
    ``Tuple[int, Any]``). torch never reads a fake's annotations (``call_torchbind`` forwards the call as it is),
    so a looser annotation is no defect; a different concrete type is (it documents the wrong contract)."""
    if annotated.kind() == "AnyType" or annotated == schema_type:
        return True
    if annotated.kind() != schema_type.kind():
        return False
    mine, theirs = annotated.containedTypes(), schema_type.containedTypes()
    return bool(mine) and len(mine) == len(theirs) and all(map(annotation_accepts, mine, theirs))


def return_type(schema: torch.FunctionSchema) -> torch._C.Type:
    """The schema's return type as one type: the single return, ``NoneType`` for none, else a ``TupleType``."""
    returns = schema.returns
    if len(returns) == 1:
        return returns[0].type
    if not returns:
        return torch._C.NoneType.get()
    return torch._C.TupleType([r.type for r in returns])


_SCALAR_KINDS = {
    "IntType": ((int, torch.SymInt), (bool,)),
    "SymIntType": ((int, torch.SymInt), (bool,)),
    "FloatType": ((float, torch.SymFloat), ()),
    "BoolType": ((bool, torch.SymBool), ()),
    "StringType": ((str,), ()),
    "NoneType": ((type(None),), ()),
    "NumberType": ((int, float, bool, torch.SymInt, torch.SymFloat), ()),
    "DeviceObjType": ((torch.device,), ()),
}


def value_mismatch(value: Any, jit_type: torch._C.Type, where: str = "result") -> str | None:
    """Why ``value`` is not of ``jit_type``, or ``None`` when it is.

    Follows how TorchScript converts Python values (``toIValue``): ``bool`` is not an ``int``, an ``int`` is not a
    ``float``, ``List`` needs a ``list`` and ``Tuple`` a ``tuple`` of the right length; TorchBind objects may be
    real ``ScriptObject``s, ``FakeScriptObject``s or instances of the registered fake class.
    """
    kind = jit_type.kind()
    got = f"{type(value).__name__} {describe(value, limit=80)}"
    if kind == "AnyType":
        return None
    if kind == "TensorType":
        return None if isinstance(value, torch.Tensor) else f"{where}: expected Tensor, got {got}"
    if kind == "OptionalType":
        return None if value is None else value_mismatch(value, jit_type.getElementType(), where)
    if kind == "ListType":
        if not isinstance(value, list):
            return f"{where}: expected a list ({jit_type}), got {got}"
        for i, v in enumerate(value):
            why = value_mismatch(v, jit_type.getElementType(), f"{where}[{i}]")
            if why:
                return why
        return None
    if kind == "TupleType":
        elems = jit_type.elements()
        if not isinstance(value, tuple):
            return f"{where}: expected a tuple ({jit_type}), got {got}"
        if len(value) != len(elems):
            return f"{where}: expected a tuple of {len(elems)} ({jit_type}), got {len(value)} elements"
        for i, (v, t) in enumerate(zip(value, elems)):
            why = value_mismatch(v, t, f"{where}[{i}]")
            if why:
                return why
        return None
    if kind == "DictType":
        if not isinstance(value, dict):
            return f"{where}: expected a dict ({jit_type}), got {got}"
        for k, v in value.items():
            why = value_mismatch(k, jit_type.getKeyType(), f"{where} key") or value_mismatch(
                v, jit_type.getValueType(), f"{where}[{k!r}]")
            if why:
                return why
        return None
    if kind == "ClassType":
        name = script_class_name(value)
        if name == jit_type.qualified_name():
            return None
        return f"{where}: expected a {jit_type.qualified_name()} object, got {got}"
    if kind in _SCALAR_KINDS:
        ok, bad = _SCALAR_KINDS[kind]
        if isinstance(value, ok) and not isinstance(value, bad):
            return None
        return f"{where}: expected {jit_type}, got {got}"
    if str(jit_type) == "ScalarType":
        return None if isinstance(value, torch.dtype) else f"{where}: expected ScalarType (torch.dtype), got {got}"
    return None  # a type this checker does not model: not reported
