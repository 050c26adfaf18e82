"""A failed cell of a backward row prints a reproducer (a new user's trial, issue 31): the checks reference promises
a script for every failure, and only the forward rows' cells had one. The script imports what the forward script
does, builds the cell's objects, differentiates the row's loss with ``torch.autograd.grad`` in plain eager and
through the cell's backend, prints both and judges itself (:func:`conformance.matrix.repro.judged_gradients`).

Plain torch beside each verdict: :mod:`sample_classes.custom_autograd`'s broken samples, whose plain-torch lines
``tests/unit/matrix/test_backward.py`` and ``tests/unit/checks/test_guards_backward.py`` show; the script run here is
itself those lines, from an empty directory."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.engine.reproducers import NOT_REPRODUCED, REPRODUCED, check_reproducer, run_fresh
from conformance.matrix.backends import get_backend
from conformance.matrix.cell import FOLLOWS_FROM_FAKE, GRADIENT_DIFFERS, GRADIENT_WRONG, cell_failure
from conformance.matrix.custom.run import ROWS as CUSTOM_ROWS
from conformance.matrix.custom.run import run_cell as run_custom_cell
from conformance.matrix.torchbind.run import run_cell

from conftest import engine_of

ROOT = str(Path(__file__).resolve().parents[3])
#: The load lines a run gives its reproducers (as --torchbind-load does): the samples' directory on sys.path.
LOAD = ("import sys", f"sys.path.insert(0, {ROOT!r})")
MOD = "sample_classes.custom_autograd"

pytestmark = pytest.mark.process  # every test here runs a script in a fresh interpreter


@pytest.fixture(scope="module")
def gains():
    import sample_classes.custom_autograd as module

    return module


def _ctx(cls: str):
    return engine_of(None, Settings(examples=5, load_code=LOAD)).context(f"{MOD}.{cls}")


def _fresh(script: str, where: Path) -> subprocess.CompletedProcess:
    """``script`` run with this interpreter from ``where`` (an empty directory), as its reader would."""
    (where / "repro.py").write_text(script)
    return subprocess.run([sys.executable, "repro.py"], cwd=where, capture_output=True, text=True, timeout=300)


def _shown(ran) -> str:
    """What the script said it found: the rest of its ``REPRODUCED:`` line."""
    lines = [ln for ln in ran.stdout.splitlines() if ln.startswith(REPRODUCED)]
    assert len(lines) == 1 and NOT_REPRODUCED not in ran.stdout, (ran.stdout[-3000:], ran.stderr[-3000:])
    return lines[0][len(REPRODUCED):].strip()


@pytest.mark.parametrize("cls, row, backend, rule, shown", [
    # The backend's gradient differs: the program compiled for the first object (guard_fn leaves out scale) gives
    # the next object with the same label the first one's gradient.
    ("LossScaleGuardMissesScale", "loss_scaled_stale.backward", "aot_eager", GRADIENT_DIFFERS,
     r"(run \d+: the gradients through aot_eager are not plain eager's(; )?)+"),
    # The backward op's fake has the wrong shape: compiling traces the backward with it, and autograd rejects it.
    ("GainBackwardFakeWrong", "gain_bwfake.backward", "aot_eager", FOLLOWS_FROM_FAKE,
     r"through aot_eager, the program raised \(plain eager ran\): RuntimeError: Function "
     r"GeneratedBackwardFor_samples_autograd_gain_bwfake_defaultBackward returned an invalid gradient at index 0 - "
     r"got \[1, 3\] but expected shape compatible with \[2, 3\]"),
    # Eager's formula ignores the object: every backend agrees with eager, gradcheck's finite differences do not.
    ("GainFormulaIgnoresState", "gain_nostate.backward", "eager", GRADIENT_WRONG,
     r"plain eager's own gradient disagrees with finite differences \(torch\.autograd\.gradcheck\)"),
])
def test_a_failed_backward_cell_of_a_custom_class_prints_a_script_that_shows_it(gains, tmp_path, cls, row, backend,
                                                                                 rule, shown):
    cell = run_custom_cell(_ctx(cls), row, backend)
    assert (cell.status, cell.rule) == (Status.FAILED, rule), cell.reason
    failure = cell_failure(cell)
    assert failure.repro, f"a failed {rule} cell of a backward row carries no reproducer"
    script = failure.repro
    assert f"from {MOD} import {cls}" in script
    op = row.removesuffix(".backward")
    assert f"        return torch.ops.samples_autograd.{op}(t0, obj)" in script
    assert "torch.autograd.grad(loss, inputs, allow_unused=True)" in script
    assert (rule == GRADIENT_WRONG) == ("torch.autograd.gradcheck(fresh, doubles)" in script)

    ran = run_fresh(script)  # one fresh interpreter, from an empty directory: read here, and judged by the plugin
    assert re.fullmatch(shown, _shown(ran)), ran.stdout[-3000:]
    checked = check_reproducer(failure, run=ran)
    assert any(d.startswith("reproducer checked: run in a fresh interpreter from an empty directory, it made the "
                            "comparison itself and printed the difference (REPRODUCED: ") for d in checked.details), \
        checked.details
    # Both sides' gradients are printed, eager's first (the program raising: eager's alone, then the error whole).
    assert ran.stdout.startswith("eager:   [{'requires_grad': [True], 'grads': [tensor("), ran.stdout[:500]
    if rule == FOLLOWS_FROM_FAKE:
        assert ran.returncode != 0 and "returned an invalid gradient at index 0" in ran.stderr
    else:
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert f"\n{get_backend(backend).side}: [{{'requires_grad': [True], 'grads': [tensor(" in ran.stdout
    if rule == GRADIENT_WRONG:  # gradcheck's Jacobians: the formula's 1 where finite differences give the factor
        assert "Jacobian mismatch for output 0 with respect to input 0" in ran.stdout


def test_the_script_of_a_backward_row_finds_nothing_where_the_cell_passes(gains, tmp_path):
    """On a cell that passes the script runs to its end and finds no disagreement: it invents none (eager's and the
    compiled program's gradients, and eager's against finite differences, agree)."""
    ctx = _ctx("Gain")
    for backend in ("eager", "aot_eager"):
        assert run_custom_cell(ctx, "gain.backward", backend).status is Status.PASSED
    script = CUSTOM_ROWS.repro(ctx, CUSTOM_ROWS.scenario(ctx, "gain.backward"), get_backend("aot_eager"))
    ran = _fresh(script, tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert NOT_REPRODUCED in ran.stdout and REPRODUCED not in ran.stdout, ran.stdout[-3000:]
    assert "\naot_eager: [{'requires_grad': [True], 'grads': [tensor(" in ran.stdout


@pytest.fixture(scope="module")
def paged():
    """The ``samples_inputs_autograd`` ops over PagedCache, registered for this module's tests and dropped after
    (as ``tests/unit/matrix/test_backward.py`` does), with load lines that register them in the script too."""
    import sample_classes  # noqa: F401 - builds (cached) and loads the libraries

    def register():
        importlib.reload(importlib.import_module("sample_classes.adopter_inputs"))
        importlib.reload(importlib.import_module("sample_classes.inputs_autograd"))

    engine = engine_of(register, Settings(examples=5, load_code=(
        *LOAD, "import sample_classes", "import sample_classes.inputs_autograd")))
    module = importlib.import_module("sample_classes.inputs_autograd")
    module.register()
    yield engine
    module.unregister()


def test_a_failed_torchbind_backward_cell_prints_a_script_that_shows_it(paged, tmp_path):
    # Plain torch (test_backward.py shows it): weighted_nostate's formula returns grad * 1.0, not grad * cache.size().
    cell = run_cell(paged.context("samples_inputs::PagedCache"), "op.weighted_nostate.backward", "eager")
    assert (cell.status, cell.rule) == (Status.FAILED, GRADIENT_WRONG), cell.reason
    script = cell_failure(cell).repro
    assert script, "a failed TorchBind backward cell carries no reproducer"
    assert "torch.ops.samples_inputs_autograd.weighted_nostate.default(x0, obj)" in script
    ran = _fresh(script, tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert _shown(ran) == "plain eager's own gradient disagrees with finite differences (torch.autograd.gradcheck)"
    assert "\ntorch.compile eager: [{'requires_grad': [True], 'grads': [tensor(" in ran.stdout


def test_a_failed_method_backward_cell_prints_a_script_that_shows_it(tmp_path):
    # Plain torch (test_method_backward.py shows it): with Vocab's fake of lookup returning shape [], a program compiled
    # with aot_eager runs the real method forward, then its backward, traced with the fake's shape, raises.
    import sample_classes  # noqa: F401 - builds (cached) and loads the libraries
    from sample_classes.fakes_stale import BROKEN

    load = (*LOAD, "import sample_classes", "from sample_classes.fakes_stale import BROKEN",
            "broken = BROKEN['vocab_lookup_scalar'].installed()", "broken.__enter__()")
    with BROKEN["vocab_lookup_scalar"].installed():
        ctx = engine_of(None, Settings(examples=5, load_code=load)).context("samples_stale::Vocab")
        cell = run_cell(ctx, "lookup.backward", "aot_eager")
    assert (cell.status, cell.rule) == (Status.FAILED, FOLLOWS_FROM_FAKE), cell.reason
    script = cell_failure(cell).repro
    assert script, "a failed method backward cell carries no reproducer"
    assert "        r0 = obj.lookup(x0)" in script
    ran = _fresh(script, tmp_path)
    assert _shown(ran) == ("through aot_eager, the program raised (plain eager ran): RuntimeError: output with shape "
                           "[] doesn't match the broadcast shape [2, 3]")
    assert ran.returncode != 0 and "doesn't match the broadcast shape [2, 3]" in ran.stderr.splitlines()[-1]
