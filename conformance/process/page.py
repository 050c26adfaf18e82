"""Breadcrumbs across processes: what a worker is doing, readable by its supervisor at any moment.

The engine reports every call into a class's code to its :class:`~conformance.core.breadcrumbs.Tracer`; in a worker
process the supervisor attaches a :class:`PageSink` to it, which keeps the stack of labels in a shared-memory page
(:class:`CrumbPage`) that the supervisor reads when the worker crashes, hangs or grows too large, so the failure
names the call in progress. No system call per breadcrumb: the hundreds of thousands of calls of a differential run
stay cheap. The sink also refuses calls abandoned during preparation (their labels and what they did).
"""

from __future__ import annotations

import mmap
import struct
import time
from collections.abc import Mapping

from ..core.breadcrumbs import SIDES

__all__ = ["CrumbPage", "PageSink"]

_SLOTS, _SLOT = 24, 2048  # breadcrumbs kept (deeper ones are not shown), bytes per label
_HEADER = struct.Struct("<Qdi")  # sequence number (odd while writing), start of the oldest timed call, depth
_SLOT_HEADER = struct.Struct("<?BH")  # timed, side (an index into _SIDES), label length
_SIDES = SIDES


class CrumbPage:
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


class PageSink:
    """A :class:`~conformance.core.breadcrumbs.Sink` writing to ``page``; ``abandoned``: call label -> what it did
    (the calls this worker must not make again)."""

    __slots__ = ("page", "_abandoned")

    def __init__(self, page: CrumbPage, abandoned: Mapping[str, str]):
        self.page, self._abandoned = page, abandoned

    def push(self, label: str, timed: bool, side: str | None) -> None:
        self.page.push(label, timed, side)

    def pop(self) -> None:
        self.page.pop()

    def abandoned(self, label: str) -> str | None:
        return self._abandoned.get(label)
