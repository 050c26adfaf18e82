"""Writers of a merged report (:class:`conformance.reports.merge.MergedReport`): Markdown, HTML, JSON.

Each cell shows every run's status in run order (``✓ ✗``: passed on the first run, failed on the second), and a
cell whose status changes between torch versions of one device and platform carries the change
(``fixed in 2.14.1``). One merged run (shards of one run) is written by the single-run writers instead, so it is
exactly the report a single run writes.
"""

from __future__ import annotations

import json
from html import escape

from ..core.results import Status
from . import SYMBOLS, encodable, report_format
from . import html as single_html
from .markdown import code_block, code_span, escape_text, matrix_title

__all__ = ["render_markdown", "render_html", "render_json", "render"]

_SHORT = {Status.PASSED: "✓", Status.FAILED: "✗", Status.UNSUPPORTED: "–", Status.UNTOLD: "?",
          Status.TORCH_DEFECT: "T", Status.SKIPPED: "n/a"}


def _cell_text(cells) -> str:
    return " ".join("·" if c is None else _SHORT[c.status] for c in cells)


def render_markdown(merged) -> str:
    """Markdown: the runs (numbered, with their labels), then per class one table whose cells list every run's
    status in run order, with the changes between torch versions."""
    lines = [f"## {matrix_title(merged.classes())} across runs", ""]
    for i, run in enumerate(merged.runs, start=1):
        note = f" — incomplete: {run.incomplete}" if run.incomplete else ""
        date = f" ({run.labels['date']})" if run.labels.get("date") else ""
        lines.append(escape_text(f"{i}. {run.title}{date}{note}"))
    lines += ["", "Each cell: one symbol per run, in that order (✓ matches eager · ✗ fails or differs · – known "
              "torch limitation · ? could not tell a stale program · T torch's defect · n/a did not run · · not in that "
              "run).", ""]
    for qualname in merged.classes():
        rows, backends, grid = merged.grid(qualname)
        if not rows:
            continue
        header = ["scenario"] + [f"{escape_text(b['group'])}<br>{escape_text(b['title'])}" if b["title"] != b["group"]
                                 else escape_text(b["title"]) for b in backends]
        lines += [f"### {escape_text(qualname)}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        changes = []
        for row, line in grid:
            texts = []
            for b, cells in zip(backends, line):
                change = merged.change(cells)
                text = _cell_text(cells)
                if change:
                    changes.append(f"{code_span(row)} / {escape_text(b['name'])}: {escape_text(change)}")
                    text += f" ({escape_text(change)})"
                texts.append(text)
            lines.append(f"| {code_span(row)} | " + " | ".join(texts) + " |")
        if changes:
            lines += ["", "Changed between torch versions:", ""] + [f"- {c}" for c in changes]
        lines.append("")
    defects = merged.defects()
    if defects:
        lines += ["### Torch defects across runs", ""]
        for number, (signature, runs, fixed, repro) in enumerate(defects, 1):
            seen = ", ".join(str(i + 1) for i in runs)
            lines.append(f"{number}. **{escape_text(signature)}** — in run{'s' if len(runs) > 1 else ''} {seen}"
                         + (f"; {escape_text(fixed)}" if fixed else ""))
            if repro:
                lines += ["", *code_block(repro)]
            lines.append("")
    return encodable("\n".join(lines))


def render_html(merged) -> str:
    """One self-contained page: the runs, then per class every check's verdict in each run and the matrix with
    one symbol per run."""
    title = escape(f"{matrix_title(merged.classes())} across runs")
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
           f"<title>{title}</title><style>{single_html._CSS}.changed{{outline:2px solid #c60}}</style></head><body>",
           f"<h1>{title}</h1><ol>"]
    for run in merged.runs:
        note = f" — <b>incomplete</b>: {escape(run.incomplete)}" if run.incomplete else ""
        out.append(f"<li>{escape(run.title)} {escape(run.labels.get('date', ''))}{note}</li>")
    out.append("</ol><p>Each cell: one symbol per run, in that order. ✓ matches eager · ✗ fails or differs · – "
               "known torch limitation · ? could not tell a stale program · n/a did not run · · not in that "
               "run.</p>")
    for qualname in merged.classes():
        out.append(f"<h2>{escape(qualname)}</h2>")
        verdicts = merged.verdicts(qualname)
        if verdicts:
            out.append("<details><summary>every check's verdict, per run</summary><table><tr><th>item</th>"
                       + "".join(f"<th>run {i}</th>" for i in range(1, len(merged.runs) + 1)) + "</tr>")
            for item, per_run in verdicts:
                cells = "".join("<td>·</td>" if v is None else
                                f"<td class='{escape(v.status.value)}' title='{escape(v.summary or '')}'>"
                                f"{escape(SYMBOLS[v.status])}</td>" for v in per_run)
                out.append(f"<tr><td class='row'>{escape(item)}</td>{cells}</tr>")
            out.append("</table></details>")
        rows, backends, grid = merged.grid(qualname)
        if not rows:
            continue
        out.append("<table><tr><th>scenario</th>" + "".join(f"<th>{escape(b['group'])}<br>{escape(b['title'])}</th>"
                                                          for b in backends) + "</tr>")
        for row, line in grid:
            out.append(f"<tr><td class='row'>{escape(row)}</td>")
            for cells in line:
                change = merged.change(cells)
                reasons = "; ".join(f"run {i}: {c.reason}" for i, c in enumerate(cells, start=1)
                                    if c is not None and c.reason)
                klass = " class='changed'" if change else ""
                out.append(f"<td{klass} title='{escape(reasons)}'>{escape(_cell_text(cells))}"
                           f"{'<br><small>' + escape(change) + '</small>' if change else ''}</td>")
            out.append("</tr>")
        out.append("</table>")
    out.append("</body></html>")
    return encodable("\n".join(out) + "\n")


