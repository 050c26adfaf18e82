"""What a TorchBind coverage-matrix cell says about its result, so that a failed cell explains itself.

* :func:`output_differences`: each output of a run that differs from plain eager, named by its position and the
  program line that computes it, with eager's value, the backend's, and — on the run with an object in another
  state — the value eager gives on an object in the traced state: a result that stayed there is a program that
  kept the traced object's result (burned in as a constant, or a missing guard), not a wrong computation.
* :func:`state_differences`: the same for the object's flattened state after each run.
* :func:`fake_cause`: a failed cell whose program calls a method or op whose fake disagrees with C++ on the traced
  object (the comparison of the ``agreement`` / ``custom_op`` and ``return_type`` checks,
  :func:`conformance.engine.compare.disagreement` and :func:`conformance.engine.jit_types.value_mismatch`) names that item.

Each line is a :class:`~conformance.matrix.cell.Difference` with its rule id. What both kinds' cells share (how a
value is shown, the note of a cell that cannot tell) is :mod:`conformance.matrix.explain`.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from typing import Any

import torch

from ...engine.compare import (differs_in_kind, disagreement, flat_state_differences, flattened_pairs,
                               kept_differences, side_text, value_differences)
from ...engine.jit_types import return_type, value_mismatch
from ...torchbind.calls import Call, Callee
from ...torchbind.context import UNREADABLE, defined_on_fake, kept_fields, new_fake_mode
from ...torchbind.examples import deepcopy_differences, read_state
from ..cell import OUTPUT_DIFFERS, STALE_RESULT, STATE_DIFFERS, Difference
from ..explain import STAYED, UNCHANGED, Agreement, FakeCause, show

__all__ = ["output_differences", "state_differences", "fake_cause", "FakeCause", "Agreement"]


def _as_expected(expected: Any, got: Any, scalars_as_tensors: bool) -> Any:
    """AOTInductor's 0-dim tensor for an int/float/bool result, as the Python scalar (as ``value_differences``
    compares it)."""
    if scalars_as_tensors and isinstance(got, torch.Tensor) and got.dim() == 0 and \
            isinstance(expected, (bool, int, float)):
        return type(expected)(got.item())
    return got


def output_differences(scn, run: int, got: Any, side: str, *, scalars_as_tensors: bool = False) -> list[Difference]:
    """One line per output of run ``run`` of scenario ``scn`` that differs from plain eager
    (:func:`conformance.engine.compare.value_differences`, tensors through ``torch.testing.assert_close``; positions
    whose values eager itself does not reproduce compared by metadata): ``run 1 output[0] (r0 =
    obj.get_default_index(), on another object): eager 3 (int), export 2 (int); eager on an object in the traced
    state gives 2: it stayed at the traced object's value`` (rule ``matrix.stale-result``; any other difference
    ``matrix.output-differs``). ``side`` names the backend's result. Raises nothing of its own."""
    ref = scn.reference
    expected, traced = ref.outputs[run], ref.traced[run] if ref.traced else None
    where = f"run {run} output"
    found = value_differences(expected, got, where, scalars_as_tensors, ref.unstable)
    if not found:
        return []
    if not (isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)) and len(expected) == len(got)):
        return Difference.each(OUTPUT_DIFFERS, [f"{found[0]} (eager {show(expected)}, {side} {show(got)})",
                                                *found[1:]])
    labels = scn.output_labels
    whose = ("the traced object" if run == 0 else
             "the same object, run again" if scn.placement == "attr" else "an object in another state")
    out = []
    for i, (e, g) in enumerate(zip(expected, got)):
        found = value_differences(e, g, f"{where}[{i}]", scalars_as_tensors, ref.unstable)
        if not found:
            continue
        g = _as_expected(e, g, scalars_as_tensors)
        label = labels[i] if i < len(labels) else f"output {i}"
        line, rule = f"{where}[{i}] ({label}, on {whose}): eager {show(e)}, {side} {show(g)}", OUTPUT_DIFFERS
        if run == 1 and traced is not None and i < len(traced) and \
                value_differences(traced[i], e, f"{where}[{i}]", metadata_only=ref.unstable):
            line += f"; eager on an object in the traced state gives {show(traced[i])}"
            if not value_differences(traced[i], g, f"{where}[{i}]", scalars_as_tensors, ref.unstable):
                line, rule = f"{line}: {STAYED}", STALE_RESULT
        before = _unmutated(scn, "outputs", run, i)
        if before is not _NONE and rule == OUTPUT_DIFFERS and \
                not value_differences(before, g, f"{where}[{i}]", scalars_as_tensors, ref.unstable):
            line += f"; eager without the program's in-place changes gives {show(before)}: {UNCHANGED}"
        # What the comparison found, where a value alone does not say it (tensor values, nested positions).
        extra = [d for d in found if not d.startswith(f"{where}[{i}]: expected ")]
        out.append(Difference(rule, line + (f" [{'; '.join(extra)}]" if extra else "")))
    return out


