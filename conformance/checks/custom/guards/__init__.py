"""Check C3: torch.compile's guards on a Python custom class are sound: a compiled program gives what eager gives.

**Constant (value) types**: objects that compare equal are interchangeable for every custom op that takes them.

Rule source: torch.compile guards a constant object with ``__eq__`` (``torch/_dynamo``'s handling of opaque constant
objects; ``register_custom_class`` in ``torch/_library/opaque_object.py``): a program compiled for one object is
reused for any object equal to it. If two equal objects give different results from an op, the reused program
returns the first object's result for the second: silently stale numbers. And an object changed in place (a public
method that changes its state) stays equal to itself, so the program keeps the old result
(:mod:`conformance.checks.custom.guards.mutated`, rule ``guards.mutated-constant``).

The search (hypothesis): an object ``a``, the op's other arguments, and ``b`` = a copy of ``a`` with one field
(``__dict__`` entry) taken from a second drawn object, for each field in turn. ``a == b`` with different eager
results names the field ``__eq__`` ignores; the failure then calls a compiled program (dynamo, backend ``eager``)
with ``a``, then ``b``, and shows its stale result beside eager's. A pair and an input that shows the ignored field
need not be drawn together: the search steers toward inputs that tell fields apart, tries every equal pair it kept
on every input it kept, and says in a note when no input told an ignored field apart
(:mod:`conformance.custom.guard_inputs`).

**Symbolic (reference) types** (targets: each ``USE_REAL`` member and each op taking the class): a symbolic object
is a graph input guarded by its type and the values ``guard_fn`` returns, not by identity; a ``USE_REAL`` member is
evaluated on the real object while compiling and baked into the program as a constant (``MemberType`` in
``torch/_library/opaque_object.py``). So one compiled program (dynamo, backend ``eager``) reading the member (or
calling the op) is called on an object, then again after each call of a public method that changed the object's
state, after an attribute is set to another object's value, and with a new object; every result is compared with
eager's on a twin object that gets the same calls (so an op that changes its object is compared fairly). A
difference names what changed and what ``guard_fn`` returned before and after: a field it does not cover. The
program is also called a second time with nothing changed: a ``USE_REAL`` member that changes its object (or gives
another result each call) is stale whatever ``guard_fn`` returns, and the failure names that cause instead. The
object's public methods are called with arguments drawn from their annotations (exclude one with
``conformance.strategy(name, method)(lambda: None)``); a tenth of ``--torchbind-examples`` objects are tried (each
sequence compiles once more per change). An op with an autograd formula is also differentiated: two objects with
equal ``guard_fn`` values whose eager gradients differ, through one program compiled with ``aot_eager``, which traces
the formula and bakes what it reads (:mod:`conformance.checks.custom.guards.gradients`, rule
``guards.stale-gradient``).

**Hoisted constant types** (``hoist=True``): the object is lifted to a graph input instead of being baked in
(``register_custom_class``'s ``hoist`` in ``torch/_library/opaque_object.py``;
``TorchScriptObjectVariable.as_proxy`` in ``torch/_dynamo/variables/script_object.py``), so a stale result cannot
come from ``__eq__``: the op runs on the object passed in. One compiled program per op (dynamo, a backend that
records the graph) is called with an object, with that object with one field taken from another object (field by
field), and with the other object; every result is compared with eager, and the captured graph must take the object
as a placeholder. A difference, or an object baked in as a constant, fails; a tenth of ``--torchbind-examples``
objects are tried.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ....engine.arguments import draw_fixed
from ....engine.compare import value_differences
from ....custom.context import same_value, show, state_of
from ....custom.state import changed_fields, twin_differences
from ....engine.dynamo_state import require_dynamo
from ....core.evidence import evidence_so_far, uncounted
from ....core.results import NotApplicable
from ....core.results import Failure
from ....custom.context import CustomClassContext
from ....custom.discovery import CustomOpInfo
from ... import with_targets
from .gradients import stale_gradient
from .inductor import stale_on_inductor
from .mutated import mutated_constant
from ....custom.guard_inputs import ProgramCall, Seen, crossed, equal_pair_violation, program_call, untold_notes
from ....engine import torch_api


def _targets(ctx):
    if ctx.info.kind == "constant":  # hoisted or not: the ops taking the class
        return list(ctx.info.ops)
    return [m for m, how in ctx.info.members.items() if how == "use_real"] + list(ctx.info.ops)


def _stale(ctx, op, args, a, b) -> tuple[object, object]:
    """A compiled program (dynamo, backend ``eager``) called with ``a`` then ``b``: its two results."""
    torch_api.dynamo_reset()
    try:
        program = torch.compile(lambda *x, **k: op.op(*x, **k), backend="eager", fullgraph=True)
        first = ctx.call_op(op, args, a, program)
        second = ctx.call_op(op, args, b, program)
        return first, second
    finally:
        torch_api.dynamo_reset()


def _field_told(field: str, a: Any, b: Any) -> str:
    """``'field'``, and where a's and b's values of it compare equal with ``==`` though a call tells them apart
    (``0.0`` and ``-0.0``): both values, since ``__eq__`` then compares the field and still misses the difference."""
    sa, sb = state_of(a), state_of(b)
    if field in sa and field in sb:
        try:
            if bool(sa[field] == sb[field]):
                return f"{field!r} ({show(sa[field])} and {show(sb[field])}, which == calls equal)"
        except Exception:  # noqa: BLE001 - incomparable values: the field alone says it
            pass
    return repr(field)


def _stale_failure(ctx, op, finding) -> Failure:
    """The failure for an equal pair found by the search, confirmed by a compiled program: a's result for b."""
    a_recipe, b_recipe, label, fields, args, ra, rb = finding
    first, stale = _stale(ctx, op, args, a_recipe.build(), b_recipe.build())
    call_b, pc = ctx.call_code(op, args, "b"), program_call(op, args)
    short = ctx.info.cls.__qualname__
    ignored = ", ".join(_field_told(f, a_recipe.build(), b_recipe.build()) for f in fields) or \
        f"what {label} changes"
    how = f" (b is a with {label} changed)" if label != "another object" else ""
    return Failure(
        f"{short}.__eq__ ignores {ignored}: a == b, but {op.qualname} gives different results for them, "
        f"so a program compiled for a is reused for b and returns a's result (stale)",
        target=op.short_name, example=f"a = {a_recipe.code}\nb = {b_recipe.code}{how}",
        call=f"{call_b}  (after the same compiled program ran with a)",
        details=(f"eager, b:    {show(rb)}", f"compiled, b: {show(stale)}"
                 + ("  (stale)" if not value_differences(ra, stale, "result") else ""),
                 f"eager, a:    {show(ra)}   compiled, a: {show(first)}"),
        repro=ctx.repro([*pc.setup, f"a = {a_recipe.code}", f"b = {b_recipe.code}", "print('a == b:', a == b)",
                         f"program = torch.compile({pc.program}, backend='eager', fullgraph=True)",
                         f"print('compiled, a:', {pc.call('program', 'a')})",
                         f"print('compiled, b:', {pc.call('program', 'b')})",
                         f"print('eager, a:   ', {pc.eager('a')})", f"print('eager, b:   ', {pc.eager('b')})"]),
        rule="guards.eq-ignores-state")


