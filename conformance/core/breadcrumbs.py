"""The engine's tracer interface: how the code that calls into a class says what it is doing.

Every call into the class's code (a constructor, a method, ``__obj_flatten__``, a fake method, an op, an eager
program run) is wrapped in ``with tracer.calling(label, timed=..., side=...):``. The engine is *given* a
:class:`Tracer` (:class:`conformance.runner.Engine` holds one and hands it to every class context); by itself it
does nothing. The process layer (:mod:`conformance.process`) attaches a :class:`Sink` to it in a worker process,
so a supervisor can say which call crashed or hung, and so calls abandoned during preparation are not made again.
Checks, example objects and matrix scenarios therefore never import the process layer. Imports nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["Tracer", "Sink", "CallAbandoned", "SIDES"]

#: The sides a call may run on: ``None`` (the plugin's own work), ``"C++"`` (the real object), ``"fake"``, or
#: ``"torch"``: torch compiling, exporting or running a program (torch's compiler, which may call into either
#: side; a hang there is told apart from one in the class's code by the worker's Python stack, see
#: :mod:`conformance.process.stacks`).
SIDES = (None, "C++", "fake", "torch")


class CallAbandoned(Exception):
    """Raised by :meth:`Tracer.calling` in place of a call that crashed or hung a worker while the class was being
    prepared; the message says what happened."""

    def __init__(self, label: str, cause: str):
        super().__init__(f"{label} {cause}; not called again")
        self.label, self.cause = label, cause


class Sink(Protocol):
    """Where an attached tracer sends breadcrumbs (implemented by :mod:`conformance.process`)."""

    def push(self, label: str, timed: bool, side: str | None) -> None:
        """A call named ``label`` starts; ``timed``: the per-call time limit applies to it."""

    def pop(self) -> None:
        """The innermost call ended."""

    def abandoned(self, label: str) -> str | None:
        """What the call ``label`` did when it was abandoned (``"crashed a worker process (...)"``), or ``None``."""


class Tracer:
    """Receives the engine's breadcrumbs; does nothing until a :class:`Sink` is attached (in a worker process)."""

    __slots__ = ("sink",)

    def __init__(self) -> None:
        self.sink: Sink | None = None

    def attach(self, sink: Sink | None) -> None:
        """Send breadcrumbs to ``sink`` from now on (``None``: do nothing again)."""
        self.sink = sink

    def calling(self, label: str | Callable[[], str], *, timed: bool = True, side: str | None = None) -> _Calling:
        """A context manager marking one stretch of work. ``timed``: it is one call into the class's code, to which
        the per-call limit (``--torchbind-timeout``) applies (the outermost timed stretch counts). ``label`` may be
        a function, called only when a sink is attached; it should name the call precisely (the object's state and
        the arguments): it is also the key under which a call is abandoned; an untimed stretch's label may carry,
        after its first line, the program it runs (a matrix cell's), which a failure for a lost worker shows (up to
        2 KB of label in all). ``side``: whose code the call runs,
        ``"fake"``, ``"C++"`` or ``"torch"`` (one of :data:`SIDES`). Entering raises :class:`CallAbandoned` for a
        timed call abandoned during preparation; raises ``ValueError`` for an unknown ``side``."""
        if side not in SIDES:
            raise ValueError(f"calling(side={side!r}): expected one of {SIDES}")
        return _Calling(self.sink, label, timed, side)


class _Calling:
    __slots__ = ("sink", "label", "timed", "side", "pushed")

    def __init__(self, sink: Sink | None, label: str | Callable[[], str], timed: bool, side: str | None):
        self.sink, self.label, self.timed, self.side, self.pushed = sink, label, timed, side, False

    def __enter__(self) -> None:
        sink = self.sink
        if sink is None:
            return
        text = self.label() if callable(self.label) else self.label
        if self.timed:
            cause = sink.abandoned(text)
            if cause is not None:
                raise CallAbandoned(text, cause)
        sink.push(text, self.timed, self.side)
        self.pushed = True

    def __exit__(self, *exc) -> None:
        if self.pushed:
            self.sink.pop()
            self.pushed = False
