"""Markdown writer: one table per class in the shape of the seed's Coverage Matrix (scenarios × backends,
grouped by torch.compile / AOTInductor / export), ✓ ✗ – with numbered footnotes giving each reason.

Every text that comes from the run (class and scenario names, reasons, labels) is escaped: Markdown passes raw
HTML through to the page it renders (CommonMark, GitHub's job summary, Python-Markdown alike), so a reason
quoting a field named ``<img src=x onerror=...>`` would run in the reader's browser; and ``[text](url)`` would be
a link. Text becomes HTML character references (``&lt;``) and backslash escapes (``\\[``); a scenario name is a
code span, whose content a renderer shows as it is.
"""

from __future__ import annotations

import re

from collections.abc import Iterable

from ..core.qualname import split_qualname
from ..core.results import Status
from . import SYMBOLS, ClassMatrix, MatrixReport, encodable

__all__ = ["render", "render_class", "render_defects", "escape_text", "code_span", "code_block", "matrix_title"]


def matrix_title(qualnames: Iterable[str]) -> str:
    """The heading of a report on the classes ``qualnames`` (every writer's, so they agree): named by the kinds of
    class the run checked, ``TorchBind coverage matrix`` (``ns::Cls`` names), ``Python custom class coverage
    matrix`` (``module.QualName`` names), ``TorchBind and Python custom class coverage matrix`` for both, and
    ``Coverage matrix`` for none (a run that checked no class). Raises nothing."""
    kinds = {"TorchBind" if split_qualname(q) is not None else "Python custom class" for q in qualnames}
    named = " and ".join(k for k in ("TorchBind", "Python custom class") if k in kinds)
    return f"{named} coverage matrix" if named else "Coverage matrix"

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "[": "\\[", "]": "\\]",
                          "|": "\\|", "\n": " ", "\r": " "})


def escape_text(text: str) -> str:
    """``text`` as Markdown that renders as that text, on one line: no raw HTML (``<`` ``>`` ``&`` as character
    references), no link or image (``[`` ``]`` backslash-escaped, and ``\\`` itself), no table cell break (``|``),
    line breaks as spaces. Raises nothing."""
    return str(text).translate(_ESCAPES)


def code_span(text: str) -> str:
    """``text`` as one Markdown code span (shown as it is, HTML included): fenced with one more backtick than its
    longest run of backticks, on one line, ``|`` escaped for tables. Raises nothing."""
    text = str(text).replace("\n", " ").replace("\r", " ")
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def code_block(text: str, language: str = "python") -> list[str]:
    """``text`` as the lines of one fenced Markdown code block (shown as it is, HTML included), fenced with more
    backticks than its longest run of them, and never fewer than three. Raises nothing."""
    fence = "`" * max(3, max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    return [f"{fence}{language}", text.rstrip("\n"), fence]


def render_class(matrix: ClassMatrix) -> str:
    """The Markdown section of one class."""
    groups = [b["group"] for b in matrix.backends]
    header = ["scenario"] + [f"{escape_text(b['group'])}<br>{escape_text(b['title'])}"
                             if groups.count(b["group"]) > 1 or b["title"] != b["group"] else escape_text(b["title"])
                             for b in matrix.backends]
    lines = [f"### {escape_text(matrix.qualname)}", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    for row, line in matrix.table():
        cells = [" " if cell is None else SYMBOLS[cell.status] + (f" [{note}]" if note else "")
                 for _, cell, note in line]
        lines.append(f"| {code_span(row)} | " + " | ".join(cells) + " |")
    counts = matrix.counts()
    lines += ["", f"{counts[Status.PASSED]} ✓, {counts[Status.FAILED]} ✗, {counts[Status.UNSUPPORTED]} – "
              "(known torch limitation)"
              + (f", {counts[Status.UNTOLD]} ? (could not tell a stale program)" if counts[Status.UNTOLD] else "")
              + (f", {counts[Status.TORCH_DEFECT]} T (torch's defect)" if counts[Status.TORCH_DEFECT] else "")
              + (f", {counts[Status.SKIPPED]} n/a" if counts[Status.SKIPPED] else "")]
    if matrix.footnotes:
        lines.append("")
        for number, status, reason in matrix.footnotes:
            lines.append(f"{number}. {SYMBOLS[status]} {escape_text(reason.replace('|', '/'))}")
    return encodable("\n".join(lines) + "\n")


def render(report: MatrixReport) -> str:
    """The whole report: a title naming the kinds of class it holds (:func:`matrix_title`), the note of an
    incomplete run, the legend, and each class's table."""
    title = matrix_title(m.qualname for m in report.classes)
    parts = [f"## {title} (torch {escape_text(report.torch_version)})", "",
             "✓ matches plain eager · ✗ fails or differs from eager · – unsupported: a known torch limitation "
             "(the cell ran and failed the documented way) · ? could not tell: the program gave eager's results, but "
             "every object it ran on gives one output, so a stale program would too (the footnote says what to give) "
             "· T torch's defect: the cell failed where the fake agrees with C++ on every call (see Torch defects) "
             "· n/a did not run (no fake class, or no eager reference: "
             "the footnote says why)", ""]
    if report.incomplete:
        parts[1:1] = ["", f"**Incomplete report — {escape_text(report.incomplete)}.**"]
    parts += [render_class(m) for m in report.classes if m.rows]  # a class whose matrix did not run: no table
    parts += render_defects(report)
    return encodable("\n".join(parts))


def render_defects(report: MatrixReport) -> list[str]:
    """The report's Torch defects section (none when the run found none): per defect signature, the cells that
    show it and the first one's standalone plain-torch script, to file upstream."""
    defects = report.defects()
    if not defects:
        return []
    lines = ["### Torch defects", "",
             "Cells that failed where the fake agrees with C++ on every call of the program (replayed on real "
             "objects and their fakes as tracing makes them): torch's, not the library's. Each script runs from any "
             "directory in a fresh interpreter and prints what eager and the backend give.", ""]
    for number, defect in enumerate(defects, 1):
        where = ", ".join(f"{escape_text(c.qualname)} {code_span(c.row)} × {escape_text(c.backend)}"
                          for c in defect.cells)
        lines += [f"{number}. **{escape_text(defect.signature)}** — {len(defect.cells)} cell"
                  f"{'s' if len(defect.cells) > 1 else ''}: {where}", ""]
        if defect.repro:
            lines += [*code_block(defect.repro), ""]
    return lines
