"""The backward rows of the coverage matrix (issue 31 item 1): which ops get one, gradients compared with plain
eager's, a backward op's fake of the wrong shape, a formula that ignores the object's state, and torch's dropping
of a TorchBind op's gradient under AOTAutograd (a known limitation). Each verdict beside the plain-torch lines that
show the same; inductor only where a test needs it (each compile costs seconds)."""

from __future__ import annotations

import importlib
import re

import pytest
import torch

from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.matrix.backends import Backend
from conformance.matrix.cell import FOLLOWS_FROM_FAKE, GRADIENT_DIFFERS, GRADIENT_WRONG, RAISES, RULES, cell_failure
from conformance.matrix.custom.run import ROWS as CUSTOM_ROWS
from conformance.matrix.custom.run import run_cell as run_custom_cell
from conformance.matrix.gradients import has_backward, numeric_check
from conformance.matrix.limitations import LIMITATIONS
from conformance.matrix.torchbind.rows import row_names
from conformance.matrix.torchbind.run import run_cell
from conftest import engine_of

MOD = "sample_classes.custom_autograd"
CACHE = "samples_inputs::PagedCache"


@pytest.fixture(scope="module")
def gains():
    import sample_classes.custom_autograd as module

    return module


@pytest.fixture(scope="module")
def paged():
    """The ``samples_inputs_autograd`` ops over PagedCache, registered for this module's tests and dropped after
    (while registered they are ops of the class: other tests must not see them), and an engine whose registry
    holds the adopter's examples and strategies."""
    import sample_classes  # noqa: F401 - builds (cached) and loads the libraries

    def register():
        importlib.reload(importlib.import_module("sample_classes.adopter_inputs"))
        importlib.reload(importlib.import_module("sample_classes.inputs_autograd"))

    engine = engine_of(register, Settings(examples=5))
    module = importlib.import_module("sample_classes.inputs_autograd")
    module.register()
    yield engine
    module.unregister()


def _custom_ctx(cls: str):
    return engine_of(None, Settings(examples=5)).context(f"{MOD}.{cls}")


def _grad(fn, x, w):
    x = x.detach().clone().requires_grad_()
    out = fn(x)
    return out, (torch.autograd.grad((out * w).sum(), [x])[0] if out.requires_grad else None)


# ----- which ops get a backward row ---------------------------------------------------------------------------


def test_only_ops_with_an_autograd_formula_get_a_backward_row(gains, paged):
    # Plain torch: torch.library.custom_op gives every op an Autograd kernel (it raises until register_autograd);
    # an op defined with torch.library.define has one only once register_autograd registers it; a C++ op with only
    # a CPU kernel has none.
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    assert has("samples_autograd::gain_backward", "Autograd") and gains.gain_backward._backward_fn is None
    assert has("samples_inputs_autograd::lookup", "Autograd") and not has("samples_inputs::gather", "Autograd")
    op = torch.ops.samples_autograd.gain_backward.default
    assert not has_backward("samples_autograd::gain_backward", op._schema)

    assert CUSTOM_ROWS.names(_custom_ctx("Gain")) == ["gain", "gain_backward", "gain.backward"]
    rows = row_names(paged.context(CACHE))
    assert [r for r in rows if r.endswith(".backward")] == ["op.lookup.backward", "op.weighted.backward",
                                                            "op.weighted_nostate.backward"]
    assert rows[-8:] == ["sequence", "sequence.attr", "tensors.attr", "dynamic", "dynamic.ops", "computed", "mutated",
                         "identity"]
    assert {GRADIENT_DIFFERS, GRADIENT_WRONG} <= set(RULES)


# ----- Python custom classes ----------------------------------------------------------------------------------


def test_a_correct_formula_passes_and_aoti_is_not_applicable(gains):
    ctx = _custom_ctx("Gain")
    for backend in ("eager", "aot_eager"):
        cell = run_custom_cell(ctx, "gain.backward", backend)
        assert cell.status is Status.PASSED, (backend, cell.reason, cell.details)
        assert "torch.autograd.grad(loss, [input 0])" in cell.program
        assert "the backward calls samples_autograd::gain_backward" in cell.program
    aoti = run_custom_cell(ctx, "gain.backward", "aoti")
    assert aoti.status is Status.SKIPPED and aoti.reason.startswith("AOTInductor compiles an inference-only")


