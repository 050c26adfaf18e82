"""Example objects: real TorchBind objects in several states, each rebuilt fresh on demand.

Every check works on objects it builds itself from an :class:`Example` recipe — a constructor call (arguments
generated from the ``__init__`` schema, see :mod:`conformance.engine.values`) or a user factory, followed by method calls
that take the object to another state — so no check ever sees, or mutates, an object the user holds.

Users whose constructors need specific arguments register a factory::

    import conformance

    @conformance.examples("myns::Tokenizer")
    def tokenizers():
        return [torch.classes.myns.Tokenizer("vocab.txt"), torch.classes.myns.Tokenizer("vocab.txt", lower=True)]

The factory is called anew whenever a fresh object is needed, so it must build new objects each time and
build them the same way (the ``examples`` check verifies that).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
from collections.abc import Callable
from typing import Any, ContextManager

import torch

from .calls import Call, Callee
from .discovery import ClassInfo, qualname_of
from ..core.breadcrumbs import CallAbandoned, Tracer
from ..core.results import NotApplicable, exception_line
from ..core.registry import Factory
from ..engine.compare import flat_state_differences
from ..engine.values import ArgumentSet, UnsupportedType, Value, argument_sets

__all__ = [
    "named_arguments",
    "Example",
    "ExampleSet",
    "build_examples",
    "state_key",
    "deepcopy_differences",
    "read_state",
    "comparable_state",
]

#: At most this many examples built from constructor arguments, and this many derived by method calls.
MAX_BASE = 8
MAX_DERIVED = 4


@dataclasses.dataclass(frozen=True)
class Example:
    """A recipe for one example object. ``build()`` returns a new real object in the recipe's state.

    Exactly one of ``ctor`` (generated constructor arguments) and ``factory`` (a user factory, with the index of
    the object in its output) is set. ``steps`` (method :class:`~conformance.torchbind.calls.Call` objects) are applied
    after construction. ``tracer``: where building it reports its calls (:mod:`conformance.core.breadcrumbs`; the
    class context's tracer).
    """

    info: ClassInfo
    ctor: ArgumentSet | None = None
    factory: Factory | None = None
    factory_index: int = 0
    steps: tuple[Call, ...] = ()
    tracer: Tracer = dataclasses.field(default_factory=Tracer, compare=False, repr=False)

    def build(self, record: list[tuple[str, Any]] | None = None) -> torch.ScriptObject:
        """A fresh object. Raises whatever the constructor, factory or steps raise.

        ``record``, when given, receives ``(what, value)`` for every value the object was handed or handed out
        on the way: the constructor's arguments (``"argument 0 of the constructor"``), each step's arguments
        and results (``"the result of obj.push(...)"``) — for checks of what the object's state may share."""
        with self.tracer.calling(lambda: f"building the example object {self.info.qualname}: {'; '.join(self.code())}"):
            if self.factory is not None:
                objs = list(self.factory())
                obj = objs[self.factory_index]
            else:
                args, kwargs = self.ctor.make()
                if record is not None:
                    record += named_arguments("the constructor", args, kwargs)
                obj = self.info.script_class(*args, **kwargs)
            for step in self.steps:
                made = step.args.make()
                result = step.invoke(obj, made)
                if record is not None:
                    record += named_arguments(step.code(), *made)
                    record.append((f"the result of {step.code()}", result))
        return obj

    @property
    def label(self) -> str:
        """Short readable label, e.g. ``TensorQueue(torch.ones(3)).push(..)x2``."""
        if self.factory is not None:
            head = f"{getattr(self.factory, '__name__', 'factory')}()[{self.factory_index}]"
        else:
            head = f"{self.info.name}({self.ctor.code()})"
        tail = "".join(f".{s.label}(..)" for s in self.steps)
        return head + tail

    def code(self, var: str = "obj") -> list[str]:
        """Python source lines that build the object into ``var`` (needs ``torch`` imported)."""
        if self.factory is not None:
            mod = getattr(self.factory, "__module__", "?")
            name = getattr(self.factory, "__qualname__", "factory")
            lines = [f"from {mod} import {name.split('.')[0]}",
                     f"{var} = list({name}())[{self.factory_index}]"]
        else:
            lines = [f"{var} = torch.classes.{self.info.namespace}.{self.info.name}({self.ctor.code()})"]
        lines += [s.code(var) for s in self.steps]
        return lines

    def as_value(self) -> Value:
        """A :class:`Value` that builds this object, for passing it as an argument of a method or op."""
        if self.factory is None and not self.steps:
            return Value(f"torch.classes.{self.info.namespace}.{self.info.name}({self.ctor.code()})",
                         self.ctor.extra)
        name = f"_example_{self.info.namespace}_{self.info.name}"
        return Value(f"{name}()", ((name, self.build),))


def named_arguments(call: str, args: list[Any], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(what, value)`` for each argument of ``call`` (its source or a description): ``argument 0 of ...``,
    ``argument alpha of ...``."""
    return [(f"argument {i} of {call}", v) for i, v in enumerate(args)] + \
        [(f"argument {k} of {call}", v) for k, v in kwargs.items()]


@dataclasses.dataclass
class ExampleSet:
    """The examples of one class and the attempts that failed (``rejected``: ``(call code, error text)``);
    ``lost``: those among them that crashed or hung a worker process (see :mod:`conformance.process`);
    ``flatten_error``: what ``__obj_flatten__`` raised on the first example built when it raised (the objects were
    built all the same, told apart by ``__getstate__``: :func:`comparable_state`), else ``None``;
    ``no_constructor``: there was nothing to build objects from (no factory registered and no constructor bound),
    so the plugin cannot judge the class until it is given example objects (``problem`` says so)."""

    examples: list[Example]
    rejected: list[tuple[str, str]]
    problem: str | None = None
    lost: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    flatten_error: str | None = None
    no_constructor: bool = False


_QUIET = Tracer()  # reports nowhere


def script_name(obj: torch.ScriptObject) -> str:
    """``ns::Cls`` of a TorchBind object (its JIT type is ``__torch__.torch.classes.ns.Cls``)."""
    return qualname_of(obj._type().qualified_name())


def read_state(obj: torch.ScriptObject, tracer: Tracer | None = None) -> Any:
    """The object's observable state: ``__obj_flatten__()`` if defined, else ``__getstate__()``, else ``None``;
    the call is reported to ``tracer`` (default: nowhere)."""
    names = obj._method_names()
    for method in ("__obj_flatten__", "__getstate__"):
        if method in names:
            with (tracer or _QUIET).calling(lambda: f"{script_name(obj)}.{method}()"):
                return getattr(obj, method)()
    return None


def comparable_state(obj: torch.ScriptObject, tracer: Tracer | None = None) -> tuple[Any, BaseException | None]:
    """``(state, flatten_error)``: the object's state for telling example objects apart and a rebuild from the
    first build. :func:`read_state` when ``__obj_flatten__`` works (``flatten_error`` ``None``); where it raises
    (torch's ``aten::OpaqueObject`` does, by design), ``__getstate__()`` when the class pickles, else ``None``
    (nothing to compare), with what ``__obj_flatten__`` raised as ``flatten_error``. Raises what
    ``__getstate__`` raises, and what a class without ``__obj_flatten__`` raises from :func:`read_state`."""
    if "__obj_flatten__" not in obj._method_names():
        return read_state(obj, tracer), None
    try:
        return read_state(obj, tracer), None
    except CallAbandoned:  # a crash or hang: not an answer of __obj_flatten__
        raise
    except Exception as exc:  # noqa: BLE001 - C++ may raise anything; the flatten check reports it
        flatten_error = exc
    if "__getstate__" in obj._method_names():
        with (tracer or _QUIET).calling(lambda: f"{script_name(obj)}.__getstate__()"):
            return obj.__getstate__(), flatten_error
    return None, flatten_error


def deepcopy_differences(obj: torch.ScriptObject, tracer: Tracer | None = None,
                         sides: tuple[str, str] = ("original", "deep copy"),
                         copying: Callable[[], ContextManager] = contextlib.nullcontext) -> tuple[Any, list[str]]:
    """``(state, differences)``: ``obj``'s :func:`comparable_state` and how that of ``copy.deepcopy(obj)`` (through
    ``def_pickle``: ``__getstate__``, then ``__setstate__``, as ``FakeScriptObject.__init__`` in
    ``torch/_library/fake_class_registry.py`` and a saved program copy it) differs from it, as
    :func:`conformance.engine.compare.flat_state_differences` lines (``sides`` name the two). ``copying()``: the
    context the copy itself is made in (the caller's tracer label). Raises what the copy or reading a state
    raises."""
    before = comparable_state(obj, tracer)[0]
    with copying():
        clone = copy.deepcopy(obj)
    # The copy stays alive until its state is compared: a state may hold tensors whose memory the object owns (read
    # from a copy that was already freed, quantized::EmbeddingPackedParamsBase's gave other values).
    copied = comparable_state(clone, tracer)[0]
    return before, flat_state_differences(before, copied, "state", sides)


def state_key(value: Any) -> Any:
    """A hashable key of a state value: tensors become (metadata, values); containers become tuples."""
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            data = None
        elif value.is_quantized:  # tolist() raises "load_scalar: invalid type": the integers and the quantizer
            data = (tuple(value.detach().cpu().int_repr().reshape(-1).tolist()), _quantizer_key(value))
        else:
            data = tuple(value.detach().cpu().reshape(-1).tolist())
        return ("T", tuple(value.shape), str(value.dtype), tuple(value.stride()), str(value.device), data)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(state_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((state_key(k), state_key(v)) for k, v in value.items()))
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, torch.ScriptObject):
        return ("obj", value._type().qualified_name(), state_key(read_state(value)))
    return (type(value).__name__, value)


def _quantizer_key(value: torch.Tensor) -> tuple:
    """The quantization parameters of a quantized tensor (its scheme, and scale and zero point per tensor or per
    channel), as a hashable key."""
    scheme = value.qscheme()
    if scheme in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        return (str(scheme), value.q_scale(), value.q_zero_point())
    return (str(scheme), tuple(value.q_per_channel_scales().tolist()),
            tuple(value.q_per_channel_zero_points().tolist()), value.q_per_channel_axis())


def build_examples(info: ClassInfo, factories: list[Factory] = (), resolver=None, derive: bool = True,
                   arguments=None, tracer: Tracer | None = None) -> ExampleSet:
    """Build the examples of ``info``: from ``factories`` (registered with :func:`examples`) if any, else from
    generated constructor calls, plus (unless ``derive`` is false) states reached by applying each
    state-changing method twice to the first example. ``resolver`` gives values for arguments typed as a
    TorchBind class (:data:`conformance.engine.values.ClassResolver`). ``arguments`` (the class's
    :class:`~conformance.engine.arguments.ArgumentSource`) gives the constructor's and the state-changing calls'
    arguments where the adopter registered strategies (``"__init__"`` for the constructor); methods it excludes are
    never called. ``tracer``: where the calls are reported (each example keeps it for its own builds).

    Constructor argument sets the C++ constructor rejects are skipped (kept in ``rejected``). Examples whose
    state (:func:`read_state`) duplicates an earlier one are dropped. Never raises for user-code errors: those
    end up in ``rejected`` or ``problem``.
    """
    tracer = tracer or Tracer()
    rejected: list[tuple[str, str]] = []
    lost: list[tuple[str, str]] = []
    bases: list[Example] = []
    seen: set[Any] = set()
    flatten_errors: list[str] = []
    # Objects built whose __obj_flatten__ raised: a state flatten cannot take is no example while flatten works on
    # others (FlattenDup's view(-1) of a transposed tensor); where it works on none (torch's aten::OpaqueObject
    # raises by design) they are the examples, told apart by __getstate__, and the flatten check reports the error.
    unflattenable: list[tuple[Example, Any]] = []  # (example, its __getstate__ key)

    def admit(ex: Example) -> bool:
        try:
            obj = ex.build()
            state, flatten_error = comparable_state(obj, tracer)
            key = None if state is None else state_key(state)
        except Exception as exc:  # noqa: BLE001 - user code may raise anything
            rejected.append(("\n".join(ex.code()), exception_line(exc)))
            if isinstance(exc, CallAbandoned):
                lost.append(("\n".join(ex.code()), exc.cause))
            return False
        if flatten_error is not None:  # kept aside: used only if __obj_flatten__ works on no object at all
            flatten_errors.append(exception_line(flatten_error, limit=300))
            rejected.append(("\n".join(ex.code()), f"__obj_flatten__ raised {flatten_errors[-1]}"))
            if key is None or all(key != k for _, k in unflattenable):  # one per __getstate__ state
                unflattenable.append((ex, key))
            return False
        if key is not None and key in seen:
            return False
        seen.add(key)
        return True

    def give_up(problem: str) -> ExampleSet:
        return ExampleSet([], rejected, problem, lost, flatten_errors[0] if flatten_errors else None)

    if factories:
        for factory in factories:
            name = getattr(factory, "__name__", "factory")
            try:
                with tracer.calling(f"the example factory {name}() of {info.qualname}"):
                    objs = list(factory())
            except Exception as exc:  # noqa: BLE001
                if isinstance(exc, CallAbandoned):
                    lost.append((f"{name}()", exc.cause))
                return give_up(f"example factory {name}() raised {exception_line(exc)}")
            for i, obj in enumerate(objs):
                if not isinstance(obj, torch.ScriptObject) or obj._type().qualified_name() != info.script_qualname:
                    return give_up(f"example factory {name}() returned {type(obj).__name__} at index {i}, "
                                   f"not a {info.qualname}")
                ex = Example(info, factory=factory, factory_index=i, tracer=tracer)
                if admit(ex):
                    bases.append(ex)
    elif not info.constructors:
        given_up = give_up(f"{info.qualname} has no constructor usable from Python (no torch::init binding), so the "
                           "plugin has nothing to build its objects from")
        given_up.no_constructor = True
        return given_up
    else:
        for ctor in info.constructors:
            try:
                sets = _sets(arguments, "__init__", ctor, MAX_BASE, resolver)
            except (UnsupportedType, NotApplicable) as exc:
                rejected.append((str(ctor), str(exc)))
                continue
            for args in sets:
                if len(bases) >= MAX_BASE:
                    break
                ex = Example(info, ctor=args, tracer=tracer)
                if admit(ex):
                    bases.append(ex)
    if not bases and unflattenable:
        return _unflattenable(unflattenable, rejected, lost, flatten_errors[0])
    if not bases:
        why = "; ".join(f"{code} -> {err}" for code, err in rejected[:4])
        return give_up(f"could not build any {info.qualname} object: {why or 'no candidates'}. "
                       "Register example objects with @conformance.examples")
    derived = _derive_states(info, bases[0], admit, resolver, arguments) if derive else []
    return ExampleSet(bases + derived, rejected, lost=lost)


def _unflattenable(built: list[tuple[Example, Any]], rejected, lost, flatten_error: str) -> ExampleSet:
    """The examples of a class whose ``__obj_flatten__`` raised on every object built: those objects (one per
    ``__getstate__`` state, told apart when they were admitted), with the error as ``flatten_error``."""
    flattened = [r for r in rejected if not r[1].startswith("__obj_flatten__ raised ")]
    return ExampleSet([ex for ex, _ in built], flattened, lost=lost, flatten_error=flatten_error)


def _sets(arguments, key: str, schema, limit: int, resolver, obj=None, state: str = "") -> list[ArgumentSet]:
    """Argument sets for ``key`` from the class's argument source when there is one, else generated. Raises
    :class:`UnsupportedType` / :class:`~conformance.core.results.NotApplicable` (an excluded method included)."""
    if arguments is None:
        return argument_sets(schema, limit=limit, resolver=resolver)
    return arguments.fixed(key, schema, 0, limit, obj, state)


def _derive_states(info: ClassInfo, base: Example, admit, resolver, arguments=None) -> list[Example]:
    """Examples reached from ``base`` by calling one state-changing method twice (e.g. two pushes), with
    arguments from the argument source (methods the adopter excluded are never called)."""
    if not (info.has_flatten or info.pickles):
        return []
    out: list[Example] = []
    for method in info.user_methods:
        if len(out) >= MAX_DERIVED or method.startswith("__") or method == "tracing_mode":
            continue
        try:
            obj = base.build() if arguments is not None and arguments.depends_on_object(method) else None
            sets = _sets(arguments, method, info.methods[method], 3, resolver, obj, base.label)
        except Exception:  # noqa: BLE001 - no arguments (unsupported type, excluded) or an object that fails
            continue
        if not sets or not sets[0].args and not sets[0].kwargs:
            continue  # nullary methods (pop, reset) rarely grow an object
        callee = Callee.method(method)
        ex = dataclasses.replace(base, steps=base.steps + (Call(callee, sets[0]), Call(callee, sets[-1])))
        if admit(ex):
            out.append(ex)
    return out
