"""Torch's defects told from the fake's, on the sample TensorQueue (a correct fake): plain torch beside each verdict,
on every tested torch.

* Buffer reuse: inductor before torch 2.15 reuses the buffer of a tensor handed to an effectful ``call_torchbind``
  (``torch/_inductor/lowering.py``, ``with_effects``), so a queue that was pushed ``torch.mm(...)`` holds a later
  matmul's numbers. The ``computed`` row shows it: a torch defect on 2.13 and 2.14.1, a pass on 2.15.0.
* Every cell the sample's baseline lists as a torch bug is a torch defect (the fake agrees on every call), never the
  fake's; a planted fake bug is still the fake's (``tests/unit/matrix/test_matrix_stale.py``).
* ``--torchbind-torch-defects=skip`` skips such an item; ``--torchbind-accept`` writes the defect's signature.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from packaging.version import Version

import sample_classes.fakes  # noqa: F401 - loads the library and registers the fakes
from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.matrix.torchbind.run import run_cell
from conformance.runner import run_class

from conftest import engine_of

QUEUE = "samples::TensorQueue"
FIXED = Version(torch.__version__).release >= (2, 15)  # torch 2.15 no longer reuses with_effects inputs
BASELINE = Path(__file__).parents[2] / "sample_classes" / "baseline.json"

pytestmark = pytest.mark.process  # inductor runs the C++ compiler


def _pushed_then_more_matmuls(q, x, w):
    q.push(torch.mm(x, w).relu())
    y = torch.mm(x, w) * 2
    return torch.mm(y, w) + 1


def test_plain_torch_inductor_leaves_other_numbers_in_the_object_before_2_15():
    x, w = torch.arange(16.0).reshape(4, 4) / 7, torch.eye(4) + 0.5
    eager_queue = torch.classes.samples.TensorQueue(torch.zeros(4, 4))
    compiled_queue = torch.classes.samples.TensorQueue(torch.zeros(4, 4))
    torch._dynamo.reset()
    try:
        program = torch.compile(_pushed_then_more_matmuls, backend="inductor", fullgraph=True)
        torch.testing.assert_close(program(compiled_queue, x, w), _pushed_then_more_matmuls(eager_queue, x, w))
    finally:
        torch._dynamo.reset()
    pushed_eager, pushed_compiled = eager_queue.pop(), compiled_queue.pop()
    torch.testing.assert_close(pushed_eager, torch.mm(x, w).relu())
    # The program's own output is right; what it handed the object is not, until 2.15.
    assert torch.allclose(pushed_compiled, pushed_eager) is FIXED


def test_the_computed_row_is_a_torch_defect_where_torch_reuses_the_buffer_and_passes_where_it_does_not():
    ctx = engine_of().context(QUEUE)
    cell = run_cell(ctx, "computed", "inductor")
    assert "c_x0 = torch.mm(x0.reshape(-1, 1)" in cell.program and "obj.push(c_x0)" in cell.program
    if FIXED:
        assert cell.status is Status.PASSED, cell.reason
        return
    assert (cell.status, cell.rule, cell.found) == (Status.TORCH_DEFECT, "matrix.torch-defect",
                                                    "matrix.output-differs"), cell.reason
    assert cell.signature == ("inductor: an output differs from plain eager's (tensors computed in the program "
                              "handed to the object, then more of the same size)")
    assert "r2 = obj.pop()" in cell.reason  # the object hands back what inductor wrote over
    assert cell.details[0].startswith("torch's defect, not the fake's: the program's calls, replayed on real "
                                      "objects and on their fakes")
    assert "fullgraph=True" in cell.repro
    # Eager and torch.compile without inductor's buffers hand the object the right numbers.
    assert run_cell(ctx, "computed", "aot_eager").status is Status.PASSED


def test_every_baselined_torch_bug_of_the_sample_is_a_torch_defect_never_the_fake():
    listed = json.loads(BASELINE.read_text())["known_failures"]
    cells = {(o.target): o for o in run_class(QUEUE, engine=engine_of(None, Settings(examples=10,
                                              backends=("export", "export_strict", "export_saveload"))),
                                              only={"matrix"})}
    for test_id in listed:
        target = test_id.partition("::matrix[")[2].rstrip("]")
        backend = target.rsplit("-", 1)[1]
        if backend not in ("export", "export_strict", "export_saveload"):
            continue
        verdict = cells[target]
        assert verdict.status is Status.FAILED, (target, verdict.render())
        assert verdict.cell.status is Status.TORCH_DEFECT, (target, verdict.cell.reason, verdict.cell.details[:2])
        assert verdict.rules == ["matrix.torch-defect"]
        assert verdict.summary.split(": ", 1)[1].startswith(f"torch defect ({verdict.cell.signature}), not the "
                                                            "fake's")


def test_with_torch_defects_skip_the_item_is_skipped_naming_the_signature():
    settings = Settings(examples=10, backends=("export_saveload",), torch_defects="skip")
    [verdict] = [o for o in run_class(QUEUE, engine=engine_of(None, settings), only={"matrix"})
                 if o.target == "size-export_saveload"]
    assert verdict.status is Status.SKIPPED, verdict.render()
    assert verdict.reason.startswith("torch defect (export_saveload: RuntimeError raised in torch/fx/graph.py lint; "
                                     "--torchbind-torch-defects=skip): ")


class _CloneQueue(torch.nn.Module):
    def forward(self, q, x):
        q.push(x)
        return q.clone_queue()


def _saves_a_list_result() -> bool:
    """Plain torch: whether ``torch.export.save`` saves a program whose ``call_torchbind`` returns a list, with
    the sample's correct fake (False where it raises SerializeError, as on every torch this project supports)."""
    import io

    from torch._export.serde.serialize import SerializeError

    program = torch.export.export(_CloneQueue(), (torch.classes.samples.TensorQueue(torch.zeros(2)),
                                                  torch.ones(2)), strict=False)
    try:
        torch.export.save(program, io.BytesIO())
    except SerializeError:
        return False
    return True


