"""The one call specification: a method of the object, or a custom op that takes the object at some position.

Every place that calls into a class — example objects reaching a state, the paired calls of ``agreement`` and
``custom_op``, the differential machine, the matrix programs and every reproducer — builds a :class:`Call` and
uses its :meth:`~Call.invoke` (to run it) and :meth:`~Call.source` (to print it), so the object is always where
the schema puts it: ``obj.push(x)`` for a method; ``torch.ops.ns.op.default(x, 2.0, obj)`` for an op whose
schema takes the object as its third argument.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from .discovery import OpInfo
from .values import ArgumentSet

__all__ = ["Callee", "Call", "OPERATORS"]

#: Dunder methods a TorchBind class may bind that Python code reaches through an operator or a builtin
#: (``len(obj)``, ``x in obj``, ``obj == other``): the source template (``{obj}`` the object, ``{0}`` its argument)
#: and the call. A ``ScriptObject`` dispatches these to the bound C++ method; a program compiled or exported from
#: such code goes through dynamo's handling of the operator, not of a method call.
OPERATORS: dict[str, tuple[str, Any]] = {
    "__len__": ("len({obj})", lambda obj: len(obj)),
    "__contains__": ("{0} in {obj}", lambda obj, x: x in obj),
    "__getitem__": ("{obj}[{0}]", lambda obj, i: obj[i]),
    "__eq__": ("{obj} == {0}", lambda obj, other: obj == other),
    "__ne__": ("{obj} != {0}", lambda obj, other: obj != other),
    "__lt__": ("{obj} < {0}", lambda obj, other: obj < other),
    "__le__": ("{obj} <= {0}", lambda obj, other: obj <= other),
    "__gt__": ("{obj} > {0}", lambda obj, other: obj > other),
    "__ge__": ("{obj} >= {0}", lambda obj, other: obj >= other),
    "__bool__": ("bool({obj})", lambda obj: bool(obj)),
    "__str__": ("str({obj})", lambda obj: str(obj)),
    "__repr__": ("repr({obj})", lambda obj: repr(obj)),
    "__hash__": ("hash({obj})", lambda obj: hash(obj)),
}


@dataclasses.dataclass(frozen=True)
class Callee:
    """What is called: the method ``name`` of the object, or (``op`` set) the custom op ``op``, whose argument at
    :attr:`position` is the object. ``name`` is the method name or the op's ``ns::op`` name. ``operator``: reach
    the dunder method ``name`` through its Python operator or builtin (:data:`OPERATORS`), e.g. ``len(obj)``
    for ``__len__``."""

    name: str
    op: OpInfo | None = None
    operator: bool = False

    @classmethod
    def method(cls, name: str) -> Callee:
        return cls(name)

    @classmethod
    def python_operator(cls, name: str) -> Callee:
        """The dunder method ``name`` called through Python's operator. Raises ``KeyError`` for a name that is
        not in :data:`OPERATORS`."""
        OPERATORS[name]  # noqa: B018 - validates the name
        return cls(name, operator=True)

    @classmethod
    def of_op(cls, op: OpInfo) -> Callee:
        return cls(op.qualname, op)

    @property
    def position(self) -> int:
        """Where the object goes among the op's arguments (its first argument of the class's type); 0 for a
        method, whose schema's argument 0 is ``self``."""
        return self.op.class_args[0] if self.op is not None else 0

    @property
    def schema(self) -> torch.FunctionSchema | None:
        """The op's schema (a method's schema lives in :attr:`conformance.discovery.ClassInfo.methods`)."""
        return self.op.schema if self.op is not None else None

    @property
    def label(self) -> str:
        """The name in messages and test ids: the method name, the op's short name, or ``operator.len`` for
        ``__len__`` called through ``len(obj)``."""
        if self.operator:
            return f"operator.{self.name.strip('_')}"
        return self.op.short_name if self.op is not None else self.name

    @property
    def op_path(self) -> str:
        """``torch.ops.ns.name.overload`` of an op (``default`` when the name has no overload)."""
        ns, rest = self.op.qualname.split("::", 1)
        name, _, overload = rest.partition(".")
        return f"torch.ops.{ns}.{name}.{overload or 'default'}"

    def invoke(self, obj: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Call it on ``obj`` (a ``ScriptObject``, a ``FakeScriptObject`` or a fake class instance) with the
        other arguments ``args`` / ``kwargs`` (the object excluded). Raises whatever the call raises."""
        if self.operator:
            return OPERATORS[self.name][1](obj, *args, *kwargs.values())
        if self.op is None:
            return getattr(obj, self.name)(*args, **kwargs)
        p = self.position
        return self.op.resolve()(*args[:p], obj, *args[p:], **kwargs)

    def source(self, obj: str, args: Sequence[str], kwargs: Sequence[tuple[str, str]] = ()) -> str:
        """The call as Python source, with ``obj`` the object's expression and ``args`` / ``kwargs`` the other
        arguments' source: ``obj.push(x)`` or ``torch.ops.ns.op.default(x, obj)``."""
        keywords = [f"{k}={v}" for k, v in kwargs]
        if self.operator:
            return OPERATORS[self.name][0].format(*args, *(v for _, v in kwargs), obj=obj)
        if self.op is None:
            return f"{obj}.{self.name}({', '.join([*args, *keywords])})"
        p = self.position
        return f"{self.op_path}({', '.join([*args[:p], obj, *args[p:], *keywords])})"

    def spread_source(self, obj: str, args: str = "args", kwargs: str = "kwargs") -> str:
        """The call as Python source over a sequence variable ``args`` and a dict variable ``kwargs`` holding the
        other arguments (for reproducer scripts): ``obj.push(*args, **kwargs)`` or
        ``torch.ops.ns.op.default(*args[:1], obj, *args[1:], **kwargs)``."""
        if self.operator:
            return OPERATORS[self.name][0].format(*(f"{args}[{i}]" for i in range(2)), obj=obj)
        if self.op is None:
            return f"{obj}.{self.name}(*{args}, **{kwargs})"
        p = self.position
        return f"{self.op_path}(*{args}[:{p}], {obj}, *{args}[{p}:], **{kwargs})"


@dataclasses.dataclass(frozen=True)
class Call:
    """A :class:`Callee` with its arguments (an :class:`~conformance.values.ArgumentSet`, the object excluded)."""

    callee: Callee
    args: ArgumentSet

    @property
    def label(self) -> str:
        return self.callee.label

    def invoke(self, obj: Any, made: tuple[list[Any], dict[str, Any]] | None = None) -> Any:
        """Run the call on ``obj`` with fresh arguments (or with ``made``, arguments already made and perhaps
        converted to fake tensors). Raises whatever the call raises."""
        args, kwargs = made if made is not None else self.args.make()
        return self.callee.invoke(obj, args, kwargs)

    def code(self, obj: str = "obj") -> str:
        """The call as Python source, e.g. ``obj.push(torch.ones(3))``."""
        return self.callee.source(obj, [v.code for v in self.args.args], [(k, v.code) for k, v in self.args.kwargs])
