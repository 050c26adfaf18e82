"""Differential testing: drive a real TorchBind object and its fake side by side through call sequences.

A fake class can agree with the C++ class on every single call from a fresh object and still drift from it over a
sequence of calls (a ``push`` that never evicts, a ``pop`` that does not remove). This module finds such drifts
with a hypothesis stateful test — the equivalent of a ``RuleBasedStateMachine`` whose ``initialize`` rule picks an
example object and whose rules are the class's methods, written as a drawn list of steps (see :func:`_program`
for why):

* each sequence starts from one example object (:mod:`conformance.example_objects`), builds it twice and fakifies
  one copy **once** with ``maybe_to_fake_obj`` under a ``FakeTensorMode`` (as dynamo / export do before
  tracing); from then on the real ``ScriptObject`` and the ``FakeScriptObject`` evolve side by side, each by its
  own methods (the fake's run under the mode, the ``call_torchbind`` path);
* the rules are the class's methods that the fake class defines and the custom ops that take the class and can
  run on a fakified object, with arguments drawn from strategies derived from the schema types
  (:func:`value_strategy`), or from the user's overrides (:func:`strategy`);
* every step compares the two sides: raising on one side only, tensor metadata (shape, dtype, device, strides,
  requires_grad), non-tensor results by value (:func:`conformance.compare.compare_results`), and aliasing (a
  returned tensor shares storage with an argument or an earlier result on one side only);
* after every step the *observers* — methods callable without arguments that leave the C++ object's state
  (``__obj_flatten__``) unchanged, e.g. ``size()`` — run on both sides and must agree; after every state-changing
  step a fresh fake is also made from the C++ object's current state (its ``__obj_flatten__``, through
  ``maybe_to_fake_obj``) and must agree with the evolved fake on every observer. That is how a fake that forgets
  to evict or to remove is caught;
* hypothesis shrinks a failing sequence to a minimal one, which is printed as a standalone script
  (:func:`repro_script`).

Settings: ``max_examples`` is ``conformance.settings.SETTINGS.examples`` (``--torchbind-examples``). The base
hypothesis settings are the profile the user loaded (``--hypothesis-profile``), else :data:`CI_PROFILE` when the
environment variable ``CI`` is set (or hypothesis detected a CI), else :data:`DEV_PROFILE`; ``--hypothesis-seed``
seeds the run. ``deadline`` is always off: timing is not what this test checks.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import logging
import math
import os
import string
import time
from collections.abc import Callable
from typing import Any

import hypothesis
import hypothesis.core
import torch
import torch.utils._pytree as pytree
from hypothesis import HealthCheck, Phase, given, settings as Settings, strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.strategies import SearchStrategy

from .checks.agreement import disagreement
from .compare import describe
from .context import (CallResult, ClassContext, defined_on_fake, _extra_defs, new_fake_mode, quiet_torch_logs,
                      resolve_class_values)
from .example_objects import Example, read_state, state_key
from .isolation import calling
from .settings import SETTINGS
from .settings import Settings as RunSettings
from .values import ArgumentSet, UnsupportedType, Value, candidates

__all__ = [
    "DEFAULT_EXAMPLES",
    "CI_PROFILE",
    "DEV_PROFILE",
    "STEP_COUNT",
    "strategy",
    "registered_strategies",
    "value_strategy",
    "tensor_strategy",
    "hypothesis_settings",
    "Rule",
    "Plan",
    "plan_for",
    "Drift",
    "Run",
    "run_differential",
    "repro_script",
]

#: The default of ``--torchbind-examples`` (random call sequences per class, after the explicit two-call ones):
#: 1–5 s per sample class on 2 CPU cores. Without the explicit sequences, the random search alone caught the
#: broken sample fakes ``queue_pop_keeps`` and ``config_add_no_evict`` in 40 of 40 seeds, and a pop-on-emptied
#: queue bug that takes three calls to show (push, pop, pop) in 77 of 80.
DEFAULT_EXAMPLES = RunSettings.examples  # 100, the default of --torchbind-examples
#: Hypothesis profile for CI: derandomized (the same sequences on every run), no example database.
CI_PROFILE = "torchbind-ci"
#: Hypothesis profile for local runs: random, with hypothesis's example database (failures are replayed first).
DEV_PROFILE = "torchbind-dev"
#: At most this many steps (method / op calls) per sequence in both profiles (their ``stateful_step_count``; a
#: profile of the user's sets its own). Drifts show within a few calls, and the examples already hold non-empty
#: states, so short sequences buy more distinct sequences per second.
STEP_COUNT = 15

_OUR_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
# Both derive from hypothesis's own "default" profile: a profile registered without a parent inherits the profile
# current at import time, which on a CI machine is hypothesis's "ci" (derandomized, no database).
_DEFAULT = Settings.get_profile("default")
Settings.register_profile(CI_PROFILE, parent=_DEFAULT, derandomize=True, database=None, deadline=None, print_blob=False,
                          stateful_step_count=STEP_COUNT, phases=_OUR_PHASES,
                          suppress_health_check=[HealthCheck.too_slow])
Settings.register_profile(DEV_PROFILE, parent=_DEFAULT, deadline=None, stateful_step_count=STEP_COUNT, phases=_OUR_PHASES,
                          suppress_health_check=[HealthCheck.too_slow])


def hypothesis_settings(examples: int | None = None, base: Settings | None = None) -> Settings:
    """The hypothesis ``settings`` for a differential run.

    ``base`` defaults to the profile the user loaded (``--hypothesis-profile``); when none was chosen (hypothesis's
    ``default``, or the ``ci`` profile hypothesis loads by itself on CI) it is :data:`CI_PROFILE` if the environment
    variable ``CI`` is set or hypothesis detected a CI, else :data:`DEV_PROFILE`. On top of it: ``max_examples`` =
    ``examples`` (default ``SETTINGS.examples``, i.e. ``--torchbind-examples``), ``deadline=None``, and the
    ``too_slow`` health check suppressed. Raises ``hypothesis.errors.InvalidArgument`` for ``examples < 1``.
    """
    if base is None:
        current = Settings.get_current_profile_name()
        if current in ("default", "ci"):
            ci = current == "ci" or bool(os.environ.get("CI"))
            base = Settings.get_profile(CI_PROFILE if ci else DEV_PROFILE)
        else:
            base = Settings.default
    n = SETTINGS.examples if examples is None else examples
    suppressed = tuple(dict.fromkeys((*base.suppress_health_check, HealthCheck.too_slow)))
    return Settings(base, max_examples=n, deadline=None, suppress_health_check=suppressed)


# ----- user strategy overrides -------------------------------------------------------------------------------

StrategyFactory = Callable[[], "SearchStrategy | None"]
_OVERRIDES: dict[tuple[str, str, str | int | None], StrategyFactory | SearchStrategy | None] = {}


def strategy(qualname: str, method: str, arg: str | int | None = None):
    """Override how the differential test draws the arguments of one method (or custom op) of a TorchBind class.

    Use as a decorator on a zero-argument factory returning a hypothesis strategy (a strategy object may be passed
    instead of a factory)::

        import conformance
        from hypothesis import strategies as st

        @conformance.strategy("mylib::Tokenizer", "encode", arg="text")   # one argument, by schema name
        def texts():
            return st.sampled_from(["'hello'", "'a b'"])                 # Python source of each value

        @conformance.strategy("mylib::Ring", "resize")                    # the whole argument list
        def sizes():
            return st.integers(1, 8).map(lambda n: f"{n}, keep=True")

        conformance.strategy("mylib::Ring", "drain")(lambda: None)        # do not call drain at all

    ``qualname`` is ``"ns::Cls"``. ``method`` is a method name, or the qualified name ``"ns::op"`` of a custom op
    that takes the class. ``arg`` picks one argument by its schema name (``"x"``, or ``"_1"`` where the binding
    does not name it) or by position (``0`` is the first argument after ``self``; for an op, the first argument
    other than the object).

    Drawn values are **Python source** evaluated with ``torch`` and ``math`` in scope, so every argument can be
    printed verbatim in the reproducer: a ``str`` is source (``"torch.ones(3)"``; a string *value* is
    ``"'abc'"``, e.g. ``st.text().map(repr)``), a :class:`conformance.values.Value` is taken as is, and ``int``,
    ``float``, ``bool`` and ``None`` are written with ``repr``. For a whole-method override a drawn value is the
    argument list: source text (``"torch.ones(3), alpha=2.0"``), a ``list``/``tuple`` of positional values, a
    ``dict`` of keyword values, or an :class:`~conformance.values.ArgumentSet`. A factory returning ``None``
    excludes the method from the test (neither called as a step nor used as an observer).

    Returns the factory unchanged. Raises ``ValueError`` when ``qualname`` is not ``ns::Cls``.
    """
    if qualname.count("::") != 1 or not all(qualname.split("::")):
        raise ValueError(f"conformance.strategy({qualname!r}, ...): expected 'namespace::Class'")

    def register(factory):
        _OVERRIDES[(qualname, method, arg)] = factory
        return factory

    return register


def registered_strategies(qualname: str) -> dict[tuple[str, str | int | None], Any]:
    """``{(method, arg): factory}`` registered with :func:`strategy` for ``qualname``."""
    return {(m, a): f for (q, m, a), f in _OVERRIDES.items() if q == qualname}


def _resolve_override(factory) -> SearchStrategy | None:
    if factory is None or isinstance(factory, SearchStrategy):
        return factory
    out = factory()
    if out is not None and not isinstance(out, SearchStrategy):
        raise TypeError(f"strategy factory {getattr(factory, '__name__', factory)!r} returned "
                        f"{type(out).__name__}, not a hypothesis strategy (or None)")
    return out


def _as_value(x: Any) -> Value:
    """A drawn override value as a :class:`Value` (see :func:`strategy` for the accepted forms)."""
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
    raise TypeError(f"a strategy override drew {type(x).__name__} {x!r}; draw Python source (str) or a "
                    "conformance.values.Value so the reproducer can print it")


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
            raise ValueError(f"a whole-method strategy override drew {x!r}, not an argument list") from exc
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            raise ValueError(f"a whole-method strategy override drew {x!r}: no *args / **kwargs, please")
        return ArgumentSet(tuple(Value(ast.unparse(a)) for a in call.args),
                           tuple((k.arg, Value(ast.unparse(k.value))) for k in call.keywords))
    raise TypeError(f"a whole-method strategy override drew {type(x).__name__} {x!r}; draw source text, a "
                    "list, a dict or an ArgumentSet")


# ----- strategies derived from schema types ----------------------------------------------------------------

_DTYPES = ("float32", "float64", "int64", "bool")
_LAYOUTS = ("contiguous", "transposed", "sliced")


def _tensor_code(spec: tuple[tuple[int, ...], str, str]) -> str:
    """Python source for a tensor of ``shape`` / ``dtype`` / layout, with deterministic values."""
    shape, dtype, layout = spec
    if not shape:
        literal = {"float32": "1.5", "float64": "1.5, dtype=torch.float64", "int64": "3", "bool": "True"}[dtype]
        return f"torch.tensor({literal})"
    if layout == "transposed" and len(shape) < 2:
        layout = "contiguous"
    made = list(shape)
    if layout == "transposed":
        made[-2], made[-1] = made[-1], made[-2]
    elif layout == "sliced":
        made[-1] *= 2
    n = math.prod(made)
    if dtype == "bool":
        base = f"(torch.arange({n}) % 2 == 0)"
    elif dtype == "int64":
        base = f"torch.arange({n})"
    else:
        base = f"torch.arange({n}, dtype=torch.{dtype})"
    if len(made) > 1:
        base += f".reshape({', '.join(map(str, made))})"
    if layout == "transposed":
        base += ".t()" if len(made) == 2 else ".transpose(-2, -1)"
    elif layout == "sliced":
        base += "[::2]" if len(made) == 1 else "[..., ::2]"
    return base


def tensor_strategy() -> SearchStrategy[Value]:
    """Tensors as :class:`Value` source: rank 0–3 with sizes 0–3 (so 0-dim and 0-size tensors occur), dtype
    float32 / float64 / int64 / bool, layout contiguous / transposed / strided slice. Shrinks towards a 0-dim
    float32 tensor.

    No tensor requires grad: ``call_torchbind`` runs a fake method below autograd, so a tensor a fake computes and
    stores never requires grad while the C++ object's does — every fake would differ. Add
    ``.requires_grad_()`` in a :func:`strategy` override to test it anyway.
    """
    spec = st.tuples(st.lists(st.integers(0, 3), max_size=3).map(tuple), st.sampled_from(_DTYPES),
                     st.sampled_from(_LAYOUTS))
    return spec.map(lambda s: Value(_tensor_code(s)))


def _join(template: str, parts) -> Value:
    extra = tuple(e for p in parts for e in p.extra)
    return Value(template.format(", ".join(p.code for p in parts)), extra)


def value_strategy(jit_type: torch._C.Type, resolver=None) -> SearchStrategy[Value]:
    """A hypothesis strategy of :class:`Value` (Python source) for a TorchScript type from a schema.

    ``jit_type`` is a ``torch._C.Type`` (``schema.arguments[i].type``): Tensor (:func:`tensor_strategy`), int
    (-2..8), float (finite, -4..4), bool, str (short, including ``''``), lists (0–3 elements), Optional (``None``
    or a value), tuples, dicts, a TorchBind class (the values ``resolver(qualified_name)`` gives, as in
    :func:`conformance.values.candidates`), and the enum-like scalar types ``candidates`` knows (ScalarType,
    Device, ...). Raises :class:`conformance.values.UnsupportedType` for anything else.
    """
    kind = jit_type.kind()
    if kind == "TensorType":
        return tensor_strategy()
    if kind == "OptionalType":
        return st.one_of(st.just(Value("None")), value_strategy(jit_type.getElementType(), resolver))
    if kind == "ListType":
        inner = value_strategy(jit_type.getElementType(), resolver)
        return st.lists(inner, max_size=3).map(lambda vs: _join("[{}]", vs))
    if kind == "TupleType":
        elems = [value_strategy(t, resolver) for t in jit_type.elements()]
        return st.tuples(*elems).map(lambda vs: _join("({},)" if len(vs) == 1 else "({})", vs))
    if kind == "DictType":
        keys, vals = value_strategy(jit_type.getKeyType(), resolver), value_strategy(jit_type.getValueType(), resolver)
        return st.lists(st.tuples(keys, vals), max_size=2).map(
            lambda kvs: Value("{" + ", ".join(f"{k.code}: {v.code}" for k, v in kvs) + "}",
                              tuple(e for k, v in kvs for e in (*k.extra, *v.extra))))
    text = str(jit_type)
    if kind == "IntType" or text in ("int", "SymInt"):
        return st.integers(-2, 8).map(lambda i: Value(repr(i)))
    if kind == "FloatType" or text == "float":
        return st.floats(-4, 4, allow_nan=False, allow_infinity=False).map(lambda f: Value(repr(f)))
    if kind == "BoolType" or text == "bool":
        return st.sampled_from((Value("False"), Value("True")))
    if kind == "StringType" or text == "str":
        return st.text(alphabet=string.ascii_lowercase[:3] + ":_ ", max_size=4).map(lambda s: Value(repr(s)))
    return st.sampled_from(candidates(jit_type, resolver))  # ClassType, ScalarType, Device, ...; may raise


# ----- the plan: rules and observers ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Rule:
    """One kind of step: a method (``op is None``) or a custom op with the object at argument ``position``.

    ``name`` is the method name or the op's ``ns::op`` name; ``args`` draws :class:`ArgumentSet`s; ``observer``
    is True for methods that never change the C++ object's state on the examples; ``weight`` is how many times
    the rule is offered among the steps (see :func:`_reshapes`); ``ordinary`` is the plugin's first ordinary
    argument set (:meth:`ClassContext.argument_sets`) for the explicit sequences, ``None`` when the user
    overrides the arguments or none can be generated.
    """

    name: str
    args: SearchStrategy
    op: Any = None
    position: int = 0
    observer: bool = False
    weight: int = 1
    ordinary: ArgumentSet | None = None

    @property
    def label(self) -> str:
        """The name in messages and the failure's target: a method name or the op's short name."""
        return self.op.short_name if self.op is not None else self.name

    def code(self, args: ArgumentSet, var: str = "obj") -> str:
        """The call as Python source, e.g. ``obj.push(torch.ones(3))`` or ``torch.ops.ns.op(obj, x)``."""
        if self.op is None:
            return f"{var}.{self.name}({args.code()})"
        pos = [a.code for a in args.args]
        pos.insert(self.position, var)
        parts = pos + [f"{k}={v.code}" for k, v in args.kwargs]
        return f"{self.op_path}({', '.join(parts)})"

    @property
    def op_path(self) -> str:
        ns, rest = self.op.qualname.split("::", 1)
        name, _, overload = rest.partition(".")
        return f"torch.ops.{ns}.{name}.{overload or 'default'}"


@dataclasses.dataclass
class Plan:
    """What a differential run of one class drives: ``examples`` that build and fakify, ``rules`` (the steps),
    ``observer_rules`` (called after every step), and ``notes`` on what is left out and why (methods the fake
    lacks, ops without a fake, unsupported argument types, user exclusions).

    A method without arguments that never changes the C++ object's state (``size()``) is only an observer, not
    also a step: it runs after every step anyway, and leaving it out of the rules makes the state-changing calls
    that expose drifts more frequent in each sequence (unless observers are all there is to call).
    """

    ctx: ClassContext
    examples: list[Example]
    rules: list[Rule]
    observer_rules: list[Rule]
    notes: list[str]

    @property
    def observers(self) -> list[str]:
        """The observers' method names."""
        return [r.name for r in self.observer_rules]


