"""Crash and hang isolation: check items run in a supervised worker process.

A TorchBind class is C++ code, and C++ code can take the whole process down: a method that dereferences a null
pointer, a ``__setstate__`` that writes past the end of a container (torch deep-copies an object through
``def_pickle`` whenever it fakifies it), an ``abort()`` from a failed assertion, or a call that never returns.
The plugin therefore runs every check in a *worker*: a child process forked from the pytest process after
collection, so it inherits the loaded libraries, the registered fake classes and example factories, and the
collected items without re-importing anything. The pytest process (the *supervisor*) sends the worker one item
at a time and waits for its :class:`~conformance.results.Outcome`.

* If the worker dies (a signal such as SIGSEGV or SIGABRT, or an exit), the item fails with a message naming the
  class, the check, the signal, and what the worker was doing when it died (the *breadcrumbs* below), with the
  Python stack that :mod:`faulthandler` dumped. The next item gets a freshly forked worker; the run goes on.
* If the worker stays inside one call into the class's code (a constructor, a method, ``__obj_flatten__``,
  pickling, a custom op, an eager scenario run) for longer than ``timeout`` seconds, or inside one item for
  longer than ``item_limit`` seconds (compiling included), it is killed and the item fails as a hang.
* If the worker's own resident memory (what it allocated beyond the memory it shares with the pytest process it
  was forked from: ``RssAnon`` + ``RssShmem`` of ``/proc/<pid>/status``, less the pytest process's own at the
  fork) exceeds ``memory_limit`` bytes, it is killed and the item fails saying so. A worker killed by SIGKILL
  that the supervisor did not kill is named as probably out of memory (the kernel's OOM killer). The worker is
  replaced (a fresh fork) when the next item belongs to another class (``group``) than the items it ran, and
  after an item that grew its memory by more than ``min(GROWTH_LIMIT, memory_limit / 4)``, so one class's leak
  is never blamed on another class's item.
* A fake that exits the process (``os._exit(3)``) while a call of the fake is in progress (breadcrumbs of
  fake-side calls say ``side="fake"``) is reported as the fake exiting, not as a crash of the C++ code. (A fake
  that raises ``SystemExit`` or another ``BaseException`` does not take the worker down: see
  :mod:`conformance.faults`.)

Breadcrumbs: code that calls into the class wraps the call in :func:`calling`; the worker keeps the stack of
labels in a shared-memory page that the supervisor reads (no system call per breadcrumb, so the hundreds of
thousands of calls of a differential run stay cheap). Outside a worker :func:`calling` does nothing.

Shared preparation: every item of a class needs its example objects, and building them calls the class's methods
(e.g. two ``push`` calls to reach a non-empty state). If one of those calls crashes or hangs, every item would die
the same way. So the plugin first runs :meth:`Supervisor.prepare` per class: it builds the examples in a worker,
and each call that takes a worker down is *abandoned* (the outermost timed call in progress) and the preparation
retried; later workers inherit the abandoned calls, and :func:`calling` raises :class:`CallAbandoned` instead of
making such a call again, so the example is rejected and the ``examples`` check reports why. Only preparation
abandons calls: a crash inside an item fails that item alone, so results never depend on which items shared a
worker (a serial run and a pytest-xdist run agree).

Forking is safe here because the supervisor never runs torch work itself: collection only reads schemas. A
process that has already used torch's OpenMP thread pool must not fork a worker (GNU OpenMP hangs in the child).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import faulthandler
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe

from .crumbs import CallAbandoned, _Crumbs, calling
from .memory import format_size, worker_memory
from .results import Failure, Outcome
from .session import Session, current

__all__ = ["calling", "CallAbandoned", "Supervisor", "WorkerLost", "isolation_available", "DEFAULT_TIMEOUT",
           "ITEM_LIMIT_FACTOR", "GROWTH_LIMIT", "format_size", "worker_memory"]

#: Default of ``--torchbind-timeout``: seconds one call into the class's code may take.
DEFAULT_TIMEOUT = 60.0
#: One item (compiling and tracing included) may take this many times the per-call timeout.
ITEM_LIMIT_FACTOR = 10

_POLL_S = 0.05
#: A worker is replaced after an item that grew its own resident memory by more than this (or by a quarter of the
#: memory limit, when that is smaller).
GROWTH_LIMIT = 1 << 30


def isolation_available() -> bool:
    """Process isolation needs ``os.fork`` (Linux; macOS forks badly once torch is loaded, so it is off there)."""
    return hasattr(os, "fork") and sys.platform.startswith("linux")


# ----- supervisor ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class WorkerLost:
    """Why an item's worker was lost: ``kind`` is ``"crash"``, ``"hang"`` or ``"memory"`` (killed for exceeding
    the memory limit); ``cause`` a phrase such as ``"killed by SIGSEGV (Segmentation fault)"``; ``doing`` the
    breadcrumb labels, outermost first; ``call`` the outermost timed one (the call into the class that was in
    progress, if any); ``stack`` the Python stack faulthandler dumped (crashes by signal only); ``seconds`` how
    long the item had run; ``side`` the side (``"fake"``, ``"C++"``) of the innermost breadcrumb that has one;
    ``status`` the exit status of a worker that exited without a signal; ``used`` and ``limit`` the worker's own
    resident memory and the memory limit, in bytes (``"memory"`` only)."""

    kind: str
    cause: str
    doing: list[str]
    call: str | None
    stack: list[str]
    seconds: float
    side: str | None = None
    status: int | None = None
    used: int = 0
    limit: int = 0

    @classmethod
    def from_crumbs(cls, kind: str, cause: str, crumbs: list[tuple[str, bool, str | None]], stack: list[str],
                    seconds: float, **more) -> "WorkerLost":
        """Build one from the breadcrumbs :meth:`_Crumbs.read` returned; ``more``: the optional fields."""
        call = next((label for label, timed, _ in crumbs if timed), None)
        side = next((side for _, _, side in reversed(crumbs) if side), None)
        return cls(kind, cause, [label for label, _, _ in crumbs], call, stack, seconds, side=side, **more)

    def failure(self, timeout: float) -> Failure:
        """The item's failure, for a library author: what died, in which call, and how to look closer."""
        where = self.doing[-1] if self.doing else "the check itself (no call into the class was in progress)"
        chain = ["in progress, outermost first: " + " > ".join(self.doing)] if len(self.doing) > 1 else []
        if self.kind == "crash" and self.status is not None and self.side == "fake":
            return Failure(f"the fake exited the worker process (status {self.status}) while in {where}: a fake "
                           "class must not exit the process",
                           fake=f"exited the process with status {self.status} (the run went on in a fresh worker "
                                "process)",
                           details=(*chain, "a fake reports an error by raising an Exception; os._exit() or abort() "
                                            "in it ends the program that traces the call"))
        if self.kind == "memory":
            text = (f"{format_size(self.used)} of its own resident memory when it was killed (the run went on in a "
                    "fresh worker process)")
            details = (*chain, f"limit: --torchbind-memory-limit={format_size(self.limit)} per worker process, for "
                               "the memory it allocates beyond what it shares with the pytest process (0: no limit)")
            summary = (f"the process running this check exceeded the memory limit of {format_size(self.limit)} "
                       f"in {where}")
            if self.side == "fake":
                return Failure(summary, fake=text, details=details)
            return Failure(summary, cpp=text, details=details)
        if self.call is None and self.stack:
            # No call into the class was marked (e.g. torch was compiling): the innermost Python frame says more.
            frame = re.match(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)', self.stack[0])
            if frame:
                where += f"; innermost Python frame: {os.path.basename(frame['file'])}:{frame['line']} in " \
                         f"{frame['func']}"
        if self.kind == "crash":
            summary = f"the process running this check crashed: {self.cause} while in {where}"
            cpp = f"{self.cause} (the run went on in a fresh worker process)"
        else:
            summary = f"this check hung: {where} {self.cause}"
            cpp = f"no result after {self.seconds:.1f} s; the worker process was killed and the run went on"
        details = []
        if len(self.doing) > 1:
            details.append("in progress, outermost first: " + " > ".join(self.doing))
        if self.kind == "hang":
            details.append(f"limits: --torchbind-timeout={timeout:g} s per call into the class, "
                           f"{timeout * ITEM_LIMIT_FACTOR:g} s per item")
        if self.stack:
            details.append("Python stack at the crash (faulthandler, most recent call first):")
            details += [f"  {ln.strip()}" for ln in self.stack]
        details.append("to debug it in one process, rerun this item without isolation under gdb: "
                       "gdb -ex run --args python -m pytest --torchbind-isolation=none <your options> -k <this item>")
        return Failure(summary, cpp=cpp, details=tuple(details))


