"""Check C6: a symbolic custom class object created inside an exported program is not silently shared by its
calls: the program returns what eager returns, call after call.

Rule source: a symbolic (reference) object created inside the traced region is refused by torch.compile and strict
export (``An opaque object was created in the middle of the program``, ``torch/_dynamo/variables/
script_object.py``), but non-strict export runs the Python code, so the object made while tracing is lifted into
the program as a constant (a ``CUSTOM_OBJ`` input spec, ``torch/export/graph_signature.py``): every call of the
exported program gets that one object, where eager makes a new one per call. When an op taking the object changes
it, the second call of the exported program sees the state the first left.

For each op taking the class: a module whose ``forward`` builds an object (a few objects, the same on every run)
and calls the op is exported non-strict; when the program holds the object as a constant, it is called twice and
each result is compared with eager's (a new module call each time). A program that did not bake the object in has
nothing to flag.
"""

from __future__ import annotations

import torch

from ...engine.compare import value_differences
from ...custom.context import show
from ...core.results import Failure, NotApplicable
from ...custom.context import CustomClassContext
from ...custom.discovery import CustomOpInfo
from .. import with_targets


def _targets(ctx):
    return list(ctx.info.ops) if ctx.info.kind == "symbolic" else []


def _module(ctx, op, args, recipe) -> torch.nn.Module:
    class CreatesObject(torch.nn.Module):
        def forward(self):
            return ctx.call_op(op, args, recipe.build())

    return CreatesObject()


def _baked_objects(program, cls) -> list[str]:
    """The constants of an exported program that are objects of ``cls`` (``CUSTOM_OBJ`` input specs)."""
    from torch.export.graph_signature import InputKind

    return [spec.target for spec in program.graph_signature.input_specs
            if spec.kind == InputKind.CUSTOM_OBJ and isinstance(program.constants.get(spec.target), cls)]


@with_targets(_targets)
def baked(ctx: CustomClassContext, op: CustomOpInfo) -> list[Failure]:
    """An exported program that creates a symbolic object and passes it to an op returns eager's results on every
    call (an object baked in as a constant must not carry one call's changes into the next)."""
    drawn = ctx.arguments.fixed(op.qualname, op.schema, op.positions[0], limit=1)
    if not drawn:
        raise NotApplicable(f"no arguments of {op.qualname} could be drawn; " + ctx.arguments.hint(op.qualname))
    args = drawn[0]
    call = ctx.call_code(op, args, "obj")
    exported, export_error = 0, None
    for recipe in ctx.drawn(3, f"{ctx.info.name}:baked:{op.qualname}"):  # none built: the constructor's skip
        module = _module(ctx, op, args, recipe)
        try:
            with ctx.calling(lambda: f"{op.qualname} on a {ctx.info.name} made in forward, eager"):
                expected = [module(), module()]
        except Exception:  # noqa: BLE001 - an object the op rejects in eager: nothing to compare
            continue
        try:
            with ctx.calling(lambda: f"torch.export.export (non-strict) of {op.qualname} on {recipe.code}"):
                program = torch.export.export(module, (), strict=False)
        except Exception as exc:  # noqa: BLE001 - nothing exported, nothing baked: export's own verdicts are the
            export_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"  # matrix's
            continue
        exported += 1
        constants = _baked_objects(program, ctx.info.cls)
        if not constants:
            continue
        runnable = program.module()
        with ctx.calling(lambda: f"the exported program of {op.qualname} on {recipe.code}, twice"):
            got = [runnable(), runnable()]
        for i, (e, g) in enumerate(zip(expected, got), 1):
            if value_differences(e, g, "result"):
                why = ("so call 2 of the exported program sees the state call 1 left (eager makes a new object per "
                       "call)" if i == 2 else "and already the first call of the exported program differs from "
                       "eager: the object was changed while exporting (by the op's fake or the tracing)")
                return [Failure(
                    f"non-strict export bakes the {ctx.info.cls.__qualname__} created in forward into the program "
                    f"as a constant ({constants[0]}), and {op.qualname} changes it, {why}",
                    target=op.short_name, example=f"forward: obj = {recipe.code}; return {call}", call=call,
                    details=(f"eager, calls 1 and 2:    {show(expected[0])}, {show(expected[1])}",
                             f"exported, calls 1 and 2: {show(got[0])}, {show(got[1])}"),
                    repro=ctx.repro([
                        "class CreatesObject(torch.nn.Module):", "    def forward(self):",
                        f"        obj = {recipe.code}", f"        return {call}", "",
                        "program = torch.export.export(CreatesObject(), (), strict=False).module()",
                        "print('exported:', program(), program())",
                        "print('eager:   ', CreatesObject()(), CreatesObject()())"]),
                    rule="baked.shared-object")]
    if not exported and export_error is not None:
        raise NotApplicable(f"non-strict export of a program that makes the object and calls {op.qualname} fails "
                            f"({export_error}), so nothing is baked in; the matrix's export cells show export's "
                            "own verdict")
    if not exported:
        raise NotApplicable(f"{op.qualname} rejected every object tried in eager, so nothing was exported; "
                            + ctx.arguments.hint(op.qualname))
    return []