# ----- hoisted constant types ---------------------------------------------------------------------------------


def _graph_recorder(cls):
    """A dynamo backend that runs the graph as captured and records, per compiled graph, whether an object of
    ``cls`` is one of its example inputs (a graph input) rather than a constant baked into it."""
    seen: list[bool] = []

    def backend(gm, inputs):
        seen.append(any(isinstance(i, cls) for i in inputs))
        return gm.forward

    return backend, seen


def _hoisted_violation(ctx, op, draw, baked: list[Failure], compared: list[str]) -> Failure | None:
    """The first call of the sequence whose compiled result differs from eager's (or raises where eager returns);
    a graph that baked the object in (results equal) is appended to ``baked`` instead, reported only if no search
    finds a difference. Each call compared is appended to ``compared``."""
    a_recipe, donor_recipe, args = draw
    name, short = ctx.info.name, ctx.info.cls.__qualname__
    sequence = [("a", a_recipe.code, a_recipe.build)]
    for label, b_recipe in ctx.variants(a_recipe, donor_recipe):
        sequence.append((label if label == "another object" else f"a with {label} changed", b_recipe.code,
                         b_recipe.build))
    backend, placeholders = _graph_recorder(ctx.info.cls)
    torch_api.dynamo_reset()
    try:
        program = torch.compile(lambda *x, **k: op.op(*x, **k), backend=backend, fullgraph=True)
        for label, code, build in sequence:
            try:
                with ctx.calling(lambda: f"{op.qualname} on {name} {label}, eager"):
                    expected = ctx.call_op(op, args, build())
            except Exception:  # noqa: BLE001 - an object the constructor or the op rejects: nothing to compare
                continue
            call = ctx.call_code(op, args, "obj")
            pc = program_call(op, args)
            repro = ctx.repro([*pc.setup, f"a = {a_recipe.code}", f"obj = {code}",
                               f"program = torch.compile({pc.program}, backend='eager', fullgraph=True)",
                               f"print('compiled:', {pc.call('program', 'a')})",
                               f"print('eager:   ', {pc.eager('obj')})",
                               f"print('compiled:', {pc.call('program', 'obj')})"])
            try:
                with ctx.calling(lambda: f"{op.qualname} on {name} {label}, compiled"):
                    got = ctx.call_op(op, args, build(), program)
            except Exception as exc:  # noqa: BLE001 - eager returned: the compiled program must too
                return Failure(f"a compiled program calling {op.qualname} raises for {name} {label}, where eager "
                               f"returns: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
                               target=op.short_name, example=f"a = {a_recipe.code}\nobj = {code}", call=call,
                               details=(f"eager: {show(expected)}",), repro=repro, rule="guards.compiled-raises")
            compared.append(label)
            if value_differences(expected, got, "result"):
                return Failure(f"{short} is registered with hoist=True, yet a compiled program calling "
                               f"{op.qualname} returns something else than eager for {label}",
                               target=op.short_name, example=f"a = {a_recipe.code}\nobj = {code}", call=call,
                               details=(f"eager:    {show(expected)}", f"compiled: {show(got)}"), repro=repro,
                               rule="guards.hoisted-differs")
            if not baked and placeholders and not placeholders[-1]:
                baked.append(Failure(f"{short} is registered with hoist=True, but the graph compiled for "
                                     f"{op.qualname} does not take the object as an input: it was baked in as a "
                                     "constant", target=op.short_name, example=f"obj = {code}", call=call,
                                     repro=repro, rule="guards.hoisted-baked-in"))
    finally:
        torch_api.dynamo_reset()
    return None


