"""The ``computed`` row for a class whose methods take tensors only as a list (``samples_lists::Batch``,
csrc/samples_lists.cpp): each element of the ``Tensor[]`` argument is computed in the program, so the row exists
and finds inductor's buffer reuse (``torch/_inductor/lowering.py`` ``with_effects``, fixed in torch 2.15) as it
does for a method taking one tensor. Shown first with plain torch."""

from __future__ import annotations

import pytest
import torch
from packaging.version import Version

import sample_classes.fakes_lists  # noqa: F401 - builds the namespace, registers FakeBatch
from conformance.core.results import Status
from conformance.matrix.torchbind.rows import row_names
from conformance.matrix.torchbind.run import run_cell

from conftest import engine_of

BATCH = "samples_lists::Batch"
FIXED = Version(torch.__version__).release >= (2, 15)

pytestmark = pytest.mark.process  # inductor runs the C++ compiler


def _stored_then_more_matmuls(b, x, w):
    b.store([torch.mm(x, w).relu()])
    y = torch.mm(x, w) * 2
    return torch.mm(y, w) + 1


def test_plain_torch_inductor_leaves_other_numbers_in_a_list_handed_to_the_object_before_2_15():
    x, w = torch.arange(16.0).reshape(4, 4) / 7, torch.eye(4) + 0.5
    eager, compiled = torch.classes.samples_lists.Batch([]), torch.classes.samples_lists.Batch([])
    torch._dynamo.reset()
    try:
        program = torch.compile(_stored_then_more_matmuls, backend="inductor", fullgraph=True)
        torch.testing.assert_close(program(compiled, x, w), _stored_then_more_matmuls(eager, x, w))
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(eager.total(), torch.mm(x, w).relu().sum())
    # The program's own output is right; what the object holds is not, until 2.15.
    assert torch.allclose(compiled.total(), eager.total()) is FIXED


def test_a_class_taking_only_lists_gets_the_computed_row_and_it_finds_the_reuse():
    ctx = engine_of().context(BATCH)
    assert "computed" in row_names(ctx)
    cell = run_cell(ctx, "computed", "inductor")
    assert "c_x0 = [torch.mm(t.reshape(-1, 1), torch.full((1, 1), 1.0, dtype=t.dtype, device=t.device))" \
           ".reshape(t.shape) for t in x0]" in cell.program, cell.program
    assert "obj.store(c_x0)" in cell.program and "m_x0 = [torch.mm(" in cell.program
    if FIXED:
        assert cell.status is Status.PASSED, cell.reason
    else:
        assert (cell.status, cell.rule) == (Status.TORCH_DEFECT, "matrix.torch-defect"), cell.reason
        assert cell.signature.startswith("inductor: the object's state differs from plain eager's (tensors computed "
                                         "in the program handed to the object"), cell.signature
        assert cell.reason.startswith("run 0 object state 'items': eager left [")
    # Without inductor's buffers, the object holds what eager hands it.
    assert run_cell(ctx, "computed", "aot_eager").status is Status.PASSED