_EMPTY = ArgumentSet(())


def _driven_args(ctx: ClassContext, key: str, schema: torch.FunctionSchema, position: int,
                 notes: list[str]) -> SearchStrategy | None:
    """:func:`_args_strategy` for a method or op (``key``), or ``None`` with the reason appended to ``notes``
    when it is not driven (no generator for an argument type, or excluded by ``conformance.strategy``)."""
    try:
        args = _args_strategy(ctx, ctx.info.qualname, key, schema, position, resolve_class_values)
    except UnsupportedType as exc:
        notes.append(f"{key}: not driven, {exc} (register a strategy with conformance.strategy)")
        return None
    if args is None:
        notes.append(f"{key}: not driven, excluded by conformance.strategy")
    return args


def _args_strategy(ctx: ClassContext, qualname: str, key: str, schema: torch.FunctionSchema,
                   skip: int, resolver) -> SearchStrategy | None:
    """The :class:`ArgumentSet` strategy for a method / op schema (``skip``: the position of the object),
    honouring overrides. ``None`` when the user excluded it. Raises :class:`UnsupportedType`."""
    overrides = registered_strategies(qualname)
    if (key, None) in overrides:
        whole = _resolve_override(overrides[(key, None)])
        return None if whole is None else whole.map(_as_argument_set)
    arguments = [a for i, a in enumerate(schema.arguments) if i != skip]
    known = {a.name for a in arguments} | set(range(len(arguments)))
    for (m, a) in overrides:
        if m == key and a is not None and a not in known:
            raise ValueError(f"conformance.strategy({qualname!r}, {key!r}, arg={a!r}): no such argument in "
                             f"{schema}")
    parts, names = [], []
    for i, a in enumerate(arguments):
        factory = overrides.get((key, a.name), overrides.get((key, i)))
        if factory is not None:
            custom = _resolve_override(factory)
            if custom is None:
                raise ValueError(f"conformance.strategy({qualname!r}, {key!r}, arg={a.name!r}) returned None; "
                                 "exclude a whole method with arg=None")
            parts.append(custom.map(_as_value))
        else:
            parts.append(value_strategy(a.type, resolver))
        names.append((a.name, a.kwarg_only))

    def build(values) -> ArgumentSet:
        pos = tuple(v for v, (_, kw) in zip(values, names) if not kw)
        kw = tuple((n, v) for v, (n, k) in zip(values, names) if k)
        return ArgumentSet(pos, kw)

    if not parts:
        return st.just(_EMPTY)
    return st.tuples(*parts).map(build)


