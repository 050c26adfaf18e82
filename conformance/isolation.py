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
import mmap
import os
import re
import signal
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe

from .results import Failure, Outcome
from .session import Session, current

__all__ = ["calling", "CallAbandoned", "Supervisor", "WorkerLost", "isolation_available", "DEFAULT_TIMEOUT",
           "ITEM_LIMIT_FACTOR"]

#: Default of ``--torchbind-timeout``: seconds one call into the class's code may take.
DEFAULT_TIMEOUT = 60.0
#: One item (compiling and tracing included) may take this many times the per-call timeout.
ITEM_LIMIT_FACTOR = 10

_SLOTS, _SLOT = 24, 2048  # breadcrumbs kept (deeper ones are not shown), bytes per label
_HEADER = struct.Struct("<Qdi")  # sequence number (odd while writing), start of the oldest timed call, depth
_SLOT_HEADER = struct.Struct("<?H")  # timed, label length
_POLL_S = 0.2


def isolation_available() -> bool:
    """Process isolation needs ``os.fork`` (Linux; macOS forks badly once torch is loaded, so it is off there)."""
    return hasattr(os, "fork") and sys.platform.startswith("linux")


# ----- breadcrumbs (worker side) -------------------------------------------------------------------------------

class _Crumbs:
    """A shared anonymous mapping holding the stack of breadcrumbs: a header (a sequence number that is odd
    while the worker writes, the ``time.monotonic()`` start of the oldest timed call -- system-wide on Linux, so
    both processes read the same clock -- and the depth), then one fixed slot per level. A push writes one slot
    and the header, a pop only the header: a few microseconds, no system call."""

    def __init__(self):
        self.mem = mmap.mmap(-1, _HEADER.size + _SLOTS * _SLOT)
        self.depth = 0
        self.since = 0.0
        self.timed_depth = -1  # level of the oldest timed call, -1 when none
        self.seq = 0

    def _header(self) -> None:
        self.seq += 2
        _HEADER.pack_into(self.mem, 0, self.seq, self.since, self.depth)

    def push(self, label: str, timed: bool) -> None:
        level = self.depth
        if timed and self.timed_depth < 0:
            self.timed_depth, self.since = level, time.monotonic()
        if level < _SLOTS:
            body = label.encode()[: _SLOT - _SLOT_HEADER.size]
            _HEADER.pack_into(self.mem, 0, self.seq + 1, self.since, self.depth)  # odd: being written
            offset = _HEADER.size + level * _SLOT
            _SLOT_HEADER.pack_into(self.mem, offset, timed, len(body))
            self.mem[offset + _SLOT_HEADER.size:offset + _SLOT_HEADER.size + len(body)] = body
        self.depth = level + 1
        self._header()

    def pop(self) -> None:
        self.depth -= 1
        if self.depth == self.timed_depth:
            self.timed_depth, self.since = -1, 0.0
        self._header()

    def read(self) -> tuple[float, list[tuple[str, bool]]]:
        """``(start of the oldest timed call or 0.0, [(label, timed)] outermost first)``; retried while being
        written."""
        for _ in range(1000):
            seq, since, depth = _HEADER.unpack_from(self.mem, 0)
            crumbs = []
            for level in range(min(depth, _SLOTS)):
                offset = _HEADER.size + level * _SLOT
                timed, size = _SLOT_HEADER.unpack_from(self.mem, offset)
                body = bytes(self.mem[offset + _SLOT_HEADER.size:offset + _SLOT_HEADER.size + size])
                crumbs.append((body.decode(errors="replace"), timed))
            if seq % 2 == 0 and _HEADER.unpack_from(self.mem, 0)[0] == seq:
                return since, crumbs
            time.sleep(0.001)
        return 0.0, []

    def reset(self) -> None:
        self.depth, self.since, self.timed_depth = 0, 0.0, -1
        self._header()


class CallAbandoned(Exception):
    """Raised by :func:`calling` in place of a call that crashed or hung a worker while the class was being
    prepared; the message says what happened."""

    def __init__(self, label: str, cause: str):
        super().__init__(f"{label} {cause}; not called again")
        self.label, self.cause = label, cause


