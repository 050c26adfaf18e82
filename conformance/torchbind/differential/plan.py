"""What a differential run drives: the :class:`Plan` of a class (:func:`plan_for`), its rules (:class:`Rule`, the
steps: methods the fake defines and custom ops that can run on a fakified object) and its observers (methods proven
to only read the state, :mod:`.observers`), with the steps that change what a fake can represent weighted up.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch
from hypothesis.strategies import SearchStrategy

from ..calls import Call, Callee
from ..context import ClassContext, defined_on_fake, new_fake_mode
from ..discovery import runs_on_fakes
from ..examples import Example, read_state, state_key
from ...core.results import NotApplicable
from ...engine.arguments import EMPTY
from ...engine.compare import disagreement
from ...engine.values import ArgumentSet, UnsupportedType
from .observers import Audit, prove
from ...core.results import RegistrationError

__all__ = ["Rule", "Plan", "plan_for", "RESHAPING_WEIGHT"]


@dataclasses.dataclass(frozen=True)
class Rule:
    """One kind of step: a :class:`~conformance.torchbind.calls.Callee` (a method, or a custom op with the object at its
    schema position) with a strategy of its arguments.

    ``args`` draws :class:`ArgumentSet`s, or is ``None`` when the adopter's strategy depends on the object: then
    ``for_object(obj)`` gives the strategy for the C++ object in its current state, drawn before each such step
    (:func:`conformance.torchbind.differential.driver._execute`); ``observer`` is True for methods that never change the
    C++ object's state on the examples; ``weight`` is how many times the rule is offered among the steps (see
    :func:`_reshapes`); ``ordinary`` is the first argument set of the class's argument source
    (:meth:`ClassContext.calls_of`) for the explicit sequences, ``None`` when the adopter's strategy depends on
    the object or no arguments can be made.
    """

    callee: Callee
    args: SearchStrategy | None
    observer: bool = False
    weight: int = 1
    ordinary: ArgumentSet | None = None
    for_object: Any = None

    @property
    def name(self) -> str:
        """The method name or the op's ``ns::op`` name."""
        return self.callee.name

    @property
    def op(self) -> Any:
        """The op's :class:`~conformance.torchbind.discovery.OpInfo`, ``None`` for a method."""
        return self.callee.op

    @property
    def label(self) -> str:
        """The name in messages and the failure's target: a method name or the op's short name."""
        return self.callee.label

    def call(self, args: ArgumentSet) -> Call:
        return Call(self.callee, args)

    def code(self, args: ArgumentSet, var: str = "obj") -> str:
        """The call as Python source, e.g. ``obj.push(torch.ones(3))`` or ``torch.ops.ns.op.default(x, obj)``."""
        return self.call(args).code(var)


@dataclasses.dataclass
class Plan:
    """What a differential run of one class drives: ``examples`` that build and fakify, ``rules`` (the steps),
    ``observer_rules`` (called after every step), ``not_observers`` (each method callable without arguments
    that is not an observer -> one line: why, with the evidence of :func:`.observers.prove`), and ``notes`` on
    what is left out and why (methods the fake lacks, ops without a fake, unsupported argument types, user
    exclusions); ``observer_notes``: what the proof found that the adopter should know (a named observer it
    refuted, a flatten that changes the object). ``reads_pure``: :attr:`.observers.Proof.reads_pure`;
    ``fresh``: the observers' results on the fresh fakes made during one run, by what each fakification read
    (filled by the machine, see :meth:`.machine._Machine._fresh_results`); ``audit``: the observers' proof run
    again on the states the sequences reach (:class:`.observers.Audit`, fed by the machine); ``unequal``: per
    example index, the observers the fake made from that example already disagrees on (method -> how), which
    sequences from it do not compare (said in ``notes``).

    A method without arguments that never changes the C++ object's state (``size()``) is only an observer, not
    also a step: it runs after every step anyway, and leaving it out of the rules makes the state-changing calls
    that expose drifts more frequent in each sequence (unless observers are all there is to call).
    """

    ctx: ClassContext
    examples: list[Example]
    rules: list[Rule]
    observer_rules: list[Rule]
    notes: list[str]
    not_observers: dict[str, str] = dataclasses.field(default_factory=dict)
    reads_pure: bool = False
    observer_notes: list[str] = dataclasses.field(default_factory=list)
    fresh: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)
    audit: Audit | None = dataclasses.field(default=None, repr=False, compare=False)
    unequal: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)

    @property
    def observers(self) -> list[str]:
        """The observers' method names."""
        return [r.name for r in self.observer_rules]



