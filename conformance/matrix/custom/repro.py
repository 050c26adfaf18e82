"""The reproducer of a failed matrix cell of a Python custom class: a standalone script that imports the user's
module, builds the row's program and each object of its sequence (:mod:`conformance.matrix.custom.rows`), runs the
program in plain eager and through the cell's backend the way the cell does (:mod:`conformance.matrix.custom.run`:
traced with the first object, then called with a new object of each step), and prints both runs' outputs and, for a
symbolic class on a backend whose runs change the object, the objects' states, side by side. How the script prepares
the program is the backend's own (:attr:`conformance.matrix.backends.Backend.script`), and what follows the
definitions is the TorchBind kind's too (:func:`conformance.matrix.repro.judged_run`): the script prints ``no
disagreement reproduced`` when the backend agrees with eager.

A step whose object eager itself rejects is left out of the script, as the cell leaves it out of its comparison.

A failed cell of a backward row (:mod:`conformance.matrix.custom.backward`) gets the same definitions, every object
of the sequence (the backward cell runs each), and the gradients' lines
(:func:`conformance.matrix.repro.judged_gradients`).
"""

from __future__ import annotations

from typing import Any

from ...custom.context import CustomClassContext, state_of
from ..backends import Backend
from ..backward import BackwardScenario, reports_formula
from ..repro import GRADIENTS, judged_gradients, judged_run
from .rows import CustomScenario

__all__ = ["cell_repro"]


def cell_repro(ctx: CustomClassContext, scn: CustomScenario | BackwardScenario, backend: Backend) -> str | None:
    """The script reproducing the cell of ``scn`` (a row of ``ctx``'s class, or a backward row's) through
    ``backend``; ``None`` for a backend without a :attr:`~conformance.matrix.backends.Backend.script` (a test's own)
    or a scenario without the source of its objects."""
    backward = isinstance(scn, BackwardScenario)
    base: CustomScenario = scn.base if backward else scn
    if not backend.script or len(base.codes) != len(base.steps):
        return None
    steps = list(range(len(base.steps))) if backward else _accepted(base, backend)
    tensors = ", ".join(base.args.args[i].code for i in base.tensor_positions)
    make = ["def make(step):", "    \"\"\"A new object in the state of each step of the row's sequence.\"\"\""]
    for n, k in enumerate(steps):
        label = base.steps[k][0].split(":", 1)[0]
        make += [f"    {'if' if n == 0 else 'elif'} step == {n}:  # {label}",
                 *(f"        {ln}" for ln in base.codes[k])]
    make += ["    return obj"]
    body = ["import torch.utils._pytree as pytree", "", "", base.program.rstrip(), "", "", *make, "", "",
            "def make_first():", "    return make(0)", "", "",
            "def inputs():", f"    return [{tensors}]", "", "",
            "def module(obj):", "    return Program()", "", "",
            "def args(obj, run):", "    return (*inputs(), obj)", "", ""]
    # torch.compile traces on its first call; an exported program was traced with ``traced`` and runs on new
    # objects, as the cell runs every step on a new one.
    start = "make_first()" if backend.ahead_of_time else "traced"
    if backward:
        return ctx.repro(body + [f"RUNS = {len(steps)}", "", "", *GRADIENTS,
                                 *judged_gradients(backend, "None", start, reports_formula(scn, backend))])
    state = _state_keys(ctx, base, backend)
    record = (f"states.append({{k: getattr(obj, k) for k in {state!r} if hasattr(obj, k)}})" if state else
              "states.append({})  # the cell compares outputs only here")
    in_place = []
    for k, code, _mutate in base.in_place:  # the object the program ran on in step k, changed in place
        if k in steps:
            n = steps.index(k)
            where = ("globals().get('traced', ran[0])  # exported with traced; compiled on its first run" if n == 0
                     else f"ran[{n}]")
            in_place += [f"    obj = {where}", f"    {code}  # changed in place",
                         f"    outputs.append(program(*args(obj, {len(steps)})))", f"    {record}"]
    body += ["def run_twice(program, obj):",
             f"    \"\"\"The program on each object of the sequence ({len(steps)} runs, the first on ``obj``): its "
             "outputs,", "    and the objects' states after (the fields the cell compares).\"\"\"",
             "    outputs, states, ran = [], [], []",
             f"    for step in range({len(steps)}):",
             "        if step:",
             "            obj = make(step)",
             "        ran.append(obj)",
             "        outputs.append(program(*args(obj, step)))",
             f"        {record}",
             *in_place,
             "    return outputs, states", "", "",
             *judged_run(backend, "None", start)]
    return ctx.repro(body)


def _accepted(scn: CustomScenario, backend: Backend) -> list[int]:
    """The steps whose object plain eager accepts (under the column's autocast, as the cell runs eager): the first
    always, the others where eager returns."""
    reference = scn.module()
    kept = [0]
    with backend.autocasting():
        for k, (_label, make) in enumerate(scn.steps[1:], start=1):
            try:
                reference(*scn.inputs(), make())
            except Exception:  # noqa: BLE001 - an object the op rejects in eager: the cell leaves it out too
                continue
            kept.append(k)
    return kept


def _state_keys(ctx: CustomClassContext, scn: CustomScenario, backend: Backend) -> tuple[Any, ...]:
    """The fields of an object's state the script reads after each run (with ``getattr``): those
    :func:`~conformance.custom.context.state_of` reads of the first object, for a symbolic class on a backend
    whose runs change the object the cell holds (the cell compares states there only); none otherwise."""
    if ctx.info.kind != "symbolic" or not backend.state_visible:
        return ()
    return tuple(k for k in state_of(scn.steps[0][1]()) if isinstance(k, str) and k.isidentifier())
