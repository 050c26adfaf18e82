"""The coverage matrix's ``autocast`` column: a row's program through ``torch.compile(backend="aot_eager")`` under
``torch.autocast("cpu", dtype=torch.bfloat16)``, compared with plain eager under the same autocast. Plain torch
first, then the cell's verdict: a C++ op taking a TorchBind object cannot be traced under autocast (the known
limitation ``autocast-torchbind-op``, pytorch#158414), a custom op with an autocast rule gives eager's result, one
whose kernel relies on the autocast around it does not."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conformance.core.evidence import collecting
from conformance.core.results import Status
from conformance.matrix.backends import get_backend
from conformance.matrix.cell import OUTPUT_DIFFERS
from conformance.matrix.custom.run import run_cell as run_custom_cell
from conformance.matrix.limitations import raised_at
from conformance.matrix.torchbind.rows import scenario
from conformance.matrix.torchbind.run import ROWS, run_cell
from conformance.runner import Engine

ENGINE = Engine()
COUNTER = "samples::Counter"
MOD = "sample_classes.custom_autocast"


def bf16():
    return torch.autocast("cpu", dtype=torch.bfloat16)


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401

    return sample_classes


@pytest.fixture(scope="module")
def mixers():
    import sample_classes.custom_autocast as module

    return module


class _CounterScale(torch.nn.Module):
    def forward(self, c, x):
        return torch.ops.samples.counter_scale(c, x)


def test_the_column_is_aot_eager_under_cpu_bfloat16_autocast():
    backend = get_backend("autocast")
    assert backend.autocast == ("cpu", torch.bfloat16) and backend.dynamo
    assert get_backend("aot_eager").autocast is None
    script = "\n".join(backend.script)
    assert "torch.compile(module(traced), backend='aot_eager', fullgraph=True)" in script
    # The reproducer runs the compiled program and plain eager's reference, both under the column's autocast.
    assert script.count("with torch.autocast('cpu', dtype=torch.bfloat16):") == 2
    assert "    expected = run_twice(module(first), first)" in script


def test_plain_torch_cannot_compile_a_torchbind_op_under_autocast(samples):
    x = torch.randn(2, 3)
    with bf16():
        eager = _CounterScale()(torch.classes.samples.Counter(3), x)  # eager runs it
        torch._dynamo.reset()
        with pytest.raises(RuntimeError, match="no kernel for AutocastCPU on samples::counter_scale") as raised:
            torch.compile(_CounterScale(), backend="aot_eager", fullgraph=True)(torch.classes.samples.Counter(3), x)
    assert torch.equal(eager, x * 3)
    assert raised_at(raised.value) == "RuntimeError raised in torch/_ops.py _dispatch_in_python"
    # Without autocast the same program compiles and gives eager's result.
    torch._dynamo.reset()
    assert torch.equal(torch.compile(_CounterScale(), backend="aot_eager", fullgraph=True)(
        torch.classes.samples.Counter(3), x), x * 3)


def test_the_torchbind_op_cell_is_the_known_limitation_and_the_method_cell_passes(samples):
    ctx = ENGINE.context(COUNTER)
    op = run_cell(ctx, "op.counter_scale", "autocast")
    assert op.status is Status.UNSUPPORTED and op.limitation == "autocast-torchbind-op", op.reason
    assert "RuntimeError raised in torch/_ops.py _dispatch_in_python" in op.reason
    assert run_cell(ctx, "op.counter_scale", "aot_eager").status is Status.PASSED  # autocast is the difference
    with collecting() as compared:
        method = run_cell(ctx, "scale", "autocast")
    assert method.status is Status.PASSED, method.reason
    assert compared.total > 0
    assert method.details[0] == ("the program through aot_eager, autocast bf16 and plain eager both ran under "
                                 "torch.autocast('cpu', dtype=torch.bfloat16)")


def test_plain_torch_a_fallthrough_at_autocast_lifts_the_limitation(samples):
    """What the limitation's reason tells the class's author: an op with its own fallthrough kernel at AutocastCPU
    is dispatched past the key (eager is unchanged: autocast's fallback is a fallthrough too)."""
    lib = torch.library.Library("autocast_fallthrough_test", "DEF")
    lib.define("scaled(__torch__.torch.classes.samples.Counter c, Tensor x) -> Tensor")
    lib.impl("scaled", lambda c, x: x * c.value(), "CPU")
    torch.library.register_fake("autocast_fallthrough_test::scaled", lambda c, x: torch.empty_like(x), lib=lib)

    class Program(torch.nn.Module):
        def forward(self, c, x):
            return torch.ops.autocast_fallthrough_test.scaled(c, x)

    x = torch.randn(2, 3)
    try:
        with bf16():
            torch._dynamo.reset()
            with pytest.raises(RuntimeError, match="no kernel for AutocastCPU"):
                torch.compile(Program(), backend="aot_eager", fullgraph=True)(torch.classes.samples.Counter(2), x)
            lib.impl("scaled", torch.library.fallthrough_kernel, "AutocastCPU")
            torch._dynamo.reset()
            got = torch.compile(Program(), backend="aot_eager", fullgraph=True)(torch.classes.samples.Counter(2), x)
        assert torch.equal(got, x * 2)
    finally:
        torch._dynamo.reset()
        lib._destroy()


def test_the_cached_eager_reference_of_other_columns_is_made_without_autocast(samples):
    ctx = ENGINE.context(COUNTER)
    plain = scenario(ctx, "scale")
    reference = plain.reference
    with bf16():
        again = ROWS.under_autocast(plain)
    assert again is not plain and again.reference is not reference
    assert scenario(ctx, "scale").reference is reference  # the row's own, for the other columns


class _Mix(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x, m):
        return self.op(x, m)


def _compiled(op, x, m):
    torch._dynamo.reset()
    try:
        return torch.compile(_Mix(op), backend="aot_eager", fullgraph=True)(x, m)
    finally:
        torch._dynamo.reset()


def test_plain_torch_an_op_with_an_autocast_rule_and_one_without(mixers):
    x = torch.randn(2, 3)
    with bf16():
        eager, compiled = _Mix(mixers.mix)(x, mixers.Mixer(2.0)), _compiled(mixers.mix, x, mixers.Mixer(2.0))
    assert eager.dtype == compiled.dtype == torch.bfloat16
    torch.testing.assert_close(compiled, eager)
    with bf16():
        eager = _Mix(mixers.mix_ambient)(x, mixers.MixerAmbient(2.0))
        compiled = _compiled(mixers.mix_ambient, x, mixers.MixerAmbient(2.0))
    # Eager's kernel ran under the caller's autocast; the compiled graph ran it with autocast off.
    assert (eager.dtype, compiled.dtype) == (torch.bfloat16, torch.float32)
    torch.testing.assert_close(compiled, x @ mixers.MixerAmbient(2.0).weight())
    with pytest.raises(AssertionError, match="dtype"):
        torch.testing.assert_close(compiled, eager)
    # Without autocast, both give float32, and the same values.
    torch.testing.assert_close(_compiled(mixers.mix_ambient, x, mixers.MixerAmbient(2.0)),
                               _Mix(mixers.mix_ambient)(x, mixers.MixerAmbient(2.0)))


def test_the_custom_op_with_an_autocast_rule_passes_and_the_one_without_fails(mixers):
    correct = ENGINE.context(f"{MOD}.Mixer")
    with collecting() as compared:
        cell = run_custom_cell(correct, "mix", "autocast")
    assert cell.status is Status.PASSED, cell.reason
    assert compared.total > 0
    broken = ENGINE.context(f"{MOD}.MixerAmbient")
    assert run_custom_cell(broken, "mix_ambient", "aot_eager").status is Status.PASSED  # only autocast breaks it
    cell = run_custom_cell(broken, "mix_ambient", "autocast")
    assert cell.status is Status.FAILED and cell.rule == OUTPUT_DIFFERS
    assert "dtype=torch.bfloat16), autocast tensor(" in cell.reason and cell.reason.endswith("dtype=torch.float32)")
    details = "\n".join(cell.details)
    assert "The values for attribute 'dtype' do not match: torch.float32 != torch.bfloat16" in details
    assert "torch.library.register_autocast(op, device_type, dtype)" in details


def test_a_program_plain_eager_rejects_under_autocast_has_no_reference(mixers):
    x = torch.randn(2, 3)
    torch.testing.assert_close(_Mix(mixers.mix_float32)(x, mixers.MixerFloat32Only(2.0)),
                               x @ mixers.MixerFloat32Only(2.0).weight())
    with bf16(), pytest.raises(RuntimeError, match="mix_float32 takes float32 only, got torch.bfloat16"):
        _Mix(mixers.mix_float32)(x, mixers.MixerFloat32Only(2.0))
    ctx = ENGINE.context(f"{MOD}.MixerFloat32Only")
    assert run_custom_cell(ctx, "mix_float32", "aot_eager").status is Status.PASSED
    cell = run_custom_cell(ctx, "mix_float32", "autocast")
    assert cell.status is Status.SKIPPED
    assert cell.reason.startswith("no eager reference: plain eager under torch.autocast('cpu', "
                                  "dtype=torch.bfloat16) raises RuntimeError: mix_float32 takes float32 only"), \
        cell.reason


@pytest.mark.process
def test_the_reproducer_runs_both_sides_under_the_autocast(samples):
    """The column's script lines wrap the compiled program in the autocast and make eager's reference again under
    it: on a cell that passes, the script runs to its end in a fresh interpreter and finds no disagreement."""
    from conformance.core.settings import Settings
    from conformance.engine.reproducers import NOT_REPRODUCED, run_fresh
    from conformance.matrix.torchbind.run import ROWS as rows
    root = str(Path(__file__).resolve().parents[3])
    engine = Engine(Settings(load_code=("import sys", f"sys.path.insert(0, {root!r})", "import sample_classes")))
    ctx = engine.context(COUNTER)
    script = rows.repro(ctx, scenario(ctx, "scale"), get_backend("autocast"))
    assert "with torch.autocast('cpu', dtype=torch.bfloat16):\n    expected = run_twice(module(first), first)" in script
    ran = run_fresh(script)
    assert ran.returncode == 0, ran
    assert NOT_REPRODUCED in ran.stdout
