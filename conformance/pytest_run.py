"""The plugin's run object: what one pytest run (controller, serial run or xdist worker) holds and does.

``conformance.plugin``'s hooks are one-line calls into a :class:`PluginRun` kept in ``config.stash``. It owns the
engine's :class:`~conformance.session.Session` (settings, load code, contexts, items, caches), the isolation
:class:`~conformance.isolation.Supervisor`, and — on the controller or in a serial run — what the test reports
bring back: matrix cells and, for ``--torchbind-accept``, each torchbind item's status. Under pytest-xdist those
arrive from the workers as ``user_properties`` of the reports (:mod:`conformance.items`), so the controller
writes the same reports a serial run does. Nothing here reads pytest's report text.

Faults around the run (see the README's "What happens when"): files are written only when a torchbind item ran,
atomically; an ``OSError`` writing one becomes a one-line warning in the terminal summary and the other files are
still written; SIGTERM on the controller or a serial run is handled like Ctrl-C (pytest stops, the partial report
is written and marked incomplete, exit status 2).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import sys
import signal
import threading
from pathlib import Path

import pytest
import torch

from .baseline import applying, merge_accepted, save_baseline, stale_entries
from .checks import all_checks
from .context import import_lazily_imported_modules
from .discovery import SelectorError, expand_selector, registered_classes
from .faults import watch_interrupts
from .files import describe_os_error
from .isolation import Supervisor, WorkerLost
from .items import CELL, NOTES, STATUS, SUMMARY, TorchbindCheckItem, TorchbindClass
from .loading import LoadError, apply_load_spec, repro_lines
from .matrix.backend import all_backends
from .options import RunOptions, read_options
from .reports import build_report, write_report
from .reports.markdown import render as render_markdown
from .reports.terminal import render_lines
from .results import Cell, Outcome, Status
from .runner import CheckTarget, lost_cell, lost_outcome, plan, prepare_class, run_target
from .session import Session, current
from .versions import untested_warning

__all__ = ["PluginRun", "lost_reason", "run_labels"]


@contextlib.contextmanager
def _untraced():
    """Keep torch's structured-trace records (``torch.__trace``: always DEBUG, thousands per compile) out of
    pytest's log capture while a check runs in the pytest process; torch itself never lets them propagate once
    its logging is set up."""
    trace = logging.getLogger("torch.__trace")
    propagate, trace.propagate = trace.propagate, False
    try:
        yield
    finally:
        trace.propagate = propagate



def run_labels(settings) -> dict[str, str]:
    """What tells this run apart from other runs in a merged report (:mod:`conformance.merge`): the torch version,
    the device the checks ran on, the platform, and the date (UTC, to the second; not part of a run's identity)."""
    import datetime
    import platform

    return {"torch": torch.__version__, "device": getattr(settings, "device", "cpu"),
            "platform": f"{sys.platform}-{platform.machine()}",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _qualname_of_id(nodeid: str) -> str:
    """``ns::Cls`` of an item id ``torchbind[ns.Cls]::...``."""
    inner = nodeid[len("torchbind["):].partition("]::")[0]
    ns, _, name = inner.rpartition(".")
    return f"{ns}::{name}"


def lost_reason(report: pytest.TestReport) -> str:
    """Why a torchbind item reported no result: its pytest-xdist worker died running it (a crash when checks run
    without process isolation). The worker is named from the report's ``node`` (xdist's worker handle)."""
    worker = getattr(getattr(report, "node", None), "workerinput", {}).get("workerid")
    who = f"worker {worker!r}" if worker else "the process running it"
    return f"{who} crashed (or was killed) while running it, before it reported a result"


def _sigterm_as_interrupt(signum, frame) -> None:
    """SIGTERM handler of the controller or serial run: stop the way Ctrl-C does, so that pytest runs
    ``pytest_sessionfinish`` (the partial report, JUnit XML) and exits with status 2 (interrupted)."""
    raise KeyboardInterrupt("terminated by SIGTERM")


class PluginRun:
    """One pytest run of the plugin. Built in ``pytest_configure`` by :meth:`configure`."""

    def __init__(self, config: pytest.Config, options: RunOptions, session: Session):
        self.config = config
        self.options = options
        self.session = session
        self.supervisor: Supervisor | None = None
        self.controller = not hasattr(config, "workerinput")
        self.cells: list[Cell] = []
        self.accepted: dict[str, tuple[bool, str]] = {}
        self.verdicts: dict[str, dict] = {}  # node id -> the item's verdict, in the order items reported  # test id -> (check failed, summary): verdicts only
        self.ran = False  # a torchbind item ran (reports are written only then)
        self.incomplete: str | None = None  # why the report misses cells (set at the end of an interrupted run)
        self.stale: list[str] = []  # baseline entries naming tests the plan no longer has (found at the end)
        self.stale_removed = False  # ... and removed by --torchbind-accept
        self.report_written = False
        self.warnings: list[str] = []  # end-of-run failures, one line each in the terminal summary
        self._sigterm_installed = False
        self._unwatch_sigint = lambda: None  # puts back the SIGINT handler watch_interrupts replaced
        self._report = None
        self._threads: int | None = None  # torch's intra-op threads for the plugin's items (set under xdist)
        self._deactivate = session.activate()

    # ----- configure --------------------------------------------------------------------------------------------
    @classmethod
    def configure(cls, config: pytest.Config) -> PluginRun:
        """Validate the options, load the libraries and fakes, expand the class selectors, and set up isolation.
        The run's session shares the registry of the session active until now (decorators that already ran)
        and becomes the active one. Raises ``pytest.UsageError`` for bad input."""
        options = read_options(config, [c.name for c in all_checks()], [b.name for b in all_backends()])
        rootdir = Path(str(config.rootpath))
        load_code = [line for spec in options.load for line in repro_lines(spec, rootdir)]
        device = options.settings.device
        if device != "cpu":
            # Every tensor the plugin makes (example objects, arguments, program inputs) and every reproducer's;
            # set only while the plugin loads and runs its items (PluginRun.torch_defaults).
            load_code.append(f"torch.set_default_device({device!r})")
        session = Session(options.settings, registry=current().registry, load_code=load_code)
        warning = untested_warning(torch.__version__)
        if warning:
            config.issue_config_time_warning(pytest.PytestWarning(warning), stacklevel=2)
        run = cls(config, options, session)
        config.add_cleanup(run.unconfigure)
        config.pluginmanager.register(run, "torchbind-run")
        unselected = bool(options.load) and not options.selectors  # a usage error below, naming what loaded
        before = set(registered_classes()) if unselected else set()
        with run.torch_defaults():
            for spec in options.load:
                try:
                    apply_load_spec(spec, rootdir)
                except LoadError as exc:
                    raise pytest.UsageError(str(exc)) from None
        if unselected:
            loaded = sorted(set(registered_classes()) - before) or registered_classes()
            raise pytest.UsageError(
                "--torchbind-load loaded libraries and fakes but no class is selected, so nothing would be checked: "
                "add --torchbind-class=NS::CLS (or NS::*), or torchbind_classes in the ini. Classes registered: "
                + (", ".join(loaded) or "(none)"))
        for selector in options.selectors:
            try:
                for qualname in expand_selector(selector):
                    if qualname not in session.classes:
                        session.classes.append(qualname)
            except SelectorError as exc:
                raise pytest.UsageError(str(exc)) from None
        run._configure_isolation()
        run._handle_sigterm()
        if session.classes:
            # Tells a real Ctrl-C from a KeyboardInterrupt raised by a fake (conformance.faults), until unconfigure.
            run._unwatch_sigint = watch_interrupts(session)
        workers = getattr(config, "workerinput", {}).get("workercount")
        if session.classes and workers:
            # Under xdist, N workers each running torch's intra-op thread pool oversubscribe the cores and make
            # compile-bound matrix runs slower than serial ones (applied around the plugin's items only).
            run._threads = max(1, (os.cpu_count() or 1) // int(workers))
        return run

    @contextlib.contextmanager
    def torch_defaults(self):
        """torch's default device (``--torchbind-device``) and, under xdist, its intra-op thread count, as the
        plugin's loading and items need them, put back as they were afterwards: the user's own tests in the same
        run see torch as they left it. An isolation worker forked meanwhile keeps them."""
        device, threads = self.session.settings.device, self._threads
        old_device, old_threads = torch.get_default_device(), torch.get_num_threads()
        if device != "cpu":
            torch.set_default_device(device)
        if threads:
            torch.set_num_threads(threads)
        try:
            yield
        finally:
            if threads:
                torch.set_num_threads(old_threads)
            if device != "cpu":
                torch.set_default_device(None if old_device == torch.device("cpu") else old_device)

    def _configure_isolation(self) -> None:
        if self.options.isolation != "process" or not self.session.classes:
            return
        self.supervisor = Supervisor(self._run_in_worker, self.options.timeout,
                                     before_fork=import_lazily_imported_modules, session=self.session,
                                     memory_limit=self.options.memory_limit)
        for qualname in self.session.classes:
            self.supervisor.register(qualname)  # the key of the class's preparation

    def _handle_sigterm(self) -> None:
        """On the controller or a serial run that checks classes, from the main thread, where SIGTERM still has
        its default action: make SIGTERM (CI cancellation, ``timeout``) stop the run like Ctrl-C."""
        if not self.controller or not self.session.classes or threading.current_thread() is not threading.main_thread():
            return
        with contextlib.suppress(ValueError, OSError, AttributeError):
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
                self._sigterm_installed = True

    def unconfigure(self) -> None:
        """Stop the worker, give SIGTERM back its default action (when :meth:`_handle_sigterm` changed it), put
        back the SIGINT handler :func:`~conformance.faults.watch_interrupts` replaced, and make the previously active
        session current again."""
        if self.supervisor is not None:
            self.supervisor.close()
        if self._sigterm_installed and signal.getsignal(signal.SIGTERM) is _sigterm_as_interrupt:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._sigterm_installed = False
        self._unwatch_sigint()
        self._unwatch_sigint = lambda: None
        self._deactivate()

    # ----- collection and running ---------------------------------------------------------------------------------
    def collect(self, session: pytest.Session, items: list) -> None:
        """Add the torchbind items of every selected class, and mark the baseline's known failures as strict
        xfails."""
        for qualname in self.session.classes:
            info = self.session.context(qualname).info
            collector = TorchbindClass.from_parent(session, name=info.test_name, nodeid=info.test_name,
                                                   qualname=qualname, run=self)
            items.extend(session.genitems(collector))
        known = applying(self.options.known, torch.__version__)  # entries for another torch do not apply here
        for item in items:
            if isinstance(item, TorchbindCheckItem) and item.nodeid in known:
                item.add_marker(pytest.mark.xfail(reason=f"baseline: {known[item.nodeid]}", strict=True))

    def register_item(self, nodeid: str, unit: CheckTarget) -> None:
        """Remember a collected item, so a worker process forked later can run it by node id."""
        self.session.items[nodeid] = unit
        if self.supervisor is not None:
            self.supervisor.register(nodeid)

    def run_item(self, nodeid: str, unit: CheckTarget) -> Outcome:
        """Run one item: in the isolation worker (a crash or hang becomes a failed outcome), or here; with the
        plugin's torch defaults (:meth:`torch_defaults`) either way."""
        with self.torch_defaults():
            if self.supervisor is None:
                with _untraced():
                    return run_target(unit, self.session)
            # One worker per class (group): a leak or a crash of one class never shows in another class's items.
            self.supervisor.prepare_once(unit.qualname, group=unit.qualname)
            result = self.supervisor.run(nodeid, group=unit.qualname)
            return lost_outcome(unit, result, self.supervisor.timeout) if isinstance(result, WorkerLost) else result

    def _run_in_worker(self, key: str) -> Outcome:
        """What the isolation worker runs for a key: a collected item (by node id) or a class's preparation."""
        unit = self.session.items.get(key)
        return run_target(unit, self.session) if unit is not None else prepare_class(key, self.session)

    def report_header(self) -> list[str]:
        """Lines for pytest's header: what the run checks and, without process isolation, the promises it
        cannot keep."""
        if not self.session.classes:
            return []
        lines = [f"torchbind: {len(self.session.classes)} class(es), isolation={self.options.isolation}"]
        if self.options.isolation == "none":
            lines.append("torchbind: --torchbind-isolation=none: checks run in the pytest process: a crash in C++ "
                         "ends the run, and calls are not timed (--torchbind-timeout is not enforced)")
        return lines

    # ----- reports (controller or serial run) ---------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Hook (this object is registered as a plugin): take a test report's torchbind data: that an item ran,
        its matrix cell, and its verdict for ``--torchbind-accept``. A torchbind item that failed without a status
        never reported a result (its xdist worker was lost): its cell is recorded as failed all the same, so
        reports keep it."""
        if not report.nodeid.startswith("torchbind["):
            return
        self.ran = True
        props = dict(report.user_properties)
        status = props.get(STATUS)
        cell = None
        if CELL in props and report.when == "call":
            cell = Cell.from_json(json.loads(props[CELL]))
        elif status is None and report.failed:
            cell = lost_cell(self.session, report.nodeid, lost_reason(report))
        if cell is not None:
            self.cells.append(cell)
            self._report = None
        if report.when == "call" or report.when == "???" or (report.failed and report.nodeid not in self.verdicts):
            # Every item's verdict, for the report (the HTML page lists them per class).
            self.verdicts[report.nodeid] = {
                "item": report.nodeid.partition("::")[2], "check": props.get("torchbind_check"),
                "target": props.get("torchbind_target"), "status": status or Status.FAILED.value,
                "summary": props.get(SUMMARY) or lost_reason(report), "baseline": hasattr(report, "wasxfail"),
                "qualname": props.get("torchbind_class") or _qualname_of_id(report.nodeid),
                "notes": json.loads(props.get(NOTES, "[]"))}
            self._report = None
        # Verdicts for --torchbind-accept: only a check that failed, or passed, changes the baseline.
        if report.when == "???" or (report.when == "call" and status == Status.FAILED.value):
            # its check failed, or its xdist worker was lost running it ("???": xdist's report of a crashed item)
            self.accepted[report.nodeid] = (True, props.get(SUMMARY) or lost_reason(report))
        elif report.when == "call" and status == Status.PASSED.value:
            # its check passed (a strict xfail that passed reports failed, XPASS(strict): it is no longer failing)
            self.accepted[report.nodeid] = (False, props.get(SUMMARY) or "")
        elif report.when != "call" and report.failed:
            # a setup or teardown error: outside the check, no verdict; its entry stays as it is
            self.accepted.pop(report.nodeid, None)
        # (a skipped check, or a call that failed without a status — an error outside the check: no verdict)

    @property
    def report(self):
        """The :class:`~conformance.reports.MatrixReport` of the cells recorded so far (marked incomplete when
        the run was interrupted)."""
        if self._report is None:
            verdicts: dict[str, list[dict]] = {}
            for verdict in self.verdicts.values():
                verdicts.setdefault(verdict["qualname"], []).append(
                    {k: v for k, v in verdict.items() if k != "qualname"})
            self._report = build_report(self.cells, incomplete=self.incomplete, verdicts=verdicts,
                                        labels=run_labels(self.session.settings))
        return self._report

    def terminal_summary(self, terminalreporter) -> None:
        """Print (controller only) the compact matrix, the stale baseline entries, and the end-of-run warnings
        :meth:`finish` collected (it runs first, in ``pytest_sessionfinish``)."""
        if not self.controller:
            return
        if self.cells:
            terminalreporter.section("torchbind coverage matrix")
            for line in render_lines(self.report):
                terminalreporter.write_line(line)
            if self.report_written:
                terminalreporter.write_line(f"report: {self.options.report}")
        if self.stale:
            terminalreporter.section("torchbind baseline")
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

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """At the end of the run (controller only): mark the report incomplete when the run was interrupted, find
        stale baseline entries, then write the report file and the GitHub step summary (only when a torchbind
        item ran, so a run that ran none leaves existing files alone) and the accepted baseline. An ``OSError``
        writing one of them becomes a line in :attr:`warnings` (printed by :meth:`terminal_summary`); the others
        are still written. Raises nothing for such faults."""
        if not self.controller:
            return
        self.incomplete = self._incomplete(session, exitstatus)
        self._report = None
        self.stale = self._stale_entries()
        if self.options.report is not None and self.ran:
            try:
                write_report(self.report, self.options.report)
                self.report_written = True
            except OSError as exc:
                self.warnings.append(f"could not write the report {self.options.report}: {describe_os_error(exc)}")
        if self.options.accept and self.options.baseline is not None:
            try:
                save_baseline(self.options.baseline, merge_accepted(self.options.known, self.accepted, self.stale))
                self.stale_removed = True
            except OSError as exc:
                self.warnings.append(f"could not write the baseline {self.options.baseline}: "
                                     f"{describe_os_error(exc)}")
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary and self.ran and self.cells:
            try:
                with open(summary, "a", encoding="utf-8") as fh:
                    fh.write(render_markdown(self.report) + "\n")
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
        try:
            planned = sum(1 for q in self.session.classes for u in plan(q, self.session) if u.check.name == "matrix")
        except Exception as exc:  # noqa: BLE001 - the note still says that the run stopped
            self.warnings.append(f"could not count the planned matrix cells: {type(exc).__name__}: {exc}")
            return f"{why}: {len(self.cells)} cells ran"
        return f"{why}: {len(self.cells)} of {planned} cells ran"

    def _stale_entries(self) -> list[str]:
        """The baseline entries of the selected classes that their plan no longer has, sorted (see
        :mod:`conformance.baseline`). The plan is the full one: ``--torchbind-checks`` and
        ``--torchbind-backends`` are set aside, so a narrowed run makes nothing stale. Builds no objects."""
        known = self.options.known
        if not known:
            return []
        stale: list[str] = []
        settings = self.session.settings
        self.session.settings = dataclasses.replace(settings, checks=None, backends=None)
        try:
            for qualname in self.session.classes:
                prefix = self.session.context(qualname).info.test_name + "::"
                planned = {prefix + unit.name for unit in plan(qualname, self.session)}
                stale += stale_entries(known, prefix, planned)
        except Exception as exc:  # noqa: BLE001 - a warning: the gate's own result stands
            self.warnings.append(f"could not check the baseline for stale entries: {type(exc).__name__}: {exc}")
            return []
        finally:
            self.session.settings = settings
        return sorted(stale)
