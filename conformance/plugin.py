"""pytest wiring (entry point ``torchbind``): options, loading, and one test item per check and target.

Thin by design: loading is :mod:`conformance.loading`, discovery :mod:`conformance.discovery`, the checks live in
:mod:`conformance.checks` and run through :mod:`conformance.runner`; this module only maps them onto pytest.
Test ids: ``torchbind[ns.Cls]::<check>`` or ``torchbind[ns.Cls]::<check>[<method or op>]``.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from pathlib import Path

import pytest

from .baseline import BaselineError, load_baseline, merge_accepted, save_baseline
from .checks import all_checks
from .matrix.backend import all_backends
from .reports import FORMATS, build_report, write_report
from .reports.markdown import render as render_markdown
from .reports.terminal import render_lines
from .settings import SETTINGS
from .context import context_for, import_lazily_imported_modules, set_load_code
from .discovery import SelectorError, expand_selector
from .loading import LoadError, apply_load_spec, repro_lines
from .isolation import DEFAULT_TIMEOUT, ITEM_LIMIT_FACTOR, Supervisor, WorkerLost, isolation_available
from .results import Outcome
from .runner import CheckTarget, lost_item_data, lost_outcome, plan, prepare_class, run_target

_CLASSES = pytest.StashKey[list[str]]()
_REPORT_PATH = pytest.StashKey[Path]()
_CELL_PROPERTY = "torchbind_cell"
_BASELINE = pytest.StashKey[tuple[Path, dict[str, str]]]()
_SUPERVISOR = pytest.StashKey[Supervisor]()
_UNITS: dict[str, CheckTarget] = {}  # nodeid -> unit, for the worker process (it inherits this at fork)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchbind", "TorchBind class conformance (torchbind-conformance)")
    group.addoption("--torchbind-class", action="append", default=[], metavar="NS::CLS",
                    help="TorchBind class to check against its fake class; NS::* selects a whole namespace. "
                         "Repeatable. Ini: torchbind_classes.")
    group.addoption("--torchbind-load", action="append", default=[], metavar="SPEC",
                    help="load before collection, in order: a .so (torch.ops.load_library), a .py file or dotted "
                         "module (imported), or module:function (imported, then called). Repeatable. "
                         "Ini: torchbind_load.")
    group.addoption("--torchbind-checks", default=None, metavar="NAMES",
                    help="comma-separated check names to run (default: all). "
                         f"Available: {', '.join(c.name for c in all_checks())}.")
    group.addoption("--torchbind-backends", default=None, metavar="NAMES",
                    help="comma-separated coverage-matrix backends (default: all): "
                         f"{', '.join(b.name for b in all_backends())}. Ini: torchbind_backends.")
    group.addoption("--torchbind-report", default=None, metavar="PATH",
                    help="write the coverage-matrix report to PATH (.md, .json or .html). Ini: torchbind_report.")
    group.addoption("--torchbind-baseline", default=None, metavar="PATH",
                    help="JSON file of known failures (test id -> reason): listed tests are strict xfails. "
                         "Ini: torchbind_baseline.")
    group.addoption("--torchbind-accept", action="store_true", default=False,
                    help="rewrite the --torchbind-baseline file from this run's failures, keeping their reasons.")
    group.addoption("--torchbind-timeout", default=None, metavar="SECONDS",
                    help=f"stop a call into the class's code (constructor, method, __obj_flatten__, pickling, custom "
                         f"op) that runs longer than this and fail the item as a hang; one item may run "
                         f"{ITEM_LIMIT_FACTOR}x as long. 0: no limit (default {DEFAULT_TIMEOUT:g}). "
                         "Ini: torchbind_timeout.")
    group.addoption("--torchbind-isolation", default=None, choices=("process", "none"),
                    help="process: run the checks in a worker process, so a crash (SIGSEGV, abort) or a hang in C++ "
                         "code fails one item and the run goes on (default on Linux); none: in the pytest process "
                         "(no crash protection, no timeout). Ini: torchbind_isolation.")
    group.addoption("--torchbind-examples", type=int, default=None, metavar="N",
                    help=f"hypothesis examples per class for the differential test (default {SETTINGS.examples}). "
                         "Ini: torchbind_examples.")
    parser.addini("torchbind_classes", "TorchBind classes to check (NS::CLS or NS::*)", type="linelist",
                  default=[])
    parser.addini("torchbind_load", "libraries / modules to load before collection", type="linelist", default=[])
    parser.addini("torchbind_backends", "coverage-matrix backends (comma-separated)", default="")
    parser.addini("torchbind_report", "coverage-matrix report path (.md, .json, .html)", default="")
    parser.addini("torchbind_baseline", "known-failures baseline file (JSON)", default="")
    parser.addini("torchbind_examples", "hypothesis examples per class for the differential test", default="")
    parser.addini("torchbind_timeout", "seconds a call into the class's code may take (0: no limit)", default="")
    parser.addini("torchbind_isolation", "process (default on Linux) or none", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "torchbind: a generated TorchBind conformance check")
    selectors = list(config.getoption("torchbind_class")) or list(config.getini("torchbind_classes"))
    specs = list(config.getoption("torchbind_load")) or list(config.getini("torchbind_load"))
    rootdir = Path(str(config.rootpath))
    for spec in specs:
        try:
            apply_load_spec(spec, rootdir)
        except LoadError as exc:
            raise pytest.UsageError(str(exc)) from None
    set_load_code([line for spec in specs for line in repro_lines(spec, rootdir)])
    only = config.getoption("torchbind_checks")
    if only:
        known = {c.name for c in all_checks()}
        unknown = sorted(set(only.split(",")) - known)
        if unknown:
            raise pytest.UsageError(f"--torchbind-checks: unknown check(s) {', '.join(unknown)}; "
                                    f"available: {', '.join(sorted(known))}")
    _configure_settings(config)
    classes: list[str] = []
    for selector in selectors:
        try:
            for qualname in expand_selector(selector):
                if qualname not in classes:
                    classes.append(qualname)
        except SelectorError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[_CLASSES] = classes
    _configure_isolation(config, bool(classes))
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Recorder(config), "torchbind-recorder")
    workers = getattr(config, "workerinput", {}).get("workercount")
    if classes and workers:
        # Under xdist, N workers each running torch's intra-op thread pool oversubscribe the cores and make
        # compile-bound matrix runs slower than serial ones.
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))


def _configure_isolation(config: pytest.Config, needed: bool) -> None:
    """Validate ``--torchbind-timeout`` / ``--torchbind-isolation``; with process isolation, stash the
    :class:`Supervisor` whose worker will run the items (forked at the first item, after collection)."""
    raw = config.getoption("torchbind_timeout") or config.getini("torchbind_timeout")
    try:
        timeout = DEFAULT_TIMEOUT if raw in (None, "") else float(raw)
    except ValueError:
        raise pytest.UsageError(f"--torchbind-timeout: expected a number of seconds, got {raw!r}") from None
    if not timeout >= 0:
        raise pytest.UsageError(f"--torchbind-timeout: must be 0 (no limit) or positive, got {raw!r}")
    mode = config.getoption("torchbind_isolation") or config.getini("torchbind_isolation") or (
        "process" if isolation_available() else "none")
    if mode not in ("process", "none"):
        raise pytest.UsageError(f"torchbind_isolation: expected process or none, got {mode!r}")
    if mode == "process" and not isolation_available():
        raise pytest.UsageError("--torchbind-isolation=process needs os.fork on Linux; use "
                                "--torchbind-isolation=none here")
    if mode == "process" and needed:
        supervisor = Supervisor(_run_in_worker, timeout, before_fork=import_lazily_imported_modules)
        for qualname in config.stash.get(_CLASSES, []):
            supervisor.register(qualname)  # the key of the class's preparation
        config.stash[_SUPERVISOR] = supervisor
        config.add_cleanup(supervisor.close)


def _run_in_worker(key: str) -> Outcome:
    """What the isolation worker runs for a key: a collected item (by node id) or a class's preparation."""
    unit = _UNITS.get(key)
    return run_target(unit) if unit is not None else prepare_class(key)


