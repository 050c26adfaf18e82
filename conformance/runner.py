"""Run checks without pytest: the core the plugin wraps, also usable from scripts and the project's tests."""

from __future__ import annotations

import dataclasses
import traceback
from typing import Any

from .checks import Check, all_checks
from .context import ClassContext, context_for
from .isolation import WorkerLost, calling
from .results import Failure, NotApplicable, Outcome, Verdict

__all__ = ["CheckTarget", "plan", "run_target", "run_class", "prepare_class", "lost_outcome",
           "lost_item_data"]


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


def plan(ctx: ClassContext, only: set[str] | None = None, skip: set[str] | None = None) -> list[CheckTarget]:
    """Every (check, target) pair for the class, in registry order; ``only`` limits it to those check names,
    ``skip`` leaves those out."""
    out = []
    for chk in all_checks():
        if (only is not None and chk.name not in only) or (skip and chk.name in skip):
            continue
        for target in chk.targets(ctx.info):
            out.append(CheckTarget(chk, ctx.info.qualname, target))
    return out


def run_target(unit: CheckTarget) -> Outcome:
    """Run one check on one target. Never raises for errors in user code or checks: an exception escaping the
    check becomes a failure that shows it; :class:`NotApplicable` becomes a skip."""
    outcome = Outcome(unit.check.name, unit.qualname, unit.target_name)
    try:
        with calling(f"check {unit.name} of {unit.qualname}", timed=False):
            result = unit.check.func(context_for(unit.qualname), unit.target)
        if isinstance(result, Verdict):
            outcome.failures, outcome.skipped, outcome.data = list(result.failures), result.skipped, result.data
        else:
            outcome.failures = list(result)
    except NotApplicable as exc:
        outcome.skipped = str(exc)
    except Exception as exc:  # noqa: BLE001 - reported as this check's failure
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        outcome.failures = [Failure(
            unit.check.name, unit.qualname, unit.target_name,
            f"the check could not complete: {type(exc).__name__}: {exc}",
            details=("traceback (most recent call last):", *[ln.rstrip() for ln in tb[-6:]]),
        )]
    return outcome


def prepare_class(qualname: str) -> Outcome:
    """Build what every check of the class shares (its example objects), so that a worker process can do it
    once under supervision (:meth:`conformance.isolation.Supervisor.prepare`); errors are left for the checks
    to report."""
    try:
        context_for(qualname).example_set
    except Exception:  # noqa: BLE001 - the examples check reports it
        pass
    return Outcome("prepare", qualname, None)


def lost_outcome(unit: CheckTarget, lost: WorkerLost, timeout: float) -> Outcome:
    """The failed :class:`Outcome` of a unit whose worker process crashed or was killed for hanging (see
    :mod:`conformance.isolation`), with the check's report data for such a case when it has any."""
    failure = lost.failure(unit.check.name, unit.qualname, unit.target_name, timeout)
    data = unit.check.lost(unit.qualname, unit.target, failure.summary) if unit.check.lost else None
    return Outcome(unit.check.name, unit.qualname, unit.target_name, failures=[failure], data=data)


def lost_item_data(qualnames: list[str], test_id: str, reason: str) -> dict | None:
    """Report data for the item ``test_id`` (``torchbind[ns.Cls]::check[target]``) of one of ``qualnames`` that
    produced no result because its process died (e.g. a pytest-xdist worker lost to a crash without process
    isolation): what its check's ``lost`` hook makes of ``reason``, or ``None``. Plans without building objects."""
    for qualname in qualnames:
        ctx = context_for(qualname)
        prefix = ctx.info.test_name + "::"
        if test_id.startswith(prefix):
            name = test_id[len(prefix):]
            for unit in plan(ctx):
                if unit.name == name:
                    return unit.check.lost(qualname, unit.target, reason) if unit.check.lost else None
    return None


def run_class(qualname: str, only: set[str] | None = None, skip: set[str] | None = None) -> list[Outcome]:
    """Run every applicable check on ``ns::Cls`` (or those in ``only``, less those in ``skip``) and return the
    outcomes in order."""
    return [run_target(u) for u in plan(context_for(qualname), only, skip)]