class Supervisor:
    """Runs work items in a forked worker process, restarting it after a crash or a hang.

    ``run_item(key)`` is called in the worker with a key handed to :meth:`run`; it must return an
    :class:`Outcome` (it is :func:`conformance.runner.run_target` over the collected items). ``timeout``: seconds
    one timed call may take (``0`` disables both limits); one item may take ``ITEM_LIMIT_FACTOR`` times that.
    ``before_fork`` runs once, here, before the first worker is forked: imports every worker would otherwise
    make on its own (slowly, inside a timed call, and again after each crash).
    Keys registered with :meth:`register` after the current worker was forked make the next :meth:`run` fork a
    new one, since the old worker cannot know them.
    ``memory_limit``: bytes of its own resident memory a worker may hold (``0``: no limit; see the module
    docstring); a worker is also replaced after an item that grew it by more than :attr:`growth_limit`, and before
    an item of another ``group`` (the plugin's groups are classes) than the items it ran.
    """

    def __init__(self, run_item: Callable[[str], Outcome], timeout: float = DEFAULT_TIMEOUT,
                 before_fork: Callable[[], None] | None = None, session: Session | None = None,
                 memory_limit: int = 0):
        self.run_item = run_item
        self.memory_limit = memory_limit
        self.growth_limit = min(GROWTH_LIMIT, memory_limit // 4) if memory_limit else GROWTH_LIMIT
        self._group: str | None = None  # the group of the items the current worker ran
        self._base = 0  # the pytest process's own memory when the worker was forked (the worker shares it)
        self.session = session if session is not None else current()
        self.before_fork = before_fork
        self.timeout = timeout
        self.item_limit = timeout * ITEM_LIMIT_FACTOR
        self.keys: set[str] = set()
        self._known: set[str] = set()
        self._pid: int | None = None
        self._conn: Connection | None = None
        self._crumbs: _Crumbs | None = None
        self._stackfile = None
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
        crumbs = _Crumbs()
        stackfile = tempfile.TemporaryFile("w+")
        sys.stdout.flush()
        sys.stderr.flush()
        self._base = worker_memory() or 0
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the worker; its work is measured through the supervisor
            parent.close()
            _worker_main(child, crumbs, stackfile, self.run_item, self.session)
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
    def run(self, key: str, group: str | None = None) -> Outcome | WorkerLost:
        """Run the item ``key`` in the worker: its :class:`Outcome`, or :class:`WorkerLost` when the worker
        crashed, was killed for hanging or exceeded the memory limit (the next call starts a new worker).
        ``group`` (the plugin passes the item's class): a worker that ran items of another group is replaced
        first."""
        if self._pid is not None and (key not in self._known or (
                group is not None and self._group is not None and group != self._group)):
            self.close()
        if self._pid is None:
            self._start()
        if group is not None:
            self._group = group
        conn, start = self._conn, time.monotonic()
        before = self._memory()
        try:
            conn.send(key)
        except OSError:
            return self._lost_by_exit(start)
        while True:
            if conn.poll(_POLL_S):
                try:
                    outcome = conn.recv()
                except (EOFError, OSError):
                    return self._lost_by_exit(start)
                return self._after_item(outcome, start, before)
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
                if since and now - since > self.timeout:
                    return self._lost_by_hang(start, doing, f"did not return within {self.timeout:g} s "
                                                            "(--torchbind-timeout)")
                if now - start > self.item_limit:
                    limit = f"{self.item_limit:g} s ({ITEM_LIMIT_FACTOR} x --torchbind-timeout)"
                    return self._lost_by_hang(start, doing, f"was still running when the item reached its limit of "
                                                            f"{limit}")

    def prepare(self, key: str, attempts: int = 8, group: str | None = None) -> list[WorkerLost]:
        """Run the preparation item ``key`` (e.g. building a class's examples) until it completes without losing
        the worker, abandoning each call that crashed or hung it (see the module docstring); at most
        ``attempts`` runs; ``group`` as for :meth:`run`. Returns what was lost on the way (also kept in
        :attr:`abandoned`)."""
        lost: list[WorkerLost] = []
        for _ in range(attempts):
            result = self.run(key, group)
            if not isinstance(result, WorkerLost):
                break
            lost.append(result)
            if result.call is None or result.call in self.session.abandoned:
                break  # nothing to abandon: items will meet the same end, each on its own
            self.session.abandoned[result.call] = (
                f"crashed a worker process ({result.cause})" if result.kind == "crash"
                else f"made a worker process exceed its memory limit ({format_size(result.limit)})"
                if result.kind == "memory" else f"hung a worker process (it {result.cause})")
        return lost

    def prepare_once(self, key: str, group: str | None = None) -> None:
        """:meth:`prepare` ``key`` (in ``group``) unless it already ran."""
        if key not in self.prepared:
            self.prepared.add(key)
            self.prepare(key, group=group)

    @property
    def abandoned(self) -> dict[str, str]:
        """Calls abandoned during preparation: label -> what they did (kept on the session, so every supervisor
        of a run shares them)."""
        return dict(self.session.abandoned)

    def _after_item(self, outcome: Outcome, start: float, before: int | None) -> Outcome | WorkerLost:
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

    def _lost_by_hang(self, start: float, doing: list[tuple[str, bool, str | None]], cause: str) -> WorkerLost:
        self._kill()
        lost = WorkerLost.from_crumbs("hang", cause, doing, [], time.monotonic() - start)
        self._forget()
        return lost

    def _lost_by_exit(self, start: float, reaped: int | None = None) -> WorkerLost:
        status = reaped
        if status is None:
            try:
                status = os.waitpid(self._pid, 0)[1]
            except ChildProcessError:
                status = 0
        _, doing = self._crumbs.read()
        stack: list[str] = []
        exited = None
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            cause = f"killed by {name} ({signal.strsignal(sig)})"
            if sig == signal.SIGKILL:  # not by the supervisor: it kills only in _lost_by_hang / _lost_by_memory
                cause += ", probably for running out of memory (the kernel's OOM killer; see dmesg)"
            self._stackfile.seek(0)
            stack = _current_thread_stack(self._stackfile.read())
        else:
            exited = os.waitstatus_to_exitcode(status)
            cause = f"the worker process exited with status {exited}"
        lost = WorkerLost.from_crumbs("crash", cause, doing, stack, time.monotonic() - start, status=exited)
        self._forget()
        return lost


def _current_thread_stack(dump: str, limit: int = 12) -> list[str]:
    """The frames faulthandler printed for the crashing thread ("Current thread ..." block), most recent
    first, at most ``limit``."""
    lines = dump.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Current thread")), None)
    if start is None:
        start = next((i for i, ln in enumerate(lines) if ln.startswith(("Thread", "Stack"))), None)
    if start is None:
        return []
    frames = []
    for ln in lines[start + 1:]:
        if not ln.startswith("  ") or f"{os.sep}conformance{os.sep}isolation.py" in ln:
            break  # the worker loop and the pytest frames it was forked from say nothing about the crash
        frames.append(ln)
    return frames[:limit]


def _worker_main(conn: Connection, crumbs: _Crumbs, stackfile, run_item: Callable[[str], Outcome],
                 session: Session) -> None:
    """The worker's loop: receive a key, run it, send the outcome; exit at end of input (never returns)."""
    status = 0
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)  # its own process group, so a kill also reaches processes it started (compilers)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
        # Not the plugin's SIGTERM-as-Ctrl-C handler the fork inherited: SIGTERM ends a worker at once.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _die_with_parent()
        faulthandler.enable(file=stackfile, all_threads=True)
        session.worker = crumbs
        session.sigint = False  # SIGINT is ignored: every KeyboardInterrupt here comes from user code
        session.activate()  # for this process's whole life: calling() finds the breadcrumb page through it
        while True:
            try:
                key = conn.recv()
            except (EOFError, OSError):
                break
            crumbs.reset()
            outcome = run_item(key)
            crumbs.reset()
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                conn.send(outcome)
            except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable value in the outcome's data
                fallback = Outcome.of_failures(outcome.check, outcome.qualname, outcome.target, [Failure(
                    f"the check's result could not be sent back from the worker process: {exc!r}")])
                conn.send(fallback)
    except BaseException:  # noqa: BLE001 - never let the worker fall back into pytest's own code
        import traceback

        traceback.print_exc()
        status = 70
    finally:
        os._exit(status)


def _die_with_parent() -> None:
    """Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: a worker spinning in C++ must not outlive a killed pytest."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
