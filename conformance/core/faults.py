"""User code that stops the program instead of raising an Exception: a fake method, a fake's ``__obj_unflatten__``
or an op's Python fake that raises ``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit`` or another
``BaseException`` that is not an ``Exception``.

Check code catches ``Exception`` around calls into user code; such a ``BaseException`` would go past it and stop
the check (in the isolation worker: the worker itself, reported as a crash). So the places that capture calls into
user code (:func:`conformance.torchbind.context._invoke`, ``ClassContext.fakify``, the differential test's
``_Side.call``) catch ``BaseException`` and raise it on as a :class:`UserFault` naming the call and its side, past
every ``except Exception`` of the checks (and past hypothesis, which would otherwise shrink a ``SystemExit``), to
:func:`conformance.runner.run_target`, which fails the item with :meth:`UserFault.failure`: the exception and the
last frames of its traceback. ``run_target`` also fails the item for such an exception raised elsewhere (while
torch compiles a fake, say) with :func:`fault_failure`.

A real interrupt must still stop the run: :func:`real_interrupt` tells a ``KeyboardInterrupt`` from Ctrl-C (or
from a signal handler that turns a signal into one) from a ``KeyboardInterrupt`` raised by user code. In the
isolation worker SIGINT is ignored, so every ``KeyboardInterrupt`` there comes from user code; in the pytest
process the plugin's run installs :func:`watch_interrupts`, a SIGINT handler that records a real interrupt in
:data:`SIGINT` before raising ``KeyboardInterrupt``. (Signal handlers belong to the process, so what they saw is
kept per process, in :data:`SIGINT`, not handed around.)
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from .results import Failure

__all__ = ["UserFault", "real_interrupt", "raise_fault", "fault_failure", "watch_interrupts", "ignore_interrupts", "SIGINT",
           "RULES"]

#: The rule ids of the failures made here (:attr:`~conformance.core.results.Failure.rule`).
RULES = {"user.base-exception": "user code raised a BaseException that is not an Exception in a call the plugin "
                                "made into it (UserFault.failure)",
         "user.base-exception-outside-call": "user code raised a BaseException that is not an Exception outside the "
                                             "calls the plugin wraps, e.g. while torch compiled a fake "
                                             "(fault_failure)"}

_FRAMES = 5  # frames of the traceback shown (the innermost ones)


class _Watch:
    """What this process knows about SIGINT: ``seen`` is ``None`` while nobody watches it (every
    ``KeyboardInterrupt`` counts as real), ``False`` while :func:`watch_interrupts` watches and none came, ``True``
    once one came."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: bool | None = None


#: The process's SIGINT watch (see :func:`watch_interrupts`).
SIGINT = _Watch()


def _what(exc: BaseException) -> str:
    """``SystemExit: 3``, or just ``KeyboardInterrupt`` for an exception without a message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text and text[0] else type(exc).__name__


def _traceback(exc: BaseException) -> tuple[str, ...]:
    """The last :data:`_FRAMES` frames of ``exc``'s traceback (without the ``^^^`` marker lines) and its line."""
    frames = traceback.extract_tb(exc.__traceback__)[-_FRAMES:]
    lines = [ln.rstrip() for chunk in traceback.format_list(frames) for ln in chunk.splitlines() if ln.strip(" ^~")]
    return ("traceback (most recent call last):", *lines,
            *[ln.rstrip() for ln in traceback.format_exception_only(type(exc), exc) if ln.strip()])


class UserFault(BaseException):
    """A ``BaseException`` that is not an ``Exception`` (``error``), raised by user code in the call ``label`` on
    ``side`` (``"fake"`` or ``"C++"``: a call on the real object, whose Python parts, such as an op implemented in
    Python, are user code too). A ``BaseException`` itself, so that check code catching ``Exception`` lets it
    through to :func:`conformance.runner.run_target`."""

    def __init__(self, error: BaseException, label: str, side: str):
        super().__init__(f"{label} raised {_what(error)}")
        self.error, self.label, self.side = error, label, side

    def failure(self) -> Failure:
        """The item's failure: which side raised what in which call, and the last frames of its traceback."""
        what = _what(self.error)
        who = "the fake" if self.side == "fake" else "user code called by the C++ side"
        summary = (f"{who} raised {what} in {self.label}: not an Exception, so it would stop the program that traces "
                   "or runs the call instead of failing that call; raise an Exception")
        text = f"raised {what} (not an Exception)"
        details = _traceback(self.error)
        if self.side == "fake":
            return Failure(summary, fake=text, details=details, rule="user.base-exception")
        return Failure(summary, cpp=text, details=details, rule="user.base-exception")