def test_a_fake_wrong_in_values_only_is_not_named_for_torchs_own_exception():
    """``queue_size_off_by_one``'s size() returns an int, as C++ does, one too many. The ``sequence`` program
    (push, push, pop, size, clone_queue...) fails export_saveload with torch's SerializeError for the list result,
    which plain torch raises with the correct fake too: a wrong int does not explain it, so the cell does not say
    it follows from the fake (nor that it is torch's, while the fake is wrong). Where the wrong int reaches the
    output (the size row through export), the cell does follow from the fake."""
    from sample_classes.broken import installed_broken

    torch_raises = not _saves_a_list_result()
    with installed_broken("queue_size_off_by_one"):
        ctx = engine_of().context(QUEUE)
        follows = run_cell(ctx, "size", "export")
        assert (follows.status, follows.rule) == (Status.FAILED, "matrix.follows-from-fake"), follows.reason
        assert follows.reason.endswith("see torchbind[samples.TensorQueue]::agreement[size])"), follows.reason
        if not torch_raises:
            pytest.skip("this torch saves a call_torchbind list result: no torch exception to attribute")
        cell = run_cell(ctx, "sequence", "export_saveload")
    assert "obj.size()" in cell.program and "obj.clone_queue()" in cell.program
    assert (cell.status, cell.rule) == (Status.FAILED, "matrix.raises"), (cell.status, cell.rule, cell.reason)
    assert cell.reason.startswith("SerializeError: Failed serializing node") and "follows from" not in cell.reason
    assert cell.details[0].startswith("the fake disagrees with C++ (obj.size() on an object in the traced state: "
                                      "C++ returned "), cell.details[0]
    assert ("see torchbind[samples.TensorQueue]::agreement[size]), but in values only, which does not explain this "
            "cell's SerializeError raised in torch/_export/serde/serialize.py") in cell.details[0]


class _SizeAndClone(torch.nn.Module):
    def forward(self, q, x):
        q.push(x)
        return q.size(), q.clone_queue()


def test_a_limitation_seen_in_one_output_does_not_hide_torchs_defect_in_another():
    """The ``sequence`` program returns ``size()`` (an int export burns in: limitation ``burned-in-constants``) and
    ``clone_queue()`` (a list whose length export fixes: torch's defect, T on its own row). Plain torch shows both
    on an object in another state; the cell is T for the list, and says the limitation explains the int line only."""
    program = torch.export.export(_SizeAndClone(), (torch.classes.samples.TensorQueue(torch.zeros(2)),
                                                    torch.ones(2)), strict=False).module()
    other = torch.classes.samples.TensorQueue(torch.zeros(2))
    other.push(torch.full((2,), 5.0))
    size, cloned = program(other, torch.ones(2))
    assert size == 1 and len(cloned) == 1  # eager: 2 and 2
    cell = run_cell(engine_of().context(QUEUE), "sequence", "export")
    assert (cell.status, cell.rule) == (Status.TORCH_DEFECT, "matrix.torch-defect"), (cell.status, cell.reason)
    assert "= obj.clone_queue(), on an object in another state): eager [" in cell.reason, cell.reason
    [note] = [d for d in cell.details if d.startswith("known limitation burned-in-constants explains ")]
    assert "= obj.size(), on an object in another state): eager " in note and note.endswith(
        ", not the output lines before it"), note
