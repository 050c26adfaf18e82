"""The standalone reproducer of a :class:`~conformance.torchbind.differential.machine.Drift` (:func:`repro_script`).

The script's helper functions (``step``, ``observe``, ...) are the text of :mod:`.repro_runtime`, a real module of
this package (so it is linted and readable), inlined into each script rather than imported: a reproducer must
run without this plugin installed.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from ..context import ClassContext, _extra_defs
from ...engine.reproducers import NOT_REPRODUCED
from .machine import Drift

__all__ = ["repro_script"]

_RUNTIME = Path(__file__).with_name("repro_runtime.py")


@functools.cache
def _runtime_lines() -> tuple[str, ...]:
    """The lines of ``repro_runtime.py`` after its module docstring (and the comments above it), without the
    blank lines around them."""
    text = _RUNTIME.read_text(encoding="utf-8")
    docstring = ast.parse(text).body[0]
    lines = text.splitlines()[docstring.end_lineno:]
    return tuple("\n".join(lines).strip("\n").splitlines())


def repro_script(ctx: ClassContext, drift: Drift) -> str:
    """A standalone Python script that loads the user's libraries (the ``--torchbind-load`` lines), builds the
    example object twice, fakifies one copy, replays ``drift.steps`` on both sides — calling the observers after
    each step as the test did — and prints every result, marking the disagreement ``<-- DIFFERS``.

    ``drift`` is a :class:`~conformance.torchbind.differential.machine.Drift` found on ``ctx``'s class. Returns
    the script's text; raises ``OSError`` only if the package's ``repro_runtime.py`` cannot be read."""
    body = []
    for _rule, args in drift.steps:
        body += _extra_defs(args)
    body += _runtime_lines()
    body.append("")
    rejected = drift.rejected or [False] * len(drift.steps)
    for n, ((rule_, args), mutated, no) in enumerate(zip(drift.steps, drift.mutating_steps, rejected), start=1):
        pos = "".join(f"{v.code}, " for v in args.args)
        kw = ", ".join(f"{k!r}: {v.code}" for k, v in args.kwargs)
        call = f"lambda o, a, k: {rule_.callee.spread_source('o', 'a', 'k')}"
        if no:  # C++ rejected it in the test: run on the C++ object only, as the test did
            body.append(f"step({n}, {rule_.code(args)!r}, {call}, lambda: (({pos}), {{{kw}}}), cpp_only=True)")
            continue
        body.append(f"step({n}, {rule_.code(args)!r}, {call}, lambda: (({pos}), {{{kw}}}))")
        if drift.observers and not (n == len(drift.steps) and drift.phase in ("call", "alias")):
            body.append(f"observe({n}, {drift.observers!r}, state_changed={mutated})")
    body += [
        "",
        "if differs:",
        "    print(f'DISAGREEMENT: the C++ object and its fake differ at {differs[0]!r}')",
        "else:",
        f"    print({NOT_REPRODUCED!r})",
    ]
    return ctx.repro(drift.example, body)
