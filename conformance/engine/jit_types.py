"""TorchScript types: Python annotations to ``torch._C.Type`` and run-time values against a schema type.

Annotations are converted with ``torch.jit.annotations.ann_to_type`` — the converter TorchScript itself uses —
so ``list[torch.Tensor]``, ``Optional[int]`` and ``tuple[int, float]`` compare equal to the schema's
``Tensor[]``, ``int?`` and ``(int, float)``.

:func:`walk` is the one place that tells TorchScript types apart by ``kind()``: each purpose that follows a type's
structure (:func:`value_mismatch` here, ``values.candidates``, ``arguments.value_strategy``,
``scaffold.annotations.type_annotation``) is a :class:`TypeHandler` walked over it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import torch
from torch.jit.annotations import ann_to_type

from .render import render, script_class_name
from . import torch_api

__all__ = ["annotation_type", "annotation_accepts", "return_type", "value_mismatch", "unmodelled", "walk",
           "TypeHandler", "LEAF_KINDS", "CONTAINER_KINDS"]


def annotation_type(annotation: Any) -> torch_api.JitType | None:
    """The TorchScript type of a Python annotation, or ``None`` if TorchScript cannot express it.

    ``torch.SymInt`` / ``SymFloat`` / ``SymBool`` inside a union (``int | torch.SymInt``, as torch's own
    annotations write a size that may be symbolic) count as ``int`` / ``float`` / ``bool``: outside tracing the
    value is a plain number, and TorchScript's ``ann_to_type`` cannot express such a union otherwise."""
    try:
        return ann_to_type(_plain_union(annotation), None)
    except Exception:  # noqa: BLE001 - unknown annotations are simply not compared
        return None


def _plain_union(annotation: Any) -> Any:
    """``annotation`` with a union's symbolic number types replaced by plain ones (duplicates collapse), and a
    PEP 604 union (``int | None``) spelled ``typing.Union``, which ``ann_to_type`` reads on every Python."""
    import types
    import typing

    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return annotation
    plain = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}
    members = list(dict.fromkeys(plain.get(a, a) for a in typing.get_args(annotation)))
    return members[0] if len(members) == 1 else typing.Union[tuple(members)]


def annotation_accepts(annotated: torch_api.JitType, schema_type: torch_api.JitType) -> bool:
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


def return_type(schema: torch.FunctionSchema) -> torch_api.JitType:
    """The schema's return type as one type: the single return, ``NoneType`` for none, else a ``TupleType``."""
    returns = schema.returns
    if len(returns) == 1:
        return returns[0].type
    if not returns:
        return torch_api.JitNoneType.get()
    return torch_api.JitTupleType([r.type for r in returns])


# ----- the one walk over TorchScript types -------------------------------------------------------------------

R = TypeVar("R")

#: ``kind()`` of each leaf type the walk tells apart -> the :class:`TypeHandler` method it calls with the type.
#: The kind names are c10's ``TypeKind``s; the Python classes are the ``JitType`` subclasses declared in
#: ``torch/_C/__init__.pyi`` (``TensorType``, ``IntType``, ``SymIntType``, ``FloatType``, ``BoolType``,
#: ``SymBoolType``, ``StringType``, ``NoneType``, ``NumberType``, ``DeviceObjType``, ``ClassType``, ``AnyType``;
#: ``SymFloatType`` has a kind but no Python class).
LEAF_KINDS: dict[str, str] = {
    "TensorType": "on_tensor",
    "IntType": "on_int",
    "SymIntType": "on_symint",
    "FloatType": "on_float",
    "SymFloatType": "on_symfloat",
    "BoolType": "on_bool",
    "SymBoolType": "on_symbool",
    "StringType": "on_str",
    "NoneType": "on_none",
    "NumberType": "on_number",
    "DeviceObjType": "on_device",
    "ClassType": "on_class",
    "AnyType": "on_any",
}
#: ``kind()`` of each container type -> the method the walk calls, and the component types it passes after the type.
CONTAINER_KINDS: dict[str, tuple[str, Callable[[Any], tuple]]] = {
    "OptionalType": ("on_optional", lambda t: (t.getElementType(),)),
    "ListType": ("on_list", lambda t: (t.getElementType(),)),
    "TupleType": ("on_tuple", lambda t: (t.elements(),)),
    "DictType": ("on_dict", lambda t: (t.getKeyType(), t.getValueType())),
    "UnionType": ("on_union", lambda t: (list(t.containedTypes()),)),
}