def _configure_settings(config: pytest.Config) -> None:
    backends = config.getoption("torchbind_backends") or config.getini("torchbind_backends")
    if backends:
        names = [b.name for b in all_backends()]
        chosen = tuple(n.strip() for n in backends.split(",") if n.strip())
        unknown = [n for n in chosen if n not in names]
        if unknown:
            raise pytest.UsageError(f"--torchbind-backends: unknown backend(s) {', '.join(unknown)}; "
                                    f"available: {', '.join(names)}")
        SETTINGS.backends = chosen
    examples = config.getoption("torchbind_examples") or config.getini("torchbind_examples")
    if examples:
        try:
            SETTINGS.examples = int(examples)
        except ValueError:
            raise pytest.UsageError(f"torchbind_examples: expected an integer, got {examples!r}") from None
        if SETTINGS.examples < 1:
            raise pytest.UsageError("--torchbind-examples must be at least 1")
    report = config.getoption("torchbind_report") or config.getini("torchbind_report")
    if report and not hasattr(config, "workerinput"):
        path = Path(report).resolve()
        if path.suffix.lower() not in FORMATS:
            raise pytest.UsageError(f"--torchbind-report={report}: unsupported format {path.suffix or '(none)'}; "
                                    f"use {', '.join(FORMATS)}")
        try:
            with open(path, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise pytest.UsageError(f"--torchbind-report={report}: cannot write the report: {exc}") from None
        config.stash[_REPORT_PATH] = path
    baseline = config.getoption("torchbind_baseline") or config.getini("torchbind_baseline")
    accept = config.getoption("torchbind_accept")
    if accept and not baseline:
        raise pytest.UsageError("--torchbind-accept needs --torchbind-baseline=PATH (the file to write)")
    if baseline:
        path = Path(baseline).resolve()
        try:
            config.stash[_BASELINE] = (path, load_baseline(path, missing_ok=accept))
        except BaselineError as exc:
            raise pytest.UsageError(f"--torchbind-baseline: {exc}") from None


class CheckFailed(Exception):
    """Raised by a check item whose check reported failures; carries the :class:`Outcome`."""

    def __init__(self, outcome: Outcome):
        super().__init__(outcome.check)
        self.outcome = outcome


class TorchbindClass(pytest.Collector):
    """Collector for one TorchBind class: ``torchbind[ns.Cls]``."""

    def __init__(self, *, qualname: str, **kwargs):
        super().__init__(**kwargs)
        self.qualname = qualname

    def collect(self):
        only = self.config.getoption("torchbind_checks")
        units = plan(context_for(self.qualname), set(only.split(",")) if only else None)
        for unit in units:
            yield TorchbindCheckItem.from_parent(self, name=unit.name, unit=unit)


class TorchbindCheckItem(pytest.Item):
    """One check applied to one target; fails with the check's rendered failures."""

    def __init__(self, *, unit: CheckTarget, **kwargs):
        super().__init__(**kwargs)
        self.unit = unit
        _UNITS[self.nodeid] = unit
        supervisor = self.config.stash.get(_SUPERVISOR, None)
        if supervisor is not None:
            supervisor.register(self.nodeid)
        self.add_marker("torchbind")
        self.user_properties += [("torchbind_class", unit.qualname), ("torchbind_check", unit.check.name)]
        if unit.target_name:
            self.user_properties.append(("torchbind_target", unit.target_name))

    def runtest(self) -> None:
        supervisor = self.config.stash.get(_SUPERVISOR, None)
        if supervisor is None:
            outcome = run_target(self.unit)
        else:
            supervisor.prepare_once(self.unit.qualname)
            result = supervisor.run(self.nodeid)
            outcome = lost_outcome(self.unit, result, supervisor.timeout) if isinstance(result, WorkerLost) \
                else result
        self.user_properties.append(("torchbind_status", outcome.status))
        if outcome.data is not None:
            data = outcome.data
            self.user_properties += [("torchbind_row", data["row"]), ("torchbind_backend", data["backend"]),
                                     ("torchbind_cell_status", data["status"]),
                                     (_CELL_PROPERTY, json.dumps(data, sort_keys=True))]
        if outcome.skipped is not None:
            pytest.skip(outcome.skipped)
        if outcome.failures:
            raise CheckFailed(outcome)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CheckFailed):
            outcome = excinfo.value.outcome
            head = f"[{outcome.check}] {self.unit.check.description}"
            return "\n\n".join([head] + [f.render() for f in outcome.failures])
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        fake = context_for(self.unit.qualname).info.fake_class
        path, line = self.path, None
        if fake is not None:
            try:
                path, line = Path(inspect.getsourcefile(fake)), inspect.getsourcelines(fake)[1] - 1
            except (TypeError, OSError):
                pass
        return path, line, f"{self.parent.name}::{self.name}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    for qualname in config.stash.get(_CLASSES, []):
        info = context_for(qualname).info
        collector = TorchbindClass.from_parent(session, name=info.test_name, nodeid=info.test_name,
                                               qualname=qualname)
        items.extend(session.genitems(collector))
    _, known = config.stash.get(_BASELINE, (None, {}))
    for item in items:
        if isinstance(item, TorchbindCheckItem) and item.nodeid in known:
            item.add_marker(pytest.mark.xfail(reason=f"baseline: {known[item.nodeid]}", strict=True))


