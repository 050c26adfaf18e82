"""Crash and hang isolation: the supervised worker process on its own (pure-Python work items that crash, abort,
exit, hang, allocate too much, or stand for a fake that raises SystemExit or exits), then the plugin on the
samples_unsafe classes, whose C++ methods segfault, spin and leak, and on fakes that raise SystemExit or exit."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conformance import process
from conformance.core import faults
from conformance.core.breadcrumbs import CallAbandoned, Tracer
from conformance.torchbind.calls import Call, Callee
from conformance.checks import Check
from conformance.torchbind.context import _invoke, new_fake_mode
from conformance.process import Supervisor, WorkerLost
from conformance.process import supervisor as supervisor_module
from conformance.plugin.options import parse_size
from conformance.core.results import Failure, Outcome
from conformance.runner import CheckTarget, Engine, run_target, unsendable_outcome
from conformance.engine.values import ArgumentSet
from conftest import undated_report

pytestmark = pytest.mark.skipif(not process.isolation_available(), reason="process isolation needs Linux fork")


_WARMED: list[str] = []
_KEPT: list[bytearray] = []
MiB = 1 << 20


def _allocate(mib: int) -> bytearray:
    """``mib`` MiB, every page written (resident)."""
    block = bytearray(mib * MiB)
    block[::4096] = b"\1" * len(range(0, len(block), 4096))
    return block


_TRACER = Tracer()  # the test items' tracer: the supervisors attach their page to it in the worker


class _Fake:
    """Stands for a fake class whose methods stop the program instead of raising an Exception."""

    def push(self):
        raise SystemExit(3)

    def pop(self):
        raise KeyboardInterrupt

    def ctrl_c(self):
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C arriving while the fake runs
        time.sleep(5)


def _fake_call(method: str):
    """A check (the ``agreement`` check's way of calling a fake: ``context._invoke`` under a FakeTensorMode)."""

    def func(ctx, target):
        _invoke(Call(Callee.method(method), ArgumentSet(())), _Fake(), new_fake_mode(), _TRACER,
                label=f"fake_obj.{method}() on the fake")
        raise AssertionError("not reached")

    return CheckTarget(Check("agreement", "method", func, lambda ctx: [method], ""), "ns::Cls", method)


def _run_fake_call(method: str) -> Outcome:
    engine = Engine(tracer=_TRACER)
    engine._contexts["ns::Cls"] = object()  # no class to discover: the check does not use its context
    return run_target(_fake_call(method), engine)


def _item(key: str) -> Outcome:
    """Work items for a test supervisor; run in its worker process."""
    ok = Outcome("check", "ns::Cls", "method")
    if key == "ok":
        return ok
    if key in ("pid", "late"):
        return Outcome.skip("check", "ns::Cls", None, str(os.getpid()))
    if key == "segv":
        with _TRACER.calling("check segv", timed=False), _TRACER.calling("ns::Cls.boom(3)"):
            os.kill(os.getpid(), signal.SIGSEGV)
    if key == "abort":
        with _TRACER.calling("ns::Cls.assert_invariant()"):
            os.abort()
    if key == "exit":
        os._exit(3)
    if key == "spin":
        with _TRACER.calling("compiling", timed=False), _TRACER.calling("ns::Cls.wait_for(2)"):
            time.sleep(60)
    if key == "slow-untimed":
        with _TRACER.calling("compiling", timed=False):
            time.sleep(1.0)
        return ok
    if key == "forever-untimed":
        with _TRACER.calling("compiling", timed=False):
            time.sleep(60)
    if key == "prepare":
        try:
            with _TRACER.calling("ns::Cls.derive(2)"):
                os.kill(os.getpid(), signal.SIGSEGV)
        except CallAbandoned as exc:
            return Outcome.skip("prepare", "ns::Cls", None, str(exc))
    if key == "warm":
        return Outcome.skip("check", "ns::Cls", None, ",".join(_WARMED))
    if key == "unpicklable":
        return Outcome.of_failures("check", "ns::Cls", None, [Failure("unpicklable", details=(lambda: 1,))])
    if key in ("fake-systemexit", "fake-interrupt"):
        return _run_fake_call("push" if key == "fake-systemexit" else "pop")
    if key == "fake-exit":
        with _TRACER.calling("check agreement[push] of ns::Cls", timed=False), _TRACER.calling("fake_obj.push(1) on the fake",
                                                                                 side="fake"):
            os._exit(3)
    if key == "oom":
        with _TRACER.calling("ns::Cls.grow(2)", side="C++"):
            os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer would
    if key == "leak":
        with _TRACER.calling("check leak of ns::Cls", timed=False), _TRACER.calling("ns::Cls.grow(200)", side="C++"):
            _KEPT.append(_allocate(200))
            time.sleep(10)
    if key == "leak-fast":  # over the limit between two polls, and done before the next one
        _KEPT.append(_allocate(200))
        return ok
    if key == "keep":  # grows the worker's memory by 150 MiB, under the limit
        _KEPT.append(_allocate(150))
        return Outcome.skip("check", "ns::Cls", None, str(os.getpid()))
    raise AssertionError(key)


@pytest.fixture
def supervisor():
    made = []
    abandoned = {}  # the supervisors' own record of abandoned calls

    def make(timeout=5.0, before_fork=None, memory_limit=0):
        sup = Supervisor(_item, timeout, before_fork, tracer=_TRACER, memory_limit=memory_limit, abandoned=abandoned,
                         unsendable=unsendable_outcome)
        for key in ("ok", "pid", "segv", "abort", "exit", "spin", "slow-untimed", "forever-untimed", "prepare",
                    "unpicklable", "warm", "fake-systemexit", "fake-interrupt", "fake-exit", "oom", "leak",
                    "leak-fast", "keep"):
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


@pytest.mark.process
def test_outcomes_come_back_from_one_persistent_worker(supervisor):
    sup = supervisor()
    assert sup.run("ok") == Outcome("check", "ns::Cls", "method")
    first, second = sup.run("pid"), sup.run("pid")
    assert first.reason == second.reason != str(os.getpid())
    assert sup.started == 1


@pytest.mark.process
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


@pytest.mark.process
def test_abort_and_exit_are_reported_too(supervisor):
    sup = supervisor()
    lost = sup.run("abort")
    assert lost.cause == "killed by SIGABRT (Aborted)" and lost.call == "ns::Cls.assert_invariant()"
    lost = sup.run("exit")
    assert (lost.kind, lost.cause, lost.call) == ("crash", "the worker process exited with status 3", None)


@pytest.mark.process
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


@pytest.mark.process
def test_work_outside_calls_gets_the_item_limit_not_the_call_limit(supervisor):
    sup = supervisor(timeout=0.4)  # item limit: 4 s
    assert isinstance(sup.run("slow-untimed"), Outcome)  # 1 s, longer than one call may take
    lost = sup.run("forever-untimed")
    assert lost.kind == "hang" and lost.call is None
    assert "reached its limit of 4 s" in lost.cause


@pytest.mark.process
def test_preparation_abandons_the_call_that_crashed_it(supervisor):
    sup = supervisor()
    _, [lost] = sup.run_abandoning("prepare")
    assert lost.call == "ns::Cls.derive(2)"
    assert sup.abandoned == {"ns::Cls.derive(2)": "crashed a worker process (killed by SIGSEGV (Segmentation "
                                                  "fault))"}
    again = sup.run("prepare")  # a new worker inherits the abandoned call and does not make it
    assert again.reason.startswith("ns::Cls.derive(2) crashed a worker process") and "not called again" in \
        again.reason
    # Items do not abandon calls: each one that makes a crashing call fails on its own.
    assert isinstance(sup.run("segv"), WorkerLost) and isinstance(sup.run("segv"), WorkerLost)
    assert "ns::Cls.boom(3)" not in sup.abandoned


@pytest.mark.process
def test_keys_registered_after_the_fork_get_a_new_worker(supervisor):
    sup = supervisor()
    first = sup.run("pid").reason
    assert sup.run("pid").reason == first
    sup.register("late")  # e.g. an item collected after the worker was forked: that worker cannot know it
    assert sup.run("late").reason != first and sup.started == 2


@pytest.mark.process
def test_before_fork_runs_once_in_the_supervisor_and_workers_inherit_it(supervisor):
    _WARMED.clear()
    sup = supervisor(before_fork=lambda: _WARMED.append(f"imported in {os.getpid()}"))
    assert sup.run("warm").reason == f"imported in {os.getpid()}"
    assert isinstance(sup.run("segv"), WorkerLost)
    assert sup.run("warm").reason == f"imported in {os.getpid()}"  # the new worker: not run again
    assert _WARMED == [f"imported in {os.getpid()}"]
    _WARMED.clear()


@pytest.mark.process
def test_an_outcome_that_cannot_be_sent_back_becomes_a_failure(supervisor):
    outcome = supervisor().run("unpicklable")
    assert "could not be sent back from the worker process" in outcome.failures[0].summary


# ----- faults of a fake, memory, one worker per class -----------------------------------------------------------

def _no_crash_words(failure: Failure) -> None:
    text = failure.render("ns::Cls", "push")
    assert failure.cpp is None and "C++:" not in text, text
    assert "crashed" not in text and "gdb" not in text, text


@pytest.mark.process
@pytest.mark.parametrize("key, what", [("fake-systemexit", "SystemExit: 3"), ("fake-interrupt", "KeyboardInterrupt")])
def test_a_fake_raising_a_base_exception_fails_the_item_with_its_traceback(supervisor, key, what):
    sup = supervisor()
    pid = int(sup.run("pid").reason)
    outcome = sup.run(key)
    assert isinstance(outcome, Outcome) and outcome.status.value == "failed"
    [failure] = outcome.failures
    method = "push" if key == "fake-systemexit" else "pop"
    assert failure.summary.startswith(f"the fake raised {what} in fake_obj.{method}() on the fake: "), failure.summary
    assert failure.fake == f"raised {what} (not an Exception)"
    assert failure.details[0] == "traceback (most recent call last):"
    assert any(f"in {method}" in ln for ln in failure.details), failure.details  # the fake's own frame
    assert failure.details[-1].startswith(what.split(":")[0])
    _no_crash_words(failure)
    assert int(sup.run("pid").reason) == pid and sup.started == 1  # the worker lived on


def test_without_isolation_a_fake_keyboard_interrupt_fails_the_item_but_ctrl_c_stops_the_run():
    assert faults.SIGINT.seen is None  # nobody watches SIGINT: a KeyboardInterrupt counts as real
    with pytest.raises(KeyboardInterrupt):
        _run_fake_call("pop")
    restore = faults.watch_interrupts()
    try:
        assert faults.SIGINT.seen is False and signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        outcome = _run_fake_call("pop")  # raised by the fake: this item's failure, the run goes on
        assert outcome.failures[0].summary.startswith("the fake raised KeyboardInterrupt in fake_obj.pop()")
        assert _run_fake_call("push").failures[0].fake == "raised SystemExit: 3 (not an Exception)"
        with pytest.raises(KeyboardInterrupt):  # a real Ctrl-C while the fake runs stops the run
            _run_fake_call("ctrl_c")
        assert faults.SIGINT.seen is True
    finally:
        restore()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler and faults.SIGINT.seen is None


@pytest.mark.process
def test_a_fake_that_exits_the_worker_is_named_as_the_fake(supervisor):
    lost = supervisor().run("fake-exit")
    assert isinstance(lost, WorkerLost) and (lost.kind, lost.status, lost.side) == ("crash", 3, "fake")
    failure = lost.failure(timeout=5.0)
    assert failure.summary == ("the fake exited the worker process (status 3) while in fake_obj.push(1) on the fake: "
                               "a fake class must not exit the process")
    assert failure.fake.startswith("exited the process with status 3")
    _no_crash_words(failure)
    # Without a fake-side breadcrumb an exit is still the worker's crash (C++ code may call exit()).
    plain = supervisor().run("exit").failure(timeout=5.0)
    assert plain.summary.startswith("the process running this check crashed: the worker process exited with status 3")


@pytest.mark.process
def test_a_worker_killed_by_sigkill_is_named_as_probably_out_of_memory(supervisor):
    lost = supervisor().run("oom")
    assert lost.cause == ("killed by SIGKILL (Killed), probably for running out of memory (the kernel's OOM "
                          "killer; see dmesg)")
    assert lost.failure(timeout=5.0).summary.endswith("while in ns::Cls.grow(2)")


@pytest.mark.process
def test_a_worker_over_the_memory_limit_is_killed_and_the_item_fails(supervisor, monkeypatch):
    sup = supervisor(memory_limit=100 * MiB)
    start = time.monotonic()
    lost = sup.run("leak")
    assert time.monotonic() - start < 5  # killed, not left to sleep
    assert isinstance(lost, WorkerLost) and lost.kind == "memory" and lost.used > 100 * MiB
    failure = lost.failure(timeout=5.0)
    assert failure.summary == ("the process running this check exceeded the memory limit of 100 MiB in "
                               "ns::Cls.grow(200)")
    assert re.fullmatch(r"\d+ MiB of its own resident memory when it was killed \(the run went on in a fresh "
                        r"worker process\)", failure.cpp), failure.cpp
    assert "--torchbind-memory-limit=100 MiB" in failure.render("ns::Cls", "grow")
    assert sup.run("ok").check == "check" and sup.started == 2
    # A leak in a short item: caught by a poll, or when the item returns if it beat the polls.
    late = sup.run("leak-fast")
    assert isinstance(late, WorkerLost) and late.kind == "memory"
    assert late.failure(timeout=5.0).summary.endswith((
        "in the check itself (no call into the class was in progress)",
        "in the check (the worker's memory was measured when the check returned)"))
    monkeypatch.setattr(supervisor_module, "_POLL_S", 60.0)  # no poll before the item returns
    late = sup.run("leak-fast")
    assert late.failure(timeout=5.0).summary.endswith(
        "in the check (the worker's memory was measured when the check returned)")
    # 0: no limit.
    assert isinstance(supervisor(memory_limit=0).run("leak-fast"), Outcome)


@pytest.mark.process
def test_a_worker_that_grew_a_lot_and_one_of_another_class_are_replaced(supervisor):
    sup = supervisor(memory_limit=400 * MiB)  # replaced after an item that grows it by more than 100 MiB
    first = sup.run("pid", group="ns::A").reason
    assert sup.run("pid", group="ns::A").reason == first  # the same class: the same worker
    kept = sup.run("keep", group="ns::A").reason
    assert kept == first and sup.replaced == 1  # it grew by 150 MiB: replaced after the item
    second = sup.run("pid", group="ns::A").reason
    assert second != first and sup.started == 2
    third = sup.run("pid", group="ns::B").reason  # another class: a fresh worker
    assert third != second and sup.started == 3
    assert sup.run("pid", group="ns::B").reason == third


@pytest.mark.parametrize("text, size", [("0", 0), ("1000", 1000), ("12GiB", 12 << 30), ("512MiB", 512 << 20),
                                        ("1.5G", 3 << 29), ("2 kb", 2000), ("300mib", 300 << 20)])
def test_memory_sizes(text, size):
    assert parse_size(text) == size
    assert process.format_size(12 << 30) == "12 GiB" and process.format_size(1536 << 20) == "1.5 GiB"


@pytest.mark.parametrize("text", ["", "lots", "-1", "12 parsecs", "1e9"])
def test_bad_memory_sizes(text):
    with pytest.raises(ValueError):
        parse_size(text)


# ----- the plugin on the samples_unsafe classes ------------------------------------------------------------------

UNSAFE = ["-p", "no:cacheprovider", "--torchbind-load=sample_classes", "--torchbind-load=sample_classes.fakes_unsafe",
          "--torchbind-class=samples_unsafe::CrashyStack", "--torchbind-class=samples_unsafe::OverflowPickle",
          "--torchbind-timeout=5", "-rf"]  # (samples_unsafe::Leaky has tests of its own)
# The timeout is also a matrix cell's whole budget (compiling included): 2 s let a legitimate eager compile under
# pytest-xdist on 2 cores be taken for a hang; 5 s still stops wait_for's spin quickly.


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


@pytest.mark.process
def test_serial_and_xdist_runs_survive_crashes_and_hangs_with_the_same_findings(pytester, unsafe_samples):
    args = [*UNSAFE, "--torchbind-checks=examples,coverage,agreement,deepcopy,matrix", "--torchbind-backends=eager",
            "-k", "not sequence and not dynamic"]
    # The two runs at once: each spends much of its time waiting out wait_for's hangs.
    serial, parallel = pytester.runpytest_subprocesses([*args, "--torchbind-report=serial.json"],
                                                       [*args, "--torchbind-report=parallel.json", "-n", "2"])
    out = serial.stdout.str()
    assert serial.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    # The crash, named with class, method and signal; the rest of the run went on.
    assert ("samples_unsafe::CrashyStack.pop: the process running this check crashed: killed by SIGSEGV "
            "(Segmentation fault) while in samples_unsafe::CrashyStack.pop()") in out
    # The hang, stopped after --torchbind-timeout.
    assert ("samples_unsafe::CrashyStack.wait_for: this check hung: samples_unsafe::CrashyStack.wait_for(") in out
    assert "did not return within 5 s (--torchbind-timeout)" in out
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
        "torchbind[samples_unsafe.OverflowPickle]::matrix[computed-eager]",
        "torchbind[samples_unsafe.OverflowPickle]::matrix[mutated-eager]",
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
    # A matrix cell's limit is --torchbind-timeout as a whole, the same 5 s as the call's own: the item's runs out
    # first (the call starts a few ms after the item), and it is the one named whenever the supervisor's 50 ms poll
    # sees both over (it once named either, and the serial and xdist reports below differed by it).
    wait = cells[("samples_unsafe::CrashyStack", "wait_for")]["reason"]
    assert re.search(r"^this check hung: obj\.wait_for\(2\) .*was still running when the item reached its limit of "
                     r"5 s \(1 x --torchbind-timeout\)", wait), wait

    assert parallel.ret == pytest.ExitCode.TESTS_FAILED
    assert set(_failed(parallel)) == failed
    counts = serial.parseoutcomes()
    counts.pop("deselected")  # xdist does not count deselected items in its summary line
    assert parallel.parseoutcomes() == counts
    assert undated_report(pytester.path / "parallel.json") == undated_report(pytester.path / "serial.json")


@pytest.mark.process
def test_without_isolation_an_xdist_worker_lost_to_a_crash_loses_only_its_item(pytester, unsafe_samples):
    # OverflowPickle crashes wherever torch deep-copies it (deepcopy, fakification in agreement and the matrix);
    # CrashyStack could not even build its examples without a timeout (wait_for spins), so it is left out.
    result = pytester.runpytest_subprocess(
        *UNSAFE[:4], "--torchbind-class=samples_unsafe::OverflowPickle", "-rf", "--torchbind-isolation=none",
        "-n", "2", "--torchbind-checks=examples,coverage,signature,deepcopy,matrix", "--torchbind-backends=eager",
        "-k", "not size and not sequence and not attr and not dynamic and not computed and not mutated and not identity",
        "--torchbind-report=m.json")
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


@pytest.mark.process
def test_timeout_and_isolation_options_are_checked(pytester, unsafe_samples):
    for bad, message in (("--torchbind-timeout=soon", "expected a number of seconds, got 'soon'"),
                         ("--torchbind-timeout=-1", "must be 0 (no limit) or positive")):
        result = pytester.runpytest_subprocess(*UNSAFE[:4], bad, "--collect-only")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert message in result.stderr.str()
    result = pytester.runpytest_subprocess(*UNSAFE[:4], "--torchbind-isolation=thread", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "invalid choice: 'thread'" in result.stderr.str()


@pytest.mark.process
def test_a_leaking_class_fails_for_the_memory_limit_and_no_other_class_pays_for_it(pytester, unsafe_samples):
    # Leaky's agreement[grow] leaks 768 MiB in C++ (grow(2), grow(1), grow(3) of 128 MiB blocks), at 1 MiB/ms.
    result = pytester.runpytest_subprocess(
        *UNSAFE[:4], "--torchbind-class=samples_unsafe::Leaky", "--torchbind-class=samples::Counter",
        "--torchbind-checks=examples,agreement", "--torchbind-memory-limit=100MiB", "-rf")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert set(_failed(result)) == {"torchbind[samples_unsafe.Leaky]::agreement[grow]"}, out[-3000:]
    assert ("samples_unsafe::Leaky.grow: the process running this check exceeded the memory limit of 100 MiB in "
            "samples_unsafe::Leaky.grow(2)") in out
    assert "MiB of its own resident memory when it was killed (the run went on in a fresh worker process)" in out
    assert result.parseoutcomes()["passed"] == 7  # Leaky's examples and agreement[held]; Counter's five items
    result = pytester.runpytest_subprocess(*UNSAFE[:4], "--torchbind-memory-limit=lots", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--torchbind-memory-limit: expected a size such as 12GiB, 512MiB or a number of bytes (0: no limit), "
            "got 'lots'") in result.stderr.str()


FAULTY_FAKES = """
import os

from sample_classes.fakes import FakeCounter, FakeTensorQueue, register_fake_classes


class StoppingCounter(FakeCounter):
    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def increment(self, step):
        raise SystemExit(3)

    def value(self):
        raise KeyboardInterrupt

    def reset(self):
        os._exit(3)


class StoppingQueue(FakeTensorQueue):
    @classmethod
    def __obj_unflatten__(cls, flattened):
        raise GeneratorExit("no fake today")


register_fake_classes({"samples::Counter": StoppingCounter, "samples::TensorQueue": StoppingQueue}, force=True)
"""


def _fault_messages(result) -> dict[str, str]:
    """The headline of each failure in the FAILURES section, by item (``ns::Cls.target: ...`` lines)."""
    return {m[1]: m[2] for m in re.finditer(r"^(samples::\w+(?:\.\w+)?): (.*)$", result.stdout.str(), re.M)}


@pytest.mark.process
def test_fakes_that_raise_system_exit_or_exit_the_process_fail_as_the_fake(pytester, unsafe_samples):
    pytester.makepyfile(faulty=FAULTY_FAKES)
    common = ["-p", "no:cacheprovider", "--torchbind-load=sample_classes", "--torchbind-load=faulty.py",
              "--torchbind-class=samples::Counter", "-rf"]
    result = pytester.runpytest_subprocess(*common, "--torchbind-class=samples::TensorQueue",
                                           "--torchbind-checks=agreement,differential", "--torchbind-examples=5",
                                           "-k", "Counter or agreement[size]")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    messages = _fault_messages(result)
    assert messages["samples::Counter.increment"].startswith(
        "the fake raised SystemExit: 3 in fake_obj.increment(2) on the fake: not an Exception"), messages
    assert messages["samples::Counter.value"].startswith(
        "the fake raised KeyboardInterrupt in fake_obj.value() on the fake"), messages
    assert messages["samples::Counter.reset"] == (
        "the fake exited the worker process (status 3) while in fake_obj.reset() on the fake: a fake class must not "
        "exit the process")
    # the differential test: its plan calls each observer on the example's fake first (value() raises)
    assert messages["samples::Counter"].startswith("the fake raised KeyboardInterrupt in fake_obj.value() on the "
                                                   "fake"), messages
    assert messages["samples::TensorQueue.size"].startswith(
        "the fake raised GeneratorExit: no fake today in fakifying the example object TensorQueue("), messages
    assert len(_failed(result)) == 5 and "fake:  raised SystemExit: 3 (not an Exception)" in out
    assert re.search(r'faulty\.py", line \d+, in increment\n  -     raise SystemExit\(3\)', out)  # the fake's frame
    assert "C++:" not in out and "crashed" not in out and "gdb" not in out
    # Without isolation a KeyboardInterrupt raised by a fake fails its item and the run goes on.
    result = pytester.runpytest_subprocess(*common, "--torchbind-checks=agreement", "--torchbind-isolation=none",
                                           "-k", "not reset")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    assert set(_failed(result)) == {"torchbind[samples.Counter]::agreement[increment]",
                                    "torchbind[samples.Counter]::agreement[value]"}
    assert _fault_messages(result)["samples::Counter.value"].startswith("the fake raised KeyboardInterrupt")
    assert result.parseoutcomes()["passed"] == 1


@pytest.mark.process
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
