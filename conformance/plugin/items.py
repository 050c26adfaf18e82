"""The collection role: :class:`Collection` (what a run collects, and the table of collected items), and the pytest
collector and item classes: one collector per TorchBind class, one item per check and target.

Test ids: ``torchbind[ns.Cls]::<check>`` or ``torchbind[ns.Cls]::<check>[<method, op or cell>]``. An item runs its
check (in the isolation worker when there is one) and fails with the check's rendered failures
(:class:`CheckFailed`, unwrapped in :meth:`TorchbindCheckItem.repr_failure`). Its ``user_properties`` (which also
reach ``--junitxml``) say only class, check, target and status; its :class:`~conformance.core.results.Verdict`, which
the controller's recorder reads, is kept as :meth:`~conformance.core.results.Verdict.to_json` data in the item
attribute :data:`conformance.core.names.ITEM_DATA` and travels on the call report
(:func:`conformance.plugin.hooks.pytest_runtest_makereport`).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from .baseline import Entry, series
from ..core.names import ITEM_DATA
from ..core.qualname import split_id
from ..reports import encodable
from ..core.results import Status, Verdict
from .reuse import ReuseStore, settled
from ..runner import CheckTarget, Engine, RunPlan

__all__ = ["Collection", "CheckFailed", "TorchbindClass", "TorchbindCheckItem", "STATUS"]

#: The ``user_properties`` name of an item's status (beside ``torchbind_class``, ``torchbind_check`` and
#: ``torchbind_target``).
STATUS = "torchbind_status"


def _encodable(value):
    """``value`` (a verdict's JSON data: dicts, lists, strings, numbers) with every string made encodable."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_encodable(v) for v in value)
    return value


def encodable_report(report: pytest.TestReport) -> None:
    """Make a torchbind item's report carry only encodable text: its captured sections (what torch logged or
    printed, e.g. an exception message with an unpaired surrogate) and a text ``longrepr``. pytest-xdist sends
    reports through execnet, which encodes UTF-8 strictly, so one such character would end the worker."""
    report.sections = [(title, encodable(text)) for title, text in report.sections]
    if isinstance(report.longrepr, str):
        report.longrepr = encodable(report.longrepr)


class Collection:
    """What one run collects: the items of each selected class of ``run_plan`` (the run's one
    :class:`~conformance.runner.RunPlan`, with its ``--torchbind-checks`` and ``--torchbind-backends``; ``engine``
    gives each class's context), the baseline's ``known`` failures (read from
    ``baseline_path``) that apply to this ``torch_version`` marked as strict xfails, and the table of collected
    items (node id -> :class:`~conformance.runner.CheckTarget`)
    an isolation worker forked later runs by node id. ``run_item(nodeid, unit)`` runs one item (the running role's
    :meth:`conformance.plugin.run.ItemRunner.run`); ``named``: the node id prefixes the command line named the gate
    by (``torchbind[ns.Cls]::matrix``; empty: all items);
    ``reuse``: the store of settled verdicts (reading them with ``--torchbind-reuse=on``; refreshing only those
    kept earlier with ``off``), or ``None`` without pytest's cache; ``expected``: the
    baseline entries marked on the collected items (node id -> entry), filled by :meth:`collect`."""

    def __init__(self, engine: Engine, run_plan: RunPlan, known: dict[str, Entry], torch_version: str,
                 run_item: Callable[[str, CheckTarget], Verdict], baseline_path: Path | None = None,
                 reuse: ReuseStore | None = None, named: Iterable[str] = ()):
        self.engine, self.run_plan, self.known, self.torch_version = engine, run_plan, known, torch_version
        self.classes = run_plan.classes
        self.baseline_path, self.reuse = baseline_path, reuse
        self.run_item = run_item
        self.items: dict[str, CheckTarget] = {}
        self.expected: dict[str, Entry] = {}
        self._locations: dict[str, tuple[Path | None, int]] = {}  # qualname -> fake class's source (reportinfo)
        self.named: list[str] = list(named)

    def plan(self, qualname: str) -> list[CheckTarget]:
        """The class's units, with the run's check and backend filters (the run's one :class:`RunPlan`)."""
        return self.run_plan.selected(qualname)

    def collect(self, session: pytest.Session, items: list) -> None:
        """Add the torchbind items of every selected class, and mark the baseline's known failures as strict
        xfails."""
        ours = []
        for qualname in self.classes:
            info = self.engine.context(qualname).info
            collector = TorchbindClass.from_parent(session, name=info.test_name, nodeid=info.test_name,
                                                   qualname=qualname, collection=self)
            found = list(session.genitems(collector))
            if not found:  # said, not a silent "collected 0 items" (exit status 5 when no other class has items)
                self.nothing_to_check(qualname)
            else:
                self.no_ops(qualname)
            ours.extend(found)
        for arg in self.named:
            if not any(_named_by(item.nodeid, arg) for item in ours):
                raise pytest.UsageError(f"{arg}: no conformance item matches; the selected classes' items are "
                                        f"{', '.join(sorted({split_id(i.nodeid)[0] for i in ours})) or 'none'}"
                                        " (their ids: pytest --collect-only -q torchbind)")
        items.extend(i for i in ours if not self.named or any(_named_by(i.nodeid, arg) for arg in self.named))
        for item in items:
            entry = self.known.get(item.nodeid) if isinstance(item, TorchbindCheckItem) else None
            if entry is not None and entry.applies_to(self.torch_version):  # another torch's entry does not apply
                self.expected[item.nodeid] = entry
                # pytest shows the reason after XPASS(strict) when the test passes: say what to do then.
                here = series(self.torch_version)
                carried = (f", carried to torch {here}, where it has not been accepted yet"
                           if entry.carried_to(here) else "")
                item.add_marker(pytest.mark.xfail(strict=True, reason=(
                    f"baseline: {entry.reason} (known failure on {entry.where()}{carried}; if it passes now, remove "
                    f"the entry from {self.baseline_path} or run with --torchbind-accept)")))

    def nothing_to_check(self, qualname: str) -> None:
        """Warn (``PytestCollectionWarning``, in pytest's warnings summary) that a selected class has no item with
        the run's filters, and why (:func:`conformance.kinds.why_nothing_to_check`)."""
        from ..checks import all_checks
        from ..kinds import why_nothing_to_check

        settings = self.engine.settings
        why = why_nothing_to_check(qualname, self.engine.context(qualname).kind, all_checks(), settings.checks,
                                   settings.backends)
        # Located at the class's collector, not at this line of the plugin.
        warnings.warn_explicit(pytest.PytestCollectionWarning(why), pytest.PytestCollectionWarning,
                               filename=self.engine.context(qualname).info.test_name, lineno=0)

    def no_ops(self, qualname: str) -> None:
        """Warn (``PytestCollectionWarning``) that no op takes a selected Python custom class, saying where the ops
        were looked for (:func:`conformance.kinds.why_no_ops`): a class whose ops were not found would otherwise
        pass its few protocol items and say nothing of them."""
        from ..kinds import why_no_ops

        context = self.engine.context(qualname)
        why = why_no_ops(qualname, context.kind, context.info)
        if why is not None:
            warnings.warn_explicit(pytest.PytestCollectionWarning(why), pytest.PytestCollectionWarning,
                                   filename=context.info.test_name, lineno=0)

    def reuse_key(self, nodeid: str, unit: CheckTarget) -> str | None:
        """The item's reuse key (:class:`~conformance.plugin.reuse.KeyMaker`), or ``None`` without a store or when the key
        cannot be computed (the item runs). When the baseline marked the item a strict xfail (:attr:`expected`),
        its entry (reason and the torch releases it applies to) is part of the key, so a kept known failure counts
        only while the baseline lists the item the same way, and a kept pass only while it does not list it. An
        xfail marker of the user's own is not the baseline's: it changes neither the key nor what is kept."""
        if self.reuse is None:
            return None
        entry = self.expected.get(nodeid)
        expected = f"{entry.reason} ({entry.where()})" if entry is not None else None
        try:
            return self.reuse.keys.key(unit.qualname, unit.check.name, unit.name, expected)
        except Exception:  # noqa: BLE001 - a key the plugin cannot compute: the item runs
            return None

    def location(self, qualname: str) -> tuple[Path | None, int]:
        """The source file and 0-based line of the class's fake class (a Python custom class: the class itself),
        ``(None, 0)`` when it has none or its source cannot be found; looked up once per class (pytest asks each
        item for it on every report)."""
        if qualname not in self._locations:
            ctx = self.engine.context(qualname)
            fake = ctx.info.fake_class if ctx.kind == "torchbind" else ctx.info.cls
            where: tuple[Path | None, int] = (None, 0)
            if fake is not None:
                try:
                    where = Path(inspect.getsourcefile(fake)), inspect.getsourcelines(fake)[1] - 1
                except (TypeError, OSError):
                    pass
            self._locations[qualname] = where
        return self._locations[qualname]

    def register(self, nodeid: str, unit: CheckTarget) -> None:
        """Remember a collected item in :attr:`items` (the run's :class:`~conformance.plugin.run.ItemRunner` copies
        it when collection ends, so a worker process forked later can run the item by node id)."""
        self.items[nodeid] = unit


def _named_by(nodeid: str, arg: str) -> bool:
    """Whether the gate argument ``arg`` (``torchbind``, ``torchbind[ns.Cls]``, ``torchbind[ns.Cls]::matrix``,
    a whole node id) names the item ``nodeid``."""
    if arg == "torchbind" or nodeid == arg:
        return True
    return nodeid.startswith(arg + "::") or ("::" in arg and nodeid.startswith(arg + "["))


class CheckFailed(Exception):
    """Raised by a check item whose check reported failures; carries the rendered failures (``text``: the
    check's one-line rule, then each failure as :meth:`~conformance.core.results.Verdict.render` writes it)."""

    def __init__(self, check: str, text: str):
        super().__init__(check)
        self.text = text


class TorchbindClass(pytest.Collector):
    """Collector for one TorchBind class: ``torchbind[ns.Cls]``."""

    def __init__(self, *, qualname: str, collection: Collection, **kwargs):
        super().__init__(**kwargs)
        self.qualname = qualname
        self.collection = collection

    def collect(self):
        for unit in self.collection.plan(self.qualname):
            yield TorchbindCheckItem.from_parent(self, name=unit.name, unit=unit, collection=self.collection)


class TorchbindCheckItem(pytest.Item):
    """One check applied to one target; fails with the check's rendered failures."""

    def __init__(self, *, unit: CheckTarget, collection: Collection, **kwargs):
        super().__init__(**kwargs)
        self.unit = unit
        self.collection = collection
        collection.register(self.nodeid, unit)
        self.add_marker("torchbind")
        self.user_properties += [("torchbind_class", unit.qualname), ("torchbind_check", unit.check.name)]
        if unit.target_name:
            self.user_properties.append(("torchbind_target", unit.target_name))

    def runtest(self) -> None:
        store = self.collection.reuse
        # With --torchbind-reuse=off nothing is read back, but what an earlier run kept for the item is refreshed.
        refresh = store is not None and (store.reading or store.holds(self.nodeid))
        key = self.collection.reuse_key(self.nodeid, self.unit) if refresh else None
        kept = store.lookup(self.nodeid, key) if key is not None and store.reading else None
        if kept is not None:  # a settled verdict with the same key: reported again, saying so (its note)
            self._conclude(kept)
            return
        verdict = self.collection.run_item(self.nodeid, self.unit)
        if key is not None and settled(verdict, expected_to_fail=self.nodeid in self.collection.expected):
            store.store(self.nodeid, key, verdict)
        elif refresh:
            store.forget(self.nodeid)  # a verdict kept earlier (another key, or a change the key cannot see)
        self._conclude(verdict)

    def _conclude(self, verdict: Verdict) -> None:
        """Report ``verdict`` (:meth:`_report`), then end the item as its status says: a skip with its reason, a
        failure with its rendered failures, or a pass. Every text is made encodable first
        (:func:`~conformance.reports.encodable`): pytest-xdist's transport (execnet) and the terminal encode UTF-8,
        and one unpaired surrogate in a C++ message would otherwise end the worker (an INTERNALERROR)."""
        data = _encodable(verdict.to_json())
        self._report(verdict, data)
        if verdict.status is Status.SKIPPED:
            # Reported at the item (its fake class), not at this line: what `pytest -rs` shows as the location.
            raise pytest.skip.Exception(data["summary"], _use_item_location=True)
        if verdict.failures:
            raise CheckFailed(verdict.check, encodable(f"[{verdict.check}] {self.unit.check.description}\n\n"
                                                       f"{verdict.render()}"))

    def _report(self, verdict: Verdict, data: dict) -> None:
        """Give the item's status to ``--junitxml`` and its verdict (``data``: its encodable JSON data) to the
        controller's recorder; notes (what the check found that does not change its status, and a reuse) are shown
        by -rA / -rP."""
        self.user_properties.append((STATUS, verdict.status.value))
        if data["notes"]:
            self.add_report_section("call", "torchbind notes", "\n".join(data["notes"]))
        if verdict.status is Status.PASSED and verdict.evidence.counts:
            self.add_report_section("call", "torchbind evidence", verdict.evidence.describe())
        setattr(self, ITEM_DATA, data)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CheckFailed):
            return excinfo.value.text
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        """Where the item points: the fake class's source when there is one (a skip or failure is about it; a
        Python custom class's own source), else the rootdir; line 0 when no line is known (pytest needs one for a skip reported at the item)."""
        path, line = self.collection.location(self.unit.qualname)
        return path or self.path, line, f"{self.parent.name}::{self.name}"
