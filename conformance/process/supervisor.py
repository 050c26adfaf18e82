"""The supervisor: runs work items in a forked worker process, restarting it after a crash, a hang or too much
memory (see :mod:`conformance.process`)."""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, MutableMapping
from multiprocessing.connection import Connection, Pipe
from typing import Any

from ..core.breadcrumbs import Tracer
from ..core.faults import ignore_interrupts
from .lost import ITEM_LIMIT_FACTOR, TIMEOUT_OPTION, WorkerLost, _current_thread_stack, abandon_cause, describe_exit
from .memory import format_size, worker_memory
from .page import CrumbPage, PageSink
from .stacks import STACK_SIGNAL, Frame, hang_site, parse_dump
from .strays import from_worker, leave_page, wait_for_copies, well_formed

#: The worker ends with this, whatever code running in the pytest process or a worker did to ``os._exit``.
_exit = os._exit

__all__ = ["Supervisor", "isolation_available", "DEFAULT_TIMEOUT", "ITEM_LIMIT_FACTOR", "GROWTH_LIMIT", "ATTEMPTS",
           "HANGS"]

#: Default of ``--torchbind-timeout``: seconds one call into the class's code may take.
DEFAULT_TIMEOUT = 60.0

_POLL_S = 0.05
#: A worker is replaced after an item that grew its own resident memory by more than this (or by a quarter of the
#: memory limit, when that is smaller).
GROWTH_LIMIT = 1 << 30
#: The abandon policy's default limits (:meth:`Supervisor.run_abandoning`): runs of one piece of work, each
#: abandoning the call that took the previous worker down, and how many of them may end in a hang (each costs the
#: per-call timeout; ``None``: no limit but the runs). The plugin's preparation of a class uses them; the scaffold,
#: which observes many more calls, gives its own (conformance.scaffold.worker).
ATTEMPTS = 8
HANGS: int | None = None


def isolation_available() -> bool:
    """Process isolation needs ``os.fork`` (Linux; macOS forks badly once torch is loaded, so it is off there)."""
    return hasattr(os, "fork") and sys.platform.startswith("linux")


