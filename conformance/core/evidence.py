"""What a verdict rests on: every comparison a check makes is counted, so that the engine — not each check — can
refuse a pass that compared nothing (the evidence rule).

The comparison primitives (:mod:`conformance.engine.compare`: a real result against a fake one, two real states, eager
against a compiled program) and the checks that compare in other ways (a fake method's signature against its C++
schema, a flattened state rebuilt by ``__obj_unflatten__``) call :func:`record` with what they compared. The engine
(:func:`conformance.runner.run_target`) runs each check inside :func:`collecting`; a check that returns without a
failure and without one recorded comparison is turned into a skip that says so and what the user can give.

:func:`record` outside :func:`collecting` does nothing (a script calling a primitive directly). Nested calls of the
primitives (a container compared element by element) count once: :func:`counted` marks a function as a primitive.
Imports nothing of the project and nothing of torch.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .results import Evidence

__all__ = ["record", "replay", "collecting", "counted", "uncounted", "evidence_so_far", "Evidence"]

_CURRENT: contextvars.ContextVar[Evidence | None] = contextvars.ContextVar("conformance_evidence", default=None)
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("conformance_evidence_depth", default=0)

F = TypeVar("F", bound=Callable[..., Any])


def record(what: str, count: int = 1) -> None:
    """Count ``count`` comparisons of ``what`` (a noun in the singular: ``"result"``, ``"state"``, ``"output"``,
    ``"signature"``) in the evidence being collected, if any. Raises nothing."""
    evidence = _CURRENT.get()
    if evidence is not None and count > 0:
        evidence.add(what, count)


def evidence_so_far() -> int:
    """How many comparisons the evidence being collected holds (0 outside :func:`collecting`): a check that can
    say more precisely than the engine why it compared nothing asks before it returns."""
    evidence = _CURRENT.get()
    return 0 if evidence is None else evidence.total


def replay(evidence: Evidence) -> None:
    """Record every comparison of ``evidence`` again in the evidence being collected: a result computed once and
    reused (a matrix cell whose program another row already compiled and ran) rests on what was compared then."""
    for what, count in evidence.counts.items():
        record(what, count)


@contextlib.contextmanager
def collecting() -> Iterator[Evidence]:
    """Collect the comparisons made inside the ``with`` block into a new :class:`Evidence`, which it yields. Blocks
    nest: an inner one collects apart from the outer one (one check's verdict, while another's runs around it)."""
    evidence = Evidence()
    token = _CURRENT.set(evidence)
    depth = _DEPTH.set(0)
    try:
        yield evidence
    finally:
        _DEPTH.reset(depth)
        _CURRENT.reset(token)


@contextlib.contextmanager
def uncounted() -> Iterator[None]:
    """Inside the ``with`` block the comparison primitives (:func:`counted`) record nothing: a comparison a check
    makes only to choose its inputs (whether an input shows an object's field at all), on which no verdict rests.
    Direct :func:`record` calls still count."""
    token = _DEPTH.set(_DEPTH.get() + 1)
    try:
        yield
    finally:
        _DEPTH.reset(token)


def counted(what: str | Callable[..., str]) -> Callable[[F], F]:
    """Decorate a comparison primitive so that each outermost call records one comparison of ``what`` (or of
    ``what(*args, **kwargs)``, e.g. the root of a ``where`` argument). Calls made while it runs (recursion into a
    container's elements, one primitive built on another) are not counted again."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            depth = _DEPTH.get()
            if depth == 0:
                record(what(*args, **kwargs) if callable(what) else what)
            token = _DEPTH.set(depth + 1)
            try:
                return func(*args, **kwargs)
            finally:
                _DEPTH.reset(token)

        return wrapper  # type: ignore[return-value]

    return decorate
