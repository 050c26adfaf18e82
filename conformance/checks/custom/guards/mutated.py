"""``guards`` on a constant (value) custom class that changes in place: a compiled program keeps the old result.

Rule source: torch.compile guards a constant object with ``__eq__`` against the object it compiled with, which it
keeps (``register_custom_class`` in ``torch/_library/opaque_object.py``: constant objects are compared by value and
baked into the program). An object changed in place stays equal to itself, so no guard fails, and the program
returns what it computed for the object's old value. Plain torch, on torch 2.13, 2.14.1 and 2.15.0::

    program = torch.compile(lambda x, q: quantize(x, q), backend="eager", fullgraph=True)
    q = Quantizer(2.0, rowwise=True)
    program(x, q)          # x * 2
    q.set_usage(False)     # in place: eager now gives -(x * 2)
    program(x, q)          # x * 2 again: stale

So a constant class's public methods must not change its state (return a new object instead), or the class must be
symbolic, with a ``guard_fn`` covering what the method changes. The check calls each public method (drawn
arguments, as the symbolic search does) on an object between two calls of one compiled program over each op taking
the class, and compares the second result with eager's on a twin that got the same call. A method whose call leaves
the op's eager result as it was cannot show a stale program and is not judged; a hoisted class (``hoist=True``)
passes its object to the program as an input, so it is not judged either.
"""

from __future__ import annotations

from typing import Any

import torch

from ....core.results import Failure
from ....custom.context import CustomClassContext, show, state_of
from ....custom.discovery import CustomOpInfo
from ....custom.guard_inputs import program_call
from ....custom.state import changed_fields, twin_differences
from ....engine import torch_api
from ....engine.arguments import draw_fixed
from ....engine.compare import value_differences

__all__ = ["mutated_constant", "OBJECTS", "CALLS"]

#: Objects and argument draws per method tried (each compiles one program).
OBJECTS, CALLS = 3, 2


def mutated_constant(ctx: CustomClassContext, op: CustomOpInfo, methods: dict[str, Any]) -> Failure | None:
    """The first public method call that changes a constant object in place and leaves a compiled program over
    ``op`` returning the object's old result, as a :class:`Failure` (rule ``guards.mutated-constant``), or ``None``.
    ``methods``: ``{method: strategy of its arguments as source}`` (the calls the symbolic search makes). Calls that
    raise (arguments a method or the op rejects) are not comparisons; objects that cannot be built twice equal are
    skipped."""
    if not methods:
        return None
    name = ctx.info.name
    arg_sets = ctx.arguments.fixed(op.qualname, op.schema, op.positions[0], limit=CALLS)
    draws = {m: draw_fixed(strat, CALLS, f"{name}:guards:mutated:{m}") for m, strat in methods.items()}
    for recipe in ctx.drawn(OBJECTS, f"{name}:guards:mutated"):
        for args in arg_sets:
            for method, drawn in draws.items():
                for margs in drawn:
                    failure = _try(ctx, op, recipe, args, method, margs)
                    if failure is not None:
                        return failure
    return None


def _try(ctx: CustomClassContext, op: CustomOpInfo, recipe, args, method: str, margs: str) -> Failure | None:
    """One sequence: the compiled program on an object, ``obj.<method>(<margs>)``, the program again, against eager
    on a twin."""
    try:
        obj, twin = recipe.build(), recipe.build()
    except Exception:  # noqa: BLE001 - arguments the constructor rejects: no object
        return None
    if twin_differences(obj, twin):
        return None
    before = state_of(twin)
    try:
        with ctx.calling(lambda: f"{op.qualname} in eager on {recipe.code}"):
            first = ctx.call_op(op, args, twin)
        with ctx.calling(lambda: f"{ctx.info.name}.{method}({margs}) on {recipe.code}"):
            ctx.call_method(twin, method, margs)
        with ctx.calling(lambda: f"{op.qualname} in eager after obj.{method}({margs})"):
            expected = ctx.call_op(op, args, twin)
    except Exception:  # noqa: BLE001 - a call the class or the op rejects: not a comparison
        return None
    changed = changed_fields(before, state_of(twin))
    if not changed or not value_differences(first, expected, "result"):
        return None  # nothing changed in place, or nothing the op's result shows
    torch_api.dynamo_reset()
    try:
        program = torch.compile(lambda *x, **k: op.op(*x, **k), backend="eager", fullgraph=True)
        try:
            with ctx.calling(lambda: f"a compiled program over {op.qualname}, obj = {recipe.code}"):
                ctx.call_op(op, args, obj, program)
                ctx.call_method(obj, method, margs)
                got = ctx.call_op(op, args, obj, program)
        except Exception:  # noqa: BLE001 - a program that does not compile: the fake_kernel item's finding
            return None
    finally:
        torch_api.dynamo_reset()
    if not value_differences(expected, got, "result"):
        return None
    short, pc = ctx.info.cls.__qualname__, program_call(op, args)
    fields = ", ".join(repr(f) for f in changed)
    return Failure(
        f"{short}.{method}({margs}) changes a constant object in place ({fields}), and a program compiled over "
        f"{op.qualname} keeps the result it computed for the old value: torch.compile guards a constant object by "
        "== against the object it compiled with, which stays equal to itself; return a new object from "
        f"{method} instead, or register {short} as a symbolic class with a guard_fn covering {fields}",
        target=op.short_name, example=f"obj = {recipe.code}",
        call=f"{ctx.call_code(op, args, 'obj')}  (after obj.{method}({margs}), the same compiled program)",
        details=(f"eager:    {show(expected)}", f"compiled: {show(got)}"
                 + ("  (stale)" if not value_differences(first, got, "result") else "")),
        repro=ctx.repro([*pc.setup, f"obj = {recipe.code}",
                         f"program = torch.compile({pc.program}, backend='eager', fullgraph=True)",
                         f"print('compiled, before:', {pc.call('program', 'obj')})", f"obj.{method}({margs})",
                         f"print('compiled, after: ', {pc.call('program', 'obj')})",
                         f"print('eager, after:    ', {pc.eager('obj')})"]),
        rule="guards.mutated-constant")
