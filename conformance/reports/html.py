"""HTML writer: one self-contained page (inline CSS, no scripts or external resources); each non-passing cell
links to its footnote, which shows the reason and, in a ``<details>`` element, the differences and program."""

from __future__ import annotations

from html import escape

from ..core.results import REUSED, Status, Verdict
from . import SYMBOLS, ClassMatrix, MatrixReport, encodable
from .markdown import matrix_title

__all__ = ["render"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #bbb;padding:.3em .6em;text-align:center}
td.row{text-align:left;font-family:monospace}
.passed{background:#e3f6e3}.failed{background:#fbe0e0}.unsupported{background:#eee}.untold{background:#e8eefb}.torch-defect{background:#f6e3f6}.skipped{background:#fff8dc}.known{background:#f3e3c3}
pre{background:#f6f6f6;padding:.5em;overflow:auto}
.incomplete{background:#fbe0e0;padding:.5em;border:1px solid #c00}
"""


def _verdicts(verdicts: list[Verdict]) -> list[str]:
    """Every check's verdict of a class (not only the matrix cells), in a collapsible table opened when a check
    failed that the baseline does not list. The summary counts passes, new failures, known failures (listed in the
    baseline: strict xfails) and skips apart."""
    if not verdicts:
        return []
    def count(status: Status, known: bool) -> int:
        return sum(v.status is status and v.baseline == known for v in verdicts)

    new, known = count(Status.FAILED, False), count(Status.FAILED, True)
    parts = [f"{count(Status.PASSED, False) + count(Status.PASSED, True)} passed", f"{new} failed"]
    parts += [f"{known} known failure{'s' if known != 1 else ''} (baseline)"] if known else []
    skipped = sum(v.status is Status.SKIPPED for v in verdicts)
    parts += [f"{skipped} n/a"] if skipped else []
    reused = sum(v.reused for v in verdicts)
    parts += [f"{reused} reused (--torchbind-reuse)"] if reused else []
    out = [f"<details{' open' if new else ''}><summary>{len(verdicts)} checks: {', '.join(parts)}</summary>",
           "<table><tr><th>item</th><th>verdict</th><th>summary</th></tr>"]
    order = {Status.FAILED: 0, Status.SKIPPED: 2, Status.PASSED: 3}  # new failures first, passes last
    for v in sorted(verdicts, key=lambda v: (order.get(v.status, 1) + (0.5 if v.baseline else 0))):
        mark = SYMBOLS[v.status] + (" (baseline)" if v.baseline else "")
        summary = "; ".join(t for t in [v.summary, *(n for n in v.notes if n.startswith(REUSED))] if t)
        out.append(f"<tr><td class='row'>{escape(v.item)}</td><td class='{escape(v.status.value)}'>{escape(mark)}"
                   f"</td><td style='text-align:left'>{escape(summary)}</td></tr>")
    out.append("</table></details>")
    return out


def _matrix(m: ClassMatrix, anchor: str, known: set[str]) -> list[str]:
    """The matrix of one class (a :class:`~conformance.reports.ClassMatrix`) and its footnotes; a failed cell whose
    item is among ``known`` (items the baseline lists: ``matrix[row-backend]``) is marked as a known failure."""
    out: list[str] = []
    out.append("<table><tr><th rowspan='2'>scenario</th>")
    groups: list[tuple[str, int]] = []
    for b in m.backends:
        if groups and groups[-1][0] == b["group"]:
            groups[-1] = (b["group"], groups[-1][1] + 1)
        else:
            groups.append((b["group"], 1))
    out += [f"<th colspan='{n}'>{escape(g)}</th>" for g, n in groups]
    out.append("</tr><tr>" + "".join(f"<th>{escape(b['title'])}</th>" for b in m.backends) + "</tr>")
    for row, line in m.table():
        out.append(f"<tr><td class='row'>{escape(row)}</td>")
        for _, cell, note in line:
            if cell is None:
                out.append("<td></td>")
                continue
            link = f" <a href='#{escape(anchor)}-{note}'>[{note}]</a>" if note else ""
            is_known = cell.status in (Status.FAILED, Status.TORCH_DEFECT) and \
                f"matrix[{cell.row}-{cell.backend}]" in known
            css = "known" if is_known else cell.status.value
            out.append(f"<td class='{css}' title='{escape(cell.reason)}'>"
                       f"{SYMBOLS[cell.status]}{' known' if is_known else ''}{link}</td>")
        out.append("</tr>")
    out.append("</table><ol>")
    for number, status, reason in m.footnotes:
        example = next(c for c in m.cells.values() if (c.status, c.reason) == (status, reason))
        details = escape("\n".join(example.details))
        out.append(f"<li id='{escape(anchor)}-{number}'>{SYMBOLS[status]} {escape(reason)}<details><summary>"
                   f"first cell: {escape(example.row)} / {escape(example.backend)}</summary>"
                   f"<pre>{details}</pre><pre>{escape(example.program)}</pre></details></li>")
    out.append("</ol>")
    return out


def render(report: MatrixReport) -> str:
    """The page as a string."""
    title = escape(matrix_title(m.qualname for m in report.classes))
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
           f"<title>{title}</title><style>{_CSS}</style></head><body>",
           f"<h1>{title}</h1><p>torch {escape(report.torch_version)} · ✓ matches eager · "
           "✗ fails or differs · – known torch limitation · ? could not tell a stale program (the footnote says "
           "what to give) · T torch's defect (the fake agrees with C++ on every call: see Torch defects) · n/a did not run (no fake class, or no eager reference: "
           "the footnote says why) · ✗ known: a failure the baseline lists</p>"]
    every = [v for vs in report.verdicts.values() for v in vs]
    if every:
        new = sum(v.status is Status.FAILED and not v.baseline for v in every)
        known = sum(v.status is Status.FAILED and v.baseline for v in every)
        out.append(f"<p class='totals'>{len(report.verdicts)} class(es), {len(every)} checks: "
                   f"{sum(v.status is Status.PASSED for v in every)} passed, {new} failed, {known} known failure(s) "
                   f"(baseline), {sum(v.status is Status.SKIPPED for v in every)} n/a</p>")
    if report.incomplete:
        out.append(f"<p class='incomplete'><b>Incomplete report</b> — {escape(report.incomplete)}.</p>")
    for m in report.classes:
        anchor = m.qualname.replace("::", "-")
        out.append(f"<h2 id='{escape(anchor)}'>{escape(m.qualname)}</h2>")
        verdicts = report.verdicts.get(m.qualname, [])
        if m.rows:
            out += _matrix(m, anchor, {v.item for v in verdicts if v.baseline})
        out += _verdicts(verdicts)  # below the matrix: most of them pass
    defects = report.defects()
    if defects:
        out.append("<h2>Torch defects</h2><p>Cells that failed where the fake agrees with C++ on every call of the "
                   "program: torch's, not the library's; each script runs in a fresh interpreter from any "
                   "directory.</p><ol>")
        for defect in defects:
            where = ", ".join(f"{c.qualname} {c.row} × {c.backend}" for c in defect.cells)
            out.append(f"<li><b>{escape(defect.signature)}</b>: {escape(where)}"
                       + (f"<pre>{escape(defect.repro)}</pre>" if defect.repro else "") + "</li>")
        out.append("</ol>")
    out.append("<h2>Known torch limitations</h2><ul>")
    for lim in report.limitations:
        out.append(f"<li><b>{escape(lim['key'])}</b> ({escape(', '.join(lim['backends']))}): "
                   f"{escape(lim['reason'])}. <i>{escape(lim['source'])}</i></li>")
    out.append("</ul></body></html>")
    return encodable("\n".join(out) + "\n")
