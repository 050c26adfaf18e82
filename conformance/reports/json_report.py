"""JSON writer: the machine-readable report (schema in docs/reference/report-json.md,
``"schema": "torchbind-matrix/2"``)."""

from __future__ import annotations

import json

from . import MatrixReport, encodable

__all__ = ["render", "SCHEMA", "VERDICT_ROW", "verdict_row"]

#: Version 2: cell and count statuses are :class:`conformance.core.results.Status` values (``passed``, ``failed``,
#: ``unsupported``, ``skipped``), the vocabulary items use too (version 1 wrote ``pass`` and ``fail``).
SCHEMA = "torchbind-matrix/2"
#: The fields of a row of ``verdicts``: those of a verdict's :meth:`conformance.core.results.Verdict.to_json` (in
#: its order), then ``rules``, its :attr:`~conformance.core.results.Verdict.rules` (a row holds no failures).
VERDICT_ROW = ("item", "check", "target", "status", "summary", "baseline", "notes", "evidence", "rules")


def verdict_row(verdict) -> dict:
    """The JSON report's row of a :class:`~conformance.core.results.Verdict`: the :data:`VERDICT_ROW` fields of
    its :meth:`~conformance.core.results.Verdict.to_json`, and the rule ids of its failures in place of the
    failures (:meth:`~conformance.core.results.Verdict.from_json` reads them back)."""
    data = {**verdict.to_json(), "rules": verdict.rules}
    return {name: data[name] for name in VERDICT_ROW}


def render(report: MatrixReport) -> str:
    """``{"schema", "torch", "run", "incomplete", "classes": [{"qualname", "rows", "backends", "cells": [...],
    "counts", "verdicts"}], "limitations"}`` (``run``: the run's labels — torch, device, platform, date — that
    :mod:`conformance.reports.merge` tells runs apart by; ``verdicts``: every item of the class, ``{"item", "check",
    "target", "status", "summary", "baseline", "notes", "evidence", "rules"}``, ``notes`` being what the check found
    that does not change its status, e.g. a fake that returns where C++ raises, ``evidence`` the comparisons the
    verdict rests on by kind, ``{"result": 12}``: a pass has at least one, ``rules`` the stable rule ids of a failed
    verdict's failures, ``["agreement.result-differs"]``) (``incomplete``: ``null``, or why cells are missing,
    e.g. ``"interrupted: 47 of 91 cells ran"``); each cell: ``row``, ``backend``, ``status``, ``reason``,
    ``details`` (on a passing cell too, e.g. outputs compared by metadata only), ``limitation``, ``footnote``,
    ``signature`` (a ``torch-defect`` cell's defect signature, else ``null``), ``program``, ``repro`` (a failed
    cell's standalone script, else ``null``); ``torch_defects``: the
    torch defects grouped by signature, ``{"signature", "repro", "cells": [{"qualname", "row", "backend"}]}``."""
    classes = []
    for m in report.classes:
        cells = [{"row": row, "backend": b["name"], "status": cell.status.value, "reason": cell.reason,
                  "details": cell.details, "limitation": cell.limitation, "signature": cell.signature or None,
                  "footnote": note, "program": cell.program, "repro": cell.repro or None}
                 for row, line in m.table() for b, cell, note in line if cell is not None]
        classes.append({"qualname": m.qualname, "rows": m.rows, "backends": m.backends, "cells": cells,
                        "counts": {status.value: n for status, n in m.counts().items()},
                        "verdicts": [verdict_row(v) for v in report.verdicts.get(m.qualname, [])]})
    doc = {"schema": SCHEMA, "torch": report.torch_version, "run": report.labels, "incomplete": report.incomplete,
           "classes": classes, "limitations": report.limitations,
           "torch_defects": [{"signature": d.signature, "repro": d.repro,
                              "cells": [{"qualname": c.qualname, "row": c.row, "backend": c.backend}
                                        for c in d.cells]} for d in report.defects()]}
    return encodable(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")  # a lone surrogate: a JSON escape