class calling:  # noqa: N801 - used like a function: ``with calling(...):``
    """Mark a stretch of work for the supervisor's messages; ``timed``: it is one call into the class's code and
    ``--torchbind-timeout`` applies to it (the outermost timed stretch counts). ``label`` may be a function,
    called only inside a worker, and should name the call precisely (the object's state and the arguments):
    it is also the key under which a call is abandoned. Does nothing outside a worker.

    Entering raises :class:`CallAbandoned` for a timed call abandoned during preparation (see the module
    docstring)."""

    __slots__ = ("label", "timed", "crumbs")

    def __init__(self, label: str | Callable[[], str], *, timed: bool = True):
        self.label, self.timed, self.crumbs = label, timed, None

    def __enter__(self) -> None:
        session = current()
        crumbs = session.worker  # the breadcrumb page, in a worker process only
        if crumbs is None:
            return
        label = self.label
        text = label() if callable(label) else label
        if self.timed and text in session.abandoned:
            raise CallAbandoned(text, session.abandoned[text])
        crumbs.push(text, self.timed)
        self.crumbs = crumbs

    def __exit__(self, *exc) -> None:
        if self.crumbs is not None:
            self.crumbs.pop()
            self.crumbs = None


# ----- supervisor ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class WorkerLost:
    """Why an item's worker was lost: ``kind`` is ``"crash"`` or ``"hang"``; ``cause`` a phrase such as
    ``"killed by SIGSEGV (Segmentation fault)"``; ``doing`` the breadcrumb labels, outermost first; ``call``
    the outermost timed one (the call into the class that was in progress, if any); ``stack`` the Python stack
    faulthandler dumped (crashes by signal only); ``seconds`` how long the item had run."""

    kind: str
    cause: str
    doing: list[str]
    call: str | None
    stack: list[str]
    seconds: float

    @classmethod
    def from_crumbs(cls, kind: str, cause: str, crumbs: list[tuple[str, bool]], stack: list[str],
                    seconds: float) -> "WorkerLost":
        call = next((label for label, timed in crumbs if timed), None)
        return cls(kind, cause, [label for label, _ in crumbs], call, stack, seconds)

    def failure(self, timeout: float) -> Failure:
        """The item's failure, for a library author: what died, in which call, and how to look closer."""
        where = self.doing[-1] if self.doing else "the check itself (no call into the class was in progress)"
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
    """

    def __init__(self, run_item: Callable[[str], Outcome], timeout: float = DEFAULT_TIMEOUT,
                 before_fork: Callable[[], None] | None = None, session: Session | None = None):
        self.run_item = run_item
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

    # ----- running ------------------------------------------------------------------------------------------
    def run(self, key: str) -> Outcome | WorkerLost:
        """Run the item ``key`` in the worker: its :class:`Outcome`, or :class:`WorkerLost` when the worker
        crashed or was killed for hanging (the next call starts a new worker)."""
        if self._pid is not None and key not in self._known:
            self.close()
        if self._pid is None:
            self._start()
        conn, start = self._conn, time.monotonic()
        try:
            conn.send(key)
        except OSError:
            return self._lost_by_exit(start)
        while True:
            if conn.poll(_POLL_S):
                try:
                    return conn.recv()
                except (EOFError, OSError):
                    return self._lost_by_exit(start)
            pid, status = os.waitpid(self._pid, os.WNOHANG)
            if pid:  # died while a process it started still holds the pipe open
                return self._lost_by_exit(start, reaped=status)
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

    def prepare(self, key: str, attempts: int = 8) -> list[WorkerLost]:
        """Run the preparation item ``key`` (e.g. building a class's examples) until it completes without losing
        the worker, abandoning each call that crashed or hung it (see the module docstring); at most
        ``attempts`` runs. Returns what was lost on the way (also kept in :attr:`abandoned`)."""
        lost: list[WorkerLost] = []
        for _ in range(attempts):
            result = self.run(key)
            if not isinstance(result, WorkerLost):
                break
            lost.append(result)
            if result.call is None or result.call in self.session.abandoned:
                break  # nothing to abandon: items will meet the same end, each on its own
            self.session.abandoned[result.call] = (f"crashed a worker process ({result.cause})" if result.kind == "crash"
                                       else f"hung a worker process (it {result.cause})")
        return lost

    def prepare_once(self, key: str) -> None:
        """:meth:`prepare` ``key`` unless it already ran."""
        if key not in self.prepared:
            self.prepared.add(key)
            self.prepare(key)

    @property
    def abandoned(self) -> dict[str, str]:
        """Calls abandoned during preparation: label -> what they did (kept on the session, so every supervisor
        of a run shares them)."""
        return dict(self.session.abandoned)

    def _lost_by_hang(self, start: float, doing: list[tuple[str, bool]], cause: str) -> WorkerLost:
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
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            cause = f"killed by {name} ({signal.strsignal(sig)})"
            self._stackfile.seek(0)
            stack = _current_thread_stack(self._stackfile.read())
        else:
            cause = f"the worker process exited with status {os.waitstatus_to_exitcode(status)}"
        lost = WorkerLost.from_crumbs("crash", cause, doing, stack, time.monotonic() - start)
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
        _die_with_parent()
        faulthandler.enable(file=stackfile, all_threads=True)
        session.worker = crumbs
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
