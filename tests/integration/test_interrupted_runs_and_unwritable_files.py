"""The gate under faults around it: runs that execute no check, interrupted runs (Ctrl-C, SIGTERM), and files that
cannot be written at the end of a run. (Baseline accept under partial runs: tests/integration/test_baseline.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.plugin.baseline import Entry, load_baseline, save_baseline
from conformance.core.files import check_writable, write_text_atomically
from conformance.reports import build_report, write_report
from conformance.reports.html import render as render_html
from conformance.reports.markdown import render as render_markdown
from conformance.reports.terminal import render_lines
from conftest import TORCH_SPEC, TORCH_TESTLIB, run_inprocess, needs_torch_testlib

FOO = (f"--torchbind-load={TORCH_SPEC}", "--torchbind-class=_TorchScriptTesting::_Foo")
#: samples::Counter's coverage matrix on plain eager only: 11 cells (10 rows, dynamic.ops among them, and scale.backward), a few seconds.
COUNTER = ("--torchbind-load=sample_classes", "--torchbind-class=samples::Counter", "--torchbind-checks=matrix",
           "--torchbind-backends=eager")


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401  (builds the sample extension once; cached afterwards)

    return sample_classes


def _no_traceback(result) -> None:
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]


# ----- 2. reports are never destroyed ------------------------------------------------------------------------------

@needs_torch_testlib
def test_a_run_that_runs_no_torchbind_item_leaves_report_and_step_summary_alone(pytester, monkeypatch):
    report, summary = pytester.path / "m.md", pytester.path / "summary.md"
    report.write_text("previous report\n")
    summary.write_text("previous summary\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    for selection in (["--collect-only"], ["-m", "not torchbind"], ["-k", "no_such_item"]):
        result = run_inprocess(pytester, *FOO, "--torchbind-report=m.md", *selection)
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), selection
        assert report.read_text() == "previous report\n", selection
        assert summary.read_text() == "previous summary\n", selection
    # The configure-time probe of a new report path creates nothing.
    before = sorted(os.listdir(pytester.path))
    result = run_inprocess(pytester, *FOO, "--torchbind-report=new.md", "--collect-only")
    assert result.ret == pytest.ExitCode.OK
    assert sorted(os.listdir(pytester.path)) == before
    # A run that runs an item does write it.
    result = run_inprocess(pytester, *FOO, "--torchbind-report=m.md", "-k", "fake_class")
    assert result.ret == pytest.ExitCode.OK
    assert report.read_text().startswith("## TorchBind coverage matrix (torch ")  # a TorchBind class's run


def test_report_and_baseline_writes_are_atomic(tmp_path, monkeypatch):
    report = build_report([])
    path = tmp_path / "m.md"
    path.write_text("old report\n")
    path.chmod(0o640)
    write_report(report, path)
    assert path.read_text().startswith("## Coverage matrix (torch ")  # a report of no class names no kind
    assert path.stat().st_mode & 0o777 == 0o640  # an existing file keeps its permissions

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    path.write_text("old report\n")
    with pytest.raises(OSError, match="No space left"):
        write_report(report, path)
    assert path.read_text() == "old report\n"  # not truncated, not empty
    baseline = tmp_path / "b.json"
    monkeypatch.undo()
    save_baseline(baseline, {"a": "reason"})
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError):
        save_baseline(baseline, {})
    assert load_baseline(baseline) == {"a": Entry("reason")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json", "m.md"]  # no temporary file left behind
    monkeypatch.undo()
    write_text_atomically(tmp_path / "new.txt", "x")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o666 & ~umask


def test_writability_probe_creates_nothing(tmp_path):
    check_writable(tmp_path / "m.md")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError):
        check_writable(tmp_path / "no" / "m.md")
    with pytest.raises(IsADirectoryError):
        check_writable(tmp_path)
    assert list(tmp_path.iterdir()) == []


# ----- 3. interrupted runs -----------------------------------------------------------------------------------------

def test_ctrl_c_writes_the_partial_report_marked_incomplete(pytester, samples):
    pytester.makeconftest("""
        _done = []

        def pytest_runtest_logfinish(nodeid, location):
            _done.append(nodeid)
            if len(_done) == 3:
                raise KeyboardInterrupt
    """)
    result = run_inprocess(pytester, *COUNTER, "--torchbind-report=m.json", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    doc = json.loads((pytester.path / "m.json").read_text())
    assert doc["incomplete"] == "interrupted: 3 of 14 cells ran"
    assert sum(len(c["cells"]) for c in doc["classes"]) == 3
    result.stdout.fnmatch_lines(["*TorchBind coverage matrix*", "incomplete report — interrupted: 3 of 14 cells ran"])


@needs_torch_testlib
def test_a_run_stopped_by_exitfirst_is_marked_too(pytester):
    result = run_inprocess(pytester, *FOO, "-k", "coverage", "-x", "--torchbind-report=m.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = json.loads((pytester.path / "m.json").read_text())
    assert doc["incomplete"].startswith("stopped early (stopping after 1 failures): 0 of "), doc["incomplete"]
    complete = run_inprocess(pytester, *FOO, "-k", "coverage", "--torchbind-report=m.json")
    assert complete.ret == pytest.ExitCode.TESTS_FAILED
    assert json.loads((pytester.path / "m.json").read_text())["incomplete"] is None


def test_every_writer_shows_an_incomplete_report():
    note = "interrupted: 47 of 91 cells ran"
    report = build_report([], incomplete=note)
    assert f"**Incomplete report — {note}.**" in render_markdown(report)
    assert f"<b>Incomplete report</b> — {note}." in render_html(report)
    assert render_lines(report)[0] == f"incomplete report — {note}"
    assert "Incomplete" not in render_markdown(build_report([]))


def _descendants(pid: int) -> set[int]:
    """The processes below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            out.add(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process isolation and /proc: Linux")
def test_sigterm_stops_the_run_like_ctrl_c(pytester, samples):
    # Fault injection: in the isolation worker, the fourth item hangs (after saying so), so SIGTERM arrives
    # while a check is running.
    pytester.makeconftest("""
        import time
        from pathlib import Path

        import conformance.plugin.run as pytest_run

        _run_target = pytest_run.run_target


        def _hang_from_the_fourth(unit, session=None, **options):
            started = Path("started.txt")
            with started.open("a") as fh:
                fh.write(unit.name + "\\n")
            if len(started.read_text().splitlines()) > 3:
                Path("ready").touch()
                time.sleep(300)
            return _run_target(unit, session, **options)


        pytest_run.run_target = _hang_from_the_fourth
    """)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *COUNTER,
                             "--torchbind-isolation=process", "--torchbind-report=m.json", "--junitxml=j.xml"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (pytester.path / "ready").exists():
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the fourth item never started"
            time.sleep(0.1)
        workers = _descendants(proc.pid)
        assert workers, "the isolation worker process"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "KeyboardInterrupt: terminated by SIGTERM" in out
    doc = json.loads((pytester.path / "m.json").read_text())
    assert doc["incomplete"] == "interrupted: 3 of 14 cells ran", out[-3000:]
    assert (pytester.path / "j.xml").exists()
    assert not [pid for pid in workers if _alive(pid)], "a worker process outlived the run"


# ----- 4. end-of-run errors are one-line warnings -----------------------------------------------------------------

def test_a_report_directory_removed_mid_run_is_a_warning(pytester, samples, monkeypatch):
    (pytester.path / "out").mkdir()
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makeconftest("""
        import shutil

        def pytest_collection_finish(session):
            shutil.rmtree("out")
    """)
    result = run_inprocess(pytester, *COUNTER, "-k", "reset", "--torchbind-report=out/m.md",
                           "--torchbind-baseline=b.json", "--torchbind-accept")
    assert result.ret == pytest.ExitCode.OK  # a passing run still passes
    report = pytester.path / "out" / "m.md"
    result.stdout.fnmatch_lines(["*TorchBind coverage matrix*",
                                 f"torchbind: could not write the report {report}: [Errno 2] No such file or directory",
                                 "*1 passed*"])
    assert "report: " not in result.stdout.str()
    _no_traceback(result)
    assert load_baseline(pytester.path / "b.json") == {}  # the baseline is still saved
    assert "### samples::Counter" in summary.read_text()  # and the step summary written


def test_step_summary_and_baseline_failures_are_warnings(pytester, samples, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path))  # a directory: cannot be appended to
    pytester.makepyfile(test_plain="def test_fails():\n    assert 1 == 2\n")
    result = run_inprocess(pytester, *COUNTER, "-k", "matrix and reset or fails", "--torchbind-report=m.md",
                           "--torchbind-baseline=gone/b.json", "--torchbind-accept")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*= FAILURES =*",
        "*TorchBind coverage matrix*",
        f"torchbind: could not write the baseline {pytester.path / 'gone' / 'b.json'}: "
        "[Errno 2] No such file or directory",
        f"torchbind: could not write the GitHub step summary {pytester.path} (GITHUB_STEP_SUMMARY): "
        "[Errno 21] Is a directory",
        "*short test summary info*",
        "*1 failed, 1 passed*",
    ])
    _no_traceback(result)
    assert (pytester.path / "m.md").read_text().startswith("## TorchBind coverage matrix (torch ")  # still written


