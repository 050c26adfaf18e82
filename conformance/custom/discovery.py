"""Python custom classes (opaque objects): what torch knows about one, asked through torch's own query functions,
whichever API generation the running torch has.

torch 2.11-2.13: ``torch._library.opaque_object.register_opaque_type(cls, typ="value" | "reference", ...)`` with
``is_opaque_type`` / ``is_opaque_value_type`` / ``is_opaque_reference_type``. torch 2.14 renamed them
(``register_custom_class``, ``typ="constant" | "symbolic"``, ``is_custom_class``, ``is_opaque_constant_type``,
``is_opaque_symbolic_type``); the old names still work there but log a warning on every call, so the new ones are
used wherever they exist. This module speaks the 2.14 words: *constant* (value) and *symbolic* (reference).

A class is named as torch names it, ``get_opaque_type_name(cls)``: ``module.QualName``. Ops take these objects
however a library registers them: ``torch.library.custom_op``, or ``torch.library.Library(ns, ...).define(...)``
with ``impl`` and ``register_fake`` (how inference engines and training libraries register theirs, often through a
helper). The dispatcher keeps every op's schema (``torch._C._jit_get_all_schemas()``) but writes the class's type
as ``PyObject``, so which class a ``PyObject`` argument takes is read from, in turn: a custom op's Python signature
(``torch._library.custom_ops.OPDEFS``), the schema string the library gave ``define`` (recorded while the plugin
imports the adopter's modules: :mod:`conformance.engine.op_definitions`), and the annotations of the op's Python
fake kernel. An argument takes the class when it names the class or one of its registered bases.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import inspect
import typing
from typing import Any

import torch
from ..engine.torch_api import opaque_object as _opaque

from ..core.results import SelectorError, UnknownClassError
from ..engine.mutations import declared_writes
from ..engine.op_definitions import declared_types, kernel_annotations
from ..engine import torch_api

__all__ = ["CustomClassInfo", "CustomOpInfo", "registered_custom_classes", "expand_custom_selector",
           "discover_custom", "is_custom_class", "registration_kind", "api_names", "WHERE_OPS_ARE_FOUND"]

#: Where the ops taking a class are looked for, for the message of a class that has none.
WHERE_OPS_ARE_FOUND = ("the registered operators (torch._C._jit_get_all_schemas()), a PyObject argument read from "
                       "the op's torch.library.custom_op signature, the schema string given to Library.define while "
                       "--torchbind-load modules were imported, or its register_fake kernel's annotations")

#: Classes torch registers for itself that are not anybody's class under test (every Enum is a constant type).
_TORCH_INTERNAL = ("enum.Enum",)


def api_names() -> dict[str, str]:
    """How the running torch spells the registration API: ``register``, ``constant`` and ``symbolic`` (the
    ``typ=`` values), for messages and reproducers."""
    if hasattr(_opaque, "register_custom_class"):
        return {"register": "register_custom_class", "constant": "constant", "symbolic": "symbolic"}
    return {"register": "register_opaque_type", "constant": "value", "symbolic": "reference"}


def is_custom_class(cls: Any) -> bool:
    """Whether ``cls`` (a type) is registered as a Python custom class (``is_custom_class`` on torch 2.14+,
    ``is_opaque_type`` before)."""
    query = getattr(_opaque, "is_custom_class", None) or _opaque.is_opaque_type
    return isinstance(cls, type) and bool(query(cls))


def registration_kind(cls: type) -> str:
    """``"constant"`` or ``"symbolic"``: how torch treats objects of the registered class ``cls``."""
    constant = getattr(_opaque, "is_opaque_constant_type", None) or _opaque.is_opaque_value_type
    return "constant" if constant(cls) else "symbolic"


def _registered() -> dict[str, type]:
    """Every registered class by its torch name. torch keeps the classes only in its private registry
    (``_OPAQUE_TYPES``: class -> info, a weak mapping); the names come from ``get_opaque_type_name``."""
    out = {}
    for cls in list(getattr(_opaque, "_OPAQUE_TYPES", {}).keys()):
        if is_custom_class(cls):
            name = _opaque.get_opaque_type_name(cls)
            if name not in _TORCH_INTERNAL and getattr(cls, "__module__", "") + "." + cls.__qualname__ == name:
                out[name] = cls
    return out


def registered_custom_classes() -> list[str]:
    """The names (``module.QualName``) of the registered Python custom classes, sorted; torch's ``Enum`` left
    out."""
    return sorted(_registered())


def _import_class(name: str) -> type | None:
    """The class ``module.QualName`` by importing its module (the longest importable prefix), or ``None``."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj if isinstance(obj, type) else None
    return None


