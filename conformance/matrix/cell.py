"""Run one matrix cell (a scenario through a backend) and compare it with plain eager.

A cell passes when, for both runs (the second on an object in another state, or on the same attribute object
again), the backend's outputs equal eager's (``torch.testing.assert_close``) and the object's final state
(``__obj_flatten__``) equals eager's; and, for ahead-of-time backends, tracing left the traced object unchanged
("tracing must not mutate the real object or cause side effects", PT2 custom-class notes).
"""

from __future__ import annotations

import dataclasses

import traceback

import torch

from ..engine.compare import flat_state_differences
from ..engine.dynamo_state import skip_reason
from ..core.evidence import collecting, replay
from ..torchbind.examples import read_state
from ..core.results import Cell, Failure, Status, exception_line
from .backend import Backend, all_backends, get_backend
from .explain import cannot_tell, fake_cause, output_differences, state_differences
from .export_strict import fake_tensors_left
from .repro import cell_repro
from .limitations import observation, raised_at
from .scenarios import NoEagerReference, Scenario, argument_objects, row_names, scenario

__all__ = ["run_cell", "cell_failure", "cell_skip_reason", "new_cell"]


def _run(scn: Scenario, backend: Backend) -> list[str]:
    """Compile/export, run twice, and list every difference from the eager reference."""
    ref = scn.reference
    diffs: list[str] = []
    traced = scn.first.build()
    before = read_state(traced, scn.first.tracer)
    try:
        runner = backend.prepare(scn, scn.module(traced), scn.args(traced, 0))
    except Exception as exc:
        changed = _traced_object_changed(scn, before, traced) if backend.ahead_of_time else []
        if changed:  # tracing ran the real object's code, changed it, then failed: the change is the cause
            return changed + [f"then {backend.group} {backend.title} failed: {exception_line(exc, limit=300)}"]
        raise
    changed = _traced_object_changed(scn, before, traced) if backend.ahead_of_time else []
    if changed:  # strict export traced the real object (with fake tensors): say so
        diffs += changed
        traced = scn.first.build()  # run on an object in the intended state anyway
    for run in (0, 1):
        if scn.placement == "input":
            if run == 0 and not backend.ahead_of_time:
                obj = traced  # torch.compile traces on its first call, with this object
            else:
                obj = (scn.first if run == 0 else scn.second).build()
        else:
            # The object the program holds: the traced one, or the program's own copy when loading rebuilt it
            # (torch.export.load deserializes attribute constants).
            held = getattr(runner, "obj", None)
            obj = held if isinstance(held, torch.ScriptObject) else traced
        args = scn.args(obj, run)
        out = runner(*args)
        diffs += output_differences(scn, run, out, backend.side, scalars_as_tensors=backend.scalars_as_tensors)
        if backend.state_visible:
            diffs += state_differences(scn, run, read_state(obj, scn.first.tracer), backend.side)
            # Every other object the program was given (an op's second object of the class) ends as in eager.
            for k, (other, expected) in enumerate(zip(argument_objects(args, obj), ref.argument_states[run])):
                diffs += flat_state_differences(expected, read_state(other, scn.first.tracer),
                                                f"run {run} state of the argument object {k + 1} (not the row's "
                                                f"own object)", ("eager", backend.side))
    return diffs


def _traced_object_changed(scn: Scenario, before, traced) -> list[str]:
    """What tracing left in the real object it traced with (FakeTensors, or a changed state), as the first lines
    of a cell's differences; none when it left the object as it was, or when its state cannot be read."""
    try:
        after = read_state(traced, scn.first.tracer)
    except Exception:  # noqa: BLE001 - a state that no longer reads: nothing to show
        return []
    left = fake_tensors_left(after)
    changed = [] if left else flat_state_differences(before, after, "state", ("before", "after"))
    return left or (["tracing changed the real object used to trace: " + "; ".join(changed)] if changed else [])


def _compiler_hint(error: str) -> list[str]:
    """A detail line for a cell whose compile failed in inductor's C++ compiler (``CppCompileError``, from
    ``torch/_inductor/cpp_builder.py``): a toolchain problem, not the class's, that fails plain ``torch.compile``
    the same way; names the cache directory when its path holds a space, which inductor's compile command does
    not quote (``g++: fatal error: input file '/tmp/a' is the same as output file``)."""
    if "CppCompileError" not in error:
        return []
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    where = cache_dir()
    spaced = (f" Torch's cache directory {where!r} (TORCHINDUCTOR_CACHE_DIR) has a space in its path, which "
              "inductor's C++ compile command does not quote: use a directory without one."
              if any(c.isspace() for c in where) else "")
    return ["inductor's C++ compiler failed on the code inductor generated: a toolchain problem (the compiler, its "
            "flags, the paths it is given) fails every inductor and AOTInductor cell, and plain torch.compile, the "
            f"same way.{spaced}"]


def new_cell(ctx, row: str, backend: str) -> Cell:
    """A ``PASSED`` :class:`Cell` of ``ctx``'s class for ``row`` through ``backend`` (both by name), placed by
    their order in the report (a backend that is not one of the plugin's, e.g. a test's, goes last)."""
    names = [b.name for b in all_backends()]
    column = names.index(backend) if backend in names else len(names)
    return Cell(ctx.info.qualname, row, backend, row_names(ctx).index(row), column)


