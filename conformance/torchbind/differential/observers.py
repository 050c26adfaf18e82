"""Which argument-less methods the differential test may call after every step: the observers, proven, not guessed.

An observer is called on both sides after every step, so one that changes the state hides drifts (a ``clear()``
called after every step unbinds both sides, and a fake ``bind()`` that forgets its handle goes unseen) or invents
them (a ``reset()`` called after every step makes the fresh fake's ``count()`` 0 where the evolved fake's read 2).
"``__obj_flatten__`` did not change" is not enough: state that flatten omits (a process-local handle, a cache) is
exactly what such methods change. So a candidate (a method the fake defines, callable without arguments) is an
observer only when :func:`prove` shows, on every proof state (the examples, each example after one call of
each driven method or op with each of its first argument draws, and each of those after one more call), that
calling it changes

* neither the flattened state (``read_state``: ``__obj_flatten__``, else ``__getstate__``),
* nor what any other candidate returns: for each other candidate ``o``, on a fresh object, ``o()``, the candidate,
  ``o()`` again must give equal results (values compared with :func:`conformance.torchbind.examples.state_key`, tensor
  data included; a raise by its exception type and first line),
* nor its own result: two calls in a row give equal results.

The witnesses ``o`` are read pairwise on fresh objects, not all before and all after on one object: a candidate
that is not an observer (``clear()``) read among the "before" values would change the state under the others' reads
and blame the method under test. A candidate whose two calls in a row differ (a counter, ``torch.empty``) is no
witness: its results would differ whatever ran between them.

The proof states stop at two calls; the states the differential's sequences reach go deeper (``prime(); prime();
arm()``) and use other draws. :class:`Audit` runs the same tests on them as the sequences reach them, on objects
rebuilt by replaying the steps; a method it refutes is planned again as a step and the sequences run again.

The adopter's word (:func:`conformance.strategy`'s ``observer=``) comes first: ``False`` keeps a method a step;
``True`` trusts a method whose own result varies, but not one the proof shows changing the state or another
candidate's result: that one is driven as a step, and a note says so with the evidence.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from ..calls import Call, Callee
from ..context import ClassContext
from ..examples import Example, read_state, state_key
from ...engine.render import render

__all__ = ["Proof", "Audit", "prove", "MAX_STATES", "MAX_ONE_CALL", "DRAWS", "MAX_AUDITED"]

#: At most this many proof states from the examples and one call (:data:`MAX_STATES` in all, two calls included).
MAX_ONE_CALL = 48
#: At most this many proof states in all: the examples, the states one call reaches from them, then those two
#: calls reach (each one-call state after one more call, with its first argument set).
MAX_STATES = 64
#: Argument sets per callee that the proof states are reached with (its first draws).
DRAWS = 3
#: At most this many states the differential's own sequences reach are audited per plan (:class:`Audit`).
MAX_AUDITED = 64


@dataclasses.dataclass
class Proof:
    """What :func:`prove` established: ``observers`` (proven or named, in candidate order), ``not_observers``
    (method -> one line: why it is not one, with the evidence), ``notes`` for the adopter (a named observer the
    proof refuted, a flatten that changes the object it reads),
    ``states``: how many object states the proof ran on, and ``reads_pure``: whether the class has
    ``__obj_flatten__`` and it (and ``__getstate__``, where bound) passes the same proof, so that reading them one
    more time changes nothing (the machine then keys the fresh fakes it makes by what they read)."""

    observers: list[str]
    not_observers: dict[str, str]
    notes: list[str]
    states: int
    reads_pure: bool = False
    witnesses: list[str] = dataclasses.field(default_factory=list)
    flat: bool = True


#: A value in an observer note: its ``repr`` on one line, at most 60 characters (the one renderer,
#: :func:`~conformance.engine.render.render`, in its ``line`` style).
_short = functools.partial(render, limit=60, style="line")


class _Reader:
    """Calls into the real object for the proof, each reported to the context's tracer; results become comparable
    keys (``("returned", state_key(value))`` or ``("raised", type, first line)``), and short texts on demand."""

    def __init__(self, ctx: ClassContext):
        self.ctx = ctx

    def call(self, obj: Any, method: str, state: str) -> tuple[Any, Any]:
        """``(key, what)``: what the call returned, or the exception it raised (for :func:`_text`)."""
        ctx = self.ctx
        try:
            with ctx.calling(lambda: f"{ctx.info.qualname}.{method}() on {state} (is it an observer? planning the "
                                     "differential test)"):
                value = getattr(obj, method)()
        except Exception as exc:  # noqa: BLE001 - user and C++ code may raise anything
            line = (str(exc).strip().splitlines() or [""])[0]
            return ("raised", type(exc).__name__, line), exc
        return ("returned", state_key(value)), value

    def state(self, obj: Any) -> tuple[Any, Any]:
        """``(key, value)`` of the object's flattened state (a raise is a state too: ``("raised", type, line)``)."""
        try:
            value = read_state(obj, self.ctx.tracer)
        except Exception as exc:  # noqa: BLE001 - a flatten that raises in this state: the flatten item reports it
            line = (str(exc).strip().splitlines() or [""])[0]
            return ("raised", type(exc).__name__, line), exc
        return state_key(value), value


