"""Options a new user meets: where paths from the ini file lead, several reports, and the baseline's own file
format (issue 29). Paths follow pytest's convention: a path in the ini file is relative to the ini file's
directory (pytest's ``paths`` ini type), a path on the command line to the directory pytest was invoked from."""

from __future__ import annotations

import json
import re

import pytest

from conformance.plugin import hooks as plugin
from conformance.plugin.baseline import BaselineError, Entry, load_baseline
from conftest import TORCH_SPEC, needs_torch_testlib, run_inprocess

FOO = "torchbind[_TorchScriptTesting._Foo]"


def _project(pytester, monkeypatch):
    """A project whose pytest.ini (at its root) names a load file, a baseline and a report by relative paths, with
    a tests/ directory that holds a decoy of the load file, which must not be what runs. The load file sets
    TORCHBIND_TEST_LOADED in this process: ``monkeypatch`` takes it away again after the test (left set, it made a
    later forked run in the same xdist worker refuse to start: its environment differed from its fork server's)."""
    monkeypatch.setenv("TORCHBIND_TEST_LOADED", "not loaded yet")
    (pytester.path / "tests").mkdir()
    (pytester.path / "out").mkdir()
    (pytester.path / "loadme.py").write_text("import os\nos.environ['TORCHBIND_TEST_LOADED'] = 'root'\n")
    (pytester.path / "tests" / "loadme.py").write_text("raise RuntimeError('the decoy in tests/ was loaded')\n")
    pytester.makeini(f"""
        [pytest]
        torchbind_load =
            {TORCH_SPEC}
            loadme.py
        torchbind_classes = _TorchScriptTesting::_Foo
        torchbind_baseline = tests/torchbind-baseline.json
        torchbind_report = out/matrix.json
    """)


@needs_torch_testlib
def test_ini_paths_are_relative_to_the_ini_file_from_any_directory(pytester, monkeypatch):
    _project(pytester, monkeypatch)
    monkeypatch.chdir(pytester.path / "tests")  # `pytest` run from tests/, as a new user does
    result = run_inprocess(pytester, "--torchbind-accept", "-k", "coverage")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    import os

    assert os.environ["TORCHBIND_TEST_LOADED"] == "root"  # the ini's loadme.py, not tests/loadme.py
    # Written where the ini says, not under tests/tests/ (nor out/ under tests/, which does not exist).
    assert set(load_baseline(pytester.path / "tests" / "torchbind-baseline.json")) >= {f"{FOO}::coverage[add]"}
    assert not (pytester.path / "tests" / "tests").exists()
    assert json.loads((pytester.path / "out" / "matrix.json").read_text())["schema"] == "torchbind-matrix/2"
    # The gate reads the same baseline back from there.
    again = run_inprocess(pytester, "-k", "coverage")
    assert again.ret == pytest.ExitCode.OK, again.stdout.str()[-3000:]


@needs_torch_testlib
def test_command_line_paths_are_relative_to_the_invocation_directory(pytester, monkeypatch):
    _project(pytester, monkeypatch)
    monkeypatch.chdir(pytester.path / "tests")
    result = run_inprocess(pytester, "--torchbind-baseline=here.json", "--torchbind-report=here.md",
                           "--torchbind-accept", "-k", "coverage")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (pytester.path / "tests" / "here.json").exists() and (pytester.path / "tests" / "here.md").exists()
    assert not (pytester.path / "tests" / "torchbind-baseline.json").exists()  # the ini's value was replaced


def _options(pytester, *args):
    config = pytester.parseconfigure("-p", "no:cacheprovider", f"--torchbind-load={TORCH_SPEC}",
                                     "--torchbind-class=_TorchScriptTesting::_Foo", "--torchbind-isolation=none",
                                     *args)
    return config.stash[plugin.RUN_KEY].options


@needs_torch_testlib
def test_several_report_options_are_several_reports(pytester):
    options = _options(pytester, "--torchbind-report=m.md", "--torchbind-report=m.json", "--torchbind-report=m.html",
                       "--torchbind-report=m.md")
    assert options.reports == [pytester.path / "m.md", pytester.path / "m.json", pytester.path / "m.html"]
    assert options.report == pytester.path / "m.md"
    pytester.makeini("[pytest]\ntorchbind_report = a.md b.json\n")
    assert _options(pytester).reports == [pytester.path / "a.md", pytester.path / "b.json"]
    # The command line replaces the ini's reports; an empty value asks for none.
    assert _options(pytester, "--torchbind-report=c.html").reports == [pytester.path / "c.html"]
    assert _options(pytester, "--torchbind-report=").reports == []
    with pytest.raises(pytest.UsageError, match="--torchbind-report=m.txt: unsupported format .txt"):
        _options(pytester, "--torchbind-report=m.md", "--torchbind-report=m.txt")


@needs_torch_testlib
def test_an_ini_baseline_naming_two_files_is_a_usage_error(pytester):
    pytester.makeini("[pytest]\ntorchbind_baseline = a.json b.json\n")
    with pytest.raises(pytest.UsageError, match="torchbind_baseline in .*: one file, got 2"):
        _options(pytester)


