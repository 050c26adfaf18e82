"""Crash and hang isolation: the supervised worker process on its own (pure-Python work items that crash, abort,
exit or hang), then the plugin on the samples_unsafe classes, whose C++ methods segfault and spin."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conformance import isolation
from conformance.isolation import CallAbandoned, Supervisor, WorkerLost, calling
from conformance.results import Failure, Outcome
from conformance.session import Session

pytestmark = pytest.mark.skipif(not isolation.isolation_available(), reason="process isolation needs Linux fork")


_WARMED: list[str] = []


def _item(key: str) -> Outcome:
    """Work items for a test supervisor; run in its worker process."""
    ok = Outcome("check", "ns::Cls", "method")
    if key == "ok":
        return ok
    if key in ("pid", "late"):
        return Outcome.skip("check", "ns::Cls", None, str(os.getpid()))
    if key == "segv":
        with calling("check segv", timed=False), calling("ns::Cls.boom(3)"):
            os.kill(os.getpid(), signal.SIGSEGV)
    if key == "abort":
        with calling("ns::Cls.assert_invariant()"):
            os.abort()
    if key == "exit":
        os._exit(3)
    if key == "spin":
        with calling("compiling", timed=False), calling("ns::Cls.wait_for(2)"):
            time.sleep(60)
    if key == "slow-untimed":
        with calling("compiling", timed=False):
            time.sleep(1.0)
        return ok
    if key == "forever-untimed":
        with calling("compiling", timed=False):
            time.sleep(60)
    if key == "prepare":
        try:
            with calling("ns::Cls.derive(2)"):
                os.kill(os.getpid(), signal.SIGSEGV)
        except CallAbandoned as exc:
            return Outcome.skip("prepare", "ns::Cls", None, str(exc))
    if key == "warm":
        return Outcome.skip("check", "ns::Cls", None, ",".join(_WARMED))
    if key == "unpicklable":
        return Outcome.of_failures("check", "ns::Cls", None, [Failure("unpicklable", details=(lambda: 1,))])
    raise AssertionError(key)


@pytest.fixture
def supervisor():
    made = []
    session = Session()  # its own record of abandoned calls

    def make(timeout=5.0, before_fork=None):
        sup = Supervisor(_item, timeout, before_fork, session=session)
        for key in ("ok", "pid", "segv", "abort", "exit", "spin", "slow-untimed", "forever-untimed", "prepare",
                    "unpicklable", "warm"):
            sup.register(key)
        made.append(sup)
        return sup

    yield make
    for sup in made:
        sup.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_outcomes_come_back_from_one_persistent_worker(supervisor):
    sup = supervisor()
    assert sup.run("ok") == Outcome("check", "ns::Cls", "method")
    first, second = sup.run("pid"), sup.run("pid")
    assert first.reason == second.reason != str(os.getpid())
    assert sup.started == 1


def test_a_segfault_fails_the_item_names_the_call_and_a_new_worker_goes_on(supervisor):
    sup = supervisor()
    lost = sup.run("segv")
    assert isinstance(lost, WorkerLost) and lost.kind == "crash"
    assert lost.cause == "killed by SIGSEGV (Segmentation fault)"
    assert lost.doing == ["check segv", "ns::Cls.boom(3)"] and lost.call == "ns::Cls.boom(3)"
    assert any("in _item" in frame for frame in lost.stack), lost.stack  # faulthandler's Python stack
    failure = lost.failure(timeout=5.0)
    assert failure.summary == ("the process running this check crashed: killed by SIGSEGV (Segmentation fault) "
                               "while in ns::Cls.boom(3)")
    assert "check segv > ns::Cls.boom(3)" in failure.render("ns::Cls", "boom")
    assert sup.run("ok").check == "check" and sup.started == 2


def test_abort_and_exit_are_reported_too(supervisor):
    sup = supervisor()
    lost = sup.run("abort")
    assert lost.cause == "killed by SIGABRT (Aborted)" and lost.call == "ns::Cls.assert_invariant()"
    lost = sup.run("exit")
    assert (lost.kind, lost.cause, lost.call) == ("crash", "the worker process exited with status 3", None)


def test_a_call_that_hangs_is_killed_after_the_timeout(supervisor):
    sup = supervisor(timeout=0.5)
    pid = int(sup.run("pid").reason)
    start = time.monotonic()
    lost = sup.run("spin")
    assert time.monotonic() - start < 5
    assert (lost.kind, lost.call) == ("hang", "ns::Cls.wait_for(2)")
    assert lost.cause == "did not return within 0.5 s (--torchbind-timeout)"
    assert not _alive(pid)
    failure = lost.failure(timeout=0.5)
    assert failure.summary == "this check hung: ns::Cls.wait_for(2) did not return within 0.5 s (--torchbind-timeout)"
    assert sup.run("ok").check == "check"


def test_work_outside_calls_gets_the_item_limit_not_the_call_limit(supervisor):
    sup = supervisor(timeout=0.4)  # item limit: 4 s
    assert isinstance(sup.run("slow-untimed"), Outcome)  # 1 s, longer than one call may take
    lost = sup.run("forever-untimed")
    assert lost.kind == "hang" and lost.call is None
    assert "reached its limit of 4 s" in lost.cause


def test_preparation_abandons_the_call_that_crashed_it(supervisor):
    sup = supervisor()
    [lost] = sup.prepare("prepare")
    assert lost.call == "ns::Cls.derive(2)"
    assert sup.abandoned == {"ns::Cls.derive(2)": "crashed a worker process (killed by SIGSEGV (Segmentation "
                                                  "fault))"}
    again = sup.run("prepare")  # a new worker inherits the abandoned call and does not make it
    assert again.reason.startswith("ns::Cls.derive(2) crashed a worker process") and "not called again" in \
        again.reason
    # Items do not abandon calls: each one that makes a crashing call fails on its own.
    assert isinstance(sup.run("segv"), WorkerLost) and isinstance(sup.run("segv"), WorkerLost)
    assert "ns::Cls.boom(3)" not in sup.abandoned


def test_keys_registered_after_the_fork_get_a_new_worker(supervisor):
    sup = supervisor()
    first = sup.run("pid").reason
    assert sup.run("pid").reason == first
    sup.register("late")  # e.g. an item collected after the worker was forked: that worker cannot know it
    assert sup.run("late").reason != first and sup.started == 2


def test_before_fork_runs_once_in_the_supervisor_and_workers_inherit_it(supervisor):
    _WARMED.clear()
    sup = supervisor(before_fork=lambda: _WARMED.append(f"imported in {os.getpid()}"))
    assert sup.run("warm").reason == f"imported in {os.getpid()}"
    assert isinstance(sup.run("segv"), WorkerLost)
    assert sup.run("warm").reason == f"imported in {os.getpid()}"  # the new worker: not run again
    assert _WARMED == [f"imported in {os.getpid()}"]
    _WARMED.clear()


def test_an_outcome_that_cannot_be_sent_back_becomes_a_failure(supervisor):
    outcome = supervisor().run("unpicklable")
    assert "could not be sent back from the worker process" in outcome.failures[0].summary


# ----- the plugin on the samples_unsafe classes ------------------------------------------------------------------

UNSAFE = ["-p", "no:cacheprovider", "--torchbind-load=sample_classes", "--torchbind-load=sample_classes.fakes_unsafe",
          "--torchbind-class=samples_unsafe::*", "--torchbind-timeout=2", "-rf"]


@pytest.fixture(scope="module")
def unsafe_samples():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library

    return sample_classes.UNSAFE_CLASS_QUALNAMES


def _failed(result) -> dict[str, str]:
    """Short-summary ``FAILED id - message`` lines, by test id."""
    out = {}
    for line in result.outlines:
        if line.startswith("FAILED torchbind["):
            test_id, _, message = line[len("FAILED "):].partition(" - ")
            out[test_id.strip()] = message
    return out


def test_serial_and_xdist_runs_survive_crashes_and_hangs_with_the_same_findings(pytester, unsafe_samples):
    args = [*UNSAFE, "--torchbind-checks=examples,coverage,agreement,deepcopy,matrix", "--torchbind-backends=eager",
            "-k", "not sequence and not dynamic"]
    serial = pytester.runpytest_subprocess(*args, "--torchbind-report=serial.json")
    out = serial.stdout.str()
    assert serial.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    # The crash, named with class, method and signal; the rest of the run went on.
    assert ("samples_unsafe::CrashyStack.pop: the process running this check crashed: killed by SIGSEGV "
            "(Segmentation fault) while in samples_unsafe::CrashyStack.pop()") in out
    # The hang, stopped after --torchbind-timeout.
    assert ("samples_unsafe::CrashyStack.wait_for: this check hung: samples_unsafe::CrashyStack.wait_for(") in out
    assert "did not return within 2 s (--torchbind-timeout)" in out
    # The __setstate__ that writes past the end, met by copy.deepcopy.
    assert ("samples_unsafe::OverflowPickle: the process running this check crashed: killed by SIGSEGV "
            "(Segmentation fault) while in copy.deepcopy of the example object") in out
    # The same overflow met by fakification names the example state it was fakifying.
    assert ("samples_unsafe::OverflowPickle.push: the process running this check crashed: killed by SIGSEGV "
            "(Segmentation fault) while in fakifying the example object OverflowPickle(") in out
    # Deriving an example state through wait_for hung once, in the class's preparation; the state was left out.
    assert "samples_unsafe::CrashyStack: building an example object hung a worker process" in out
    failed = set(_failed(serial))
    assert failed == {
        "torchbind[samples_unsafe.CrashyStack]::examples",
        "torchbind[samples_unsafe.CrashyStack]::agreement[pop]",
        "torchbind[samples_unsafe.CrashyStack]::agreement[wait_for]",
        "torchbind[samples_unsafe.CrashyStack]::matrix[pop-eager]",
        "torchbind[samples_unsafe.CrashyStack]::matrix[wait_for-eager]",
        "torchbind[samples_unsafe.OverflowPickle]::agreement[push]",
        "torchbind[samples_unsafe.OverflowPickle]::agreement[size]",
        "torchbind[samples_unsafe.OverflowPickle]::deepcopy",
        "torchbind[samples_unsafe.OverflowPickle]::matrix[push-eager]",
        "torchbind[samples_unsafe.OverflowPickle]::matrix[size-eager]",
        "torchbind[samples_unsafe.OverflowPickle]::matrix[tensors.attr-eager]",
    }, failed
    assert serial.parseoutcomes()["passed"] >= 12  # coverage, agreement[push]/[size], push/size cells, ...
    report = json.loads((pytester.path / "serial.json").read_text())
    cells = {(cls["qualname"], c["row"]): c for cls in report["classes"] for c in cls["cells"]}
    assert cells[("samples_unsafe::CrashyStack", "push")]["status"] == "passed"
    pop = cells[("samples_unsafe::CrashyStack", "pop")]
    assert pop["status"] == "failed" and "killed by SIGSEGV" in pop["reason"]
    assert "did not return within 2 s" in cells[("samples_unsafe::CrashyStack", "wait_for")]["reason"]

    parallel = pytester.runpytest_subprocess(*args, "--torchbind-report=parallel.json", "-n", "2")
    assert parallel.ret == pytest.ExitCode.TESTS_FAILED
    assert set(_failed(parallel)) == failed
    counts = serial.parseoutcomes()
    counts.pop("deselected")  # xdist does not count deselected items in its summary line
    assert parallel.parseoutcomes() == counts
    assert (pytester.path / "parallel.json").read_text() == (pytester.path / "serial.json").read_text()


def test_without_isolation_an_xdist_worker_lost_to_a_crash_loses_only_its_item(pytester, unsafe_samples):
    # OverflowPickle crashes wherever torch deep-copies it (deepcopy, fakification in agreement and the matrix);
    # CrashyStack could not even build its examples without a timeout (wait_for spins), so it is left out.
    result = pytester.runpytest_subprocess(
        *UNSAFE[:4], "--torchbind-class=samples_unsafe::OverflowPickle", "-rf", "--torchbind-isolation=none",
        "-n", "2", "--torchbind-checks=examples,coverage,signature,deepcopy,matrix", "--torchbind-backends=eager",
        "-k", "not size and not sequence and not attr and not dynamic", "--torchbind-report=m.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    failed = _failed(result)
    assert set(failed) == {"torchbind[samples_unsafe.OverflowPickle]::deepcopy",
                           "torchbind[samples_unsafe.OverflowPickle]::matrix[push-eager]"}, failed
    for test_id in failed:  # xdist's own message for a worker that died
        result.stdout.re_match_lines([rf"worker 'gw\d' crashed while running '{re.escape(test_id)}'"])
    assert result.parseoutcomes()["passed"] == 3  # examples, coverage[push], signature[push]
    report = json.loads((pytester.path / "m.json").read_text())
    [cell] = [c for cls in report["classes"] for c in cls["cells"]]
    assert cell["row"] == "push" and cell["status"] == "failed"
    assert "worker 'gw" in cell["reason"] and "crashed" in cell["reason"]


def test_timeout_and_isolation_options_are_checked(pytester, unsafe_samples):
    for bad, message in (("--torchbind-timeout=soon", "expected a number of seconds, got 'soon'"),
                         ("--torchbind-timeout=-1", "must be 0 (no limit) or positive")):
        result = pytester.runpytest_subprocess(*UNSAFE[:4], bad, "--collect-only")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert message in result.stderr.str()
    result = pytester.runpytest_subprocess(*UNSAFE[:4], "--torchbind-isolation=thread", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "invalid choice: 'thread'" in result.stderr.str()


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a plain shared library")
def test_a_library_that_is_not_a_torch_extension_is_a_usage_error(pytester):
    (pytester.path / "plain.c").write_text("int plain_add(int a, int b) { return a + b; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", "libplain.so", "plain.c"], cwd=pytester.path, check=True)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--torchbind-load=libplain.so",
                                           "--torchbind-class=plain::*")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "libplain.so loaded but registered no TorchBind class and no operator" in err
    assert "Traceback" not in err
