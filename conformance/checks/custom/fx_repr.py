"""Check C2: a constant (value) custom class's ``__fx_repr__`` rebuilds an object in the same state.

Rule source: torch.compile bakes a constant object into the generated code as the string ``__fx_repr__`` returns,
evaluated with the globals it names and ``torch``, which generated code always has (``get_opaque_obj_repr``,
``torch/_library/opaque_object.py``; ``torch/fx/graph.py``); torch checks only that the method exists and returns
``(str, dict)``. So the rebuilt object must have the original's type and
state (``__dict__``, or ``__getstate__``): compared field by field, not with ``==``, since ``__eq__`` may be the
defect. When a custom op takes the class, the failure shows what a compiled program returns with the object
against eager.
"""

from __future__ import annotations

import dataclasses

import torch
from ...engine.torch_api import get_opaque_obj_repr

from ...core.evidence import record
from ...engine.compare import value_differences
from ...custom.context import show, state_of
from ...custom.state import changed_fields
from ...core.results import Failure
from ...custom.context import CustomClassContext
from .. import with_targets
from ...engine import torch_api


def _targets(ctx):
    return [None] if ctx.info.kind == "constant" else []


def _compiled_vs_eager(ctx, recipe) -> tuple[list[str], list[str]]:
    """Details and reproducer lines: the first call of an op taking the class whose compiled program (dynamo,
    backend ``eager``: the object is rebuilt from its ``__fx_repr__`` in the code dynamo generates) returns
    something else than eager, trying the found object and a few more (the same on every run) with the op's fixed
    argument sets; a line saying so when none differs (the lost state may not matter to these ops)."""
    from ...engine.arguments import draw_fixed
    from ...engine.dynamo_state import dynamo_disabled

    why = dynamo_disabled()
    if why is not None:  # a compiled program would be eager itself: its numbers would show nothing
        return [f"no compiled program's numbers can be shown: {why}"], []
    recipes = [recipe] + [r for r in draw_fixed(ctx.objects(), 4, f"{ctx.info.name}:fx_repr") if r.code != recipe.code]
    # Only objects that do not survive their __fx_repr__ can show a difference.
    recipes = [r for r in recipes if _rebuilt_differently(r)]
    tried = 0
    for op in ctx.info.ops:
        try:
            arg_sets = ctx.arguments.fixed(op.qualname, op.schema, op.positions[0], limit=3)
        except Exception:  # noqa: BLE001 - no arguments: no numbers from this op
            continue
        for candidate in recipes:
            for args in arg_sets:
                torch_api.dynamo_reset()
                program = torch.compile(lambda *a, **k: op.op(*a, **k), backend="eager", fullgraph=True)
                try:
                    with ctx.calling(f"{op.qualname} on {candidate.code}, compiled and eager"):
                        eager = ctx.call_op(op, args, candidate.build())
                        compiled = ctx.call_op(op, args, candidate.build(), program)
                except Exception:  # noqa: BLE001 - arguments the op rejects, or a rebuilt object that fails
                    continue
                finally:
                    torch_api.dynamo_reset()
                tried += 1
                if not value_differences(eager, compiled, "result"):
                    continue
                call = ctx.call_code(op, args, "obj")
                return ([f"{call} with obj = {candidate.code}: eager {show(eager)}, compiled {show(compiled)}"],
                        [f"obj = {candidate.code}",
                         f"program = torch.compile(lambda o: {ctx.call_code(op, args, 'o')}, backend='eager', "
                         "fullgraph=True)", f"print('eager:   ', {call})", "print('compiled:', program(obj))"])
    if not ctx.info.ops:
        return ["no custom op takes the class, so no compiled program's numbers are shown"], []
    return [f"compiled programs gave eager's results in the {tried} calls tried (ops: "
            f"{', '.join(op.qualname for op in ctx.info.ops)}): the lost state did not change these results"], []


