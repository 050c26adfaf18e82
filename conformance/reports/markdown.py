"""Markdown writer: one table per class in the shape of the seed's Coverage Matrix (scenarios × backends,
grouped by torch.compile / AOTInductor / export), ✓ ✗ – with numbered footnotes giving each reason."""

from __future__ import annotations

from ..results import Status
from . import SYMBOLS, ClassMatrix, MatrixReport

__all__ = ["render", "render_class"]


def render_class(matrix: ClassMatrix) -> str:
    """The Markdown section of one class."""
    groups = [b["group"] for b in matrix.backends]
    header = ["scenario"] + [f"{b['group']}<br>{b['title']}" if groups.count(b["group"]) > 1 or
                             b["title"] != b["group"] else b["title"] for b in matrix.backends]
    lines = [f"### {matrix.qualname}", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    for row, line in matrix.table():
        cells = [" " if cell is None else SYMBOLS[cell.status] + (f" [{note}]" if note else "")
                 for _, cell, note in line]
        lines.append(f"| `{row}` | " + " | ".join(cells) + " |")
    counts = matrix.counts()
    lines += ["", f"{counts[Status.PASSED]} ✓, {counts[Status.FAILED]} ✗, {counts[Status.UNSUPPORTED]} – "
              "(known torch limitation)" + (f", {counts[Status.SKIPPED]} n/a" if counts[Status.SKIPPED] else "")]
    if matrix.footnotes:
        lines.append("")
        for number, status, reason in matrix.footnotes:
            lines.append(f"{number}. {SYMBOLS[status]} {reason.replace('|', '/')}")
    return "\n".join(lines) + "\n"


def render(report: MatrixReport) -> str:
    """The whole report: a title, the note of an incomplete run, the legend, and each class's table."""
    parts = [f"## TorchBind coverage matrix (torch {report.torch_version})", "",
             "✓ matches plain eager · ✗ fails or differs from eager · – unsupported: a known torch limitation "
             "(the cell ran and failed the documented way) · n/a did not run (no fake class, or no eager reference: "
             "the footnote says why)", ""]
    if report.incomplete:
        parts[1:1] = ["", f"**Incomplete report — {report.incomplete}.**"]
    parts += [render_class(m) for m in report.classes if m.rows]  # a class whose matrix did not run: no table
    return "\n".join(parts)