def _callable_without_args(schema: torch.FunctionSchema) -> bool:
    return all(a.has_default_value() for a in schema.arguments[1:])


def _meta_key(value: Any) -> Any:
    """:func:`state_key` without tensor data: what a fake can represent of a state (metadata and non-tensors)."""
    key = state_key(value)

    def strip(k):
        if isinstance(k, tuple) and k and k[0] == "T":
            return k[:-1]
        if isinstance(k, tuple):
            return tuple(strip(x) for x in k)
        return k

    return strip(key)


#: Offer a rule that changes what a fake can represent of the state this many times as often as the others.
RESHAPING_WEIGHT = 3


def _reshapes(ctx: ClassContext, schema: torch.FunctionSchema, call, examples: list[Example], skip: int) -> bool:
    """True when the call changes :func:`_meta_key` of ``read_state(obj)`` on some example with some of the
    plugin's ordinary argument sets (:meth:`ClassContext.argument_sets`): a ``push`` or ``pop`` does, a method
    that only rewrites tensor values (invisible to a fake) or reads the state does not. Such rules are offered
    :data:`RESHAPING_WEIGHT` times as often: a fake can only drift in what it represents, and drifts show after
    a few of these calls (push, pop, pop), which sequences of a handful of uniformly drawn steps rarely contain.
    """
    from .results import NotApplicable

    try:
        sets = ctx.argument_sets(schema, skip=(skip,), limit=2)
    except NotApplicable:
        return False
    for example in examples:
        for args in sets:
            try:
                obj = example.build()
                before = _meta_key(read_state(obj))
                a, kw = args.make()
                with contextlib.suppress(Exception), calling(
                        lambda: f"{ctx.info.qualname}: {schema.name}({args.code()}) on the example object "
                                f"{example.label} (does it change the state? planning the differential test)"):
                    call(obj, a, kw)
                if _meta_key(read_state(obj)) != before:
                    return True
            except Exception:  # noqa: BLE001 - an example that does not build: the examples check reports it
                continue
    return False


