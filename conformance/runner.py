"""Run checks without pytest: the core the plugin wraps, also usable from scripts and the project's tests.

Every function takes the :class:`~conformance.session.Session` whose classes, settings and caches it uses
(default: :func:`conformance.session.current`).
"""

from __future__ import annotations

import dataclasses
import traceback
from typing import Any

from .checks import Check, all_checks
from .faults import UserFault, fault_failure, real_interrupt
from .isolation import WorkerLost, calling
from .matrix.cell import cell_failure, cell_skip_reason
from .results import Cell, Failure, NotApplicable, Outcome, Status
from .session import Session, current

__all__ = ["CheckTarget", "plan", "run_target", "run_class", "prepare_class", "lost_outcome", "lost_cell"]


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


def plan(qualname: str, session: Session | None = None, only: set[str] | None = None,
         skip: set[str] | None = None) -> list[CheckTarget]:
    """Every (check, target) pair for the class ``ns::Cls``, in registry order; ``only`` limits it to those check
    names (default: the session's ``settings.checks``), ``skip`` leaves those out. Builds no objects, except
    where a check's target list needs them."""
    session = session or current()
    ctx = session.context(qualname)
    if only is None and session.settings.checks is not None:
        only = set(session.settings.checks)
    out = []
    for chk in all_checks():
        if (only is not None and chk.name not in only) or (skip and chk.name in skip):
            continue
        for target in chk.targets(ctx):
            out.append(CheckTarget(chk, qualname, target))
    return out


def _collect(unit: CheckTarget, result: Any) -> Outcome:
    """The :class:`Outcome` of what a check returned: a :class:`Cell`, or failures (an iterable or ``None``)."""
    check, qualname, target = unit.check.name, unit.qualname, unit.target_name
    if isinstance(result, Cell):
        if result.status is Status.FAILED:
            return Outcome.of_failures(check, qualname, target, [cell_failure(result)], cell=result)
        if result.status is Status.PASSED:
            return Outcome(check, qualname, target, cell=result)
        return Outcome.skip(check, qualname, target, cell_skip_reason(result), cell=result)
    return Outcome.of_failures(check, qualname, target, list(result or ()))


def run_target(unit: CheckTarget, session: Session | None = None) -> Outcome:
    """Run one check on one target. Never raises for errors in user code or checks: an exception escaping the
    check becomes a failure that shows it; :class:`NotApplicable` becomes a skip; a raised :class:`Failure` is
    the check's one failure. A ``BaseException`` that is not an ``Exception`` (``SystemExit``, a
    ``KeyboardInterrupt`` from user code) fails the item too (:mod:`conformance.faults`); only a real interrupt
    (Ctrl-C) is raised on."""
    session = session or current()
    check, qualname, target = unit.check.name, unit.qualname, unit.target_name
    try:
        with calling(f"check {unit.name} of {qualname}", timed=False):
            result = unit.check.func(session.context(qualname), unit.target)
        return _collect(unit, result)
    except NotApplicable as exc:
        return Outcome.skip(check, qualname, target, str(exc))
    except Failure as failure:
        return Outcome.of_failures(check, qualname, target, [failure])
    except Exception as exc:  # noqa: BLE001 - reported as this check's failure
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        return Outcome.of_failures(check, qualname, target, [Failure(
            f"the check could not complete: {type(exc).__name__}: {exc}",
            details=("traceback (most recent call last):", *[ln.rstrip() for ln in tb[-6:]]),
        )])
    except BaseException as exc:  # SystemExit, a KeyboardInterrupt raised by a fake, ...: this item's failure
        if real_interrupt(exc, session):
            raise
        failure = exc.failure() if isinstance(exc, UserFault) else fault_failure(exc)
        cell = unit.check.lost(qualname, unit.target, failure.summary) if unit.check.lost else None
        return Outcome.of_failures(check, qualname, target, [failure], cell=cell)


def prepare_class(qualname: str, session: Session | None = None) -> Outcome:
    """Build what every check of the class shares (its example objects), so that a worker process can do it
    once under supervision (:meth:`conformance.isolation.Supervisor.prepare`); errors are left for the checks
    to report."""
    session = session or current()
    try:
        session.context(qualname).example_set
    except BaseException as exc:  # noqa: BLE001 - the examples check reports it
        if real_interrupt(exc, session):
            raise
    return Outcome("prepare", qualname, None)


def lost_outcome(unit: CheckTarget, lost: WorkerLost, timeout: float) -> Outcome:
    """The failed :class:`Outcome` of a unit whose worker process crashed or was killed for hanging (see
    :mod:`conformance.isolation`), with the check's cell for such a case when it has one."""
    failure = lost.failure(timeout)
    cell = unit.check.lost(unit.qualname, unit.target, failure.summary) if unit.check.lost else None
    return Outcome.of_failures(unit.check.name, unit.qualname, unit.target_name, [failure], cell=cell)


def lost_cell(session: Session, test_id: str, reason: str) -> Cell | None:
    """The :class:`Cell` of the item ``test_id`` (``torchbind[ns.Cls]::check[target]``) of one of the session's
    classes when it produced no result because its process died (e.g. a pytest-xdist worker lost to a crash
    without process isolation): what its check's ``lost`` hook makes of ``reason``, or ``None`` for an item
    that is not a cell. Plans without building objects."""
    for qualname in session.classes:
        prefix = session.context(qualname).info.test_name + "::"
        if test_id.startswith(prefix):
            name = test_id[len(prefix):]
            for unit in plan(qualname, session):
                if unit.name == name:
                    return unit.check.lost(qualname, unit.target, reason) if unit.check.lost else None
    return None


def run_class(qualname: str, only: set[str] | None = None, skip: set[str] | None = None,
              session: Session | None = None) -> list[Outcome]:
    """Run every applicable check on ``ns::Cls`` (or those in ``only``, less those in ``skip``) and return the
    outcomes in order."""
    session = session or current()
    return [run_target(u, session) for u in plan(qualname, session, only, skip)]
