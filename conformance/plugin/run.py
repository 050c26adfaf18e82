"""The setup role of the plugin (:class:`PluginRun`: what one pytest run — controller, serial run or xdist
worker — is given) and its running role (:class:`ItemRunner`: how it runs an item).

``conformance.plugin.hooks``'s hooks are one-line calls into a :class:`PluginRun` kept in ``config.stash``.
:meth:`PluginRun.configure` reads the options, builds the run's :class:`~conformance.runner.Engine` (frozen
settings, the process's registry, a tracer), loads the libraries and fakes (:mod:`conformance.process.loading`) and
expands the class selectors; only then does it make the roles, each given the selected classes as a tuple that no
one fills later: the :class:`ItemRunner` (torch's defaults for the plugin's items, the isolation worker of
:mod:`conformance.process`), the :class:`~conformance.plugin.items.Collection` (the items) and, on the controller
or in a serial run only, the :class:`~conformance.plugin.recorder.Recorder` of what the reports bring back
(registered as a plugin there, with xdist's ``pytest_handlecrashitem`` where xdist is installed).

An item runs: item -> :meth:`ItemRunner.run` -> (the isolation worker) -> the runner's own table of collected items,
which :meth:`PluginRun.collect` hands it as a copy when collection ends, before any worker is forked.

SIGTERM on the controller or a serial run is handled like Ctrl-C (pytest stops, the partial report is written and
marked incomplete, exit status 2).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import signal
import threading
import warnings
from pathlib import Path

import pytest
import torch

from ..checks import all_checks
from ..torchbind.context import import_lazily_imported_modules
from ..core.results import SelectorError
from ..kinds import expand_selector
from ..kinds import registered_classes
from ..core.faults import watch_interrupts
from .items import Collection
from ..engine.loading import existing_path, parse_spec, renamed_files, load_lines, selecting
from ..process.loading import LoadError, apply_load_spec
from ..process.lost import forked_world
from ..matrix.backends import all_backends
from .options import RunOptions, read_options, replaced_ini_lists
from ..process import Supervisor, WorkerLost
from .recorder import CrashHook, Recorder
from ..core.results import Verdict
from .reuse import KeyMaker, ReuseStore
from ..runner import CheckTarget, Engine, RunPlan, lost_outcome, prepare_class, run_target, unsendable_outcome
from . import torch_globals
from ..core.versions import untested_warning

__all__ = ["PluginRun", "run_labels"]


@contextlib.contextmanager
def _untraced():
    """Keep torch's structured-trace records (``torch.__trace``: always DEBUG, thousands per compile, empty messages)
    out of pytest's log capture while a check runs in the pytest process. torch never lets them propagate, but
    pytest attaches its capture handlers to non-propagating loggers too (the handlers of ``_pytest.logging``
    found on ``torch.__trace``), so those are taken off for the check and put back after; torch's own handler
    (``TORCH_TRACE``) stays."""
    trace = logging.getLogger("torch.__trace")
    propagate, trace.propagate = trace.propagate, False
    pytests = [h for h in trace.handlers if type(h).__module__ == "_pytest.logging"]
    for handler in pytests:
        trace.removeHandler(handler)
    try:
        yield
    finally:
        trace.propagate = propagate
        for handler in pytests:
            if handler not in trace.handlers:
                trace.addHandler(handler)


def run_labels(settings) -> dict[str, str]:
    """What tells this run apart from other runs in a merged report (:mod:`conformance.reports.merge`): the torch
    version, the device the checks ran on, the platform, and the date (UTC, to the second; not part of a run's
    identity)."""
    import datetime
    import platform

    return {"torch": torch.__version__, "device": getattr(settings, "device", "cpu"),
            "platform": f"{sys.platform}-{platform.machine()}",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _sigterm_as_interrupt(signum, frame) -> None:
    """SIGTERM handler of the controller or serial run: stop the way Ctrl-C does, so that pytest runs
    ``pytest_sessionfinish`` (the partial report, JUnit XML) and exits with status 2 (interrupted)."""
    raise KeyboardInterrupt("terminated by SIGTERM")


@contextlib.contextmanager
def _torch_defaults(device: str, threads: int | None):
    """torch's default ``device`` (``--torchbind-device``) and, under xdist, its intra-op ``threads``, as the plugin's
    loading and items need them, put back as they were afterwards: the user's own tests in the same run see torch as
    they left it. An isolation worker forked meanwhile keeps them."""
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


class ItemRunner:
    """The running role: runs one collected item in the isolation worker (one per class: a crash or hang becomes a
    failed verdict) or, without one, in the pytest process; with the plugin's torch defaults (:meth:`torch_defaults`)
    either way. ``threads``: torch's intra-op threads for the plugin's items (under xdist), ``None``: as they are.

    Its table of items (node id -> target, and whether the baseline expects it to fail) is its own: a copy made when
    collection ends (:meth:`collected`), before any worker is forked, which the worker reads by node id."""

    def __init__(self, engine: Engine, threads: int | None = None):
        self.engine, self.threads = engine, threads
        self.supervisor: Supervisor | None = None
        self._targets: dict[str, tuple[CheckTarget, bool]] = {}

    def isolate(self, classes: tuple[str, ...], timeout: float, memory_limit: int) -> None:
        """Run items in supervised worker processes from now on (:mod:`conformance.process`), each class's
        preparation (``classes``) its own key."""
        self.supervisor = Supervisor(self._run_in_worker, timeout, before_fork=import_lazily_imported_modules,
                                     tracer=self.engine.tracer, memory_limit=memory_limit,
                                     unsendable=unsendable_outcome)
        for qualname in classes:
            self.supervisor.register(qualname)  # the key of the class's preparation

    def collected(self, items: dict[str, CheckTarget], expected) -> None:
        """Take the collected ``items`` (node id -> target) and the node ids the baseline ``expected`` to fail, as
        they are when collection ends: a worker forked later runs them by node id."""
        for nodeid, unit in items.items():
            self._targets[nodeid] = (unit, nodeid in expected)
            if self.supervisor is not None:
                self.supervisor.register(nodeid)  # a worker forked before it was collected cannot run it

    def close(self) -> None:
        """Stop the worker (when there is one)."""
        if self.supervisor is not None:
            self.supervisor.close()

    def torch_defaults(self):
        """torch's default device and intra-op threads for the plugin's items (:func:`_torch_defaults`)."""
        return _torch_defaults(self.engine.settings.device, self.threads)

    def run(self, nodeid: str, unit: CheckTarget) -> Verdict:
        """Run one item: in the isolation worker (a crash or hang becomes a failed outcome), or here; with the
        plugin's torch defaults (:meth:`torch_defaults`) either way."""
        if self.supervisor is None:
            return self._run_here(nodeid, unit)
        with self.torch_defaults():
            # One worker per class (group): a leak or a crash of one class never shows in another class's items.
            self.supervisor.prepare_once(unit.qualname, group=unit.qualname)
            # A matrix cell (one program compiled or exported, then run) gets --torchbind-timeout as a whole: a
            # hang in torch's compiler costs one timeout; other items get ITEM_LIMIT_FACTOR times it.
            factor = 1 if unit.check.scope == "cell" else None
            result = self.supervisor.run(nodeid, group=unit.qualname, factor=factor)
            if isinstance(result, WorkerLost):
                return lost_outcome(unit, result.failure(self.supervisor.timeout))
            return result

    def _known_failure(self, nodeid: str) -> bool:
        return self._targets.get(nodeid, (None, False))[1]

    def _run_here(self, nodeid: str, unit: CheckTarget) -> Verdict:
        """Run one item in the pytest process (``--torchbind-isolation=none``). torch's process-wide defaults
        (:mod:`conformance.plugin.torch_globals`) are put back afterwards, with a warning naming the item and what it
        changed, so the user's own tests after it see torch as they left it; a child process forked during the item
        that comes back here ends (it must not run the rest of the session a second time)."""
        saved, pid = torch_globals.snapshot(), os.getpid()
        try:
            with self.torch_defaults(), _untraced():
                return run_target(unit, self.engine, known_failure=self._known_failure(nodeid))
        finally:
            if os.getpid() != pid:
                os._exit(0)
            changed = torch_globals.put_back(saved)
            if changed:
                warnings.warn(pytest.PytestWarning(
                    f"{nodeid} changed torch's process-wide defaults, which every test after it in this process "
                    f"would have seen (--torchbind-isolation=none runs the plugin's items in the pytest process); "
                    f"put back after the item: {torch_globals.describe(changed)}. A fake, the class's code or an "
                    "example factory that changes them should put them back itself (a context manager such as "
                    "torch.no_grad(), or try/finally)"))

    def _run_in_worker(self, key: str) -> Verdict:
        """What the isolation worker runs for a key: a collected item (by node id) or a class's preparation."""
        unit, known_failure = self._targets.get(key, (None, False))
        if unit is None:
            return prepare_class(key, self.engine)
        return run_target(unit, self.engine, known_failure=known_failure)