def test_a_backward_fake_of_the_wrong_shape_fails_the_compiled_cells(gains):
    # Plain torch: eager runs the real kernels and is right; aot_eager traces the backward with the backward op's
    # fake (one row fewer than grad) and the autograd engine rejects the gradient's shape.
    w = torch.ones(3, 2)
    x = torch.ones(3, 2)
    obj = gains.GainBackwardFakeWrong(2.0)
    _, eager = _grad(lambda t: gains.gain_bwfake(t, obj), x, w)
    assert torch.equal(eager, torch.full((3, 2), 2.0))
    torch._dynamo.reset()
    compiled = torch.compile(lambda t, g: gains.gain_bwfake(t, g), backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match=r"invalid gradient at index 0 - got \[2, 2\] but expected shape compatible "
                                        r"with \[3, 2\]"):
        _grad(lambda t: compiled(t, obj), x, w)

    ctx = _custom_ctx("GainBackwardFakeWrong")
    assert run_custom_cell(ctx, "gain_bwfake.backward", "eager").status is Status.PASSED
    cell = run_custom_cell(ctx, "gain_bwfake.backward", "aot_eager")
    # The backward op's fake, run on its call in eager's backward, gives the wrong shape: the cell follows from it.
    assert (cell.status, cell.rule) == (Status.FAILED, FOLLOWS_FROM_FAKE)
    # The message names the backward op's fake and both shapes, then the op, the stage and what torch raised.
    assert cell.reason.startswith("the fake of samples_autograd::gain_backward_wrong returns [1, 3] torch.float32 "
                                  "where samples_autograd::gain_backward_wrong returns [2, 3] torch.float32 on the "
                                  "same arguments (its call in eager's backward): compiling the backward of "
                                  "samples_autograd::gain_bwfake (its backward calls "
                                  "samples_autograd::gain_backward_wrong) through aot_eager raised RuntimeError: ")
    assert "returned an invalid gradient at index 0 - got [1, 3] but expected shape compatible with [2, 3]" \
        in cell.reason
    # Export traces no backward: a failure there is not the backward fake's, whatever that fake returns.
    saved = run_custom_cell(ctx, "gain_bwfake.backward", "export_saveload")
    assert (saved.status, saved.limitation) == (Status.UNSUPPORTED, "custom-saveload-object-input"), saved.reason


