"""Terminal writer: a compact matrix per class for pytest's terminal summary."""

from __future__ import annotations

from . import SYMBOLS, MatrixReport

__all__ = ["render_lines"]


def render_lines(report: MatrixReport) -> list[str]:
    """Lines: the note of an incomplete run, then per class a header of backend names and one line per scenario
    with a symbol per backend, then the torch defects by signature."""
    lines: list[str] = [f"incomplete report — {report.incomplete}"] if report.incomplete else []
    for m in (m for m in report.classes if m.rows):
        names = [b["name"] for b in m.backends]
        width = max([len(r) for r in m.rows] + [8])
        lines.append(f"{m.qualname}: " + ", ".join(f"{n} {SYMBOLS[s]}" for s, n in m.counts().items() if n))
        lines.append(" " * (width + 2) + " ".join(f"{n[:9]:>9}" for n in names))
        for row, line in m.table():
            symbols = [" " if cell is None else SYMBOLS[cell.status] for _, cell, _ in line]
            lines.append(f"  {row:<{width}}" + " ".join(f"{s:>9}" for s in symbols))
    defects = report.defects()
    if defects:
        n = sum(len(d.cells) for d in defects)
        lines.append(f"T: {n} cell{'s are' if n != 1 else ' is'} torch's defect (the fake agrees with C++ on every "
                     f"call), {len(defects)} signature{'s' if len(defects) != 1 else ''}; the report's Torch defects "
                     "section has a script for each:")
        lines += [f"  {d.signature} ({len(d.cells)} cell{'s' if len(d.cells) != 1 else ''})" for d in defects]
    return lines
