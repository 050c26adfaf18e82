"""The process layer: crash, hang and memory isolation in supervised worker processes.

A TorchBind class is C++ code, and C++ code can take the whole process down: a method that dereferences a null
pointer, a ``__setstate__`` that writes past the end of a container (torch deep-copies an object through
``def_pickle`` whenever it fakifies it), an ``abort()`` from a failed assertion, or a call that never returns.
The plugin therefore runs every check in a *worker*: a child process forked from the pytest process after
collection, so it inherits the loaded libraries, the registered fake classes and example factories, and the
collected items without re-importing anything. The pytest process (the *supervisor*) sends the worker one item
at a time and waits for its :class:`~conformance.core.results.Verdict`.

* If the worker dies (a signal such as SIGSEGV or SIGABRT, or an exit), the item fails with a message naming the
  class, the check, the signal, and what the worker was doing when it died (the *breadcrumbs* below), with the
  Python stack that :mod:`faulthandler` dumped. The next item gets a freshly forked worker; the run goes on.
* If the worker stays inside one call into the class's code (a constructor, a method, ``__obj_flatten__``,
  pickling, a custom op, an eager scenario run) for longer than ``timeout`` seconds, or inside one item for
  longer than ``item_limit`` seconds (compiling included; the plugin gives a coverage-matrix cell ``timeout``
  itself), it is killed and the item fails as a hang. Before the kill the supervisor takes a few samples of the
  worker's Python stack (:mod:`.stacks`), so the failure says whether it hung in torch's compiler (dynamo, AOTAutograd,
  inductor, torch.export) or inside a call into the class.
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
  :mod:`conformance.core.faults`.)

* A result is taken only from the worker and for the request sent to it: every request carries an id and every
  reply that id and the pid of its sender (:mod:`.strays`). A process forked inside the worker whose child goes on
  running the check (``os.fork()`` in a fake, without ``os._exit()`` in the child) sends a reply of its own; the
  item fails naming that child, never taking its result (or its verdict for another item).

Breadcrumbs: the engine reports each call into the class to the :class:`~conformance.core.breadcrumbs.Tracer` it was
given (``with ctx.calling(...)``); in a worker the supervisor attaches a :class:`~.page.PageSink` to that tracer,
which keeps the stack of labels in a shared-memory page the supervisor reads (no system call per breadcrumb, so
the hundreds of thousands of calls of a differential run stay cheap). Outside a worker the tracer does nothing.
The engine (checks, example objects, the matrix, the differential test) never imports this package.

Shared preparation: every item of a class needs its example objects, and building them calls the class's methods
(e.g. two ``push`` calls to reach a non-empty state). If one of those calls crashes or hangs, every item would die
the same way. So the plugin first runs the class's preparation under :meth:`Supervisor.run_abandoning` (the one abandon
policy, which the scaffold uses too): it builds the examples in a worker, and each call that takes a worker down is
*abandoned* (the outermost timed call in progress) and the preparation retried; later workers inherit the abandoned
calls, and the tracer raises :class:`~conformance.core.breadcrumbs.CallAbandoned` instead of making such a call again,
so the example is rejected and the ``examples`` check reports why. Only preparation
abandons calls: a crash inside an item fails that item alone, so results never depend on which items shared a
worker (a serial run and a pytest-xdist run agree).

Forking is safe here because the supervisor never runs torch work itself: collection only reads schemas. A
process that has already used torch's OpenMP thread pool must not fork a worker (GNU OpenMP hangs in the child).

Users of this package: the plugin's check isolation (:mod:`conformance.plugin.run`), the library-load probe
(:mod:`conformance.process.loading`) and the scaffold (:mod:`conformance.scaffold.worker`); one worker lifecycle
(:class:`Supervisor`), one abandon policy (:meth:`Supervisor.run_abandoning`), one way to name a signal
(:func:`describe_exit`).
"""

from __future__ import annotations

from .lost import ITEM_LIMIT_FACTOR, TIMEOUT_OPTION, WorkerLost, abandon_cause, describe_exit
from .memory import format_size, worker_memory
from .supervisor import ATTEMPTS, DEFAULT_TIMEOUT, GROWTH_LIMIT, HANGS, Supervisor, isolation_available

__all__ = ["Supervisor", "WorkerLost", "isolation_available", "describe_exit", "abandon_cause", "format_size",
           "worker_memory", "DEFAULT_TIMEOUT", "ITEM_LIMIT_FACTOR", "GROWTH_LIMIT", "ATTEMPTS", "HANGS",
           "TIMEOUT_OPTION"]
