"""How a known torch limitation is matched by evidence: the :class:`Limitation` entry type, and where an exception
was raised in torch (:func:`raised_at`, :func:`failure_chain`). The table of entries is
:data:`conformance.matrix.limitations.LIMITATIONS`.

A cell is still run. It is *unsupported* only when an entry applies to its backend and scenario and the cell's
own failure matches the entry by evidence: for an exception, the same exception type raised at the same site in
torch's source (the innermost torch frame of its traceback, by file and function, so line numbers may move
between torch versions; for a dynamo graph break, its registered ``gb_type``), optionally reached through a given
frame; for a wrong result, the plugin's own comparison (its first difference from eager). A message is never
enough. Any other failure is a real ✗ with its own error, and a cell an entry covers that passes is a pass (the
limitation no longer holds there).
"""

from __future__ import annotations

import dataclasses
import os
import re
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["Limitation", "raised_at", "failure_chain", "explicit_dunders"]

def failure_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling (``__cause__`` / ``__context__``),
    outermost first, each once."""
    chain: list[BaseException] = []
    while exc is not None and all(exc is not seen for seen in chain):
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def _torch_frames(exc: BaseException) -> list[str]:
    """``"file.py:function"`` below the ``torch`` package of each frame of ``exc``'s traceback, outermost first."""
    frames = []
    for frame in traceback.extract_tb(exc.__traceback__):
        parts = frame.filename.replace(os.sep, "/").split("/torch/")
        if len(parts) > 1:
            frames.append(f"{parts[-1]}:{frame.name}")
    return frames


def raised_at(exc: BaseException) -> str:
    """Where torch raised ``exc``, for messages: ``"RuntimeError raised in torch/fx/graph.py lint"`` (the
    innermost torch frame of the innermost exception of its chain), or its type alone outside torch."""
    inner = failure_chain(exc)[-1]
    frames = _torch_frames(inner)
    where = f" raised in torch/{frames[-1].replace(':', ' ')}" if frames else ""
    graph_break = getattr(inner, "gb_type", None)
    return f"{type(inner).__name__}{where}" + (f" (dynamo graph break '{graph_break}')" if graph_break else "")