class Supervisor:
    """Runs work items in a forked worker process, restarting it after a crash or a hang.

    ``run_item(key)`` is called in the worker with a key handed to :meth:`run` and returns a picklable result
    (the plugin's: :func:`conformance.runner.run_target` over the collected items); ``unsendable(result, exc)``
    replaces a result that cannot be sent back (default: the worker fails, reported as a crash). ``tracer``: the
    :class:`~conformance.core.breadcrumbs.Tracer` the worker's work reports its calls to; the worker attaches a
    :class:`~conformance.process.page.PageSink` to it. ``abandoned``: call label -> what it did, shared by every
    supervisor handed the same mapping (default: this supervisor's own). ``timeout``: seconds one timed call may
    take (``0`` disables both limits); one item may take ``ITEM_LIMIT_FACTOR`` times that; ``timeout_option``
    names that limit in messages; ``describe_abandoned(lost)``: what an abandoned call did, as later refusals of it
    say (default :func:`~conformance.process.lost.abandon_cause`); ``item_limit``: seconds one item may take
    (default: ``ITEM_LIMIT_FACTOR`` times ``timeout``).
    ``before_fork`` runs once, here, before the first worker is forked: imports every worker would otherwise
    make on its own (slowly, inside a timed call, and again after each crash).
    Keys registered with :meth:`register` after the current worker was forked make the next :meth:`run` fork a
    new one, since the old worker cannot know them.
    ``memory_limit``: bytes of its own resident memory a worker may hold (``0``: no limit; see the module
    docstring); a worker is also replaced after an item that grew it by more than :attr:`growth_limit`, and before
    an item of another ``group`` (the plugin's groups are classes) than the items it ran.
    """

    def __init__(self, run_item: Callable[[str], Any], timeout: float = DEFAULT_TIMEOUT,
                 before_fork: Callable[[], None] | None = None, tracer: Tracer | None = None,
                 memory_limit: int = 0, abandoned: MutableMapping[str, str] | None = None,
                 timeout_option: str = TIMEOUT_OPTION, unsendable: Callable[[Any, Exception], Any] | None = None,
                 describe_abandoned: Callable[[WorkerLost], str] = abandon_cause, item_limit: float | None = None):
        self.run_item = run_item
        self.memory_limit = memory_limit
        self.growth_limit = min(GROWTH_LIMIT, memory_limit // 4) if memory_limit else GROWTH_LIMIT
        self._group: str | None = None  # the group of the items the current worker ran
        self._base = 0  # the pytest process's own memory when the worker was forked (the worker shares it)
        self.tracer = tracer
        self.abandoned: MutableMapping[str, str] = {} if abandoned is None else abandoned
        self.timeout_option, self.describe_abandoned = timeout_option, describe_abandoned
        self.unsendable = unsendable
        self.before_fork = before_fork
        self.timeout = timeout
        self.item_limit = timeout * ITEM_LIMIT_FACTOR if item_limit is None else item_limit
        self.keys: set[str] = set()
        self._known: set[str] = set()
        self._pid: int | None = None
        self._conn: Connection | None = None
        self._crumbs: CrumbPage | None = None
        self._stackfile = None
        self._thread: int | None = None
        self._rid = 0  # the last request's id: every reply names the request it answers and the process it comes from
        self._sent: dict[int, str] = {}  # request id -> key, for a reply to an earlier request (a stray's)
        self.started = 0  # workers forked so far
        self.replaced = 0  # workers replaced because an item grew them by more than growth_limit
        self.prepared: set[str] = set()  # preparation keys already run

    def register(self, key: str) -> None:
        self.keys.add(key)

    # ----- lifecycle ----------------------------------------------------------------------------------------
    def _start(self) -> None:
        if self.before_fork is not None:
            self.before_fork()
            self.before_fork = None
        parent, child = Pipe()
        crumbs = CrumbPage()
        stackfile = tempfile.TemporaryFile("w+")
        sys.stdout.flush()
        sys.stderr.flush()
        self._base = worker_memory() or 0
        self._thread = threading.get_ident()  # the worker's only thread keeps the forking thread's ident
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the worker; its work is measured through the supervisor
            parent.close()
            _worker_main(child, crumbs, stackfile, self.run_item, self.tracer, self.abandoned, self.unsendable)
        child.close()
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # as the worker does itself: whichever runs first, a kill can use the group
        self._pid, self._conn, self._crumbs, self._stackfile = pid, parent, crumbs, stackfile
        self._known = set(self.keys)
        self.started += 1

    def close(self) -> None:
        """Stop the worker (it exits on end of input; killed if it does not within a second)."""
        if self._pid is None:
            return
        self._conn.close()
        deadline = time.monotonic() + 1.0
        try:
            while not os.waitpid(self._pid, os.WNOHANG)[0]:
                if time.monotonic() >= deadline:
                    self._kill()
                    break
                time.sleep(0.01)
        except ChildProcessError:  # already reaped
            pass
        self._forget()

    def _kill(self) -> None:
        """Kill the worker and reap it; :meth:`_forget` then takes the rest of its process group."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self._pid, 0)

    def _forget(self) -> None:
        """Drop the worker; processes it started and left behind (compiler pools) go with its process group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self._conn.close()
        with contextlib.suppress(Exception):
            self._stackfile.close()
        self._pid = self._conn = self._crumbs = self._stackfile = None
        self._group = None

    def _memory(self) -> int | None:
        """The worker's own resident memory: what it holds beyond the pytest process's memory at the fork."""
        used = worker_memory(self._pid)
        return None if used is None else max(0, used - self._base)

    # ----- running ------------------------------------------------------------------------------------------
    def run(self, key: str, group: str | None = None, factor: float | None = None) -> Any:
        """Run the item ``key`` in the worker: what ``run_item`` returned, or :class:`WorkerLost` when the worker
        crashed, was killed for hanging or exceeded the memory limit (the next call starts a new worker).
        ``group`` (the plugin passes the item's class): a worker that ran items of another group is replaced
        first. ``factor``: the item may take this many times ``timeout`` (default: :attr:`item_limit`; the
        plugin gives a coverage-matrix cell ``1``)."""
        if factor is None:
            item_limit = self.item_limit
            named = (f"{ITEM_LIMIT_FACTOR} x {self.timeout_option}"
                     if item_limit == self.timeout * ITEM_LIMIT_FACTOR else "the item's own limit")
            budget = None  # the default: "per item"
        else:
            item_limit, named = self.timeout * factor, f"{factor:g} x {self.timeout_option}"
            budget = (item_limit, named)
        if self._pid is not None and (key not in self._known or (
                group is not None and self._group is not None and group != self._group)):
            self.close()
        if self._pid is None:
            self._start()
        if group is not None:
            self._group = group
        conn, start = self._conn, time.monotonic()
        before = self._memory()
        self._rid += 1
        rid = self._rid
        self._sent[rid] = key
        try:
            conn.send((rid, key))
        except OSError:
            return self._lost_by_exit(start)
        while True:
            if conn.poll(_POLL_S):
                try:
                    reply = conn.recv()
                except (EOFError, OSError):
                    return self._lost_by_exit(start)
                except Exception as exc:  # noqa: BLE001 - bytes no worker wrote whole: two writers interleaved
                    return self._lost_by_stray(start, rid, None, f"a message that could not be read ({exc!r})")
                if from_worker(reply, rid, self._pid):
                    return self._after_item(reply[2], start, before)
                return self._lost_by_stray(start, rid, reply)
            pid, status = os.waitpid(self._pid, os.WNOHANG)
            if pid:  # died while a process it started still holds the pipe open
                return self._lost_by_exit(start, reaped=status)
            if self.memory_limit > 0:
                used = self._memory()
                if used is not None and used > self.memory_limit:
                    return self._lost_by_memory(start, self._crumbs.read()[1], used)
            if self.timeout > 0:
                now = time.monotonic()
                since, doing = self._crumbs.read()
                call_over, item_over = bool(since) and now - since > self.timeout, now - start > item_limit
                # Both over at this poll: the limit that ran out first is the one named, so the message does not
                # depend on when the 50 ms poll happened (a cell's limit of 1 x the timeout runs out a few ms
                # before the call's own, which starts after the item).
                if item_over and (not call_over or start + item_limit <= since + self.timeout):
                    return self._lost_by_hang(start, doing, f"was still running when the item reached its limit of "
                                                            f"{item_limit:g} s ({named})", budget)
                if call_over:
                    return self._lost_by_hang(start, doing, f"did not return within {self.timeout:g} s "
                                                            f"({self.timeout_option})", budget)

    def run_abandoning(self, key: str, group: str | None = None, attempts: int = ATTEMPTS,
                       hangs: int | None = HANGS) -> tuple[Any, list[WorkerLost]]:
        """The abandon policy, the one place it is written: run ``key`` (in ``group``, as for :meth:`run`) until it
        completes without losing the worker; each time the worker is lost inside a timed call (a crash, a hang, the
        memory limit), that call is *abandoned* (kept in :attr:`abandoned`; the next worker's tracer refuses it with
        :class:`~conformance.core.breadcrumbs.CallAbandoned`) and the work runs again in a fresh worker. It stops at the
        first loss outside any call, or on a call abandoned already, after ``attempts`` runs, or at the
        ``hangs + 1``-th hang (``None``: no limit on hangs). Returns ``(what the last run returned -- a WorkerLost when it was lost --, every
        WorkerLost on the way)``."""
        lost: list[WorkerLost] = []
        result: Any = None
        for _ in range(attempts):
            result = self.run(key, group)
            if not isinstance(result, WorkerLost):
                break
            lost.append(result)
            if (result.call is None or result.kind == "stray" or result.call in self.abandoned
                    or (hangs is not None and sum(x.kind == "hang" for x in lost) > hangs)):
                break  # nothing to abandon: what runs next meets the same end
            self.abandoned[result.call] = self.describe_abandoned(result)
        return result, lost

    def prepare_once(self, key: str, group: str | None = None) -> list[WorkerLost]:
        """:meth:`run_abandoning` ``key`` (in ``group``) unless it already ran; the workers it lost."""
        if key in self.prepared:
            return []
        self.prepared.add(key)
        return self.run_abandoning(key, group)[1]

    def _after_item(self, outcome: Any, start: float, before: int | None) -> Any:
        """The item's outcome, unless the worker ended it above the memory limit (a leak faster than the polling:
        the item fails as if it had been killed); the worker is replaced after an item that grew it by more than
        :attr:`growth_limit`."""
        after = self._memory()
        if after is None:
            return outcome
        if self.memory_limit > 0 and after > self.memory_limit:
            crumb = ("the check (the worker's memory was measured when the check returned)", False, None)
            return self._lost_by_memory(start, [crumb], after)
        if before is not None and after - before > self.growth_limit:
            self.close()
            self.replaced += 1
        return outcome

    def _lost_by_memory(self, start: float, doing: list[tuple[str, bool, str | None]], used: int) -> WorkerLost:
        self._kill()
        lost = WorkerLost.from_crumbs("memory", f"exceeded the memory limit of {format_size(self.memory_limit)}",
                                      doing, [], time.monotonic() - start, used=used, limit=self.memory_limit)
        self._forget()
        return lost

    def _lost_by_hang(self, start: float, doing: list[tuple[str, bool, str | None]], cause: str,
                      budget: tuple[float, str] | None) -> WorkerLost:
        seconds = time.monotonic() - start
        site = hang_site(self._sample_stacks())  # before the kill: where the worker is, not only what it was doing
        self._kill()
        lost = WorkerLost.from_crumbs("hang", cause, doing, [], seconds, site=site, budget=budget)
        self._forget()
        return lost

    def _sample_stacks(self, count: int = 3, gap: float = 0.2, wait: float = 2.0) -> list[list[Frame]]:
        """Ask the hung worker for its Python stack ``count`` times, ``gap`` seconds apart (its faulthandler
        dumps it on :data:`~conformance.process.stacks.STACK_SIGNAL`, even from inside C++), waiting at most
        ``wait`` seconds for each dump to begin (a worker starved of CPU by a loaded machine answers late; one that
        does not answer within it is asked no more); the main thread's stacks, oldest first (fewer when the worker
        did not answer). Reads with ``pread``: the worker shares the file's offset."""
        fd = self._stackfile.fileno()
        for _ in range(count):
            size = os.fstat(fd).st_size
            try:
                os.kill(self._pid, STACK_SIGNAL)
            except ProcessLookupError:
                break
            deadline, last = time.monotonic() + wait, size
            while time.monotonic() < deadline:  # until the dump has begun and stopped growing
                time.sleep(0.02)
                now = os.fstat(fd).st_size
                if now > size and now == last:
                    break
                last = now
            if last == size:
                break  # no answer: the samples already taken are what there is
            time.sleep(gap)
        text = os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")
        return parse_dump(text, self._thread)

    def _lost_by_stray(self, start: float, rid: int, reply: Any, garbled: str | None = None) -> WorkerLost:
        """The item fails: a reply came from another process than the worker, or for another request than the
        one sent -- a process forked inside the worker (``os.fork()`` in a fake or in the class's code) whose child
        went on running the worker's code and sent the result *it* reached. Its result is not used; the worker
        (and its process group, the stray with it) is stopped, and the next item gets a fresh one."""
        worker = self._pid
        _, doing = self._crumbs.read()
        stray = reply[1] if well_formed(reply) else None
        asked = reply[0] if well_formed(reply) else None
        self._kill()
        self._forget()
        if garbled is not None:
            what = garbled
        elif stray is None:
            what = f"a message that is no reply of a worker ({type(reply).__name__})"
        elif stray != worker:
            what = f"a result from process {stray}, a child process that outlived its parent"
        else:
            what = "a second result from the worker process"
        if asked is not None and asked != rid:
            earlier = self._sent.get(asked)
            what += (f" (its result for an earlier item, {earlier}: forked while the worker ran that item)"
                     if earlier is not None else f" (for request {asked}, which the supervisor never sent)")
        cause = (f"{what} came back in place of the result of the worker process (pid {worker}); it was not used, "
                 "and the worker was stopped")
        return WorkerLost.from_crumbs("stray", cause, doing, [], time.monotonic() - start, stray=stray)

    def _lost_by_exit(self, start: float, reaped: int | None = None) -> WorkerLost:
        status = reaped
        if status is None:
            try:
                status = os.waitpid(self._pid, 0)[1]
            except ChildProcessError:
                status = 0
        _, doing = self._crumbs.read()
        stack: list[str] = []
        cause, sig, exited = describe_exit(status)
        if sig is not None:
            if sig == signal.SIGKILL:  # not by the supervisor: it kills only in _lost_by_hang / _lost_by_memory
                cause += ", probably for running out of memory (the kernel's OOM killer; see dmesg)"
            self._stackfile.seek(0)
            stack = _current_thread_stack(self._stackfile.read())
        lost = WorkerLost.from_crumbs("crash", cause, doing, stack, time.monotonic() - start, status=exited)
        self._forget()
        return lost


def _worker_main(conn: Connection, crumbs: CrumbPage, stackfile, run_item: Callable[[str], Any],
                 tracer: Tracer | None, abandoned: MutableMapping[str, str],
                 unsendable: Callable[[Any, Exception], Any] | None) -> None:
    """The worker's loop: receive ``(request id, key)``, run the key, send ``(request id, its pid, outcome)``; exit
    at end of input (never returns).

    A process forked during an item (``os.fork()`` in a fake or in the class's code) whose child does not exit
    comes back here with the item's outcome, in a process that is not the worker: it sends that reply (its pid
    tells the supervisor it is no worker's, and the item fails naming it) and exits, never reading a request.
    The worker, when Python forked it during the item, waits for those copies of itself to end before it replies,
    so the supervisor reads a stray's reply before the worker's and the item it ran in is the one that fails."""
    status = 0
    me = os.getpid()
    forks = [0]
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)  # its own process group, so a kill also reaches processes it started (compilers)
        ignore_interrupts()  # Ctrl-C is the supervisor's to handle; a KeyboardInterrupt here comes from user code
        # Not the plugin's SIGTERM-as-Ctrl-C handler the fork inherited: SIGTERM ends a worker at once.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _die_with_parent()
        faulthandler.enable(file=stackfile, all_threads=True)
        faulthandler.register(STACK_SIGNAL, file=stackfile, all_threads=True)  # the supervisor asks on a hang
        if tracer is not None:  # for this process's whole life: the engine's calls go to the shared page
            tracer.attach(PageSink(crumbs, abandoned))
        # Python's own forks (os.fork, multiprocessing's fork start method; not subprocess' fork-and-exec) counted,
        # and a child's breadcrumbs kept out of the worker's page.
        os.register_at_fork(before=lambda: forks.__setitem__(0, forks[0] + 1),
                            after_in_child=lambda: leave_page(tracer, abandoned, me))
        while True:
            try:
                rid, key = conn.recv()
            except (EOFError, OSError):
                break
            crumbs.reset()
            forked = forks[0]
            outcome = run_item(key)
            if os.getpid() != me:  # a child of a fork during the item, back in the worker's code
                _reply(conn, rid, outcome, unsendable)
                break
            crumbs.reset()
            if forks[0] != forked:
                wait_for_copies(me, crumbs)
            sys.stdout.flush()
            sys.stderr.flush()
            _reply(conn, rid, outcome, unsendable)
    except BaseException:  # noqa: BLE001 - never let the worker fall back into pytest's own code
        import traceback

        traceback.print_exc()
        status = 70
    finally:
        _exit(status)


def _reply(conn: Connection, rid: int, outcome: Any, unsendable: Callable[[Any, Exception], Any] | None) -> None:
    try:
        conn.send((rid, os.getpid(), outcome))
    except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable value in the outcome's data
        if unsendable is None:
            raise
        conn.send((rid, os.getpid(), unsendable(outcome, exc)))


def _die_with_parent() -> None:
    """Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: a worker spinning in C++ must not outlive a killed pytest."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
