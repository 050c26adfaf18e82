"""A constant (value) custom class that changes in place, written the way a training library writes its FP8
quantizer (``set_usage`` on the object), on the sample :mod:`sample_classes.quantizers`: torch.compile guards a
constant object by ``==`` against the object it compiled with, so a program compiled before the change keeps the old
result. The broken class fails ``guards`` naming the method and the field; the correct one (``with_usage`` returns a
new object) passes every check. Plain torch beside each verdict, on every tested torch."""

from __future__ import annotations

import pytest
import torch

from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.engine.op_definitions import recording
from conformance.runner import run_class

with recording():  # as --torchbind-load imports it: the define strings name the classes
    import sample_classes.quantizers as qs

from conftest import engine_of

MOD = "sample_classes.quantizers"


def test_plain_torch_a_constant_object_changed_in_place_keeps_the_compiled_result():
    x = torch.ones(2)
    torch._dynamo.reset()
    try:
        program = torch.compile(lambda x, q: torch.ops.samples_quant.quantize_mutable(x, q), backend="eager",
                                fullgraph=True)
        q = qs.MutableQuantizer(2.0, rowwise=True)
        assert program(x, q).tolist() == [2.0, 2.0]
        q.set_usage(False)
        assert torch.ops.samples_quant.quantize_mutable(x, q).tolist() == [-2.0, -2.0]  # eager
        assert program(x, q).tolist() == [2.0, 2.0]  # stale: q == q, so no guard fails
        q.rowwise = True  # an attribute write goes unseen the same way
        q.scale = 5.0
        assert program(x, q).tolist() == [2.0, 2.0]
        # the correct class gives a new object for another usage: the program compiles again for it
        torch._dynamo.reset()
        program = torch.compile(lambda x, q: torch.ops.samples_quant.quantize(x, q), backend="eager", fullgraph=True)
        q = qs.Quantizer(2.0)
        assert program(x, q).tolist() == [2.0, 2.0]
        assert program(x, q.with_usage(False)).tolist() == [-2.0, -2.0]
    finally:
        torch._dynamo.reset()


def _outcomes(cls: str):
    return {(o.check, o.target): o for o in run_class(f"{MOD}.{cls}", engine=engine_of(None, Settings(examples=10)),
                                                      only={"guards", "recompiles", "fake_kernel", "eq_hash"})}


def test_the_mutable_quantizer_fails_guards_naming_the_method_and_the_field():
    outcomes = _outcomes("MutableQuantizer")
    guards = outcomes[("guards", "quantize_mutable")]
    assert guards.status is Status.FAILED, guards.render()
    [failure] = guards.failures
    assert failure.rule == "guards.mutated-constant"
    assert failure.summary.startswith("MutableQuantizer.set_usage(")
    assert "changes a constant object in place ('rowwise')" in failure.summary
    assert "return a new object from set_usage instead, or register MutableQuantizer as a symbolic class" \
        in failure.summary
    assert failure.details[1].endswith("(stale)"), failure.details
    assert "obj.set_usage(" in failure.repro and "print('eager, after:    '" in failure.repro
    # the class's other items are not its fault: its __eq__, hash and fake kernel are right
    assert all(o.status is Status.PASSED for key, o in outcomes.items() if key[0] != "guards"), outcomes


def test_the_quantizer_that_returns_new_objects_passes():
    outcomes = _outcomes("Quantizer")
    assert {k: o.status for k, o in outcomes.items()} == {k: Status.PASSED for k in outcomes}, \
        {k: o.render() for k, o in outcomes.items() if o.status is not Status.PASSED}
    assert ("guards", "quantize") in outcomes


def test_plain_torch_each_recompiled_entry_keeps_its_own_object():
    # What the matrix's in-place step relies on: the program ran on a second object (and compiled again for it);
    # that object changed in place then gets the result computed for it before the change.
    x = torch.ones(2)
    torch._dynamo.reset()
    try:
        program = torch.compile(lambda x, q: torch.ops.samples_quant.quantize_mutable(x, q), backend="aot_eager",
                                fullgraph=True)
        a, b = qs.MutableQuantizer(2.0, rowwise=True), qs.MutableQuantizer(3.0, rowwise=True)
        assert program(x, a).tolist() == [2.0, 2.0]
        assert program(x, b).tolist() == [3.0, 3.0]
        b.set_usage(False)
        assert torch.ops.samples_quant.quantize_mutable(x, b).tolist() == [-3.0, -3.0]  # eager
        assert program(x, b).tolist() == [3.0, 3.0]  # stale
    finally:
        torch._dynamo.reset()


def test_the_matrix_changes_a_constant_object_in_place_after_the_program_ran_on_it():
    from conformance.matrix.custom.run import run_cell

    engine = engine_of(None, Settings(examples=5))
    cell = run_cell(engine.context(f"{MOD}.MutableQuantizer"), "quantize_mutable", "aot_eager")
    assert (cell.status, cell.rule) == (Status.FAILED, "matrix.stale-result"), cell.reason
    assert cell.reason.startswith("changed in place: obj.set_usage("), cell.reason
    assert "on the object the program ran on in step " in cell.reason and "it stayed at" in cell.reason
    assert "changed in place" in cell.repro and "obj.set_usage(" in cell.repro
    # the correct class gives no method that changes it in place: its cell passes
    cell = run_cell(engine_of(None, Settings(examples=5)).context(f"{MOD}.Quantizer"), "quantize", "aot_eager")
    assert cell.status is Status.PASSED, cell.reason


@pytest.mark.process  # runs the cell's reproducer in a fresh interpreter
def test_the_in_place_cell_reproducer_shows_it_from_an_empty_directory():
    from pathlib import Path

    from conformance.engine.reproducers import NOT_REPRODUCED, run_fresh
    from conformance.matrix.custom.run import run_cell

    load = ("import sys", f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})")
    cell = run_cell(engine_of(None, Settings(examples=5, load_code=load)).context(f"{MOD}.MutableQuantizer"),
                    "quantize_mutable", "aot_eager")
    ran = run_fresh(cell.repro)  # one fresh interpreter, from an empty directory
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert NOT_REPRODUCED not in ran.stdout, ran.stdout[-2000:]
