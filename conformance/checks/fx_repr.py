"""Check C2: a constant (value) custom class's ``__fx_repr__`` rebuilds an object in the same state.

Rule source: torch.compile bakes a constant object into the generated code as the string ``__fx_repr__`` returns,
evaluated with the globals it names (``get_opaque_obj_repr``, ``torch/_library/opaque_object.py``); torch checks
only that the method exists and returns ``(str, dict)``. So the rebuilt object must have the original's type and
state (``__dict__``, or ``__getstate__``): compared field by field, not with ``==``, since ``__eq__`` may be the
defect. When a custom op takes the class, the failure shows what a compiled program returns with the object
against eager.
"""

from __future__ import annotations

import dataclasses

import torch
from torch._library.opaque_object import get_opaque_obj_repr

from ..custom_context import find_failure, show, state_of
from ..results import Failure
from . import check


def _targets(ctx):
    return [None] if ctx.info.kind == "constant" else []


def _compiled_vs_eager(ctx, recipe) -> tuple[list[str], list[str]]:
    """Details and reproducer lines: each op taking the class, called by a compiled program (dynamo, backend
    ``eager``: the object is rebuilt from its ``__fx_repr__`` in the code dynamo generates) and in eager."""
    details, lines = [], []
    for op in ctx.info.ops:
        try:
            args = find_failure_args(ctx, op)
        except Exception:  # noqa: BLE001 - no arguments: no numbers to show
            continue
        torch._dynamo.reset()
        program = torch.compile(lambda *a, **k: op.op(*a, **k), backend="eager", fullgraph=True)
        try:
            with ctx.calling(f"{op.qualname} on {recipe.code}, compiled and eager"):
                eager = ctx.call_op(op, args, recipe.build())
                compiled = ctx.call_op(op, args, recipe.build(), program)
        except Exception as exc:  # noqa: BLE001 - the rebuilt object may not even work
            details.append(f"{op.qualname}: the compiled program raised {type(exc).__name__}: {exc}")
            continue
        finally:
            torch._dynamo.reset()
        details.append(f"{ctx.call_code(op, args, 'obj')} with obj = {recipe.code}: eager {show(eager)}, "
                       f"compiled {show(compiled)}")
        lines += [f"program = torch.compile(lambda o: {ctx.call_code(op, args, 'o')}, backend='eager', "
                  "fullgraph=True)", f"print('eager:   ', {ctx.call_code(op, args, 'obj')})",
                  "print('compiled:', program(obj))"]
    return details, lines


def find_failure_args(ctx, op):
    """The first fixed argument set of ``op`` (the object's position left out)."""
    return ctx.arguments.fixed(op.qualname, op.schema, op.positions[0], limit=1)[0]


def _violation(ctx, recipe) -> Failure | None:
    with ctx.calling(lambda: f"__fx_repr__ of {recipe.code}, evaluated"):
        obj = recipe.build()
        text, names = get_opaque_obj_repr(obj)
        try:
            rebuilt = eval(text, dict(names))  # noqa: S307 - what torch's generated code does with it
        except Exception as exc:  # noqa: BLE001 - the rule's failure
            return Failure(f"__fx_repr__ returned {text!r}, which does not evaluate with the globals it names "
                           f"({', '.join(names) or 'none'}): {type(exc).__name__}: {exc}", target="__fx_repr__",
                           example=f"obj = {recipe.code}",
                           repro=ctx.repro([f"obj = {recipe.code}", "text, names = obj.__fx_repr__()",
                                            "print(text, names)", "print(eval(text, dict(names)))"]))
        before, after = state_of(obj), state_of(rebuilt) if type(rebuilt) is type(obj) else None
    if after is None:
        diffs = [f"type: {type(obj).__qualname__} rebuilt as {type(rebuilt).__qualname__}"]
    else:
        diffs = [f"{k}: {before.get(k, '(missing)')!r} rebuilt as {after.get(k, '(missing)')!r}"
                 for k in sorted(set(before) | set(after), key=str) if k not in before or k not in after
                 or not _same(before[k], after[k])]
    if not diffs:
        return None
    fields = ", ".join(d.split(":")[0] for d in diffs)
    return recipe, Failure(f"__fx_repr__ does not rebuild the object: {text!r} evaluates to an object that differs in "
                   f"{fields}; torch.compile bakes that rebuilt object into the generated code", target="__fx_repr__",
                   example=f"obj = {recipe.code}", details=tuple(diffs),
                   repro=ctx.repro([f"obj = {recipe.code}", "text, names = obj.__fx_repr__()",
                                    "print('__fx_repr__:', text)", "print('state:  ', vars(obj))",
                                    "print('rebuilt:', vars(eval(text, dict(names))))"]))


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and bool(torch.equal(a, b)))
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - incomparable values are not the same
        return False


@check("fx_repr", targets=_targets, kinds=("custom",))
def fx_repr(ctx, _target) -> list[Failure]:
    """A constant custom class: evaluating __fx_repr__'s string rebuilds an object of the same type and state."""
    finding = find_failure(ctx.objects(), lambda recipe: _violation(ctx, recipe), ctx.settings.examples)
    if finding is None:
        return []
    if isinstance(finding, Failure):  # __fx_repr__ does not even evaluate
        return [finding]
    recipe, failure = finding  # confirmed once, after shrinking: what compiled programs do with the object
    numbers, lines = _compiled_vs_eager(ctx, recipe)
    return [dataclasses.replace(failure, details=failure.details + tuple(numbers),
                                repro=failure.repro.rstrip("\n") + "\n" + "\n".join(lines) + "\n")]
