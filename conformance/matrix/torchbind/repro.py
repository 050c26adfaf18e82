"""The reproducer of a failed TorchBind matrix cell: a standalone script that builds the row's program and objects,
runs it in plain eager and through the cell's backend, the way the cell does (:mod:`conformance.matrix.torchbind.run`),
and prints both runs' outputs and the objects' states side by side. How the script prepares the program is the
backend's own (:attr:`conformance.matrix.backends.Backend.script`).

The script judges itself as both kinds' do (:func:`conformance.matrix.repro.judged_run`): it prints ``no
disagreement reproduced`` when the backend gives eager's outputs and leaves the objects as eager does, so the plugin
can tell, before printing it, whether it shows the cell's failure in a fresh interpreter. A backend that raises
makes the script raise at the same step. Dynamic rows are exported with the same ``Dim.AUTO`` on every tensor
dimension; their torch.compile cells compile as the plugin does (``dynamic=None``: sizes become dynamic when they
change).
"""

from __future__ import annotations

from ..backends import Backend
from ..repro import judged_run
from .scenarios import Scenario

__all__ = ["cell_repro"]


def cell_repro(ctx, scn: Scenario, backend: Backend) -> str | None:
    """The script reproducing the cell of ``scn`` (a TorchBind scenario of ``ctx``'s class) through ``backend``;
    ``None`` for a backend without a :attr:`~conformance.matrix.backends.Backend.script` (a test's own)."""
    if not backend.script:
        return None
    attr = scn.placement == "attr"
    inputs = [", ".join(v.code for v in run) for run in scn.tensor_inputs]
    dims = "None"
    if scn.dynamic:
        dims = "tuple({d: torch.export.Dim.AUTO for d in range(x.dim())} if isinstance(x, torch.Tensor) else None " \
               "for x in example)"
    body = [scn.source.rstrip(), "", "",
            "def inputs(run):",
            f"    return [{inputs[0]}] if run == 0 else [{inputs[1]}]", "", "",
            "def module(obj):",
            f"    return {'Program(obj)' if attr else 'Program()'}", "", "",
            "def args(obj, run):",
            f"    return {'tuple(inputs(run))' if attr else '(obj, *inputs(run))'}", "", "",
            "def run_twice(program, obj):",
            "    outputs, states = [], []",
            "    for run in (0, 1):",
            *([] if attr else ["        if run == 1:", "            obj = make_second()"]),
            "        outputs.append(program(*args(obj, run)))",
            "        states.append(obj.__obj_flatten__())",
            "    return outputs, states", "", "",
            *judged_run(backend, dims,
                        # torch.compile traces on its first call, with the traced object; an exported program runs
                        # on a new object in the first state (the traced one went into tracing), unless it holds
                        # its object.
                        "make_first()" if backend.ahead_of_time and not attr else "traced",
                        ("held = getattr(program, 'obj', None)  # an attribute object the program keeps a copy of "
                         "(export)", "held if isinstance(held, torch.ScriptObject) else start"))]
    return ctx.repro([("first", scn.first), ("second", scn.second)], body)
