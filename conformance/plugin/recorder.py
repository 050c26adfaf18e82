"""The controller's recorder: what the test reports bring back, and the files and summaries made from it.

A :class:`Recorder` exists only on the controller of a pytest-xdist run or in a serial run (never on an xdist
worker) and is registered as a plugin there, for the two hooks without a ``config`` argument:
``pytest_runtest_logreport`` (every item's :class:`~conformance.core.results.Verdict`, with its matrix cell and
notes, rebuilt here, and only here, with :meth:`~conformance.core.results.Verdict.from_json` from the report's
``torchbind`` attribute that :mod:`conformance.plugin.items` puts on it; pytest-xdist carries report attributes from
the workers, as it does for hypothesis's statistics) and, where pytest-xdist is installed, ``pytest_handlecrashitem`` (an item whose
worker died before it reported: :class:`CrashHook`). Nothing here reads pytest's report text.

Faults around the run (see docs/reference/what-happens-when.md): files are written only when a torchbind item ran,
atomically; an ``OSError`` writing one becomes a one-line warning in the terminal summary and the other files are
still written.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Iterable

import pytest

from .baseline import accept_changes, accept_warning, merge_accepted, save_baseline, stale_entries
from ..core.files import describe_os_error
from ..core.names import REPORT_ATTR
from .options import RunOptions
from ..core.qualname import item_of_id, node_id, qualname_of_id
from ..reports import build_report, write_report
from ..reports.markdown import matrix_title, render as render_markdown
from ..reports.terminal import render_lines
from ..core.results import NO_EAGER_REFERENCE, Cell, Status, Verdict
from ..runner import CheckTarget, RunPlan

__all__ = ["Recorder", "CrashHook", "lost_reason", "nothing_compared"]


def lost_reason(report: pytest.TestReport) -> str:
    """Why a torchbind item reported no result: its pytest-xdist worker died running it (a crash when checks run
    without process isolation). The worker is named from the report's ``node`` (xdist's worker handle)."""
    worker = getattr(getattr(report, "node", None), "workerinput", {}).get("workerid")
    who = f"worker {worker!r}" if worker else "the process running it"
    return f"{who} crashed (or was killed) while running it, before it reported a result"


def reuse_line(verdicts: Iterable[Verdict], reading: bool) -> str | None:
    """One line for the terminal summary saying how many of ``verdicts`` (the recorder's verdicts) were read
    back from an earlier run by ``--torchbind-reuse`` and what they were; with reuse on (``reading``) also when
    none was (a first run, changed inputs, or a cache CI did not restore look alike otherwise). ``None`` with
    reuse off, or without verdicts."""
    verdicts = list(verdicts)
    reused = [v for v in verdicts if v.reused]
    if not verdicts or not (reused or reading):
        return None
    if not reused:
        return (f"torchbind: 0 of {len(verdicts)} verdicts reused: none was kept under the same key in pytest's "
                "cache (a first run, changed inputs, or a .pytest_cache that was not restored)")
    kinds = {"passed": 0, "skipped": 0, "known failure": 0}
    for v in reused:
        kinds["known failure" if v.status is Status.FAILED else v.status.value] += 1
    what = ", ".join(f"{n} {kind}{'s' if kind == 'known failure' and n != 1 else ''}" for kind, n in kinds.items()
                     if n)
    return (f"torchbind: {len(reused)} of {len(verdicts)} verdicts reused from earlier runs ({what}; "
            "--torchbind-reuse=off runs them again)")


def accept_reason(verdict: Verdict) -> str:
    """The reason ``--torchbind-accept`` writes for a failed ``verdict``: for a matrix cell that is torch's defect,
    ``torch defect: <signature>`` (:func:`conformance.matrix.cell.defect_signature`: the backend, and the exception's
    type and torch site or what is wrong), which names no value of the run; else the verdict's summary."""
    cell = verdict.cell
    if cell is not None and cell.status is Status.TORCH_DEFECT and cell.signature:
        return f"torch defect: {cell.signature}"
    return verdict.summary


def _cause(reason: str) -> str:
    """The cause of a skip ``reason``: a matrix cell's without its :data:`NO_EAGER_REFERENCE` prefix."""
    return reason.removeprefix(NO_EAGER_REFERENCE)


def nothing_compared(verdicts: Iterable[Verdict]) -> list[str]:
    """One line per class of which items ran (``verdicts``: the verdicts of the items that ran, by the recorder)
    and not one compared anything: every such item skipped (a check's skip, an n/a or unsupported matrix cell), none
    passed, failed or was a known failure. The rule is the developers' guide's "no pass without evidence": such a
    run says nothing of the class, so the gate must not report success. Items the user deselected (``-k``,
    ``--deselect``, ``--torchbind-checks``) never ran and do not count; a class with one comparison is judged by
    its items as usual. Each line names the class, how many items skipped, the most common reason (which says what
    the adopter can give) and the general way to give it. Reasons are counted by cause: a matrix cell's ``no eager
    reference: CAUSE`` and a check's ``CAUSE`` are one (the line then quotes the cause alone)."""
    by_class: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        by_class.setdefault(verdict.qualname, []).append(verdict)
    lines = []
    for qualname, ran in by_class.items():
        if any(v.status is not Status.SKIPPED for v in ran):
            continue
        # Count causes, not wordings: a matrix cell says "no eager reference: CAUSE" where a check says "CAUSE"
        # (a new user's trial: 53 of 55 skips had one cause, the line said 38 of 55).
        causes = Counter(_cause(v.summary) for v in ran)
        cause, count = causes.most_common(1)[0]
        worded = {v.summary for v in ran if _cause(v.summary) == cause}
        reason = worded.pop() if len(worded) == 1 else cause
        give = "" if "@conformance.examples(" in reason else (
            f"; give what the reasons ask for (example objects with @conformance.examples({qualname!r}), "
            f"arguments with conformance.strategy({qualname!r}, ...))")
        lines.append(
            f"nothing was compared for {qualname}: all {len(ran)} of its items that ran were skipped (n/a "
            f"included), so this run is no evidence about it and fails; the most common reason ({count} of "
            f"{len(ran)}): {reason}{give}; pytest -rs lists every item's reason")
    return lines


class Recorder:
    """Collects the torchbind reports of one run (controller or serial run) and writes what they make.

    ``options``: the run's options (report path, baseline, accept); ``run_plan``: the run's one
    :class:`~conformance.runner.RunPlan` of the selected classes (in a serial run, the one the collection made its
    items from), which gives the cells of items that reported nothing, the planned cells of an interrupted run and
    the full plan the baseline is compared with — the recorder never plans; ``labels``: a function giving the
    report's run labels."""

    def __init__(self, options: RunOptions, run_plan: RunPlan, labels: Callable[[], dict]):
        self.options, self.run_plan, self.classes, self.labels = options, run_plan, run_plan.classes, labels
        self.cells: list[Cell] = []
        self.accepted: dict[str, tuple[bool, str]] = {}  # test id -> (check failed, summary): verdicts only
        self.verdicts: dict[str, Verdict] = {}  # node id -> the item's verdict, in the order items reported
        self.crashed: set[str] = set()  # node ids whose xdist worker died running them (CrashHook)
        self.ran = False  # a torchbind item ran (reports are written only then)
        self.incomplete: str | None = None  # why the report misses cells (set at the end of an interrupted run)
        self.stale: list[str] = []  # baseline entries naming tests the plan no longer has (found at the end)
        self.stale_removed = False  # ... and removed by --torchbind-accept
        self.accepted_changes: list[str] | None = None  # what --torchbind-accept changed in the file (when written)
        self.reports_written: list = []  # the report files written (--torchbind-report, each)
        self.warnings: list[str] = []  # end-of-run failures, one line each in the terminal summary
        self.uncompared: list[str] = []  # classes of which nothing was compared (found at the end: the exit status)

    # ----- hooks (this object is registered as a plugin on the controller) -------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Take a torchbind item's report: that an item ran, its verdict (for the report and for
        ``--torchbind-accept``) and its matrix cell. An item that failed without data never reported a result (its
        xdist worker was lost, or an error outside the check): its cell is recorded as failed all the same, so
        reports keep it."""
        if not report.nodeid.startswith("torchbind["):
            return
        self.ran = True
        data = getattr(report, REPORT_ATTR, None)  # on the call report of an item whose check ran
        received = Verdict.from_json(data) if data else None
        crashed = report.nodeid in self.crashed
        first = report.nodeid not in self.verdicts
        cell = received.cell if received is not None else None
        if received is None and report.failed and (report.when == "call" or crashed or first):
            cell = self._lost_cell(report.nodeid, lost_reason(report))
        if cell is not None:
            self.cells.append(cell)
        verdict = received or self._unreported(report, cell)
        if report.when == "call" or crashed or (report.failed and first):
            # Every item's verdict, for the report (the HTML page lists them per class).
            self.verdicts[report.nodeid] = dataclasses.replace(verdict, item=item_of_id(report.nodeid),
                                                               baseline=hasattr(report, "wasxfail"))
        # Verdicts for --torchbind-accept: only a check that failed, or passed, changes the baseline.
        status = received.status if received is not None else None
        if crashed or (report.when == "call" and status is Status.FAILED):
            self.accepted[report.nodeid] = (True, accept_reason(verdict))
        elif report.when == "call" and status is Status.PASSED:
            # its check passed (a strict xfail that passed reports failed, XPASS(strict): it is no longer failing)
            self.accepted[report.nodeid] = (False, verdict.summary)
        elif report.when != "call" and report.failed:
            # a setup or teardown error: outside the check, no verdict; its entry stays as it is
            self.accepted.pop(report.nodeid, None)
        # (a skipped check, or a call that failed without a status -- an error outside the check: no verdict)

    @staticmethod
    def _unreported(report: pytest.TestReport, cell: Cell | None) -> Verdict:
        """The failed verdict of an item whose report carries none (its worker died running it, or an error
        outside the check): the item's class, check and target from its ``user_properties`` (on every report of
        the item, not on the one xdist makes for a crashed worker), and why it has no result."""
        props = dict(report.user_properties)
        return Verdict(props.get("torchbind_check"), props.get("torchbind_class") or qualname_of_id(report.nodeid),
                       props.get("torchbind_target"), Status.FAILED, reason=lost_reason(report), cell=cell,
                       item=item_of_id(report.nodeid))

    def _planned(self, qualname: str, only: Iterable[str] | None = None,
                 backends: Iterable[str] | None = None) -> tuple[str, list[CheckTarget]]:
        """The test id prefix of ``qualname`` (``torchbind[ns.Cls]::``) and its units in the run's plan."""
        return node_id(qualname, ""), self.run_plan.units(qualname, only=only, backends=backends)

    def _lost_cell(self, test_id: str, reason: str) -> Cell | None:
        """The :class:`Cell` of the item ``test_id`` of one of the selected classes when it produced no result
        because its process died (e.g. a pytest-xdist worker lost to a crash without process isolation): what its
        check's ``lost`` hook makes of ``reason``, or ``None`` for an item that is not a cell."""
        for qualname in self.classes:
            prefix = node_id(qualname, "")
            if test_id.startswith(prefix):
                _, units = self._planned(qualname)
                unit = next((u for u in units if u.name == test_id[len(prefix):]), None)
                return unit.check.lost(qualname, unit.target, reason) if unit and unit.check.lost else None
        return None

    # ----- what the reports make ----------------------------------------------------------------------------
    @property
    def report(self):
        """The :class:`~conformance.reports.MatrixReport` of the cells recorded so far (marked incomplete when
        the run was interrupted)."""
        verdicts: dict[str, list[Verdict]] = {}
        for verdict in self.verdicts.values():
            verdicts.setdefault(verdict.qualname, []).append(verdict)
        return build_report(self.cells, incomplete=self.incomplete, verdicts=verdicts, labels=self.labels())

    def terminal_summary(self, terminalreporter) -> None:
        """Print the compact matrix, the stale baseline entries, and the end-of-run warnings :meth:`finish`
        collected (it runs first, in ``pytest_sessionfinish``)."""
        if self.cells:
            report = self.report
            terminalreporter.section(matrix_title(m.qualname for m in report.classes))  # as the report files say
            for line in render_lines(report):
                terminalreporter.write_line(line)
            for path in self.reports_written:
                terminalreporter.write_line(f"report: {path}")
        reused = reuse_line(self.verdicts.values(), self.options.reuse)
        if reused:
            terminalreporter.write_line(reused)
        if self.accepted_changes is not None or self.stale:
            terminalreporter.section("torchbind baseline")
        if self.accepted_changes is not None:
            changes = [c for c in self.accepted_changes if c.partition(" ")[2] not in self.stale]
            if changes:
                n = len(changes)
                terminalreporter.write_line(f"--torchbind-accept wrote {self.options.baseline}: {n} "
                                            f"change{'s' if n != 1 else ''}:")
                for line in changes:
                    terminalreporter.write_line(f"  {line}")
            else:
                terminalreporter.write_line(f"--torchbind-accept: {self.options.baseline} already said what this run "
                                            "found (unchanged)")
        if self.stale:
            n = len(self.stale)
            if self.stale_removed:
                terminalreporter.write_line(f"--torchbind-accept removed {n} stale entr{'y' if n == 1 else 'ies'} "
                                            f"from {self.options.baseline} (tests that no longer exist):")
            else:
                terminalreporter.write_line(f"{n} entr{'y' if n == 1 else 'ies'} of {self.options.baseline} "
                                            f"name{'s' if n == 1 else ''} tests that no longer exist:", yellow=True)
            for test_id in self.stale:
                terminalreporter.write_line(f"  {test_id}")
            if not self.stale_removed:
                terminalreporter.write_line("remove them from the file, or run once with --torchbind-accept (a run "
                                            "that selects their class removes them)")
        for warning in self.warnings:
            terminalreporter.write_line(f"torchbind: {warning}", yellow=True, bold=True)
        for line in self.uncompared:
            terminalreporter.write_line(f"torchbind: {line}", red=True, bold=True)

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """At the end of the run: mark the report incomplete when the run was interrupted, find stale baseline
        entries and the classes of which nothing was compared (:func:`nothing_compared`: a run that would exit 0
        exits 1, ``pytest.ExitCode.TESTS_FAILED``, instead), then write the report file and the GitHub step summary (only when a torchbind item ran, so a run
        that ran none leaves existing files alone) and the accepted baseline. An ``OSError`` writing one of them
        becomes a line in :attr:`warnings` (printed by :meth:`terminal_summary`); the others are still written.
        Raises nothing for such faults."""
        self.incomplete = self._incomplete(session, exitstatus)
        self.stale = self._stale_entries()
        self.uncompared = nothing_compared(self.verdicts.values())
        if self.uncompared and session.exitstatus == pytest.ExitCode.OK:  # as pytest's own --max-warnings does
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        report = self.report
        for path in self.options.reports if self.ran else ():
            try:
                write_report(report, path)
                self.reports_written.append(path)
            except OSError as exc:
                self.warnings.append(f"could not write the report {path}: {describe_os_error(exc)}")
        if self.options.accept and self.options.baseline is not None:
            try:
                merged = merge_accepted(self.options.known, self.accepted, self.stale)
                save_baseline(self.options.baseline, merged)
                self.stale_removed = True
                # the stable rule ids of every failure: what each new entry is a bug in (the fake, the class's
                # guard_fn, ...) or that a cell follows from another item's failure (baseline.own_part)
                rules = {k: v.rules for k, v in self.verdicts.items() if v.status is Status.FAILED}
                self.accepted_changes = accept_changes(self.options.known, merged, rules)
                warning = accept_warning(self.options.known, merged, rules)  # the library's own bugs: say so
                if warning:
                    self.warnings.append(warning)
            except OSError as exc:
                self.warnings.append(f"could not write the baseline {self.options.baseline}: "
                                     f"{describe_os_error(exc)}")
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary and self.ran and self.cells:
            try:
                with open(summary, "a", encoding="utf-8") as fh:
                    fh.write(render_markdown(report) + "\n")
            except OSError as exc:
                self.warnings.append(f"could not write the GitHub step summary {summary} (GITHUB_STEP_SUMMARY): "
                                     f"{describe_os_error(exc)}")

    def _incomplete(self, session: pytest.Session, exitstatus: int) -> str | None:
        """Why the report misses cells, e.g. ``"interrupted: 47 of 91 cells ran"`` (the planned cells: the
        ``matrix`` units of the selected classes, with this run's backends), or ``None`` for a run that was
        neither interrupted (Ctrl-C, SIGTERM) nor stopped early (``-x``, ``--maxfail``)."""
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            why = "interrupted"
        elif session.shouldfail or session.shouldstop:  # -x / --maxfail, --stepwise
            why = f"stopped early ({session.shouldfail or session.shouldstop})"
        else:
            return None
        settings = self.run_plan.settings
        only = ("matrix",) if settings.checks is None or "matrix" in settings.checks else ()
        try:
            planned = sum(len(self._planned(q, only=only, backends=settings.backends)[1]) for q in self.classes)
        except Exception as exc:  # noqa: BLE001 - the note still says that the run stopped
            self.warnings.append(f"could not count the planned matrix cells: {type(exc).__name__}: {exc}")
            return f"{why}: {len(self.cells)} cells ran"
        return f"{why}: {len(self.cells)} of {planned} cells ran"

    def _stale_entries(self) -> list[str]:
        """The baseline entries of the selected classes that their plan no longer has, sorted (see
        :mod:`conformance.plugin.baseline`). The plan is the full one (no ``--torchbind-checks`` or
        ``--torchbind-backends`` filter), so a narrowed run makes nothing stale. Builds no objects."""
        known = self.options.known
        if not known:
            return []
        stale: list[str] = []
        try:
            for qualname in self.classes:
                prefix, units = self._planned(qualname)
                stale += stale_entries(known, prefix, {prefix + unit.name for unit in units})
        except Exception as exc:  # noqa: BLE001 - a warning: the gate's own result stands
            self.warnings.append(f"could not check the baseline for stale entries: {type(exc).__name__}: {exc}")
            return []
        return sorted(stale)


class CrashHook:
    """pytest-xdist's ``pytest_handlecrashitem`` (registered only where xdist is installed, on the controller):
    an item whose worker process died before it reported. The recorder then records the report xdist makes for it
    as a failed verdict (and, for a matrix item, a failed cell)."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder

    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched) -> None:
        if crashitem.startswith("torchbind["):
            self.recorder.crashed.add(crashitem)