def expand_custom_selector(selector: str) -> list[str]:
    """The registered custom classes ``selector`` names: a class name ``module.QualName`` (imported when not yet
    registered, which registers it when its module does) or an ``fnmatch`` pattern on those names. Raises
    :class:`SelectorError` when nothing matches, listing the registered classes."""
    if not any(ch in selector for ch in "*?["):
        cls = _registered().get(selector) or _import_class(selector)
        if cls is not None and is_custom_class(cls) and _opaque.get_opaque_type_name(cls) == selector:
            return [selector]
    matches = [n for n in registered_custom_classes() if fnmatch.fnmatchcase(n, selector)]
    if matches:
        return matches
    raise SelectorError(
        f"--torchbind-class={selector!r}: no Python custom class {selector} is registered (with "
        f"torch._library.opaque_object.{api_names()['register']}; the name is module.QualName). Registered: "
        f"{', '.join(registered_custom_classes()) or '(none)'}")


@dataclasses.dataclass(frozen=True)
class CustomOpInfo:
    """An op with a parameter of the class: ``qualname`` (``ns::op``, with ``.overload`` for an overload other
    than the default), its ``schema`` (the class's parameter typed ``PyObject``), ``positions`` of the object in
    the arguments, the op's overload (``op``) to call, and ``found_by``: where the class was read (``"custom_op"``:
    its Python signature; ``"define"``: the schema string given to ``Library.define``; ``"fake kernel"``: its
    fake kernel's annotations)."""

    qualname: str
    schema: torch.FunctionSchema
    positions: tuple[int, ...]
    op: Any
    found_by: str = "custom_op"

    @property
    def short_name(self) -> str:
        return self.qualname.split("::", 1)[1]

    @property
    def written(self) -> tuple[str, ...]:
        """The names of the arguments the op writes, as its schema's alias annotations say (``Tensor(a!) out``:
        ``alias_info.is_write``; ``torch/csrc/jit/frontend/function_schema_parser.cpp``). An out-variant op returns
        ``()`` and gives its result only through these."""
        writes = declared_writes(self.schema)
        return tuple(a.name for a in self.schema.arguments if a.name in writes)


@dataclasses.dataclass(frozen=True)
class CustomClassInfo:
    """What torch knows about one Python custom class.

    ``name``: torch's name (``module.QualName``); ``cls``: the class; ``kind``: ``"constant"`` (value: guarded
    by ``__eq__``, rebuilt from ``__fx_repr__``) or ``"symbolic"`` (reference: a graph input guarded by type and
    ``guard_fn``); ``hoist``: a constant type lifted to a graph input; ``guard_fn``; ``members``: member name ->
    ``"use_real"`` / ``"inlined"``; ``ops``: the custom ops taking it.
    """

    name: str
    cls: type
    kind: str
    hoist: bool
    guard_fn: Any
    members: dict[str, str]
    ops: tuple[CustomOpInfo, ...]

    @property
    def qualname(self) -> str:
        return self.name

    @property
    def test_name(self) -> str:
        """The pytest collector name: ``torchbind[py:module.QualName]``."""
        from ..core.qualname import node_id

        return node_id(self.name, "").removesuffix("::")


