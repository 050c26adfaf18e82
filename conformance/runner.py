"""Run checks without pytest: the engine the plugin wraps, also usable from scripts and the project's tests.

An :class:`Engine` holds what a run of checks is given (frozen :class:`~conformance.core.settings.Settings`, the
:class:`~conformance.core.registry.Registry` of the adopter's factories and strategies, the
:class:`~conformance.core.breadcrumbs.Tracer` calls are reported to) and what it caches (one
:class:`~conformance.torchbind.context.ClassContext` per class, with its example objects and matrix scenarios). The functions
below take the engine they use; ``None`` means a new one with the defaults (its caches last for that call only).
Nothing here knows about pytest or about processes: process isolation (:mod:`conformance.process`) runs these
functions in a worker and attaches a sink to the engine's tracer there.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .core.breadcrumbs import Tracer
from .checks import Check, all_checks
from .core.evidence import collecting
from .core.faults import UserFault, fault_failure, real_interrupt
from .kinds import context_for
from .matrix.cell import cell_failure, cell_skip_reason
from .core.registry import REGISTRY, Registry
from .engine.reproducers import MAX_CHECKED, check_reproducer
from .core.results import Cell, Failure, NotApplicable, Verdict, Status
from .core.settings import Settings

if TYPE_CHECKING:
    from .kinds import Context

__all__ = ["Engine", "CheckTarget", "RunPlan", "plan", "run_target", "run_class", "prepare_class", "lost_outcome",
           "unsendable_outcome", "RULES"]

#: The rule ids of the failures the runner itself makes (not a check's): a check that raised, a result the worker
#: could not send back. See also :data:`conformance.core.faults.RULES` and :data:`conformance.process.lost.RULES`.
RULES = {"run.check-error": "the check raised an exception of its own (a bug in the check or in what it called)",
         "process.unsendable-result": "the check's result could not be sent back from the worker process"}


class Engine:
    """The checks' run-time: ``settings`` (default ``Settings()``), ``registry`` (default: the process's
    :data:`~conformance.core.registry.REGISTRY`), ``tracer`` (default: a new :class:`~conformance.core.breadcrumbs.Tracer`,
    reporting nowhere until a worker process attaches a sink), and the cache of class contexts."""

    def __init__(self, settings: Settings | None = None, registry: Registry | None = None,
                 tracer: Tracer | None = None):
        self.settings = settings if settings is not None else Settings()
        self.registry = registry if registry is not None else REGISTRY
        self.tracer = tracer if tracer is not None else Tracer()
        self._contexts: dict[str, Context] = {}
        self._targets: dict[tuple[str, str], list[Any]] = {}  # (qualname, check) -> the check's targets

    def context(self, qualname: str) -> Context:
        """The :class:`~conformance.torchbind.context.ClassContext` of ``ns::Cls`` (a
        :class:`~conformance.custom.context.CustomClassContext` for a Python custom class ``module.QualName``),
        discovered on first use and cached. Raises ``KeyError`` (from discovery) for a class torch does not know."""
        ctx = self._contexts.get(qualname)
        if ctx is None:
            ctx = self._contexts[qualname] = context_for(qualname, self.settings, self.registry, self.tracer,
                                                         self.context)
        return ctx

    def targets(self, qualname: str, check: Check) -> list[Any]:
        """The targets of ``check`` in the class ``qualname`` (``check.targets`` of its context), listed once and
        kept: every plan of the class (the collection's, the recorder's count of planned cells and its stale
        baseline entries) reads the same list."""
        key = (qualname, check.name)
        if key not in self._targets:
            self._targets[key] = list(check.targets(self.context(qualname)))
        return self._targets[key]

    def lost_examples(self) -> bool:
        """Whether an example object of a TorchBind class this engine has prepared was left out because building it
        crashed or hung a worker process (:attr:`~conformance.torchbind.context.ClassContext.examples_lost`; a Python custom
        class draws its objects in each check): every check of that class, and of a class whose arguments it
        gives, was then judged without that state, a verdict a rerun need not give again."""
        return any(getattr(ctx, "examples_lost", False) for ctx in self._contexts.values())

    def clear(self) -> None:
        """Forget every cached context (with its example objects and scenarios): needed after libraries, fakes or
        factories change."""
        self._contexts.clear()
        self._targets.clear()


@dataclasses.dataclass(frozen=True)
class CheckTarget:
    """One unit of work: a check applied to one target of one class; ``name`` is the pytest item name."""

    check: Check
    qualname: str
    target: Any

    @property
    def name(self) -> str:
        tid = self.check.target_id(self.target)
        return self.check.name if tid is None else f"{self.check.name}[{tid}]"

    @property
    def target_name(self) -> str | None:
        return self.check.target_id(self.target)


def plan(qualname: str, engine: Engine | None = None, only: Iterable[str] | None = None,
         skip: Iterable[str] | None = None, backends: Iterable[str] | None = None) -> list[CheckTarget]:
    """Every (check, target) pair for the class ``ns::Cls``, in the checks' order
    (:data:`conformance.core.names.CHECKS`); ``only`` limits it to those check names, ``skip`` leaves those out,
    ``backends`` limits the coverage matrix's cells to those backends (``None``: no limit). Builds no objects,
    except where a check's target list needs them; each check's targets are listed once per engine
    (:meth:`Engine.targets`)."""
    engine = engine or Engine()
    ctx = engine.context(qualname)
    only = None if only is None else set(only)
    skip = set(skip or ())
    backends = None if backends is None else set(backends)
    out = []
    for chk in all_checks():
        if (only is not None and chk.name not in only) or chk.name in skip or ctx.kind not in chk.kinds:
            continue
        for target in engine.targets(qualname, chk):
            if backends is not None and chk.scope == "cell" and target.backend not in backends:
                continue
            out.append(CheckTarget(chk, qualname, target))
    return out


class RunPlan:
    """The units (check, target) of a run's selected classes, planned once and shared: the collection makes its
    items from it, and the controller's recorder reads from it the cell of an item whose process died, the
    planned cells of an interrupted run and the full plan the baseline is compared with — no role plans again.

    ``engine``: the run's :class:`Engine`; ``classes``: the selected class names. A plan is made on first use (on
    an xdist controller, which collects nothing, only when the recorder needs one)."""

    def __init__(self, engine: Engine, classes: Iterable[str]):
        self.classes = tuple(classes)
        self.settings = engine.settings
        self._engine = engine
        self._plans: dict[tuple, list[CheckTarget]] = {}

    def units(self, qualname: str, only: Iterable[str] | None = None,
              backends: Iterable[str] | None = None) -> list[CheckTarget]:
        """The units of ``qualname`` in the checks' order: all of them, or those of the checks ``only`` with the
        matrix cells of ``backends`` (``None``: no limit), as :func:`plan` gives them. Each is planned once; a
        check's targets are listed once (:meth:`Engine.targets`), and only for the checks asked for: a run narrowed
        to one check lists no matrix cell."""
        only = None if only is None else frozenset(only)
        backends = None if backends is None else frozenset(backends)
        full = self._plans.get((qualname, None, None))
        if full is not None:
            return [u for u in full if (only is None or u.check.name in only)
                    and (backends is None or u.check.scope != "cell" or u.target.backend in backends)]
        key = (qualname, only, backends)
        if key not in self._plans:
            self._plans[key] = plan(qualname, self._engine, only=only, backends=backends)
        return list(self._plans[key])

    def selected(self, qualname: str) -> list[CheckTarget]:
        """The units of ``qualname`` this run collects: those of its ``--torchbind-checks`` and
        ``--torchbind-backends``."""
        return self.units(qualname, only=self.settings.checks, backends=self.settings.backends)


def _collect(unit: CheckTarget, result: Any, torch_defects: str = "fail") -> Verdict:
    """The :class:`Verdict` of what a check returned: a :class:`Cell`, or failures (an iterable or ``None``). A
    ``TORCH_DEFECT`` cell fails its item, unless ``torch_defects`` is ``"skip"``
    (:attr:`~conformance.core.settings.Settings.torch_defects`)."""
    check, qualname, target = unit.check.name, unit.qualname, unit.target_name
    if isinstance(result, Cell):
        if result.status is Status.FAILED or (result.status is Status.TORCH_DEFECT and torch_defects == "fail"):
            return Verdict.of_failures(check, qualname, target, [cell_failure(result)], cell=result)
        if result.status is Status.PASSED:
            # A cell that passed although some of its objects could not show a stale program (a changed field
            # that leaves the output as it was; a cell none of whose objects could is UNTOLD): said in the item's
            # notes too, not only in the report's details.
            return Verdict(check, qualname, target, cell=result,
                           notes=[d for d in result.details if "cannot tell" in d])
        return Verdict.skip(check, qualname, target, cell_skip_reason(result), cell=result)
    return Verdict.of_failures(check, qualname, target, list(result or ()))


def run_target(unit: CheckTarget, engine: Engine | None = None, known_failure: bool = False) -> Verdict:
    """Run one check on one target. Never raises for errors in user code or checks: an exception escaping the
    check becomes a failure that shows it; :class:`NotApplicable` becomes a skip; a raised :class:`Failure` is
    the check's one failure. A ``BaseException`` that is not an ``Exception`` (``SystemExit``, a
    ``KeyboardInterrupt`` from user code) fails the item too (:mod:`conformance.core.faults`); only a real interrupt
    (Ctrl-C) is raised on. With ``settings.check_reproducers`` the first failures' reproducers are run in a fresh
    interpreter (:mod:`conformance.engine.reproducers`), unless ``known_failure`` (a baseline lists the item: its failure
    is expected, and nobody reads its reproducer in a green run)."""
    engine = engine or Engine()
    outcome = _run_check(unit, engine)
    if engine.lost_examples():  # judged without an example a crash or hang took away: never kept for reuse
        outcome.lost = True
    if engine.settings.check_reproducers and engine.settings.load_code and outcome.failures and not known_failure:
        with engine.tracer.calling(f"check {unit.name} of {unit.qualname}: its reproducers, in a fresh interpreter",
                                   timed=False):
            outcome.failures = [check_reproducer(f) if i < MAX_CHECKED else f
                                for i, f in enumerate(outcome.failures)]
    return outcome


#: What the user can give when a check compared nothing, for the skip :func:`require_evidence` makes.
NO_EVIDENCE_HINT = ("give example objects in the states the class is used in (@conformance.examples({q!r})) and "
                    "arguments it accepts (@conformance.strategy({q!r}, 'method', 'arg'))")


def require_evidence(outcome: Verdict, name: str) -> Verdict:
    """The evidence rule, enforced here for every check of either kind of class: a ``PASSED`` outcome (and its
    cell) whose check recorded no comparison (:attr:`Verdict.evidence` is empty) becomes a skip saying that
    nothing was compared and what the user can give. ``name`` is the item's name (``agreement[pop]``). Other
    outcomes are returned unchanged."""
    if outcome.status is not Status.PASSED or outcome.evidence.total:
        return outcome
    hint = NO_EVIDENCE_HINT.format(q=outcome.qualname)
    reason = (f"{name} compared nothing: every call it would compare was rejected by the real object or could "
              f"not be made, so there is no evidence to pass on; {hint}")
    if outcome.cell is not None:
        outcome.cell.status, outcome.cell.reason = Status.SKIPPED, reason
    skipped = Verdict.skip(outcome.check, outcome.qualname, outcome.target, reason, cell=outcome.cell)
    skipped.notes, skipped.evidence = outcome.notes, outcome.evidence
    return skipped


def _run_check(unit: CheckTarget, engine: Engine) -> Verdict:
    """:func:`run_target` without the last step."""
    with collecting() as evidence:
        outcome = _run_unchecked(unit, engine)
    outcome.evidence = evidence
    return require_evidence(outcome, unit.name)


def _run_unchecked(unit: CheckTarget, engine: Engine) -> Verdict:
    """Run the check and turn what it returned or raised into an :class:`Verdict`."""
    check, qualname, target = unit.check.name, unit.qualname, unit.target_name
    try:
        excluded = _excluded(unit, engine)
        if excluded is not None:
            return Verdict.skip(check, qualname, target, excluded)
        with engine.tracer.calling(f"check {unit.name} of {qualname}", timed=False):
            result = unit.check.func(engine.context(qualname), unit.target)
        return _collect(unit, result, engine.settings.torch_defects)
    except NotApplicable as exc:
        return Verdict.skip(check, qualname, target, str(exc))
    except Failure as failure:
        return Verdict.of_failures(check, qualname, target, [failure])
    except Exception as exc:  # noqa: BLE001 - reported as this check's failure
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        return Verdict.of_failures(check, qualname, target, [Failure(
            f"the check could not complete: {type(exc).__name__}: {exc}",
            details=("traceback (most recent call last):", *[ln.rstrip() for ln in tb[-6:]]), rule="run.check-error",
        )])
    except BaseException as exc:  # SystemExit, a KeyboardInterrupt raised by a fake, ...: this item's failure
        if real_interrupt(exc):
            raise
        return lost_outcome(unit, exc.failure() if isinstance(exc, UserFault) else fault_failure(exc))


def _excluded(unit: CheckTarget, engine: Engine) -> str | None:
    """Why no check judges the unit's method or op of a TorchBind class, when the adopter excluded it
    (``conformance.strategy(qualname, name)(lambda: None)``: a method nothing may call, such as one that
    dereferences an int as a pointer), else ``None``. Every check, ``coverage`` and ``signature`` included: an
    excluded method is out of the gate, not only out of its calls. A Python custom class's items of a member
    judge what a compiled program reads of it (``guards[size]``), which its exclusion from the calls the checks
    make does not touch: they run as before."""
    if unit.check.scope not in ("method", "op"):
        return None
    context = engine.context(unit.qualname)
    name = getattr(unit.target, "qualname", unit.target)
    arguments = getattr(context, "arguments", None)
    if getattr(context, "kind", None) != "torchbind" or not isinstance(name, str) or arguments is None \
            or not arguments.excluded(name):
        return None
    return (f"{name} is excluded by conformance.strategy({unit.qualname!r}, {name!r}) returning None: nothing "
            "calls it and no check judges it")


def prepare_class(qualname: str, engine: Engine) -> Verdict:
    """Build what every check of the class shares (its example objects), so that a worker process can do it
    once under supervision (:meth:`conformance.process.Supervisor.prepare_once`); errors are left for the checks
    to report."""
    try:
        engine.context(qualname).example_set
    except BaseException as exc:  # noqa: BLE001 - the examples check reports it
        if real_interrupt(exc):
            raise
    return Verdict("prepare", qualname, None)


def lost_outcome(unit: CheckTarget, failure: Failure) -> Verdict:
    """The failed :class:`Verdict` of a unit whose worker process crashed or was killed for hanging (``failure``:
    what the process layer made of it, :meth:`conformance.process.WorkerLost.failure`), with the check's cell for
    such a case when it has one."""
    cell = unit.check.lost(unit.qualname, unit.target, failure.summary) if unit.check.lost else None
    outcome = Verdict.of_failures(unit.check.name, unit.qualname, unit.target_name, [failure], cell=cell)
    outcome.lost = True
    return outcome


def unsendable_outcome(outcome: Verdict, exc: Exception) -> Verdict:
    """The failed outcome a worker process sends in place of ``outcome`` when that cannot be sent back (``exc``:
    e.g. an unpicklable value in its data)."""
    unsent = Verdict.of_failures(outcome.check, outcome.qualname, outcome.target, [Failure(
        f"the check's result could not be sent back from the worker process: {exc!r}",
        rule="process.unsendable-result")])
    unsent.lost = True
    return unsent


def run_class(qualname: str, only: Iterable[str] | None = None, skip: Iterable[str] | None = None,
              engine: Engine | None = None, backends: Iterable[str] | None = None) -> list[Verdict]:
    """Run every applicable check on ``ns::Cls`` (or those in ``only``, less those in ``skip``; matrix cells of
    ``backends`` only, when given) with ``engine`` and return the outcomes in order."""
    engine = engine or Engine()
    return [run_target(u, engine) for u in plan(qualname, engine, only, skip, backends)]