class _Recorder:
    """Controller-side (or serial-run) record of the session: matrix cells and, for ``--torchbind-accept``,
    each torchbind item's outcome, taken from the test reports — under xdist these arrive from the workers — and
    written out once at the end."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.cells: list[dict] = []
        self.accepted: dict[str, tuple[bool, str]] = {}
        self._report = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        cell = next((value for name, value in report.user_properties if name == _CELL_PROPERTY), None)
        if cell is not None and report.when == "call":
            self.cells.append(json.loads(cell))
            self._report = None
        elif report.failed and report.when not in ("setup", "teardown") and report.nodeid.startswith("torchbind[") \
                and not any(name == "torchbind_status" for name, _ in report.user_properties):
            # No result came back: e.g. a pytest-xdist worker crashed running it ("worker 'gw0' crashed while
            # running ..."). The check still gets its report entry (a matrix cell shows the crash).
            lines = report.longreprtext.strip().splitlines()
            # xdist heads its text with "[gw0] linux -- Python ..." (where it ran); the reason comes after.
            reason = next((ln.strip() for ln in lines if ln.strip() and not re.match(r"\[gw\d+\] ", ln)),
                          "no result")
            data = lost_item_data(self.config.stash.get(_CLASSES, []), report.nodeid, reason)
            if data is not None:
                self.cells.append(data)
                self._report = None
        if not report.nodeid.startswith("torchbind[") or not (report.when == "call" or report.failed):
            return
        xpassed = report.failed and "XPASS(strict)" in str(report.longrepr)
        still_failing = (report.failed and not xpassed) or (report.skipped and hasattr(report, "wasxfail"))
        lines = report.longreprtext.strip().splitlines() if report.failed and not xpassed else []
        summary = next((ln.strip() for ln in lines if ln.strip() and not ln.startswith("[")), "failing")
        self.accepted[report.nodeid] = (still_failing, summary)

    @property
    def report(self):
        if self._report is None:
            self._report = build_report(self.cells)
        return self._report

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.cells:
            return
        terminalreporter.section("torchbind coverage matrix")
        for line in render_lines(self.report):
            terminalreporter.write_line(line)
        path = self.config.stash.get(_REPORT_PATH, None)
        if path is not None:
            terminalreporter.write_line(f"report: {path}")

    def pytest_sessionfinish(self) -> None:
        config = self.config
        path = config.stash.get(_REPORT_PATH, None)
        if path is not None:
            write_report(self.report, path)
        if config.getoption("torchbind_accept") and _BASELINE in config.stash:
            baseline_path, known = config.stash[_BASELINE]
            save_baseline(baseline_path, merge_accepted(known, self.accepted))
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary and self.cells:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(render_markdown(self.report) + "\n")