def walk(typ: torch_api.JitType, handler: TypeHandler[R]) -> R:
    """Dispatch one TorchScript type (a ``torch._C.JitType``, e.g. ``schema.arguments[i].type``) to ``handler``.

    The only place that tells types apart by ``kind()``: a kind in :data:`LEAF_KINDS` calls its method with the
    type; a container (:data:`CONTAINER_KINDS`) calls its method with the type and its component types
    (``OptionalType.getElementType()``, ``ListType.getElementType()``, ``TupleType.elements()``,
    ``DictType.getKeyType()``/``getValueType()``, ``UnionType.containedTypes()``); every other kind calls ``handler.other(typ)``. Returns what
    the method returns (and raises what it raises). Components are not walked here: a handler recurses by
    walking them itself (``self.walk(elem)`` or ``walk(elem, another_handler)``), so it can skip them.
    """
    kind = typ.kind()
    if kind in CONTAINER_KINDS:
        method, components = CONTAINER_KINDS[kind]
        return getattr(handler, method)(typ, *components(typ))
    method = LEAF_KINDS.get(kind)
    return handler.other(typ) if method is None else getattr(handler, method)(typ)


class TypeHandler(Generic[R]):
    """One purpose of :func:`walk`: a method per kind of TorchScript type, each returning the purpose's answer
    ``R`` for that type (or raising). Every method defaults to :meth:`other`, so a subclass overrides the kinds it
    models and :meth:`other` for the rest.

    Leaf methods receive the type itself: ``on_tensor`` (``TensorType``), ``on_int`` (``IntType``, also what the
    schema parser makes of ``ScalarType``, ``Layout``, ``MemoryFormat`` and ``SymInt``), ``on_symint``
    (``SymIntType``), ``on_float``, ``on_symfloat``, ``on_bool``, ``on_symbool``, ``on_str`` (``StringType``),
    ``on_none`` (``NoneType``), ``on_number`` (``NumberType``, the schema's ``Scalar``), ``on_device``
    (``DeviceObjType``), ``on_class`` (``ClassType``; for a TorchBind class ``typ.qualified_name()`` is
    ``__torch__.torch.classes.ns.Cls``) and ``on_any`` (``AnyType``). Container methods receive the type and its
    component types, not yet walked: ``on_optional(typ, elem)``, ``on_list(typ, elem)``, ``on_tuple(typ, elems)``
    (a list, possibly empty), ``on_dict(typ, key, value)`` and ``on_union(typ, members)`` (a list).
    """

    def walk(self, typ: torch_api.JitType) -> R:
        """This handler's answer for ``typ`` (a component, typically): ``walk(typ, self)``."""
        return walk(typ, self)

    def other(self, typ: torch_api.JitType) -> R:
        """Any kind without a method of its own (``ScalarTypeType``, ``LayoutType``, ``MemoryFormatType``,
        ``ComplexType``, ``GeneratorType``, ``StreamObjType``, ``FutureType``, ...), and every kind
        whose method a subclass leaves alone. Raises ``NotImplementedError`` unless overridden."""
        raise NotImplementedError(f"{type(self).__name__} has no answer for type {typ}")

    def on_tensor(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_int(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_symint(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_float(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_symfloat(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_bool(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_symbool(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_str(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_none(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_number(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_device(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_class(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_any(self, typ: torch_api.JitType) -> R:
        return self.other(typ)

    def on_optional(self, typ: torch_api.JitType, elem: torch_api.JitType) -> R:
        return self.other(typ)

    def on_list(self, typ: torch_api.JitType, elem: torch_api.JitType) -> R:
        return self.other(typ)

    def on_tuple(self, typ: torch_api.JitType, elems: list[torch_api.JitType]) -> R:
        return self.other(typ)

    def on_dict(self, typ: torch_api.JitType, key: torch_api.JitType, value: torch_api.JitType) -> R:
        return self.other(typ)

    def on_union(self, typ: torch_api.JitType, members: list[torch_api.JitType]) -> R:
        return self.other(typ)


# ----- purposes ------------------------------------------------------------------------------------------------


def value_mismatch(value: Any, jit_type: torch_api.JitType, where: str = "result") -> str | None:
    """Why ``value`` is not of ``jit_type``, or ``None`` when it is.

    Follows how TorchScript converts Python values (``toIValue``): ``bool`` is not an ``int``, an ``int`` is not a
    ``float``, ``List`` needs a ``list`` and ``Tuple`` a ``tuple`` of the right length; TorchBind objects may be
    real ``ScriptObject``s, ``FakeScriptObject``s or instances of the registered fake class.
    """
    return walk(jit_type, _Mismatch(value, where))


def unmodelled(jit_type: torch_api.JitType) -> str | None:
    """The first part of ``jit_type`` that :func:`value_mismatch` does not model (``Stream``, ``Future[int]``,
    ``Layout``...: a kind without a check of its own, where any value would be taken), or ``None`` when every
    part is modelled. A check that holds values to a schema type says it compared nothing for such a type, never
    that the value was right."""
    return walk(jit_type, _Unmodelled())


class _Unmodelled(TypeHandler["str | None"]):
    """:func:`unmodelled`: the leaves :class:`_Mismatch` checks are modelled; containers recurse."""

    def _modelled(self, typ):
        return None

    on_int = on_symint = on_float = on_symfloat = on_bool = on_symbool = on_str = on_none = _modelled
    on_number = on_device = on_tensor = on_class = on_any = _modelled

    def on_optional(self, typ, elem):
        return walk(elem, self)

    on_list = on_optional

    def on_tuple(self, typ, elems):
        return next((u for u in (walk(e, self) for e in elems) if u is not None), None)

    on_union = on_tuple

    def on_dict(self, typ, key, value):
        return walk(key, self) or walk(value, self)

    def other(self, typ):
        return None if str(typ) == "ScalarType" else str(typ)


class _Mismatch(TypeHandler["str | None"]):
    """:func:`value_mismatch` of one value at one place (``where``); containers recurse per element."""

    def __init__(self, value: Any, where: str):
        self.value, self.where = value, where
        self.got = f"{type(value).__name__} {render(value, limit=80)}"

    def _scalar(self, typ, ok: tuple[type, ...], bad: tuple[type, ...] = ()) -> str | None:
        if isinstance(self.value, ok) and not isinstance(self.value, bad):
            return None
        return f"{self.where}: expected {typ}, got {self.got}"

    def on_int(self, typ):
        return self._scalar(typ, (int, torch.SymInt), (bool,))

    on_symint = on_int

    def on_float(self, typ):
        return self._scalar(typ, (float, torch.SymFloat))

    def on_bool(self, typ):
        return self._scalar(typ, (bool, torch.SymBool))

    def on_str(self, typ):
        return self._scalar(typ, (str,))

    def on_none(self, typ):
        return self._scalar(typ, (type(None),))

    def on_number(self, typ):
        return self._scalar(typ, (int, float, bool, torch.SymInt, torch.SymFloat))

    def on_device(self, typ):
        return self._scalar(typ, (torch.device,))

    def on_any(self, typ):
        return None

    def on_tensor(self, typ):
        return None if isinstance(self.value, torch.Tensor) else f"{self.where}: expected Tensor, got {self.got}"

    def on_optional(self, typ, elem):
        return None if self.value is None else value_mismatch(self.value, elem, self.where)

    def on_union(self, typ, members):
        whys = [value_mismatch(self.value, m, self.where) for m in members]
        return None if any(w is None for w in whys) else f"{self.where}: expected {typ}, got {self.got}"

    def on_list(self, typ, elem):
        value, where = self.value, self.where
        if not isinstance(value, list):
            return f"{where}: expected a list ({typ}), got {self.got}"
        for i, v in enumerate(value):
            why = value_mismatch(v, elem, f"{where}[{i}]")
            if why:
                return why
        return None

    def on_tuple(self, typ, elems):
        value, where = self.value, self.where
        if not isinstance(value, tuple):
            return f"{where}: expected a tuple ({typ}), got {self.got}"
        if len(value) != len(elems):
            return f"{where}: expected a tuple of {len(elems)} ({typ}), got {len(value)} elements"
        for i, (v, t) in enumerate(zip(value, elems)):
            why = value_mismatch(v, t, f"{where}[{i}]")
            if why:
                return why
        return None

    def on_dict(self, typ, key, val):
        value, where = self.value, self.where
        if not isinstance(value, dict):
            return f"{where}: expected a dict ({typ}), got {self.got}"
        for k, v in value.items():
            why = value_mismatch(k, key, f"{where} key") or value_mismatch(v, val, f"{where}[{k!r}]")
            if why:
                return why
        return None

    def on_class(self, typ):
        if script_class_name(self.value) == typ.qualified_name():
            return None
        return f"{self.where}: expected a {typ.qualified_name()} object, got {self.got}"

    def other(self, typ):
        if str(typ) == "ScalarType":  # c10's ScalarTypeType (no Python class of its own)
            if isinstance(self.value, torch.dtype):
                return None
            return f"{self.where}: expected ScalarType (torch.dtype), got {self.got}"
        return None  # a type this checker does not model: not reported
