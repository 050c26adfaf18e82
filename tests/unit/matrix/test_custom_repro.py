"""A failed matrix cell of a Python custom class prints a reproducer (a new user's trial, issue 31): the checks
reference promises a script for every failure, and only TorchBind cells had one. The script imports the user's
module, builds the row's program and each object of the sequence, runs eager and the cell's backend and prints both
(:mod:`conformance.matrix.custom.repro`), judged like every other reproducer. Plain torch beside the verdict:
``samples_autocast::mix_ambient`` has no autocast rule, so under CPU autocast eager gives bfloat16 and the program
compiled with aot_eager float32."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.engine.reproducers import NOT_REPRODUCED, check_reproducer, run_fresh
from conformance.matrix.backends import get_backend
from conformance.matrix.cell import OUTPUT_DIFFERS, cell_failure
from conformance.matrix.custom.run import ROWS, run_cell

from conftest import engine_of

ROOT = str(Path(__file__).resolve().parents[3])
#: The load lines a run gives its reproducers (as --torchbind-load does): the samples' directory on sys.path.
LOAD = ("import sys", f"sys.path.insert(0, {ROOT!r})")

pytestmark = pytest.mark.process  # every test here runs a script in a fresh interpreter


def _fresh(script: str, where: Path) -> subprocess.CompletedProcess:
    """``script`` run with this interpreter from ``where`` (an empty directory), as its reader would."""
    (where / "repro.py").write_text(script)
    return subprocess.run([sys.executable, "repro.py"], cwd=where, capture_output=True, text=True, timeout=300)


def test_plain_torch_an_op_without_an_autocast_rule_under_a_compiled_program():
    import sample_classes.custom_autocast as mixers

    class Mix(torch.nn.Module):
        def forward(self, x, m):
            return mixers.mix_ambient(x, m)

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    torch._dynamo.reset()
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            eager = Mix()(x, mixers.MixerAmbient(2.0))
            compiled = torch.compile(Mix(), backend="aot_eager", fullgraph=True)(x, mixers.MixerAmbient(2.0))
    finally:
        torch._dynamo.reset()
    assert (eager.dtype, compiled.dtype) == (torch.bfloat16, torch.float32)


def test_a_failed_custom_cell_prints_a_script_that_shows_it_from_an_empty_directory(tmp_path):
    ctx = engine_of(None, Settings(examples=5, load_code=LOAD)).context("sample_classes.custom_autocast.MixerAmbient")
    cell = run_cell(ctx, "mix_ambient", "autocast")
    assert (cell.status, cell.rule) == (Status.FAILED, OUTPUT_DIFFERS), cell.reason
    failure = cell_failure(cell)
    assert failure.repro, "a failed custom-class cell carries no reproducer"
    script = failure.repro
    assert "from sample_classes.custom_autocast import MixerAmbient" in script
    assert "        return torch.ops.samples_autocast.mix_ambient(t0, obj)" in script
    assert "with torch.autocast('cpu', dtype=torch.bfloat16):\n    expected = run_twice(module(first), first)" in script
    # Every object of the cell's sequence, in its order, built as the cell's program lists them.
    objects = [ln.split(": obj = ", 1)[1] for ln in cell.program.split("# objects, in order:\n")[1].splitlines()]
    built = [ln.strip()[len("obj = "):] for ln in script.splitlines() if ln.startswith("        obj = ")]
    assert [o.split("; ")[0].removesuffix(" (built again)") for o in objects] == built

    ran = run_fresh(script)  # one fresh interpreter, from an empty directory: read here, and judged by the plugin
    assert ran.returncode == 0, ran.stderr[-3000:]
    eager, _, compiled = ran.stdout.partition("\nautocast:")
    # The mismatch, as the cell reports it: eager's outputs in bfloat16, the compiled program's in float32.
    assert eager.startswith("eager:") and "dtype=torch.bfloat16" in eager, ran.stdout
    assert compiled and "dtype=torch.bfloat16" not in compiled, ran.stdout
    assert NOT_REPRODUCED not in ran.stdout
    checked = check_reproducer(failure, run=ran)
    assert checked.details[-1].startswith("reproducer checked: run in a fresh interpreter from an empty directory, "
                                          "it ran as shown"), checked.details[-1]


def test_the_script_of_a_symbolic_class_compares_its_states_and_finds_nothing_where_the_cell_passes(tmp_path):
    """The script of a symbolic class reads the fields the cell compares after each run; on a cell that passes it
    runs to its end and finds no disagreement (it invents none: the objects and their states are rebuilt as the
    cell built them)."""
    ctx = engine_of(None, Settings(examples=5, load_code=LOAD)).context("sample_classes.samples_opfake.Tiles")
    assert run_cell(ctx, "tile", "eager").status is Status.PASSED
    script = ROWS.repro(ctx, ROWS.scenario(ctx, "tile"), get_backend("eager"))
    assert "        states.append({k: getattr(obj, k) for k in ('times',) if hasattr(obj, k)})" in script
    ran = _fresh(script, tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert NOT_REPRODUCED in ran.stdout and "'times': " in ran.stdout, ran.stdout
    # The eager backend's line is told from plain eager's (trial 4: both lines read "eager:").
    assert "\ntorch.compile eager: " in ran.stdout and ran.stdout.startswith("eager: "), ran.stdout
