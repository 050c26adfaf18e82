"""Check C7: a compiled program called with equal but distinct objects of a Python custom class compiles once.

Rule source: torch.compile keeps the program it compiled for a call and reuses it for every later call whose guards
hold (``torch/_dynamo/guards.py``). A constant (value) object is guarded with ``__eq__`` (the guard reads
``x[1] == Cls(2.0, 1.0)``: the object compiled for, rebuilt from ``__fx_repr__``); a symbolic (reference) object
with its type and the values its ``guard_fn`` returns (``___check_opaque_guard_fn_...``; ``register_custom_class`` /
``register_opaque_type`` in ``torch/_library/opaque_object.py``). Objects built the same way (twins: the same state,
:func:`~conformance.custom.state.twin_differences`) are one input to the program; when ``__eq__`` is identity
(torch's own ``_MaskPartial``) or tells twins apart (a type-tagged ``__eq__``), or ``guard_fn`` returns something
that differs between twins (``id(obj)``, a per-object counter), every new object compiles the program again, until
torch's ``recompile_limit`` (8) is reached and the code runs eagerly from then on.

Measured, for each op taking the class: one program calling the op (dynamo, ``fullgraph=True``, backend
``torch._dynamo.testing.CompileCounter``, which counts the compiles and runs the graph as the ``eager`` backend
does) is called with :data:`TWINS` twins built by one recipe; the twins must compile once. The failure
(``recompiles.twins-recompile``) names the op, the count and the guard that failed, as torch recorded it
(``torch._dynamo.utils.guard_failures``, filled by ``get_guard_fail_reason`` on every failed cache entry; torch
2.13 and 2.14.1 alike), with what ``__eq__`` or ``guard_fn`` said of the twins.

Where one recipe builds no twins, because the class gives each object a field of its own (a serial number or a
uuid that ``__eq__`` or ``guard_fn`` reads: TransformerEngine's case), objects it builds that get the same result
from the op are called instead: the constructor call the user writes is the same every time, so a compile per
object fails the same rule (the message names the field). When the twins compile once, the same program is called
with objects that differ from the first twin only in one constructor argument
(:meth:`~conformance.custom.context.CustomClassContext.variants`) and for which the op gives eager's same result on
the inputs drawn: a compile for such an object is a note with the count and torch's reason, never a failure, and
says the inputs may not tell the argument apart (another input, op or member may need the guard: only a guess
could call it wasteful). A guard that misses a field a result depends on (unsound: too few guards) is the ``guards``
check's rule, not this one's.

TorchBind classes have no such check: dynamo guards a ``ScriptObject`` on the values of its ``__obj_flatten__()``
(``c.__obj_flatten__()[0][1] == 0``), never on its identity, so twins reuse the program (measured on the samples'
``Counter`` and ``TensorQueue``, their ops and methods, torch 2.13 and 2.14.1; ``tests/catalogue/test_recompiles.py``
pins it).
"""

from __future__ import annotations

import re
from typing import Any

import torch
from hypothesis import strategies as st

from ...core.evidence import record
from ...core.results import Failure, Note, NotApplicable
from ...custom.context import CustomClassContext, show
from ...custom.discovery import CustomOpInfo
from ...custom.state import twin_differences
from ...engine.arguments import draw_fixed
from ...engine.compare import value_differences
from ...engine.dynamo_state import require_dynamo
from .. import with_targets
from ...engine import torch_api

#: How many twins the program is called with, how many (object, other object, arguments) draws are tried for a set of
#: twins the op accepts, and how many one-argument variants are tried for the notes.
TWINS, DRAWS, VARIANTS = 3, 5, 4


def _targets(ctx):
    return list(ctx.info.ops)


def _reasons(code) -> list[str]:
    """torch's recompile reasons for the program whose code object is ``code``, one line each, in order, without
    the compile id (``0/1: ``) and the source comment torch appends; each distinct reason once."""
    from ...engine.torch_api import guard_failures

    out: list[str] = []
    for reason in guard_failures.get(code, []):
        line = re.sub(r"^\s*\d+/\d+:\s*", "", str(reason).splitlines()[0] if str(reason) else "")
        line = line.split("  #", 1)[0].strip()
        # the guard on guard_fn's values is named per cache entry (___check_opaque_guard_fn_<id>_c0/1): one name
        line = re.sub(r"(___check_opaque_guard_fn)_\d+_c\d+/\d+", r"\1", line)
        if line and line not in out:
            out.append(line)
    return out