def _annotations(fn) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable string annotations: take them as written
        return dict(getattr(fn, "__annotations__", {}))


def _takes(annotation: Any, cls: type) -> bool:
    """Whether a parameter annotated ``annotation`` takes objects of ``cls``: a registered custom class that
    ``cls`` is (or derives from); generics such as ``list[int]`` are not."""
    if not isinstance(annotation, type) or typing.get_origin(annotation) is not None:
        return False
    try:
        return issubclass(cls, annotation) and is_custom_class(annotation)
    except TypeError:  # Python 3.10 calls some generic aliases types
        return False


def _type_names(cls: type) -> set[str]:
    """The names a schema string may give ``cls``'s objects: its own and its registered bases' torch names."""
    out = set()
    for base in cls.__mro__:
        try:
            if is_custom_class(base):
                out.add(_opaque.get_opaque_type_name(base))
        except Exception:  # noqa: BLE001 - a base torch cannot name
            continue
    return out


def _defined_ops_taking(cls: type, skip: set[str]) -> list[CustomOpInfo]:
    """The ops not made by ``torch.library.custom_op`` (``skip``: those) with a ``PyObject`` argument that takes
    ``cls``, as the recorded ``define`` string or the op's fake kernel's annotations say."""
    names, found = _type_names(cls), []
    for schema in torch_api.all_schemas():
        pyobject = [i for i, a in enumerate(schema.arguments) if str(a.type) == "PyObject"]
        if not pyobject or schema.name in skip or "::" not in schema.name:
            continue
        ns, name = schema.name.split("::", 1)
        try:
            packet = getattr(getattr(torch.ops, ns), name)
            overload = getattr(packet, schema.overload_name or "default")
        except (AttributeError, RuntimeError):  # a schema without a callable overload
            continue
        declared = declared_types(schema.name, schema.overload_name, overload)
        positions = tuple(i for i in pyobject if declared.get(schema.arguments[i].name) in names)
        found_by = "define"
        if not positions:
            hints = kernel_annotations(schema.name)
            positions = tuple(i for i in pyobject if _takes(hints.get(schema.arguments[i].name), cls))
            found_by = "fake kernel"
        if not positions:
            continue
        qualname = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        found.append(CustomOpInfo(qualname, overload._schema, positions, overload, found_by))
    return found


def _ops_taking(cls: type) -> tuple[CustomOpInfo, ...]:
    from ..engine.torch_api import OPDEFS

    found = []
    for qualname, opdef in list(OPDEFS.items()):
        hints = _annotations(opdef._init_fn)
        params = list(inspect.signature(opdef._init_fn).parameters)
        positions = tuple(i for i, p in enumerate(params) if _takes(hints.get(p), cls))
        if positions:
            overload = opdef._opoverload
            found.append(CustomOpInfo(qualname, overload._schema, positions, overload))
    found += _defined_ops_taking(cls, set(OPDEFS))
    return tuple(sorted(found, key=lambda o: o.qualname))


def discover_custom(name: str) -> CustomClassInfo:
    """The :class:`CustomClassInfo` of the registered class ``name``. Raises
    :class:`~conformance.core.results.UnknownClassError` (a ``KeyError``) when none is registered, listing those
    that are."""
    try:
        [name] = expand_custom_selector(name)
        cls = _registered().get(name) or _import_class(name)
    except SelectorError as exc:
        raise UnknownClassError(str(exc)) from None
    except ValueError:  # a pattern matching several classes, or a malformed name
        raise UnknownClassError(f"no Python custom class {name} is registered") from None
    info = _opaque.get_opaque_obj_info(cls)
    members = {m: getattr(t, "value", str(t)) for m, t in (info.members or {}).items()}
    return CustomClassInfo(name, cls, registration_kind(cls), bool(info.hoist), info.guard_fn, members, _ops_taking(cls))
