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

A failed cell of a backward row (:mod:`conformance.matrix.torchbind.backward`, an op's or a method's) gets the same
definitions and the gradients' lines (:func:`conformance.matrix.repro.judged_gradients`): each run's gradients of
the cell's loss, in plain eager and through the backend, compared.
"""

from __future__ import annotations

from ..backends import Backend
from ..backward import BackwardScenario, reports_formula
from ..repro import GRADIENTS, judged_gradients, judged_run
from .scenarios import Scenario

__all__ = ["cell_repro"]


def cell_repro(ctx, scn: Scenario | BackwardScenario, backend: Backend) -> str | None:
    """The script reproducing the cell of ``scn`` (a TorchBind scenario of ``ctx``'s class, or a backward row's)
    through ``backend``; ``None`` for a backend without a :attr:`~conformance.matrix.backends.Backend.script` (a
    test's own)."""
    if not backend.script:
        return None
    backward = isinstance(scn, BackwardScenario)
    base: Scenario = scn.base if backward else scn
    attr = base.placement == "attr"
    inputs = [", ".join(v.code for v in run) for run in base.tensor_inputs]
    dims, spec = "None", []
    if base.dynamic:  # as Scenario.dynamic_shapes: every dim Dim.AUTO, a list of tensors one spec per element
        dims = "tuple(dims(x) for x in example)"
        spec = ["def dims(x):",
                "    if isinstance(x, torch.Tensor):",
                "        return {d: torch.export.Dim.AUTO for d in range(x.dim())}",
                "    if isinstance(x, (list, tuple)):",
                "        return type(x)(dims(v) for v in x)",
                "    return None", "", ""]
    body = [base.source.rstrip(), "", "", *spec,
            "def inputs(run):",
            f"    return [{inputs[0]}] if run == 0 else [{inputs[1]}]", "", "",
            "def module(obj):",
            f"    return {'Program(obj)' if attr else 'Program()'}", "", "",
            "def args(obj, run):",
            f"    return {'tuple(inputs(run))' if attr else '(obj, *inputs(run))'}", "", ""]
    # torch.compile traces on its first call, with the traced object; an exported program runs on a new object in
    # the first state (the traced one went into tracing), unless it holds its object.
    start = "make_first()" if backend.ahead_of_time and not attr else "traced"
    if backward:  # the cell's runs: the first object's state, then the second's (backward.backward_scenario)
        body += ["def make(run):", "    return make_second() if run else make_first()", "", "", "RUNS = 2", "", "",
                 *GRADIENTS, *judged_gradients(backend, dims, start, reports_formula(scn, backend))]
    else:
        body += ["def run_twice(program, obj):",
                 "    outputs, states = [], []",
                 "    for run in (0, 1):",
                 *([] if attr and not base.swap else ["        if run == 1:", "            obj = make_second()"]),
                 # a swapped attribute: the program's own module (export) or the compiled one takes the object
                 *(["            program.obj = obj"] if base.swap else []),
                 "        outputs.append(program(*args(obj, run)))",
                 "        states.append(obj.__obj_flatten__())",
                 # the other example objects, each with run 1's inputs (conformance.matrix.torchbind.sweep)
                 *([f"    for make in ({''.join(f'make_sweep{k}, ' for k in range(len(base.sweep)))}):",
                    "        obj = make()",
                    *(["        program.obj = obj"] if base.swap else []),
                    "        outputs.append(program(*args(obj, 1)))",
                    "        states.append(obj.__obj_flatten__())"] if base.sweep else []),
                 "    return outputs, states", "", "",
                 *judged_run(backend, dims, start,
                             ("held = getattr(program, 'obj', None)  # an attribute object the program keeps a copy "
                              "of (export)", "held if isinstance(held, torch.ScriptObject) else start"))]
    sweep = [] if backward else [(f"sweep{k}", e) for k, e in enumerate(base.sweep)]
    return ctx.repro([("first", base.first), ("second", base.second), *sweep], body)