def run_cell(ctx, row: str, backend: str | Backend) -> Cell:
    """Run the cell of ``ctx``'s class (a :class:`~conformance.torchbind.context.ClassContext`) for ``row`` through
    ``backend`` (by name, or a :class:`Backend` object); never raises for errors in torch or the class (they
    become ``FAILED`` or ``UNSUPPORTED``).

    A row whose program plain eager rejects on every example object is ``SKIPPED`` (n/a), saying what eager
    raised and keeping the program. Raises :class:`~conformance.core.results.NotApplicable` only when the row has no
    program at all (e.g. no method runs in eager for a sequence).
    """
    backend = get_backend(backend) if isinstance(backend, str) else backend
    backend_name = backend.name
    qualname = ctx.info.qualname
    if backend.dynamo and (disabled := skip_reason(f"the {backend.group} {backend.title} cell")) is not None:
        cell = new_cell(ctx, row, backend_name)  # torch.compile would run the program eagerly: nothing to judge
        cell.status, cell.reason = Status.SKIPPED, disabled
        return cell
    try:
        scn = scenario(ctx, row)
    except NoEagerReference as exc:  # n/a: say what eager raised, and keep the program it raised on
        cell = new_cell(ctx, row, backend_name)
        cell.status, cell.reason, cell.program = Status.SKIPPED, f"no eager reference: {exc}", exc.program or None
        return cell
    cell = new_cell(ctx, row, backend_name)
    cell.program = scn.code()
    same = (cell.program, bool(scn.dynamic), backend)  # backend: the object (a test's may reuse a name)
    earlier, compared = ctx.cells_by_program.get(same, (None, None))
    if earlier is not None:  # another row generated the same program and objects: compiled and run once
        replay(compared)  # the verdict rests on the comparisons made then
        return dataclasses.replace(earlier, row=row, row_index=cell.row_index, details=[
            *earlier.details, f"the same program and objects as row {earlier.row}: compiled and run once for both"])
    try:
        # The label carries the program: a worker lost in here (a hang in torch's compiler) shows it.
        with ctx.calling(lambda: f"scenario {row} of {qualname} through {backend.title} (compile and run)\n"
                                 f"{cell.program}", timed=False, side="torch"), \
                collecting() as compared:
            diffs = _run(scn, backend)
        evidence, failure_details, matched = diffs, diffs, diffs[0] if diffs else ""
    except Exception as exc:  # noqa: BLE001 - compile/export/runtime errors are this cell's result
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        evidence = [exception_line(exc, limit=400)]
        failure_details, matched = [ln.rstrip() for ln in tb[-4:]], f"{type(exc).__name__}: {exc}"
        failure_details += _compiler_hint(matched)
        matched = exc  # the limitation table matches the exception itself (its type and site), not its text
    if scn.reference.unstable:
        cell.details = [f"{path}: its values differ between two identical eager runs (uninitialised memory, e.g. "
                        "torch::empty), so it is compared by shape, dtype and device only"
                        for path in sorted(scn.reference.unstable)]
    if evidence:
        found = observation(backend_name, scn, matched)
        if found is not None:
            limitation, seen = found
            cell.status, cell.limitation = Status.UNSUPPORTED, limitation.key
            cell.reason = f"{limitation.reason} (observed for this class: {seen})"
            cell.details = evidence + [f"known limitation {limitation.key}: {limitation.source}"] + cell.details
        else:
            cell.status, cell.reason = Status.FAILED, evidence[0]
            raised = [] if isinstance(matched, str) else [f"{raised_at(matched)}: no known limitation has this "
                                                          "exception type and site"]
            cell.details = failure_details + raised + cell.details
            cell.repro = cell_repro(ctx, scn, backend_name) or ""
        cause = fake_cause(ctx, scn, backend)  # a fake's wrong result makes the program wrong: name its item
        if cause is not None:
            cell.reason = f"{cell.reason} ({cause.reference})"
            cell.details.insert(0, cause.detail)
    elif not scn.telling:
        cell.details.append(cannot_tell(
            "no example object gives this program another eager output than the traced object",
            "give example objects in states the row's calls read differently (@conformance.examples; the examples "
            "keep one object per __obj_flatten__ state), or argument strategies under which they do "
            "(conformance.strategy)"))
    cell.details += scn.notes
    replay(compared)
    ctx.cells_by_program[same] = (cell, compared)  # only once its verdict is set (a BaseException leaves nothing)
    return cell


def cell_failure(cell: Cell) -> Failure:
    """The :class:`Failure` a ``FAILED`` cell's item reports: which backend does not reproduce eager, why, and
    the program."""
    backend = get_backend(cell.backend)
    return Failure(f"{backend.group} {backend.title} does not reproduce plain eager for {cell.row}: {cell.reason}",
                   details=tuple(cell.details), program=cell.program or None, repro=cell.repro or None,
                   rule="matrix.differs-from-eager")


def cell_skip_reason(cell: Cell) -> str:
    """The skip message of an ``UNSUPPORTED`` cell (a listed torch limitation) or a ``SKIPPED`` one (its reason
    says why it did not run: no fake class to trace with, or no eager reference to compare with)."""
    if cell.status is Status.UNSUPPORTED:
        return f"unsupported: {cell.reason}"
    return cell.reason
