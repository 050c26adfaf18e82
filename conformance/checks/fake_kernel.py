"""Check C4: the fake kernel of each custom op taking a symbolic (reference) custom class reads only the members
registered for it.

Rule source: while tracing, a symbolic object reaches fake kernels as a ``FakeScriptObject``
(``torch/_library/fake_class_registry.py``), whose ``__getattr__`` allows only the members registered with
``members=`` (``USE_REAL`` / ``INLINED``) and raises ``AttributeError("Tried to call __getattr__ with attr ...")``
for anything else: the op then cannot be compiled, only run eagerly. The check compiles a program calling the op
(dynamo, backend ``eager``, ``fullgraph``) with arguments eager accepts, and names the member the fake kernel
read. (Constant types reach fake kernels as the real object: nothing to check there.)
"""

from __future__ import annotations

import re

import torch

from ..evidence import record
from ..custom_context import show
from ..results import Failure, NotApplicable
from . import check

_MEMBER = re.compile(r"attr '([^']+)' on a FakeScriptObject")


def _targets(ctx):
    return list(ctx.info.ops) if ctx.info.kind == "symbolic" else []


def member_read_by_fake(exc: BaseException) -> str | None:
    """The member named by torch's ``FakeScriptObject`` attribute error anywhere in ``exc``'s message or chain,
    or ``None``."""
    seen = 0
    while exc is not None and seen < 10:
        found = _MEMBER.search(str(exc))
        if found:
            return found.group(1)
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


@check("fake_kernel", scope="op", targets=_targets, kinds=("custom",))
def fake_kernel(ctx, op) -> list[Failure]:
    """A symbolic custom class: each op's fake kernel reads only registered members, so torch.compile can trace it."""
    args_sets = ctx.arguments.fixed(op.qualname, op.schema, op.positions[0], limit=3)
    for recipe in _objects(ctx):
        for args in args_sets:
            try:
                with ctx.calling(lambda: f"{op.qualname} in eager with {recipe.code}"):
                    expected = ctx.call_op(op, args, recipe.build())
            except Exception:  # noqa: BLE001 - arguments the op rejects: nothing to trace
                continue
            torch._dynamo.reset()
            program = torch.compile(lambda *a, **k: op.op(*a, **k), backend="eager", fullgraph=True)
            try:
                with ctx.calling(lambda: f"torch.compile of {op.qualname} with {recipe.code}"):
                    ctx.call_op(op, args, recipe.build(), program)
            except Exception as exc:  # noqa: BLE001 - the rule's failure, or another compile error
                member = member_read_by_fake(exc)
                call = ctx.call_code(op, args, "obj")
                repro = ctx.repro([f"obj = {recipe.code}", f"print('eager:', {call})",
                                   f"program = torch.compile(lambda o: {ctx.call_code(op, args, 'o')}, "
                                   "backend='eager', fullgraph=True)", "print('compiled:', program(obj))"])
                if member is None:
                    return [Failure(f"{op.qualname} cannot be compiled with a {ctx.info.cls.__qualname__} argument: "
                                    f"{type(exc).__name__}: {str(exc).splitlines()[0]}", example=f"obj = {recipe.code}",
                                    call=call, details=(f"eager: {show(expected)}",), repro=repro)]
                registered = ", ".join(ctx.info.members) or "none"
                return [Failure(
                    f"the fake kernel of {op.qualname} reads {member!r} of the {ctx.info.cls.__qualname__} object, "
                    f"which is not a registered member (registered: {registered}): torch.compile fails with "
                    f"AttributeError on the FakeScriptObject; register it in members= (USE_REAL: read on the real "
                    f"object and baked in) or do not read it in the fake", example=f"obj = {recipe.code}", call=call,
                    details=(f"eager: {show(expected)}",), repro=repro)]
            finally:
                torch._dynamo.reset()
            record("traced call")
            return []  # compiled: the fake kernel read nothing it may not
    raise NotApplicable(f"no argument set {op.qualname} accepted in eager, so nothing was traced; "
                        + ctx.arguments.hint(op.qualname))


def _objects(ctx):
    """A few objects: the adopter's factories' first ones, else three drawn from the constructor (the same on
    every run)."""
    from ..arguments import draw_fixed

    return draw_fixed(ctx.objects(), 3, f"{ctx.info.name}:fake_kernel")
