"""What the reproducers of failed matrix cells of both kinds share (:func:`judged_run`): eager's runs, the program
prepared through the cell's backend with the backend's own lines (:attr:`conformance.matrix.backends.Backend.script`),
the backend's runs, both printed, and the script's own verdict.

A kind's script (:mod:`conformance.matrix.torchbind.repro`, :mod:`conformance.matrix.custom.repro`) defines the row's
``Program`` and, before these lines, what they call: ``make_first()`` (a new object in the state the program is
traced with), ``module(obj)`` (the program as an ``nn.Module``), ``args(obj, run)`` (``forward``'s arguments of run
``run``, whose object is ``obj``) and ``run_twice(program, obj)`` (the row's runs of ``program``, the first on
``obj``: ``(outputs, states)``, the objects' states read after each run). A backend's lines may rebind ``expected``
the same way (the autocast column makes eager's runs under its autocast).

The script judges itself (:mod:`conformance.engine.reproducers`): it prints ``no disagreement reproduced`` when the
backend gives eager's outputs and leaves the objects as eager does (tensors by ``torch.testing.assert_close``,
other values by type and ``==``). A backend that raises makes the script raise at the same step.

A backward row's script (:func:`judged_gradients`) has the same definitions, ``make(run)`` (a new object in run
``run``'s state) and :data:`GRADIENTS` in place of the kind's ``run_twice``: each run's gradients of the cell's loss
with respect to the floating-point inputs, through ``torch.autograd.grad``. It judges itself and says so: it prints
:data:`~conformance.engine.reproducers.REPRODUCED` when the backend raises where eager did not, when its gradients
are not eager's, or (in the cell that reports eager's own formula,
:func:`conformance.matrix.gradients.formula_column`'s) when ``torch.autograd.gradcheck`` fails on eager's.
"""

from __future__ import annotations

from ..engine.reproducers import NOT_REPRODUCED, REPRODUCED, judging_lines
from .backends import Backend

__all__ = ["judged_run", "judged_gradients", "COMPARE", "GRADIENTS", "FORMULA"]

#: ``same(a, b)``: whether two ``run_twice`` results agree as the cell compares them
#: (:func:`conformance.engine.compare.value_differences`): the same containers (a list is not a tuple), tensors by
#: ``torch.testing.assert_close`` (values, shape, dtype, device; strides are not part of a compiled program's
#: contract, in the cell or here), other values by type and ``==``; an int/float/bool that AOTInductor returns as a
#: 0-dim tensor (its calling convention) as that scalar.
COMPARE = [
    "def same(a, b):",
    "    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):",
    "        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))",
    "    if isinstance(a, dict) or isinstance(b, dict):",
    "        return type(a) is type(b) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)",
    "    if isinstance(b, torch.Tensor) and b.dim() == 0 and type(a) in (bool, int, float):",
    "        b = type(a)(b.item())  # AOTInductor returns a 0-dim tensor for an int, a float or a bool",
    "    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):",
    "        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):",
    "            return False",
    "        try:",
    "            torch.testing.assert_close(b, a, equal_nan=True)",
    "        except AssertionError:",
    "            return False",
    "        return True",
    "    if isinstance(a, torch.ScriptObject) or isinstance(b, torch.ScriptObject):",
    "        return type(a) is type(b)",
    "    return type(a) is type(b) and (a == b or a != a and b != b)",
    "",
]


def _traced(dims: str) -> list[str]:
    """Eager's runs (``expected``) on a first object, then ``traced``, ``example`` and ``DYNAMIC`` for the backend's
    lines."""
    return ["first = make_first()",
            "expected = run_twice(module(first), first)",
            "",
            "traced = make_first()",
            "example = args(traced, 0)",
            f"DYNAMIC = {dims}"]


def judged_run(backend: Backend, dims: str, start: str, held: tuple[str, str] | None = None) -> list[str]:
    """The lines after a kind's definitions: eager's runs (``expected``) on a first object, the program traced with
    another (``traced``, ``example``; ``DYNAMIC`` is ``dims``, the source of its ``dynamic_shapes``) through
    ``backend``'s lines, then its runs (``got``) with ``start`` (the source of the first run's object), or, given
    ``held`` (a line binding ``held``, and an expression choosing between it and ``start``), with the object that
    expression gives; both printed, and :data:`~conformance.engine.reproducers.NOT_REPRODUCED` when they agree."""
    return [*_traced(dims),
            *backend.script,
            f"start = {start}",
            *([held[0]] if held else []),
            f"got = run_twice(program, {held[1] if held else 'start'})",
            "print('eager:  ', expected)",
            f"print({backend.side + ':'!r}, got)",
            "", *COMPARE,
            "if same(expected, got):",
            f"    print({NOT_REPRODUCED!r})"]


