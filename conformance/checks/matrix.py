"""Check ``matrix``: one item per coverage-matrix cell — a scenario (row) through a backend (column) — compared
with plain eager. The work is in :mod:`conformance.matrix`; this module maps cells onto the check registry, so
each cell is an ordinary item ``torchbind[ns.Cls]::matrix[<row>-<backend>]`` and its data reaches the reports.
"""

from __future__ import annotations

import dataclasses

from ..context import context_for
from ..matrix.backend import all_backends, get_backend
from ..matrix.cell import run_cell
from ..matrix.scenarios import row_names
from ..results import Failure, NotApplicable, Verdict
from ..settings import SETTINGS
from . import check
from .tracing_mode import traces_with_real_object


@dataclasses.dataclass(frozen=True)
class Cell:
    """A matrix target: ``row`` (scenario) and ``backend`` name, with their positions for stable ordering."""

    row: str
    backend: str
    row_index: int
    backend_index: int

    @property
    def short_name(self) -> str:
        return f"{self.row}-{self.backend}"


def _targets(info) -> list[Cell]:
    names = [b.name for b in all_backends()]
    chosen = [n for n in names if SETTINGS.backends is None or n in SETTINGS.backends]
    rows = row_names(context_for(info.qualname))
    return [Cell(r, b, i, names.index(b)) for i, r in enumerate(rows) for b in chosen]


def _base(qualname: str, cell: Cell) -> dict:
    return {"qualname": qualname, "row": cell.row, "backend": cell.backend, "row_index": cell.row_index,
            "backend_index": cell.backend_index}


def _lost(qualname: str, cell: Cell, reason: str) -> dict:
    """The report data of a cell whose worker process crashed or hung: failed, with that reason."""
    return {**_base(qualname, cell), "status": "fail", "reason": reason, "details": [], "program": "",
            "limitation": None}


@check("matrix", scope="cell", targets=_targets, lost=_lost)
def matrix(ctx, cell: Cell) -> Verdict:
    """The scenario runs through the backend and matches plain eager: outputs, final object state, and an
    untouched traced object."""
    backend = get_backend(cell.backend)
    if not traces_with_real_object(ctx):
        ctx.require_fake()  # without a fake class no backend can fakify the object; fake_class reports it
    base = _base(ctx.info.qualname, cell)
    try:
        result = run_cell(ctx.info.qualname, cell.row, cell.backend)
    except NotApplicable as exc:
        return Verdict(skipped=f"no eager reference: {exc}",
                       data={**base, "status": "skipped", "reason": str(exc), "details": [], "program": "",
                             "limitation": None})
    data = {**result.to_dict(), **base}
    if result.status == "unsupported":
        return Verdict(skipped=f"unsupported: {result.reason}", data=data)
    if result.status == "fail":
        failure = Failure(
            "matrix", ctx.info.qualname, cell.short_name,
            f"{backend.group} {backend.title} does not reproduce plain eager for {cell.row}: {result.reason}",
            details=tuple(result.details), program=result.program)
        return Verdict(failures=[failure], data=data)
    return Verdict(data=data)