def _driven_args(ctx: ClassContext, key: str, schema: torch.FunctionSchema, position: int,
                 notes: list[str]) -> tuple[SearchStrategy | None, Any] | None:
    """``(strategy, for_object)`` for a method or op (``key``) from the class's argument source: the strategy, or
    (the adopter's strategy depends on the object) ``None`` and a function from the C++ object to its strategy.
    ``None`` with the reason appended to ``notes`` when it is not driven (no generator for an argument type, or
    excluded by ``conformance.strategy``)."""
    source = ctx.arguments
    if source.excluded(key):
        notes.append(f"{key}: not driven, excluded by conformance.strategy")
        return None
    if source.depends_on_object(key):
        return None, lambda obj: source.strategy(key, schema, position, obj, wide=True)
    try:
        args = source.strategy(key, schema, position, wide=True)  # ints past small values (INT_BOUND)
    except UnsupportedType as exc:
        notes.append(f"{key}: not driven, {exc} (register a strategy with conformance.strategy)")
        return None
    if args is None:
        notes.append(f"{key}: not driven, excluded by conformance.strategy")
        return None
    return args, None


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


def _reshapes(ctx: ClassContext, schema: torch.FunctionSchema, callee: Callee, examples: list[Example]) -> bool:
    """True when the call changes :func:`_meta_key` of ``read_state(obj)`` on some example with some of the
    argument sets of the class's argument source (:meth:`ClassContext.calls_of`): a ``push`` or ``pop`` does, a
    method that only rewrites tensor values (invisible to a fake) or reads the state does not. Such rules are offered
    :data:`RESHAPING_WEIGHT` times as often: a fake can only drift in what it represents, and drifts show after
    a few of these calls (push, pop, pop), which sequences of a handful of uniformly drawn steps rarely contain.
    """
    for example in examples:
        try:
            sets = ctx.calls_of(callee, limit=2, example=example)
        except NotApplicable:
            return False
        for args in (c.args for c in sets):
            try:
                obj = example.build()
                before = _meta_key(read_state(obj, ctx.tracer))
                a, kw = args.make()
                with contextlib.suppress(Exception), ctx.calling(
                        lambda: f"{ctx.info.qualname}: {schema.name}({args.code()}) on the example object "
                                f"{example.label} (does it change the state? planning the differential test)"):
                    callee.invoke(obj, a, kw)
                if _meta_key(read_state(obj, ctx.tracer)) != before:
                    return True
            except Exception:  # noqa: BLE001 - an example that does not build: the examples check reports it
                continue
    return False


def _ordinary(ctx: ClassContext, callee: Callee) -> ArgumentSet | None:
    """The first argument set of a call from the argument source, unless the adopter's strategy depends on the
    object (the explicit two-call sequences start from several states)."""
    if ctx.arguments.depends_on_object(callee.name):
        return None
    try:
        sets = ctx.calls_of(callee, limit=1)
    except NotApplicable:
        return None
    return sets[0].args if sets else None


