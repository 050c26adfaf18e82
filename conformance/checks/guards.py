"""Check C3: torch.compile's guards on a Python custom class are sound: a compiled program gives what eager gives.

**Constant (value) types**: objects that compare equal are interchangeable for every custom op that takes them.

Rule source: torch.compile guards a constant object with ``__eq__`` (``torch/_dynamo``'s handling of opaque
constant objects; ``register_custom_class`` in ``torch/_library/opaque_object.py``): a program compiled for one
object is reused for any object equal to it. If two equal objects give different results from an op, the reused
program returns the first object's result for the second: silently stale numbers.

The search (hypothesis): an object ``a``, the op's other arguments, and ``b`` = a copy of ``a`` with one field
(``__dict__`` entry) taken from a second drawn object, for each field in turn. ``a == b`` with different eager
results names the field ``__eq__`` ignores; the failure then calls a compiled program (dynamo, backend ``eager``)
with ``a``, then ``b``, and shows its stale result beside eager's.

**Symbolic (reference) types** (targets: each ``USE_REAL`` member and each op taking the class): a symbolic object
is a graph input guarded by its type and the values ``guard_fn`` returns, not by identity; a ``USE_REAL`` member
is evaluated on the real object while compiling and baked into the program as a constant (``MemberType`` in
``torch/_library/opaque_object.py``). So one compiled program (dynamo, backend ``eager``) reading the member (or
calling the op) is called on an object, then again after each call of a public method that changed the object's
state, after an attribute is set to another object's value, and with a new object; every result is compared with
eager. A difference names what changed and what ``guard_fn`` returned before and after: a field it does not
cover. The object's public methods are called with arguments drawn from their annotations (exclude one with
``conformance.strategy(name, method)(lambda: None)``); a tenth of ``--torchbind-examples`` objects are tried
(each sequence compiles once more per change).
"""

from __future__ import annotations

import copy

import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..compare import value_differences
from ..custom_context import same_value, show, state_of
from ..results import NotApplicable
from ..results import Failure
from . import check


def _targets(ctx):
    if ctx.info.kind == "constant":
        return list(ctx.info.ops)
    return [m for m, how in ctx.info.members.items() if how == "use_real"] + list(ctx.info.ops)


def _variants(a, donor):
    """``(field, b)``: ``a`` with one field of ``donor`` where the two differ (a shallow copy of ``a``)."""
    mine, theirs = state_of(a), state_of(donor)
    for field in sorted(mine, key=str):
        if field in theirs and not same_value(mine[field], theirs[field]):
            b = copy.copy(a)
            try:
                setattr(b, field, theirs[field])
            except (AttributeError, TypeError):
                continue
            yield field, b


def _stale(ctx, op, args, a, b) -> tuple[object, object]:
    """A compiled program (dynamo, backend ``eager``) called with ``a`` then ``b``: its two results."""
    torch._dynamo.reset()
    try:
        program = torch.compile(lambda *x, **k: op.op(*x, **k), backend="eager", fullgraph=True)
        first = ctx.call_op(op, args, a, program)
        second = ctx.call_op(op, args, b, program)
        return first, second
    finally:
        torch._dynamo.reset()


def _violation(ctx, op, draw) -> Failure | None:
    a_recipe, donor_recipe, args = draw
    name = ctx.info.name
    with ctx.calling(lambda: f"{op.qualname} with equal {name} objects (from {a_recipe.code})"):
        a, donor = a_recipe.build(), donor_recipe.build()
        for field, b in _variants(a, donor):
            if not (a == b):
                continue
            try:
                ra = ctx.call_op(op, args, a)
                rb = ctx.call_op(op, args, b)
            except Exception:  # noqa: BLE001 - arguments the op rejects: nothing to compare
                return None
            diffs = value_differences(ra, rb, "result")
            if not diffs:
                continue
            return a_recipe, field, state_of(b)[field], args, ra, rb
    return None


