"""Running the differential test: the drawn call sequences (:func:`_program`,
:func:`_explicit_programs`), and :func:`run_differential`, which runs them through the machine and returns a
:class:`Run`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import time

import hypothesis
import hypothesis.core
from hypothesis import given, settings as Settings, strategies as st
from hypothesis.errors import Unsatisfiable

if sys.version_info < (3, 11):  # pragma: no cover - the builtin is 3.11+; hypothesis depends on the backport there
    from exceptiongroup import BaseExceptionGroup
from hypothesis.reporting import with_reporter
from hypothesis.strategies import SearchStrategy

from ...engine.type_strategies import INT_BOUND
from ..context import ClassContext, quiet_torch_logs
from ...engine.search import CI_PROFILE, DEFAULT_EXAMPLES, DEV_PROFILE, STEP_COUNT, Found, hypothesis_settings
from ...engine.values import ArgumentSet
from .machine import Drift, _Machine
from .plan import Plan, plan_for

__all__ = ["DEFAULT_EXAMPLES", "CI_PROFILE", "DEV_PROFILE", "STEP_COUNT", "MAX_EXPLICIT", "hypothesis_settings",
           "Run", "run_differential"]


@contextlib.contextmanager
def _quiet():
    """:func:`conformance.torchbind.context.quiet_torch_logs`, and FakeTensorMode's own error log ("failed while
    attempting to run meta for ...", logged for every fake op that raises): expected raises are compared, not
    logged. Entered once per run: ``Logger.setLevel`` clears every logger's cache."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    old = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with quiet_torch_logs():
            yield
    finally:
        logger.setLevel(old)


def _program(plan: Plan, max_steps: int) -> SearchStrategy:
    """Hypothesis strategy of one call sequence: ``(example index, [(rule index, ArgumentSet), ...])`` with 1 to
    ``max_steps`` steps.

    This is the equivalent of a ``RuleBasedStateMachine`` with an ``initialize`` rule choosing the example and
    one rule per :class:`Rule`, written as a list so that hypothesis's list shrinker deletes steps cleanly: the
    stateful runner draws its swarm-testing rule flags lazily inside the steps, and deleting the step that drew
    one misaligns every later step and leaves failing sequences unshrunk.
    """
    # A rule of weight w is offered w times (see _reshapes); all offers draw the same step, and shrinking moves
    # each step to its rule's first offer. A rule whose arguments depend on the object draws them when the step
    # runs (its placeholder here is None; see _execute).
    step = st.one_of([st.tuples(st.just(i), r.args if r.args is not None else st.just(None))
                      for i, r in enumerate(plan.rules) for _ in range(r.weight)])
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


def _execute(plan: Plan, stats: dict, program, data=None) -> None:
    """Run one program; raises :class:`Found` at the first disagreement. ``data`` (hypothesis's ``st.data()``)
    draws the arguments of a rule whose strategy depends on the object, from the C++ object as it is before the
    step; without it (the explicit sequences) such steps are left out, as is a step whose strategy draws nothing
    for the object's state. Under hypothesis (``data`` given) a sequence in which C++ rejected every step is
    rejected (``assume``): it compared nothing."""
    example, steps = program
    machine = _Machine(plan, stats)
    machine.start(example)
    for index, args in steps:
        rule = plan.rules[index]
        if args is None:
            strat = rule.for_object(machine.real.obj) if data is not None else None
            if strat is None or strat.is_empty:
                continue
            args = data.draw(strat, label=f"arguments of {rule.label}")
        machine.step(rule, args)
    if data is not None:
        hypothesis.assume(machine.compared > 0)


@dataclasses.dataclass
class Run:
    """The result of :func:`run_differential`: ``drift`` (``None`` when none was found), the :class:`Plan`,
    counts of ``sequences`` and ``steps`` run (shrinking included), wall ``seconds``, ``flaky`` when the failure
    did not reproduce on replay, the hypothesis ``settings`` used, and how many steps were ``compared`` (C++
    accepted them) and ``rejected`` (C++ raised: not applied to the fake, not comparisons); ``plan_seconds``: the
    time :func:`plan_for` took (the observers' proof included), ``fresh_reused``: how many fresh fakes' observer
    results were taken from an earlier fakification of a state read the same way (see
    :meth:`.machine._Machine._fresh_results`); ``audited``: on how many states the sequences reached the observers
    were proven again (:class:`.observers.Audit`). With an observer refuted there, every count is over all the
    rounds (see :func:`_run`), and the plan is the last round's."""

    plan: Plan
    drift: Drift | None
    sequences: int
    steps: int
    seconds: float
    settings: Settings
    flaky: bool = False
    compared: int = 0
    rejected: int = 0
    plan_seconds: float = 0.0
    fresh_reused: int = 0
    audited: int = 0

    def summary(self) -> str:
        """One line: what was driven and how much."""
        rules = ", ".join(r.label if r.op is None else r.name if not r.callee.at
                          else f"{r.name} (the object as {r.callee.argument_names(0)[0][0]})" for r in self.plan.rules)
        obs = ", ".join(f"{o}()" for o in self.plan.observers) or "none"
        if self.plan.audit is not None and self.plan.observers:
            obs += (f" (proven on {self.plan.audit.proof.states} states, and on {self.audited} states the sequences "
                    "reached)")
        steps = "; ".join(f"{m}() {why}" for m, why in self.plan.not_observers.items())
        if steps:
            obs += f"; not observers (driven as steps): {steps}"
        return (f"{self.plan.ctx.info.qualname}: {self.sequences} call sequences, {self.steps} steps ({self.compared} "
                f"compared, {self.rejected} rejected by C++ and not applied to the fake) in "
                f"{self.seconds:.1f} s (max_examples={self.settings.max_examples}, "
                f"up to stateful_step_count={self.settings.stateful_step_count} calls each); rules: {rules}; "
                f"observers: {obs}; int arguments without a strategy drawn from -2..8 and -{INT_BOUND}..{INT_BOUND}")


