"""The matrix runs every cell's program on the further example objects too (after runs 0 and 1, each with run 1's
inputs): two objects cannot show a program that goes stale from the third on. Plain torch beside the verdict: once
torch.compile has recompiled for a second TorchBind object, automatic dynamic shapes keep that object's non-tensor
results for every later one (torch 2.13, 2.14.1, 2.15.0); with them off, every object gets eager's result."""

from __future__ import annotations

import pytest
import torch

from conformance.matrix.torchbind.rows import scenario
from conformance.matrix.torchbind.run import run_cell
from conformance.matrix.torchbind.sweep import SWEEP_LIMIT, sweep_objects
from conformance.torchbind.examples import read_state, state_key
from conftest import engine_of

COUNTER = "samples::Counter"


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library, registers the fakes

    return "samples"


def _through_compile(automatic: bool) -> list[float]:
    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(automatic_dynamic_shapes=automatic):
            program = torch.compile(lambda c, x: x * c.value(), backend="eager", fullgraph=True)
            return [program(torch.classes.samples.Counter(v), torch.ones(1)).item() for v in (2, 3, 5, 7)]
    finally:
        torch._dynamo.reset()


def test_plain_torch_keeps_the_second_objects_result_from_the_third_object_on(samples):
    assert _through_compile(automatic=True) == [2.0, 3.0, 3.0, 3.0]  # Counter(5) and Counter(7) get 3
    assert _through_compile(automatic=False) == [2.0, 3.0, 5.0, 7.0]
    assert [torch.classes.samples.Counter(v).value() for v in (2, 3, 5, 7)] == [2, 3, 5, 7]  # eager


def test_a_row_takes_every_further_example_object_in_a_state_of_its_own(samples):
    ctx = engine_of().context(COUNTER)
    scn = scenario(ctx, "value")
    taken = {state_key(read_state(e.build(), e.tracer)) for e in (scn.first, scn.second)}
    keys = [state_key(read_state(e.build(), e.tracer)) for e in scn.sweep]
    assert scn.sweep and len(set(keys)) == len(keys) and not set(keys) & taken  # each a state of its own
    assert len(scn.sweep) <= SWEEP_LIMIT
    examples = ctx.require_examples()
    assert sweep_objects((examples[0],), examples * 3) == sweep_objects((examples[0],), examples)  # deduplicated
    for e in scn.sweep:
        assert "\n".join(e.code("obj")) in scn.code()  # the program text names every object it runs on


def test_the_stale_cells_are_torchs_known_limitation_confirmed_by_evidence(samples):
    ctx = engine_of().context(COUNTER)
    cell = run_cell(ctx, "value", "eager")
    assert (cell.status, cell.limitation) == ("unsupported", "automatic-dynamic-stale-result"), cell.details
    assert cell.details[0].startswith("the example object ")
    assert cell.details[0].endswith("it stayed at an earlier object's result")
    assert "compiled again with automatic_dynamic_shapes=False every object gets eager's result" in cell.reason
    assert cell.details[-1].startswith("also ran on ") and "further example object" in cell.details[-1]


def test_a_row_the_sweep_finds_nothing_on_passes_and_says_what_it_ran_on(samples):
    ctx = engine_of().context(COUNTER)
    cell = run_cell(ctx, "op.counter_scale", "eager")  # the op runs the C++ kernel on each object: no constant
    assert cell.status == "passed", cell.details
    sweep = scenario(ctx, "op.counter_scale").sweep
    assert cell.details[-1] == (f"also ran on {len(sweep)} further example objects with run 1's inputs: "
                                + ", ".join(e.label for e in sweep))


@pytest.mark.process  # runs the reproducer in a fresh interpreter
def test_the_cells_reproducer_runs_the_further_objects_and_shows_the_stale_result(samples, tmp_path):
    import subprocess
    import sys

    from conformance.core.settings import Settings
    from conformance.engine.loading import repro_lines
    from conformance.matrix.backends import get_backend
    from conformance.matrix.torchbind.repro import cell_repro
    from conformance.engine.reproducers import NOT_REPRODUCED

    ctx = engine_of(settings=Settings(load_code=tuple(repro_lines("sample_classes")))).context(COUNTER)
    scn = scenario(ctx, "value")
    script = cell_repro(ctx, scn, get_backend("eager"))
    assert "    for make in (make_sweep0, " in script and "        outputs.append(program(*args(obj, 1)))" in script
    path = tmp_path / "repro.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert NOT_REPRODUCED not in done.stdout, done.stdout[-2000:]  # eager and the compiled program differ
