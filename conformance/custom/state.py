"""The state of a Python custom class's object: what the checks compare before and after a call, between twins and
between eager and compiled programs.

An object with a ``__dict__`` (or ``__slots__``, or a ``__getstate__`` returning a dict) has the state pickle sees.
An object without one (a C type such as ``torch._C.Generator``, a pybind11 class such as ``ProcessGroup``) has the
state torch itself reads of it: the values of its registered members (``MemberType`` in
``torch/_library/opaque_object.py``: what a compiled program may read), what its ``guard_fn`` returns (what
torch.compile guards on), its C/pybind properties, and the state its own ``__reduce__`` hands to pickle (for a
``Generator``: its seed, offset and RNG state). ``__reduce__`` is called only where the class defines one: pybind11's
inherited one aborts the process on a ``ProcessGroup`` (``instance allocation failed``).

Memo fields are not state: a field written by ``__hash__`` or ``__eq__`` (``DeviceMesh._hash``, the cache of its
hash) caches what equality or hashing computes, so its presence says only whether someone hashed the object.
They are found by hashing and comparing a new object (:func:`learn_memos`) and from the ``self.x = ...``
assignments in the source of ``__hash__``/``__eq__``.
"""

from __future__ import annotations

import ast
import copy
import inspect
import math
import textwrap
import weakref
from typing import Any

import torch

__all__ = ["state_of", "same_value", "learn_memos", "changed_fields", "twin_differences", "fresh_copy",
           "held_by_identity", "snapshot"]

_BASE_MODULES = ("builtins", "pybind11_builtins")
#: class -> the names of its memo fields (learned from a new object; see :func:`learn_memos`).
_MEMOS: weakref.WeakKeyDictionary[type, frozenset[str]] = weakref.WeakKeyDictionary()


