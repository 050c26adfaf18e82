"""What a call writes: the arguments its schema declares written, observed beside its result, and the tensor
arguments it changed that its schema does not declare written.

Rule source: ``torch.library.opcheck``'s schema test (``test_schema``, ``torch/_subclasses/schema_check_mode.py``
``SchemaCheckMode``: "Argument ... is not defined as mutable but was mutated"). A schema declares an argument
written with a write alias, ``Tensor(a!) out`` (``torch._C.Argument.alias_info.is_write``; ``mutates_args=`` of
``torch.library.custom_op``). torch.compile and export functionalize an op by its schema: an argument it does not
declare written is taken as unchanged, so a compiled program may read it before the op wrote it (inductor computes
``x * 1`` from the old ``x`` where eager reads the written one). Each tensor is compared with its copy from before
the call by shape, dtype and value (NaN equal to NaN: ``torch.testing.assert_close`` with no tolerance).

An out-variant op (``Tensor(a!) out`` written, ``-> ()`` returned) gives its result through the arguments it
writes: :func:`observed` is what every comparison of two calls of it compares (its result and each written
argument after the call), for both kinds of class.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree

from .reproducers import judging_lines

__all__ = ["declared_writes", "Snapshot", "reproducer_lines", "RETURNED", "written_key", "observed", "observed_source"]


def declared_writes(schema: torch.FunctionSchema) -> frozenset[str]:
    """The names of the arguments ``schema`` declares written (``Tensor(a!)``)."""
    return frozenset(a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write)


#: The key of an op's own result among the outputs of an op that writes arguments (:func:`observed`).
RETURNED = "returned"


def written_key(name: str) -> str:
    """The key of the written argument ``name`` among an op's observed outputs: ``"out (written)"``."""
    return f"{name} (written)"


def observed(schema: torch.FunctionSchema, result: Any, pos: Sequence[Any], kw: dict[str, Any]) -> Any:
    """What one call of the op of ``schema`` gave: its ``result`` as it is, or, for an op whose schema declares
    arguments written (:func:`declared_writes`), ``{"returned": result, "out (written)": <the argument after the
    call>, ...}`` in schema order, so that every comparison of two calls compares what they wrote. ``pos`` and
    ``kw`` are the op's full arguments as it was called (objects included, at their schema positions)."""
    writes = declared_writes(schema)
    if not writes:
        return result
    bound, i = {}, 0
    for a in schema.arguments:
        if a.name in kw:
            bound[a.name] = kw[a.name]
        elif not a.kwarg_only:
            if i < len(pos):
                bound[a.name] = pos[i]
            i += 1
    return {RETURNED: result, **{written_key(a.name): bound[a.name] for a in schema.arguments
                                 if a.name in writes and a.name in bound}}


def observed_source(call: str, written: Sequence[tuple[str, str]]) -> str:
    """The source of what :func:`observed` gives for ``call`` (the op's call, or a name holding its result):
    ``call`` itself, or with ``written`` (``(argument name, source holding it after the call)``) the dict
    ``{'returned': <call>, 'out (written)': <source>, ...}``, its values evaluated in order, after the call."""
    if not written:
        return call
    return "{" + ", ".join([f"{RETURNED!r}: {call}", *(f"{written_key(n)!r}: {v}" for n, v in written)]) + "}"


def _same(before: torch.Tensor, after: torch.Tensor) -> bool:
    if before.shape != after.shape or before.dtype != after.dtype or before.device != after.device:
        return False
    try:
        torch.testing.assert_close(after, before, rtol=0, atol=0, equal_nan=True)
    except AssertionError:
        return False
    except Exception:  # noqa: BLE001 - a tensor that cannot be compared by value (sparse, meta): shape and dtype said
        return True
    return True


def reproducer_lines(call: str, names: Sequence[str]) -> list[str]:
    """The lines of a reproducer script that show what :class:`Snapshot` found, once the script has bound ``args``
    (a list of the call's positional values, ``names`` their schema names): copy the tensors, run ``call`` (source
    over ``args``), name the arguments it changed, and give the script's verdict
    (:func:`~conformance.engine.reproducers.judging_lines`)."""
    return ["before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]", call,
            f"names = {list(names)!r}",
            "changed = [n for n, a, b in zip(names, args, before) if isinstance(a, torch.Tensor) "
            "and not torch.equal(a, b)]", "print('arguments changed by the call:', changed)",
            *judging_lines("changed")]


class Snapshot:
    """Copies of the tensors of some named arguments, taken before a call: :meth:`changed` names those the call
    changed. ``named``: ``(argument name, value)`` pairs (a value may be a list or tuple of tensors; other values
    are ignored); names in ``skip`` (the declared writes) are not copied."""

    def __init__(self, named: Iterable[tuple[str, Any]], skip: Iterable[str] = ()):
        skipped = set(skip)
        self._kept: list[tuple[str, list[torch.Tensor], list[torch.Tensor]]] = []
        for name, value in named:
            if name in skipped:
                continue
            leaves = [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]
            if leaves:
                self._kept.append((name, leaves, [t.detach().clone() for t in leaves]))

    def values(self, name: str) -> tuple[Any, Any]:
        """The first tensor of argument ``name`` as it was before the call (its copy) and as it is now."""
        for kept, now, before in self._kept:
            if kept == name:
                return before[0], now[0]
        raise KeyError(name)

    def changed(self) -> list[str]:
        """The names whose tensors now differ from their copies, in argument order."""
        return [name for name, now, before in self._kept
                if any(not _same(b, n.detach()) for b, n in zip(before, now))]
