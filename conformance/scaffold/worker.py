"""The scaffold's observations and verification, run in a supervised worker process.

The scaffold calls the C++ class a great deal (every example, argument set and two-call sequence, for every
method and op), and C++ code may crash or hang: ``samples_unsafe::CrashyStack.pop()`` dereferences a null pointer
on an empty stack, ``wait_for(n)`` spins forever. So each task (the examples' state, one method, one static
method, one op, the final verification) runs in a worker forked by the plugin's
:class:`~conformance.isolation.Supervisor`, with every call into the class labelled by
:func:`~conformance.crumbs.calling`:

* a call that crashes the worker is *abandoned* (as the plugin's preparation does) and the task runs again in a
  fresh worker without it, up to :data:`ATTEMPTS` times; the trials that needed it are left out, and the generated
  body says which calls were left out and why;
* a call that hangs (runs longer than ``timeout`` seconds) is abandoned the same way, at most :data:`HANGS` times
  per task (each costs the timeout); after that the task ends, and the body raises ``NotImplementedError``
  saying which call hung. Abandoned calls stay abandoned for the later tasks (the session keeps them), so a
  derived example state that hangs costs the timeout once.

A task is sent to the worker as its key: JSON naming the task and what it needs (the templates already chosen for
other methods, the module to verify). Without process isolation (not Linux) the tasks run in this process.
"""

from __future__ import annotations

import json
import types
from typing import Any

from ..isolation import Supervisor, WorkerLost, isolation_available
from ..session import Session

__all__ = ["Observer", "ATTEMPTS", "HANGS", "DEFAULT_TIMEOUT", "lost_text", "load_module_text"]

#: Runs of one task, each abandoning the call that crashed the previous worker.
ATTEMPTS = 12
#: Hanging calls abandoned per task.
HANGS = 3
#: Seconds one call into the class may take while the scaffold observes it (``--timeout``).
DEFAULT_TIMEOUT = 10.0


class Observer:
    """Runs the scaffold's tasks for the class ``qualname`` of ``session`` (whose registry holds the loaded
    example factories), in supervised workers when ``isolate`` (and os.fork) allows. ``timeout``: seconds one call
    into the class may take (``0``: no limit). Use as a context manager, or call :meth:`close`."""

    def __init__(self, session: Session, qualname: str, timeout: float = DEFAULT_TIMEOUT, isolate: bool = True):
        self.session, self.qualname = session, qualname
        self.supervisor = (Supervisor(self._run_item, timeout=timeout, session=session, before_fork=_warm_up)
                           if isolate and isolation_available() else None)

    def __enter__(self) -> Observer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.supervisor is not None:
            self.supervisor.close()

    def run(self, task: str, abandon: bool = True, **fields: Any) -> Any:
        """Run ``task`` (``state``, ``method``, ``static``, ``op``, ``verify``) with JSON-able ``fields`` and return
        what it returns, or a :class:`WorkerLost` when the worker crashed on a call that could not be abandoned
        (no call in progress, or a retry crashed on the same call) or hung. ``abandon=False``: lose the task at
        the first crash or hang (a verification runs the plugin's checks as the plugin would: without abandoning
        calls)."""
        key = json.dumps({"task": task, **fields}, sort_keys=True)
        if self.supervisor is None:
            with self.session.activated():
                return self._run_item(key)
        result: Any = None
        hangs = 0
        for _ in range(ATTEMPTS):
            self.supervisor.register(key)
            result = self.supervisor.run(key)
            if not isinstance(result, WorkerLost):
                return result
            hangs += result.kind == "hang"
            if (not abandon or result.kind not in ("crash", "hang") or result.call is None or hangs > HANGS
                    or result.call in self.session.abandoned):
                return result
            self.session.abandoned[result.call] = _what(result)
        return result

    def _run_item(self, key: str) -> Any:
        """In the worker: decode the task and run it."""
        from . import tasks

        spec = json.loads(key)
        ctx = self.session.context(self.qualname)
        return getattr(tasks, f"task_{spec.pop('task')}")(ctx, **spec)


def _warm_up() -> None:
    """Imports every task needs, made once here rather than in each forked worker (imports use no threads)."""
    import torch._subclasses.fake_tensor  # noqa: F401

    from .. import checks, runner  # noqa: F401
    from ..differential import driver  # noqa: F401


def _cause(lost: WorkerLost) -> str:
    return lost.cause.replace("--torchbind-timeout", "the scaffold's --timeout")


def _what(lost: WorkerLost) -> str:
    """What an abandoned call did, after its label: ``crashed the process (killed by SIGSEGV ...)``."""
    return f"hung (it {_cause(lost)})" if lost.kind == "hang" else f"crashed the process ({_cause(lost)})"


def lost_text(lost: WorkerLost) -> str:
    """One line for a task that lost its worker: what the class's code did, and during which call."""
    during = f" during {lost.call}" if lost.call else ""
    if lost.kind == "hang":
        return f"observing it hung the process: a call {_cause(lost)}{during}"
    return f"observing it crashed the process ({_cause(lost)}){during}"


def load_module_text(text: str, name: str = "scaffold_verify") -> types.ModuleType:
    """Execute generated module source as a new module (registering its fake class and op fakes)."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    exec(compile(text, module.__file__, "exec"), module.__dict__)  # noqa: S102 - the scaffold's own output
    return module
