"""The ``mutated`` row: each floating-point tensor the program hands the object is changed in place right after the
call (``obj.push(x0); x0.add_(1)``), the seed's "Aliasing and mutation" limitation, matched by evidence in both its
forms. Shown first with plain torch: AOTAutograd fails its functional-graph assert where a method returns the
tensor the program changed (``samples::TensorQueue``), and leaves the object holding the values from before the
change where none does (``samples_lists::Batch``, the seed's own example)."""

from __future__ import annotations

import pytest
import torch

import sample_classes.fakes_lists  # noqa: F401 - builds the namespace, registers FakeBatch
from conformance.core.results import Status
from conformance.matrix.explain import UNCHANGED
from conformance.matrix.torchbind.rows import row_names
from conformance.matrix.torchbind.run import run_cell

from conftest import compiled_once, engine_of

pytestmark = pytest.mark.process  # torch.compile


def _push_change_read(q, x):
    q.push(x)
    x.add_(1)
    return (q.top().clone(),)


def _store_change_total(b, x):
    b.store([x])
    x.add_(1)
    return (b.total(),)



def test_plain_torch_aot_autograd_cannot_functionalize_a_change_after_hand_off():
    eager = _push_change_read(torch.classes.samples.TensorQueue(torch.zeros(3)), torch.zeros(3))
    torch.testing.assert_close(eager[0], torch.ones(3))  # the queue holds the tensor the program changed
    with pytest.raises(Exception) as raised:
        compiled_once(_push_change_read, torch.classes.samples.TensorQueue(torch.zeros(3)), torch.zeros(3))
    # AOTAutograd copies the change back onto top()'s result: its functional-graph assert refuses the graph.
    assert "AssertionError: n=copy_, n.args[0]=getitem_3" in str(raised.value), str(raised.value)[:500]
    # Where no method returns the changed tensor, the object keeps the values from before the change.
    x = torch.arange(3.0)
    eager = _store_change_total(torch.classes.samples_lists.Batch([]), x.clone())
    compiled = compiled_once(_store_change_total, torch.classes.samples_lists.Batch([]), x.clone())
    torch.testing.assert_close(eager[0], (x + 1).sum())
    torch.testing.assert_close(compiled[0], x.sum())


def test_the_assert_is_the_known_limitation_and_eager_and_export_pass():
    ctx = engine_of().context("samples::TensorQueue")
    assert "mutated" in row_names(ctx)
    cell = run_cell(ctx, "mutated", "aot_eager")
    assert "obj.push(x0)\n        x0.add_(1)\n" in cell.program, cell.program
    assert (cell.status, cell.limitation) == (Status.UNSUPPORTED, "aliasing-mutation"), cell.reason
    assert cell.reason.endswith("(observed for this class: AssertionError raised in "
                                "torch/_functorch/_aot_autograd/functional_utils.py assert_functional_graph; the "
                                "program changes in place a tensor it handed the object (the mutated row))"), cell.reason
    for backend in ("eager", "export"):
        assert run_cell(ctx, "mutated", backend).status is Status.PASSED, backend


def test_a_silent_wrong_result_is_the_limitation_only_with_eagers_unchanged_value_as_evidence():
    ctx = engine_of().context("samples_lists::Batch")
    cell = run_cell(ctx, "mutated", "aot_eager")
    assert "obj.store(x0)\n        for t in x0: t.add_(1)\n" in cell.program, cell.program
    assert (cell.status, cell.limitation) == (Status.UNSUPPORTED, "aliasing-mutation"), cell.reason
    first = cell.details[0]
    assert first.startswith("run 0 output[0] (r2 = obj.total(), on the traced object): eager "), first
    assert "; eager without the program's in-place changes gives " in first and f": {UNCHANGED} [" in first, first
    assert "the backend's value is what eager gives without the program's in-place changes" in cell.reason
    assert run_cell(ctx, "mutated", "eager").status is Status.PASSED


# ----- identity: a returned tensor compared with is (the seed's "is operator") --------------------------------------


class _PushPopIs(torch.nn.Module):
    def forward(self, q, x):
        q.push(x)
        r = q.pop()
        return (x + 1 if r is x else x - 1,)


def test_plain_torch_export_keeps_the_traced_answer_of_is_and_torch_compile_does_not():
    x = torch.zeros(2)  # _holding(): a queue whose pop() returns a tensor pushed before, not x
    assert _PushPopIs()(torch.classes.samples.TensorQueue(torch.zeros(2)), x)[0].tolist() == [1.0, 1.0]
    program = torch.export.export(_PushPopIs(), (torch.classes.samples.TensorQueue(torch.zeros(2)), x),
                                  strict=False).module()
    eager_other = _PushPopIs()(_holding(), x)[0]
    assert eager_other.tolist() == [-1.0, -1.0]
    # The traced branch, `+ 1` (of x, or of the popped tensor export took for x): never eager's `x - 1`.
    assert program(_holding(), x)[0].tolist() in ([1.0, 1.0], [8.0, 8.0])
    torch._dynamo.reset()
    try:
        compiled = torch.compile(_PushPopIs(), backend="aot_eager", fullgraph=True)
        assert compiled(torch.classes.samples.TensorQueue(torch.zeros(2)), x)[0].tolist() == [1.0, 1.0]
        assert compiled(_holding(), x)[0].tolist() == [-1.0, -1.0]
    finally:
        torch._dynamo.reset()


def _holding():
    q = torch.classes.samples.TensorQueue(torch.zeros(2))
    q.push(torch.full((2,), 7.0))
    return q


def test_the_identity_row_compares_with_is_and_export_is_the_known_limitation():
    ctx = engine_of().context("samples::TensorQueue")
    cell = run_cell(ctx, "identity", "export")
    assert "r2 = obj.pop()\n        return (r2, (x0 + 1 if r2 is x0 else x0 - 1), " in cell.program, cell.program
    assert (cell.status, cell.limitation) == (Status.UNSUPPORTED, "identity-operator"), cell.reason
    assert cell.details[0].startswith("run 1 output[1] (x0 + 1 if r2 is x0 else x0 - 1 (obj.pop() compared with is "
                                      "to x0, handed to the object before), on an object in another state): eager ")
    assert run_cell(ctx, "identity", "aot_eager").status is Status.PASSED
