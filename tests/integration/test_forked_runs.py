"""The suite's forked pytest runs (``pytester.runpytest_forked``, :mod:`forked_pytest`) see what a subprocess run
(``pytester.runpytest_subprocess``) sees: working directory, ``sys.path``, environment, arguments, exit status,
output, a crash and a timeout. Tests that run the gate many times use them instead of fresh interpreters."""

from __future__ import annotations

import os
import re
import time

import pytest

pytestmark = pytest.mark.process  # every test here starts processes

PROBE = '''
import os, sys

def test_where():
    print("CWD", os.getcwd())
    print("PATH0", sys.path[0])
    print("SYSPATH", sys.path)
    print("ARGV0", os.path.basename(sys.argv[0]))
    print("ENV", os.environ.get("FORKED_RUNS_PROBE"))
    print("BYTECODE", sys.dont_write_bytecode)
    import forkprobe_helper  # beside this file, found through the run's PYTHONPATH / working directory
    assert forkprobe_helper.VALUE == 7

def test_fails():
    assert 1 == 2

def test_crashes():
    if os.environ.get("FORKED_RUNS_CRASH"):
        os.kill(os.getpid(), 11)
'''


def _facts(result) -> dict[str, str]:
    """What the probe printed (``-s``: the first line follows the file's name)."""
    found = (re.search(r"\b(CWD|PATH0|SYSPATH|ARGV0|ENV|BYTECODE) (.*)$", line) for line in result.outlines)
    return dict(m.groups() for m in found if m)


def test_a_forked_run_sees_what_a_subprocess_run_sees(pytester, monkeypatch):
    pytester.makepyfile(test_forkprobe=PROBE, forkprobe_helper="VALUE = 7\n")
    monkeypatch.setenv("FORKED_RUNS_PROBE", "set by the test")
    runs = [run("-s", "-p", "no:cacheprovider") for run in (pytester.runpytest_subprocess, pytester.runpytest_forked)]
    for result in runs:
        result.assert_outcomes(passed=2, failed=1)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
    subprocess_facts, forked_facts = map(_facts, runs)
    assert subprocess_facts == forked_facts and subprocess_facts["ENV"] == "set by the test", runs[1].outlines
    assert subprocess_facts["CWD"] == subprocess_facts["PATH0"] == str(pytester.path)
    assert "assert 1 == 2" in runs[1].stdout.str()


def test_a_crash_and_a_timeout_end_a_forked_run_as_a_subprocess_run(pytester, monkeypatch):
    pytester.makepyfile(test_forkprobe=PROBE, forkprobe_helper="VALUE = 7\n",
                        test_sleeps="import time\n\ndef test_sleeps():\n    time.sleep(60)\n")
    monkeypatch.setenv("FORKED_RUNS_CRASH", "1")
    crashed = [run("test_forkprobe.py", "-p", "no:cacheprovider")
               for run in (pytester.runpytest_subprocess, pytester.runpytest_forked)]
    assert crashed[0].ret == crashed[1].ret == -11
    assert "Fatal Python error: Segmentation fault" in crashed[1].stderr.str()
    start = time.monotonic()
    with pytest.raises(pytester.TimeoutExpired):
        pytester.runpytest_forked("test_sleeps.py", "-p", "no:cacheprovider", timeout=5)
    assert time.monotonic() - start < 30
    # The server goes on: the next run is answered.
    pytester.runpytest_forked("test_forkprobe.py", "-k", "fails", "-p", "no:cacheprovider").assert_outcomes(failed=1)
    assert not os.environ.get("PYTHONDONTWRITEBYTECODE")  # the runs a test starts keep their bytecode
