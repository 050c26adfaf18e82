"""The method backward rows of the coverage matrix (issue 31 item 1): a TorchBind method taking and returning a
tensor (``samples::Counter.scale``: ``x * value`` in C++) differentiated through each backend and compared with
plain eager. Every backend but plain eager calls the method through ``call_torchbind``, whose autograd kernel is
torch's ``autograd_not_implemented``: the gradient is dropped by torch, whatever the class does (the
``torchbind-method-autograd`` limitation). What the class still decides is the forward, and a fake of the wrong
shape fails the cells as it fails the method's own row. Each verdict beside the plain-torch lines that show it;
inductor only in the test that needs it."""

from __future__ import annotations

import inspect

import pytest
import torch

from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.matrix.backends import Backend
from conformance.matrix.cell import FOLLOWS_FROM_FAKE, GRADIENT_DIFFERS
from conformance.matrix.limitations import LIMITATIONS
from conformance.matrix.torchbind.method_backward import WHOSE_GRADIENT
from conformance.matrix.torchbind.rows import row_names
from conformance.matrix.torchbind.run import ROWS, run_cell
from conftest import engine_of

COUNTER, QUEUE, VOCAB = "samples::Counter", "samples::TensorQueue", "samples_stale::Vocab"
KEY = "torchbind-method-autograd"


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401 - builds (cached) and loads the libraries
    import sample_classes.fakes_stale  # noqa: F401 - registers Vocab's fake

    return sample_classes


@pytest.fixture(autouse=True)
def grad_on():
    """Autograd on, as a user's program has it: these tests are about what eager does with gradients. In the
    quick core (-m "not process and not budget") an earlier test in the same worker left grad mode off (seen
    after tests/unit/matrix/test_matrix.py::test_compile_errors_fail_with_the_error; not traced yet), which
    made eager's own output not require grad."""
    with torch.enable_grad():
        yield


@pytest.fixture(scope="module")
def engine(samples):
    return engine_of(None, Settings(examples=5))


def counter(value: int) -> torch.ScriptObject:
    c = torch.classes.samples.Counter(0)
    c.increment(value)
    return c


class Scale(torch.nn.Module):
    def forward(self, c, x):
        return c.scale(x)


class PushPop(torch.nn.Module):
    def forward(self, q, x):
        q.push(x * 1)
        return q.pop() * 2


def _grad(fn, *args):
    """The output of ``fn(*args)`` (the last argument a tensor requiring grad) and the gradient of its sum w.r.t. that
    tensor (``None``: none reaches it)."""
    x = args[-1]
    out = fn(*args)
    return out, torch.autograd.grad(out.sum(), [x], allow_unused=True)[0] if out.requires_grad else "no grad"


def test_a_method_taking_and_returning_a_tensor_gets_a_backward_row(engine):
    # Planned from the schemas alone (no object is built while rows are planned): scale(Tensor) -> Tensor gets one;
    # TensorQueue's methods either take a tensor or return one, never both, so the main job's rows are unchanged.
    rows = row_names(engine.context(COUNTER))
    assert [r for r in rows if r.endswith(".backward")] == ["scale.backward"]
    assert rows[rows.index("scale.backward") + 1:] == ["sequence", "sequence.attr", "tensors.attr", "dynamic",
                                                       "dynamic.ops", "computed", "mutated", "identity"]
    assert not [r for r in row_names(engine.context(QUEUE)) if r.endswith(".backward")]
    assert ROWS.is_backward_row(engine.context(COUNTER), "scale.backward")