#: What a backward row's script defines after the kind's ``Program``, ``make(run)``, ``module(obj)`` and
#: ``args(obj, run)`` (``RUNS``: how many runs): the cell's loss (:class:`conformance.matrix.gradients.Gradients`:
#: fixed weights drawn from eager's first outputs) and ``run_twice(program, obj)``, each run's gradients through
#: ``program`` (the first on ``obj``, each other on a new object of its run).
GRADIENTS = [
    "def floating(args):",
    "    \"\"\"``args`` with every floating-point tensor (in lists too) a new leaf requiring grad; those leaves.\"\"\"",
    "    made = []",
    "",
    "    def leaf(t):",
    "        if isinstance(t, torch.Tensor) and t.is_floating_point():",
    "            made.append(t.detach().clone().requires_grad_())",
    "            return made[-1]",
    "        return t",
    "",
    "    out = tuple(pytree.tree_map(leaf, a) if isinstance(a, (list, tuple, torch.Tensor)) else a for a in args)",
    "    return out, made",
    "",
    "",
    "def floats(outputs):",
    "    return [t for t in pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.is_floating_point()]",
    "",
    "",
    "def weights():",
    "    \"\"\"The loss's weights: fixed random tensors shaped like plain eager's first floating-point outputs.\"\"\"",
    "    obj = make(0)",
    "    outputs = floats(module(obj)(*floating(args(obj, 0))[0]))",
    "    gen = torch.Generator().manual_seed(0)",
    "    return [torch.randn(o.shape, generator=gen).to(o.dtype) for o in outputs]",
    "",
    "",
    "WEIGHTS = weights()",
    "",
    "",
    "def gradients(call, arguments):",
    "    \"\"\"``call`` with the floating-point inputs requiring grad; loss = sum((out * w).sum()); which",
    "    outputs require grad, and torch.autograd.grad(loss, inputs) (None for an input the loss does not",
    "    depend on).\"\"\"",
    "    arguments, inputs = floating(arguments)",
    "    outputs = floats(call(arguments))",
    "    flags = [o.requires_grad for o in outputs]",
    "    if not any(flags):",
    "        return {'requires_grad': flags}",
    "    loss = sum((o * w.to(o.device)).sum() for o, w in zip(outputs, WEIGHTS) if o.requires_grad)",
    "    return {'requires_grad': flags, 'grads': list(torch.autograd.grad(loss, inputs, allow_unused=True))}",
    "",
    "",
    "def run_twice(program, obj):",
    "    \"\"\"Each run's gradients through ``program``: the first on ``obj``, each other on a new object of",
    "    its run.\"\"\"",
    "    found = []",
    "    for run in range(RUNS):",
    "        if run:",
    "            obj = make(run)",
    "        found.append(gradients(lambda a: program(*a), args(obj, run)))",
    "    return found",
    "",
    "",
]

#: The lines that check plain eager's own gradient against finite differences as the cell does
#: (:func:`conformance.matrix.gradients.numeric_check`: ``torch.autograd.gradcheck`` on float64 copies of the
#: floating-point inputs, the program on a new object of run 0's state each call), adding to ``found``.
FORMULA = [
    "from torch.autograd.gradcheck import GradcheckError",
    "",
    "",
    "def fresh(*xs):",
    "    \"\"\"The program in plain eager on a new object of run 0's state, its floating-point inputs",
    "    replaced by xs.\"\"\"",
    "    obj, xs = make(0), list(xs)",
    "    full = [xs.pop(0) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args(obj, 0)]",
    "    return tuple(floats(module(obj)(*full)))",
    "",
    "",
    "doubles = tuple(a.detach().double().requires_grad_() for a in args(make(0), 0)",
    "                if isinstance(a, torch.Tensor) and a.is_floating_point())",
    "try:",
    "    torch.autograd.gradcheck(fresh, doubles)",
    "except GradcheckError as exc:",
    "    print('eager\\'s formula against finite differences (torch.autograd.gradcheck, float64):', exc)",
    "    found.append('plain eager\\'s own gradient disagrees with finite differences (torch.autograd.gradcheck)')",
]


def judged_gradients(backend: Backend, dims: str, start: str, formula: bool) -> list[str]:
    """The lines after a backward row's definitions (a kind's, then :data:`GRADIENTS`): eager's gradients
    (``expected``), the program prepared through ``backend``'s lines and its gradients (``got``, the first run's
    object is ``start``), both printed; :data:`~conformance.engine.reproducers.REPRODUCED` when preparing or running
    it raises (then the script raises it again, whole) or the gradients differ, and, with ``formula`` (the cell that
    reports eager's own formula), when ``torch.autograd.gradcheck`` fails on eager's
    (:data:`FORMULA`); :data:`~conformance.engine.reproducers.NOT_REPRODUCED` otherwise."""
    side = backend.side
    raised = f"through {side}, the program raised (plain eager ran): "
    differ = f"run {{run}}: the gradients through {side} are not plain eager's"
    return [*_traced(dims),
            "try:",
            *(f"    {ln}" if ln else "" for ln in backend.script),
            f"    got = run_twice(program, {start})",
            "except Exception as exc:  # eager ran: the backend raising is the difference",
            "    print('eager:  ', expected)",
            "    cause = exc  # the innermost of its chain (BackendCompilerFailed names the backend alone)",
            "    for _ in range(32):",
            "        cause = cause.__cause__ or cause.__context__ or cause",
            f"    print({REPRODUCED!r}, {raised!r} + type(cause).__name__ + ': ' +",
            "          (str(cause).strip().splitlines() or [''])[0])",
            "    raise",
            "print('eager:  ', expected)",
            f"print({side + ':'!r}, got)",
            "", "", *COMPARE, "",
            f"found = [f{differ!r}",
            "         for run, (e, g) in enumerate(zip(expected, got)) if not same(e, g)]",
            *(["", *FORMULA, ""] if formula else []),
            *judging_lines("found")]