def plan_for(ctx: ClassContext, refuted: dict[str, str] | None = None) -> Plan:
    """Build the :class:`Plan` of ``ctx``'s class; ``refuted``: methods an :class:`.observers.Audit` of an earlier
    run showed not to be observers (method -> evidence), planned as steps. Raises
    :class:`~conformance.core.results.NotApplicable` without a fake class, examples, or anything to drive;
    ``ValueError`` for an override naming an unknown method or argument."""
    info = ctx.info
    fake = ctx.require_fake()
    examples = []
    for example in ctx.require_examples():
        try:
            ctx.fakify(example.build(), new_fake_mode(), state=example.label)
        except Exception:  # noqa: BLE001 - the roundtrip check reports it
            continue
        examples.append(example)
    if not examples:
        raise NotApplicable(ctx.why_not_fakifiable())
    overrides = ctx.registry.strategies(info.qualname)
    op_names = {op.qualname for op in info.ops}
    for (m, _a) in overrides:
        if m not in info.methods and m not in op_names:
            raise RegistrationError(
                f"conformance.strategy({info.qualname!r}, {m!r}): {info.qualname} has no method or "
                f"op taking it named {m!r}; methods: {', '.join(info.user_methods)}; ops (named "
                f"'ns::op'): {', '.join(sorted(op_names)) or 'none'}")
    declared = ctx.registry.observers(info.qualname)
    for m, said in declared.items():
        if m not in info.methods:
            raise RegistrationError(
                f"conformance.strategy({info.qualname!r}, {m!r}, observer={said}): {info.qualname} has "
                f"no method named {m!r}; methods: {', '.join(info.user_methods)}")
        if said and not _callable_without_args(info.methods[m]):
            raise RegistrationError(
                f"conformance.strategy({info.qualname!r}, {m!r}, observer=True): an observer is called "
                f"without arguments after every step, and {info.methods[m]} needs some")
    notes: list[str] = []
    methods: list[tuple[str, Callee, Any]] = []  # (name, callee, driven)
    for method in info.user_methods:
        if method == "tracing_mode":
            continue
        if not defined_on_fake(fake, method):
            notes.append(f"{method}: not driven, the fake class does not define it "
                         f"(see {info.test_name}::coverage[{method}])")
            continue
        driven = _driven_args(ctx, method, info.methods[method], 0, notes)
        if driven is not None:
            methods.append((method, Callee.method(method), driven))
    ops: list[tuple[Callee, Any]] = []
    for op in info.ops:
        if not runs_on_fakes(op):
            notes.append(f"{op.qualname}: not driven, the op has no Python fake "
                         f"(see {info.test_name}::custom_op[{op.short_name}])")
            continue
        # The tracked object at every class-typed argument in turn (dst, then src of a merge_into(dst, src)),
        # the others from the argument source: what the op does to each of its objects is observed.
        for at in range(max(len(op.class_args), 1)):
            callee = Callee.of_op(op, at=at)
            driven = _driven_args(ctx, op.qualname, op.schema, callee.position, notes if at == 0 else [])
            if driven is not None:
                ops.append((callee, driven))
    candidates = [m for m, _c, _d in methods if _callable_without_args(info.methods[m])]
    reaching = [c for m, c, _d in methods if m not in candidates] + [c for c, _d in ops]
    proof = prove(ctx, candidates, reaching, examples, declared, refuted)
    for m, said in declared.items():
        if said and m not in candidates:
            proof.notes.append(f"{m}: named an observer (conformance.strategy({info.qualname!r}, {m!r}, observer=True)) "
                               "but not driven: " + next((n.split(": not driven, ", 1)[1] for n in notes
                                                          if n.startswith(f"{m}: not driven, ")), "see the notes"))
    disagreeing = _disagreeing_observers(ctx, examples, proof.observers)
    for k, found in disagreeing.items():
        for method, why in found.items():
            notes.append(f"{method}: not compared in sequences from the example {examples[k].label}: {why}, before "
                         f"any call, so its disagreements after a step there would blame the step (see "
                         f"{info.test_name}::agreement[{method}])")
    rules: list[Rule] = []
    observer_rules: list[Rule] = []
    for method, callee, driven in methods:
        schema = info.methods[method]
        observer = method in proof.observers
        reshaping = not observer and _reshapes(ctx, schema, callee, examples)
        made = Rule(callee, driven[0], observer=observer, weight=RESHAPING_WEIGHT if reshaping else 1,
                    ordinary=_ordinary(ctx, callee), for_object=driven[1])
        if observer:
            observer_rules.append(made)
        if not observer or len(schema.arguments) > 1:
            rules.append(made)
    for callee, driven in ops:
        reshaping = _reshapes(ctx, callee.schema, callee, examples)
        rules.append(Rule(callee, driven[0], weight=RESHAPING_WEIGHT if reshaping else 1,
                          ordinary=_ordinary(ctx, callee), for_object=driven[1]))
    if not rules:
        rules = list(observer_rules)  # nothing changes the state: still call the observers repeatedly
    if not rules:
        raise NotApplicable(f"nothing to drive on {info.qualname}: " + "; ".join(notes or ["no methods"]))
    return Plan(ctx, examples, rules, observer_rules, notes, proof.not_observers, proof.reads_pure, proof.notes,
                audit=Audit(ctx, proof, declared), unequal=disagreeing)


def _disagreeing_observers(ctx: ClassContext, examples: list[Example],
                           observers: list[str]) -> dict[int, dict[str, str]]:
    """Per example (by index), the observers whose fake already disagrees with C++ on that example object,
    fakified as tracing fakifies it (a stub getter returning ``None``; a handle ``__obj_flatten__`` omits), before
    any call: method -> how. Compared after a step in a sequence from that example, such an observer's
    disagreement would be blamed on the step; the ``agreement`` item reports it."""
    out: dict[int, dict[str, str]] = {}
    for k, example in enumerate(examples):
        try:
            real, mode = example.build(), new_fake_mode()
            fake = ctx.fakify(example.build(), mode, state=example.label)
        except Exception:  # noqa: BLE001 - an example that does not build or fakify now: no evidence either way
            continue
        for method in observers:
            call = Call(Callee.method(method), EMPTY)
            r, f = ctx.call_real(real, call), ctx.call_fake(fake, mode, call)
            if r.raised:
                continue  # C++ rejects it in this state: not a comparison
            found = disagreement(r, f, f"{method}()", significant_strides_only=True)
            if found is not None:
                out.setdefault(k, {})[method] = ("the fake made from it already disagrees with C++ ("
                                                 + "; ".join(found[1][:2] or [found[0]]) + ")")
    return out
