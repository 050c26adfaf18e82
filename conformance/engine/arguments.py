"""The one argument source: the arguments every caller passes to a method or custom op of a class.

Every place that calls into a class with arguments — the per-call checks (``agreement``, ``return_type``,
``custom_op``), the ``flatten`` aliasing probe, the example states derived by method calls, the differential
test's planning and sequences, the coverage matrix's programs, the scaffold's observation — takes its arguments
from here, through :class:`ArgumentSource` (one per class, ``ClassContext.arguments``):

* by default, arguments generated from the schema types: a small fixed list for deterministic callers
  (:func:`conformance.engine.values.argument_sets`), hypothesis strategies for the differential test
  (:func:`value_strategy`);
* where the adopter registered an override with :func:`conformance.strategy` (per method or op, per argument or the whole
  argument list, optionally depending on the object it is called on), the same strategies for every caller:
  deterministic callers draw a small fixed set from them, seeded by the class, the callee and the object's state,
  so every run draws the same arguments (:meth:`ArgumentSource.fixed`);
* a method or op whose override returns ``None`` (``conformance.strategy("ns::Cls", "m")(lambda: None)``) is never
  called by anything: callers get :class:`Excluded` (a :class:`~conformance.core.results.NotApplicable`), so its
  call-based items skip saying so.

Every drawn value is a :class:`~conformance.engine.values.Value` (Python source), so that any call can be printed
verbatim in a reproducer script.
"""

from __future__ import annotations

import ast
import inspect
import math
import typing
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .jit_types import annotation_type
from ..core.results import NotApplicable
from ..core.registry import Registry
from .type_strategies import tensor_strategy, value_strategy
from .values import ArgumentSet, UnsupportedType, Value, argument_sets
from ..core.results import RegistrationError

__all__ = ["value_strategy", "tensor_strategy", "ArgumentSource", "Excluded", "takes_object", "draw_fixed",
           "EMPTY", "TEARDOWN_WORDS", "tears_down"]

# ----- user strategy overrides -------------------------------------------------------------------------------

StrategyFactory = Callable[..., "SearchStrategy | None"]


def takes_object(factory) -> bool:
    """Whether a registered factory wants the object its arguments are for (it has a required positional
    parameter)."""
    if factory is None or isinstance(factory, SearchStrategy):
        return False
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in params)


def _resolve_override(factory, obj: Any = None) -> SearchStrategy | None:
    """The strategy a registered factory gives (for ``obj`` when it takes the object); ``None`` excludes."""
    if factory is None or isinstance(factory, SearchStrategy):
        return factory
    out = factory(obj) if takes_object(factory) else factory()
    if out is not None and not isinstance(out, SearchStrategy):
        raise RegistrationError(
            f"strategy factory {getattr(factory, '__name__', factory)!r} returned "
            f"{type(out).__name__}, not a hypothesis strategy (or None)")
    return out


def _as_value(x: Any) -> Value:
    """A drawn override value as a :class:`Value` (see :func:`conformance.strategy` for the accepted forms)."""
    if isinstance(x, Value):
        return x
    if isinstance(x, str):
        return Value(x)
    if x is None or isinstance(x, (bool, int)):
        return Value(repr(x))
    if isinstance(x, float):
        if math.isnan(x):
            return Value("math.nan")
        if math.isinf(x):
            return Value("math.inf" if x > 0 else "-math.inf")
        return Value(repr(x))
    raise RegistrationError(
        f"a strategy override drew {type(x).__name__} {x!r}; draw Python source (str) or a "
        "conformance.engine.values.Value so the reproducer can print it")