def _text(key: Any, what: Any) -> str:
    """A result of :meth:`_Reader.call` in words."""
    return f"raised {type(what).__name__}" if key[0] == "raised" else _short(what)


def _flat_change(before: Any, after: Any) -> str:
    """The first flattened field that differs, as ``name: <before> before, <after> after`` (the whole state when
    it is not a tuple of ``(name, value)`` pairs)."""
    pairs = [(b, a) for b, a in zip(before, after) if isinstance(b, tuple) and isinstance(a, tuple) and len(b) == 2
             and len(a) == 2] if isinstance(before, tuple) and isinstance(after, tuple) else []
    for b, a in pairs:
        if state_key(b[1]) != state_key(a[1]):
            return f"{b[0]}: {_short(b[1])} before, {_short(a[1])} after"
    return f"{_short(before)} before, {_short(after)} after"


def _states(ctx: ClassContext, examples: list[Example], reaching: list[Callee]) -> list[Example]:
    """The proof states: each example, then each example after one call of each callee in ``reaching``, with each
    of its first :data:`DRAWS` argument sets from the class's argument source (the first is often the trivial one:
    ``bind(0)`` leaves a handle as it was, and only a later draw shows ``clear()`` unbinding it), at most
    :data:`MAX_ONE_CALL`; then each of those after one more call of each callee with its first argument set (the
    states the differential's explicit two-call sequences reach: ``settle()`` of a latch changes nothing until
    ``prime(); arm()`` armed it), those that build; at most :data:`MAX_STATES`."""
    states = list(examples)
    one_call = _after_one_call(ctx, examples, reaching, DRAWS, MAX_ONE_CALL - len(states))
    states += one_call
    states += _after_one_call(ctx, one_call, reaching, 1, MAX_STATES - len(states))
    return states


def _after_one_call(ctx: ClassContext, starts: list[Example], reaching: list[Callee], draws: int,
                    room: int) -> list[Example]:
    """Each of ``starts`` after one call of each callee in ``reaching`` with each of its first ``draws`` argument
    sets, those that build (C++ accepts the call in that state), at most ``room``."""
    out: list[Example] = []
    for example in starts:
        for callee in reaching:
            if len(out) >= room:
                return out
            try:
                calls = ctx.calls_of(callee, limit=draws, example=example)
            except Exception:  # noqa: BLE001 - no arguments for it (the plan notes why): reaches no state
                continue
            for call in calls[:draws]:
                if len(out) >= room:
                    return out
                state = dataclasses.replace(example, steps=example.steps + (call,))
                try:
                    state.build()
                except Exception:  # noqa: BLE001 - C++ rejects this call in this state: not a state to prove on
                    continue
                out.append(state)
    return out


def _built(state: Example) -> Any:
    """A fresh object in ``state``, or ``None`` when building it raises this time (a factory that fails now and
    then): that state is no evidence either way."""
    try:
        return state.build()
    except Exception:  # noqa: BLE001 - user code may raise anything
        return None


def _describe(state: Example) -> str:
    """The state in words: the example's source, e.g. ``StreamGuard(2); obj.bind(1)``."""
    return "; ".join(state.code())


def _flatten_changes_itself(reader: _Reader, states: list[Example]) -> str | None:
    """Where reading the flattened state twice in a row gives two states (``__obj_flatten__`` changes the object:
    the ``flatten`` item reports it), or ``None``."""
    for state in states:
        obj = _built(state)
        if obj is None:
            continue
        first, second = reader.state(obj), reader.state(obj)
        if first[0] != second[0]:
            return f"`{_describe(state)}` ({_flat_change(first[1], second[1])})"
    return None


def _evidence_against(reader: _Reader, method: str, states: list[Example], witnesses: list[str],
                      flat: bool = True) -> str | None:
    """The first evidence that ``method()`` changes the state, or ``None`` when it changes nothing on ``states``;
    ``flat=False``: judge by the other candidates only (the flattened state cannot be read without changing it)."""
    for state in states:
        where = _describe(state)
        obj = _built(state)
        if obj is None:
            continue
        if flat:
            before = reader.state(obj)
            reader.call(obj, method, where)
            after = reader.state(obj)
            if after[0] != before[0]:
                return f"changes the flattened state on `{where}` ({_flat_change(before[1], after[1])})"
        for other in witnesses:
            if other == method:
                continue
            obj = _built(state)
            if obj is None:
                continue
            first, first_what = reader.call(obj, other, where)
            reader.call(obj, method, where)
            second, second_what = reader.call(obj, other, where)
            if first != second:
                return (f"changes what {other}() returns on `{where}`: {_text(first, first_what)} before, "
                        f"{_text(second, second_what)} after")
    return None