def real_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a real interrupt that must stop the run (re-raise it) rather than a ``KeyboardInterrupt``
    raised by user code: a ``KeyboardInterrupt`` after :func:`watch_interrupts` saw SIGINT, one raised by a Python
    signal handler (e.g. SIGTERM turned into one), or any ``KeyboardInterrupt`` where nobody watches SIGINT (a
    script). In the isolation worker (SIGINT ignored) and under a watched run, a ``KeyboardInterrupt`` raised by
    user code is not one."""
    if not isinstance(exc, KeyboardInterrupt):
        return False
    if _raised_by_signal_handler(exc):
        return True
    return SIGINT.seen is None or SIGINT.seen


def _raised_by_signal_handler(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc``'s traceback is a Python signal handler installed now."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    for signum in (signal.SIGINT, getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)):
        if signum is None:
            continue
        try:
            handler = signal.getsignal(signum)
        except (ValueError, OSError):
            continue
        if getattr(handler, "__code__", None) is code:
            return True
    return False


def raise_fault(exc: BaseException, label: str | Callable[[], str] | None, side: str) -> NoReturn:
    """For an ``except BaseException`` around a call into user code, with ``exc`` not an ``Exception``: re-raise a
    real interrupt (:func:`real_interrupt`) or a :class:`UserFault` from a nested call as they are, else raise a
    :class:`UserFault` for ``exc`` in the call ``label`` (text, or a function returning it) on ``side``."""
    if isinstance(exc, UserFault) or real_interrupt(exc):
        raise exc
    try:
        text = label() if callable(label) else label
    except Exception:  # noqa: BLE001 - a label that cannot be built must not hide the fault
        text = None
    raise UserFault(exc, text or "a call into user code", side) from None


def fault_failure(exc: BaseException) -> Failure:
    """The failure of a check that a ``BaseException`` that is not an ``Exception`` stopped outside the calls
    :func:`raise_fault` wraps (e.g. in a fake while torch compiles it): the exception, the innermost frame of user
    code it came from, and the last frames of its traceback."""
    frame = _innermost_user_frame(exc)
    where = f" in {frame}" if frame else ""
    return Failure(f"the check could not complete: user code raised {_what(exc)}{where}: not an Exception, so it "
                   "would stop the program that traces or runs the call; a fake class, an op's fake or an example "
                   "factory must raise an Exception", details=_traceback(exc),
                   rule="user.base-exception-outside-call")


def _innermost_user_frame(exc: BaseException) -> str | None:
    """``file.py:line in function`` of the innermost traceback frame outside torch, hypothesis, this plugin and the
    standard library, or ``None``."""
    skip = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(os.__file__)]  # the package
    for name in ("torch", "hypothesis"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            skip.append(os.path.dirname(os.path.abspath(module.__file__)))
    found = None
    for summary in traceback.extract_tb(exc.__traceback__):
        path = os.path.abspath(summary.filename)
        if not any(path.startswith(s + os.sep) for s in skip):
            found = f"{os.path.basename(path)}:{summary.lineno} in {summary.name}"
    return found


def ignore_interrupts() -> None:
    """For a process that ignores SIGINT for good (an isolation worker: Ctrl-C is its supervisor's to handle): no
    SIGINT can arrive, so every ``KeyboardInterrupt`` that is not raised by a signal handler comes from user code."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    SIGINT.seen = False


def watch_interrupts() -> Callable[[], None]:
    """Install a SIGINT handler that records a real interrupt (``SIGINT.seen = True``) before raising
    ``KeyboardInterrupt`` (or calling the handler it replaces), so :func:`real_interrupt` tells Ctrl-C from a
    ``KeyboardInterrupt`` raised by user code. Returns the function that puts the previous handler back. Installs
    nothing (``SIGINT.seen`` stays ``None``: every ``KeyboardInterrupt`` counts as real) outside the main
    thread or where SIGINT has no Python handler; where SIGINT is ignored, nothing can interrupt, so every
    ``KeyboardInterrupt`` comes from user code."""
    try:
        previous = signal.getsignal(signal.SIGINT)
    except (ValueError, OSError):
        return lambda: None
    if previous is signal.SIG_IGN:  # nothing can interrupt: a KeyboardInterrupt comes from user code
        before, SIGINT.seen = SIGINT.seen, False

        def unignore() -> None:
            SIGINT.seen = before

        return unignore
    if not callable(previous):  # SIG_DFL, or a handler installed from C: leave it alone
        return lambda: None

    def on_sigint(signum, frame):
        SIGINT.seen = True
        if previous is signal.default_int_handler:
            raise KeyboardInterrupt
        return previous(signum, frame)

    try:
        signal.signal(signal.SIGINT, on_sigint)
    except (ValueError, OSError):  # not the main thread
        return lambda: None
    before, SIGINT.seen = SIGINT.seen, False

    def restore() -> None:
        SIGINT.seen = before
        try:
            if signal.getsignal(signal.SIGINT) is on_sigint:
                signal.signal(signal.SIGINT, previous)
        except (ValueError, OSError):
            pass

    return restore