def test_torch_drops_a_methods_gradient_through_call_torchbind(engine):
    # Plain eager differentiates the aten op the C++ method runs: d(x * 3)/dx = 3.
    x = torch.ones(2, 3, requires_grad=True)
    _, grad = _grad(lambda c, t: c.scale(t), counter(3), x)
    assert torch.equal(grad, torch.full((2, 3), 3.0))
    # Traced, the call is call_torchbind, whose Autograd kernel is autograd_not_implemented(deferred_error=True): the
    # output requires grad, no gradient reaches x, and a backward through it raises torch's deferred error.
    for backend in ("eager", "aot_eager"):
        torch._dynamo.reset()
        out, grad = _grad(torch.compile(Scale(), backend=backend, fullgraph=True), counter(3), x)
        assert out.requires_grad and grad is None, backend
    torch._dynamo.reset()
    with pytest.raises(RuntimeError, match="Autograd not implemented for call_torchbind"):
        torch.compile(Scale(), backend="eager", fullgraph=True)(counter(3), x).sum().backward()
    ep = torch.export.export(Scale(), (counter(3), torch.ones(2, 3)), strict=False)
    assert "torch.ops.higher_order.call_torchbind(c, 'scale', x)" in ep.graph_module.code
    out, grad = _grad(ep.module(), counter(3), x)
    assert out.requires_grad and grad is None
    from torch._higher_order_ops.torchbind import call_torchbind

    kernel = inspect.getclosurevars(call_torchbind.py_kernels[torch._C.DispatchKey.Autograd]).nonlocals["fn"]
    assert kernel.__qualname__ == "autograd_not_implemented.<locals>.inner"
    assert inspect.getclosurevars(kernel).nonlocals["deferred_error"] is True
    # The same kernel does not detach a tensor that crosses call_torchbind inside the object: push(x) with x requiring
    # grad, then pop() (no argument requiring grad) returns x itself, history kept, in eager, torch.compile's eager
    # backend and an exported program; AOTAutograd functionalizes the call (the object keeps the unwrapped tensor),
    # and aot_eager's output does not require grad. A program of several calls is not a method backward row.
    queue = lambda: torch.classes.samples.TensorQueue(torch.zeros(3))  # noqa: E731
    v = torch.ones(3, requires_grad=True)
    assert torch.equal(_grad(PushPop(), queue(), v)[1], torch.full((3,), 2.0))
    torch._dynamo.reset()
    assert torch.equal(_grad(torch.compile(PushPop(), backend="eager", fullgraph=True), queue(), v)[1],
                       torch.full((3,), 2.0))
    torch._dynamo.reset()
    assert _grad(torch.compile(PushPop(), backend="aot_eager", fullgraph=True), queue(), v)[1] == "no grad"
    pushpop = torch.export.export(PushPop(), (queue(), torch.ones(3)), strict=False).module()
    assert torch.equal(_grad(pushpop, queue(), v)[1], torch.full((3,), 2.0))

    # The matrix: each backend's cell is the limitation, read off that kernel; AOTInductor is inference-only.
    ctx = engine.context(COUNTER)
    for backend in ("eager", "aot_eager", "export", "export_strict", "export_saveload", "autocast"):
        cell = run_cell(ctx, "scale.backward", backend)
        assert (cell.status, cell.limitation) == (Status.UNSUPPORTED, KEY), (backend, cell.reason)
        assert cell.details[0].startswith("run 0 (the traced object): gradient of input 0: expected Tensor(shape=[2, "
                                          "3]"), cell.details
        assert "got None (NoneType)" in cell.details[0]
        assert "the program calls scale through call_torchbind, whose Autograd kernel is torch's " \
               "autograd_not_implemented(call_torchbind, deferred_error=True)" in cell.reason
    assert "r0 = obj.scale(x0)" in cell.program and "torch.autograd.grad(loss, [input 0])" in cell.program
    assert cell.details[-1] == WHOSE_GRADIENT  # no backend's gradient can show the class's fault: the cell says so
    aoti = run_cell(ctx, "scale.backward", "aoti")
    assert aoti.status is Status.SKIPPED and aoti.reason.startswith("AOTInductor compiles an inference-only")
    entry = next(e for e in LIMITATIONS if e.key == KEY)
    assert "torch/_higher_order_ops/torchbind.py" in entry.source and "autograd_not_implemented" in entry.source


def test_the_limitation_rests_on_evidence_and_a_backend_that_keeps_the_gradient_is_judged(engine):
    # A program run without call_torchbind (the module itself: eager's autograd) keeps eager's gradient and passes;
    # one whose gradient differs fails naming the method and the run; neither is a torch backend the entry covers.
    ctx = engine.context(COUNTER)
    faithful = Backend("faithful", "test", "faithful", lambda scn, module, args: module)
    cell = run_cell(ctx, "scale.backward", faithful)
    assert (cell.status, cell.rule) == (Status.PASSED, ""), cell.reason
    doubles = Backend("doubles", "test", "doubles",
                      lambda scn, module, args: lambda *a: tuple(out * 2 for out in module(*a)))
    cell = run_cell(ctx, "scale.backward", doubles)
    assert (cell.status, cell.rule) == (Status.FAILED, GRADIENT_DIFFERS), cell.reason
    assert cell.reason.startswith("run 0 (the traced object): gradient of input 0: Tensor-likes are not close!")
    assert "(eager vs doubles; greatest absolute difference " in cell.reason
    # The entry's evidence is a gradient that is missing, and torch's kernel: a gradient that is wrong is not it.
    entry = next(e for e in LIMITATIONS if e.key == KEY)
    scn = ROWS.scenario(ctx, "scale.backward")
    assert entry.observe(cell.reason, scn) is None
    assert entry.observe("run 0 (the traced object): gradient of input 0: expected Tensor(shape=[2, 3], dtype="
                         "float32, device=cpu, stride=[3, 1]) (Tensor), got None (NoneType) (eager vs x)", scn)