def test_a_key_given_twice_in_the_baseline_is_an_error_naming_it(tmp_path):
    path = tmp_path / "b.json"
    path.write_text('{"schema": "torchbind-baseline/1", "known_failures": {\n'
                    '  "torchbind[ns.Q]::coverage[pop]": "reviewed: the fake is not written yet",\n'
                    '  "torchbind[ns.Q]::agreement[push]": "x",\n'
                    '  "torchbind[ns.Q]::coverage[pop]": "generated summary"}}\n')
    with pytest.raises(BaselineError, match=r"'torchbind\[ns.Q\]::coverage\[pop\]' is given twice"):
        load_baseline(path)
    path.write_text('{"schema": "torchbind-baseline/1", "known_failures": {"t": {"reason": "a", "reason": "b"}}}')
    with pytest.raises(BaselineError, match="'reason' is given twice"):
        load_baseline(path)
    path.write_text('{"schema": "torchbind-baseline/1", "known_failures": {"t": "a", "u": "a"}}')
    assert load_baseline(path) == {"t": Entry("a"), "u": Entry("a")}  # equal values under two keys are fine


@needs_torch_testlib
def test_a_duplicate_baseline_key_is_a_usage_error(pytester):
    (pytester.path / "b.json").write_text('{"schema": "torchbind-baseline/1", "known_failures": {"k": "a", "k": "b"}}')
    result = run_inprocess(pytester, f"--torchbind-load={TORCH_SPEC}", "--torchbind-class=_TorchScriptTesting::_Foo",
                           "--torchbind-baseline=b.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--torchbind-baseline: *b.json: 'k' is given twice in one JSON object*"])


@needs_torch_testlib
def test_several_report_options_write_several_reports(pytester):
    result = run_inprocess(pytester, f"--torchbind-load={TORCH_SPEC}", "--torchbind-class=_TorchScriptTesting::_Foo",
                           "--torchbind-checks=matrix", "--torchbind-backends=eager", "-k", "add_tensor",
                           "--torchbind-report=m.md", "--torchbind-report=m.json",
                           "--torchbind-report=m.html")
    assert result.ret == pytest.ExitCode.OK
    assert (pytester.path / "m.md").read_text().startswith("## TorchBind coverage matrix (torch ")
    assert json.loads((pytester.path / "m.json").read_text())["schema"] == "torchbind-matrix/2"
    assert (pytester.path / "m.html").read_text().startswith("<!DOCTYPE html>")
    assert "<h1>TorchBind coverage matrix</h1>" in (pytester.path / "m.html").read_text()
    result.stdout.fnmatch_lines([f"report: {pytester.path / name}" for name in ("m.md", "m.json", "m.html")])


@needs_torch_testlib
def test_every_role_is_given_the_selected_classes_once_made(pytester):
    # Issue 30: the selectors are expanded before the run's roles are made, so each is given the same tuple (no
    # empty list handed to them and filled later); a class selected twice is there once.
    config = pytester.parseconfigure("-p", "no:cacheprovider", f"--torchbind-load={TORCH_SPEC}",
                                     "--torchbind-class=_TorchScriptTesting::_Foo",
                                     "--torchbind-class=_TorchScriptTesting::_Foo", "--torchbind-isolation=none")
    run = config.stash[plugin.RUN_KEY]
    assert run.classes == ("_TorchScriptTesting::_Foo",)
    assert run.collection.classes is run.classes and run.recorder.classes is run.classes


def test_each_options_help_names_its_own_ini_key(pytester):
    # One table (plugin/options.py OPTIONS) makes the option, its ini key and the lookup: Option.help adds the key
    # (``Ini: torchbind_x``) to what the option does, and --help shows it for every option that has one, once.
    from conformance.plugin.options import OPTIONS

    for option in OPTIONS.values():
        assert re.findall(r"Ini: (torchbind_\w+)", option.help) == ([option.ini] if option.ini else []), option.flag
        assert "Ini:" not in option.about, option.flag  # said once, by Option.help
    lines = pytester.runpytest("--help").stdout.lines
    start = lines.index("TorchBind class conformance (torchbind-conformance):")
    group = " " + " ".join(" ".join(lines[start + 1:lines.index("", start)]).split())  # the group, unwrapped
    flags = [option.flag for option in OPTIONS.values()]
    entries = [group.index(f" {flag}", group.index(f" {flags[i - 1]}") if i else 0) for i, flag in enumerate(flags)]
    assert entries == sorted(entries)  # each option's entry in --help, in the table's order
    for option, begin, end in zip(OPTIONS.values(), entries, entries[1:] + [len(group)]):
        entry = group[begin:end]
        assert re.findall(r"Ini: (torchbind_\w+)", entry) == ([option.ini] if option.ini else []), entry
        if option.ini_note:
            assert f"Ini: {option.ini} ({option.ini_note})." in entry, entry