# ----- symbolic (reference) types ------------------------------------------------------------------------------


def _reader(ctx, target):
    """``(eager_fn, run, calls)`` for a symbolic target: ``run(fn, obj)`` calls ``fn`` (the eager function or its
    compiled program) the way the target needs, ``calls`` the :class:`ProgramCall` a reproducer writes it with."""
    if isinstance(target, str):
        if target in ("__eq__", "__ne__"):  # registered so that compiled code can compare two objects
            raise NotApplicable(f"{target} compares two objects, and this item judges what a program reads of one "
                                "object; torch.compile guards two objects' identity when a program compares them "
                                "(a compiled `a == b` is not reused for another pair), so there is nothing to judge "
                                "here")
        member = getattr(ctx.info.cls, target, None)
        code = f"lambda o: o.{target}"
        if callable(member):
            try:
                strat = ctx.arguments_of(target)
            except NotApplicable:  # no Python signature (a C method): called as torch's own readers call it
                if _takes_arguments(member):
                    raise NotApplicable(f"{ctx.info.name}.{target} takes arguments that cannot be generated; "
                                        + ctx.arguments.hint(target)) from None
                strat = None
            args = draw_fixed(strat, 1, f"{ctx.info.name}:guards:{target}")[0] if strat is not None else ""
            code = f"lambda o: o.{target}({args})"
        member_call = ProgramCall((), code, (), (), 0, "")
        return eval(code, {}), (lambda fn, obj: fn(obj)), member_call  # noqa: S307 - our source; dynamo traces it
    args = ctx.arguments.fixed(target.qualname, target.schema, target.positions[0], limit=1)[0]
    return ((lambda *a, **k: target.op(*a, **k)), (lambda fn, obj: ctx.call_op(target, args, obj, fn)),
            program_call(target, args))


class _Raised:
    """What a compiled program raised where eager returned (shown in place of its result)."""

    def __init__(self, exc: BaseException):
        self.text = f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"

    def __repr__(self) -> str:
        return self.text


def _takes_arguments(member) -> bool:
    """Whether a member without a Python signature needs arguments (pybind11 writes its signature as the first
    line of the docstring, ``name(self: Cls, x: int) -> int``); ``False`` when nothing says so."""
    first = (getattr(member, "__doc__", None) or "").strip().splitlines()[:1]
    if not first or "(" not in first[0]:
        return False
    inside = first[0].split("(", 1)[1].rsplit(")", 1)[0]
    params = [p for p in inside.split(",") if p.strip() and not p.strip().startswith("self")]
    return bool(params)


