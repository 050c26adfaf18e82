"""The coverage matrix of Python custom classes: every example object reaches a row's sequence, AOTInductor's
compile-time failure on a symbolic object is recognised as the known limitation by its evidence, and with dynamo
disabled the torch.compile cells skip instead of passing with nothing compiled. Plain torch first, then the cell."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import conformance
from conformance.matrix.backends import Backend
from conformance.matrix.custom.run import run_cell as run_custom_cell
from conformance.matrix.explain import STAYED
from conformance.matrix.limitations import observation, raised_at
from conformance.core.results import Status
from conformance.core.settings import Settings

from conftest import engine_of

MOD = "sample_classes.samples_opfake"


@pytest.fixture(scope="module")
def opfake():
    import sample_classes.samples_opfake as module

    return module


def crops():
    """Four example objects: the first, one like it, and two others (one of which crops nothing more)."""
    from sample_classes.samples_opfake import Crop

    return [Crop(0, 2), Crop(0, 2), Crop(1, 3), Crop(2, 1)]


def test_every_example_object_reaches_the_sequence(opfake):
    engine = engine_of(lambda: conformance.examples(f"{MOD}.Crop")(crops), Settings(examples=5))
    cell = run_custom_cell(engine.context(f"{MOD}.Crop"), "crop", "eager")
    assert cell.status is Status.PASSED, cell.reason
    objects = [ln.strip("# ") for ln in cell.program.split("# objects, in order:\n")[1].splitlines()]
    # The first example object is the one the program is compiled with; each other one is called, in order.
    assert objects[0] == "first: obj = list(crops())[0]"
    assert "equal: obj = list(crops())[1]" in objects
    assert "another state: obj = list(crops())[2]" in objects and "another state: obj = list(crops())[3]" in objects


def test_a_custom_cell_fails_with_the_rule_of_what_went_wrong(opfake):
    """The one cell skeleton judges a Python custom class's cell as it judges a TorchBind class's: a program that
    keeps the first object's result is stale, and a backend that raises fails with its error and says that no
    known limitation has that exception's type and site."""
    def keeps_first(scn, module, args):
        kept = []

        def run(*a):
            kept.append(module(*a))
            return kept[0]

        return run

    def explodes(scn, module, args):
        raise RuntimeError("backend exploded")

    ctx = engine_of(lambda: conformance.examples(f"{MOD}.Crop")(crops), Settings(examples=5)).context(f"{MOD}.Crop")
    stale = run_custom_cell(ctx, "crop", Backend("keeps", "test", "keeps", keeps_first))
    assert (stale.status, stale.rule) == (Status.FAILED, "matrix.stale-result"), stale.reason
    assert stale.reason.startswith("another state: obj = list(crops())[2]: eager ") and stale.reason.endswith(STAYED)
    broken = run_custom_cell(ctx, "crop", Backend("exploding", "test", "exploding", explodes))
    assert (broken.status, broken.rule, broken.reason) == (Status.FAILED, "matrix.raises",
                                                           "RuntimeError: backend exploded")
    assert "RuntimeError: no known limitation has this exception type and site" in broken.details


def test_an_op_the_adopter_excluded_skips_saying_so(opfake):
    # The one skeleton treats an excluded row alike for both kinds: skipped with the exclusion's own words, not as
    # a program plain eager rejects ("no eager reference: ...", which a Python custom class's cell said before).
    def excluded():
        conformance.strategy(f"{MOD}.Crop", "samples_opfake::crop")(lambda: None)

    cell = run_custom_cell(engine_of(excluded, Settings(examples=5)).context(f"{MOD}.Crop"), "crop", "eager")
    assert (cell.status, cell.reason) == (Status.SKIPPED, f"samples_opfake::crop is excluded by conformance.strategy("
                                          f"'{MOD}.Crop', 'samples_opfake::crop') returning None: nothing calls it")


def test_plain_torch_aotinductor_hands_the_fake_kernel_none_for_a_symbolic_object(opfake):
    class Program(torch.nn.Module):
        def forward(self, x, t):
            return torch.ops.samples_opfake.tile(x, t)

    x = torch.ones(2)
    exported = torch.export.export(Program(), (x, opfake.Tiles(3)), strict=False)
    assert exported.module()(x, opfake.Tiles(3)).shape == (3, 2)  # export runs the fake with the object
    with tempfile.TemporaryDirectory() as tmp, \
            pytest.raises(AttributeError, match="'NoneType' object has no attribute 'count'") as raised:
        torch._inductor.aoti_compile_and_package(exported, package_path=os.path.join(tmp, "p.pt2"))
    assert raised_at(raised.value) == "AttributeError raised in torch/_library/custom_ops.py fake_impl"


