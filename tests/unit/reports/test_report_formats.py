"""The report formats: one check (:func:`conformance.reports.report_format`), one message, on every path that
names a report file — ``--torchbind-report``, ``merge --output`` (the command line and :func:`write_merged`), and
the writers of a run's report and of a merged one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.__main__ import main
from conformance.core.results import ConformanceError
from conformance.plugin.options import _writable_report
from conformance.reports import FORMATS, ReportFormatError, build_report, report_format, write_report
from conformance.reports.json_report import render as render_json
from conformance.reports.merge import MergeError, RunReport, merge_runs, write_merged
from conformance.reports.merged import render as render_merged

USE = "use .md, .json, .html"


def _merged(runs: int = 2):
    """A merged report of ``runs`` runs (different torch versions) with nothing in them."""
    return merge_runs(RunReport({"torch": f"2.1{3 + i}.0", "device": "cpu", "platform": "linux"}, [], {})
                      for i in range(runs))


def test_the_formats_are_read_from_the_suffix_whatever_its_case():
    assert FORMATS == (".md", ".json", ".html")
    assert [report_format(f"m{s}") for s in (".md", ".JSON", ".Html")] == [".md", ".json", ".html"]
    assert issubclass(ReportFormatError, ConformanceError) and issubclass(ReportFormatError, ValueError)
    with pytest.raises(ReportFormatError) as bad:
        report_format("dir/m.txt")
    assert str(bad.value) == f"dir/m.txt: unsupported format .txt; {USE}"
    with pytest.raises(ReportFormatError) as bad:
        report_format(Path("m"), given="--output=m")
    assert str(bad.value) == f"--output=m: unsupported format (none); {USE}"


def test_torchbind_report_refuses_another_format_as_a_usage_error(tmp_path):
    for text, suffix in (("m.txt", ".txt"), ("m.TXT", ".TXT"), ("m", "(none)")):
        with pytest.raises(pytest.UsageError) as bad:
            _writable_report(tmp_path / text, text)
        assert str(bad.value) == f"--torchbind-report={text}: unsupported format {suffix}; {USE}"
    assert _writable_report(tmp_path / "m.HTML", "m.HTML") == (tmp_path / "m.HTML").resolve()
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_a_writer_refuses_another_format_and_writes_nothing(tmp_path):
    report = build_report([])
    path = tmp_path / "m.txt"
    with pytest.raises(ReportFormatError) as bad:
        write_report(report, path)
    assert str(bad.value) == f"{path}: unsupported format .txt; {USE}"
    assert not path.exists()
    write_report(report, tmp_path / "m.JSON")
    assert (tmp_path / "m.JSON").read_text() == render_json(report)

    merged = _merged()
    with pytest.raises(ReportFormatError) as bad:
        render_merged(merged, path)
    assert str(bad.value) == f"{path}: unsupported format .txt; {USE}"
    assert json.loads(render_merged(merged, tmp_path / "m.json"))["schema"] == "torchbind-matrix-merged/1"


def test_merge_output_refuses_another_format(tmp_path, capsys):
    out = tmp_path / "m.txt"
    for runs in (1, 2):  # one run is written by the single-run writers, several by the merged ones
        with pytest.raises(MergeError) as bad:
            write_merged(_merged(runs), out)
        assert str(bad.value) == f"--output={out}: unsupported format .txt; {USE}"
    assert not out.exists()
    # The command line checks it before reading any report (this one does not exist), exit status 2.
    assert main(["merge", str(tmp_path / "missing.json"), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"torchbind-conformance merge: --output={out}: unsupported format .txt; {USE}\n"


def test_a_cell_that_could_not_tell_is_its_own_status_in_every_format():
    """An ``UNTOLD`` cell (the program gave eager's results on objects that all give one output) is neither a pass
    nor a failure: every format shows it with its own symbol and counts it apart, and its footnote says what to give."""
    from conformance.core.results import Cell, Status
    from conformance.reports.html import render as render_html
    from conformance.reports.markdown import render as render_markdown
    from conformance.reports.terminal import render_lines

    reason = "no example object gives this program another eager output ...: give example objects"
    cells = [Cell("ns::Q", "size", "eager", 0, 0, Status.PASSED, ""),
             Cell("ns::Q", "size", "export", 0, 1, Status.UNTOLD, reason)]
    assert Cell.from_json(cells[1].to_json()) == cells[1]
    report = build_report(cells)
    assert report.classes[0].counts()[Status.UNTOLD] == 1
    md = render_markdown(report)
    assert "| `size` | ✓ | ? [1] |" in md, md
    assert "1 ✓, 0 ✗, 0 – (known torch limitation), 1 ? (could not tell a stale program)" in md
    assert f"1. ? {reason}" in md
    assert "ns::Q: 1 ✓, 1 ?" in render_lines(report)
    html = render_html(report)
    assert "<td class='untold'" in html and ".untold{" in html
    assert json.loads(render_json(report))["classes"][0]["cells"][1]["status"] == "untold"