# ----- 4. any text: one unencodable character loses nothing ------------------------------------------------------

#: An unpaired surrogate: what Python makes of a byte that is not UTF-8 (surrogateescape), e.g. in a C++ message.
BAD = "bad byte \udc80 here"


def _every_field_holds(text: str):
    """A report with ``text`` in every field a run fills from what it saw."""
    from conformance.core.results import Cell, Status, Verdict

    cells = [Cell("ns::Q", "push", "export", 0, 4, Status.FAILED, f"reason: {text}", [f"detail: {text}"],
                  f"program: {text}"),
             Cell("ns::Q", f"row {text}", "export", 1, 4, Status.UNSUPPORTED, f"limit: {text}", [], "", "lim")]
    verdicts = {"ns::Q": [Verdict.from_json({"item": "matrix[push-export]", "check": "matrix", "target": "push",
                                             "status": "failed", "summary": f"summary: {text}", "baseline": False,
                                             "notes": [f"note: {text}"], "evidence": {}})]}
    labels = {"torch": "2.13.0", "device": "cpu", "platform": "linux-x86_64", "date": "2026-11-27T00:00:00Z"}
    return build_report(cells, incomplete=f"interrupted: {text}", verdicts=verdicts, labels=labels)


def test_every_writer_survives_an_unpaired_surrogate(tmp_path):
    from conformance.__main__ import main

    report = _every_field_holds(BAD)
    for suffix in (".md", ".html", ".json"):
        write_report(report, tmp_path / f"m{suffix}")
        text = (tmp_path / f"m{suffix}").read_text(encoding="utf-8")
        assert "bad byte \\udc80 here" in text, suffix  # the character, escaped: the rest of the text intact
    # The JSON report reads back with the very character it held (the escape is a JSON escape).
    doc = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))
    assert doc["classes"][0]["verdicts"][0]["summary"] == f"summary: {BAD}"
    assert doc["incomplete"] == f"interrupted: {BAD}"
    # The terminal's lines keep it: pytest's terminal writer escapes what the terminal cannot encode.
    assert render_lines(report)[0] == f"incomplete report — interrupted: {BAD}"
    save_baseline(tmp_path / "b.json", {"torchbind[ns.Q]::matrix[push-export]": Entry(f"summary: {BAD}")})
    assert load_baseline(tmp_path / "b.json") == {"torchbind[ns.Q]::matrix[push-export]": Entry(f"summary: {BAD}")}
    # merge: the merged report of two runs in each format, and the baseline it accepts into.
    other = tmp_path / "other.json"
    doc["run"]["torch"] = "2.14.1"
    other.write_text(json.dumps(doc), encoding="utf-8")
    for suffix in (".md", ".html", ".json"):
        assert main(["merge", str(tmp_path / "m.json"), str(other), "-o", str(tmp_path / f"merged{suffix}"),
                     "--baseline", str(tmp_path / "merged-b.json")]) == 0, suffix
        assert "\\udc80" in (tmp_path / f"merged{suffix}").read_text(encoding="utf-8"), suffix
    assert list(load_baseline(tmp_path / "merged-b.json").values())[0].reason == f"summary: {BAD}"