def test_a_backward_that_raises_for_another_reason_names_the_op_and_the_stage(gains):
    def raises_in_backward(scn, module, args):
        class Boom(torch.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return t.clone()

            @staticmethod
            def backward(ctx, grad):
                raise RuntimeError("backward exploded")

        return lambda *a: Boom.apply(module(*a))

    cell = run_custom_cell(_custom_ctx("Gain"), "gain.backward", Backend("boom", "test", "boom", raises_in_backward))
    assert (cell.status, cell.rule) == (Status.FAILED, RAISES)
    assert cell.reason == ("BackwardFailed: the backward (torch.autograd.grad) of run 0, the backward of "
                           "samples_autograd::gain (its backward calls samples_autograd::gain_backward), through "
                           "boom raised RuntimeError: backward exploded")


def test_a_formula_that_ignores_the_object_fails_against_finite_differences(gains):
    # Plain torch: compiled gradients are eager's (the formula is the same), and both ignore the factor, which
    # torch.autograd.gradcheck's finite differences show.
    obj, x, w = gains.GainFormulaIgnoresState(3.0), torch.ones(2, 2), torch.ones(2, 2)
    _, eager = _grad(lambda t: gains.gain_nostate(t, obj), x, w)
    torch._dynamo.reset()
    compiled = torch.compile(lambda t, g: gains.gain_nostate(t, g), backend="aot_eager", fullgraph=True)
    _, got = _grad(lambda t: compiled(t, obj), x, w)
    assert torch.equal(eager, got) and torch.equal(eager, torch.ones(2, 2))  # d(3x)/dx is 3, not 1
    assert not torch.autograd.gradcheck(lambda t: gains.gain_nostate(t, obj), (x.double().requires_grad_(),),
                                        raise_exception=False)

    # One fault of eager's formula is one failure of the row: the first column's cell (torch.compile eager) reports it.
    cell = run_custom_cell(_custom_ctx("GainFormulaIgnoresState"), "gain_nostate.backward", "eager")
    assert (cell.status, cell.rule) == (Status.FAILED, GRADIENT_WRONG)
    # A fact about eager's formula, with gradcheck's numbers (its Jacobians' largest difference and where), not its
    # message cut short; the failure names no backend as not reproducing eager (aot_eager gives eager's gradient).
    factor = float(re.search(r"first: obj = GainFormulaIgnoresState\((.*?)\)", cell.program).group(1))
    assert re.fullmatch(r"eager's own gradient of samples_autograd::gain_nostate \(its autograd formula, in plain "
                        r"eager\) disagrees with finite differences \(torch\.autograd\.gradcheck's, float64, step "
                        r"1e-06\) on (\d+) of (\d+) Jacobian entries; the largest: d output 0(\[[\d, ]*\])? / "
                        r"d input 0(\[[\d, ]*\])? is 1 by the formula, (\S+) by finite differences \(difference "
                        r"\S+\)\. Every backend runs the same formula: the formula's fault, not the backend's",
                        cell.reason), cell.reason
    assert re.search(r"is 1 by the formula, (\S+) by", cell.reason).group(1) == f"{factor:.6g}"
    assert "Jacobian mismatch" not in cell.reason
    failure = cell_failure(cell)
    assert failure.rule == GRADIENT_WRONG and "does not reproduce" not in failure.summary
    assert failure.summary == cell.reason

    # A backend that also differs from eager fails on its own gradient first; eager's formula follows in the details.
    def doubles(scn, module, args):
        return lambda *a: module(*a) * 2

    cell = run_custom_cell(_custom_ctx("GainFormulaIgnoresState"), "gain_nostate.backward",
                           Backend("doubles", "test", "doubles", doubles))
    assert (cell.status, cell.rule) == (Status.FAILED, GRADIENT_DIFFERS), cell.reason
    assert any(d.startswith("eager's own gradient of samples_autograd::gain_nostate") for d in cell.details)


def test_a_straight_through_estimator_is_not_judged_by_finite_differences(gains):
    # Plain torch: ste_quantize rounds (its forward is flat between steps), its formula passes the gradient through
    # where the input was not clipped. gradcheck fails on it: its numerical Jacobian is zero, the formula's is not.
    # Compiled, the gradient is eager's.
    q = gains.Quantizer(0.5, 4.0)  # values up to 4 steps (2.0)
    x, w = torch.tensor([[0.3, -1.1], [2.9, 0.8]]), torch.ones(2, 2)
    out, eager = _grad(lambda t: gains.ste_quantize(t, q), x, w)
    assert torch.equal(out, torch.tensor([[0.5, -1.0], [2.0, 1.0]]))
    assert torch.equal(eager, torch.tensor([[1.0, 1.0], [0.0, 1.0]]))  # zero where 2.9 was clipped
    torch._dynamo.reset()
    compiled = torch.compile(lambda t, o: gains.ste_quantize(t, o), backend="aot_eager", fullgraph=True)
    assert torch.equal(_grad(lambda t: compiled(t, q), x, w)[1], eager)
    x64 = x.double().requires_grad_()
    assert not torch.autograd.gradcheck(lambda t: gains.ste_quantize(t, q), (x64,), raise_exception=False)
    helpers = importlib.import_module("torch.autograd.gradcheck")
    (numerical,), = helpers._get_numerical_jacobian(lambda t: (gains.ste_quantize(t, q),), (x64,), eps=1e-6)
    assert torch.equal(numerical, torch.zeros(4, 4, dtype=torch.float64))

    # Objects the test chooses: one clips none of the row's inputs (0..5), the other clips most, so the second
    # changes eager's gradient (drawn objects depend on what hypothesis drew earlier in the process).
    def quantizers():
        import conformance

        conformance.examples(f"{MOD}.Quantizer", derive=False)(lambda: [gains.Quantizer(0.5, 12.0),
                                                                         gains.Quantizer(0.5, 2.0)])

    ctx = engine_of(quantizers, Settings(examples=5)).context(f"{MOD}.Quantizer")
    for backend in ("eager", "aot_eager"):
        cell = run_custom_cell(ctx, "ste_quantize.backward", backend)
        assert (cell.status, cell.rule) == (Status.PASSED, ""), (backend, cell.reason)
        note = next(d for d in cell.details if d.startswith("eager's gradient of samples_autograd::ste_quantize is "
                                                             "not the finite differences'"))
        assert "the forward is flat on these inputs (piecewise constant" in note
        assert note.endswith("a straight-through estimator, is a choice by design that finite differences cannot "
                             "judge; the cells compare the backend's gradient with eager's alone")

    def doubles(scn, module, args):  # the cells still fail on the backend's own gradient
        return lambda *a: module(*a) * 2

    cell = run_custom_cell(ctx, "ste_quantize.backward", Backend("doubles", "test", "doubles", doubles))
    assert (cell.status, cell.rule) == (Status.FAILED, GRADIENT_DIFFERS), cell.reason
    assert ": gradient of input 0: Tensor-likes are not close!" in cell.reason and "(eager vs doubles; " in cell.reason


def _ones_formula(forward):
    """``forward`` with the autograd formula ``grad * 1`` (a straight-through estimator's)."""
    class Through(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return forward(t)

        @staticmethod
        def backward(ctx, grad):
            return grad * 1.0

    return lambda args: Through.apply(args[0])


def test_finite_differences_tell_a_rounding_forward_from_a_constant_one():
    # Both forwards have a numerical Jacobian of zero at gradcheck's step, and the formula grad * 1 fails gradcheck
    # on both; a float8 round trip (an FP8 recipe's qdq) moves by steps: its gradient is a choice, not judged. A
    # forward that ignores its input (x * 0) never moves: its derivative is 0 and the formula is wrong.
    x = torch.tensor([[0.3, -1.7, 2.2], [5.0, -0.05, 1.0]])
    qdq = _ones_formula(lambda t: t.to(torch.float8_e4m3fn).to(t.dtype))
    zero = _ones_formula(lambda t: t * 0.0)
    for fn in (qdq, zero):
        assert not torch.autograd.gradcheck(lambda t: fn((t,)), (x.double().requires_grad_(),),
                                            raise_exception=False)
    diffs, note = numeric_check(qdq, (x,), "qdq")
    assert diffs == [] and "the forward is flat on these inputs (piecewise constant: of 36 Jacobian entries, 6 are" \
        in note
    diffs, note = numeric_check(zero, (x,), "zero")
    assert note is None and [d.rule for d in diffs] == [GRADIENT_WRONG]
    assert "on 6 of 36 Jacobian entries; the largest: d output 0[0, 0] / d input 0[0, 0] is 1 by the formula, 0 " \
           "by finite differences (difference 1)" in diffs[0].line
    # A smooth forward with a wrong formula: the numbers are the formula's and the finite differences'.
    diffs, _ = numeric_check(_ones_formula(lambda t: t * 3.0), (x,), "triple")
    assert "is 1 by the formula, 3 by finite differences (difference 2)" in diffs[0].line


def test_a_backend_whose_gradient_differs_fails_with_its_rule(gains):
    def doubles(scn, module, args):  # a program that computes twice the op: its gradient is twice eager's
        return lambda *a: module(*a) * 2

    def detaches(scn, module, args):  # a program whose outputs carry no gradient
        return lambda *a: module(*a).detach()

    ctx = _custom_ctx("Gain")
    cell = run_custom_cell(ctx, "gain.backward", Backend("doubles", "test", "doubles", doubles))
    assert (cell.status, cell.rule) == (Status.FAILED, GRADIENT_DIFFERS), cell.reason
    assert ": gradient of input 0: Tensor-likes are not close!" in cell.reason
    assert "(eager vs doubles; greatest absolute difference " in cell.reason
    cell = run_custom_cell(ctx, "gain.backward", Backend("detaches", "test", "detaches", detaches))
    assert (cell.status, cell.rule) == (Status.FAILED, GRADIENT_DIFFERS), cell.reason
    assert "no gradient flows back through samples_autograd::gain: output 0 of detaches does not require grad" \
        in cell.reason


def test_a_wrong_formula_is_one_failure_of_its_row_not_one_per_backend(gains):
    # Plain torch: aot_eager and export give eager's gradient, so each of their cells agrees with eager; eager's
    # formula is wrong against finite differences whatever the backend (the test above shows the numbers).
    obj, x, w = gains.GainFormulaIgnoresState(3.0), torch.ones(2, 2), torch.ones(2, 2)
    _, eager = _grad(lambda t: gains.gain_nostate(t, obj), x, w)
    torch._dynamo.reset()
    compiled = torch.compile(lambda t, g: gains.gain_nostate(t, g), backend="aot_eager", fullgraph=True)
    assert torch.equal(_grad(lambda t: compiled(t, obj), x, w)[1], eager)
    exported = torch.export.export(_Nostate(gains), (x.clone().requires_grad_(), obj), strict=False).module()
    assert torch.equal(_grad(lambda t: exported(t, obj), x, w)[1], eager)

    ctx = _custom_ctx("GainFormulaIgnoresState")
    cells = {b: run_custom_cell(ctx, "gain_nostate.backward", b) for b in ("eager", "aot_eager", "export")}
    wrong = [b for b, c in cells.items() if c.rule == GRADIENT_WRONG]
    assert wrong == ["eager"], {b: (c.status, c.rule) for b, c in cells.items()}
    pointer = ("eager's own gradient of samples_autograd::gain_nostate disagrees with finite differences "
               "(matrix.gradient-wrong): a fault of its autograd formula, which every backend runs alike, so one cell "
               "of the row reports it, matrix[gain_nostate.backward-eager]; the row's other cells judge only their "
               "backend's gradients against eager's")
    for backend in ("aot_eager", "export"):  # judged on agreement with eager alone, and told where the fault is
        # The formula ignores the object, so no object changes eager's gradient: not a pass (a program holding the
        # traced object's gradient gives the same), but never this row's failure either.
        assert cells[backend].status is Status.UNTOLD, (backend, cells[backend].reason)
        assert pointer in cells[backend].details
    assert cells["eager"].status is Status.FAILED and pointer in cells["eager"].details
    assert cell_failure(cells["eager"]).rule == GRADIENT_WRONG


class _Nostate(torch.nn.Module):
    def __init__(self, gains):
        super().__init__()
        self.op = gains.gain_nostate

    def forward(self, t, g):
        return self.op(t, g)


# ----- TorchBind classes --------------------------------------------------------------------------------------


def _cache(n: int, size: int = 3):
    c = torch.classes.samples_inputs.PagedCache(size, 2)
    for k in range(n):
        c.append(torch.full((size,), float(k)))
    return c


def test_torch_drops_a_torchbind_ops_gradient_under_aot_autograd(paged):
    # Plain torch: eager's output requires grad; aot_eager's does not (the op, given a FakeScriptObject while
    # tracing, is dispatched in Python, where AutogradCPU falls through), so the gradient is silently lost.
    ops = torch.ops.samples_inputs_autograd
    x = torch.ones(2, 3, requires_grad=True)
    assert ops.weighted(x, _cache(2)).requires_grad
    torch._dynamo.reset()
    compiled = torch.compile(lambda t, c: ops.weighted(t, c), backend="aot_eager", fullgraph=True)
    assert not compiled(x, _cache(2)).requires_grad
    assert torch.DispatchKey.AutogradCPU in ops.weighted.default._fallthrough_keys()

    ctx = paged.context(CACHE)
    assert run_cell(ctx, "op.weighted.backward", "eager").status is Status.PASSED
    assert run_cell(ctx, "op.weighted.backward", "export").status is Status.PASSED
    cell = run_cell(ctx, "op.weighted.backward", "aot_eager")
    assert (cell.status, cell.limitation) == (Status.UNSUPPORTED, "torchbind-op-autograd"), cell.reason
    assert "samples_inputs_autograd::weighted is a TorchBindOpOverload whose AutogradCPU key falls through" \
        in cell.reason
    assert any(e.key == "torchbind-op-autograd" and "torch/_ops.py" in e.source for e in LIMITATIONS)


def test_a_torchbind_backward_op_fake_torch_never_runs_cannot_fail_the_cell(paged):
    # gather_backward's fake of the wrong shape: torch never calls it (no backward is traced, as above), so the
    # lookup's cells are as they were; eager's gradient runs the real gather_backward.
    from sample_classes.fakes_inputs import BROKEN

    ctx = paged.context(CACHE)
    with BROKEN["gather_backward_per_index"].installed():
        ctx.cells_by_program.clear()
        table = torch.zeros(2, 3, requires_grad=True)
        out = torch.ops.samples_inputs_autograd.lookup(table, torch.tensor([1]), _cache(2))
        (grad,) = torch.autograd.grad(out.sum(), [table])
        assert torch.equal(grad, torch.tensor([[0.0] * 3, [1.0] * 3]))
        # The table's gradient is one-hot at idx whatever the cache holds: eager's gradient is the same on every
        # example object, so the cell cannot tell a stale program (not a pass), and never fails.
        assert run_cell(ctx, "op.lookup.backward", "eager").status is Status.UNTOLD
        cell = run_cell(ctx, "op.lookup.backward", "aot_eager")
        assert (cell.status, cell.limitation) == (Status.UNSUPPORTED, "torchbind-op-autograd"), cell.reason
    ctx.cells_by_program.clear()


def test_a_torchbind_formula_that_ignores_the_object_fails(paged):
    # Plain torch: d(x * cache.size())/dx is cache.size(); the formula says 1 (gradcheck's finite differences).
    ops = torch.ops.samples_inputs_autograd
    x = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
    assert not torch.autograd.gradcheck(lambda t: ops.weighted_nostate(t, _cache(2)), (x,), raise_exception=False)
    assert torch.autograd.gradcheck(lambda t: ops.weighted(t, _cache(2)), (x,))

    cell = run_cell(paged.context(CACHE), "op.weighted_nostate.backward", "eager")
    assert (cell.status, cell.rule) == (Status.FAILED, GRADIENT_WRONG), cell.reason
    assert cell.reason.startswith("eager's own gradient of samples_inputs_autograd::weighted_nostate (its autograd "
                                  "formula, in plain eager) disagrees with finite differences")
    assert re.search(r"the largest: d output 0(\[[\d, ]*\])? / d input 0(\[[\d, ]*\])? is 1 by the formula, \S+ by "
                     r"finite differences",
                     cell.reason), cell.reason
    # Under aot_eager torch drops the op's gradient (the limitation) before any formula runs: that is the cell's
    # verdict; a note in its details says the formula is wrong, and which cell reports it (the eager cell, once).
    cell = run_cell(paged.context(CACHE), "op.weighted_nostate.backward", "aot_eager")
    assert (cell.status, cell.limitation) == (Status.UNSUPPORTED, "torchbind-op-autograd"), cell.reason
    assert any(d.startswith("eager's own gradient of samples_inputs_autograd::weighted_nostate") for d in cell.details)


def test_gradients_that_differ_after_a_forward_of_another_dtype_say_the_forward_is_the_cause():
    # Under the autocast column a kernel that relies on the ambient autocast returns bfloat16 in eager and float32
    # compiled (the forward row's cell reports that); the backward cell's gradients then differ too, and its first
    # line says why (a trial's finding: it showed only the gradients' difference).
    from conformance.matrix.gradients import GradientRun, gradient_differences

    eager = GradientRun([True], [torch.tensor([1.0, 2.0])], (torch.bfloat16,))
    compiled = GradientRun([True], [torch.tensor([1.0, 2.002])], (torch.float32,))
    first, *rest = gradient_differences("run 0", ["t0"], eager, compiled, "autocast", "ns::op")
    assert first.line == ("run 0: the forward's outputs already differ in dtype (eager bfloat16, autocast float32), "
                          "so the gradients differ as a consequence: the forward row's cell of this column reports "
                          "the cause") and first.rule == GRADIENT_DIFFERS
    assert rest and rest[0].line.startswith("run 0: gradient of t0")
    same = gradient_differences("run 0", ["t0"], eager, GradientRun([True], [torch.tensor([1.0, 2.002])],
                                                                     (torch.bfloat16,)), "autocast", "ns::op")
    assert same and not any("forward's outputs" in d.line for d in same)
    assert not gradient_differences("run 0", ["t0"], eager, GradientRun([True], [torch.tensor([1.0, 2.0])],
                                                                         (torch.float32,)), "autocast", "ns::op")