def _stale_failure(ctx, op, finding) -> Failure:
    """The failure for an equal pair found by the search, confirmed by a compiled program: a's result for b."""
    a_recipe, field, value, args, ra, rb = finding
    a = a_recipe.build()
    b = copy.copy(a)
    setattr(b, field, value)
    first, stale = _stale(ctx, op, args, a, b)
    call_a, call_b = ctx.call_code(op, args, "a"), ctx.call_code(op, args, "b")
    short = ctx.info.cls.__qualname__
    return Failure(
        f"{short}.__eq__ ignores {field!r}: a == b, but {op.qualname} gives different results for them, "
        f"so a program compiled for a is reused for b and returns a's result (stale)",
        target=op.short_name, example=f"a = {a_recipe.code}\nb = copy.copy(a); b.{field} = {value!r}",
        call=f"{call_b}  (after the same compiled program ran with a)",
        details=(f"eager, b:    {show(rb)}", f"compiled, b: {show(stale)}"
                 + ("  (stale)" if not value_differences(ra, stale, "result") else ""),
                 f"eager, a:    {show(ra)}   compiled, a: {show(first)}"),
        repro=ctx.repro(["import copy", f"a = {a_recipe.code}", "b = copy.copy(a)",
                         f"b.{field} = {value!r}", "print('a == b:', a == b)",
                         f"program = torch.compile(lambda o: {ctx.call_code(op, args, 'o')}, "
                         "backend='eager', fullgraph=True)",
                         "print('compiled, a:', program(a))", "print('compiled, b:', program(b))",
                         f"print('eager, a:   ', {call_a})", f"print('eager, b:   ', {call_b})"]))
    return None


# ----- symbolic (reference) types ------------------------------------------------------------------------------


def _reader(ctx, target):
    """``(run, code)`` for a symbolic target: ``run(fn, obj)`` calls ``fn`` (the eager function or its compiled
    program) the way the target needs, ``code`` the program as source taking ``o``."""
    if isinstance(target, str):
        member = getattr(ctx.info.cls, target, None)
        code = f"lambda o: o.{target}()" if callable(member) else f"lambda o: o.{target}"
        return eval(code, {}), (lambda fn, obj: fn(obj)), code  # noqa: S307 - our source; dynamo traces it
    args = ctx.arguments.fixed(target.qualname, target.schema, target.positions[0], limit=1)[0]
    return ((lambda *a, **k: target.op(*a, **k)), (lambda fn, obj: ctx.call_op(target, args, obj, fn)),
            f"lambda o: {ctx.call_code(target, args, 'o')}")


def _mutator_args(ctx) -> tuple[SearchStrategy, list[str]]:
    """A strategy of ``{method: argument source}`` for every public method whose arguments can be generated and
    that the adopter did not exclude, and the reasons of those that cannot be called."""
    out, uncalled = {}, []
    for name in ctx.mutators():
        try:
            args = ctx.arguments_of(name)
        except NotApplicable as exc:
            uncalled.append(str(exc))
            continue
        if args is not None:
            out[name] = args
    return st.fixed_dictionaries(out), uncalled


def _guard_values(ctx, obj) -> str:
    if ctx.info.guard_fn is None:
        return "no guard_fn (type only)"
    try:
        return f"guard_fn returned {ctx.info.guard_fn(obj)!r}"
    except Exception as exc:  # noqa: BLE001
        return f"guard_fn raised {type(exc).__name__}: {exc}"


