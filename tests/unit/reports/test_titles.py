"""The reports are headed by the kinds of class the run checked (a new user's trial, issue 31 finding g: a run of
Python custom classes only was headed "TorchBind coverage matrix"). The Markdown and HTML report of one run and
the merged report of several share one rule (:func:`conformance.reports.markdown.matrix_title`): TorchBind classes
(``ns::Cls``), Python custom classes (``module.QualName``), both, or none."""

from __future__ import annotations

import dataclasses
import re

import pytest

from conformance.core.results import Cell
from conformance.reports import build_report
from conformance.reports.html import render as render_html
from conformance.reports.json_report import render as render_json
from conformance.reports.markdown import matrix_title, render as render_markdown
from conformance.reports.merge import load_run, merge_runs
from conformance.reports.merged import render_html as merged_html, render_markdown as merged_markdown

TORCHBIND, CUSTOM = "ns::Q", "mylib.recipes.Recipe"

KINDS = {
    "torchbind": ([TORCHBIND], "TorchBind coverage matrix"),
    "custom": ([CUSTOM], "Python custom class coverage matrix"),
    "both": ([CUSTOM, TORCHBIND], "TorchBind and Python custom class coverage matrix"),
    "none": ([], "Coverage matrix"),
}


#: Where the HTML page's table of known torch limitations starts (every limitation, TorchBind's among them).
LIMITATIONS = "<h2>Known torch limitations</h2>"


def report(qualnames, torch="X.Y"):
    cells = [Cell(q, "push", "eager", 0, 0) for q in qualnames]
    return dataclasses.replace(build_report(cells, labels={"torch": torch, "device": "cpu", "platform": "p"}),
                               torch_version=torch)


def heading(html: str) -> tuple[str, str]:
    [title] = re.findall(r"<title>(.*?)</title>", html)
    [h1] = re.findall(r"<h1>(.*?)</h1>", html)
    return title, h1


@pytest.mark.parametrize("kind", KINDS)
def test_a_runs_report_is_headed_by_the_kinds_of_class_it_checked(kind):
    qualnames, title = KINDS[kind]
    assert matrix_title(qualnames) == title
    markdown, html = render_markdown(report(qualnames)), render_html(report(qualnames))
    assert markdown.splitlines()[0] == f"## {title} (torch X.Y)"
    assert heading(html) == (title, title)
    if kind in ("custom", "none"):  # nothing in the Markdown says TorchBind; the HTML only in its limitations table
        assert "TorchBind" not in markdown
        assert "TorchBind" not in html.partition(LIMITATIONS)[0] and LIMITATIONS in html
    else:
        assert "TorchBind" in markdown.splitlines()[0]


@pytest.mark.parametrize("kind", KINDS)
def test_the_merged_report_is_headed_by_the_kinds_of_class_its_runs_checked(kind, tmp_path):
    qualnames, title = KINDS[kind]
    paths = []
    for torch in ("2.13.0", "2.14.1"):  # two torch versions: the merged writers, not the single run's
        paths.append(tmp_path / f"{torch}.json")
        paths[-1].write_text(render_json(report(qualnames, torch)))
    merged = merge_runs([load_run(p) for p in paths])
    markdown, html = merged_markdown(merged), merged_html(merged)
    assert markdown.splitlines()[0] == f"## {title} across runs"
    assert heading(html) == (f"{title} across runs",) * 2
    if kind in ("custom", "none"):
        assert "TorchBind" not in markdown and "TorchBind" not in html
    else:
        assert "TorchBind" in markdown.splitlines()[0]


def test_a_run_of_both_kinds_is_merged_under_both_names(tmp_path):
    # One run checked a TorchBind class, the other a Python custom class: the merged report holds both.
    paths = []
    for torch, qualname in (("2.13.0", TORCHBIND), ("2.14.1", CUSTOM)):
        paths.append(tmp_path / f"{torch}.json")
        paths[-1].write_text(render_json(report([qualname], torch)))
    merged = merge_runs([load_run(p) for p in paths])
    assert merged_markdown(merged).startswith("## TorchBind and Python custom class coverage matrix across runs\n")
