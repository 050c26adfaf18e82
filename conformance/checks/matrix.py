"""Check ``matrix``: one item per coverage-matrix cell — a scenario (row) through a backend (column) — compared
with plain eager (for a Python custom class, a row is an op taking it: :mod:`conformance.matrix.custom`). The work is in :mod:`conformance.matrix`; this module maps cells onto the check registry, so
each cell is an ordinary item ``torchbind[ns.Cls]::matrix[<row>-<backend>]`` and its data reaches the reports.
"""

from __future__ import annotations

import dataclasses

from ..engine.arguments import Excluded
from ..matrix.backend import all_backends
from ..matrix.cell import new_cell, run_cell
from ..matrix.custom import custom_rows, run_custom_cell
from ..matrix.scenarios import row_names
from ..core.results import Cell, NotApplicable, Status
from ..torchbind.context import ClassContext
from ..custom.context import CustomClassContext
from . import with_targets


@dataclasses.dataclass(frozen=True)
class CellTarget:
    """A matrix target: ``row`` (scenario) and ``backend`` name, with their positions for stable ordering."""

    row: str
    backend: str
    row_index: int
    backend_index: int

    @property
    def short_name(self) -> str:
        return f"{self.row}-{self.backend}"


def _targets(ctx) -> list[CellTarget]:
    names = [b.name for b in all_backends()]
    rows = custom_rows(ctx) if ctx.kind == "custom" else row_names(ctx)
    return [CellTarget(r, b, i, j) for i, r in enumerate(rows) for j, b in enumerate(names)]


def _lost(qualname: str, target: CellTarget, reason: str) -> Cell:
    """The cell of an item whose worker process crashed or hung: failed, with that reason."""
    return Cell(qualname, target.row, target.backend, target.row_index, target.backend_index, Status.FAILED, reason)


@with_targets(_targets, lost=_lost)
def matrix(ctx: ClassContext | CustomClassContext, target: CellTarget) -> Cell:
    """The scenario runs through the backend and matches plain eager: outputs, final object state, and an
    untouched traced object."""
    if ctx.kind == "custom":  # a Python custom class: an op called with a sequence of objects
        return run_custom_cell(ctx, target.row, target.backend)
    # A cell that cannot run still appears in every report, saying why.
    cell = new_cell(ctx, target.row, target.backend)
    try:
        if not ctx.traces_with_real_object:
            ctx.require_fake()  # without a fake class no backend can fakify the object; fake_class reports it
    except NotApplicable as exc:
        cell.status, cell.reason = Status.SKIPPED, f"{exc}: no backend can fakify the object"
        return cell
    flatten_error = ctx.example_set.flatten_error
    if flatten_error:  # every cell compares flattened states, and no backend can fakify such an object
        cell.status, cell.reason = Status.SKIPPED, (
            f"the matrix compares the object's flattened state after each program, and {ctx.info.qualname}."
            f"__obj_flatten__() raised {flatten_error} on the example objects, so no backend can fakify it either "
            f"(see {ctx.info.test_name}::flatten)")
        return cell
    try:
        return run_cell(ctx, target.row, target.backend)
    except Excluded as exc:
        cell.status, cell.reason = Status.SKIPPED, str(exc)
        return cell
    except NotApplicable as exc:
        cell.status, cell.reason = Status.SKIPPED, f"no eager reference: {exc}"
        return cell
