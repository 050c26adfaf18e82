"""Input sizes of the coverage matrix's ``dynamic`` row (:mod:`conformance.matrix.torchbind.rows`).

torch specialises a dimension of size 0 or 1 even when it is marked dynamic (``torch.export.Dim.AUTO`` records
the hint 1 as a constant, ``torch._dynamo.maybe_mark_dynamic`` likewise), so a program traced on a batch of one
refuses every other batch size: the row would fail a correct fake on torch's guard. Its first run therefore starts
from size 2 on dim 0, and its second grows dim 0 further.
"""

from __future__ import annotations

import torch

from ...engine.values import Value

__all__ = ["dynamic_inputs"]


def _sized(value: Value, copies: int) -> Value:
    """``value``'s tensor repeated ``copies`` times along dim 0 (``value`` itself for one copy)."""
    return value if copies == 1 else Value(f"torch.cat([{', '.join([value.code] * copies)}])", value.extra)


def dynamic_inputs(xs: tuple[Value, ...]) -> list[tuple[tuple[Value, ...], tuple[Value, ...], tuple[str, ...]]]:
    """Run 0 and run 1 inputs of the dynamic row, with notes, best first: every tensor of size 1 on dim 0 doubled
    for run 0 (torch specialises sizes 0 and 1 — ``Dim.AUTO``'s ``hint = 1`` case — so a program traced on size 1
    refuses any other) and run 1 growing dim 0 further; then, for a class whose eager run rejects those sizes,
    the inputs as drawn, saying so."""
    ones = [i for i, v in enumerate(xs) if _dim0(v) == 1]
    first = tuple(_sized(v, 2) if i in ones else v for i, v in enumerate(xs))
    second = tuple(_sized(v, 3 if i in ones else 2) if (_dim0(v) or 0) > 0 else v for i, v in enumerate(xs))
    options = [(first, second, ())]
    if ones:
        drawn = tuple(_sized(v, 2) if (_dim0(v) or 0) > 0 else v for v in xs)
        options.append((xs, drawn, (f"the first run's input x{ones[0]} keeps size 1 on dim 0, which torch "
                                     "specialises (a program traced on it refuses other sizes): eager rejects "
                                     "the program with that input doubled",)))
    return options


def _dim0(value: Value) -> int | None:
    t = value.make()
    return t.shape[0] if isinstance(t, torch.Tensor) and t.dim() > 0 else None
