"""Check ``matrix``: one item per coverage-matrix cell — a row (a TorchBind scenario, or an op taking a Python
custom class) through a backend (column) — compared with plain eager. The work is in :mod:`conformance.matrix`;
this module maps cells onto the check registry, so that each cell is an ordinary item
``torchbind[ns.Cls]::matrix[<row>-<backend>]`` and its data reaches the reports.

The kind of class picks its rows from :data:`ROWS_OF_KIND` (``ctx.kind`` -> the kind's
:class:`~conformance.matrix.cell.Rows`, in :mod:`conformance.matrix.torchbind.run` or
:mod:`conformance.matrix.custom.run`); every cell then runs through the one skeleton,
:meth:`conformance.matrix.cell.Rows.run_cell`.
"""

from __future__ import annotations

import dataclasses

from ..core.results import Cell, Status
from ..custom.context import CustomClassContext
from ..matrix.backends import all_backends
from ..matrix.cell import Rows
from ..matrix.custom.run import ROWS as CUSTOM_ROWS
from ..matrix.torchbind.run import ROWS as TORCHBIND_ROWS
from ..torchbind.context import ClassContext
from . import with_targets

#: Each kind of class's matrix rows, by ``ctx.kind`` (:data:`conformance.kinds.KINDS`).
ROWS_OF_KIND: dict[str, Rows] = {"torchbind": TORCHBIND_ROWS, "custom": CUSTOM_ROWS}


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
    rows = ROWS_OF_KIND[ctx.kind].names(ctx)
    return [CellTarget(r, b, i, j) for i, r in enumerate(rows) for j, b in enumerate(names)]


def _lost(qualname: str, target: CellTarget, reason: str) -> Cell:
    """The cell of an item whose worker process crashed or hung: failed, with that reason."""
    return Cell(qualname, target.row, target.backend, target.row_index, target.backend_index, Status.FAILED, reason)


@with_targets(_targets, lost=_lost)
def matrix(ctx: ClassContext | CustomClassContext, target: CellTarget) -> Cell:
    """The scenario runs through the backend and matches plain eager: outputs, final object state, and an
    untouched traced object."""
    return ROWS_OF_KIND[ctx.kind].run_cell(ctx, target.row, target.backend)