def _unstable(reader: _Reader, method: str, states: list[Example]) -> str | None:
    """Evidence that two calls of ``method()`` in a row differ on some state, or ``None``."""
    for state in states:
        where = _describe(state)
        obj = _built(state)
        if obj is None:
            continue
        first, first_what = reader.call(obj, method, where)
        second, second_what = reader.call(obj, method, where)
        if first != second:
            return (f"two calls in a row on `{where}` give {_text(first, first_what)}, then "
                    f"{_text(second, second_what)} (it changes what it reads, or its result is not deterministic)")
    return None


def prove(ctx: ClassContext, candidates: list[str], reaching: list[Callee], examples: list[Example],
          declared: dict[str, bool], refuted: dict[str, str] | None = None) -> Proof:
    """Decide which ``candidates`` (method names callable without arguments, in order) are observers, on the
    ``examples`` and the states one call of each callee in ``reaching`` (and of each candidate) reaches from
    them (see the module docstring). ``declared``: the adopter's word (:meth:`Registry.observers`);
    ``refuted``: method -> evidence, from an :class:`Audit` of an earlier run on a state its sequences reached
    (not observers whatever the proof and the adopter say). Calls only the real object; errors raised by the calls
    are results, never raised."""
    refuted = refuted or {}
    reader = _Reader(ctx)
    states = _states(ctx, examples, [*reaching, *(Callee.method(m) for m in candidates)])
    not_observers: dict[str, str] = {}
    notes: list[str] = []
    changing = _flatten_changes_itself(reader, states) if ctx.info.has_flatten else None
    if changing is not None:
        notes.append(f"reading the flattened state twice in a row gives two states on {changing}: observers are "
                     f"judged by what the other candidates return only (see {ctx.info.test_name}::flatten)")
    unstable = {m: why for m in candidates if (why := _unstable(reader, m, states)) is not None}
    witnesses = [m for m in candidates if m not in unstable]
    observers = []
    qual = ctx.info.qualname
    for method in candidates:
        said = declared.get(method)
        if said is False:
            not_observers[method] = f"excluded by the adopter (conformance.strategy({qual!r}, {method!r}, " \
                                    "observer=False))"
            continue
        against = refuted.get(method) or _evidence_against(reader, method, states, witnesses, flat=changing is None)
        if against is None and method in unstable and not said:
            against = unstable[method]
        if against is None:
            observers.append(method)
            continue
        not_observers[method] = against
        if said:
            notes.append(f"{method}: named an observer (conformance.strategy({qual!r}, {method!r}, observer=True)) "
                         f"but calling it {against}; driven as a step instead")
    reads = [m for m, bound in (("__obj_flatten__", ctx.info.has_flatten), ("__getstate__", ctx.info.pickles)) if bound]
    pure = ctx.info.has_flatten and changing is None and all(_unstable(reader, m, states) is None and
                                        _evidence_against(reader, m, states, witnesses) is None for m in reads)
    return Proof(observers, not_observers, notes, len(states), pure, witnesses, changing is None)


@dataclasses.dataclass
class Audit:
    """The observers proven again, during a differential run, on the states its own sequences reach: a state
    deeper than the proof's (``prime(); prime(); arm()``), or reached with a draw the proof did not make.

    :meth:`visit` takes each new state a sequence reaches (the example and the steps C++ accepted, so far; at most
    :data:`MAX_AUDITED` per plan, repeats skipped) and runs the proof's tests on it, on fresh objects rebuilt by
    replaying the steps (never on the machine's objects, whose calls it would change): each observer against the
    flattened state and the other witnesses (read ``w()``, call the observer, read ``w()``), and two calls of it
    in a row (unless the adopter named it an observer). ``refuted``: observer -> the evidence, in the proof's
    words plus the state; the driver then plans again with it as a step (:func:`prove`'s ``refuted``) and runs
    the sequences again, since a method taken for an observer hides or invents drifts."""

    ctx: ClassContext
    proof: Proof
    declared: dict[str, bool]
    refuted: dict[str, str] = dataclasses.field(default_factory=dict)
    audited: int = 0
    seen: set = dataclasses.field(default_factory=set, repr=False)

    def visit(self, example: Example, calls: tuple[Call, ...], budget: bool = True) -> None:
        """Audit the state ``calls`` (the steps C++ accepted) reach from ``example``, unless seen before (by the
        example and the calls' code), or ``budget`` is set and :data:`MAX_AUDITED` states were audited. Calls only
        fresh real objects; errors raised by the calls are results, never raised."""
        observers = [m for m in self.proof.observers if m not in self.refuted]
        key = (example.label, tuple(c.code() for c in calls))
        if not observers or key in self.seen or (budget and self.audited >= MAX_AUDITED):
            return
        self.seen.add(key)
        state = dataclasses.replace(example, steps=example.steps + calls)
        self.audited += 1
        reader = _Reader(self.ctx)
        where = f" (a state a differential sequence reached; the proof's {self.proof.states} states did not show it)"
        for method in observers:
            against = _evidence_against(reader, method, [state], self.proof.witnesses, flat=self.proof.flat)
            if against is None and not self.declared.get(method):
                against = _unstable(reader, method, [state])
            if against is not None:
                self.refuted[method] = against + where

