"""The reproducer of a failed TorchBind matrix cell: a standalone script that builds the row's program and objects,
runs it in plain eager and through the cell's backend, the way the cell does (:mod:`conformance.matrix.torchbind.run`),
and prints both runs' outputs and the objects' states side by side. How the script prepares the program is the
backend's own (:attr:`conformance.matrix.backends.Backend.script`).

The script judges itself (:mod:`conformance.engine.reproducers`): it prints ``no disagreement reproduced`` when the
backend gives eager's outputs and leaves the objects as eager does (tensors by ``torch.testing.assert_close``,
other values by type and ``==``), so the plugin can tell, before printing it, whether it shows the cell's failure
in a fresh interpreter. A backend that raises makes the script raise at the same step. Dynamic rows are exported
with the same ``Dim.AUTO`` on every tensor dimension; their torch.compile cells compile as the plugin does
(``dynamic=None``: sizes become dynamic when they change).
"""

from __future__ import annotations

from ...engine.reproducers import NOT_REPRODUCED
from ..backends import Backend
from .scenarios import Scenario

__all__ = ["cell_repro"]

_COMPARE = [
    "def same(a, b):",
    "    a, b = pytree.tree_leaves(a), pytree.tree_leaves(b)",
    "    if len(a) != len(b):",
    "        return False",
    "    for x, y in zip(a, b):",
    "        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):",
    "            if not isinstance(y, torch.Tensor):",
    "                return False",
    "            if not isinstance(x, torch.Tensor):  # AOTInductor returns a 0-dim tensor for an int",
    "                x, y = torch.tensor(x), y.reshape(())",
    "            try:",
    "                torch.testing.assert_close(y, x, equal_nan=True, check_dtype=x.dim() > 0)",
    "            except AssertionError:",
    "                return False",
    "        elif type(x) is not type(y) or x != y:",
    "            return False",
    "    return True",
    "",
]


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
            "first = make_first()",
            "expected = run_twice(module(first), first)",
            "",
            "traced = make_first()",
            "example = args(traced, 0)",
            f"DYNAMIC = {dims}",
            *backend.script,
            # torch.compile traces on its first call, with the traced object; an exported program runs on a new
            # object in the first state (the traced one went into tracing), unless it holds its object.
            f"start = {'make_first()' if backend.ahead_of_time and not attr else 'traced'}",
            "held = getattr(program, 'obj', None)  # an attribute object the program keeps a copy of (export)",
            "got = run_twice(program, held if isinstance(held, torch.ScriptObject) else start)",
            "print('eager:  ', expected)",
            f"print('{backend.name}:', got)",
            "", *_COMPARE,
            "if same(expected, got):",
            f"    print({NOT_REPRODUCED!r})"]
    return ctx.repro([("first", scn.first), ("second", scn.second)], body)