def _ordinary(ctx: ClassContext, qualname: str, key: str, schema: torch.FunctionSchema, skip: int
              ) -> ArgumentSet | None:
    """The first ordinary argument set of a call, unless the user overrides its arguments."""
    from .results import NotApplicable

    if any(m == key for m, _a in registered_strategies(qualname)):
        return None
    try:
        sets = ctx.argument_sets(schema, skip=(skip,), limit=1)
    except NotApplicable:
        return None
    return sets[0] if sets else None


def _is_observer(ctx: ClassContext, method: str, examples: list[Example]) -> bool:
    """True when calling ``method()`` never changes ``read_state(obj)`` on any example (mirrors how the
    ``flatten`` check reads state: ``__obj_flatten__``, else ``__getstate__``)."""
    for example in examples:
        obj = example.build()
        before = read_state(obj)
        if before is None:
            return False
        with contextlib.suppress(Exception), calling(
                lambda: f"{ctx.info.qualname}.{method}() on the example object {example.label} (does it only "
                        "read the state? planning the differential test)"):
            getattr(obj, method)()
        if state_key(read_state(obj)) != state_key(before):
            return False
    return True


def _op_runs_on_fakes(op) -> bool:
    """True when the op has a Python fake (``torch.library.register_fake``) or a Python Meta kernel
    (``OpOverload.py_impl(DispatchKey.Meta)``): only those accept a ``FakeScriptObject``."""
    from .checks.custom_op import has_python_fake

    if has_python_fake(op.qualname):
        return True
    try:
        return torch._C.DispatchKey.Meta in op.resolve().py_kernels
    except Exception:  # noqa: BLE001 - unresolvable op: not driven
        return False


def plan_for(ctx: ClassContext) -> Plan:
    """Build the :class:`Plan` of ``ctx``'s class. Raises :class:`~conformance.results.NotApplicable` without a
    fake class, examples, or anything to drive; ``ValueError`` for an override naming an unknown method or
    argument."""
    from .results import NotApplicable

    info = ctx.info
    fake = ctx.require_fake()
    examples = []
    for example in ctx.require_examples():
        try:
            ctx.fakify(example.build(), new_fake_mode())
        except Exception:  # noqa: BLE001 - the roundtrip check reports it
            continue
        examples.append(example)
    if not examples:
        raise NotApplicable(f"no example object of {info.qualname} can be fakified (see {info.test_name}::roundtrip)")
    overrides = registered_strategies(info.qualname)
    op_names = {op.qualname for op in info.ops}
    for (m, _a) in overrides:
        if m not in info.methods and m not in op_names:
            raise ValueError(f"conformance.strategy({info.qualname!r}, {m!r}): {info.qualname} has no method or "
                             f"op taking it named {m!r}; methods: {', '.join(info.user_methods)}; ops (named "
                             f"'ns::op'): {', '.join(sorted(op_names)) or 'none'}")
    rules: list[Rule] = []
    observer_rules: list[Rule] = []
    notes: list[str] = []
    for method in info.user_methods:
        if method == "tracing_mode":
            continue
        if not defined_on_fake(fake, method):
            notes.append(f"{method}: not driven, the fake class does not define it "
                         f"(see {info.test_name}::coverage[{method}])")
            continue
        schema = info.methods[method]
        args = _driven_args(ctx, method, schema, 0, notes)
        if args is None:
            continue
        observer = _callable_without_args(schema) and _is_observer(ctx, method, examples)
        reshaping = not observer and _reshapes(
            ctx, schema, lambda o, a, kw, m=method: getattr(o, m)(*a, **kw), examples, 0)
        made = Rule(method, args, observer=observer, weight=RESHAPING_WEIGHT if reshaping else 1,
                    ordinary=_ordinary(ctx, info.qualname, method, schema, 0))
        if observer:
            observer_rules.append(made)
        if not observer or len(schema.arguments) > 1:
            rules.append(made)
    for op in info.ops:
        if not _op_runs_on_fakes(op):
            notes.append(f"{op.qualname}: not driven, the op has no Python fake "
                         f"(see {info.test_name}::custom_op[{op.short_name}])")
            continue
        position = op.class_args[0]
        args = _driven_args(ctx, op.qualname, op.schema, position, notes)
        if args is None:
            continue
        overload = op.resolve()
        reshaping = _reshapes(ctx, op.schema, lambda o, a, kw, p=position: overload(*a[:p], o, *a[p:], **kw),
                              examples, position)
        rules.append(Rule(op.qualname, args, op=op, position=position, weight=RESHAPING_WEIGHT if reshaping else 1,
                          ordinary=_ordinary(ctx, info.qualname, op.qualname, op.schema, position)))
    if not rules:
        rules = list(observer_rules)  # nothing changes the state: still call the observers repeatedly
    if not rules:
        raise NotApplicable(f"nothing to drive on {info.qualname}: " + "; ".join(notes or ["no methods"]))
    return Plan(ctx, examples, rules, observer_rules, notes)