_NONE = object()


def _unmutated(scn, what: str, run: int, i: int) -> Any:
    """Position ``i`` of run ``run``'s ``outputs`` or ``states`` (``what``) in eager's reference of a mutated
    scenario's program without its in-place changes (:attr:`Scenario.unmutated`); ``_NONE`` where there is none or
    that program does not run in eager."""
    ref = scn.unmutated
    if ref is None:
        return _NONE
    values = getattr(ref, what)[run]
    return values[i] if isinstance(values, (list, tuple)) and i < len(values) else _NONE


def _pairs(state: Any) -> list[tuple[str, Any]] | None:
    """A flattened state's ``(key, value)`` pairs, or ``None`` when it is not a tuple of such pairs."""
    if isinstance(state, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 and
                                                isinstance(p[0], str) for p in state):
        return [(p[0], p[1]) for p in state]
    return None


def state_differences(scn, run: int, got: Any, side: str) -> list[Difference]:
    """The differences of the object's state after run ``run`` (``got``, its ``__obj_flatten__``) from eager's,
    compared as :func:`conformance.engine.compare.flat_state_differences` compares (tensor values included), one line per
    flattened key that differs: ``run 1 object state 'default_index': eager left 3 (int), export left 2 (int)``,
    with — on the run with an object in another state — what eager leaves in an object in the traced state (rule
    ``matrix.stale-result`` where the object stayed there, else ``matrix.state-differs``). Falls back to the
    comparison's own lines for a state that is not ``(key, value)`` pairs. Raises nothing of its own."""
    ref = scn.reference
    where = f"run {run} object state"
    found = flat_state_differences(ref.states[run], got, where, ("eager", side))
    expected, actual = _pairs(ref.states[run]), _pairs(got)
    if not found or expected is None or actual is None or [k for k, _ in expected] != [k for k, _ in actual]:
        return Difference.each(STATE_DIFFERS, found)
    traced = _pairs(ref.traced_states[run]) if ref.traced_states else None
    out = []
    for i, ((key, e), (_, g)) in enumerate(zip(expected, actual)):
        detail = flat_state_differences(e, g, f"{where} {key!r}", ("eager", side))
        if not detail:
            continue
        line, rule = f"{where} {key!r}: eager left {show(e)}, {side} left {show(g)}", STATE_DIFFERS
        if run == 1 and traced is not None and i < len(traced) and traced[i][0] == key and \
                flat_state_differences(traced[i][1], e):
            line += f"; eager leaves {show(traced[i][1])} in an object in the traced state"
            if not flat_state_differences(traced[i][1], g):
                line, rule = f"{line}: {STAYED}", STALE_RESULT
        before = _unmutated(scn, "states", run, i)
        if before is not _NONE and rule == STATE_DIFFERS and isinstance(before, (list, tuple)) and \
                len(before) == 2 and before[0] == key and not flat_state_differences(before[1], g):
            line += f"; eager without the program's in-place changes leaves {show(before[1])}: {UNCHANGED}"
        extra = [d for d in detail if not d.startswith(f"{where} {key!r}: eager gave ")]
        out.append(Difference(rule, line + (f" [{'; '.join(extra)}]" if extra else "")))
    return out or Difference.each(STATE_DIFFERS, found)