def _mutator_args(ctx) -> tuple[SearchStrategy, list[str]]:
    """A strategy of ``{method: argument source}`` for every public method whose arguments can be generated and
    that the adopter did not exclude, and the reasons of those that cannot be called."""
    out, uncalled = _mutator_sources(ctx)
    return st.fixed_dictionaries(out), uncalled


def _mutator_sources(ctx) -> tuple[dict[str, SearchStrategy], list[str]]:
    """``{method: strategy of its arguments as source}`` for :func:`_mutator_args`, and the reasons of the methods
    that cannot be called (none on objects every factory call shares: a change would reach later items)."""
    out, uncalled = {}, []
    for name in ctx.mutators():
        try:
            args = ctx.arguments_of(name)
        except NotApplicable as exc:
            uncalled.append(str(exc))
            continue
        if args is not None:
            out[name] = args
    if ctx.shared and out:  # a change would reach every later item that gets the same object
        uncalled.append(f"no method was called on the example objects ({', '.join(ctx.shared)}): every call of "
                        "the factory returns the same object and it cannot be copied, so a change would reach the "
                        "items after this one; return new objects from the factory")
        out = {}
    return out, uncalled


def _use_real_cause(ctx, target, reader, recipe) -> str | None:
    """Why no ``guard_fn`` can keep a program reading the ``USE_REAL`` member ``target`` right, or ``None``: calling
    it (in eager, on a new object of ``recipe``) changes the object, or two calls in a row give different results.
    torch evaluates a ``USE_REAL`` member once, on the real object, while compiling, and bakes the result into the
    program as a constant (``MemberType`` in ``torch/_library/opaque_object.py``); the guards are built after that
    call, from the state it left, so the program returns that first result on every later call."""
    if not isinstance(target, str) or ctx.info.members.get(target) != "use_real":
        return None
    eager_fn, run, _ = reader
    try:
        probe = recipe.build()
        before = state_of(probe)
        first = run(eager_fn, probe)
        after = state_of(probe)
        second = run(eager_fn, probe)
    except Exception:  # noqa: BLE001 - a member that raises here is judged by the comparison alone
        return None
    changed = changed_fields(before, after)
    if changed:
        what = "calling it changes the object (" + ", ".join(
            f"{k}: {show(before.get(k))} -> {show(after.get(k))}" for k in changed) + ")"
    else:
        with uncounted():  # only to name the cause: the verdict rests on the comparison with eager
            if not value_differences(first, second, "result"):
                return None
        what = f"two calls in a row give different results ({show(first)}, then {show(second)})"
    return (f"{ctx.info.cls.__qualname__}.{target} is registered USE_REAL, but {what}; torch evaluates a USE_REAL "
            "member once, on the real object, while compiling, and bakes its result into the program, so the "
            "program returns that first result on every later call whatever guard_fn returns (no guard_fn can fix "
            f"this): register {target} as INLINED (dynamo traces its body into the program) or make it a custom op "
            "taking the object")


def _guard_values(ctx, obj) -> str:
    if ctx.info.guard_fn is None:
        return "no guard_fn (type only)"
    try:
        return f"guard_fn returned {ctx.info.guard_fn(obj)!r}"
    except Exception as exc:  # noqa: BLE001
        return f"guard_fn raised {type(exc).__name__}: {exc}"


