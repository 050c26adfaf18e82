"""The guards of a symbolic class's op, judged through inductor too (rule ``guards.unguarded-change``).

Rule source: torch.compile reuses a program for any object whose ``guard_fn`` values equal those of the object it
compiled for (``register_custom_class``'s ``guard_fn``, ``torch/_library/opaque_object.py``). Through dynamo's
``eager`` backend a reused graph calls the op again, so it returns what the op returns now and a ``guard_fn`` that
leaves out a field the op's output depends on goes unseen; inductor compiles the op as an extern kernel and asserts
its output has the size and stride it traced (``assert_size_stride`` in the generated code), and it may plan the
memory and the kernels after it by them. So a pair of objects with equal ``guard_fn`` values in different states,
on which eager's results differ, is run once more through inductor: the program compiled for the first object,
then called with the second, must give eager's result for the second.

One inductor compile per item, only when such a pair exists among the example objects and the drawn ones (the
search's objects): the pairs are found by eager calls alone.
"""

from __future__ import annotations

from typing import Any

from ....core.evidence import record
from ....core.results import Failure
from ....custom.context import CustomClassContext, show
from ....custom.discovery import CustomOpInfo
from ....custom.state import same_value, twin_differences
from ....engine import torch_api
from ....engine.compare import value_differences

__all__ = ["stale_on_inductor", "PAIR_OBJECTS"]

#: Objects among which a pair with equal guard_fn values is looked for (the examples first, then drawn ones).
PAIR_OBJECTS = 12


def _eager(run, eager_fn, recipe) -> Any:
    try:
        return run(eager_fn, recipe.build())
    except Exception:  # noqa: BLE001 - an object the op rejects is no input of the program
        return None


class _Built:
    """A recipe of an object already built: its ``build()`` gives that object."""

    def __init__(self, obj: Any):
        self.obj = obj

    def build(self) -> Any:
        return self.obj


def _pair(ctx: CustomClassContext, run, eager_fn) -> tuple[Any, Any, Any, Any] | None:
    """``(first, second, eager on first, eager on second)``: two recipes, each building objects equal to each other
    (twins), whose ``guard_fn`` values are equal, whose states differ, and on which eager's results differ; ``None``
    when there is none among the objects tried."""
    guard_fn = ctx.info.guard_fn
    recipes = [*ctx.example_recipes(), *ctx.drawn(PAIR_OBJECTS, f"{ctx.info.name}:guards:inductor")][:PAIR_OBJECTS]
    seen: list[tuple[Any, Any, Any]] = []  # (recipe, guard values, eager result)
    for recipe in recipes:
        try:
            obj = recipe.build()
            if twin_differences(obj, recipe.build()):  # not built twice equal: eager on a twin stands for nothing
                continue
            guards = guard_fn(obj) if guard_fn is not None else None
        except Exception:  # noqa: BLE001 - the guards check reports a guard_fn or a constructor that raises
            continue
        result = _eager(run, eager_fn, recipe)
        if result is None:
            continue
        for other, other_guards, other_result in seen:
            if other.code == recipe.code or not same_value(guards, other_guards) or \
                    not twin_differences(other.build(), recipe.build()):
                continue
            if value_differences(other_result, result, "result"):
                return other, recipe, other_result, result
        seen.append((recipe, guards, result))
    return None


def stale_on_inductor(ctx: CustomClassContext, op: CustomOpInfo, reader) -> Failure | None:
    """The failure of a program compiled with inductor for one object and reused for another with equal
    ``guard_fn`` values (see the module docstring), or ``None`` (no such pair, or inductor gives eager's result)."""
    eager_fn, run, pc = reader
    found = _pair(ctx, run, eager_fn)
    if found is None:
        return None
    first, second, _, _ = found
    target, twin = second.build(), second.build()  # the compiled call on one, eager on its twin
    expected = _eager(run, eager_fn, _Built(twin))
    torch_api.dynamo_reset()
    try:
        import torch

        program = torch.compile(eager_fn, backend="inductor", fullgraph=True)
        with ctx.calling(lambda: f"a program calling {op.qualname} compiled with inductor for {first.code}"):
            try:
                run(program, first.build())
            except Exception:  # noqa: BLE001 - not compilable with inductor: the matrix's inductor cells say why
                return None
        with ctx.calling(lambda: f"the inductor program compiled for {first.code}, called with {second.code}"):
            try:
                got, raised = run(program, target), None
            except Exception as exc:  # noqa: BLE001 - eager returned: the compiled program must too
                got, raised = None, exc
    finally:
        torch_api.dynamo_reset()
    record("result", 1)
    if raised is None and not value_differences(expected, got, "result"):
        return None
    guards = ctx.info.guard_fn(second.build()) if ctx.info.guard_fn is not None else None
    fields = ", ".join(repr(f) for f in twin_differences(first.build(), second.build()))
    said = f"{type(raised).__name__}: {str(raised).splitlines()[0][:300]}" if raised is not None else show(got)
    return Failure(
        f"a program calling {op.qualname} compiled with inductor for one object is reused for another whose "
        f"guard_fn values are the same ({guards!r}) though it differs in {fields}, and gives another result than "
        "eager: guard_fn leaves out what the op's output depends on (dynamo's eager backend calls the op again and "
        "hides it; inductor keeps what it traced)",
        target=op.short_name, example=f"obj = {first.code}\nother = {second.code}",
        details=(f"eager on other: {show(expected)}", f"inductor on other: {said}"),
        repro=ctx.repro([*pc.setup, f"obj = {first.code}", f"other = {second.code}",
                         f"program = torch.compile({pc.program}, backend='inductor', fullgraph=True)",
                         f"print('compiled for obj:', {pc.call('program', 'obj')})",
                         f"print('eager on other:', {pc.call(f'({pc.program})', 'other')})",
                         f"print('compiled on other:', {pc.call('program', 'other')})"]),
        rule="guards.unguarded-change")
