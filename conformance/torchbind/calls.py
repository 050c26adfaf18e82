"""The one call specification: a method of the object, or a custom op that takes objects at some positions.

Every place that calls into a class — example objects reaching a state, the paired calls of ``agreement`` and
``custom_op``, the differential machine, the matrix programs and every reproducer — builds a :class:`Call` and
uses its :meth:`~Call.invoke` (to run it) and :meth:`~Call.code` (to print it), so the object is always where
the schema puts it: ``obj.push(x)`` for a method; ``torch.ops.ns.op.default(x, 2.0, obj)`` for an op whose
schema takes the object as its third argument.

An op may take several arguments of the class (``enter_compute_stream(Guard primary, Guard caller_guard, int
device)``). :meth:`Callee.of_op` puts the caller's one object at the first of them (the others get
values from the argument source and are not the caller's); :meth:`Callee.layouts` gives callees that put the
caller's objects at *every* such position: distinct objects, and the same object at two positions where the
schema lets them alias (:func:`may_share`). Such a callee's ``invoke`` / ``code`` take one object (or name) per
object it receives, in :attr:`Callee.objects` order.
"""

from __future__ import annotations

import dataclasses
import itertools
import keyword
from collections.abc import Sequence
from typing import Any

import torch

from .discovery import OpInfo
from ..engine.mutations import declared_writes, observed, observed_source, written_key
from ..engine.values import ArgumentSet
from ..engine import torch_api

__all__ = ["Callee", "Call", "OPERATORS", "may_share"]

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


#: Names a reproducer script already uses: an object named after such a schema argument is called ``obj<k>``.
_RESERVED = frozenset({"torch", "pytree", "math", "mode", "args", "kwargs", "obj", "fake_obj", "print", "make_obj",
                       "make_args", "FakeTensorMode", "ShapeEnv", "maybe_to_fake_obj", "o"})


def may_share(schema: torch.FunctionSchema, i: int, j: int) -> bool:
    """Whether the same object may be passed as both argument ``i`` and argument ``j`` of ``schema``: torch's alias
    analysis of the schema (``torch._C._SchemaInfo``, ``torch/csrc/utils/schema_info.cpp``) says the two may alias
    or may contain an alias of each other. Arguments annotated with distinct mutable alias sets (``Tensor(a!) x,
    Tensor(b!) y``) may not: a caller passing one object for both breaks the schema's promise. A TorchBind class
    argument cannot carry an annotation (the schema parser rejects ``Cls(a!)``), and alias analysis treats an
    unannotated class argument as possibly aliasing any other of its type: two arguments of one class may always
    share. Raises nothing (``True`` when torch cannot say)."""
    try:
        info = torch_api.SchemaInfo(schema)
        a = torch_api.SchemaArgument(torch_api.SchemaArgType.input, i)
        b = torch_api.SchemaArgument(torch_api.SchemaArgType.input, j)
        return bool(info.may_alias(a, b) or info.may_contain_alias(a, b))
    except Exception:  # noqa: BLE001 - a torch without _SchemaInfo: class arguments carry no annotation
        return True


