"""Reports whose every run-given text is hostile (HTML that runs, a script link, a table-cell break), shared by the
Markdown escaping tests (tests/unit/reports/test_report_escaping.py) and the browser test that opens them
(tests/integration/test_html_browser.py). A support module, not a test module: tests/ is on ``sys.path`` (the
directory of the root conftest.py), so either test imports it however it is run."""

from __future__ import annotations

from conformance.core.results import Cell, Status
from conformance.reports import build_report

#: What a field, method or scenario name may hold: HTML that runs, a script link, a table-cell break.
PAYLOAD = "<img src=x onerror=\"window.ran=1\"> <script>window.ran=2</script> [click](javascript:window.ran=3) a|b"


def hostile_report():
    """A matrix whose every run-given text holds :data:`PAYLOAD`."""
    cells = [Cell("ns::Q", f"get {PAYLOAD}", "export", 0, 4, Status.FAILED, f"field {PAYLOAD} differs",
                  [PAYLOAD], PAYLOAD),
             Cell("ns::Q", "push", "export", 1, 4, Status.SKIPPED, f"n/a: {PAYLOAD}")]
    labels = {"torch": f"2.13.0 {PAYLOAD}", "device": "cpu", "platform": "linux", "date": "2026-11-27T00:00:00Z"}
    return build_report(cells, incomplete=f"interrupted: {PAYLOAD}", labels=labels)


def merged_markdown() -> str:
    """The merged Markdown matrix of two runs (torch 2.13.0 and 2.14.1) of :func:`hostile_report`."""
    import dataclasses

    from conformance.reports.merge import RunReport, merge_runs
    from conformance.reports.merged import render_markdown

    report = hostile_report()
    cells = [c for m in report.classes for c in m.cells.values()]
    runs = [RunReport({**report.labels, "torch": version}, cells, {}, report.incomplete)
            for version in ("2.13.0", "2.14.1")]
    runs[1].cells = [dataclasses.replace(c, status=Status.PASSED) for c in cells]
    return render_markdown(merge_runs(runs))


def rendered(text: str) -> str:
    """``text`` rendered by Python-Markdown with tables (as MkDocs renders a report page)."""
    import markdown

    return markdown.markdown(text, extensions=["tables"])
