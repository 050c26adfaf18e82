"""The rows of a Python custom class's coverage matrix (opaque object): one row per custom op taking the class,
called with a sequence of objects and compared call by call with eager (how a cell runs it:
:mod:`conformance.matrix.custom.run`), and one ``<op>.backward`` row per such op with an autograd formula (its
gradients at each object: :mod:`conformance.matrix.custom.backward`).

The sequence: the first object (the program is compiled or exported with it), an equal one built the same way, the
objects in another state (labelled so whatever ``__eq__`` says of them: an object ``==`` calls equal in another
state is exactly what a stale program shows on), and the first changed: for a symbolic class after a
state-changing method call, for a constant one given the state its constructor builds with one argument taken
from another object. An object the op rejects in eager is not a comparison: that call is left out.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from ...core.results import NotApplicable
from ...custom.context import (CustomClassContext, Recipe, observed_source, positional_argument_names, state_of)
from ...custom.state import changed_fields, twin_differences
from ...engine.arguments import draw_fixed
from ...engine.compare import value_differences
from ...engine.values import ArgumentSet
from ..gradients import backward_row, has_backward

__all__ = ["custom_rows", "scenario", "CustomScenario"]


def custom_rows(ctx: CustomClassContext) -> list[str]:
    """The matrix rows of a custom class: the short names of the ops taking it, then the backward row of each op
    with an autograd formula (``<op>.backward``: :mod:`conformance.matrix.gradients`)."""
    ops = ctx.info.ops
    return [op.short_name for op in ops] + [backward_row(op.short_name) for op in ops
                                            if has_backward(op.qualname, op.schema)]


@dataclasses.dataclass
class CustomScenario:
    """One row: ``op`` called as ``program`` (source of an ``nn.Module`` whose ``forward`` takes the op's tensor
    arguments and the object), with the object ``steps``: ``(label, make)`` where ``make()`` returns a new object
    in that step's state. The attributes the backends and the limitation table read: ``dynamic`` (never),
    ``placement`` (``"input"``), ``kind`` (``"custom"``), ``class_kind`` (``"constant"`` / ``"symbolic"``),
    ``calls`` (none of the TorchBind kind). ``telling``: an object of ``steps`` after the first two changes the
    op's output on ``args``; when none does, a program that holds the first object baked in passes too.
    ``codes``: per step, the statements that build its object as ``obj`` (for the cell's reproducer).
    ``untwinned``: the steps left out because their object cannot be built twice equal (said in the cell's notes).
    ``in_place``: for a constant class, ``(step, code, mutate)``: a public method call that changes the object of
    step ``step`` in place and the op's output with it: after the sequence the program runs once more on the very
    object it ran on in that step (the one it was compiled or exported with, for the first), changed so (torch
    guards a constant object by ``==`` against the object it compiled with, which stays equal to itself:
    ``guards.mutated-constant``), against eager on a twin changed the same way."""

    row: str
    op: Any
    args: ArgumentSet
    steps: list[tuple[str, Callable[[], Any]]]
    program: str
    tensor_positions: tuple[int, ...]
    class_kind: str = "constant"
    kind: str = "custom"
    dynamic: bool = False
    placement: str = "input"
    calls: tuple = ()
    has_object_input: bool = True
    telling: bool = True  # some object after the first changes the op's output on ``args`` (see .run)
    silent: tuple[str, ...] = ()  # the changed-field steps whose object gives the first object's output
    codes: tuple[tuple[str, ...], ...] = ()  # per step, the statements building its object as ``obj``
    untwinned: tuple[str, ...] = ()  # the steps left out: their object cannot be built twice equal
    in_place: tuple[tuple[int, str, Callable[[Any], None]], ...] = ()  # a constant object changed in place

    def dynamic_shapes(self) -> None:
        return None

    def module(self) -> torch.nn.Module:
        namespace: dict[str, Any] = {"torch": torch, "math": __import__("math")}
        exec(compile(self.program, "<conformance custom-class program>", "exec"), namespace)  # noqa: S102 - ours
        return namespace["Program"]()

    def inputs(self) -> list[Any]:
        """New tensor arguments of the op, in the program's order."""
        values = [v.make() for v in self.args.args]
        return [values[i] for i in self.tensor_positions]


def _recipes(ctx: CustomClassContext) -> tuple[Recipe, list[Recipe], list[Recipe], bool]:
    """The first object's recipe, those of the other objects whose state differs from it, the adopter's other
    example objects in the first one's state, and whether the objects are the adopter's. Every object that
    ``@conformance.examples`` factories return is taken, in their order (the first is the one programs are
    compiled with); without factories, up to six objects drawn from the constructor (and the third list is empty:
    a drawn object like the first adds nothing to the "equal" call)."""
    given = ctx.example_recipes()  # every example object, in the factories' order
    drawn = given or ctx.drawn(6, f"{ctx.info.name}:matrix")  # none built: the constructor's skip, said once
    first = drawn[0]
    mine = state_of(first.build())
    same = [_same_state(mine, state_of(r.build())) for r in drawn[1:]]
    return (first, [r for r, alike in zip(drawn[1:], same) if not alike],
            [r for r, alike in zip(drawn[1:], same) if alike and given], bool(given))


def _mutations(ctx: CustomClassContext, first: Recipe, others: list[Recipe],
               changes: Callable[[Any], bool] = lambda obj: False) -> list[tuple[str, Callable[[Any], None]]]:
    """How to change the first object: the first public method call that changes its state (symbolic), or, for a
    constant class, giving it the state the constructor builds with one of its arguments taken from another drawn
    object (:meth:`~conformance.custom.context.CustomClassContext.variants`: never a field set on its own, a state
    no real object reaches); an ``__eq__`` that ignores that argument then shows as a stale compiled result.
    Variants with which the op's output differs from the first object's (``changes``) come first."""
    if ctx.info.kind == "symbolic":
        found = _first_change(ctx, first.build)
        return [found] if found is not None else []
    by_label: dict[str, list] = {}
    for other in others:
        for label, variant in ctx.variants(first, other):
            try:
                target = variant.build()
            except Exception:  # noqa: BLE001 - arguments the constructor rejects: no object of the class
                continue
            if not hasattr(target, "__dict__"):
                continue

            def mutate(o, v=variant):  # the first object takes a state the constructor itself builds
                o.__dict__.update(copy.deepcopy(vars(v.build())))

            by_label.setdefault(label, []).append((f"obj.__dict__.update(vars({variant.code}))", mutate))
    if len(by_label) > 1:  # the whole other object is an "another state" call already; an argument is finer
        by_label.pop("another object", None)
    # per constructor argument, the first variant with which the op's output differs from the first object's (only
    # such a variant shows a program that holds the first object baked in), else the first variant
    return [next((c for c in found if changes(_mutated(first, c[1]))), found[0]) for found in by_label.values()]


def _first_change(ctx: CustomClassContext, make: Callable[[], Any],
                  changes: Callable[[Any], bool] = lambda obj: True) -> tuple[str, Callable[[Any], None]] | None:
    """The first public method call (:meth:`~conformance.custom.context.CustomClassContext.mutators`, arguments
    drawn from their strategies) that changes the state of a new object from ``make``, and with it the op's output
    where ``changes`` says so: ``(code, mutate)``, e.g. ``("obj.set_usage(False)", fn)``; ``None`` when no call
    does."""
    for method in ctx.mutators():
        try:
            strat = ctx.arguments_of(method)
        except NotApplicable:
            continue
        if strat is None:
            continue
        for args in draw_fixed(strat, 3, f"{ctx.info.name}:matrix:{method}"):
            obj = make()
            before = state_of(obj)
            try:
                ctx.call_method(obj, method, args)
            except Exception:  # noqa: BLE001 - arguments the method rejects
                continue
            if not _same_state(before, state_of(obj)) and changes(obj):
                return f"obj.{method}({args})", lambda o, m=method, a=args: ctx.call_method(o, m, a)
    return None


def _mutated(first: Recipe, mutate: Callable[[Any], None]) -> Any:
    """A new first object, changed by ``mutate``."""
    obj = first.build()
    mutate(obj)
    return obj


def _same_state(a: dict, b: dict) -> bool:
    """Whether two states (:func:`~conformance.custom.context.state_of`) have the same fields and values."""
    return not changed_fields(a, b, held_by_state=True)  # two objects: what an identity-held field holds


def scenario(ctx: CustomClassContext, row: str) -> CustomScenario:
    """The scenario of ``row`` (an op's short name). Raises :class:`~conformance.core.results.NotApplicable` when no
    argument set of the op runs in eager with the first object."""
    op = next(o for o in ctx.info.ops if o.short_name == row)
    first, others, alike, given = _recipes(ctx)
    arg_sets = ctx.arguments.fixed(op.qualname, op.schema, op.positions[0], limit=3)
    for args in arg_sets:
        try:
            ctx.call_op(op, args, first.build())
            break
        except Exception:  # noqa: BLE001 - arguments the op rejects
            continue
    else:
        raise NotApplicable(f"{op.qualname} rejected every argument set with {first.code}; "
                            + ctx.arguments.hint(op.qualname))
    reference = ctx.call_op(op, args, first.build())

    def changes(obj: Any) -> bool:  # whether the op's output on these arguments differs from the first object's
        try:
            return bool(value_differences(reference, ctx.call_op(op, args, obj)))
        except Exception:  # noqa: BLE001 - an object the op rejects: no comparison
            return False

    others = sorted(others, key=lambda r: not changes(r.build()))  # informative objects first (a stable sort)
    values = [v.make() for v in args.args]
    tensor_positions = tuple(i for i, v in enumerate(values) if isinstance(v, torch.Tensor))
    params = [f"t{i}" for i in range(len(tensor_positions))]
    call = [f"t{tensor_positions.index(i)}" if i in tensor_positions else v.code for i, v in enumerate(args.args)]
    call.insert(op.positions[0], "obj")
    # An op that writes arguments (Tensor(a!) out) gives its result through them: the program returns each written
    # argument beside the op's own result, as call_op observes an eager call (observed_outputs).
    names, written = positional_argument_names(op, args), []
    for i, name in enumerate(names):
        if name in op.written and i in tensor_positions:
            written.append((name, f"t{tensor_positions.index(i)}"))
    lines = []
    for k, v in args.kwargs:
        if k in op.written:
            lines.append(f"        _written{len(written)} = {v.code}\n")
            call.append(f"{k}=_written{len(written)}")
            written.append((k, f"_written{len(written)}"))
        else:
            call.append(f"{k}={v.code}")
    ns, name = op.qualname.split("::")
    op_call = f"torch.ops.{ns}.{name}({', '.join(call)})"
    program = (f"class Program(torch.nn.Module):\n    def forward(self, {', '.join(params + ['obj'])}):\n"
               + "".join(lines) + (f"        result = {op_call}\n" if written else "")
               + f"        return {observed_source('result', written) if written else op_call}\n")
    steps: list[tuple[str, Callable[[], Any]]] = [(f"first: obj = {first.code}", first.build),
                                                  (f"equal: obj = {first.code} (built again)", first.build)]
    codes = [(f"obj = {first.code}",)] * 2
    steps += [(f"equal: obj = {other.code}", other.build) for other in alike]  # the adopter's objects like the first
    codes += [(f"obj = {other.code}",) for other in alike]
    # Every example object the adopter gave is called (each may be the one a stale program shows on); of drawn
    # objects, the one that changes the output most surely.
    for other in (others if given else others[:1]):
        steps.append((f"another state: obj = {other.code}", other.build))
        codes.append((f"obj = {other.code}",))
    for label, mutate in _mutations(ctx, first, others, changes):
        steps.append((f"changed: obj = {first.code}; {label}", lambda mutate=mutate: _mutated(first, mutate)))
        codes.append((f"obj = {first.code}", label))
    # Eager runs on a twin of each step's object (built the same way): a step whose object cannot be built twice
    # equal (a 2-D DeviceMesh: each build makes new process groups) cannot be compared, and is said, not run.
    untwinned = []
    for i, (label, make) in reversed(list(enumerate(steps))):
        try:
            differ = twin_differences(make(), make())
        except Exception:  # noqa: BLE001 - an object the constructor rejects: the run says so
            continue
        if differ:
            if i == 0:
                raise NotApplicable(
                    f"two objects built the same way are not equal (built twice by {first.code}, they differ in "
                    f"{', '.join(map(repr, differ))}), so eager on one cannot stand for a compiled program on the "
                    f"other and nothing was compared; give objects that can be built equal with "
                    f"@conformance.examples({ctx.info.name!r})")
            untwinned.insert(0, f"{label} (built twice, the objects differ in {', '.join(map(repr, differ))})")
            del steps[i], codes[i]
    told = [changes(make()) for label, make in steps[2:]]
    # A changed field whose object gives the first object's output cannot show a program reused for it (one whose
    # guard, __eq__, ignores that field): said per field, since another step telling does not cover it.
    silent = tuple(label for (label, _make), t in zip(steps[2:], told) if not t and label.startswith("changed: "))
    return CustomScenario(row, op, args, steps, program, tensor_positions, ctx.info.kind, telling=any(told),
                          silent=silent, codes=tuple(codes), untwinned=tuple(untwinned),
                          in_place=_in_place(ctx, steps, changes))


def _in_place(ctx: CustomClassContext, steps: list[tuple[str, Callable[[], Any]]],
              changes: Callable[[Any], bool]) -> tuple[tuple[int, str, Callable[[Any], None]], ...]:
    """For a constant class, the first step (in order) whose object a public method call changes in place, and the
    op's output with it (:attr:`CustomScenario.in_place`); none for a symbolic class, or for objects every factory
    call shares (a change would reach later items)."""
    if ctx.info.kind != "constant" or ctx.shared:
        return ()
    for k, (_label, make) in enumerate(steps):
        found = _first_change(ctx, make, changes)
        if found is not None:
            return ((k, *found),)
    return ()