def _explain(ctx, reasons: list[str], first: Any, second: Any) -> str:
    """What failed, in the class's words: ``__eq__`` on two twins, or ``guard_fn``'s values for them."""
    if ctx.info.kind == "constant" and any("==" in r for r in reasons):
        try:
            equal = bool(first == second)
        except Exception as exc:  # noqa: BLE001 - a raising __eq__: the guard fails the same way
            return f"the __eq__ guard fails: a == a2 raised {type(exc).__name__}"
        return f"the __eq__ guard fails: for two objects built the same way a == a2 is {equal}"
    if ctx.info.guard_fn is not None and any("guard_fn" in r for r in reasons):
        try:
            values = [ctx.info.guard_fn(first), ctx.info.guard_fn(second)]
        except Exception as exc:  # noqa: BLE001
            return f"the guard_fn guard fails: guard_fn raised {type(exc).__name__}"
        return (f"the guard_fn guard fails: guard_fn returned {values[0]!r} for one object and {values[1]!r} for "
                "another built the same way")
    return "a guard torch installed for the object fails"


def _draw(ctx, op: CustomOpInfo):
    """The first drawn ``(recipe, the other drawn recipes, arguments, eager result, fields)`` whose recipe builds
    :data:`TWINS` distinct objects that the op accepts in eager: twins (``fields`` empty) when any draw gives them,
    else objects that differ in ``fields`` (a per-object serial number, say) but get the same result from the op.
    Raises :class:`NotApplicable` saying why no draw did."""
    objects, arguments = ctx.objects(), ctx.op_arguments(op)
    draws = draw_fixed(st.tuples(objects, objects, arguments), DRAWS, f"{ctx.info.name}:recompiles:{op.qualname}")
    why: list[str] = []
    unlike = None  # the first draw whose objects are no twins yet give one result
    for recipe, donor, args in draws:
        try:
            built = [recipe.build() for _ in range(TWINS)]
        except Exception as exc:  # noqa: BLE001 - arguments the constructor rejects: no object of the class
            why.append(f"{recipe.code} raised {type(exc).__name__}")
            continue
        if any(t is built[0] for t in built[1:]):
            why.append(f"{recipe.code} returns the same object on every call, not distinct ones")
            continue
        differ = sorted({f for t in built[1:] for f in twin_differences(built[0], t)}, key=str)
        try:
            with ctx.calling(lambda: f"{op.qualname} on {recipe.code}, eager"):
                results = [ctx.call_op(op, args, t) for t in built]
        except Exception as exc:  # noqa: BLE001 - an object the op rejects is no input of a program
            why.append(f"{ctx.call_code(op, args, recipe.code)} raised {type(exc).__name__} in eager")
            continue
        others = [d for _, d, _ in draws if d.code != recipe.code] or [donor]
        found = (recipe, list({d.code: d for d in others}.values()), args, results[0], differ)
        if not differ:
            return found
        if any(value_differences(results[0], r, "result") for r in results[1:]):
            why.append(f"built {TWINS} times by {recipe.code}, objects differ in {', '.join(map(repr, differ))} "
                       "and get different results")
        elif unlike is None:
            unlike = found
    if unlike is not None:
        return unlike
    if not draws:
        raise ctx.unbuildable()
    raise NotApplicable(f"no program calling {op.qualname} could be called with {TWINS} distinct objects built the "
                        f"same way ({'; '.join(list(dict.fromkeys(why))[:3])}), so the check compared nothing; give "
                        f"such objects with @conformance.examples({ctx.info.name!r}) or arguments the op accepts "
                        f"with conformance.strategy({ctx.info.name!r}, {op.qualname!r}, ...)")


@with_targets(_targets)
def recompiles(ctx: CustomClassContext, target: CustomOpInfo) -> list[Failure | Note]:
    """A compiled program calling an op is compiled once for objects built the same way (no recompile per object)."""
    from ...engine.torch_api import CompileCounter

    require_dynamo(f"recompiles[{target.short_name}]")
    recipe, donors, args, expected, differ = _draw(ctx, target)
    short = ctx.info.cls.__qualname__

    def program_of(*x, **k):
        return target.op(*x, **k)

    counter = CompileCounter()
    torch_api.dynamo_reset()
    try:
        program = torch.compile(program_of, backend=counter, fullgraph=True)
        try:
            with ctx.calling(lambda: f"a compiled program calling {target.qualname} on {recipe.code}"):
                ctx.call_op(target, args, recipe.build(), program)
        except Exception as exc:  # noqa: BLE001 - eager returned: not compilable, the fake_kernel item's finding
            raise NotApplicable(f"a program calling {target.qualname} does not compile ({type(exc).__name__}: "
                                f"{str(exc).splitlines()[0][:200] if str(exc) else ''}), so no recompile can be "
                                f"counted; the fake_kernel[{target.short_name}] item judges the op's fake kernel"
                                ) from None
        first, second = recipe.build(), recipe.build()  # the twins compared after the first call
        for i in range(1, TWINS):
            with ctx.calling(lambda: f"a compiled program calling {target.qualname} on twin {i + 1} of {TWINS}"):
                ctx.call_op(target, args, first if i == 1 else second, program)
        compiles, reasons = counter.frame_count, _reasons(program_of.__code__)
        if differ:  # objects of one constructor call that differ only in a field the class gives each object
            record("compiled call of an object built the same way", TWINS)
        else:
            record("compiled call of a twin", TWINS)
        if compiles > 1:
            call = ctx.call_code(target, args, "o")
            own = (f" (the class gives each object its own {', '.join(map(repr, differ))}, and the op gives them "
                   f"the same result, {show(expected)})") if differ else ""
            return [Failure(
                f"a program calling {target.qualname} compiled {compiles} times for {TWINS} {short} objects built "
                f"the same way{own} (one compile suffices): torch's guard "
                f"`{reasons[0] if reasons else '(no reason recorded)'}` failed for each new object; "
                f"{_explain(ctx, reasons, first, second)}, so every new object recompiles the program (and with "
                "fullgraph=True, raises once torch's recompile_limit is reached)",
                example=(f"obj = {recipe.code}  (built {TWINS} times: "
                         + (f"{TWINS} objects differing only in {', '.join(map(repr, differ))})" if differ
                            else f"the same state, {TWINS} objects)")),
                call=ctx.call_code(target, args, "obj"),
                details=(f"compiles: {compiles} for {TWINS} calls (torch._dynamo.testing.CompileCounter)",
                         *(f"torch's recompile reason: {r}" for r in reasons)),
                repro=ctx.repro([
                    "from torch._dynamo.testing import CompileCounter",
                    "from torch._dynamo.utils import guard_failures", "",
                    "counter = CompileCounter()",
                    f"program = torch.compile(lambda o: {call}, backend=counter, fullgraph=True)",
                    f"for _ in range({TWINS}):", f"    program({recipe.code})",
                    "print('compiles:', counter.frame_count)",
                    "print('reasons:', [r.splitlines()[0] for rs in guard_failures.values() for r in rs])"]),
                rule="recompiles.twins-recompile")]
        if differ:  # no one-argument variant can be judged against objects that already differ
            return []
        return _variant_notes(ctx, target, program, counter, program_of.__code__, recipe, donors, args, expected)
    finally:
        torch_api.dynamo_reset()