def fake_cause(ctx, scn, backend=None) -> FakeCause | Agreement | None:
    """Whose a failed cell's failure is, by replaying the scenario's calls in order on a real object and on its fake
    (``maybe_to_fake_obj`` under a new ``FakeTensorMode``, as tracing does) — in the traced state, then, for a
    ``backend`` that traces on its first call (torch.compile, which traces again for an object its guards reject),
    in the state of every other object the cell runs the program on — each result compared as ``agreement``
    compares it (:func:`conformance.engine.compare.disagreement`) and against the schema's return type as
    ``return_type`` does; for a ``backend`` that traces ahead of time, the objects' pickling too (``copy.deepcopy``
    through ``def_pickle``, as ``maybe_to_fake_obj`` and a saved program copy them), as the ``deepcopy`` item
    compares it. Returns a :class:`FakeCause` naming the first call that disagrees, what each side did and the
    items that report it (``torchbind[ns.Cls]::agreement[m]``, ``return_type[m]``, ``coverage[m]``,
    ``custom_op[op]`` for an op, ``deepcopy``); an :class:`Agreement` when every call agrees (torch's defect); or
    ``None`` when nothing can be said: no fake class (the class traces with its real object), an object that cannot
    be fakified, a call C++ rejects, or a fake that keeps other values under the flattened keys after the calls."""
    if ctx.traces_with_real_object or ctx.info.fake_class is None:
        return None
    ahead = getattr(backend, "ahead_of_time", True)
    states = [(scn.first, "an object in the traced state")]
    if scn.placement == "input" and not ahead:
        if scn.second is not scn.first:
            states.append((scn.second, "the second run's object"))
        states += [(e, f"the example object {e.label}") for e in scn.sweep if e is not scn.first]
    compared = 0
    for example, where in states:
        again = not ahead and scn.placement == "attr" and example is scn.first
        found = _replay(ctx, scn, example, where, again)
        if isinstance(found, FakeCause):
            return dataclasses.replace(found, files=_fake_files(ctx.info.fake_class))
        if found is None:
            return found
        compared += found
    also = []
    if ahead and ctx.info.pickles:
        lost = _pickling_loses(ctx, scn.first)
        if lost is None:
            return None
        if lost:
            return FakeCause((f"{ctx.info.test_name}::deepcopy",), lost, whose="the class's def_pickle, which loses "
                             "state")
        also.append("a copy through def_pickle keeps the object's flattened state")
    return Agreement(compared, tuple(where for _, where in states), tuple(also)) if compared else None


def _pickling_loses(ctx, example) -> str | None:
    """What ``copy.deepcopy`` of an object in ``example``'s state (through ``__getstate__`` / ``__setstate__``)
    changes in its flattened state, as a line; ``""`` when nothing; ``None`` when it cannot be told."""
    try:
        obj = example.build()
        with ctx.calling(f"copy.deepcopy of the example object {example.label}, checking its pickling for a failed "
                         "matrix cell", timed=False):
            _, found = deepcopy_differences(obj, example.tracer, ("the object", "its copy"))
    except Exception:  # noqa: BLE001 - the deepcopy item reports a copy that raises
        return None
    return f"copy.deepcopy of the example object {example.label}: {'; '.join(found)}" if found else ""


