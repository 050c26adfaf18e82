"""The ``fake_kernel`` check on every kind of Python custom class: an op's fake kernel (``register_fake``) compared
with the real op on the same inputs, as torch.library.opcheck's fake-tensor test compares them, each rule shown
first with plain torch (sample classes: ``sample_classes/samples_opfake.py``)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import conformance
from conformance.checks.custom.fake_kernel import metadata_differences
from conformance.core.results import Status
from conformance.runner import Engine, run_class, run_target, plan
from conformance.core.settings import Settings

from conftest import engine_of

MOD = "sample_classes.samples_opfake"


@pytest.fixture(scope="module")
def opfake():
    import sample_classes.samples_opfake as module

    return module


def fake_kernel_items(name: str, engine=None) -> dict:
    """Every ``fake_kernel`` item of the class ``name`` (module-qualified), by op."""
    return {o.target: o for o in run_class(name, only={"fake_kernel"}, engine=engine or Engine(Settings(examples=10)))}


def test_plain_torch_a_constant_class_op_fake_with_the_wrong_shape_breaks_only_inductor(opfake):
    x, c = torch.arange(6.0), opfake.CropFakeKeepsShape(1, 2)
    assert opfake.crop_wrong(x, c).tolist() == [1.0, 2.0]  # eager
    with FakeTensorMode() as mode:  # what tracing sees: the fake's shape, not the real op's
        assert torch.ops.samples_opfake.crop_wrong(mode.from_tensor(x), c).shape == (6,)
    program = (lambda x, c: torch.ops.samples_opfake.crop_wrong(x, c) * 2)
    torch._dynamo.reset()
    # aot_eager runs the real kernel on real tensors: the wrong fake goes unseen there ...
    assert torch.compile(program, backend="aot_eager", fullgraph=True)(x, c).tolist() == [2.0, 4.0]
    torch._dynamo.reset()
    # ... inductor plans its buffers from the fake and checks the real output against them.
    with pytest.raises(AssertionError, match=r"expected size 2==6"):
        torch.compile(program, backend="inductor", fullgraph=True)(x, c)
    torch._dynamo.reset()


def test_the_inductor_cell_of_an_op_whose_fake_is_wrong_points_to_the_fake_kernel_item(opfake):
    # The plain-torch lines above, as the matrix reports them: inductor's cell fails, and its message says the
    # failure follows from the op's fake (a trial's finding: it named only inductor's AssertionError).
    from conformance.matrix.cell import FOLLOWS_FROM_FAKE
    from conformance.matrix.custom.run import run_cell

    def register():  # the plain-torch lines' object and input (the simplest draws crop an empty tensor)
        conformance.examples(f"{MOD}.CropFakeKeepsShape")(lambda: [opfake.CropFakeKeepsShape(1, 2)])
        conformance.strategy(f"{MOD}.CropFakeKeepsShape", "samples_opfake::crop_wrong", arg="x")(
            lambda: st.just("torch.arange(6.0)"))

    ctx = engine_of(register, Settings(examples=5)).context(f"{MOD}.CropFakeKeepsShape")
    cell = run_cell(ctx, "crop_wrong", "inductor")
    assert (cell.status, cell.rule) == (Status.FAILED, FOLLOWS_FROM_FAKE), cell.reason
    item = f"torchbind[py:{MOD}.CropFakeKeepsShape]::fake_kernel[crop_wrong]"
    assert cell.reason.endswith(f"(follows from the fake's wrong result, see {item})"), cell.reason
    assert cell.details[0].startswith(f"this follows from the fake's wrong result, see {item}: the fake of "
                                      "samples_opfake::crop_wrong returns ["), cell.details[0]
    assert cell.details[0].endswith("on the same arguments (its call in plain eager)"), cell.details[0]
    right = run_cell(Engine(Settings(examples=5)).context(f"{MOD}.Crop"), "crop", "inductor")
    assert right.status is Status.PASSED and not any("fake's wrong result" in d for d in right.details)


def test_fake_kernel_names_the_op_the_output_and_the_field_for_a_constant_class(opfake):
    items = fake_kernel_items(f"{MOD}.CropFakeKeepsShape")
    assert items["crop"].status is Status.PASSED  # the same class, the correct op fake
    bad = items["crop_wrong"]
    assert bad.status is Status.FAILED and bad.failures[0].rule == "fake_kernel.metadata-differs"
    text = bad.render()
    assert "the fake kernel of samples_opfake::crop_wrong disagrees with the real op on result: shape (real [" in text
    [failure] = bad.failures
    assert any(d.startswith("result: shape: real [") and "torch: Shapes torch.Size(" in d for d in failure.details)
    assert "FakeTensorMode" in failure.repro and "backend='inductor'" in failure.repro
    good = fake_kernel_items(f"{MOD}.Crop")["crop"]
    assert good.status is Status.PASSED and good.evidence.counts["fake output"] >= 2


def test_a_symbolic_class_fake_may_read_its_use_real_members_and_is_compared_too(opfake):
    # Plain torch: while tracing, the object reaches the fake as a FakeScriptObject holding the USE_REAL member.
    torch._dynamo.reset()
    program = torch.compile(lambda x, t: torch.ops.samples_opfake.tile(x, t), backend="eager", fullgraph=True)
    assert program(torch.ones(2), opfake.Tiles(3)).shape == (3, 2)
    torch._dynamo.reset()
    [item] = fake_kernel_items(f"{MOD}.Tiles").values()
    assert item.status is Status.PASSED and item.evidence.counts["fake output"] >= 2


def test_each_field_torchs_fake_check_compares_is_named():
    """metadata_differences is torch's fake-tensor check (``_check_fake_real_tensors``, ``_check_alias_info``)
    naming the field: each field torch compares, one at a time."""
    real = torch.ones(2, 3)
    with FakeTensorMode() as mode:
        same = mode.from_tensor(real)
        other_dtype = torch.empty(2, 3, dtype=torch.float64)
        transposed = torch.empty(3, 2).t()
        pair = (torch.empty(2, 3), torch.empty(1))
    assert metadata_differences(real, (), same, ()) == []
    [(output, field, what)] = metadata_differences(real, (), other_dtype, ())
    assert (output, field) == ("result", "dtype") and "real torch.float32, fake torch.float64" in what
    [(output, field, what)] = metadata_differences(real, (), transposed, ())
    assert (output, field) == ("result", "stride") and "real [3, 1], fake [1, 2]" in what
    [(output, field, what)] = metadata_differences((real, real), (), pair, ())
    assert (output, field) == ("result[1]", "shape")
    [(output, field, what)] = metadata_differences((real, real), (), (same,), ())
    assert field == "number of outputs" and what == "real 2, fake 1"
    # Aliasing: the real output is its input, the fake's is a new tensor.
    with FakeTensorMode() as mode:
        fake_in = mode.from_tensor(real)
        fresh = torch.empty(2, 3)
    [(output, field, what)] = metadata_differences(real, ([real], {}), fresh, ([fake_in], {}))
    assert field == "aliasing" and "outputs_alias_inputs" in what


REJECTING = "sample_classes.samples_opfake.Crop"


def test_inputs_the_real_op_rejects_are_no_evidence_and_all_rejected_is_a_skip(opfake):
    # Plain torch: the op rejects a 0-dim tensor, whatever the object.
    with pytest.raises(ValueError, match="at least one dimension"):
        opfake.crop(torch.tensor(1.0), opfake.Crop(0, 1))

    def register():
        conformance.strategy(REJECTING, "samples_opfake::crop", arg="x")(lambda: st.just("torch.tensor(1.0)"))

    engine = engine_of(register, Settings(examples=5))
    [unit] = [u for u in plan(REJECTING, engine, only={"fake_kernel"}) if u.target.short_name == "crop"]
    outcome = run_target(unit, engine)
    assert outcome.status is Status.SKIPPED, outcome.render()
    assert "rejected every argument set" in outcome.reason and "conformance.strategy" in outcome.reason


def crops_one_wrong():
    """Example objects of which only the last makes the broken fake disagree (a zero-length crop of a tensor with
    no rows is right by accident)."""
    from sample_classes.samples_opfake import CropFakeKeepsShape

    return [CropFakeKeepsShape(0, 99), CropFakeKeepsShape(0, 99), CropFakeKeepsShape(0, 99), CropFakeKeepsShape(1, 1)]


def test_every_example_object_is_compared(opfake):
    # Plain torch: on a 2-row tensor, crop (0, 99) keeps both rows, as the broken fake says; crop (1, 1) keeps one.
    x = torch.ones(2, 3)
    assert opfake.crop_wrong(x, opfake.CropFakeKeepsShape(0, 99)).shape == torch.empty_like(x).shape
    assert opfake.crop_wrong(x, opfake.CropFakeKeepsShape(1, 1)).shape == (1, 3)

    def register():
        conformance.examples(f"{MOD}.CropFakeKeepsShape")(crops_one_wrong)
        conformance.strategy(f"{MOD}.CropFakeKeepsShape", "samples_opfake::crop_wrong", arg="x")(
            lambda: st.just("torch.ones(2, 3)"))

    items = fake_kernel_items(f"{MOD}.CropFakeKeepsShape", engine_of(register, Settings(examples=5)))
    bad = items["crop_wrong"]
    assert bad.status is Status.FAILED, bad.render()
    assert bad.failures[0].example == "obj = list(crops_one_wrong())[3]"


def test_a_hoisted_constant_object_reaches_the_fake_as_torch_compile_passes_it(opfake):
    # Plain torch: eager is fine; torch.compile hands the fake a FakeScriptObject without 'start'.
    x = torch.arange(4.0)
    assert opfake.crop(x, opfake.CropHoisted(1, 2)).tolist() == [1.0, 2.0]
    torch._dynamo.reset()
    with pytest.raises(Exception, match="attr 'start' on a FakeScriptObject"):
        torch.compile(lambda x, c: torch.ops.samples_opfake.crop(x, c), backend="eager", fullgraph=True)(
            x, opfake.CropHoisted(1, 2))
    torch._dynamo.reset()
    item = fake_kernel_items(f"{MOD}.CropHoisted")["crop"]
    assert item.status is Status.FAILED and item.failures[0].rule == "fake_kernel.unregistered-member"
    assert "the fake kernel of samples_opfake::crop reads 'start' of the CropHoisted object, which is not a " \
           "registered member (registered: none)" in item.render()