class PluginRun:
    """One pytest run of the plugin, built in ``pytest_configure`` by :meth:`configure` once the libraries are loaded
    and the selectors expanded: ``classes``, the selected ``ns::Cls`` names (a tuple every role is given);
    ``named``, the gate arguments of the command line, which limit the items collected."""

    def __init__(self, config: pytest.Config, options: RunOptions, engine: Engine, classes: tuple[str, ...],
                 named: list[str] = ()):
        self.config, self.options, self.engine, self.classes = config, options, engine, tuple(classes)
        self.controller = not hasattr(config, "workerinput")
        workers = getattr(config, "workerinput", {}).get("workercount")
        # Under xdist, N workers each running torch's intra-op thread pool oversubscribe the cores and make
        # compile-bound matrix runs slower than serial ones (applied around the plugin's items only).
        threads = max(1, (os.cpu_count() or 1) // int(workers)) if self.classes and workers else None
        self.runner = ItemRunner(engine, threads)
        reuse = None
        if getattr(config, "cache", None) is not None:
            # Verdicts kept in pytest's cache: read back with --torchbind-reuse=on; with off, only those an
            # earlier run kept are refreshed (options checked that reuse=on has a cache).
            reuse = ReuseStore(config.cache, KeyMaker(engine.context, engine.registry, engine.settings,
                                                      options=(options.timeout,), config=config),
                               reading=options.reuse)
            reuse.keys.snapshot()  # the extension modules the run's loading imported
        self.plan = RunPlan(engine, self.classes)  # planned once: the collection and the recorder read it
        self.collection = Collection(engine, self.plan, options.known, torch.__version__, self.runner.run,
                                     baseline_path=options.baseline, reuse=reuse, named=named)
        #: The controller's (or a serial run's) recorder; ``None`` on a pytest-xdist worker.
        self.recorder = Recorder(options, self.plan, self.labels) if self.controller else None
        self._sigterm_installed = False
        self._unwatch_sigint = lambda: None  # puts back the SIGINT handler watch_interrupts replaced

    # ----- configure --------------------------------------------------------------------------------------------
    @classmethod
    def configure(cls, config: pytest.Config, named: list[str] = ()) -> PluginRun:
        """Validate the options, load the libraries and fakes, expand the class selectors, then make the run and
        its roles: isolation and, on the controller, the recorder. The engine reads the process's registry
        (decorators that already ran, and those the loaded modules run). ``named``: the gate arguments of the
        command line (:func:`~conformance.plugin.options.claim_gate_arguments`), which limit the items collected.
        Raises ``pytest.UsageError`` for bad input."""
        options = read_options(config, [c.name for c in all_checks()], [b.name for b in all_backends()])
        rootdir = Path(str(config.rootpath))
        load_code = load_lines(list(options.load), rootdir)
        device = options.settings.device
        if device != "cpu":
            # Every tensor the plugin makes (example objects, arguments, program inputs) and every reproducer's;
            # set only while the plugin loads and runs its items (ItemRunner.torch_defaults).
            load_code.append(f"torch.set_default_device({device!r})")
        engine = Engine(dataclasses.replace(options.settings, load_code=tuple(load_code)))
        for warning in [untested_warning(torch.__version__), *replaced_ini_lists(config)]:
            if warning:
                config.issue_config_time_warning(pytest.PytestWarning(warning), stacklevel=2)
        _load(options, rootdir)
        run = cls(config, options, engine, _expand(options.selectors), named)
        config.add_cleanup(run.unconfigure)
        if run.recorder is not None:
            config.pluginmanager.register(run.recorder, "torchbind-recorder")
            if config.pluginmanager.hasplugin("xdist"):
                config.pluginmanager.register(CrashHook(run.recorder), "torchbind-crash-hook")
        run._configure_isolation()
        run._handle_sigterm()
        if run.classes:
            # Tells a real Ctrl-C from a KeyboardInterrupt raised by a fake (conformance.core.faults), until
            # unconfigure.
            run._unwatch_sigint = watch_interrupts()
        return run

    def _configure_isolation(self) -> None:
        if self.options.isolation != "process" or not self.classes:
            return
        backend = forked_world()
        if backend is not None:  # collectives in the forked worker would hang, each item until its timeout
            self.config.issue_config_time_warning(pytest.PytestConfigWarning(
                f"torch.distributed's default process group (backend {backend}) was initialized before the "
                "isolation worker is forked: a collective run in a forked process hangs (the backend's threads "
                "and connections stay in the parent), so every item whose op communicates would fail as a hang; "
                "run with --torchbind-isolation=none (docs: Gate distributed classes)"), stacklevel=2)
        self.runner.isolate(self.classes, self.options.timeout, self.options.memory_limit)

    def _handle_sigterm(self) -> None:
        """On the controller or a serial run that checks classes, from the main thread, where SIGTERM still has
        its default action: make SIGTERM (CI cancellation, ``timeout``) stop the run like Ctrl-C."""
        if not self.controller or not self.classes or threading.current_thread() is not threading.main_thread():
            return
        with contextlib.suppress(ValueError, OSError, AttributeError):
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
                self._sigterm_installed = True

    def unconfigure(self) -> None:
        """Stop the worker, give SIGTERM back its default action (when :meth:`_handle_sigterm` changed it), and put
        back the SIGINT handler :func:`~conformance.core.faults.watch_interrupts` replaced."""
        self.runner.close()
        if self._sigterm_installed and signal.getsignal(signal.SIGTERM) is _sigterm_as_interrupt:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._sigterm_installed = False
        self._unwatch_sigint()
        self._unwatch_sigint = lambda: None

    # ----- collecting and running --------------------------------------------------------------------------------
    def collect(self, session: pytest.Session, items: list) -> None:
        """Add the run's items (:meth:`Collection.collect <conformance.plugin.items.Collection.collect>`), then
        give the runner its table of them (:meth:`ItemRunner.collected`)."""
        self.collection.collect(session, items)
        self.runner.collected(dict(self.collection.items), frozenset(self.collection.expected))

    def labels(self) -> dict[str, str]:
        """This run's labels in the report (:func:`run_labels`)."""
        return run_labels(self.engine.settings)

    def report_header(self) -> list[str]:
        """Lines for pytest's header: what the run checks and, without process isolation, the promises it
        cannot keep."""
        if not self.classes:
            return []
        lines = [f"torchbind: {len(self.classes)} class(es), isolation={self.options.isolation}"]
        if self.options.isolation == "none":
            lines.append("torchbind: --torchbind-isolation=none: checks run in the pytest process: a crash in C++ "
                         "ends the run, and calls are not timed (--torchbind-timeout is not enforced)")
        return lines + self._renamed_lines()

    def _renamed_lines(self) -> list[str]:
        """A header line for each ``.py`` file of ``--torchbind-load`` imported under a digest name, not its stem:
        the name its classes have (``<name>.Cls``, in test ids and selectors) and why."""
        renamed, rootdir = renamed_files(), Path(str(self.config.rootpath))
        lines = []
        for spec in self.options.load:
            kind, target, _ = parse_spec(spec)
            path = existing_path(target, rootdir) if kind == "file" else None
            if path in renamed:
                name, why = renamed[path]
                lines.append(f"torchbind: --torchbind-load={spec} is imported as the module {name}, not by its "
                             f"file name, because {why}; its classes are {name}.<Class>")
        return lines


def _load(options: RunOptions, rootdir: Path) -> None:
    """Apply the run's ``--torchbind-load`` specs in order, with torch's default device set (load modules may ask
    what the run selects: :func:`conformance.selected_classes`). Raises ``pytest.UsageError`` for
    a spec that fails, and for specs given without a class selected (naming the classes they registered)."""
    unselected = bool(options.load) and not options.selectors  # a usage error below, naming what loaded
    before = set(registered_classes()) if unselected else set()
    with _torch_defaults(options.settings.device, None), selecting(options.selectors):
        for spec in options.load:
            try:
                apply_load_spec(spec, rootdir)
            except LoadError as exc:
                raise pytest.UsageError(str(exc)) from None
    if unselected:
        loaded = sorted(set(registered_classes()) - before) or registered_classes()
        raise pytest.UsageError(
            "--torchbind-load loaded libraries and fakes but no class is selected, so nothing would be checked: "
            "add --torchbind-class=NS::CLS (or NS::*, or module.QualName for a Python custom class), or "
            "torchbind_classes in the ini. Classes registered: "
            + (", ".join(loaded) or "(none)"))


def _expand(selectors: list[str]) -> tuple[str, ...]:
    """The ``ns::Cls`` names the selectors select, each once, in order. Raises ``pytest.UsageError`` for a selector
    that selects nothing (:class:`~conformance.core.results.SelectorError`)."""
    classes: list[str] = []
    for selector in selectors:
        try:
            for qualname in expand_selector(selector):
                if qualname not in classes:
                    classes.append(qualname)
        except SelectorError as exc:
            raise pytest.UsageError(str(exc)) from None
    return tuple(classes)