def _symbolic_violation(ctx, target, draw, untwinned, reader) -> Failure | None:
    """The first compiled result that differs from eager's over one sequence: ``obj`` (compiled calls) and its
    twin (eager calls) built by one recipe and checked equal first (objects that cannot be built equal are not
    compared; their recipe and the fields that differ are appended to ``untwinned``), then each state-changing method call, then new objects."""
    a_recipe, donor_recipe, calls = draw
    eager_fn, run, pc = reader
    what = f"{target}()" if isinstance(target, str) else target.qualname
    obj, twin = a_recipe.build(), a_recipe.build()  # compiled calls on obj, eager ones on its twin
    if twin_differences(obj, twin):  # eager on the twin cannot stand for the compiled call on obj
        untwinned.append((a_recipe.code, twin_differences(obj, twin)))
        return None
    base, history = a_recipe, []  # the twin is rebuilt from base by replaying history when a step fails on it
    steps = [f"obj = {a_recipe.code}"]

    def step(change) -> bool:
        """Apply ``change`` to the twin, then to obj; a change that raises is undone on the twin (rebuilt)."""
        nonlocal twin
        try:
            change(twin)
        except Exception:  # noqa: BLE001 - not a state change: the twin is rebuilt as it was
            twin = base.build()
            for done in history:
                done(twin)
            return False
        change(obj)
        history.append(change)
        return True
    torch_api.dynamo_reset()
    try:
        program = torch.compile(eager_fn, backend="eager", fullgraph=True)
        try:
            run(program, a_recipe.build())
        except Exception as exc:  # noqa: BLE001 - not compilable at all: the fake_kernel check's finding
            try:
                run(eager_fn, a_recipe.build())
            except Exception:  # noqa: BLE001 - eager rejects these arguments too: nothing to compare
                return None
            see = (f"; the fake_kernel[{target.short_name}] item judges the op's fake kernel"
                   if not isinstance(target, str) else "")
            raise NotApplicable(f"a program reading {what} does not compile ({type(exc).__name__}: "
                                f"{str(exc).splitlines()[0][:200]}), so no guard can be judged{see}") from None
        torch_api.dynamo_reset()
        program = torch.compile(eager_fn, backend="eager", fullgraph=True)

        def compare(trigger: str, changed: list[str], guards_before: str) -> Failure | None:
            with ctx.calling(lambda: f"a compiled program reading {what} of {ctx.info.name}, {trigger}"):
                try:
                    expected = run(eager_fn, twin)
                except Exception:  # noqa: BLE001 - eager rejects this object (a 2-D mesh's get_local_rank()): no
                    return None    # input of the program, nothing to compare
                raised = None
                try:
                    got = run(program, obj)
                except Exception as exc:  # noqa: BLE001 - eager returned: the compiled program must too
                    raised = got = _Raised(exc)
            history.append(lambda t: run(eager_fn, t))  # an op may change its object: replayed on a rebuilt twin
            if raised is None and not value_differences(expected, got, "result"):
                return None
            guard_now = _guard_values(ctx, obj).removeprefix("guard_fn returned ")
            cause = _use_real_cause(ctx, target, reader, a_recipe)
            if cause:  # no guard_fn can help: the member's result is baked in while compiling
                summary = f"a compiled program that read {what} returns a stale result {trigger}: {cause}"
            elif changed:
                summary = (f"a compiled program that read {what} returns a stale result {trigger}: the change to "
                           f"{', '.join(repr(f) for f in changed)} is not guarded ({guards_before} before, "
                           f"{guard_now} after)")
            else:
                summary = f"a compiled program that read {what} returns something else than eager {trigger}"
            return Failure(
                summary, target=target if isinstance(target, str) else target.short_name,
                example="\n".join(steps), details=(f"eager:    {show(expected)}", f"compiled: {show(got)}"),
                repro=ctx.repro([*pc.setup, *steps[:1], f"program = torch.compile({pc.program}, backend='eager', "
                                 "fullgraph=True)", f"print('compiled:', {pc.call('program', 'obj')})", *steps[1:],
                                 f"print('compiled:', {pc.call('program', 'obj')}, ' eager:', "
                                 f"{pc.call(f'({pc.program})', 'obj')})"]),
                rule="guards.unguarded-change" if changed and not cause else "guards.compiled-differs")

        failure = compare("on its first call", [], _guard_values(ctx, obj)) or \
            compare("when called again, nothing changed in between", [], _guard_values(ctx, obj))
        if failure:
            return failure
        for method, args in calls.items():  # each state-changing call
            before, guards = state_of(obj), _guard_values(ctx, obj)
            with ctx.calling(lambda: f"{ctx.info.name}.{method}({args})"):
                if not step(lambda o, method=method, args=args: ctx.call_method(o, method, args)):
                    continue  # arguments the method rejects: not a state change
            after = state_of(obj)
            changed = [k for k in after if k not in before or not same_value(before[k], after[k])]
            if changed:
                steps.append(f"obj.{method}({args})")
                failure = compare(f"after obj.{method}({args})", changed, guards)
                if failure:
                    return failure
        for label, new in ctx.variants(a_recipe, donor_recipe):  # new objects, made by the class's constructor
            guards, before = _guard_values(ctx, obj), state_of(obj)
            try:
                fresh, fresh_twin = new.build(), new.build()
            except Exception:  # noqa: BLE001 - arguments the constructor rejects: no object of the class
                continue
            if twin_differences(fresh, fresh_twin):
                untwinned.append((new.code, twin_differences(fresh, fresh_twin)))
                continue
            obj, twin, base, history = fresh, fresh_twin, new, []
            after = state_of(obj)
            changed = changed_fields(before, after)
            steps.append(f"obj = {new.code}")
            if changed:
                failure = compare(f"with a new object ({label})" if label != "another object" else
                                  "with a new object", changed, guards)
                if failure:
                    return failure
        return None
    finally:
        torch_api.dynamo_reset()