# ----- one machine run ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Drift:
    """A disagreement found by the machine, with everything needed to report and reproduce it.

    ``steps`` is the sequence run from ``example`` (``(rule, args)`` pairs, the last one where it showed);
    ``phase`` is ``"call"`` (the step itself disagrees), ``"alias"`` (aliasing of the step's result),
    ``"observer"`` (an observer disagrees after the step) or ``"state"`` (a fresh fake of the C++ object's state
    disagrees with the evolved fake); ``observer`` names the observer for the last two.
    """

    example: Example
    steps: list[tuple[Rule, ArgumentSet]]
    observers: list[str]
    mutating_steps: list[bool]
    phase: str
    summary: str
    cpp: str
    fake: str
    details: list[str]
    observer: str | None = None


class _Found(Exception):
    """Raised inside the machine on a disagreement; hypothesis shrinks it. Always raised from one place
    (:meth:`_Machine._fail`) so hypothesis sees a single bug while it shrinks."""

    def __init__(self, drift: Drift):
        super().__init__(drift.summary)
        self.drift = drift


def _significant_strides_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Strides agree on every dimension that matters: one of size > 1, in a tensor with elements.

    Mirrors ``torch._prims_common.check_significant_strides`` ("only compares strides that are meaningful"), the
    rule ``torch._prims.utils.compare_tensor_meta`` applies when ``CrossRefFakeMode`` checks fake against real
    outputs: eager kernels and meta functions legitimately pick different strides for size-0/1 dimensions (the
    C++ ``x * 2`` on a ``[0, 1]`` tensor has strides ``[1, 0]``, its FakeTensor ``[1, 1]``).
    """
    if a.shape != b.shape:
        return False
    if any(s == 0 for s in a.shape if isinstance(s, int)):
        return True
    return all(sa == sb or not (isinstance(sa, int) and isinstance(sb, int)) or size == 1
               for size, sa, sb in zip(a.shape, a.stride(), b.stride()))


def _disagree(real: CallResult, fake: CallResult, where: str = "result") -> tuple[str, list[str]] | None:
    """:func:`conformance.checks.agreement.disagreement` (one-sided raises, :func:`compare_results`), except that
    stride differences in insignificant dimensions (see :func:`_significant_strides_equal`) do not count.
    Differences are named from ``where`` (``result``, ``size()``...)."""
    found = disagreement(real, fake)
    if found is None:
        return None
    summary, diffs = found
    if not (real.raised or fake.raised):
        reals, fakes = dict(_tensor_leaves(real.value, "result")), dict(_tensor_leaves(fake.value, "result"))
        kept = []
        for d in diffs:
            path, sep, _ = d.partition(".stride:")
            if sep and path in reals and path in fakes and _significant_strides_equal(reals[path], fakes[path]):
                continue
            kept.append(d)
        if not kept:
            return None
        diffs = kept
    return summary, [d.replace("result", where, 1) if d.startswith("result") else d for d in diffs]


@contextlib.contextmanager
def _quiet():
    """:func:`conformance.context.quiet_torch_logs`, and FakeTensorMode's own error log ("failed while attempting
    to run meta for ...", logged for every fake op that raises): expected raises are compared, not logged.
    Entered once per run: ``Logger.setLevel`` clears every logger's cache, which costs ~0.1 ms with torch's."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    old = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with quiet_torch_logs():
            yield
    finally:
        logger.setLevel(old)


def _side(result: CallResult) -> str:
    return result.error_text() if result.raised else f"returned {describe(result.value)}"


def _storage(t: torch.Tensor):
    try:
        return t.untyped_storage()._cdata
    except Exception:  # noqa: BLE001 - tensors without a storage (sparse, ...) never alias here
        return None


