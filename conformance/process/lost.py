"""What the supervisor knows about a worker process it lost: :class:`WorkerLost`, the one place that names a signal
(:func:`describe_exit`), and what an abandoned call did (:func:`abandon_cause`)."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sys

from ..core.results import Failure
from .memory import format_size
from .stacks import HangSite

__all__ = ["WorkerLost", "describe_exit", "abandon_cause", "TIMEOUT_OPTION", "ITEM_LIMIT_FACTOR", "RULES"]

#: The rule ids of the failures :meth:`WorkerLost.failure` makes (:attr:`~conformance.core.results.Failure.rule`).
RULES = {"process.fake-exit": "a fake exited the worker process (os._exit, abort) instead of raising",
         "process.stray-result": "a process forked inside the worker sent a result in place of the worker",
         "process.memory-limit": "the worker process exceeded --torchbind-memory-limit",
         "process.crashed": "the worker process crashed (killed by a signal, or exited)",
         "process.hung": "the check hung and its worker process was killed",
         "process.compiler-hang": "the check hung in torch's compiler, not in the class's code"}

#: How messages name the per-call time limit, unless the supervisor was given another name (the scaffold's).
TIMEOUT_OPTION = "--torchbind-timeout"
#: One item (compiling and tracing included) may take this many times the per-call timeout; a coverage-matrix
#: cell (one program compiled or exported and run) gets the per-call timeout itself (``Supervisor.run``'s
#: ``factor``), so a cell that hangs in torch's compiler costs one timeout, not ten.
ITEM_LIMIT_FACTOR = 10


def describe_exit(status: int) -> tuple[str, int | None, int | None]:
    """``(cause, signal number, exit status)`` of a ``waitpid`` status: ``("killed by SIGSEGV (Segmentation
    fault)", 11, None)`` for a process killed by a signal, ``("the worker process exited with status 3", None,
    3)`` for one that exited."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"killed by {name} ({signal.strsignal(sig)})", sig, None
    code = os.waitstatus_to_exitcode(status)
    return f"the worker process exited with status {code}", None, code


#: The torch.distributed backends whose communicators a forked worker cannot use (the ``fake`` and ``threaded``
#: test backends it can).
FORK_UNSAFE_BACKENDS = frozenset({"gloo", "nccl", "mpi", "ucc", "xccl"})


