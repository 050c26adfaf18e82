"""The HTML report as a browser builds it: pages written by real runs of the plugin, opened in headless Chromium
(Debian's ``chromium`` and ``chromium-driver``, driven by Selenium), with assertions on the DOM the browser built
and on what it shows, not on the page's text. A string test of the writer cannot see a table the parser closed
early, a footnote link that leads nowhere, or rows that are folded away; these can.

The runs: the sample Counter with its off-by-one ``increment`` fake (sample_classes/broken.py), matrix on eager and
export (failed, passed, unsupported and n/a cells), first with no baseline (new failures), then with the baseline
that ``--torchbind-accept`` wrote (every failure known). The numbers on the page are held to pytest's own counts
of the same run.

Chromium is found on PATH; where it is missing the tests skip, unless ``TORCHBIND_REQUIRE_BROWSER=1`` (set by
``.ci/run``, which installs it), where they fail.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from xml.etree import ElementTree

import pytest

pytestmark = pytest.mark.process  # starts Chromium and chromedriver

BROKEN = "--torchbind-load=sample_classes.broken:install_counter_increment_off_by_one"
ANCHOR = "samples-Counter"  # the class's section id: its qualified name with '::' as '-'


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (1280x900 window) under chromedriver, shared by the module's tests."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        chromium = None
    if not (chromium and driver):
        why = "needs Chromium, chromedriver and selenium (Debian: apt-get install chromium chromium-driver)"
        if os.environ.get("TORCHBIND_REQUIRE_BROWSER") == "1":
            pytest.fail(f"TORCHBIND_REQUIRE_BROWSER=1: {why}")
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    # No sandbox (CI runs as root); no background connections (the machine's network is closed).
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,900"):
        options.add_argument(flag)
    # Service(path) given: Selenium does not look for (or download) a driver of its own.
    with webdriver.Chrome(service=Service(driver), options=options) as chrome:
        yield chrome


def _run(pytester, *args):
    """One run on the broken Counter, in a subprocess (the load spec installs the broken fake in the process it
    runs in); returns the run and the outcome of each matrix item by test name (from its JUnit XML):
    ``passed``, ``failed``, ``skipped`` or ``xfailed``. 20 hypothesis examples: the report is under test, and the
    off-by-one increment fails its checks on the first examples that call it."""
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", BROKEN, "--torchbind-class=samples::Counter",
                                           "--torchbind-backends=eager,export", "--torchbind-examples=20",
                                           "--junitxml=run.xml", *args)
    matrix = {}
    for case in ElementTree.parse(pytester.path / "run.xml").iter("testcase"):
        if case.get("name", "").startswith("matrix["):
            skipped = case.find("skipped")
            matrix[case.get("name")] = (
                "failed" if case.find("failure") is not None or case.find("error") is not None
                else "xfailed" if skipped is not None and skipped.get("type") == "pytest.xfail"
                else "skipped" if skipped is not None else "passed")
    return result, matrix


def _open(browser, path):
    browser.get(path.as_uri())
    return browser


def _section(browser):
    """The class's matrix table and its verdict ``<details>``, as the browser parsed them."""
    return browser.execute_script(f"""
        const h = document.getElementById('{ANCHOR}');
        let matrix = null, verdicts = null;
        for (let e = h.nextElementSibling; e && e.tagName !== 'H2'; e = e.nextElementSibling) {{
            if (e.tagName === 'TABLE' && !matrix) matrix = e;
            if (e.tagName === 'DETAILS' && !verdicts) verdicts = e;
        }}
        return [matrix, verdicts];""")


def _cells(matrix):
    """The matrix's cells (not the scenario names, not the empty cells of deselected scenarios): (class, text,
    title, footnote link href)."""
    from selenium.webdriver.common.by import By

    out = []
    for td in matrix.find_elements(By.CSS_SELECTOR, "tr td:not(.row)"):
        if not td.text:
            continue
        links = td.find_elements(By.TAG_NAME, "a")
        out.append((td.get_attribute("class"), td.text, td.get_attribute("title"),
                    links[0].get_attribute("href") if links else None))
    return out


def _totals(browser):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, "p.totals").text


