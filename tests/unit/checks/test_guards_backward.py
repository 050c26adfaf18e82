"""``guards`` on a symbolic class whose ``guard_fn`` leaves out a field only an op's backward reads (a new user's
trial, issue 31: an FP8 scaling state whose ``guard_fn`` left out ``scale``; ``guards`` compared forward results and
passed, and only the matrix's backward cells failed, naming neither ``guard_fn`` nor the field). The forward's kernel
runs on the object passed in, so forward results stay right; AOTAutograd traces the op's autograd formula while
compiling and bakes the ``scale`` it reads, so an object with the same ``guard_fn`` values gets the first one's
gradient. Shown first with plain torch, beside the verdicts (``sample_classes.custom_autograd``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.matrix.cell import GRADIENT_DIFFERS
from conformance.matrix.custom.run import run_cell
from conformance.runner import run_class

from conftest import engine_of

MOD = "sample_classes.custom_autograd"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def samples():
    import sample_classes.custom_autograd as module

    return module


def _gradient(fn, obj):
    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    return torch.autograd.grad(fn(x, obj).sum(), [x])[0]


def _compiled_twice(op, a, b):
    """One program compiled with aot_eager, called with ``a`` then ``b``: both gradients and the frames compiled."""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    program = torch.compile(lambda x, o: op(x, o), backend=counter, fullgraph=True)
    try:
        return _gradient(program, a), _gradient(program, b), counter.frame_count
    finally:
        torch._dynamo.reset()


def test_plain_torch_a_guard_fn_without_scale_gives_the_first_objects_gradient(samples):
    a, b = samples.LossScaleGuardMissesScale("fp8", 2.0), samples.LossScaleGuardMissesScale("fp8", 2.0)
    b.update(5.0)
    op = samples.loss_scaled_stale
    assert torch.equal(_gradient(op, b), torch.full((2, 3), 5.0))  # eager: d(x * scale)/dx = scale
    ga, gb, frames = _compiled_twice(op, a, b)
    assert frames == 1  # guard_fn returns ['fp8'] for both: no recompile
    assert torch.equal(ga, torch.full((2, 3), 2.0)) and torch.equal(gb, ga)  # b gets a's gradient: stale
    # The forward results stay right: the op's kernel runs on b.
    torch._dynamo.reset()
    program = torch.compile(lambda x, o: op(x, o), backend="aot_eager", fullgraph=True)
    x = torch.ones(2, 3)
    assert torch.equal(program(x, a), x * 2.0) and torch.equal(program(x, b), x * 5.0)
    torch._dynamo.reset()

    right = samples.LossScale("fp8", 2.0), samples.LossScale("fp8", 2.0)
    right[1].update(5.0)
    ga, gb, frames = _compiled_twice(samples.loss_scaled, *right)
    assert frames == 2 and torch.equal(gb, torch.full((2, 3), 5.0))  # guard_fn returns scale: compiled again


def _guards(cls: str, op: str):
    [outcome] = [o for o in run_class(f"{MOD}.{cls}", only={"guards"}, engine=engine_of(None, Settings(examples=10)))
                 if o.target == op]
    return outcome


def test_guards_names_guard_fn_the_field_and_the_backward(samples):
    outcome = _guards("LossScaleGuardMissesScale", "loss_scaled_stale")
    assert outcome.status is Status.FAILED, outcome.render()
    [failure] = outcome.failures
    text = failure.render(outcome.qualname, outcome.target)
    assert failure.rule == "guards.stale-gradient", text
    assert failure.summary.startswith("LossScaleGuardMissesScale's guard_fn leaves out 'scale', which the backward of "
                                      "samples_autograd::loss_scaled_stale reads: a and b differ only in 'scale' and "
                                      "guard_fn returns "), text
    assert "so a program compiled for a (aot_eager) is reused for b without compiling again" in text
    assert "gives b a's gradient (stale)" in text and failure.summary.endswith("Add it to guard_fn")
    assert "torch compiled once for a and b (1 frame compiled)" in failure.details
    # The reproducer is plain torch: run, it prints a's gradient for b through the program, and one frame compiled.
    done = subprocess.run([sys.executable, "-c", failure.repro], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    printed = re.split(r"^(compiled, a|compiled, b|eager, a|eager, b): *", done.stdout, flags=re.M)[1:]
    shown = {label: " ".join(text.split()) for label, text in zip(printed[::2], printed[1::2])}
    assert shown["compiled, b"] == shown["compiled, a"] + " frames compiled: 1", shown  # a's gradient for b
    assert shown["compiled, a"] == shown["eager, a"] != shown["eager, b"], shown


def test_a_guard_fn_that_returns_the_field_passes(samples):
    outcome = _guards("LossScale", "loss_scaled")
    assert outcome.status is Status.PASSED, outcome.render()


def test_the_backward_cell_says_the_program_kept_the_first_object_and_names_the_guards_item(samples):
    ctx = engine_of(None, Settings(examples=5)).context(f"{MOD}.LossScaleGuardMissesScale")
    cell = run_cell(ctx, "loss_scaled_stale.backward", "aot_eager")
    assert (cell.status, cell.rule) == (Status.FAILED, GRADIENT_DIFFERS), cell.reason
    assert "the gradient through aot_eager is the one plain eager gives on the first object (the one the program " \
           "was compiled with): its backward kept that object's state; guard_fn returns " in cell.reason
    assert "(they differ in 'scale'), so torch reused the program compiled for the first" in cell.reason
    assert cell.reason.endswith("guard_fn leaves out a field the backward reads; the guards[loss_scaled_stale] item "
                                "judges it")
    # torch.compile's eager backend runs the formula in eager, on the object passed in: right.
    assert run_cell(ctx, "loss_scaled_stale.backward", "eager").status is Status.PASSED