def _replay(ctx, scn, example, where: str, again: bool) -> FakeCause | int | None:
    """:func:`fake_cause` on objects in ``example``'s state (``where`` names it in the message): the first
    disagreement, else how many results were compared (``None`` when nothing can be said).

    Before the calls, what the fake keeps under each flattened key (``getattr(fake, key)``, as torch.compile reads
    it): a key it keeps no readable value for is the ``roundtrip`` item's (torch.compile fails on it whatever the
    calls do). After each call, the keys it kept right: one that the call leaves otherwise than C++ does names that
    call (``differential``), even when a later call is the first whose result differs (a setter that keeps nothing,
    then its getter). With ``again`` (the program runs once more on the same object, and torch.compile fakifies it
    anew when its guards reject the changed state), the calls run a second time on the real object, on the fake
    that made the first run's calls and on a fake made now from the real object's flattened state: where only the
    new fake disagrees, the class's ``__obj_flatten__`` leaves out state the calls read (the ``differential``
    item's ``state-drifts``)."""
    try:
        real_obj, other = example.build(), example.build()
        mode = new_fake_mode()
        fake_obj = ctx.fakify(other, mode, state=example.label)
        tracked = _kept_right(real_obj, fake_obj, mode, example)
    except Exception:  # noqa: BLE001 - the roundtrip and examples checks report objects that cannot be fakified
        return None
    if isinstance(tracked, FakeCause):
        return FakeCause((f"{ctx.info.test_name}::roundtrip",), f"the fake of {where}: {tracked.call}",
                         whose="the fake's __obj_unflatten__, which keeps no attribute torch.compile reads")
    compared = 0
    for call in _calls(scn):
        with ctx.calling(f"{call.code()} on {where}, checking the fake's result for a failed matrix cell",
                         timed=False):
            real = ctx.call_real(real_obj, call)
            fake = ctx.call_fake(fake_obj, mode, call)
        if real.raised:
            return None  # not a comparison (validity rule); eager ran the program, so this is not the cause
        compared += 1
        cause = _call_cause(ctx, call, real, fake, where)
        if cause is not None:
            return cause
        try:
            drift, reshaped = _drift(real_obj, fake_obj, mode, example, tracked)
        except Exception:  # noqa: BLE001 - the flatten item reports a state that does not read
            return None
        if drift:
            return FakeCause((f"{ctx.info.test_name}::differential",), f"{call.code()} on {where} returned as C++ "
                             f"did, but then {drift}", reshapes=reshaped)
    try:  # the state after the calls: what the fake keeps under each flattened key, as tracing would read it
        after = _kept_state(real_obj, fake_obj, mode, example)
    except Exception:  # noqa: BLE001 - the flatten item reports a state that does not read
        return None
    if any(lines is None or lines for _, _, _, lines in after):
        return None  # not a result of a call: neither the fake's wrong result nor surely torch's
    if not again:
        return compared
    again_where = f"{where}, run again"
    try:
        fresh_mode = new_fake_mode()
        refake = ctx.fakify(real_obj, fresh_mode, state=f"{example.label} after the program ran")
    except Exception:  # noqa: BLE001 - as above
        return None
    for call in _calls(scn):
        with ctx.calling(f"{call.code()} on {again_where}, checking the fake's result for a failed matrix cell",
                         timed=False):
            real = ctx.call_real(real_obj, call)
            fake = ctx.call_fake(fake_obj, mode, call)
            made_now = ctx.call_fake(refake, fresh_mode, call)
        if real.raised:
            return compared
        compared += 1
        cause = _call_cause(ctx, call, real, fake, again_where)
        if cause is not None:
            return cause
        if disagreement(real, made_now):
            return FakeCause(
                (f"{ctx.info.test_name}::differential",),
                f"{call.code()} on {again_where}: C++ {side_text(real)}, and so does the fake that made the first "
                f"run's calls, but a fake made from the object's flattened state after that run (as torch.compile "
                f"fakifies it when it compiles again) {side_text(made_now)}",
                whose="the class's __obj_flatten__, which leaves out state the program's calls read",
                reshapes=made_now.raised or differs_in_kind(real.value, made_now.value))
    return compared


def _calls(scn) -> list[Call]:
    """The scenario's calls as the agreement check makes them: a dunder reached through its operator
    (``obj["a"]``) is the method called by name."""
    return [pc.call if pc.call.callee.op is not None else Call(Callee.method(pc.call.callee.name), pc.args)
            for pc in scn.calls]


