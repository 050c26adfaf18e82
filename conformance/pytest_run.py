"""The plugin's run object: what one pytest run (controller, serial run or xdist worker) holds and does.

``conformance.plugin``'s hooks are one-line calls into a :class:`PluginRun` kept in ``config.stash``. It owns the
engine's :class:`~conformance.session.Session` (settings, load code, contexts, items, caches), the isolation
:class:`~conformance.isolation.Supervisor`, and — on the controller or in a serial run — what the test reports
bring back: matrix cells and, for ``--torchbind-accept``, each torchbind item's status. Under pytest-xdist those
arrive from the workers as ``user_properties`` of the reports (:mod:`conformance.items`), so the controller
writes the same reports a serial run does. Nothing here reads pytest's report text.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .baseline import merge_accepted, save_baseline
from .checks import all_checks
from .context import import_lazily_imported_modules
from .discovery import SelectorError, expand_selector
from .isolation import Supervisor, WorkerLost
from .items import CELL, STATUS, SUMMARY, TorchbindCheckItem, TorchbindClass
from .loading import LoadError, apply_load_spec, repro_lines
from .matrix.backend import all_backends
from .options import RunOptions, read_options
from .reports import build_report, write_report
from .reports.markdown import render as render_markdown
from .reports.terminal import render_lines
from .results import Cell, Outcome, Status
from .runner import CheckTarget, lost_cell, lost_outcome, prepare_class, run_target
from .session import Session, current

__all__ = ["PluginRun", "RUN_KEY", "lost_reason"]

RUN_KEY = pytest.StashKey["PluginRun"]()


def lost_reason(report: pytest.TestReport) -> str:
    """Why a torchbind item reported no result: its pytest-xdist worker died running it (a crash when checks run
    without process isolation). The worker is named from the report's ``node`` (xdist's worker handle)."""
    worker = getattr(getattr(report, "node", None), "workerinput", {}).get("workerid")
    who = f"worker {worker!r}" if worker else "the process running it"
    return f"{who} crashed (or was killed) while running it, before it reported a result"


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
        self._report = None
        self._deactivate = session.activate()

    # ----- configure --------------------------------------------------------------------------------------------
    @classmethod
    def configure(cls, config: pytest.Config) -> PluginRun:
        """Validate the options, load the libraries and fakes, expand the class selectors, and set up isolation.
        The run's session shares the registry of the session active until now (decorators that already ran)
        and becomes the active one. Raises ``pytest.UsageError`` for bad input."""
        options = read_options(config, [c.name for c in all_checks()], [b.name for b in all_backends()])
        rootdir = Path(str(config.rootpath))
        session = Session(options.settings, registry=current().registry,
                          load_code=[line for spec in options.load for line in repro_lines(spec, rootdir)])
        run = cls(config, options, session)
        config.add_cleanup(run.unconfigure)
        config.pluginmanager.register(run, "torchbind-run")
        for spec in options.load:
            try:
                apply_load_spec(spec, rootdir)
            except LoadError as exc:
                raise pytest.UsageError(str(exc)) from None
        for selector in options.selectors:
            try:
                for qualname in expand_selector(selector):
                    if qualname not in session.classes:
                        session.classes.append(qualname)
            except SelectorError as exc:
                raise pytest.UsageError(str(exc)) from None
        run._configure_isolation()
        workers = getattr(config, "workerinput", {}).get("workercount")
        if session.classes and workers:
            # Under xdist, N workers each running torch's intra-op thread pool oversubscribe the cores and make
            # compile-bound matrix runs slower than serial ones.
            import torch

            torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))
        return run

    def _configure_isolation(self) -> None:
        if self.options.isolation != "process" or not self.session.classes:
            return
        self.supervisor = Supervisor(self._run_in_worker, self.options.timeout,
                                     before_fork=import_lazily_imported_modules, session=self.session)
        for qualname in self.session.classes:
            self.supervisor.register(qualname)  # the key of the class's preparation

    def unconfigure(self) -> None:
        """Stop the worker and make the previously active session current again."""
        if self.supervisor is not None:
            self.supervisor.close()
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
        known = self.options.known
        for item in items:
            if isinstance(item, TorchbindCheckItem) and item.nodeid in known:
                item.add_marker(pytest.mark.xfail(reason=f"baseline: {known[item.nodeid]}", strict=True))

    def register_item(self, nodeid: str, unit: CheckTarget) -> None:
        """Remember a collected item, so a worker process forked later can run it by node id."""
        self.session.items[nodeid] = unit
        if self.supervisor is not None:
            self.supervisor.register(nodeid)

    def run_item(self, nodeid: str, unit: CheckTarget) -> Outcome:
        """Run one item: in the isolation worker (a crash or hang becomes a failed outcome), or here."""
        if self.supervisor is None:
            return run_target(unit, self.session)
        self.supervisor.prepare_once(unit.qualname)
        result = self.supervisor.run(nodeid)
        return lost_outcome(unit, result, self.supervisor.timeout) if isinstance(result, WorkerLost) else result

    def _run_in_worker(self, key: str) -> Outcome:
        """What the isolation worker runs for a key: a collected item (by node id) or a class's preparation."""
        unit = self.session.items.get(key)
        return run_target(unit, self.session) if unit is not None else prepare_class(key, self.session)

    # ----- reports (controller or serial run) ---------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Hook (this object is registered as a plugin): take a test report's torchbind data: its matrix cell, and its status for ``--torchbind-accept``. A
        torchbind item that failed without a status never reported a result (its xdist worker was lost): its
        cell is recorded as failed all the same, so reports keep it."""
        if not report.nodeid.startswith("torchbind["):
            return
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
        if report.when == "call" or report.failed:
            # A strict xfail that passed (XPASS) reports failed while its check passed: it is no longer failing.
            failing = status == Status.FAILED.value or (status is None and report.failed)
            self.accepted[report.nodeid] = (failing, props.get(SUMMARY) or lost_reason(report))

    @property
    def report(self):
        if self._report is None:
            self._report = build_report(self.cells)
        return self._report

    def terminal_summary(self, terminalreporter) -> None:
        if not self.controller or not self.cells:
            return
        terminalreporter.section("torchbind coverage matrix")
        for line in render_lines(self.report):
            terminalreporter.write_line(line)
        if self.options.report is not None:
            terminalreporter.write_line(f"report: {self.options.report}")

    def finish(self) -> None:
        """Write the report file, the accepted baseline, and the GitHub step summary (controller only)."""
        if not self.controller:
            return
        if self.options.report is not None:
            write_report(self.report, self.options.report)
        if self.options.accept and self.options.baseline is not None:
            save_baseline(self.options.baseline, merge_accepted(self.options.known, self.accepted))
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary and self.cells:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(render_markdown(self.report) + "\n")