@pytest.fixture
def foo_fake_raising_bad_text():
    """torch's own fake of _TorchScriptTesting::_Foo, replaced for one test by one whose add_tensor raises a
    message holding an unpaired surrogate (then put back)."""
    import torch
    from torch._library.fake_class_registry import _full_qual_class_name, global_fake_class_registry
    from torch.testing._internal.torchbind_impls import init_torchbind_implementations

    init_torchbind_implementations()
    name = "_TorchScriptTesting::_Foo"
    key = _full_qual_class_name(name)
    original = global_fake_class_registry.get_impl(key)
    global_fake_class_registry.deregister(key)

    class FakeFoo:
        def __init__(self, x: int, y: int):
            self.x, self.y = x, y

        @classmethod
        def __obj_unflatten__(cls, flattened):
            return cls(**dict(flattened))

        def add_tensor(self, z):
            raise RuntimeError(BAD)

    torch._library.register_fake_class(name)(FakeFoo)
    try:
        yield
    finally:
        global_fake_class_registry.deregister(key)
        global_fake_class_registry.register(key, original)


@pytest.mark.skipif(not TORCH_TESTLIB, reason="needs torch's TorchBind test classes (libtorchbind_test.so)")
def test_a_run_whose_failure_holds_an_unpaired_surrogate_writes_every_file(pytester, monkeypatch,
                                                                          foo_fake_raising_bad_text):
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    # torch logs the message (surrogate included) itself, to this test's own stderr and log capture, which
    # pytest-xdist must send (execnet encodes UTF-8 strictly): not the plugin's output, so kept out of this test's
    import logging

    monkeypatch.setattr(logging.getLogger("torch._subclasses.fake_tensor"), "disabled", True)
    result = run_inprocess(pytester, *FOO, "--torchbind-checks=matrix", "--torchbind-backends=export",
                           "--torchbind-report=m.json", "--torchbind-baseline=b.json", "--torchbind-accept",
                           "--junitxml=j.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "UnicodeEncodeError" not in out, out[-3000:]
    result.stdout.fnmatch_lines(["*= FAILURES =*", "*TorchBind coverage matrix*", "*torchbind baseline*",
                                 "*short test summary info*", "*failed*"])
    cells = json.loads((pytester.path / "m.json").read_text(encoding="utf-8"))["classes"][0]["cells"]
    # the item's data is made encodable where it is made (pytest-xdist carries it from the workers through execnet,
    # which encodes UTF-8 strictly), so serial and parallel runs write the same report: the escape, as text
    assert any("bad byte \\udc80 here" in " ".join([c["reason"], *c["details"]]) for c in cells)
    assert "\\udc80" in summary.read_text(encoding="utf-8")  # the Markdown matrix of the job summary
    assert load_baseline(pytester.path / "b.json")  # the accepted baseline holds the failures
    assert (pytester.path / "j.xml").exists()

