"""The scaffold's observations and verification, run in a supervised worker process.

The scaffold calls the C++ class a great deal (every example, argument set and two-call sequence, for every
method and op), and C++ code may crash or hang: ``samples_unsafe::CrashyStack.pop()`` dereferences a null pointer
on an empty stack, ``wait_for(n)`` spins forever. So each task (the examples' state, one method, one static
method, one op, the final verification) runs in a worker of the process layer
(:class:`~conformance.process.Supervisor`), with every call into the class reported to the engine's tracer:

* a call that crashes the worker is *abandoned* (the process layer's one abandon policy,
  :meth:`~conformance.process.Supervisor.run_abandoning`, as for the plugin's preparation) and the task runs again
  in a fresh worker without it, up to :data:`ATTEMPTS` times; the trials that needed it are
  left out, and the generated body says which calls were left out and why;
* a call that hangs (runs longer than ``timeout`` seconds) is abandoned the same way, at most
  :data:`HANGS` times per task (each costs the timeout); after that the task ends, and the
  body raises ``NotImplementedError`` saying which call hung. Abandoned calls stay abandoned for the later tasks
  (the supervisor keeps them), so a derived example state that hangs costs the timeout once.

A task is sent to the worker as its key: JSON naming the task and what it needs (the templates already chosen for
other methods, the module to verify). Without process isolation (not Linux) the tasks run in this process.
"""

from __future__ import annotations

import json
import types
from typing import Any

from ..process import Supervisor, WorkerLost, isolation_available
from ..runner import Engine

__all__ = ["Observer", "ATTEMPTS", "HANGS", "DEFAULT_TIMEOUT", "lost_text", "load_module_text"]

#: The scaffold's limits for the process layer's abandon policy: runs of one task, each abandoning the call that
#: took the previous worker down, and hanging calls abandoned per task.
ATTEMPTS = 12
HANGS = 3
#: Seconds one call into the class may take while the scaffold observes it (``--timeout``).
DEFAULT_TIMEOUT = 10.0


class Observer:
    """Runs the scaffold's tasks for the class ``qualname`` with ``engine`` (whose registry holds the loaded
    example factories), in supervised workers when ``isolate`` (and os.fork) allows. ``timeout``: seconds one call
    into the class may take (``0``: no limit). Use as a context manager, or call :meth:`close`."""

    def __init__(self, engine: Engine, qualname: str, timeout: float = DEFAULT_TIMEOUT, isolate: bool = True):
        self.engine, self.qualname = engine, qualname
        self.supervisor = (Supervisor(self._run_item, timeout=timeout, tracer=engine.tracer, before_fork=_warm_up,
                                      timeout_option="the scaffold's --timeout", describe_abandoned=_what)
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
            return self._run_item(key)
        self.supervisor.register(key)
        if not abandon:
            return self.supervisor.run(key)
        return self.supervisor.run_abandoning(key, attempts=ATTEMPTS, hangs=HANGS)[0]

    def _run_item(self, key: str) -> Any:
        """In the worker: decode the task and run it."""
        from . import tasks

        spec = json.loads(key)
        ctx = self.engine.context(self.qualname)
        return getattr(tasks, f"task_{spec.pop('task')}")(ctx, **spec)


def _warm_up() -> None:
    """Imports every task needs, made once here rather than in each forked worker (imports use no threads):
    ``torch._dynamo`` above all, which the first fakification imports (seconds; without it here, every class's
    workers imported it again, four times the time of a class's observations)."""
    from ..engine.torch_api import fake_tensor  # noqa: F401

    from .. import checks, runner  # noqa: F401
    from ..torchbind.context import import_lazily_imported_modules
    from ..torchbind.differential import driver  # noqa: F401

    import_lazily_imported_modules()


def _what(lost: WorkerLost) -> str:
    """What an abandoned call did, after its label, in the generated module's comments: ``crashed the process
    (killed by SIGSEGV ...)`` or ``hung (it did not return within 10 s (the scaffold's --timeout))``."""
    return f"hung (it {lost.cause})" if lost.kind == "hang" else f"crashed the process ({lost.cause})"


def lost_text(lost: WorkerLost) -> str:
    """One line for a task that lost its worker: what the class's code did, and during which call."""
    during = f" during {lost.call}" if lost.call else ""
    if lost.kind == "hang":
        return f"observing it hung the process: a call {lost.cause}{during}"
    return f"observing it crashed the process ({lost.cause}){during}"


def load_module_text(text: str, name: str = "scaffold_verify") -> types.ModuleType:
    """Execute generated module source as a new module (registering its fake class and op fakes)."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    exec(compile(text, module.__file__, "exec"), module.__dict__)  # noqa: S102 - the scaffold's own output
    return module