@with_targets(_targets)
def guards(ctx: CustomClassContext, target: CustomOpInfo | str) -> list[Failure]:
    """A compiled program on a custom class's objects returns what eager returns (its guards are sound).

    Constant types: equal objects are interchangeable for each op; hoisted constant types: the object reaches each
    op as a graph input; symbolic types: guard_fn covers what a program reads."""
    require_dynamo(f"guards[{target if isinstance(target, str) else target.short_name}]")
    objects = ctx.objects()
    backward = None  # a symbolic class's op with an autograd formula: its gradients' finding, or a note
    if ctx.info.kind == "constant" and ctx.info.hoist:  # a graph input: compared call by call, compiling
        draws = st.tuples(objects, objects, ctx.op_arguments(target))
        baked: list[Failure] = []
        compared: list[str] = []
        failure = ctx.search(draws, lambda draw: _hoisted_violation(ctx, target, draw, baked, compared),
                             max(1, ctx.settings.examples // 10), shrink=False) or (baked[0] if baked else None)
        if failure is None and not compared:  # no pass without a comparison
            raise NotApplicable(f"{target.qualname} rejected every object tried in eager, so no compiled call was "
                                "compared; " + ctx.arguments.hint(target.qualname))
    elif ctx.info.kind == "constant":
        draws = st.tuples(objects, objects, ctx.op_arguments(target))
        seen = Seen()  # the inputs and equal pairs drawn: tried against each other after the search
        finding = ctx.search(draws, lambda draw: equal_pair_violation(ctx, target, draw, seen),
                             ctx.settings.examples) or crossed(ctx, target, seen)
        if finding is None:
            # equal objects are interchangeable; an object changed in place must not keep the old program either
            mutated = mutated_constant(ctx, target, _mutator_sources(ctx)[0])
            if mutated is not None:
                return [mutated]
            return untold_notes(ctx, target, seen)  # a field no input told apart is said, not passed as compared
        failure = _stale_failure(ctx, target, finding)
    else:
        calls, uncalled = _mutator_args(ctx)
        # Every sequence compiles (once per change): a tenth of the examples, and the first finding as found.
        untwinned: list[tuple[str, list[str]]] = []
        reader = _reader(ctx, target)  # drawn once, before the search (a draw inside it would nest @given)
        failure = ctx.search(st.tuples(objects, objects, calls),
                             lambda draw: _symbolic_violation(ctx, target, draw, untwinned, reader),
                             max(1, ctx.settings.examples // 10), shrink=False)
        if failure is None and not isinstance(target, str):  # a reused program, through inductor too
            failure = stale_on_inductor(ctx, target, reader)
        backward = stale_gradient(ctx, target) if failure is None and not isinstance(target, str) else None
        if isinstance(backward, Failure):  # forward results right, gradients stale: guard_fn misses a backward read
            return [backward]
        if failure is None and untwinned and not evidence_so_far():
            raise NotApplicable(
                f"two objects built the same way are not equal (built twice by {untwinned[0][0]}, they differ in "
                f"{', '.join(map(repr, untwinned[0][1]))}), so eager on "
                "one cannot stand for a compiled program on the other and nothing was compared; give objects that "
                f"can be built equal with @conformance.examples({ctx.info.name!r})")
        if failure is None and uncalled:  # no pass without the calls that could change what the program read
            raise NotApplicable("compiled programs stayed right after the calls the plugin could make, attribute "
                                "changes and new objects, but some methods were never called: " + "; ".join(uncalled))
        note = ctx.teardown_note() if failure is None and backward is None else None
        if note is not None:  # left out on purpose, and said: a teardown's later state is no object's to read
            return [note]
    return ([failure] if failure else []) + ([backward] if backward else [])