def _filled_config() -> torch.ScriptObject:
    c = torch.classes.samples.Config(2, 1.5)
    c.add(torch.ones(2, 3), 1.0)
    return c


def test_a_method_whose_eager_output_has_no_gradient_is_not_applicable(samples):
    # Plain torch: Config.total(fallback) returns the fallback itself on an empty config, and ignores it once the
    # config holds items, so eager's output there does not depend on it.
    x = torch.ones(2, 3, requires_grad=True)
    assert torch.classes.samples.Config(2, 1.5).total(x).requires_grad
    assert not _filled_config().total(x).requires_grad
    # With example objects that all hold items, eager has no gradient to compare: every cell is n/a, saying so.
    import conformance

    ctx = engine_of(lambda: conformance.examples("samples::Config", derive=False)(lambda: [_filled_config()]),
                    Settings(examples=5)).context("samples::Config")
    for backend in ("eager", "export"):
        cell = run_cell(ctx, "total.backward", backend)
        assert cell.status is Status.SKIPPED, cell.reason
        assert cell.reason == ("no eager reference: samples::Config.total takes and returns a tensor, but plain "
                               "eager's outputs do not require grad on the row's inputs: no gradient to compare")
    # With the generated examples (the first one empty), run 0 has eager's gradient, and torch drops it.
    cell = run_cell(engine_of(None, Settings(examples=5)).context("samples::Config"), "total.backward", "eager")
    assert (cell.status, cell.limitation) == (Status.UNSUPPORTED, KEY), cell.reason


def _wrong_shape_fake():
    from sample_classes.fakes_stale import BROKEN

    return BROKEN["vocab_lookup_scalar"].installed()


def test_a_fake_of_the_wrong_shape_fails_the_backward_cell_under_aot_autograd(samples):
    # Plain torch: the fake's lookup returns shape [] where C++ returns the ids' shape. The forward runs the real
    # method and is right; AOTAutograd traced the backward with the fake's shape, and autograd raises.
    ids = torch.arange(6.0).reshape(2, 3)
    vocab = lambda: torch.classes.samples_stale.Vocab(["a", "bc"], 2)  # noqa: E731
    with _wrong_shape_fake():
        torch._dynamo.reset()
        compiled = torch.compile(lambda v, t: v.lookup(t), backend="aot_eager", fullgraph=True)
        x = ids.clone().requires_grad_()
        out = compiled(vocab(), x)
        assert torch.equal(out.detach(), vocab().lookup(ids))
        with pytest.raises(RuntimeError, match=r"output with shape \[\] doesn't match the broadcast shape \[2, 3\]"):
            torch.autograd.grad(out.sum(), [x], allow_unused=True)
        torch._dynamo.reset()

        ctx = engine_of().context(VOCAB)
        assert run_cell(ctx, "lookup", "aot_eager").status is Status.PASSED  # the forward row sees nothing
        cell = run_cell(ctx, "lookup.backward", "aot_eager")
        assert (cell.status, cell.limitation, cell.rule) == (Status.FAILED, None, FOLLOWS_FROM_FAKE), cell.reason
        assert cell.reason.startswith("BackwardFailed: the backward (torch.autograd.grad) of run 0, the backward of "
                                      "samples_stale::Vocab.lookup, through aot_eager raised RuntimeError: ")
        assert cell.reason.endswith("(follows from the fake's wrong result, see "
                                    "torchbind[samples_stale.Vocab]::agreement[lookup])")
        # Where the backend's forward and backward run the real method (torch.compile's eager backend), the fake
        # changes nothing: the cell is the limitation, which explains it; it does not say it follows from the fake.
        cell = run_cell(ctx, "lookup.backward", "eager")
        assert (cell.status, cell.limitation) == (Status.UNSUPPORTED, KEY), cell.reason
        assert not any("follows from" in line for line in [cell.reason, *cell.details]), cell.details


@pytest.mark.process  # one inductor compile: runs the C++ compiler
def test_a_fake_of_the_wrong_shape_fails_the_inductor_cell_as_the_forward_does(samples):
    # Plain torch: inductor's generated code asserts the fake's shape (test_matrix_stale pins the forward row's).
    with _wrong_shape_fake():
        ctx = engine_of().context(VOCAB)
        cell = run_cell(ctx, "lookup.backward", "inductor")
        assert (cell.status, cell.limitation, cell.rule) == (Status.FAILED, None, FOLLOWS_FROM_FAKE), cell.reason
        assert cell.reason.startswith("BackwardFailed: compiling the backward of samples_stale::Vocab.lookup through "
                                      "inductor raised AssertionError: wrong number of dimensions")
        assert "see torchbind[samples_stale.Vocab]::agreement[lookup]" in cell.reason
