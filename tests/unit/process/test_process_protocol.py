"""The worker protocol: a result is taken only from the worker process and for the request the supervisor sent
(conformance.process.strays). A fake or a class that forks, and whose child goes on running the check instead of
exiting, must never have the child's result taken for the item's -- nor for another item's."""

from __future__ import annotations

import os
import re
import time

import pytest

from conformance import process
from conformance.process import Supervisor, WorkerLost
from conformance.core.results import Failure, Outcome
from conformance.runner import unsendable_outcome

pytestmark = [pytest.mark.skipif(not process.isolation_available(), reason="process isolation needs Linux fork"),
              pytest.mark.process]


def _verdict(reason: str) -> Outcome:
    return Outcome.skip("check", "ns::Cls", None, reason)


def _failed() -> Outcome:
    return Outcome.of_failures("check", "ns::Cls", None, [Failure("the real verdict: C++ and the fake disagree")])


def _item(key: str) -> Outcome:
    """Work items; run in the worker. ``fork-*`` stand for a fake that calls ``os.fork()`` and lets the child
    return: the child goes on running the check (and the worker's loop) with a verdict of its own."""
    if key.startswith("ok"):
        return _verdict(f"{key} from {os.getpid()}")
    if key == "fork-child-first":  # the child's (passing) result reaches the pipe first
        if os.fork() == 0:
            return Outcome("check", "ns::Cls", None)
        time.sleep(1.0)
        return _failed()
    if key == "fork-parent-first":  # the worker's own (failing) result would reach the pipe first
        if os.fork() == 0:
            time.sleep(1.0)
            return Outcome("check", "ns::Cls", None)
        return _failed()
    if key == "fork-and-exit":  # a fork done right: the child ends itself
        child = os.fork()
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
        return _verdict("forked and reaped")
    if key == "fork-and-linger":  # a child that exits on its own, but after the item's code returned
        if os.fork() == 0:
            time.sleep(0.5)
            os._exit(0)
        return _verdict("forked, not reaped")
    raise AssertionError(key)


KEYS = ("ok1", "ok2", "ok3", "fork-child-first", "fork-parent-first", "fork-and-exit", "fork-and-linger")


@pytest.fixture
def supervisor():
    sup = Supervisor(_item, 5.0, unsendable=unsendable_outcome)
    for key in KEYS:
        sup.register(key)
    yield sup
    sup.close()


def _assert_stray(lost, sup_pid: int) -> None:
    assert isinstance(lost, WorkerLost), lost  # not the child's passing Outcome
    assert lost.kind == "stray" and lost.stray not in (None, sup_pid)
    failure = lost.failure(timeout=5.0)
    assert failure.summary == (f"a child process that outlived its parent (pid {lost.stray}) sent a result for this "
                               "check: a process forked inside the worker went on running the check instead of "
                               "exiting, so the check's verdict is not known")
    text = failure.render("ns::Cls", "push")
    assert f"a result from process {lost.stray}, a child process that outlived its parent came back in place of " \
           "the result of the worker process (pid " in text
    assert "must end the child with os._exit() or exec" in text


def test_a_childs_result_arriving_first_fails_the_item_naming_the_child(supervisor):
    worker = int(supervisor.run("ok1").reason.split()[-1])
    lost = supervisor.run("fork-child-first")
    _assert_stray(lost, worker)
    # The next items get their own results, from a fresh worker.
    for key in ("ok2", "ok3"):
        assert supervisor.run(key).reason.startswith(f"{key} from ")
    assert supervisor.started == 2


def test_a_child_finishing_after_the_worker_still_fails_the_item_it_was_forked_in(supervisor):
    worker = int(supervisor.run("ok1").reason.split()[-1])
    lost = supervisor.run("fork-parent-first")
    _assert_stray(lost, worker)
    # Neither of the next items gets the child's result (nor loses its request to the child).
    results = [supervisor.run(key) for key in ("ok1", "ok2", "ok3")]
    assert [r.reason.split()[0] for r in results] == ["ok1", "ok2", "ok3"], results


def test_a_fork_whose_child_exits_is_no_stray(supervisor):
    worker = supervisor.run("ok1").reason.split()[-1]
    assert supervisor.run("fork-and-exit").reason == "forked and reaped"
    start = time.monotonic()
    assert supervisor.run("fork-and-linger").reason == "forked, not reaped"
    assert time.monotonic() - start >= 0.4  # the worker waited for its running copy to end before replying
    assert supervisor.run("ok2").reason == f"ok2 from {worker}" and supervisor.started == 1


def test_a_reply_to_another_request_or_from_another_process_is_refused(supervisor):
    from conformance.process.strays import from_worker

    assert from_worker((3, 100, "result"), 3, 100)
    assert not from_worker((2, 100, "result"), 3, 100)  # an earlier request's
    assert not from_worker((3, 101, "result"), 3, 100)  # another process's
    assert not from_worker("result", 3, 100) and not from_worker((3, 100), 3, 100)


FORKING_FAKE = """
import os

import torch

from sample_classes.fakes import FakeCounter, register_fake_classes


_FORKED = []


class ForkingCounter(FakeCounter):
    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def value(self):
        # Forks once; wrong in the process that runs the check, right in the child, which does not exit.
        if not _FORKED:
            _FORKED.append(os.fork())
        return self.count if _FORKED[0] == 0 else self.count + 1


register_fake_classes({"samples::Counter": ForkingCounter}, force=True)
"""


def test_a_fake_that_forks_never_shows_as_a_pass(pytester):
    import sample_classes  # noqa: F401 - builds (cached) and loads the library

    pytester.makepyfile(forking=FORKING_FAKE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--torchbind-load=sample_classes",
                                           "--torchbind-load=forking.py", "--torchbind-class=samples::Counter",
                                           "--torchbind-checks=agreement", "-rf")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    failed = [line for line in result.outlines if line.startswith("FAILED torchbind[")]
    assert len(failed) == 1 and "agreement[value]" in failed[0], out[-3000:]
    assert re.search(r"samples::Counter\.value: a child process that outlived its parent \(pid \d+\) sent a result "
                     r"for this check", out), out[-3000:]
    assert result.parseoutcomes()["passed"] == 3  # increment, reset, scale: their own results
