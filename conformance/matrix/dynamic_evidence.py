"""The evidence the limitation table's ``automatic-dynamic-stale-result`` entry reads off a failed torch.compile
cell (:mod:`conformance.matrix.limitations`): the program, compiled again with dynamo's ``eager`` backend, gives
the same wrong result on the cell's further objects with automatic dynamic shapes on, and eager's results with it
off (``torch._dynamo.config.automatic_dynamic_shapes``, ``torch/_dynamo/config.py``). Kind-neutral: it reads the
scenario's objects, program and eager reference, as a TorchBind scenario with a sweep
(:mod:`conformance.matrix.torchbind.sweep`) has them."""

from __future__ import annotations

from typing import Any

import torch

from ..engine import torch_api
from ..engine.compare import value_differences

__all__ = ["automatic_dynamic_confirmed"]


def _sweep_outputs(scenario: Any, automatic: bool) -> list[Any] | None:
    """The outputs of the scenario's program through ``torch.compile(backend="eager", fullgraph=True)`` on run
    0's object, run 1's, then each further object's (run 1's inputs), with automatic dynamic shapes ``automatic``;
    ``None`` when it cannot be run so (an attribute row, a program that raises)."""
    if scenario.placement != "input":
        return None
    objects = [scenario.first.build(), scenario.second.build(), *(e.build() for e in scenario.sweep)]
    try:
        torch_api.dynamo_reset()
        with torch_api.dynamo_config.patch(automatic_dynamic_shapes=automatic):
            program = torch.compile(scenario.module(None), backend="eager", fullgraph=True)
            return [program(*scenario.args(obj, 0 if i == 0 else 1)) for i, obj in enumerate(objects)]
    except Exception:  # noqa: BLE001 - no evidence either way
        return None
    finally:
        torch_api.dynamo_reset()


def automatic_dynamic_confirmed(scenario: Any) -> str | None:
    """What shows that automatic dynamic shapes keep an earlier object's result: with them off, every further object
    of the scenario gets eager's output; with them on, one does not. ``None`` when the evidence is not there (the
    failure is something else, or the program does not compile so)."""
    sweep = getattr(scenario, "sweep", ())
    if not sweep:
        return None
    ref = scenario.reference
    expected = [ref.outputs[0], ref.outputs[1], *(r.output for r in scenario.sweep_reference)]

    def wrong(outputs: list[Any]) -> list[int]:
        return [i for i, (e, g) in enumerate(zip(expected, outputs))
                if value_differences(e, g, "run 1 output" if i else "run 0 output", metadata_only=ref.unstable)]

    on, off = _sweep_outputs(scenario, True), _sweep_outputs(scenario, False)
    if on is None or off is None or wrong(off) or not wrong(on):
        return None
    return (f"compiled again with automatic_dynamic_shapes=False every object gets eager's result; with it on, "
            f"{len(wrong(on))} of {len(expected)} objects do not")
