"""Breadcrumbs: what an isolation worker is doing, readable by its supervisor at any moment.

Code that calls into a class's code wraps the call in :class:`calling`; inside a worker process
(:mod:`conformance.isolation`) the label goes on a stack kept in a shared-memory page (:class:`_Crumbs`) that the
supervisor reads when the worker crashes, hangs or grows too large, so the failure names the call in progress.
No system call per breadcrumb: the hundreds of thousands of calls of a differential run stay cheap. Outside a
worker :class:`calling` does nothing.
"""

from __future__ import annotations

import mmap
import struct
import time
from collections.abc import Callable

from .session import current

__all__ = ["calling", "CallAbandoned"]

_SLOTS, _SLOT = 24, 2048  # breadcrumbs kept (deeper ones are not shown), bytes per label
_HEADER = struct.Struct("<Qdi")  # sequence number (odd while writing), start of the oldest timed call, depth
_SLOT_HEADER = struct.Struct("<?BH")  # timed, side (an index into _SIDES), label length
_SIDES = (None, "C++", "fake")


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

    def push(self, label: str, timed: bool, side: str | None = None) -> None:
        level = self.depth
        if timed and self.timed_depth < 0:
            self.timed_depth, self.since = level, time.monotonic()
        if level < _SLOTS:
            body = label.encode()[: _SLOT - _SLOT_HEADER.size]
            _HEADER.pack_into(self.mem, 0, self.seq + 1, self.since, self.depth)  # odd: being written
            offset = _HEADER.size + level * _SLOT
            _SLOT_HEADER.pack_into(self.mem, offset, timed, _SIDES.index(side), len(body))
            self.mem[offset + _SLOT_HEADER.size:offset + _SLOT_HEADER.size + len(body)] = body
        self.depth = level + 1
        self._header()

    def pop(self) -> None:
        self.depth -= 1
        if self.depth == self.timed_depth:
            self.timed_depth, self.since = -1, 0.0
        self._header()

    def read(self) -> tuple[float, list[tuple[str, bool, str | None]]]:
        """``(start of the oldest timed call or 0.0, [(label, timed, side)] outermost first)``; retried while
        being written."""
        for _ in range(1000):
            seq, since, depth = _HEADER.unpack_from(self.mem, 0)
            crumbs = []
            for level in range(min(depth, _SLOTS)):
                offset = _HEADER.size + level * _SLOT
                timed, side, size = _SLOT_HEADER.unpack_from(self.mem, offset)
                body = bytes(self.mem[offset + _SLOT_HEADER.size:offset + _SLOT_HEADER.size + size])
                crumbs.append((body.decode(errors="replace"), timed, _SIDES[side] if side < len(_SIDES) else None))
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

    ``side``: whose code the call runs, ``"fake"`` (a fake method, a fake's ``__obj_unflatten__``, an op's Python
    fake) or ``"C++"`` (the real object); when the worker exits while the innermost call with a side is the
    fake's, the fake is named as what exited (see :meth:`WorkerLost.failure`).

    Entering raises :class:`CallAbandoned` for a timed call abandoned during preparation (see the module
    docstring)."""

    __slots__ = ("label", "timed", "side", "crumbs")

    def __init__(self, label: str | Callable[[], str], *, timed: bool = True, side: str | None = None):
        if side not in _SIDES:
            raise ValueError(f"calling(side={side!r}): expected one of {_SIDES}")
        self.label, self.timed, self.side, self.crumbs = label, timed, side, None

    def __enter__(self) -> None:
        session = current()
        crumbs = session.worker  # the breadcrumb page, in a worker process only
        if crumbs is None:
            return
        label = self.label
        text = label() if callable(label) else label
        if self.timed and text in session.abandoned:
            raise CallAbandoned(text, session.abandoned[text])
        crumbs.push(text, self.timed, self.side)
        self.crumbs = crumbs

    def __exit__(self, *exc) -> None:
        if self.crumbs is not None:
            self.crumbs.pop()
            self.crumbs = None


