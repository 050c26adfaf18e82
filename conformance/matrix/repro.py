"""What the reproducers of failed matrix cells of both kinds share (:func:`judged_run`): eager's runs, the program
prepared through the cell's backend with the backend's own lines (:attr:`conformance.matrix.backends.Backend.script`),
the backend's runs, both printed, and the script's own verdict.

A kind's script (:mod:`conformance.matrix.torchbind.repro`, :mod:`conformance.matrix.custom.repro`) defines the row's
``Program`` and, before these lines, what they call: ``make_first()`` (a new object in the state the program is
traced with), ``module(obj)`` (the program as an ``nn.Module``), ``args(obj, run)`` (``forward``'s arguments of run
``run``, whose object is ``obj``) and ``run_twice(program, obj)`` (the row's runs of ``program``, the first on
``obj``: ``(outputs, states)``, the objects' states read after each run). A backend's lines may rebind ``expected``
the same way (the autocast column makes eager's runs under its autocast).

The script judges itself (:mod:`conformance.engine.reproducers`): it prints ``no disagreement reproduced`` when the
backend gives eager's outputs and leaves the objects as eager does (tensors by ``torch.testing.assert_close``,
other values by type and ``==``). A backend that raises makes the script raise at the same step.
"""

from __future__ import annotations

from ..engine.reproducers import NOT_REPRODUCED
from .backends import Backend

__all__ = ["judged_run", "COMPARE"]

#: ``same(a, b)``: whether two ``run_twice`` results agree, leaf by leaf.
COMPARE = [
    "def same(a, b):",
    "    a, b = pytree.tree_leaves(a), pytree.tree_leaves(b)",
    "    if len(a) != len(b):",
    "        return False",
    "    for x, y in zip(a, b):",
    "        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):",
    "            if not isinstance(y, torch.Tensor):",
    "                return False",
    "            if not isinstance(x, torch.Tensor):  # AOTInductor returns a 0-dim tensor for an int",
    "                x, y = torch.tensor(x), y.reshape(())",
    "            try:",
    "                torch.testing.assert_close(y, x, equal_nan=True, check_dtype=x.dim() > 0)",
    "            except AssertionError:",
    "                return False",
    "        elif type(x) is not type(y) or x != y:",
    "            return False",
    "    return True",
    "",
]


def judged_run(backend: Backend, dims: str, start: str, held: tuple[str, str] | None = None) -> list[str]:
    """The lines after a kind's definitions: eager's runs (``expected``) on a first object, the program traced with
    another (``traced``, ``example``; ``DYNAMIC`` is ``dims``, the source of its ``dynamic_shapes``) through
    ``backend``'s lines, then its runs (``got``) with ``start`` (the source of the first run's object), or, given
    ``held`` (a line binding ``held``, and an expression choosing between it and ``start``), with the object that
    expression gives; both printed, and :data:`~conformance.engine.reproducers.NOT_REPRODUCED` when they agree."""
    return ["first = make_first()",
            "expected = run_twice(module(first), first)",
            "",
            "traced = make_first()",
            "example = args(traced, 0)",
            f"DYNAMIC = {dims}",
            *backend.script,
            f"start = {start}",
            *([held[0]] if held else []),
            f"got = run_twice(program, {held[1] if held else 'start'})",
            "print('eager:  ', expected)",
            f"print('{backend.name}:', got)",
            "", *COMPARE,
            "if same(expected, got):",
            f"    print({NOT_REPRODUCED!r})"]