@pytest.mark.process  # AOTInductor (it fails before compiling C++, while tracing the exported program)
def test_the_aoti_cell_of_a_symbolic_class_is_the_known_limitation_by_its_evidence(opfake):
    cell = run_custom_cell(engine_of(settings=Settings(examples=5)).context(f"{MOD}.Tiles"), "tile", "aoti")
    assert (cell.status, cell.limitation) == (Status.UNSUPPORTED, "custom-aoti-object"), (cell.reason, cell.details)
    assert "the fake kernel of samples_opfake::tile was called with None in place of the object" in cell.reason
    assert "AttributeError raised in torch/_library/custom_ops.py fake_impl" in cell.reason


def test_a_fake_given_none_outside_aotinductor_is_not_the_limitation(opfake):
    """The same exception type and site, without AOTInductor's compile on the stack (or with the object passed):
    no match; the evidence is where torch raised it and what torch handed the fake."""
    from conformance.matrix.custom.rows import scenario

    engine = engine_of(settings=Settings(examples=5))
    scn = scenario(engine.context(f"{MOD}.Tiles"), "tile")
    with FakeTensorMode() as mode, pytest.raises(AttributeError) as raised:
        torch.ops.samples_opfake.tile(mode.from_tensor(torch.ones(2)), None)
    assert raised_at(raised.value) == "AttributeError raised in torch/_library/custom_ops.py fake_impl"
    assert observation("aoti", scn, raised.value) is None


def test_dynamo_disabled_skips_the_compiled_cells_in_process(opfake, monkeypatch):
    # Plain torch: with TORCHDYNAMO_DISABLE=1, torch.compile runs the function eagerly; no backend is called.
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm

    torch._dynamo.reset()
    assert torch.compile(lambda x: x + 1, backend=backend, fullgraph=True)(torch.ones(1)).item() == 2.0
    assert seen == []
    engine = engine_of(settings=Settings(examples=5))
    ctx = engine.context(f"{MOD}.Crop")
    for name in ("eager", "aot_eager", "inductor"):
        cell = run_custom_cell(ctx, "crop", name)
        assert cell.status is Status.SKIPPED, (name, cell.reason)
        assert "TORCHDYNAMO_DISABLE=1 is set" in cell.reason and "nothing would be compiled" in cell.reason
    # Export does not go through dynamo: its cell still runs.
    assert run_custom_cell(ctx, "crop", "export").status is not Status.SKIPPED


@pytest.mark.process
def test_dynamo_disabled_in_a_pytest_run_skips_the_compiled_cells(pytester, opfake, monkeypatch):
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--torchbind-load={MOD}", f"--torchbind-class={MOD}.Crop",
        "--torchbind-backends=eager,aot_eager,export", "--torchbind-examples=5", "-k", "matrix or fake_kernel",
        "-rs", "--torchbind-isolation=none")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    result.assert_outcomes(passed=1, skipped=3)  # fake_kernel runs no compiled program; export is skipped as
    # the known limitation (a constant object baked in); the eager and aot_eager cells say why they did not run
    assert out.count("TORCHDYNAMO_DISABLE=1 is set") >= 2, out[-3000:]


def test_dynamo_disabled_skips_a_torchbind_class_compiled_cells_too(monkeypatch):
    import sample_classes  # noqa: F401 - builds (cached) and loads the TorchBind samples
    from conformance.matrix.torchbind.run import run_cell
    from conformance.matrix.torchbind.rows import row_names

    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")
    ctx = engine_of(settings=Settings(examples=5)).context("samples::Counter")
    cell = run_cell(ctx, row_names(ctx)[0], "inductor")
    assert cell.status is Status.SKIPPED and "TORCHDYNAMO_DISABLE=1 is set" in cell.reason, cell.reason
    monkeypatch.delenv("TORCHDYNAMO_DISABLE")
    # TORCH_COMPILE_DISABLE=1 sets it at import. torch's own patch, not monkeypatch: monkeypatch's undo deletes the
    # entry from torch's config module (every later torch.compile in the process then raises AttributeError).
    with torch._dynamo.config.patch(disable=True):
        cell = run_cell(ctx, row_names(ctx)[0], "eager")
    assert cell.status is Status.SKIPPED and "torch._dynamo.config.disable is set" in cell.reason, cell.reason