def _call_cause(ctx, call: Call, real, fake, where: str) -> FakeCause | None:
    """The items a disagreement of one call reports (``custom_op[op]`` for an op; ``agreement[m]``, or
    ``coverage[m]`` for a method the fake lacks, and ``return_type[m]`` for a method), as a cause; ``None`` when
    the fake agrees."""
    callee = call.callee
    found = disagreement(real, fake)
    items = []
    if callee.op is not None:
        if found:
            items.append(f"custom_op[{callee.op.short_name}]")
    else:
        if found:  # a method the fake lacks is the coverage item's (agreement skips it)
            items.append(f"{'agreement' if defined_on_fake(ctx.info.fake_class, callee.name) else 'coverage'}"
                         f"[{callee.name}]")
        schema = ctx.info.methods.get(callee.name)
        if schema is not None and not fake.raised and value_mismatch(fake.value, return_type(schema)):
            items.append(f"return_type[{callee.name}]")
    if not items:
        return None
    # The comparison's own lines where the values alone do not say it (a tensor's shape, a list's element).
    plain = not isinstance(real.value, (torch.Tensor, list, tuple, dict))
    detail = "; ".join(found[1]) if found and found[1] and not plain else ""
    return FakeCause(tuple(f"{ctx.info.test_name}::{item}" for item in items),
                     f"{call.code()} on {where}: C++ {side_text(real)}, fake "
                     f"{side_text(fake)}{f' ({detail})' if detail else ''}",
                     reshapes=fake.raised or differs_in_kind(real.value, fake.value))


def _kept_state(real_obj, fake_obj, mode, example) -> list[tuple[str, Any, Any, list[str] | None]]:
    """Per key of the real object's flattened state now: the key, C++'s value, the value the fake keeps under it
    (:func:`kept_fields`, as torch.compile reads it; ``UNREADABLE`` where it keeps none) and how that differs
    (:func:`kept_differences` lines), or ``None`` where the fake keeps no readable value."""
    flat = read_state(real_obj, example.tracer)
    kept = kept_fields(fake_obj, flat, mode)
    out = []
    for key, value in flattened_pairs(flat):
        got = kept.get(key, UNREADABLE)
        out.append((key, value, got, None if got is UNREADABLE else
                    kept_differences(value, got, f"the flattened key {key!r}", "C++ flattens")))
    return out


def _kept_right(real_obj, fake_obj, mode, example) -> FakeCause | frozenset[str]:
    """The flattened keys under which the fresh fake keeps what C++ flattened (:func:`_kept_state`); a
    :class:`FakeCause` whose ``call`` says which key it keeps no readable value for (torch.compile reads
    ``getattr(fake, key)``: the ``roundtrip`` item's ``key-missing``). A key kept in another form (a string kept
    decoded) is not tracked: the roundtrip check only notes it."""
    right = set()
    for key, value, _, lines in _kept_state(real_obj, fake_obj, mode, example):
        if lines is None:
            return FakeCause((), f"it keeps no readable attribute for the flattened key {key!r} (C++ flattens "
                                 f"{show(value)})")
        if not lines:
            right.add(key)
    return frozenset(right)


def _drift(real_obj, fake_obj, mode, example, tracked: frozenset[str]) -> tuple[str, bool]:
    """How the fake's kept values under the ``tracked`` keys now differ from the real object's flattened state,
    as a line (``""`` when they do not), and whether any differs in kind (:func:`differs_in_kind`; a key kept
    unreadable does)."""
    lines, reshaped = [], False
    for key, value, got, found in _kept_state(real_obj, fake_obj, mode, example):
        if key not in tracked or found == []:
            continue
        if found is None:
            lines.append(f"the flattened key {key!r}: the fake keeps no readable value")
            reshaped = True
        else:
            lines += found
            reshaped = reshaped or differs_in_kind(value, got)
    return "; ".join(lines), reshaped


def _fake_files(fake_class) -> tuple[str, ...]:
    """The real paths of the source files of ``fake_class``, its bases and the functions in their namespaces (a
    method set on a class made elsewhere): builtins and code without a Python source file left out."""
    paths = []
    for klass in inspect.getmro(fake_class):
        try:
            paths.append(inspect.getsourcefile(klass))
        except (TypeError, OSError):  # a builtin class, or one whose module has no file
            pass
        for attr in vars(klass).values():
            code = getattr(inspect.unwrap(getattr(attr, "__func__", attr)), "__code__", None)
            if code is not None:
                paths.append(code.co_filename)
    return tuple(dict.fromkeys(os.path.realpath(p) for p in paths if p and os.path.exists(p)))