def same_value(a: Any, b: Any) -> bool:
    """Whether two field values of objects are the same: tensors of one shape and dtype with equal values, else
    the same type and ``==`` (values that cannot be compared are not the same). Floats are the same value when a
    call cannot tell them apart: ``0.0`` and ``-0.0`` differ (``x / 0.0`` is ``inf``, ``x / -0.0`` is ``-inf``)
    though ``==`` calls them equal, and a NaN is the same as a NaN though ``==`` says not."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and bool(torch.equal(a, b)))
    if type(a) is float and type(b) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1.0, a) == math.copysign(1.0, b))
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are not the same
        return False


#: Values with equality of their own: compared by value (a copy of one is equal to it).
_VALUE_TYPES = (torch.Tensor, str, bytes, int, float, complex, bool, type(None), tuple, list, dict, set, frozenset,
                torch.dtype, torch.device, torch.Size)


def held_by_identity(value: Any) -> bool:
    """Whether a field's ``value`` has no value equality of its own: an instance of a class whose ``__eq__`` is
    ``object.__eq__`` (a communicator, a stream, a process group held by a window), equal only to itself, so a
    copy of it is never equal to it and the field is compared by identity."""
    return not isinstance(value, _VALUE_TYPES) and type(value).__eq__ is object.__eq__


def snapshot(state: dict[str, Any]) -> dict[str, Any]:
    """A copy of a state (:func:`state_of`) that later changes to the object cannot reach: each value deep-copied
    (tensors cloned where a value cannot be copied), except one :func:`held_by_identity`, kept as it is, so that the
    field still holding the same object compares the same (:func:`same_value`: ``==`` is identity for it)."""
    out = {}
    for key, value in state.items():
        if held_by_identity(value):
            out[key] = value
            continue
        try:
            out[key] = copy.deepcopy(value)
        except Exception:  # noqa: BLE001 - an uncopyable value: clone its tensors, keep the rest
            out[key] = value.clone() if isinstance(value, torch.Tensor) else value
    return out


def state_of(obj: Any) -> dict[str, Any]:
    """The state of a custom class's object, memo fields left out: ``__getstate__()`` when the class defines one
    returning a dict, else ``vars(obj)`` (``__slots__`` read one by one), else the state torch reads of it
    (:func:`observed_state`). Never raises for want of a ``__dict__``."""
    state = _pickled_state(obj)
    if state is None:
        state = observed_state(obj)
    memos = _MEMOS.get(type(obj), frozenset()) | _assigned_in_dunders(type(obj))
    return {k: v for k, v in state.items() if k not in memos}


def _pickled_state(obj: Any) -> dict[str, Any] | None:
    getstate = getattr(type(obj), "__getstate__", None)
    if getstate is not None and getstate is not getattr(object, "__getstate__", None):
        try:
            state = obj.__getstate__()
        except Exception:  # noqa: BLE001 - a __getstate__ that refuses: the state torch reads instead
            state = None
        if isinstance(state, dict):
            return dict(state)
    # __slots__ and __dict__ together: a slotted class under a base without __slots__ (torch's OpaqueBase) has an
    # empty __dict__ beside the slots that hold its state
    slots = [s for c in type(obj).__mro__ for s in _slot_names(c) if s not in ("__dict__", "__weakref__")]
    state = {s: getattr(obj, s) for s in slots if hasattr(obj, s)}
    if hasattr(obj, "__dict__"):
        state.update(vars(obj))
    return state if state or hasattr(obj, "__dict__") else None


def _slot_names(cls: type) -> tuple[str, ...]:
    slots = vars(cls).get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


def _own_classes(cls: type) -> list[type]:
    return [k for k in cls.__mro__ if k.__module__ not in _BASE_MODULES]


def observed_state(obj: Any) -> dict[str, Any]:
    """The state torch reads of an object without ``__dict__``: ``member`` (a registered data member) or
    ``member()`` (a registered method taking no argument) for each registered member that reads without raising,
    ``guard_fn(obj)``, each C/pybind property (``property`` or getset descriptor of the class itself), and
    ``__reduce__ args`` / ``__reduce__ state[i]`` where the class defines its own ``__reduce__``. Empty when
    none of these exist."""
    from ..engine.torch_api import opaque_object as oo

    out: dict[str, Any] = {}
    cls = type(obj)
    info = oo.get_opaque_obj_info(cls) if oo.is_opaque_type(cls) else None
    for name in (getattr(info, "members", None) or {}):
        if name.startswith("__"):
            continue
        try:
            value = getattr(obj, name)
            if callable(value) and not isinstance(value, torch.Tensor):
                out[f"{name}()"] = value()
            else:
                out[name] = value
        except Exception:  # noqa: BLE001 - a member that needs arguments or raises on this object
            continue
    guard_fn = getattr(info, "guard_fn", None)
    if guard_fn is not None:
        try:
            out["guard_fn(obj)"] = guard_fn(obj)
        except Exception:  # noqa: BLE001 - the guards check reports a guard_fn that raises
            pass
    for klass in _own_classes(cls):
        for name, attr in vars(klass).items():
            if name in out or name.startswith("__") or not (isinstance(attr, property) or
                                                           inspect.isgetsetdescriptor(attr)):
                continue
            try:
                out[name] = getattr(obj, name)
            except Exception:  # noqa: BLE001 - a property this object cannot give
                continue
    if any("__reduce__" in vars(k) or "__reduce_ex__" in vars(k) for k in _own_classes(cls)):
        try:
            reduced = obj.__reduce__()
        except Exception:  # noqa: BLE001 - not picklable: no state from pickle
            reduced = None
        if isinstance(reduced, tuple) and len(reduced) >= 2:
            out["__reduce__ args"] = reduced[1]
            extra = reduced[2] if len(reduced) > 2 else None
            if isinstance(extra, dict):
                out.update({f"__reduce__ state[{k!r}]": v for k, v in extra.items()})
            elif isinstance(extra, (tuple, list)):
                out.update({f"__reduce__ state[{i}]": v for i, v in enumerate(extra)})
            elif extra is not None:
                out["__reduce__ state"] = extra
    return out


def learn_memos(obj: Any) -> None:
    """Learn the memo fields of ``type(obj)`` from ``obj`` (a new object the plugin built): the fields that
    ``hash(obj)`` and ``obj == obj`` add or change. Learned once per class; ``obj`` may gain its memo (as it would
    the first time anyone hashes it)."""
    cls = type(obj)
    if cls in _MEMOS:
        return
    before = _pickled_state(obj)
    if before is None:
        _MEMOS[cls] = frozenset()
        return
    try:
        hash(obj)
        _ = obj == obj
    except Exception:  # noqa: BLE001 - unhashable or a raising __eq__: what changed so far still counts
        pass
    after = _pickled_state(obj) or {}
    _MEMOS[cls] = frozenset(k for k in after if k not in before or not same_value(before[k], after[k]))


def _assigned_in_dunders(cls: type) -> frozenset[str]:
    """Names that ``__hash__`` or ``__eq__`` (Python functions of ``cls``) assign as ``self.<name> = ...``."""
    names: set[str] = set()
    for dunder in ("__hash__", "__eq__"):
        fn = getattr(cls, dunder, None)
        if not inspect.isfunction(fn):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    names.add(t.attr)
    return frozenset(names)


def changed_fields(before: dict[str, Any], after: dict[str, Any], held_by_state: bool = False) -> list[str]:
    """The fields in which two states (:func:`state_of`) differ, sorted: those only one has, and those whose values
    are not the same (:func:`same_value`). A field :func:`held_by_identity` is the same when it holds the same
    object, or, with ``held_by_state`` (two objects, not one object at two times), objects of one type in the same
    state (:func:`_same_held`)."""
    def same(a: Any, b: Any) -> bool:
        return same_value(a, b) or (held_by_state and _same_held(a, b))

    return sorted((k for k in set(before) | set(after)
                   if k not in before or k not in after or not same(before[k], after[k])), key=str)


def _same_held(a: Any, b: Any, depth: int = 3) -> bool:
    """Whether two values held by identity (:func:`held_by_identity`) are objects of one type whose own states
    (:func:`state_of`) are the same, fields held by identity compared so in turn (``depth`` levels at most): two
    windows each holding a communicator of the same size and rank can stand for each other."""
    if not (held_by_identity(a) and type(a) is type(b)) or depth <= 0:
        return False
    try:
        sa, sb = state_of(a), state_of(b)
    except Exception:  # noqa: BLE001 - a state that cannot be read: not the same
        return False
    return set(sa) == set(sb) and all(same_value(sa[k], sb[k]) or _same_held(sa[k], sb[k], depth - 1) for k in sa)


def twin_differences(a: Any, b: Any) -> list[str]:
    """The fields in which two objects built the same way differ (``[]``: they are twins, and a call on one can
    stand for the same call on the other); a field held by identity compares the state of what it holds."""
    return changed_fields(state_of(a), state_of(b), held_by_state=True)


def fresh_copy(obj: Any) -> Any | None:
    """A deep copy of ``obj`` with the same state, or ``None`` when it cannot be copied safely: a class without
    ``__dict__`` that defines no copying of its own (``__deepcopy__``, ``__reduce__``) is never copied, since
    pybind11's inherited ``__reduce_ex__`` aborts the process on such objects."""
    cls = type(obj)
    own = _own_classes(cls)
    if not hasattr(obj, "__dict__") and not any(
            n in vars(k) for k in own for n in ("__deepcopy__", "__reduce__", "__reduce_ex__", "__getstate__")):
        return None
    try:
        new = copy.deepcopy(obj)
    except Exception:  # noqa: BLE001 - not copyable
        return None
    return new if type(new) is cls and not twin_differences(obj, new) else None
