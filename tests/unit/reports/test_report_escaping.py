"""The Markdown reports (a run's matrix, the GitHub job summary, the merged matrix) show what a run saw as text:
a field or class name holding HTML or Markdown link syntax is escaped, never passed to the page that renders the
report (issue 29: ``<img src=x onerror=...>`` in a field name ran in the reader's browser; the HTML report of the
same data was already inert). The rendered page is checked with the ``markdown`` package (Python-Markdown, which
MkDocs uses; installed with the docs extra) where it is installed; tests/integration/test_html_browser.py opens it in
Chromium."""

from __future__ import annotations

import html.parser
import importlib.util
import re

import pytest

from conformance.reports.markdown import render

from hostile_reports import hostile_report, merged_markdown, rendered

class _Elements(html.parser.HTMLParser):
    """Every element and attribute of an HTML fragment, and its text."""

    def __init__(self, page: str):
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += attrs

    def handle_data(self, data):
        self.text.append(data)


#: The elements a Markdown matrix renders to: headings, paragraphs, tables, lists, code, emphasis, line breaks.
MARKDOWN_ELEMENTS = {"h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "ol", "ul", "li", "code", "strong",
                     "em", "br"}


@pytest.mark.parametrize("which", ["report", "merged"])
def test_the_markdown_report_escapes_what_the_run_saw(which):
    text = render(hostile_report()) if which == "report" else merged_markdown()
    # As text: outside code spans (shown as they are by every renderer), no tag and no link syntax survives;
    # what was seen is still there, escaped.
    prose = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)
    assert "<" not in prose.replace("<br>", "") and not re.search(r"(?<!\\)\]\(", prose)
    assert "&lt;img src=x onerror=" in text and "`get <img src=x" in text
    if importlib.util.find_spec("markdown") is None:
        pytest.skip("the markdown package is not installed (pip install -e '.[docs]'): rendering not checked")
    page = _Elements(rendered(text))
    assert page.tags <= MARKDOWN_ELEMENTS, page.tags - MARKDOWN_ELEMENTS
    assert not page.attrs, page.attrs  # no onerror=, no href=, no src=
    shown = "".join(page.text)
    assert "<img src=x onerror=\"window.ran=1\">" in shown  # the reader sees the name as it is
    assert "[click](javascript:window.ran=3)" in shown


def test_a_code_span_holds_any_text_and_plain_text_has_no_markup():
    from conformance.reports.markdown import code_span, escape_text

    assert code_span("a`b") == "``a`b``" and code_span("`x") == "`` `x ``" and code_span("a|b") == "`a\\|b`"
    assert escape_text("a\\[b](c) <i> & |\nnext") == "a\\\\\\[b\\](c) &lt;i&gt; &amp; \\| next"
    if importlib.util.find_spec("markdown") is None:
        pytest.skip("the markdown package is not installed: rendering not checked")
    for text in ("a`b", "`x", "``", "<b>x</b>"):
        page = _Elements(rendered(f"{code_span(text)}"))
        assert page.tags == {"p", "code"} and "".join(page.text) == text, text
    page = _Elements(rendered(escape_text("a\\[b](c) <i> & *x*")))
    assert "".join(page.text).startswith("a\\[b](c) <i> & ")