@dataclasses.dataclass(frozen=True)
class Callee:
    """What is called: the method ``name`` of the object, or (``op`` set) the custom op ``op``, whose argument at
    :attr:`position` is the object. ``name`` is the method name or the op's ``ns::op`` name. ``operator``: reach
    the dunder method ``name`` through its Python operator or builtin (:data:`OPERATORS`), e.g. ``len(obj)``
    for ``__len__``. ``layout`` (ops only): for each of the op's class-typed arguments (``op.class_args``), the
    index of the caller's object that goes there, e.g. ``(0, 1)`` (two distinct objects) or ``(0, 0)`` (one
    object twice); empty: the caller's one object at the class-typed argument ``op.class_args[at]`` (the first,
    by default), the others from the argument source."""

    name: str
    op: OpInfo | None = None
    operator: bool = False
    layout: tuple[int, ...] = ()
    at: int = 0

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
    def of_op(cls, op: OpInfo, layout: Sequence[int] = (), at: int = 0) -> Callee:
        """The op with the caller's object at its class-typed argument ``op.class_args[at]`` (the first by
        default), or with ``layout`` (see the class docstring). Raises ``ValueError`` for a layout that does not
        name one object index per class-typed argument, numbered from 0 in order of first use, or an ``at``
        that is not the index of one of them."""
        if not 0 <= at < max(len(op.class_args), 1):
            raise ValueError(f"at={at} for {op.qualname}: it has {len(op.class_args)} class-typed arguments")
        if at:
            return cls(op.qualname, op, at=at)
        layout = tuple(layout)
        if layout:
            first_use = list(dict.fromkeys(layout))
            if len(layout) != len(op.class_args) or first_use != list(range(len(first_use))):
                raise ValueError(f"layout {layout} for {op.qualname} (class-typed arguments at {op.class_args}): "
                                 "expected one object index per class-typed argument, numbered from 0")
        return cls(op.qualname, op, layout=layout)

    @classmethod
    def layouts(cls, op: OpInfo) -> list[Callee]:
        """Every way the paired calls put objects into ``op``: for one class-typed argument, :meth:`of_op`;
        for several, distinct objects at all of them, then, for each pair of them that :func:`may_share`, one
        object at both (the others distinct), and one object at all of them when there are more than two."""
        n = len(op.class_args)
        if n < 2:
            return [cls.of_op(op)]
        found = [tuple(range(n))]
        for i, j in itertools.combinations(range(n), 2):
            if may_share(op.schema, op.class_args[i], op.class_args[j]):
                others = iter(range(1, n))
                found.append(tuple(0 if k in (i, j) else next(others) for k in range(n)))
        if n > 2 and all(may_share(op.schema, op.class_args[0], p) for p in op.class_args[1:]):
            found.append((0,) * n)
        # Renumber by first use, so every layout names its objects 0, 1, ... in argument order.
        return [cls.of_op(op, [list(dict.fromkeys(lay)).index(k) for k in lay]) for lay in found]

    @property
    def placed(self) -> tuple[tuple[int, int], ...]:
        """``(schema position, object index)`` of every argument the caller's objects go to; ``((0, 0),)`` for a
        method (its ``self``)."""
        if self.op is None:
            return ((0, 0),)
        if not self.layout:
            return ((self.op.class_args[self.at], 0),)
        return tuple(zip(self.op.class_args, self.layout))

    @property
    def objects(self) -> int:
        """How many objects the caller gives: 1, except for a layout of distinct objects."""
        return max(k for _, k in self.placed) + 1

    @property
    def shares(self) -> bool:
        """Whether one object goes to several arguments."""
        return len(self.placed) > self.objects

    @property
    def position(self) -> int:
        """Where the (first) object goes among the op's arguments (its first argument of the class's type); 0 for
        a method, whose schema's argument 0 is ``self``."""
        return self.placed[0][0]

    def argument_names(self, k: int) -> list[tuple[str, int]]:
        """``(name, position)`` of the schema arguments object ``k`` goes to (``("self", 0)`` for a method)."""
        if self.op is None:
            return [("self", 0)]
        return [(self.op.schema.arguments[p].name, p) for p, obj in self.placed if obj == k]

    def describe_object(self, k: int) -> str:
        """Object ``k`` for messages: ``caller_guard (argument 1)``, or ``dst and src (arguments 0 and 1: one
        object passed twice)``."""
        named = self.argument_names(k)
        if len(named) == 1:
            return f"{named[0][0]} (argument {named[0][1]})"
        return (f"{' and '.join(n for n, _ in named)} (arguments {' and '.join(str(p) for _, p in named)}: one "
                "object passed twice)")

    def object_names(self) -> tuple[str, ...]:
        """A variable name for each object, for calls and reproducers: ``("obj",)`` for one object, else the
        name of the first schema argument it goes to (``obj<k>`` where that name is not a usable variable)."""
        if self.objects == 1 and not self.shares:
            return ("obj",)
        names = []
        for k in range(self.objects):
            name = self.argument_names(k)[0][0]
            ok = name.isidentifier() and not keyword.iskeyword(name) and name not in _RESERVED
            names.append(name if ok and name not in names else f"obj{k}")
        return tuple(names)

    @property
    def schema(self) -> torch.FunctionSchema | None:
        """The op's schema (a method's schema lives in :attr:`conformance.torchbind.discovery.ClassInfo.methods`)."""
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

    def _objects(self, obj: Any) -> tuple:
        """The caller's objects: ``obj`` itself for a callee of one object, else the sequence ``obj``."""
        if self.objects == 1 and not isinstance(obj, (tuple, list)):
            return (obj,)
        objs = tuple(obj)
        if len(objs) != self.objects:
            raise TypeError(f"{self.label} takes {self.objects} objects, got {len(objs)}")
        return objs

    def arrange(self, objs: Sequence[Any], args: Sequence[Any], kwargs: dict[str, Any]
                ) -> tuple[list[Any], dict[str, Any]]:
        """The op's full argument list: the other arguments ``args`` / ``kwargs`` (the objects excluded) with
        the objects ``objs`` placed by :attr:`placed`. An object goes positionally, unless its argument is
        keyword-only or an argument before it is not given positionally (an omitted default): then by name."""
        where = dict(self.placed)
        out, named, rest, gap = [], dict(kwargs), list(args), False
        for pos, arg in enumerate(self.op.schema.arguments):
            if pos in where:
                if arg.kwarg_only or gap:
                    named[arg.name] = objs[where[pos]]
                else:
                    out.append(objs[where[pos]])
            elif rest and not arg.kwarg_only:
                out.append(rest.pop(0))
            else:
                gap = True
        return out + rest, named

    def invoke(self, obj: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Call it on ``obj`` (a ``ScriptObject``, a ``FakeScriptObject`` or a fake class instance; a sequence
        of them, one per object, for a callee of several objects) with the other arguments ``args`` / ``kwargs``
        (the objects excluded). Returns what the call returns, or for an op whose schema declares arguments
        written (an out-variant op) its result beside each written argument after the call
        (:func:`conformance.engine.mutations.observed`). Raises whatever the call raises."""
        if self.operator:
            return OPERATORS[self.name][1](obj, *args, *kwargs.values())
        if self.op is None:
            return getattr(obj, self.name)(*args, **kwargs)
        full, named = self.arrange(self._objects(obj), args, kwargs)
        return observed(self.op.schema, self.op.resolve()(*full, **named), full, named)

    def written_sources(self, given: int, keywords: Sequence[str] = (), args: str = "args", kwargs: str = "kwargs",
                        sources: Sequence[str] | None = None, keyword_sources: dict[str, str] | None = None
                        ) -> list[tuple[str, str]]:
        """``(argument name, source)`` of each argument the op's schema declares written (``Tensor(a!) out``),
        in schema order, for a call given ``given`` positional values, in the variable ``args``, and the keyword
        values named ``keywords``, in the dict ``kwargs`` (or, with ``sources`` / ``keyword_sources``, whose
        values are those expressions): ``[("out", "args[1]")]``. Empty for a method and for an op that writes
        nothing."""
        if self.op is None or self.operator or not declared_writes(self.op.schema):
            return []
        full, named = self.arrange([None] * self.objects, [_Arg(i) for i in range(given)], {k: k for k in keywords})
        bound = observed(self.op.schema, None, full, named)
        out = []
        for a in self.op.schema.arguments:
            value = bound.get(written_key(a.name))
            if isinstance(value, _Arg):
                out.append((a.name, sources[value.index] if sources is not None else f"{args}[{value.index}]"))
            elif isinstance(value, str):
                out.append((a.name, keyword_sources[value] if keyword_sources is not None else f"{kwargs}[{value!r}]"))
        return out

    def source(self, obj: str | Sequence[str], args: Sequence[str], kwargs: Sequence[tuple[str, str]] = ()) -> str:
        """The call as Python source, with ``obj`` the object's expression (one per object for a callee of
        several) and ``args`` / ``kwargs`` the other arguments' source: ``obj.push(x)`` or
        ``torch.ops.ns.op.default(x, obj)``."""
        keywords = [f"{k}={v}" for k, v in kwargs]
        if self.operator:
            return OPERATORS[self.name][0].format(*args, *(v for _, v in kwargs), obj=obj)
        if self.op is None:
            return f"{obj}.{self.name}({', '.join([*args, *keywords])})"
        full, named = self.arrange(self._objects(obj), args, dict(kwargs))
        return f"{self.op_path}({', '.join([*full, *(f'{k}={v}' for k, v in named.items())])})"

    def spread_source(self, obj: str | Sequence[str], args: str = "args", kwargs: str = "kwargs",
                      given: int | None = None) -> str:
        """The call as Python source over a sequence variable ``args`` and a dict variable ``kwargs`` holding the
        other arguments (for reproducer scripts): ``obj.push(*args, **kwargs)`` or
        ``torch.ops.ns.op.default(*args[:1], obj, *args[1:], **kwargs)``. For a callee of several objects
        ``obj`` names each and ``given`` is how many positional values ``args`` holds (where an object after an
        omitted default goes by name, see :meth:`arrange`)."""
        if self.operator:
            return OPERATORS[self.name][0].format(*(f"{args}[{i}]" for i in range(2)), obj=obj)
        if self.op is None:
            return f"{obj}.{self.name}(*{args}, **{kwargs})"
        if self.objects == 1 and not self.shares and isinstance(obj, str):
            p = self.position
            return f"{self.op_path}(*{args}[:{p}], {obj}, *{args}[{p}:], **{kwargs})"
        n = given if given is not None else len(self.op.schema.arguments)
        marks = [_Arg(i) for i in range(n)]
        full, named = self.arrange(self._objects(obj), marks, {})
        parts, start, seen = [], 0, 0
        for item in full:
            if isinstance(item, _Arg):
                seen += 1
                continue
            if seen > start:
                parts.append(f"*{args}[{start}:{seen}]")
            parts.append(item)
            start = seen
        parts.append(f"*{args}[{start}:]" if start else f"*{args}")
        parts.append(f"**{kwargs}")
        parts += [f"{k}={v}" for k, v in named.items()]
        return f"{self.op_path}({', '.join(parts)})"

    def without_objects(self, args: ArgumentSet) -> ArgumentSet:
        """``args`` (an argument set for the op with only its first object left out, as the argument source
        draws them) without the values of the other arguments this callee's objects go to. The same set for a
        method or a callee of one object at one argument."""
        if self.op is None or len(self.placed) == 1:
            return args
        first = self.position
        drop_pos, drop_names = set(), set()
        for pos, _ in self.placed[1:]:
            index = pos - (pos > first)
            if index < len(args.args):
                drop_pos.add(index)
            else:
                drop_names.add(self.op.schema.arguments[pos].name)
        return ArgumentSet(tuple(v for i, v in enumerate(args.args) if i not in drop_pos),
                           tuple((k, v) for k, v in args.kwargs if k not in drop_names))


@dataclasses.dataclass(frozen=True)
class _Arg:
    """A placeholder for the positional value at ``index`` (for :meth:`Callee.spread_source`)."""

    index: int


@dataclasses.dataclass(frozen=True)
class Call:
    """A :class:`Callee` with its arguments (an :class:`~conformance.engine.values.ArgumentSet`, the objects excluded)."""

    callee: Callee
    args: ArgumentSet

    @property
    def label(self) -> str:
        return self.callee.label

    def invoke(self, obj: Any, made: tuple[list[Any], dict[str, Any]] | None = None) -> Any:
        """Run the call on ``obj`` (a sequence of objects for a callee of several) with fresh arguments (or with
        ``made``, arguments already made and perhaps converted to fake tensors). Raises whatever the call
        raises."""
        args, kwargs = made if made is not None else self.args.make()
        return self.callee.invoke(obj, args, kwargs)

    def code(self, obj: str | Sequence[str] | None = None) -> str:
        """The call as Python source, e.g. ``obj.push(torch.ones(3))``; the objects are named ``obj`` (or
        :meth:`Callee.object_names` for a callee of several) unless ``obj`` names them."""
        names = obj if obj is not None else self._default_names()
        return self.callee.source(names, [v.code for v in self.args.args], [(k, v.code) for k, v in self.args.kwargs])

    def spread_source(self, obj: str | Sequence[str], args: str = "args", kwargs: str = "kwargs") -> str:
        """:meth:`Callee.spread_source` for these arguments."""
        return self.callee.spread_source(obj, args, kwargs, given=len(self.args.args))

    def observed_source(self, result: str, args: str = "args", kwargs: str = "kwargs") -> str:
        """Source of what :meth:`invoke` gives, once ``result`` (a name) holds what the call returned and the
        variables ``args`` / ``kwargs`` hold its arguments: ``result`` itself, or for an op that writes
        arguments ``{'returned': result, 'out (written)': args[1]}``
        (:func:`conformance.engine.mutations.observed_source`)."""
        written = self.callee.written_sources(len(self.args.args), [k for k, _ in self.args.kwargs], args, kwargs)
        return observed_source(result, written)

    def _default_names(self) -> str | tuple[str, ...]:
        names = self.callee.object_names()
        return names[0] if len(names) == 1 and not self.callee.shares else names