def run_differential(ctx: ClassContext, *, examples: int | None = None, seed: int | None = None,
                     settings: Settings | None = None) -> Run:
    """Run the differential state machine on ``ctx``'s class and return a :class:`Run`.

    ``examples`` overrides ``max_examples`` (default: the context's ``settings.examples``, i.e.
    ``--torchbind-examples``); ``seed`` seeds hypothesis (default:
    ``--hypothesis-seed`` if given); ``settings`` replaces the base settings of :func:`hypothesis_settings`.
    Raises :class:`~conformance.core.results.NotApplicable` (see :func:`plan_for`); errors inside the harness or in
    the user's strategies propagate. FakeTensorMode's and the fake-class registry's logs are silenced meanwhile.
    """
    with _quiet():
        return _run(ctx, examples, seed, settings)


def _run(ctx: ClassContext, examples: int | None, seed: int | None, settings: Settings | None) -> Run:
    """Plan, run the sequences, and when the plan's :class:`~.observers.Audit` refuted an observer on a state they
    reached (or on the states of the drift found), plan again with it as a step and run again: a method taken for
    an observer hides drifts or invents them, so that run's verdict is not kept. Each round refutes one observer
    at least, so there are at most as many rounds as observers, plus one."""
    used = hypothesis_settings(ctx.settings.examples if examples is None else examples, settings)
    stats = {"sequences": 0, "steps": 0, "compared": 0, "rejected": 0, "fresh_reused": 0}
    refuted: dict[str, str] = {}
    plan_seconds = seconds = 0.0
    audited = 0
    while True:
        planning = time.perf_counter()
        plan = plan_for(ctx, refuted)
        plan_seconds += time.perf_counter() - planning
        start = time.perf_counter()
        drift, flaky = _sequences(ctx, plan, used, seed, stats)
        if drift is not None:
            _audit_drift(plan, drift)
        seconds += time.perf_counter() - start
        audited += plan.audit.audited
        if not plan.audit.refuted:
            break
        refuted |= plan.audit.refuted
    return Run(plan, drift, stats["sequences"], stats["steps"], seconds, used, flaky,
               stats["compared"], stats["rejected"], plan_seconds, stats["fresh_reused"], audited)


def _audit_drift(plan: Plan, drift: Drift) -> None:
    """Audit every state on the way to ``drift`` (whatever the budget): a drift shown with a method that is not an
    observer is no verdict."""
    calls: tuple = ()
    for (rule, args), rejected in zip(drift.steps, drift.rejected):
        if rejected:
            return
        calls += (rule.call(args),)
        plan.audit.visit(drift.example, calls, budget=False)


def _sequences(ctx: ClassContext, plan: Plan, used: Settings, seed: int | None, stats: dict
               ) -> tuple[Drift | None, bool]:
    """Run the explicit sequences, then hypothesis's, on ``plan``: ``(drift or None, flaky)``."""

    def differential(program, data):
        _execute(plan, stats, program, data)

    # Distinct example-database entries per class (hypothesis keys them by the test function's source).
    differential._hypothesis_internal_add_digest = f"torchbind-differential:{ctx.info.qualname}".encode()
    test = given(_program(plan, used.stateful_step_count), st.data())(used(differential))
    chosen = seed if seed is not None else hypothesis.core.global_force_seed
    if chosen is not None:
        test = hypothesis.seed(chosen)(test)
    drift, flaky = None, False
    # The explicit two-call sequences first, in every profile (hypothesis's @example cannot take st.data()); all
    # of them, keeping the shortest drift (one that shows after the first call beats a two-call one).
    drifts = []
    for program in _explicit_programs(plan):
        try:
            _execute(plan, stats, program)
        except Found as exc:
            drifts.append(exc.finding)
    try:
        if drifts:
            best = min(drifts, key=lambda d: len(d.steps))
            raise Found(best, best.summary)
        with with_reporter(lambda _msg: None):
            test()
    except Found as exc:
        drift = exc.finding
    except Unsatisfiable:
        pass  # every sequence hypothesis drew was rejected: C++ accepted no step (the check skips, saying so)
    except BaseExceptionGroup as group:  # FlakyFailure, or several distinct failures
        match, _rest = group.split(Found)
        if match is None:
            raise
        drift = _first_found(match).finding
        flaky = "Flaky" in type(group).__name__
    return drift, flaky


def _first_found(group: BaseExceptionGroup) -> Found:
    for exc in group.exceptions:
        if isinstance(exc, Found):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            return _first_found(exc)
    raise AssertionError("no Found in the group")  # pragma: no cover - split() guarantees one
