"""The other example objects of a TorchBind matrix cell: after runs 0 and 1, the compiled or exported program runs on
each other example object (in a state of its own, with run 1's inputs), and its outputs and the object's state
must equal plain eager's on a fresh object in that state.

Why: two objects cannot show every stale program. torch.compile marks a value dynamic once it has recompiled for
a second one (automatic dynamic shapes, ``torch/_dynamo/config.py`` ``automatic_dynamic_shapes``), and a program
over a TorchBind object's flattened int can then keep the second object's result for every later object: plain
torch on 2.13 to 2.15, ``lambda c, x: x * c.value()`` over ``samples::Counter`` gives 2, 3, then 3 for ``Counter(5)``
(pinned in ``tests/unit/matrix/test_matrix_sweep.py``). A row whose runs are new objects (the ``input``
placement) or a swapped attribute (:attr:`~conformance.matrix.torchbind.scenarios.Scenario.swap`) sweeps; a row that
runs one evolving attribute object cannot be given another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from ...engine.compare import flat_state_differences, value_differences
from ...torchbind.examples import Example, read_state, state_key
from ..cell import OUTPUT_DIFFERS, STALE_RESULT, STATE_DIFFERS, Difference
from ..explain import STAYED, show

__all__ = ["SWEEP_LIMIT", "SweepRun", "sweep_objects", "eager_sweep", "sweep_differences"]

#: At most this many other example objects per cell (each may make torch.compile compile again).
SWEEP_LIMIT = 4


@dataclasses.dataclass(frozen=True)
class SweepRun:
    """Plain eager on a fresh object of ``example`` with run 1's inputs: its ``output`` and the object's ``state``
    (``__obj_flatten__``) afterwards."""

    example: Example
    output: Any
    state: Any


def sweep_objects(taken: Sequence[Example], valid: Sequence[Example]) -> tuple[Example, ...]:
    """The examples of ``valid`` (those eager runs the row's calls on) in states none of ``taken`` (the objects of
    runs 0 and 1) nor an earlier one has, in order, at most :data:`SWEEP_LIMIT`. Examples whose state cannot be
    read are left out."""
    seen, out = set(), []
    for example in [*taken, *valid]:
        try:
            key = state_key(read_state(example.build(), example.tracer))
        except Exception:  # noqa: BLE001 - the examples check reports an object that does not build or read
            continue
        if key in seen:
            continue
        seen.add(key)
        if example not in taken:
            out.append(example)
    return tuple(out[:SWEEP_LIMIT])


def eager_sweep(scn: Any) -> list[SweepRun]:
    """Plain eager on each of ``scn.sweep`` (a :class:`~conformance.matrix.torchbind.scenarios.Scenario`): the input
    placement gives ``forward`` a fresh object; a swapped attribute row sets the module's attribute to one."""
    out = []
    for example in scn.sweep:
        obj = example.build()
        module = scn.module(obj if scn.placement == "attr" else None)
        with example.tracer.calling(f"the eager run of scenario {scn.row} on {scn.qualname} on the example object "
                                    f"{example.label} with run 1's inputs"):
            output = module(*scn.args(obj, 1))
        out.append(SweepRun(example, output, read_state(obj, example.tracer)))
    return out


def sweep_differences(scn: Any, run_on: Any, side: str, *, states: bool, scalars_as_tensors: bool = False
                      ) -> list[Difference]:
    """Run the backend's program on each of ``scn.sweep`` — ``run_on(obj)`` gives its output for a fresh object
    (set as the attribute first, for a swapped attribute row) — and list every difference from
    :func:`eager_sweep`: each output, and (``states``: a backend whose objects' states are compared) the object's
    flattened state. An output that equals what eager gave on run 0's or run 1's object, where this object's
    differs, stayed at an earlier object's result (``matrix.stale-result``)."""
    ref = scn.reference
    diffs: list[Difference] = []
    # What eager gave on each object run before this one: run 0's (the traced object), run 1's, earlier sweeps'.
    earlier: list[tuple[str, Any]] = [("the traced object", ref.outputs[0]), ("run 1's object", ref.outputs[1])]
    for k, expected in enumerate(scn.sweep_reference):
        obj = expected.example.build()
        got = run_on(obj)
        where = f"the example object {expected.example.label} (sweep {k + 1}, run 1's inputs)"
        # Paths are run 1's, so that outputs eager itself does not reproduce (ref.unstable) are held to metadata.
        found = value_differences(expected.output, got, "run 1 output", scalars_as_tensors, ref.unstable)
        if found:
            same = [name for name, out in earlier if _kept(expected.output, got, out, scalars_as_tensors, ref.unstable)]
            line = (f"{where}: " + "; ".join(d.replace("run 1 output", "output", 1) for d in found[:3])
                    + f" (eager {show(expected.output)}, {side} {show(got)})")
            if same and same[0] == "the traced object":
                diffs.append(Difference(STALE_RESULT, f"{line}; {side} gives what eager gave on the traced object: "
                                                      f"{STAYED}"))
            elif same:
                diffs.append(Difference(STALE_RESULT, f"{line}; {side} gives what eager gave on {same[0]}: it stayed "
                                                      "at an earlier object's result"))
            else:
                diffs.append(Difference(OUTPUT_DIFFERS, line))
        earlier.append((f"the example object {expected.example.label}", expected.output))
        if states and isinstance(obj, torch.ScriptObject):
            diffs += Difference.each(STATE_DIFFERS, flat_state_differences(
                expected.state, read_state(obj, expected.example.tracer), f"{where} object state", ("eager", side)))
    return diffs


def _kept(expected: Any, got: Any, earlier: Any, scalars_as_tensors: bool, unstable: frozenset[str]) -> bool:
    """Whether ``got`` is ``earlier`` (what eager gave on an object run before) wherever it differs from
    ``expected``: output by output for a tuple of outputs, the whole value otherwise."""
    def differs(a: Any, b: Any, where: str) -> bool:
        return bool(value_differences(a, b, where, scalars_as_tensors, unstable))

    if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)) and isinstance(earlier, (list, tuple)) \
            and len(expected) == len(got) == len(earlier):
        wrong = [i for i in range(len(got)) if differs(expected[i], got[i], f"run 1 output[{i}]")]
        return bool(wrong) and not any(differs(earlier[i], got[i], f"run 1 output[{i}]") for i in wrong)
    return not differs(earlier, got, "run 1 output")