def forked_world() -> str | None:
    """The backend of this process's default ``torch.distributed`` process group when it is one a forked worker
    cannot use (:data:`FORK_UNSAFE_BACKENDS`), else ``None`` (none initialized, or a test backend). Imports
    nothing that is not imported yet."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not (dist.is_available() and dist.is_initialized()):
            return None
        backend = str(dist.get_backend()).lower()
    except Exception:  # noqa: BLE001 - a world that cannot be read is not one to name
        return None
    return backend if any(b in backend for b in FORK_UNSAFE_BACKENDS) else None


@dataclasses.dataclass
class WorkerLost:
    """Why an item's worker was lost: ``kind`` is ``"crash"``, ``"hang"``, ``"memory"`` (killed for exceeding
    the memory limit) or ``"stray"`` (a result came from another process than the worker); ``cause`` a phrase
    such as ``"killed by SIGSEGV (Segmentation fault)"``; ``doing`` the
    breadcrumb labels, outermost first; ``call`` the outermost timed one (the call into the class that was in
    progress, if any); ``stack`` the Python stack faulthandler dumped (crashes by signal only); ``seconds`` how
    long the item had run; ``side`` the side (``"fake"``, ``"C++"``) of the innermost breadcrumb that has one;
    ``status`` the exit status of a worker that exited without a signal; ``used`` and ``limit`` the worker's own
    resident memory and the memory limit, in bytes (``"memory"`` only); ``site`` what the worker's Python stack
    showed when it was stopped (``"hang"`` only, :func:`~conformance.process.stacks.hang_site`); ``budget`` the
    seconds the item was allowed and how that limit is named, when not the default ``ITEM_LIMIT_FACTOR`` times
    the timeout (``"hang"`` only); ``stray`` the pid of the process that sent a result in place of the worker
    (``"stray"``: a child process forked inside the worker that went on running the check,
    :mod:`~conformance.process.strays`); ``program`` what a breadcrumb carried after its first line (a matrix cell's
    program and objects), shown with the failure."""

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
    site: HangSite | None = None
    budget: tuple[float, str] | None = None
    program: str | None = None
    stray: int | None = None

    @classmethod
    def from_crumbs(cls, kind: str, cause: str, crumbs: list[tuple[str, bool, str | None]], stack: list[str],
                    seconds: float, **more) -> "WorkerLost":
        """Build one from the breadcrumbs :meth:`~conformance.process.page.CrumbPage.read` returned; ``more``: the optional fields."""
        call = next((label for label, timed, _ in crumbs if timed), None)
        side = next((side for _, _, side in reversed(crumbs) if side), None)
        program = next((label.split("\n", 1)[1] for label, _, _ in reversed(crumbs) if "\n" in label), None)
        return cls(kind, cause, [label.split("\n", 1)[0] for label, _, _ in crumbs], call, stack, seconds,
                   side=side, program=program, **more)

    def failure(self, timeout: float) -> Failure:
        """The item's failure, for a library author: what died, in which call, and how to look closer (with the
        program a breadcrumb carried, e.g. a matrix cell's)."""
        failure = self._failure(timeout)
        return dataclasses.replace(failure, program=self.program) if self.program and not failure.program \
            else failure

    def _failure(self, timeout: float) -> Failure:
        where = self.doing[-1] if self.doing else "the check itself (no call into the class was in progress)"
        chain = ["in progress, outermost first: " + " > ".join(self.doing)] if len(self.doing) > 1 else []
        if self.kind == "crash" and self.status is not None and self.side == "fake":
            return Failure(f"the fake exited the worker process (status {self.status}) while in {where}: a fake "
                           "class must not exit the process",
                           fake=f"exited the process with status {self.status} (the run went on in a fresh worker "
                                "process)",
                           details=(*chain, "a fake reports an error by raising an Exception; os._exit() or abort() "
                                            "in it ends the program that traces the call"), rule="process.fake-exit")
        if self.kind == "stray":
            who = f"a child process that outlived its parent (pid {self.stray})" if self.stray else "another process"
            return Failure(f"{who} sent a result for this check: a process forked inside the worker went on running "
                           "the check instead of exiting, so the check's verdict is not known",
                           details=(*chain, f"what came back: {self.cause}",
                                    "a fake or the class's code that forks (os.fork()) must end the child with "
                                    "os._exit() or exec; a child that returns runs the rest of the check, and of "
                                    "the test run, a second time", "the run went on in a fresh worker process"),
                           rule="process.stray-result")
        if self.kind == "memory":
            text = (f"{format_size(self.used)} of its own resident memory when it was killed (the run went on in a "
                    "fresh worker process)")
            details = (*chain, f"limit: --torchbind-memory-limit={format_size(self.limit)} per worker process, for "
                               "the memory it allocates beyond what it shares with the pytest process (0: no limit)")
            summary = (f"the process running this check exceeded the memory limit of {format_size(self.limit)} "
                       f"in {where}")
            if self.side == "fake":
                return Failure(summary, fake=text, details=details, rule="process.memory-limit")
            return Failure(summary, cpp=text, details=details, rule="process.memory-limit")
        if self.call is None and self.stack:
            # No call into the class was marked (e.g. torch was compiling): the innermost Python frame says more.
            frame = re.match(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)', self.stack[0])
            if frame:
                where += f"; innermost Python frame: {os.path.basename(frame['file'])}:{frame['line']} in " \
                         f"{frame['func']}"
        if self.kind == "hang" and self.site is not None and self.site.in_compiler:
            return self._compiler_hang(where, chain, timeout)
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
            world = forked_world()
            if world is not None:  # the likeliest cause, said first
                details.append(
                    f"this process has a {world} process group (torch.distributed), and the worker was forked from "
                    f"it: a {world} communicator does not survive fork, so a collective the class runs in the "
                    "worker waits for peers that never answer; run this class's items with "
                    "--torchbind-isolation=none (they then run in the pytest process, which holds the world)")
            details.append(self._limits(timeout))
            if self.site is not None:
                site = self.site
                if self.call is not None and not (site.moving or site.compiler or site.class_call):
                    # The plugin's own call into the class (a timed breadcrumb) and a stack that stood still in it.
                    details.append(f"when stopped, the worker was still inside {self.call}: its Python stack stood "
                                   f"still at {site.frame}")
                else:
                    details.append(f"when stopped, the worker was {site.describe()}")
                details += self._site_stack()
            elif self.side == "torch":
                details.append("torch was compiling, exporting or running the program; no Python stack came back "
                               "from the worker, so whether the class's code or torch's compiler was running is "
                               "not known")
        if self.stack:
            details.append("Python stack at the crash (faulthandler, most recent call first):")
            details += [f"  {ln.strip()}" for ln in self.stack]
        details.append("to debug it in one process, rerun this item without isolation under gdb: "
                       "gdb -ex run --args python -m pytest --torchbind-isolation=none <your options> -k <this item>")
        return Failure(summary, cpp=cpp, details=tuple(details),
                       rule="process.crashed" if self.kind == "crash" else "process.hung")

    def _limits(self, timeout: float) -> str:
        budget = (f"{self.budget[0]:g} s for this item ({self.budget[1]})" if self.budget
                  else f"{timeout * ITEM_LIMIT_FACTOR:g} s per item")
        return f"limits: --torchbind-timeout={timeout:g} s per call into the class, {budget}"

    def _site_stack(self, limit: int = 12) -> list[str]:
        frames = self.site.stack if self.site is not None else ()
        if not frames:
            return []
        more = [f"  ... {len(frames) - limit} outer frames"] if len(frames) > limit else []
        return ["Python stack when it was stopped (faulthandler, most recent call first):",
                *(f"  {frame}" for frame in frames[:limit]), *more]

    def _compiler_hang(self, where: str, chain: list[str], timeout: float) -> Failure:
        """A hang whose Python stack was inside torch's compiler, not in a call into the class's code: said as
        such, with the stack; no debugger advice for C++ (the class's C++ code was not running)."""
        site = self.site
        parts = " > ".join(site.compiler)
        evidence = ("the Python stack moved between the samples taken before the worker was killed: torch was "
                    "still running its own Python code (e.g. dynamo tracing in a loop), not waiting for a call "
                    "into the class" if site.moving else
                    "the Python stack stood still in torch's compiler, outside any call into the class")
        details = (*chain, f"when stopped, the worker was {site.describe()}", evidence, self._limits(timeout),
                   *self._site_stack(),
                   "the class's code was not running when the stack was taken: to see it in plain torch, compile or "
                   f"export {'the program shown' if self.program else 'what this item compiles'} with a timeout; a "
                   "torch bug or limitation goes into the baseline (--torchbind-accept) with the reason")
        return Failure(f"this check hung in torch's compiler ({parts}), not in the class's code: {where} "
                       f"{self.cause}", details=details, rule="process.compiler-hang")



def abandon_cause(lost: WorkerLost) -> str:
    """What an abandoned call did, after its label (``"crashed a worker process (killed by SIGSEGV ...)"``):
    the text :class:`~conformance.core.breadcrumbs.CallAbandoned` carries when the call is refused later."""
    if lost.kind == "crash":
        return f"crashed a worker process ({lost.cause})"
    if lost.kind == "stray":
        return f"forked a process that sent a result in place of the worker ({lost.cause})"
    if lost.kind == "memory":
        return f"made a worker process exceed its memory limit ({format_size(lost.limit)})"
    return f"hung a worker process (it {lost.cause})"


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
        if not ln.startswith("  ") or f"{os.sep}conformance{os.sep}process{os.sep}" in ln:
            break  # the worker loop and the pytest frames it was forked from say nothing about the crash
        frames.append(ln)
    return frames[:limit]