def render_json(merged) -> str:
    """``{"schema": "torchbind-matrix-merged/1", "runs": [labels + "incomplete"], "classes": [{"qualname", "rows",
    "backends", "cells": [{"row", "backend", "runs": [{"status", "reason", "limitation"} | null], "change"}],
    "verdicts": [{"item", "runs": [{"status", "summary", "rules"} | null]}]}], "torch_defects": [{"signature", "runs",
    "change", "repro"}]}`` (``rules``: the stable rule ids of a failed verdict's failures, as the run's report gave
    them; ``torch_defects``: each defect signature, the runs (1-based) that showed it, ``"fixed in X"`` or
    ``null``, and a reproducer)."""
    from .merge import MERGED_SCHEMA

    classes = []
    for qualname in merged.classes():
        rows, backends, grid = merged.grid(qualname)
        cells = [{"row": row, "backend": b["name"],
                  "runs": [None if c is None else {"status": c.status.value, "reason": c.reason,
                                                   "limitation": c.limitation} for c in cells],
                  "change": merged.change(cells)}
                 for row, line in grid for b, cells in zip(backends, line)]
        verdicts = [{"item": item, "runs": [None if v is None else {"status": v.status.value, "summary": v.summary,
                                                                    "rules": v.rules} for v in per_run]}
                    for item, per_run in merged.verdicts(qualname)]
        classes.append({"qualname": qualname, "rows": rows, "backends": backends, "cells": cells,
                        "verdicts": verdicts})
    runs = [{**run.labels, "incomplete": run.incomplete} for run in merged.runs]
    defects = [{"signature": sig, "runs": [i + 1 for i in seen], "change": fixed, "repro": repro or None}
               for sig, seen, fixed, repro in merged.defects()]
    return encodable(json.dumps({"schema": MERGED_SCHEMA, "runs": runs, "classes": classes,
                                 "torch_defects": defects}, indent=2, ensure_ascii=False) + "\n")


def render(merged, path) -> str:
    """The merged report in the format ``path``'s suffix names (``.md``, ``.html``, ``.json``). Raises
    :class:`~conformance.reports.ReportFormatError` for another (:func:`~conformance.reports.report_format`)."""
    writers = {".md": render_markdown, ".html": render_html, ".json": render_json}
    return writers[report_format(path)](merged)