def _rebuild(obj) -> tuple[str, dict, list[str]]:
    """``__fx_repr__``'s string and globals for ``obj``, and how the object they evaluate to differs from it (its
    type, or each field: ``offset: 1.0 rebuilt as 0.0``). Raises what evaluating the string raises."""
    text, names = get_opaque_obj_repr(obj)
    rebuilt = eval(text, _codegen_globals(names))  # noqa: S307 - what torch's generated code does
    if type(rebuilt) is not type(obj):
        return text, names, [f"type: {type(obj).__qualname__} rebuilt as {type(rebuilt).__qualname__}"]
    before, after = state_of(obj), state_of(rebuilt)
    record("rebuilt object")
    return text, names, [f"{k}: {before.get(k, '(missing)')!r} rebuilt as {after.get(k, '(missing)')!r}"
                         for k in changed_fields(before, after)]


def _rebuilt_differently(recipe) -> bool:
    """Whether the recipe's object does not survive its ``__fx_repr__`` (or cannot be rebuilt at all)."""
    try:
        return bool(_rebuild(recipe.build())[2])
    except Exception:  # noqa: BLE001
        return False


def _violation(ctx, recipe) -> Failure | None:
    with ctx.calling(lambda: f"__fx_repr__ of {recipe.code}, evaluated"):
        obj = recipe.build()
        try:
            text, names, diffs = _rebuild(obj)
        except Exception as exc:  # noqa: BLE001 - the rule's failure
            text, names = get_opaque_obj_repr(obj)
            return Failure(f"__fx_repr__ returned {text!r}, which does not evaluate with the globals it names "
                           f"({', '.join(names) or 'none'}) and torch: {type(exc).__name__}: {exc}", target="__fx_repr__",
                           example=f"obj = {recipe.code}",
                           repro=ctx.repro([f"obj = {recipe.code}", "text, names = obj.__fx_repr__()",
                                            "print(text, names)", "print(eval(text, {'torch': torch, **names}))"]),
                           rule="fx_repr.not-evaluable")
    if not diffs:
        return None
    fields = ", ".join(d.split(":")[0] for d in diffs)
    return recipe, Failure(f"__fx_repr__ does not rebuild the object: {text!r} evaluates to an object that differs in "
                   f"{fields}; torch.compile bakes that rebuilt object into the generated code", target="__fx_repr__",
                   example=f"obj = {recipe.code}", details=tuple(diffs),
                   repro=ctx.repro([f"obj = {recipe.code}", "text, names = obj.__fx_repr__()",
                                    f"fields = {tuple(sorted(state_of(obj), key=str))!r}",
                                    "print('__fx_repr__:', text)",
                                    "print('state:  ', {f: getattr(obj, f, '(missing)') for f in fields})",
                                    "rebuilt = eval(text, {'torch': torch, **names})",
                                    "print('rebuilt:', {f: getattr(rebuilt, f, '(missing)') for f in fields})"]),
                   rule="fx_repr.rebuilds-differently")


def _codegen_globals(names: dict) -> dict:
    """The globals ``__fx_repr__``'s string is evaluated with: those it names, and ``torch``, which the code FX and
    inductor generate always has (``torch/fx/graph.py`` adds the names with ``add_global``)."""
    return {"torch": torch, **names}


@with_targets(_targets)
def fx_repr(ctx: CustomClassContext, _target: None) -> list[Failure]:
    """A constant custom class: evaluating __fx_repr__'s string rebuilds an object of the same type and state."""
    finding = ctx.search(ctx.objects(), lambda recipe: _violation(ctx, recipe), ctx.settings.examples)
    if finding is None:
        return []
    if isinstance(finding, Failure):  # __fx_repr__ does not even evaluate
        return [finding]
    recipe, failure = finding  # confirmed once, after shrinking: what compiled programs do with the object
    numbers, lines = _compiled_vs_eager(ctx, recipe)
    return [dataclasses.replace(failure, details=failure.details + tuple(numbers),
                                repro=failure.repro.rstrip("\n") + "\n" + "\n".join(lines) + "\n")]