def _tensor_leaves(value: Any, path: str) -> list[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (list, tuple)):
        return [x for i, v in enumerate(value) for x in _tensor_leaves(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _tensor_leaves(v, f"{path}[{k!r}]")]
    return []


class _Side:
    """One side (the C++ object or its fake) of a run: the object, the mode its calls run under, and the tensors
    it has passed in or got back so far (kept alive, so storages are never reused), for aliasing."""

    def __init__(self, name: str, obj, mode):
        self.name, self.obj, self.mode = name, obj, mode
        self.seen: list[tuple[str, torch.Tensor, Any]] = []
        self.keep: list[Any] = []

    def _args(self, args: ArgumentSet, ctx: ClassContext):
        """Fresh arguments; on a fake side tensors become fake tensors (as :func:`conformance.context.to_fake`)
        and TorchBind objects are fakified, as they would be while tracing."""
        if not args.args and not args.kwargs:
            return [], {}
        a, kw = args.make()
        if self.mode is not None:
            self.keep.append((a, kw))
            mode = self.mode

            def convert(x):
                if isinstance(x, torch.Tensor):
                    return mode.from_tensor(x, static_shapes=True)
                try:
                    return ctx.fakify(x, mode)
                except Exception:  # noqa: BLE001 - not fakifiable (its own fake_class / roundtrip items say why)
                    return x

            a, kw = pytree.tree_map_only((torch.Tensor, torch.ScriptObject), convert, (a, kw))
        return a, kw

    def call(self, rule: Rule, args: ArgumentSet, ctx: ClassContext, step: int | None) -> CallResult:
        """Run one rule with fresh arguments; ``step`` given, remember the argument tensors for aliasing.
        Errors from the call are captured in the :class:`CallResult`; a ``RuntimeError`` when the arguments
        themselves cannot be built (a user override that draws bad source)."""
        try:
            a, kw = self._args(args, ctx)
        except Exception as exc:  # noqa: BLE001 - e.g. a user override drew bad source
            raise RuntimeError(f"building the arguments {args.code()!r} of {rule.label} raised {exc!r}") from exc
        if step is not None:
            names = [f"argument {i}" for i in range(len(a))] + [f"argument {k}" for k in kw]
            for name, value in zip(names, [*a, *kw.values()]):
                for path, t in _tensor_leaves(value, name):
                    self.seen.append((f"{path} of step {step}", t, _storage(t)))
        try:
            with self.mode if self.mode is not None else contextlib.nullcontext(), \
                    calling(lambda: f"{rule.label}({args.code()}) on the {self.name} side"):
                if rule.op is None:
                    value = getattr(self.obj, rule.name)(*a, **kw)
                else:
                    value = rule.op.resolve()(*a[:rule.position], self.obj, *a[rule.position:], **kw)
            return CallResult(value)
        except Exception as exc:  # noqa: BLE001 - user and C++ code may raise anything
            return CallResult(error=exc)

    def aliases(self, result: CallResult, label: str) -> list[tuple[str, tuple[str, ...]]]:
        """For each tensor in the result: ``(path, labels of earlier tensors sharing its storage)``; then
        remember the result's tensors as ``<path> of <label>``."""
        if result.raised:
            return []
        out = []
        leaves = _tensor_leaves(result.value, "result")
        for path, t in leaves:
            key = _storage(t)
            hits = tuple(name for name, _, k in self.seen if key is not None and k == key)
            out.append((path, hits))
            self.seen.append((f"{path} of {label}", t, key))
        return out


class _Machine:
    """One call sequence: the real object and its fake, built from one example and then driven step by step.

    :meth:`start` builds the pair, :meth:`step` runs one :class:`Rule` on both sides and compares; both raise
    :class:`_Found` on a disagreement (always through :meth:`_fail`).
    """

    def __init__(self, plan: Plan, stats: dict):
        self.plan, self.stats = plan, stats
        self.example: Example | None = None
        self.steps: list[tuple[Rule, ArgumentSet]] = []
        self.mutating: list[bool] = []

    def start(self, example: int) -> None:
        plan = self.plan
        self.stats["sequences"] += 1
        self.example = plan.examples[example]
        self.real = _Side("C++", self.example.build(), None)
        mode = new_fake_mode()
        self.fake = _Side("fake", plan.ctx.fakify(self.example.build(), mode), mode)

    def step(self, rule: Rule, args: ArgumentSet) -> None:
        self.stats["steps"] += 1
        ctx = self.plan.ctx
        self.steps.append((rule, args))
        self.mutating.append(not rule.observer)
        n = len(self.steps)
        with calling(lambda: f"step {n} of a differential sequence from {self.example.label}: "
                             + ", ".join(f"{r.label}({a.code()})" for r, a in self.steps), timed=False):
            real = self.real.call(rule, args, ctx, n)
            fake = self.fake.call(rule, args, ctx, n)
        found = _disagree(real, fake)
        if found is not None:
            summary, diffs = found
            self._fail("call", summary.replace("method", "op") if rule.op is not None else summary,
                       _side(real), _side(fake), diffs)
        diffs = self._alias_diffs(real, fake, f"step {n}")
        if diffs:
            self._fail("alias", "the fake's result aliases differently from the C++ result (an argument or an "
                       "earlier result on one side only)", _side(real), _side(fake), diffs)
        self._observe(n, mutated=not rule.observer)

    def _alias_diffs(self, real: CallResult, fake: CallResult, label: str, where: str = "result") -> list[str]:
        real_alias, fake_alias = self.real.aliases(real, label), self.fake.aliases(fake, label)
        return [f"{path.replace('result', where, 1)}: C++ aliases {_names(r)}, fake aliases {_names(f)}"
                for (path, r), (_, f) in zip(real_alias, fake_alias) if set(r) != set(f)]

    def _observe(self, n: int, mutated: bool) -> None:
        """Call every observer on both sides after step ``n`` (results and aliasing must agree); after a
        state-changing step also compare the evolved fake with a fresh fake of the C++ object's state."""
        plan, ctx = self.plan, self.plan.ctx
        if not plan.observer_rules:
            return
        fake_results = {}
        for obs in plan.observer_rules:
            name = obs.name
            r = self.real.call(obs, _EMPTY, ctx, None)
            f = self.fake.call(obs, _EMPTY, ctx, None)
            fake_results[name] = f
            found = _disagree(r, f, f"{name}()")
            if found is not None:
                self._fail("observer", f"the fake's state drifted from the C++ object: {name}() afterwards "
                           "disagrees", _side(r), _side(f), found[1], observer=name)
            diffs = self._alias_diffs(r, f, f"{name}() after step {n}", f"{name}()")
            if diffs:
                self._fail("observer", f"{name}() afterwards returns a tensor that aliases an argument or an "
                           "earlier result on one side only", _side(r), _side(f), diffs, observer=name)
        if not mutated:
            return
        try:
            # The same FakeTensorMode: a ShapeEnv costs milliseconds, and the two fakes share no tensors.
            fresh = _Side("fresh fake", ctx.fakify(self.real.obj, self.fake.mode), self.fake.mode)
        except Exception as exc:  # noqa: BLE001 - a state torch cannot fakify is a finding
            self._fail("state", "after the calls the C++ object can no longer be fakified (maybe_to_fake_obj "
                       "raised)", CallResult(error=exc).error_text(), "-", [])
        for obs in plan.observer_rules:
            name = obs.name
            r = fresh.call(obs, _EMPTY, ctx, None)
            f = fake_results[name]
            found = _disagree(r, f, f"{name}()")
            if found is not None:
                self._fail("state", f"the fake's state drifted from the C++ object's: a fake made now from its "
                           f"__obj_flatten__ (maybe_to_fake_obj) and the fake that made the calls disagree on "
                           f"{name}()", _side(r), _side(f),
                           [d.replace("C++", "fresh fake", 1) for d in found[1]], observer=name)

    def _fail(self, phase: str, summary: str, cpp: str, fake: str, details: list[str],
              observer: str | None = None) -> None:
        raise _Found(Drift(self.example, list(self.steps), list(self.plan.observers), list(self.mutating), phase,
                           summary, cpp, fake, list(details), observer))


def _names(labels: tuple[str, ...]) -> str:
    return ", ".join(labels) if labels else "nothing"


def _program(plan: Plan, max_steps: int) -> SearchStrategy:
    """Hypothesis strategy of one call sequence: ``(example index, [(rule index, ArgumentSet), ...])`` with 1 to
    ``max_steps`` steps.

    This is the equivalent of a ``RuleBasedStateMachine`` with an ``initialize`` rule choosing the example and
    one rule per :class:`Rule`, written as a list so that hypothesis's list shrinker deletes steps cleanly: the
    stateful runner draws its swarm-testing rule flags lazily inside the steps, and deleting the step that drew
    one misaligns every later step, which left measured failing sequences unshrunk at 12 calls where 2 suffice.
    """
    # A rule of weight w is offered w times (see _reshapes); all offers draw the same step, and shrinking moves
    # each step to its rule's first offer.
    step = st.one_of([st.tuples(st.just(i), r.args) for i, r in enumerate(plan.rules) for _ in range(r.weight)])
    return st.tuples(st.integers(0, len(plan.examples) - 1), st.lists(step, min_size=1, max_size=max_steps))


#: At most this many explicit sequences (see :func:`_explicit_programs`) per run.
MAX_EXPLICIT = 48


def _explicit_programs(plan: Plan) -> list[tuple[int, list[tuple[int, ArgumentSet]]]]:
    """Every pair of state-changing calls (``push, pop``; ``add, add``...) with ordinary arguments, from every
    example, for hypothesis to run first (``@example``, phase ``explicit``) in every profile, at most
    :data:`MAX_EXPLICIT`: most drifts show within two such calls, and trying them all makes a fake that forgets to
    remove or to evict fail deterministically even under a random profile. Explicit sequences are not shrunk
    (two calls are already short)."""
    reshaping = [i for i, r in enumerate(plan.rules) if r.weight > 1 and r.ordinary is not None]
    out = []
    for a in reshaping:
        for b in reshaping:
            for e in range(len(plan.examples)):
                out.append((e, [(a, plan.rules[a].ordinary), (b, plan.rules[b].ordinary)]))
    return out[:MAX_EXPLICIT]


def _execute(plan: Plan, stats: dict, program) -> None:
    """Run one drawn program; raises :class:`_Found` at the first disagreement."""
    example, steps = program
    machine = _Machine(plan, stats)
    machine.start(example)
    for index, args in steps:
        machine.step(plan.rules[index], args)


@dataclasses.dataclass
class Run:
    """The result of :func:`run_differential`: ``drift`` (``None`` when none was found), the :class:`Plan`,
    counts of ``sequences`` and ``steps`` run (shrinking included), wall ``seconds``, ``flaky`` when the failure
    did not reproduce on replay, and the hypothesis ``settings`` used."""

    plan: Plan
    drift: Drift | None
    sequences: int
    steps: int
    seconds: float
    settings: Settings
    flaky: bool = False

    def summary(self) -> str:
        """One line: what was driven and how much."""
        rules = ", ".join(r.label if r.op is None else r.name for r in self.plan.rules)
        obs = ", ".join(f"{o}()" for o in self.plan.observers) or "none"
        return (f"{self.plan.ctx.info.qualname}: {self.sequences} call sequences, {self.steps} steps in "
                f"{self.seconds:.1f} s (max_examples={self.settings.max_examples}, "
                f"up to stateful_step_count={self.settings.stateful_step_count} calls each); rules: {rules}; "
                f"observers: {obs}")


def run_differential(ctx: ClassContext, *, examples: int | None = None, seed: int | None = None,
                     settings: Settings | None = None) -> Run:
    """Run the differential state machine on ``ctx``'s class and return a :class:`Run`.

    ``examples`` overrides ``max_examples`` (default ``SETTINGS.examples``); ``seed`` seeds hypothesis (default:
    ``--hypothesis-seed`` if given); ``settings`` replaces the base settings of :func:`hypothesis_settings`.
    Raises :class:`~conformance.results.NotApplicable` (see :func:`plan_for`); errors inside the harness or in
    the user's strategies propagate. FakeTensorMode's and the fake-class registry's logs are silenced meanwhile.
    """
    with _quiet():
        return _run(ctx, examples, seed, settings)


def _run(ctx: ClassContext, examples: int | None, seed: int | None, settings: Settings | None) -> Run:
    plan = plan_for(ctx)
    used = hypothesis_settings(examples, settings)
    stats = {"sequences": 0, "steps": 0}

    def differential(program):
        _execute(plan, stats, program)

    # Distinct example-database entries per class (hypothesis keys them by the test function's source).
    differential._hypothesis_internal_add_digest = f"torchbind-differential:{ctx.info.qualname}".encode()
    inner = used(differential)
    for program in reversed(_explicit_programs(plan)):  # @example runs them in decoration order, innermost last
        inner = hypothesis.example(program)(inner)
    test = given(_program(plan, used.stateful_step_count))(inner)
    chosen = seed if seed is not None else hypothesis.core.global_force_seed
    if chosen is not None:
        test = hypothesis.seed(chosen)(test)
    drift, flaky = None, False
    start = time.perf_counter()
    try:
        with with_reporter(lambda _msg: None):
            test()
    except _Found as exc:
        drift = exc.drift
    except BaseExceptionGroup as group:  # FlakyFailure, or several distinct failures
        match, _rest = group.split(_Found)
        if match is None:
            raise
        drift = _first_found(match).drift
        flaky = "Flaky" in type(group).__name__
    return Run(plan, drift, stats["sequences"], stats["steps"], time.perf_counter() - start, used, flaky)


def _first_found(group: BaseExceptionGroup) -> _Found:
    for exc in group.exceptions:
        if isinstance(exc, _Found):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            return _first_found(exc)
    raise AssertionError("no _Found in the group")  # pragma: no cover - split() guarantees one


# ----- the reproducer ---------------------------------------------------------------------------------------

_HELPERS = '''
import contextlib
import re

# The C++ object and its fake, fakified ONCE (as dynamo / export do before tracing); from here on each side
# evolves by its own methods. The fake's calls run under FakeTensorMode, the call_torchbind path.
mode = FakeTensorMode(shape_env=ShapeEnv())
real = make_obj()
fake = maybe_to_fake_obj(mode, make_obj())
seen = {"C++": [], "fake": []}  # tensors passed in or returned so far, to show aliasing
differs = []


def show(value, side=None, path="result", where=""):
    \"\"\"Tensors by the metadata a FakeTensor carries and, with a side, the earlier tensors they share storage
    with; anything else by type and value.\"\"\"
    if isinstance(value, BaseException):
        lines = str(value).strip().splitlines()
        return f"raised {type(value).__name__}: {lines[0][:200] if lines else ''}"
    if isinstance(value, torch.Tensor):
        size = lambda x: str(x) if isinstance(x, int) else "{sym}"  # a data-dependent (symbolic) size
        # Strides of size-1 dims and of empty tensors do not matter (torch._prims_common.check_significant_strides)
        empty = any(isinstance(x, int) and x == 0 for x in value.shape)
        strides = ["*" if empty or n == 1 else size(x) for n, x in zip(value.shape, value.stride())]
        text = (f"Tensor(shape=[{', '.join(map(size, value.shape))}], dtype={value.dtype}, device={value.device}, "
                f"stride=[{', '.join(strides)}]{', requires_grad=True' if value.requires_grad else ''})")
        if side is not None:
            key = value.untyped_storage()._cdata
            hits = [name for name, t in seen[side] if t.untyped_storage()._cdata == key]
            text += f" aliasing [{', '.join(hits)}]" if hits else ""
            seen[side].append((path + where, value))
        return text
    if isinstance(value, (list, tuple)):
        parts = [show(v, side, f"{path}[{i}]", where) for i, v in enumerate(value)]
        return f"{type(value).__name__}[" + ", ".join(parts) + "]"
    return f"{type(value).__name__} {value!r}"


def same(real_text, fake_text):
    if real_text.startswith("raised ") and fake_text.startswith("raised "):
        return True
    pattern = re.escape(fake_text).replace(re.escape("{sym}"), "-?[0-9]+")  # a symbolic size matches any
    return re.fullmatch(pattern, real_text) is not None


def report(what, real_text, fake_text, sides=("C++", "fake")):
    mark = "" if same(real_text, fake_text) else "   <-- DIFFERS"
    if mark:
        differs.append(what)
    print(f"{what}\\n    {sides[0] + ':':<12}{real_text}\\n    {sides[1] + ':':<12}{fake_text}{mark}")


def fakified(x):
    if isinstance(x, torch.Tensor):
        return mode.from_tensor(x, static_shapes=True)
    try:
        return maybe_to_fake_obj(mode, x)
    except Exception:
        return x


def run(side, call, make_args, where, step=None):
    \"\"\"call(obj, args, kwargs) on one side (the fake's under FakeTensorMode, with fake arguments).\"\"\"
    args, kwargs = make_args()
    if side == "fake":
        args, kwargs = pytree.tree_map_only((torch.Tensor, torch.ScriptObject), fakified, (args, kwargs))
    if step is not None:
        named = [(str(i), v) for i, v in enumerate(args)] + list(kwargs.items())
        for name, v in named:
            show(v, side, f"argument {name}", f" of step {step}")
    try:
        with mode if side == "fake" else contextlib.nullcontext():
            out = call(real if side == "C++" else fake, args, kwargs)
    except Exception as exc:
        out = exc
    return show(out, side, "result", where), out


def step(n, text, call, make_args):
    where = f" of step {n}"
    report(f"step {n}: {text}", run("C++", call, make_args, where, n)[0], run("fake", call, make_args, where, n)[0])


def observe(n, names, state_changed):
    \"\"\"Call each observer on both sides, as the test does after every step; after a state-changing step also
    compare the fake with a fresh fake made now from the C++ object's __obj_flatten__.\"\"\"
    no_args = lambda: ((), {})
    fake_outs = {}
    for name in names:
        call = lambda o, a, k, name=name: getattr(o, name)(*a, **k)
        where = f" of {name}() after step {n}"
        real_text, _ = run("C++", call, no_args, where)
        fake_text, fake_outs[name] = run("fake", call, no_args, where)
        report(f"  after step {n}: obj.{name}()", real_text, fake_text)
    if state_changed and names:
        fresh_mode = FakeTensorMode(shape_env=ShapeEnv())
        fresh = maybe_to_fake_obj(fresh_mode, real)
        for name in names:
            try:
                with fresh_mode:
                    out = getattr(fresh, name)()
            except Exception as exc:
                out = exc
            report(f"  after step {n}: {name}() on a fake made now from the C++ object's state",
                   show(out), show(fake_outs[name]), ("fresh fake", "fake"))
'''


def repro_script(ctx: ClassContext, drift: Drift) -> str:
    """A standalone Python script that loads the user's libraries (the ``--torchbind-load`` lines), builds the
    example object twice, fakifies one copy, replays ``drift.steps`` on both sides — calling the observers after
    each step as the test did — and prints every result, marking the disagreement ``<-- DIFFERS``."""
    body = []
    for _rule, args in drift.steps:
        body += _extra_defs(args)
    body += _HELPERS.strip("\n").splitlines()
    body.append("")
    for n, ((rule_, args), mutated) in enumerate(zip(drift.steps, drift.mutating_steps), start=1):
        pos = "".join(f"{v.code}, " for v in args.args)
        kw = ", ".join(f"{k!r}: {v.code}" for k, v in args.kwargs)
        if rule_.op is None:
            call = f"lambda o, a, k: o.{rule_.name}(*a, **k)"
        else:
            p = rule_.position
            call = f"lambda o, a, k: {rule_.op_path}(*a[:{p}], o, *a[{p}:], **k)"
        body.append(f"step({n}, {rule_.code(args)!r}, {call}, lambda: (({pos}), {{{kw}}}))")
        if drift.observers and not (n == len(drift.steps) and drift.phase in ("call", "alias")):
            body.append(f"observe({n}, {drift.observers!r}, state_changed={mutated})")
    body += [
        "",
        "if differs:",
        "    print(f'DISAGREEMENT: the C++ object and its fake differ at {differs[0]!r}')",
        "else:",
        "    print('no disagreement reproduced')",
    ]
    return ctx.repro(drift.example, body)