def _symbolic_violation(ctx, target, draw) -> Failure | None:
    a_recipe, donor_recipe, calls = draw
    eager_fn, run, program_code = _reader(ctx, target)
    what = f"{target}()" if isinstance(target, str) else target.qualname
    obj = a_recipe.build()
    steps = [f"obj = {a_recipe.code}"]
    torch._dynamo.reset()
    try:
        program = torch.compile(eager_fn, backend="eager", fullgraph=True)
        try:
            run(program, a_recipe.build())
        except Exception as exc:  # noqa: BLE001 - not compilable at all: the fake_kernel check's finding
            try:
                run(eager_fn, a_recipe.build())
            except Exception:  # noqa: BLE001 - eager rejects these arguments too: nothing to compare
                return None
            raise NotApplicable(f"a program reading {what} does not compile ({type(exc).__name__}: "
                                f"{str(exc).splitlines()[0][:200]}), so no guard can be judged; see the fake_kernel "
                                "item") from None
        torch._dynamo.reset()
        program = torch.compile(eager_fn, backend="eager", fullgraph=True)

        def compare(trigger: str, changed: list[str], guards_before: str) -> Failure | None:
            with ctx.calling(lambda: f"a compiled program reading {what} of {ctx.info.name}, {trigger}"):
                expected, got = run(eager_fn, obj), run(program, obj)
            if not value_differences(expected, got, "result"):
                return None
            guard_now = _guard_values(ctx, obj).removeprefix("guard_fn returned ")
            if changed:
                summary = (f"a compiled program that read {what} returns a stale result {trigger}: the change to "
                           f"{', '.join(repr(f) for f in changed)} is not guarded ({guards_before} before, "
                           f"{guard_now} after)")
            else:
                summary = f"a compiled program that read {what} returns something else than eager {trigger}"
            return Failure(
                summary, target=target if isinstance(target, str) else target.short_name,
                example="\n".join(steps), details=(f"eager:    {show(expected)}", f"compiled: {show(got)}"),
                repro=ctx.repro([*steps[:1], f"program = torch.compile({program_code}, backend='eager', "
                                 "fullgraph=True)", "print('compiled:', program(obj))", *steps[1:],
                                 f"print('compiled:', program(obj), ' eager:', ({program_code})(obj))"]))

        failure = compare("on its first call", [], _guard_values(ctx, obj))
        if failure:
            return failure
        for method, args in calls.items():  # each state-changing call
            before, guards = state_of(obj), _guard_values(ctx, obj)
            try:
                with ctx.calling(lambda: f"{ctx.info.name}.{method}({args})"):
                    ctx.call_method(obj, method, args)
            except Exception:  # noqa: BLE001 - arguments the method rejects: not a state change
                continue
            after = state_of(obj)
            changed = [k for k in after if k not in before or not same_value(before[k], after[k])]
            if changed:
                steps.append(f"obj.{method}({args})")
                failure = compare(f"after obj.{method}({args})", changed, guards)
                if failure:
                    return failure
        donor = donor_recipe.build()
        for field, value in state_of(donor).items():  # an attribute set to another object's value
            if field in state_of(obj) and not same_value(state_of(obj)[field], value):
                guards = _guard_values(ctx, obj)
                try:
                    setattr(obj, field, copy.deepcopy(value))
                except (AttributeError, TypeError):
                    continue
                steps.append(f"obj.{field} = {value!r}")
                failure = compare(f"after obj.{field} = {value!r}", [field], guards)
                if failure:
                    return failure
        guards = _guard_values(ctx, obj)
        changed = [k for k, v in state_of(donor).items() if not same_value(state_of(obj).get(k), v)]
        obj = donor_recipe.build()  # a new object
        steps.append(f"obj = {donor_recipe.code}")
        return compare("with a new object", changed, guards) if changed else None
    finally:
        torch._dynamo.reset()


@check("guards", scope="op", targets=_targets, kinds=("custom",))
def guards(ctx, target) -> list[Failure]:
    """A compiled program on a custom class's objects returns what eager returns (its guards are sound).

    Constant types: equal objects are interchangeable for each op; symbolic types: guard_fn covers what a program
    reads."""
    objects = ctx.objects()
    if ctx.info.kind == "constant":
        draws = st.tuples(objects, objects, ctx.op_arguments(target))
        finding = ctx.search(draws, lambda draw: _violation(ctx, target, draw), ctx.settings.examples)
        failure = _stale_failure(ctx, target, finding) if finding else None
    else:
        calls, uncalled = _mutator_args(ctx)
        # Every sequence compiles (once per change): a tenth of the examples, and the first finding as found.
        failure = ctx.search(st.tuples(objects, objects, calls), lambda draw: _symbolic_violation(ctx, target, draw),
                             max(1, ctx.settings.examples // 10), shrink=False)
        if failure is None and uncalled:  # no pass without the calls that could change what the program read
            raise NotApplicable("compiled programs stayed right after the calls the plugin could make, attribute "
                                "changes and new objects, but some methods were never called: " + "; ".join(uncalled))
    return [failure] if failure else []
