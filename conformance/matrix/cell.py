"""Run one matrix cell (a scenario through a backend) and compare it with plain eager.

A cell passes when, for both runs (the second on an object in another state, or on the same attribute object
again), the backend's outputs equal eager's (``torch.testing.assert_close``) and the object's final state
(``__obj_flatten__``) equals eager's; and, for ahead-of-time backends, tracing left the traced object unchanged
("tracing must not mutate the real object or cause side effects", PT2 custom-class notes).
"""

from __future__ import annotations

import dataclasses
import traceback
from typing import Any

import torch

from ..compare import flat_state_differences, value_differences
from ..example_objects import read_state
from ..isolation import calling
from ..results import exception_line
from .backend import Backend, get_backend
from .limitations import find_limitation
from .scenarios import Scenario, scenario

__all__ = ["CellResult", "run_cell", "STATUSES"]

#: pass / fail / unsupported (a listed torch limitation) / skipped (no eager reference for the row).
STATUSES = ("pass", "fail", "unsupported", "skipped")


@dataclasses.dataclass
class CellResult:
    """The outcome of one cell. ``reason``: one line for the report's footnote; ``details``: further lines
    (mismatches, traceback tail); ``program``: the scenario's source and objects; ``limitation``: the key of the
    matching :data:`~conformance.matrix.limitations.LIMITATIONS` entry for unsupported cells."""

    qualname: str
    row: str
    backend: str
    status: str
    reason: str = ""
    details: list[str] = dataclasses.field(default_factory=list)
    program: str = ""
    limitation: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _run(scn: Scenario, backend: Backend) -> list[str]:
    """Compile/export, run twice, and list every difference from the eager reference."""
    ref = scn.reference
    diffs: list[str] = []
    traced = scn.first.build()
    before = read_state(traced)
    runner = backend.prepare(scn, scn.module(traced), scn.args(traced, 0))
    if backend.ahead_of_time:
        changed = flat_state_differences(before, read_state(traced), "state", ("before", "after"))
        if changed:
            diffs.append("tracing changed the real object used to trace: " + "; ".join(changed))
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
        out = runner(*scn.args(obj, run))
        diffs += value_differences(ref.outputs[run], out, f"run {run} output",
                                   scalars_as_tensors=backend.scalars_as_tensors)
        if backend.state_visible:
            diffs += flat_state_differences(ref.states[run], read_state(obj), f"run {run} object state",
                                            ("eager", backend.name))
    return diffs


def run_cell(qualname: str, row: str, backend: str | Backend) -> CellResult:
    """Run the cell (``backend`` by name, or a :class:`Backend` object); never raises for errors in torch or
    the class (they become ``fail`` or ``unsupported``).

    Raises :class:`~conformance.results.NotApplicable` only when the row has no eager reference.
    """
    backend = get_backend(backend) if isinstance(backend, str) else backend
    backend_name = backend.name
    scn = scenario(qualname, row)
    result = CellResult(qualname, row, backend_name, "pass", program=scn.code())
    try:
        with calling(f"scenario {row} of {qualname} through {backend.title} (compile and run)", timed=False):
            diffs = _run(scn, backend)
        evidence, failure_details, matched = diffs, diffs, diffs[0] if diffs else ""
    except Exception as exc:  # noqa: BLE001 - compile/export/runtime errors are this cell's result
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        evidence = [exception_line(exc, limit=400)]
        failure_details, matched = [ln.rstrip() for ln in tb[-4:]], f"{type(exc).__name__}: {exc}"
    if evidence:
        limitation = find_limitation(backend_name, scn, matched)
        if limitation is not None:
            result.status, result.reason, result.limitation = "unsupported", limitation.reason, limitation.key
            result.details = evidence + [f"known limitation {limitation.key}: {limitation.source}"]
        else:
            result.status, result.reason, result.details = "fail", evidence[0], failure_details
    return result
