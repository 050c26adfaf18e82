"""Check 9: over sequences of calls, the fake evolves like the C++ object (differential, hypothesis stateful).

The single-call ``agreement`` check starts every call from a fresh object; a fake can pass it and still drift over
a sequence (a ``pop`` that returns the front without removing it, an ``add`` that never evicts). Here the real
object and a fake made from it once with ``maybe_to_fake_obj`` evolve side by side, driven by a hypothesis
``RuleBasedStateMachine`` whose rules are the methods the fake defines and the custom ops that take the class;
each step, the observers after it, and a fresh fake of the C++ object's ``__obj_flatten__`` state must agree with
the evolved fake (see :mod:`conformance.torchbind.differential`). The minimal failing sequence is printed as a script.

Rule source: torch reuses one fakified object for a whole traced program (``torch/_library/fake_class_registry.py``
``maybe_to_fake_obj``; methods become ``call_torchbind``, ordered by effect tokens), so the fake's state after
several calls is what later calls in the same graph see.
"""

from __future__ import annotations

from ...torchbind import differential as engine
from ...core.results import Failure, Note, NotApplicable
from ...torchbind.context import ClassContext

#: The rule a drift breaks, by the phase it showed in (:class:`conformance.torchbind.differential.machine.Drift`).
PHASE_RULES = {"call": "differential.call-differs", "alias": "differential.alias-differs",
               "observer": "differential.observer-drifts", "state": "differential.state-drifts"}


def observer_lines(plan) -> list[str]:
    """What a reader needs to judge a drift's evidence: the observers called after every step, and each method
    callable without arguments that is not one, with why (one line each, :func:`conformance.torchbind.differential.plan_for`
    proved it)."""
    used = ", ".join(f"{o}()" for o in plan.observers) or "none (no method the proof accepts as one)"
    lines = [f"observers called after every step on both sides: {used}"]
    lines += [f"not an observer, driven as a step: {m}() {why}" for m, why in plan.not_observers.items()]
    return lines


def differential(ctx: ClassContext, _target: None) -> list[Failure]:
    """Call sequences drawn by hypothesis keep the fake in step with the C++ object (results, aliasing, state)."""
    run = engine.run_differential(ctx)
    notes = [f"not driven: {n}" for n in run.plan.notes]
    # Passing items show this with `pytest -rP`: what was driven, how much, and what was left out.
    print(run.summary())
    for n in notes:
        print("  " + n)
    for n in run.plan.observer_notes:
        print("  observers: " + n)
    drift = run.drift
    if drift is None:
        if not run.compared:
            raise NotApplicable(
                f"no step C++ accepted: in {run.sequences} sequences C++ raised on all {run.rejected} steps, so "
                f"nothing was compared; give arguments the class accepts with @conformance.strategy("
                f"{ctx.info.qualname!r}, 'method', ...) (a factory may take the object to respect its state)")
        return [Note(f"observers: {n}") for n in run.plan.observer_notes]
    rule, _args = drift.steps[-1]
    rejected = drift.rejected or [False] * len(drift.steps)
    calls = [r.code(a) + ("  (C++ raised: not applied to the fake)" if no else "")
             for (r, a), no in zip(drift.steps, rejected)]
    where = f"obj.{drift.observer}()" if drift.observer else None
    sequence = [f"shortest failing sequence found (two-call sequences are tried first, longer ones shrunk by "
                f"hypothesis), from the example object: {len(calls)} call{'s' if len(calls) > 1 else ''}"]
    sequence += [f"  {i}. {c}" for i, c in enumerate(calls, start=1)]
    if where and drift.phase == "observer":
        sequence.append(f"  then {where} on both sides")
    elif where:
        sequence.append(f"  then {where} on the fake and on a fake made now from the C++ object's state")
    extra = []
    if len(calls) == 1 and drift.phase in ("call", "alias"):
        extra.append(f"a single call from an example state: {ctx.info.test_name}::"
                     f"{'custom_op' if rule.op is not None else 'agreement'}[{rule.label}] may report it too")
    if run.flaky:
        extra.append("the failure did not reproduce reliably when hypothesis replayed it (nondeterminism?)")
    extra.append(f"found in {run.sequences} sequences / {run.steps} steps (shrinking included)")
    extra += observer_lines(run.plan) + [f"observers: {n}" for n in run.plan.observer_notes]
    summary = drift.summary
    if len(calls) > 1 or drift.phase in ("observer", "state"):
        summary = f"after {len(calls)} call{'s' if len(calls) > 1 else ''}: {summary}"
    cpp, fake = drift.cpp, drift.fake
    if drift.phase == "observer":
        cpp, fake = f"{where} {cpp}", f"{where} {fake}"
        calls.append(f"then {where}")
    elif drift.phase == "state":
        cpp = f"{where} on a fake made now from the C++ object's state {cpp}"
        fake = f"{where} on the fake that made the calls {fake}"
        calls.append(f"then {where}")
    return [Failure(summary, target=rule.label, cpp=cpp, fake=fake,
                    details=tuple(drift.details + sequence + extra + notes),
                    example="\n".join(drift.example.code()), call="; ".join(calls),
                    repro=engine.repro_script(ctx, drift), rule=PHASE_RULES[drift.phase])]
