"""The suite's forked pytest runs (``pytester.runpytest_forked``, :mod:`forked_pytest`) see what a subprocess run
(``pytester.runpytest_subprocess``) sees: working directory, ``sys.path``, environment, arguments, exit status,
output, a crash and a timeout. Tests that run the gate many times use them instead of fresh interpreters."""

from __future__ import annotations

import os
import re
import threading
import time

import pytest

import forked_pytest

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
    print("ENVIRON", sorted(os.environ.items()))
    print("STDIN", os.read(0, 16))
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
    found = (re.search(r"\b(CWD|PATH0|SYSPATH|ARGV0|ENV|BYTECODE|ENVIRON|STDIN) (.*)$", line)
             for line in result.outlines)
    return dict(m.groups() for m in found if m)


def _both(pytester, *args):
    """The same run as a subprocess and forked (a forked run that waits on its stdin times out)."""
    return [pytester.runpytest_subprocess(*args, timeout=120), pytester.runpytest_forked(*args, timeout=120)]


def test_a_forked_run_sees_what_a_subprocess_run_sees(pytester, monkeypatch, fork_server):
    pytester.makepyfile(test_forkprobe=PROBE, forkprobe_helper="VALUE = 7\n")
    pytester.runpytest_forked("--co", "-q")  # the server is running: what the test changes next is not in its start
    monkeypatch.setenv("FORKED_RUNS_PROBE", "set by the test")
    monkeypatch.delenv(next(k for k in fork_server.env if k not in ("PYTHONPATH", "PATH", "HOME")
                            and not k.startswith(forked_pytest.STARTUP_PREFIXES)))
    runs = _both(pytester, "-s", "-p", "no:cacheprovider")
    for result in runs:
        result.assert_outcomes(passed=2, failed=1)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
    subprocess_facts, forked_facts = map(_facts, runs)
    assert subprocess_facts == forked_facts and subprocess_facts["ENV"] == "set by the test", runs[1].outlines
    assert subprocess_facts["CWD"] == subprocess_facts["PATH0"] == str(pytester.path)
    assert subprocess_facts["STDIN"] == "b''" and subprocess_facts["BYTECODE"] == "False"
    assert "assert 1 == 2" in runs[1].stdout.str()
    # A run told not to write bytecode does not, as a fresh interpreter would not.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert [_facts(r)["BYTECODE"] for r in _both(pytester, "-s", "-p", "no:cacheprovider")] == ["True", "True"]


def test_a_forked_run_refuses_what_only_a_fresh_interpreter_reads(pytester, monkeypatch):
    monkeypatch.setenv("TORCHDYNAMO_VERBOSE", "1")  # torch._dynamo.config reads it as it is imported
    with pytest.raises(RuntimeError, match="cannot change TORCHDYNAMO_VERBOSE, which are read as a process starts"):
        pytester.runpytest_forked("--co")


def test_a_crash_and_a_timeout_end_a_forked_run_as_a_subprocess_run(pytester, monkeypatch, fork_server):
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
    # A server that ends with a run: the run says so, and the next run starts another server.
    pytester.makepyfile(test_short="import time\n\ndef test_short():\n    time.sleep(3)\n")
    threading.Timer(1.0, lambda: fork_server.proc.kill()).start()
    with pytest.raises(RuntimeError, match="the fork server ended"):
        pytester.runpytest_forked("test_short.py", "-p", "no:cacheprovider", timeout=60)
    pytester.runpytest_forked("test_forkprobe.py", "-k", "fails", "-p", "no:cacheprovider").assert_outcomes(failed=1)
    assert not os.environ.get("PYTHONDONTWRITEBYTECODE")  # the runs a test starts keep their bytecode
