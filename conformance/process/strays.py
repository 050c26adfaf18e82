"""The worker protocol's guard against strays: processes forked inside a worker (``os.fork()`` in a fake or in the
class's code) whose child does not exit but goes on running the worker's code, back to its loop, and sends the
result *it* reached on the worker's pipe.

Every request the supervisor sends carries an id, and every reply the id of the request it answers and the pid of
the process that sent it: ``(request id, pid, result)``. The supervisor accepts a reply only from the worker it
forked and for the request it sent (:func:`from_worker`); anything else fails the item, naming the stray. A child
back in the worker's loop replies and exits (it never reads a request, so it cannot take another item's); the
worker, when Python forked it during an item, waits until its running copies have ended (:func:`wait_for_copies`)
before it replies, so a stray's reply reaches the supervisor first and fails the item during which it was forked.
"""

from __future__ import annotations

import os
import time
from collections.abc import MutableMapping
from typing import Any

from ..core.breadcrumbs import Tracer
from .page import CrumbPage, PageSink

__all__ = ["from_worker", "well_formed", "leave_page", "wait_for_copies", "running_copies"]

_POLL_S = 0.05


def from_worker(reply: Any, rid: int, pid: int | None) -> bool:
    """Whether ``reply`` is the worker's (``pid``) answer to the request ``rid``: ``(rid, pid, result)``."""
    return well_formed(reply) and reply[0] == rid and reply[1] == pid


def well_formed(reply: Any) -> bool:
    return (isinstance(reply, tuple) and len(reply) == 3 and isinstance(reply[0], int)
            and isinstance(reply[1], int))


def leave_page(tracer: Tracer | None, abandoned: MutableMapping[str, str], worker: int) -> None:
    """In a child forked inside the worker: breadcrumbs go to a page of its own, not the worker's."""
    if tracer is not None and os.getpid() != worker:
        tracer.attach(PageSink(CrumbPage(), abandoned))


def wait_for_copies(me: int, crumbs: CrumbPage) -> None:
    """Wait until no child of this worker is a running copy of it (forked, not exec'd: its command line is the
    worker's). A copy still running when the item ends is waited for as one timed call, so the per-call limit
    applies and a copy that never ends fails the item as a hang naming it."""
    copies = running_copies(me)
    if not copies:
        return
    crumbs.push(f"waiting for process {', '.join(map(str, copies))}, forked during this item and still running "
                "the worker's program, to exit", True, None)
    try:
        while copies:
            time.sleep(_POLL_S)
            copies = [pid for pid in copies if _state(pid) not in (None, "Z", "X")]
    finally:
        crumbs.pop()


def running_copies(me: int) -> list[int]:
    """Children of ``me`` that are alive and run its command line (``/proc``; none where it cannot tell)."""
    try:
        with open(f"/proc/{me}/cmdline", "rb") as fh:
            cmdline = fh.read()
        names = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[1]) != me or fields[0] in ("Z", "X"):
                continue
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if fh.read() == cmdline:
                    found.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _state(pid: int) -> str | None:
    """A process's state letter (``R``, ``S``, ``Z``...) from ``/proc``, ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
        return stat[stat.rindex(")") + 2:].split()[0]
    except (OSError, ValueError, IndexError):
        return None
