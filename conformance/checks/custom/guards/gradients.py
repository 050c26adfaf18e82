"""The ``guards`` check's backward part (:mod:`conformance.checks.custom.guards`): on a symbolic (reference) class,
a ``guard_fn`` that leaves out a field the *backward* of an op reads makes a compiled program return stale
gradients, while its forward results stay right.

Rule source: torch guards a symbolic object by its type and the values ``guard_fn`` returns
(``register_custom_class`` / ``register_opaque_type`` in ``torch/_library/opaque_object.py``). A custom op's forward
runs its real kernel on the object passed in, so its result is never stale; but AOTAutograd traces the op's autograd
formula (``register_autograd``) while compiling, with the object as a ``FakeScriptObject`` whose registered
``USE_REAL`` members are read on the real object and baked into the backward graph. Two objects whose ``guard_fn``
values are equal then share one compiled program, and the second gets the first one's gradient. A new user's trial
met it: an FP8 scaling state whose ``guard_fn`` left out ``scale``, read only by ``scale_by``'s backward; ``guards``
compared forward results and passed, and only the matrix's backward cells failed, naming neither ``guard_fn`` nor the
field.

So, for each op taking the class that has an autograd formula (:func:`conformance.matrix.gradients.has_backward`),
pairs ``a``, ``b`` of objects with equal ``guard_fn`` values and different fields (``b``: ``a`` after a public
method's call, a constructor variant of ``a``, or another object) are differentiated in plain eager
(:class:`conformance.matrix.gradients.Gradients`, the backward rows' loss and comparison); the first pair whose eager
gradients differ is run through one compiled program (``aot_eager``, the backend that traces the backward), ``a``
first. If torch did not compile again for ``b`` and ``b``'s compiled gradient is not eager's, ``guard_fn`` leaves out a
field the backward reads. Costs eager calls and at most one compile per op with a formula.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from ....core.evidence import uncounted
from ....core.results import Failure, Note, exception_line
from ....custom.context import CustomClassContext, Recipe, show
from ....custom.discovery import CustomOpInfo
from ....custom.guard_inputs import program_call
from ....custom.state import same_value, twin_differences
from ....engine.arguments import draw_fixed
from ....engine.compare import value_differences
from ....engine.values import ArgumentSet
from ....matrix.gradients import Gradients, GradientRun, gradient_differences, has_backward
from ....engine import torch_api

__all__ = ["stale_gradient", "OBJECTS", "PAIRS", "RULE"]

#: Objects drawn (the same on every run), and pairs differentiated in eager at most, per op.
OBJECTS = 6
PAIRS = 32
#: The rule id of the finding.
RULE = "guards.stale-gradient"
#: The backend whose compile traces the op's autograd formula (torch.compile's ``eager`` backend runs it in eager).
BACKEND = "aot_eager"


@dataclasses.dataclass(frozen=True)
class _Object:
    """An object of a pair: the lines that make it (``b = ...``, ``b.update(2.0)``) and ``build()``."""

    lines: tuple[str, ...]
    build: Callable[[], Any]


def stale_gradient(ctx: CustomClassContext, op: CustomOpInfo) -> Failure | Note | None:
    """The ``guards.stale-gradient`` failure of ``op`` on a symbolic class, a note where the backward could not be
    compiled, or ``None`` (not symbolic, no autograd formula, no pair of objects with equal ``guard_fn`` values and
    different eager gradients, or the compiled gradients are eager's). Raises
    :class:`~conformance.core.results.NotApplicable` as the op's arguments do."""
    if ctx.info.kind != "symbolic" or not has_backward(op.qualname, op.schema):
        return None
    args = ctx.arguments.fixed(op.qualname, op.schema, op.positions[0], limit=1)[0]
    recipes = draw_fixed(ctx.objects(), OBJECTS, f"{ctx.info.name}:guards:backward:{op.qualname}")
    found = _telling_pair(ctx, op, args, recipes)
    if found is None:
        return None
    return _compiled(ctx, op, args, *found)


def _gradient(op: CustomOpInfo, args: ArgumentSet, obj: Any, gradients: Gradients,
              fn: Callable | None = None) -> GradientRun:
    """``op`` (or ``fn``) on new values of ``args`` and ``obj``, floating-point inputs requiring grad, and the
    gradients of the backward rows' loss; raises what the call raised."""
    pos, kw = args.make()
    pos.insert(op.positions[0], obj)
    return gradients.run(lambda a: (fn or op.op)(*a, **kw), tuple(pos), lambda what, exc: exc)


def _guards(ctx: CustomClassContext, obj: Any) -> Any:
    return ctx.info.guard_fn(obj) if ctx.info.guard_fn is not None else None


def _seconds(ctx: CustomClassContext, a: Recipe, recipes: list[Recipe]) -> list[_Object]:
    """The objects paired with ``a``: ``a`` after each public method's call (its arguments drawn, the same on every
    run), then ``a``'s constructor variants and the other objects drawn."""
    out = []
    for method in ctx.mutators():
        try:
            strat = ctx.arguments_of(method)
            drawn = draw_fixed(strat, 2, f"{ctx.info.name}:guards:backward:{method}") if strat is not None else []
        except Exception:  # noqa: BLE001 - arguments that cannot be generated: the forward part names the method
            continue
        for margs in drawn:
            def build(a=a, method=method, margs=margs):
                obj = a.build()
                ctx.call_method(obj, method, margs)
                return obj
            out.append(_Object((f"b = {a.code}", f"b.{method}({margs})"), build))
    for other in recipes:
        out += [_Object((f"b = {b.code}",), b.build) for _, b in ctx.variants(a, other)]
    return out


def _telling_pair(ctx, op, args, recipes) -> tuple[Recipe, _Object, Gradients, GradientRun, GradientRun] | None:
    """The first pair ``a``, ``b`` with equal ``guard_fn`` values, different fields and different eager gradients,
    with the loss and both gradients; ``None`` when no pair (of at most :data:`PAIRS`) shows one."""
    tried = 0
    for a_recipe in recipes:
        for second in _seconds(ctx, a_recipe, recipes):
            if tried >= PAIRS:
                return None
            with uncounted():  # choosing the pair: no verdict rests on these eager calls
                try:
                    a, b = a_recipe.build(), second.build()
                    if not twin_differences(a, b) or not same_value(_guards(ctx, a), _guards(ctx, b)):
                        continue  # the same object, or one torch guards apart (it compiles again)
                    tried += 1
                    gradients = Gradients(ctx.call_op(op, args, a_recipe.build()))
                    ga = _gradient(op, args, a, gradients)
                    gb = _gradient(op, args, b, gradients)
                except Exception:  # noqa: BLE001 - objects or inputs the class or the op reject: no pair
                    continue
                if ga.grads is None or gb.grads is None or not value_differences(ga.grads, gb.grads, "gradient"):
                    continue
            return a_recipe, second, gradients, ga, gb
    return None


def _compiled(ctx, op, args, a_recipe: Recipe, second: _Object, gradients: Gradients, ga: GradientRun,
              gb: GradientRun) -> Failure | Note | None:
    """One program compiled with ``a`` (:data:`BACKEND`), then called with ``b``: the failure when torch did not
    compile again and ``b``'s gradient is not eager's."""
    from ....engine.torch_api import CompileCounterWithBackend

    counter = CompileCounterWithBackend(BACKEND)
    torch_api.dynamo_reset()
    try:
        program = torch.compile(lambda *x, **k: op.op(*x, **k), backend=counter, fullgraph=True)
        try:
            with ctx.calling(lambda: f"the backward of {op.qualname} through {BACKEND}, compiled for {a_recipe.code}"):
                ca = _gradient(op, args, a_recipe.build(), gradients, program)
                cb = _gradient(op, args, second.build(), gradients, program)
        except Exception as exc:  # noqa: BLE001 - the matrix's backward cells judge a program that does not compile
            return Note(f"the gradients of {op.qualname} were not compared through a compiled program: "
                        f"differentiating it through {BACKEND} raised {exception_line(exc, limit=200)} (the "
                        f"matrix's {op.short_name}.backward cells judge that)")
        recompiled = counter.frame_count > 1
    finally:
        torch_api.dynamo_reset()
    names = [f"input {i}" for i in range(len(ga.grads or []))]
    if gradient_differences("a", names, ga, ca, BACKEND, op.qualname) or recompiled:
        return None  # wrong for a itself (the matrix's finding), or torch told the objects apart
    diffs = gradient_differences("b", names, gb, cb, BACKEND, op.qualname)
    if not diffs:
        return None
    with uncounted():  # only to word the message
        stale = not value_differences(ga.grads, cb.grads, "gradient")
    a, b = a_recipe.build(), second.build()
    fields = twin_differences(a, b)
    listed = ", ".join(map(repr, fields))
    values = (f"guard_fn returns {_guards(ctx, a)!r} for both" if ctx.info.guard_fn is not None else
              "there is no guard_fn (torch guards the objects by type alone)")
    reads = "it" if len(fields) == 1 else "at least one of them"
    got = "a's gradient (stale)" if stale else "another gradient than eager's"
    short = ctx.info.cls.__qualname__
    return Failure(
        f"{short}'s guard_fn leaves out {listed}, which the backward of {op.qualname} reads: a and b differ only in "
        f"{listed} and {values}, so a program compiled for a ({BACKEND}) is reused for b without compiling again, "
        f"and its backward, whose autograd formula read a's state while compiling, gives b {got}; the forward "
        f"results are right (the op's kernel runs on b). Add {reads} to guard_fn",
        target=op.short_name, example="\n".join((f"a = {a_recipe.code}", *second.lines)),
        call=f"the gradient of {ctx.call_code(op, args, 'b')}  (after the same compiled program ran with a)",
        details=(*(d.line for d in diffs), f"eager, b:    {show(gb.grads)}", f"compiled, b: {show(cb.grads)}",
                 f"eager, a:    {show(ga.grads)}   compiled, a: {show(ca.grads)}",
                 f"torch compiled once for a and b ({counter.frame_count} frame compiled)"),
        repro=_repro(ctx, op, args, a_recipe, second), rule=RULE)


def _repro(ctx, op, args, a_recipe: Recipe, second: _Object) -> str:
    """The plain-torch lines: a, b, one program compiled with aot_eager, each one's gradient, compiled and eager."""
    pc = program_call(op, args)
    pos, _ = args.make()
    floats = [name for name, v in zip(pc.setup, pos) if isinstance(v, torch.Tensor) and v.is_floating_point()]
    names = [line.split(" = ", 1)[0] for line in floats]
    inputs = ", ".join(names)
    body = [*pc.setup, f"a = {a_recipe.code}", *second.lines,
            "", "def gradient(fn, o):  # the floating-point inputs require grad; loss = sum((out * w).sum())",
            f"    global {inputs}" if names else "    pass",
            *[f"    {n} = {n}.detach().clone().requires_grad_()" for n in names],
            f"    outs = [t for t in torch.utils._pytree.tree_leaves({pc.call('fn', 'o')}) "
            "if isinstance(t, torch.Tensor) and t.is_floating_point()]",
            "    gen = torch.Generator().manual_seed(0)",
            "    loss = sum((t * torch.randn(t.shape, generator=gen).to(t.dtype)).sum() for t in outs)",
            f"    return torch.autograd.grad(loss, [{inputs}])", "",
            "import torch._dynamo.testing",
            f"counter = torch._dynamo.testing.CompileCounterWithBackend({BACKEND!r})",
            f"program = torch.compile({pc.program}, backend=counter, fullgraph=True)",
            "print('compiled, a:', gradient(program, a))",
            "print('compiled, b:', gradient(program, b), ' frames compiled:', counter.frame_count)",
            f"print('eager, a:   ', gradient({pc.program}, a))",
            f"print('eager, b:   ', gradient({pc.program}, b))"]
    return ctx.repro(body)