def test_new_failures_the_matrix_first_and_every_mark_leads_to_its_reason(pytester, browser):
    from selenium.webdriver.common.by import By

    result, matrix_reports = _run(pytester, "--torchbind-report=new.html")
    counts = result.parseoutcomes()
    page = _open(browser, pytester.path / "new.html")
    matrix, verdicts = _section(page)
    # The browser found both, in that order, and the matrix is on the first screen of a 1280x900 window.
    assert matrix is not None and verdicts is not None
    assert page.execute_script("return arguments[0].compareDocumentPosition(arguments[1]) & 4", matrix, verdicts)
    assert page.execute_script("return arguments[0].getBoundingClientRect().top < window.innerHeight", matrix)
    # The header counts what pytest counted.
    assert _totals(page) == (f"1 class(es), {sum(counts.values())} checks: {counts['passed']} passed, "
                             f"{counts['failed']} failed, 0 known failure(s) (baseline), {counts['skipped']} n/a")
    # The table as the browser parsed it: two header rows, then one row per scenario with a cell per backend.
    scenarios = {name[len("matrix["):-1].rsplit("-", 1)[0] for name in matrix_reports}
    table = page.execute_script("return Array.from(arguments[0].rows, r => "
                                "[r.cells.length, r.cells[0].tagName, r.cells[0].textContent])", matrix)
    assert [length for length, *_ in table[2:]] == [1 + 2] * len(scenarios)  # eager and export
    assert [tag for _, tag, _ in table[:2]] == ["TH", "TH"] and {name for *_, name in table[2:]} == scenarios
    # One cell per matrix item, each with the mark of its item's outcome.
    cells = _cells(matrix)
    assert len(cells) == len(matrix_reports)
    by_outcome = Counter(matrix_reports.values())
    marks = Counter(css for css, *_ in cells)
    assert marks["failed"] == by_outcome["failed"] > 0 and marks["passed"] == by_outcome["passed"] > 0
    assert marks["unsupported"] + marks["skipped"] == by_outcome["skipped"]
    assert marks["unsupported"] > 0 and "known" not in marks  # no baseline: nothing is known
    # One n/a mark everywhere: text and class agree, and the other marks mean what the legend says.
    for css, text, title, href in cells:
        assert text.split(" ")[0] == {"passed": "✓", "failed": "✗", "unsupported": "–", "skipped": "n/a"}[css]
        assert (href is None) == (css == "passed") and (title == "") == (css == "passed")
    # Every footnote link leads to a footnote that exists and shows the cell's reason; following it scrolls there.
    for css, text, title, href in cells:
        if href:
            target = page.find_element(By.ID, href.rsplit("#", 1)[1])
            assert title in target.text and target.text.startswith(text.split(" ")[0])
    failed_link = next(href for css, _, _, href in cells if css == "failed")
    page.find_element(By.CSS_SELECTOR, f"a[href='#{failed_link.rsplit('#', 1)[1]}']").click()
    note = page.find_element(By.ID, failed_link.rsplit("#", 1)[1])
    assert page.execute_script("return location.hash") == "#" + note.get_attribute("id")
    # (The page scrolled: the footnote's top is at the window's top, to within a pixel of rounding.)
    assert page.execute_script("return window.scrollY > 0 && Math.abs(arguments[0].getBoundingClientRect().top) < 1",
                               note)
    # A failure the baseline does not list opens the verdicts, new failures first.
    assert verdicts.get_attribute("open") is not None
    rows = verdicts.find_elements(By.CSS_SELECTOR, "tr")[1:]
    assert len(rows) == sum(counts.values()) and all(r.is_displayed() for r in rows)
    statuses = [r.find_elements(By.TAG_NAME, "td")[1].get_attribute("class") for r in rows]
    assert statuses == sorted(statuses, key=["failed", "skipped", "passed"].index)


def test_baselined_failures_are_known_in_the_matrix_and_the_passes_stay_folded(pytester, browser):
    from selenium.webdriver.common.by import By

    accept, _ = _run(pytester, "--torchbind-baseline=baseline.json", "--torchbind-accept")
    assert accept.ret == pytest.ExitCode.TESTS_FAILED  # the accept run reports the failures it recorded
    result, matrix_reports = _run(pytester, "--torchbind-baseline=baseline.json", "--torchbind-report=known.html")
    assert result.ret == pytest.ExitCode.OK
    counts = result.parseoutcomes()
    page = _open(browser, pytester.path / "known.html")
    matrix, verdicts = _section(page)
    assert _totals(page) == (f"1 class(es), {sum(counts.values())} checks: {counts['passed']} passed, 0 failed, "
                             f"{counts['xfailed']} known failure(s) (baseline), {counts['skipped']} n/a")
    # Each baselined matrix failure is marked known (and nothing as a plain failure).
    cells = _cells(matrix)
    known = [text for css, text, *_ in cells if css == "known"]
    assert len(known) == Counter(matrix_reports.values())["xfailed"]
    assert known and all(text.startswith("✗ known") for text in known)
    assert "failed" not in {css for css, *_ in cells}
    # Only known failures: the verdicts stay folded (nothing of them shown) until their summary is clicked.
    assert verdicts.get_attribute("open") is None
    rows = verdicts.find_elements(By.CSS_SELECTOR, "tr")[1:]
    assert len(rows) == sum(counts.values()) and not any(r.is_displayed() for r in rows)
    verdicts.find_element(By.TAG_NAME, "summary").click()
    assert all(r.is_displayed() for r in rows)
    assert rows[0].find_elements(By.TAG_NAME, "td")[1].text == "✗ (baseline)"


def test_markdown_and_html_reports_of_hostile_names_run_nothing(browser, tmp_path):
    """A name holding HTML (``<img src=x onerror=...>``, ``<script>``, a ``javascript:`` link): the Markdown report
    rendered by Python-Markdown (as MkDocs renders it) and the HTML report of the same data, opened in Chromium,
    run none of it and show it as text (issue 29)."""
    pytest.importorskip("markdown", reason="renders the Markdown report (pip install -e '.[docs]')")
    from selenium.webdriver.common.by import By

    from conformance.reports import write_report
    from conformance.reports.markdown import render as render_markdown
    from hostile_reports import hostile_report, merged_markdown, rendered

    report = hostile_report()
    pages = {"report.md.html": rendered(render_markdown(report)), "merged.md.html": rendered(merged_markdown())}
    for name, body in pages.items():
        (tmp_path / name).write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}"
                                     "</body></html>", encoding="utf-8")
    write_report(report, tmp_path / "report.html")
    for name in (*pages, "report.html"):
        page = _open(browser, tmp_path / name)
        assert page.execute_script("return window.ran === undefined"), name  # no handler, script or link ran
        assert not page.find_elements(By.CSS_SELECTOR, "img, script, a[href^='javascript']"), name
        for link in page.find_elements(By.TAG_NAME, "a"):
            link.click() if link.is_displayed() else None
        assert page.execute_script("return window.ran === undefined"), name
        assert "<img src=x onerror=\"window.ran=1\">" in page.find_element(By.TAG_NAME, "body").get_attribute(
            "textContent"), name