def _eager(ctx, op, args, recipe) -> tuple[bool, Any]:
    """``(True, result)`` of the op in eager on a new object of ``recipe``, ``(False, None)`` when the constructor
    or the op rejects it."""
    try:
        with ctx.calling(lambda: f"{op.qualname} on {recipe.code}, eager"):
            return True, ctx.call_op(op, args, recipe.build())
    except Exception:  # noqa: BLE001 - an object the constructor or the op rejects: no input, nothing to compare
        return False, None


def _unread(ctx, op, args, recipe, donors, expected) -> list[tuple[str, Any]]:
    """The one-argument variants of ``recipe`` (``(label, recipe)``) whose argument no op result was seen to depend
    on: for every donor the argument differs in, ``recipe`` with the donor's value and the donor with
    ``recipe``'s value both give the op's result of the object they came from (at least two such pairs)."""
    pairs: dict[str, list[tuple[Any, Any, Any]]] = {}
    for donor in donors:
        back = dict(ctx.variants(donor, recipe))
        for label, other in ctx.variants(recipe, donor):
            if label != "another object" and label in back:
                pairs.setdefault(label, []).append((other, donor, back[label]))
    out = []
    for label, found in pairs.items():
        same = 0
        for other, donor, donor_changed in found:
            ok_a, ra = _eager(ctx, op, args, other)
            ok_d, rd = _eager(ctx, op, args, donor)
            ok_c, rc = _eager(ctx, op, args, donor_changed)
            if not (ok_a and ok_d and ok_c):
                continue
            if value_differences(expected, ra, "result") or value_differences(rd, rc, "result"):
                same = -1  # the result depends on it
                break
            same += 2
        if same >= 2 * min(2, len(found)):
            out.append((label, found[0][0]))
    return out[:VARIANTS]


def _variant_notes(ctx, op, program, counter, code, recipe, donors, args, expected) -> list[Note]:
    """Notes for the objects that differ from ``recipe``'s in one constructor argument that no op result was seen to
    depend on (:func:`_unread`) and still compiled the program again: the count and torch's reasons (never a
    failure)."""
    notes, compiles = [], counter.frame_count
    for label, other in _unread(ctx, op, args, recipe, donors, expected):
        try:
            with ctx.calling(lambda: f"a compiled program calling {op.qualname} on {other.code}"):
                ctx.call_op(op, args, other.build(), program)
        except Exception:  # noqa: BLE001 - the recompile limit or a compile error: not this note's business
            continue
        record("compiled call of an object giving the same result")
        if counter.frame_count > compiles:
            compiles = counter.frame_count
            reasons = _reasons(code)
            notes.append(Note(
                f"{op.qualname} gives the same result for {other.code} as for {recipe.code} ({show(expected)}) on "
                f"the inputs drawn, and the compiled program compiled again for an object that differs only in "
                f"{label} (torch's guard: `{reasons[-1] if reasons else '(no reason recorded)'}`; "
                f"{counter.frame_count} compiles so far). Not a finding: those inputs may just not tell {label} "
                f"apart; a recompile is needed wherever an op's result depends on {label} (give inputs that "
                "exercise it with conformance.strategy to see)"))
    return notes