def _as_argument_set(x: Any) -> ArgumentSet:
    """A drawn whole-call override as an :class:`ArgumentSet`."""
    if isinstance(x, ArgumentSet):
        return x
    if isinstance(x, dict):
        return ArgumentSet((), tuple((k, _as_value(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return ArgumentSet(tuple(_as_value(v) for v in x))
    if isinstance(x, str):
        try:
            call = ast.parse(f"f({x})", mode="eval").body
        except SyntaxError as exc:
            raise RegistrationError(f"a whole-method strategy override drew {x!r}, not an argument list") from exc
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            raise RegistrationError(f"a whole-method strategy override drew {x!r}: no *args / **kwargs, please")
        return ArgumentSet(tuple(Value(ast.unparse(a)) for a in call.args),
                           tuple((k.arg, Value(ast.unparse(k.value))) for k in call.keywords))
    raise RegistrationError(
        f"a whole-method strategy override drew {type(x).__name__} {x!r}; draw source text, a "
        "list, a dict or an ArgumentSet")


# ----- whole argument lists --------------------------------------------------------------------------------

#: The argument list of a call without arguments.
EMPTY = ArgumentSet(())


class Excluded(NotApplicable):
    """The adopter excluded a method or op (``conformance.strategy(qualname, name)(lambda: None)``): nothing calls
    it. Raised by :class:`ArgumentSource` to callers, whose items skip with the message."""


#: The first word of a method name (``abort``, ``destroy_process_group``, ``close``) that says the call tears down
#: state beyond the object: a process group's world (torch 2.15's ``DeviceMesh.abort()`` empties the world's
#: process-group map, and every later ``init_device_mesh`` in the process fails), a handle other objects share.
#: The checks never call such a method on their own arguments; an adopter who gives its arguments
#: (``conformance.strategy``) has it called.
TEARDOWN_WORDS = frozenset({"abort", "shutdown", "destroy", "teardown", "terminate", "close", "finalize",
                            "dispose", "kill"})


def tears_down(method: str) -> bool:
    """Whether ``method``'s name (leading underscores ignored) starts with a word of :data:`TEARDOWN_WORDS`."""
    return method.lstrip("_").split("_", 1)[0].lower() in TEARDOWN_WORDS


def draw_fixed(strat: SearchStrategy, count: int, digest: str) -> list[Any]:
    """Up to ``count`` distinct values drawn from ``strat``, the same on every run: hypothesis's generate phase
    seeded from ``digest`` (``hypothesis.seed``, which no ``--hypothesis-seed`` or profile overrides), no example
    database. Distinct by their ``code()`` (an :class:`ArgumentSet`) or ``repr``. Empty when the strategy draws
    nothing (``st.nothing()``, or every draw filtered out). Raises what drawing raises (a user strategy's
    errors)."""
    import hashlib

    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis.errors import Unsatisfiable

    if strat.is_empty:
        return []
    out: dict[str, Any] = {}

    def collect(value):
        key = value.code() if isinstance(value, ArgumentSet) else repr(value)
        if len(out) < count:
            out.setdefault(key, value)

    test = settings(database=None, max_examples=max(4 * count, 10), deadline=None, phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck), print_blob=False)(collect)
    number = int.from_bytes(hashlib.sha256(f"torchbind-arguments:{digest}".encode()).digest()[:8], "big")
    try:
        seed(number)(given(strat)(test))()
    except Unsatisfiable:
        pass
    return list(out.values())


def _argument_sets(parts: list[SearchStrategy[Value]], names: list[tuple[str, bool]]
                   ) -> SearchStrategy[ArgumentSet]:
    """One :class:`ArgumentSet` per draw of ``parts``, the values of keyword-only names (``(name, kwarg_only)``)
    passed by keyword."""
    def build(values) -> ArgumentSet:
        return ArgumentSet(tuple(v for v, (_, kw) in zip(values, names) if not kw),
                           tuple((n, v) for v, (n, kw) in zip(values, names) if kw))

    return st.tuples(*parts).map(build) if parts else st.just(EMPTY)


class ArgumentSource:
    """Where every caller gets the arguments of one class's methods and ops (see the module docstring).

    ``qualname``: ``ns::Cls``; ``registry``: the registry that holds the overrides; ``resolver``: values
    for arguments typed as a TorchBind class (:data:`conformance.engine.values.ClassResolver`). A callee is named by
    ``key``: a method name or an op's ``ns::op`` name, as in :func:`conformance.strategy`.
    """

    def __init__(self, qualname: str, registry: Registry, resolver=None):
        self.qualname, self.registry, self.resolver = qualname, registry, resolver
        self._fixed: dict[tuple[str, str, int], list[ArgumentSet]] = {}

    @property
    def overrides(self) -> dict[tuple[str, str | int | None], Any]:
        return self.registry.strategies(self.qualname)

    def overridden(self, key: str) -> bool:
        """Whether the adopter registered any override for ``key``."""
        return any(m == key for m, _a in self.overrides)

    def depends_on_object(self, key: str) -> bool:
        """Whether some override of ``key`` is a factory that takes the object."""
        return any(m == key and takes_object(f) for (m, _a), f in self.overrides.items())

    def excluded(self, key: str) -> bool:
        """Whether the adopter excluded ``key`` (a whole-method factory returning ``None``)."""
        factory = self.overrides.get((key, None), ...)
        if factory is ...:
            return False
        if factory is None:
            return True
        if takes_object(factory):
            return False  # decided per object: st.nothing() there
        return _resolve_override(factory) is None

    def hint(self, key: str) -> str:
        """What the adopter can give when no call of ``key`` was compared (C++ rejected every argument set)."""
        return (f"Give arguments the class accepts with @conformance.strategy({self.qualname!r}, {key!r}, ...) (or "
                "example objects in the states it needs with @conformance.examples)")

    def exclusion(self, key: str) -> Excluded:
        return Excluded(f"{key} is excluded by conformance.strategy({self.qualname!r}, {key!r}) returning None: "
                        "nothing calls it")

    def strategy(self, key: str, schema: torch.FunctionSchema, skip: int, obj: Any = None, wide: bool = False
                 ) -> SearchStrategy | None:
        """The :class:`ArgumentSet` strategy for ``key``'s ``schema`` (``skip``: the position of the object, 0
        for a method's ``self``), honouring overrides; ``obj`` is handed to factories that take the object;
        ``wide``: ints from the search's wider range too (:func:`conformance.engine.type_strategies.value_strategy`).
        ``None`` when the adopter excluded it. Raises :class:`~conformance.engine.values.UnsupportedType` for an
        argument type without a generator, ``ValueError`` for an override naming an argument the schema lacks."""
        overrides = self.overrides
        if (key, None) in overrides:
            whole = _resolve_override(overrides[(key, None)], obj)
            return None if whole is None else whole.map(_as_argument_set)
        arguments = [a for i, a in enumerate(schema.arguments) if i != skip]
        # An op's positions count its arguments that are not objects of the class: the plugin gives every object
        # (an op taking two objects has both placed by the caller), so position 0 is always the first value the
        # adopter draws. A method's count every argument after self (another object of the class included).
        own = str(schema.arguments[skip].type) if "::" in key and 0 <= skip < len(schema.arguments) else None
        numbered = [a.name for a in arguments if own is None or str(a.type) != own]
        position = {name: i for i, name in enumerate(numbered)}
        known = {a.name for a in arguments} | set(range(len(numbered)))
        for (m, a) in overrides:
            if m == key and a is not None and a not in known:
                raise RegistrationError(
                    f"conformance.strategy({self.qualname!r}, {key!r}, arg={a!r}): no such argument "
                    f"in {schema}")
        parts, names = [], []
        for a in arguments:
            factory = overrides.get((key, a.name), overrides.get((key, position.get(a.name, -1))))
            if factory is not None:
                custom = _resolve_override(factory, obj)
                if custom is None:
                    raise RegistrationError(
                        f"conformance.strategy({self.qualname!r}, {key!r}, arg={a.name!r}) returned "
                        "None; exclude a whole method with arg=None")
                parts.append(custom.map(_as_value))
            else:
                parts.append(value_strategy(a.type, self.resolver, wide))
            names.append((a.name, a.kwarg_only))

        return _argument_sets(parts, names)

    def for_signature(self, key: str, func: Callable, what: str) -> SearchStrategy[ArgumentSet] | None:
        """The :class:`ArgumentSet` strategy for a Python callable (a Python custom class's ``__init__`` or
        method, ``self`` left out), named ``key`` as in :func:`conformance.strategy`, honouring overrides like
        :meth:`strategy`; without one, each parameter is drawn from its annotation
        (:func:`conformance.engine.jit_types.annotation_type`, then :func:`value_strategy`); a parameter with a default
        and no annotation keeps its default. ``None`` when the adopter excluded ``key``. Raises :class:`~conformance.core.results.NotApplicable` for a parameter that
        cannot be generated (naming it, ``what`` naming the callee, and the override that would help)."""
        overrides = self.overrides
        if (key, None) in overrides:
            whole = _resolve_override(overrides[(key, None)])
            return None if whole is None else whole.map(_as_argument_set)
        try:
            params = [p for p in inspect.signature(func).parameters.values()][1:]
        except (TypeError, ValueError):  # a C++ (pybind11) function: no Python signature
            raise NotApplicable(f"{what} has no Python signature (a C++ binding), so its arguments cannot be "
                                f"generated; give them with conformance.strategy({self.qualname!r}, {key!r}, ...)") from None
        try:
            hints = typing.get_type_hints(func)
        except Exception:  # noqa: BLE001 - unresolvable annotations: as written
            hints = dict(getattr(func, "__annotations__", {}))
        parts, names = [], []
        for i, p in enumerate(params):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            factory = overrides.get((key, p.name), overrides.get((key, i)))
            if factory is not None:
                parts.append(_resolve_override(factory).map(_as_value))
            elif p.name in hints:
                try:
                    typ = annotation_type(hints[p.name])
                    if typ is None:
                        raise UnsupportedType(f"{hints[p.name]!r}")
                    parts.append(value_strategy(typ, self.resolver))
                except UnsupportedType as exc:
                    raise NotApplicable(f"cannot generate {what}'s parameter {p.name!r} ({exc}); give it with "
                                        f"conformance.strategy({self.qualname!r}, {key!r}, arg={p.name!r})") from None
            elif p.default is not p.empty:
                continue
            else:
                raise NotApplicable(f"{what}'s parameter {p.name!r} has no annotation, so it cannot be generated; "
                                    f"give it with conformance.strategy({self.qualname!r}, {key!r}, arg={p.name!r})")
            names.append((p.name, p.kind is p.KEYWORD_ONLY))

        return _argument_sets(parts, names)

    def fixed(self, key: str, schema: torch.FunctionSchema, skip: int, limit: int = 3,
              obj: Any = None, state: str = "") -> list[ArgumentSet]:
        """The argument sets deterministic callers use for ``key``: without an override, the plugin's generated
        sets (:func:`conformance.engine.values.argument_sets`, the most ordinary first); with one, up to ``limit`` sets
        drawn from :meth:`strategy` by :func:`draw_fixed`, the same on every run. ``obj`` is the object the calls
        are for (needed by factories that take it; ``state`` names its state, for the seed and the cache).

        Raises :class:`Excluded` for an excluded callee, :class:`~conformance.core.results.NotApplicable` for an
        argument type without a generator (pointing at :func:`conformance.strategy`)."""
        if self.excluded(key):
            raise self.exclusion(key)
        try:
            if not self.overridden(key):
                return argument_sets(schema, skip=(skip,), limit=limit, resolver=self.resolver)
            cache_key = (key, state if self.depends_on_object(key) else "", limit)
            if cache_key not in self._fixed:
                strat = self.strategy(key, schema, skip, obj)
                if strat is None:
                    raise self.exclusion(key)
                self._fixed[cache_key] = draw_fixed(strat, limit, f"{self.qualname}:{key}:{cache_key[1]}")
            return self._fixed[cache_key]
        except UnsupportedType as exc:
            raise NotApplicable(f"cannot generate arguments for {schema}: {exc}; give them with "
                                f"conformance.strategy({self.qualname!r}, {key!r}, ...)") from exc