@dataclasses.dataclass(frozen=True)
class Limitation:
    """One known torch limitation. Where it applies: ``backends`` (backend names); ``placement``: ``"input"`` (a
    TorchBind object is an input of the program: the scenario's object, or another object passed to a method),
    ``"attr"`` (the object is a module attribute) or ``None`` (any); ``returns``: schema return types (e.g.
    ``("str",)``; ``"non-tensor"`` stands for any type without a Tensor in it, e.g. ``int``, ``str[]``,
    ``(int, float)``), one of which some call of the scenario must return, or ``None``; ``dunder``: the scenario
    calls a dunder method by name (``obj.__eq__(other)``, not ``obj == other``); ``kind``: the kind of class
    (``"torchbind"``, or ``"custom"`` for a Python custom class, whose scenarios carry ``class_kind``);
    ``class_kind``: ``"constant"`` or ``"symbolic"`` for a custom-class entry about one of them.

    The evidence a failure must show (:meth:`observe`): an exception of one of the types ``raises`` (its class or a
    base class, by name), somewhere in the failure's chain, whose innermost torch frame is one of ``sites``
    (``"file.py:function"`` below the ``torch`` package), or whose dynamo graph break type is ``graph_break``;
    ``via``: frames (same form) of which one must be on that exception's stack or the stack of one it was raised
    from; ``cpp_check``: for an error raised in torch's C++ code, whose Python site is only the call into it (an
    AOTInductor package's runner), a regex over the text of the C++ check that raised, the one thing that names
    that site (its file is in ``source``); ``confirm(scenario)``: a further check on the class itself, returning
    what it observed or ``None``.
    Or, for a wrong result, ``difference``: a regex over the cell's first difference from eager (the plugin's own
    comparison, :meth:`conformance.matrix.cell.Rows.run_cell`), ``observed`` saying what that shows.

    ``received(exc, scenario)``: a further check on the exception that matched, reading what torch passed where it
    raised (a frame's arguments), returning what it observed or ``None``. ``also``: further forms of the same
    limitation's evidence (entries with the same key, reason and source, each with its own ``applies`` and
    evidence: :func:`observation` tries them in order after the entry itself).

    ``reason``: the report's footnote (followed by what was observed); ``source``: where torch states or raises it.
    """

    key: str
    backends: frozenset[str]
    reason: str
    source: str
    raises: tuple[str, ...] = ()
    sites: tuple[str, ...] = ()
    graph_break: str | None = None
    via: tuple[str, ...] = ()
    cpp_check: str | None = None
    confirm: Callable[[Any], str | None] | None = None
    difference: str | None = None
    observed: str = ""
    placement: str | None = None
    returns: tuple[str, ...] | None = None
    dunder: bool = False
    kind: str = "torchbind"
    class_kind: str | None = None
    received: Callable[[BaseException, Any], str | None] | None = None
    also: tuple[Limitation, ...] = ()

    def applies(self, backend: str, scenario) -> bool:
        """Whether the entry covers this backend and scenario at all (before any evidence is looked at)."""
        if backend not in self.backends or getattr(scenario, "kind", "torchbind") != self.kind:
            return False
        if self.class_kind is not None and getattr(scenario, "class_kind", None) != self.class_kind:
            return False
        if self.dunder and not explicit_dunders(scenario):
            return False
        if self.placement == "input" and not scenario.has_object_input:
            return False
        if self.placement == "attr" and scenario.placement != "attr":
            return False
        if self.returns is not None and not any(_returns_match(call.returns, self.returns)
                                                for call in scenario.calls):
            return False
        return True

    def observe(self, failure: BaseException | str, scenario=None) -> str | None:
        """What the cell's own ``failure`` (the exception it raised, or its first difference from eager) shows
        of this limitation -- ``"RuntimeError raised in torch/_higher_order_ops/torchbind.py call_torchbind_impl"``
        -- or ``None`` when it does not match the entry's evidence."""
        if isinstance(failure, str):
            if self.difference is None or not re.search(self.difference, failure, re.S):
                return None
            seen = self.observed
        else:
            seen = self._raised(failure, scenario)
            if seen is None:
                return None
        if self.confirm is not None:
            confirmed = self.confirm(scenario)
            if confirmed is None:
                return None
            seen = f"{seen}; {confirmed}"
        return seen

    def _raised(self, exc: BaseException, scenario=None) -> str | None:
        if not self.raises:
            return None
        chain = failure_chain(exc)
        for depth, candidate in enumerate(chain):
            names = {cls.__name__ for cls in type(candidate).__mro__}
            if not names & set(self.raises):
                continue
            frames = _torch_frames(candidate)
            if self.graph_break is not None:
                if getattr(candidate, "gb_type", None) != self.graph_break:
                    continue
            elif not frames or frames[-1] not in self.sites:
                continue
            if self.via and not any(f in self.via for e in chain[depth:] for f in _torch_frames(e)):
                continue
            if self.cpp_check is not None and not re.search(self.cpp_check, str(candidate)):
                continue
            received = self.received(candidate, scenario) if self.received is not None else ""
            if received is None:
                continue
            seen = raised_at(candidate) if self.graph_break is None else (
                f"{type(candidate).__name__}, dynamo graph break '{self.graph_break}'")
            return f"{seen}; {received}" if received else seen
        return None


def explicit_dunders(scenario) -> list[str]:
    """The dunder methods the scenario calls by name (``obj.__len__()``), not through an operator."""
    return [call.call.callee.name for call in getattr(scenario, "calls", ())
            if call.call.callee.name.startswith("__") and not call.call.callee.operator]


def _returns_match(returned: str, wanted: tuple[str, ...]) -> bool:
    if returned in wanted:
        return True
    return "non-tensor" in wanted and "Tensor" not in returned and returned != "NoneType"
