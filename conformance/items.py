"""pytest collector and item classes: one collector per TorchBind class, one item per check and target.

Test ids: ``torchbind[ns.Cls]::<check>`` or ``torchbind[ns.Cls]::<check>[<method, op or cell>]``. An item runs its
check (in the isolation worker when there is one), puts what the controller needs on ``user_properties``, and
fails with the check's rendered failures (:class:`CheckFailed`, unwrapped in :meth:`TorchbindCheckItem.repr_failure`).
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .results import Outcome
from .runner import CheckTarget, plan

if TYPE_CHECKING:  # pragma: no cover
    from .pytest_run import PluginRun

__all__ = ["CheckFailed", "TorchbindClass", "TorchbindCheckItem", "STATUS", "CELL", "SUMMARY"]

#: ``user_properties`` names the controller reads: the item's status, its one-line summary, and a matrix cell
#: (JSON of :meth:`conformance.results.Cell.to_json`). They also reach ``--junitxml`` as properties.
STATUS, SUMMARY, CELL, NOTES = "torchbind_status", "torchbind_summary", "torchbind_cell", "torchbind_notes"


class CheckFailed(Exception):
    """Raised by a check item whose check reported failures; carries the :class:`Outcome`."""

    def __init__(self, outcome: Outcome):
        super().__init__(outcome.check)
        self.outcome = outcome


class TorchbindClass(pytest.Collector):
    """Collector for one TorchBind class: ``torchbind[ns.Cls]``."""

    def __init__(self, *, qualname: str, run: PluginRun, **kwargs):
        super().__init__(**kwargs)
        self.qualname = qualname
        self.run = run

    def collect(self):
        for unit in plan(self.qualname, self.run.session):
            yield TorchbindCheckItem.from_parent(self, name=unit.name, unit=unit, run=self.run)


class TorchbindCheckItem(pytest.Item):
    """One check applied to one target; fails with the check's rendered failures."""

    def __init__(self, *, unit: CheckTarget, run: PluginRun, **kwargs):
        super().__init__(**kwargs)
        self.unit = unit
        self.run = run
        run.register_item(self.nodeid, unit)
        self.add_marker("torchbind")
        self.user_properties += [("torchbind_class", unit.qualname), ("torchbind_check", unit.check.name)]
        if unit.target_name:
            self.user_properties.append(("torchbind_target", unit.target_name))

    def runtest(self) -> None:
        outcome = self.run.run_item(self.nodeid, self.unit)
        self.user_properties += [(STATUS, outcome.status.value), (SUMMARY, outcome.summary)]
        if outcome.notes:
            # What the check found that does not change its status (shown by -rA / -rP and in the JSON report).
            self.user_properties.append((NOTES, json.dumps(outcome.notes)))
            self.add_report_section("call", "torchbind notes", "\n".join(outcome.notes))
        if outcome.cell is not None:
            cell = outcome.cell
            self.user_properties += [("torchbind_row", cell.row), ("torchbind_backend", cell.backend),
                                     ("torchbind_cell_status", cell.status.value),
                                     (CELL, json.dumps(cell.to_json(), sort_keys=True))]
        if outcome.reason is not None:
            # Reported at the item (its fake class), not at this line: what `pytest -rs` shows as the location.
            raise pytest.skip.Exception(outcome.reason, _use_item_location=True)
        if outcome.failures:
            raise CheckFailed(outcome)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CheckFailed):
            outcome = excinfo.value.outcome
            return f"[{outcome.check}] {self.unit.check.description}\n\n{outcome.render()}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        """Where the item points: the fake class's source when there is one (a skip or failure is about it),
        else the rootdir; line 0 when no line is known (pytest needs one for a skip reported at the item)."""
        fake = self.run.session.context(self.unit.qualname).info.fake_class
        path, line = self.path, 0
        if fake is not None:
            try:
                path, line = Path(inspect.getsourcefile(fake)), inspect.getsourcelines(fake)[1] - 1
            except (TypeError, OSError):
                pass
        return path, line, f"{self.parent.name}::{self.name}"
