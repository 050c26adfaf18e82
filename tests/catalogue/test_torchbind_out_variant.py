"""Out-variant custom ops on a TorchBind class (``Tensor(a!) out``, returning ``()``), defined from Python with
``Library.define`` + ``impl`` + ``register_fake`` over a C++ class, on the sample :mod:`sample_classes.torchbind_out`:
every check compares what the op writes, not the ``()`` it returns. The matrix programs return the written argument
(before, an op returning nothing could only be compared by a constant); ``custom_op`` and the differential compare
each written argument beside the result and the object's state, and fail the fake that forgets the count it should
change, naming the op. Plain torch beside each verdict. The ops are registered for this module only
(:func:`sample_classes.torchbind_out.unregister`), so no other test sees them among the class's ops."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from conformance.core.results import Status
from conformance.runner import plan, run_target
from conftest import engine_of

MOD = "sample_classes.torchbind_out"


@pytest.fixture(scope="module")
def ops():
    module = importlib.import_module(MOD)
    try:
        yield torch.ops.samples_tbout
    finally:
        module.unregister()
        sys.modules.pop(MOD, None)


def _run(engine, name: str):
    [unit] = [u for u in plan("samples::Counter", engine) if u.name == name]
    return run_target(unit, engine)


def _compiled(fn, backend="inductor"):
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, fullgraph=True)


def test_plain_torch_the_result_is_in_the_written_argument_and_follows_the_object(ops):
    def program(c, x, out):
        ops.scale_into(c, x, out)
        return out

    x = torch.arange(3.0)
    try:
        compiled = _compiled(program)
        for count in (2, 5):  # the compiled program follows the object it is given
            out = torch.zeros(3)
            returned = ops.scale_into(torch.classes.samples.Counter(count), x, torch.zeros(3))
            assert returned is None or returned == ()  # nothing comes back: the result is in out
            assert compiled(torch.classes.samples.Counter(count), x, out) is out  # the input itself, written
            assert out.tolist() == (x * count).tolist()
    finally:
        torch._dynamo.reset()


def test_plain_torch_a_fake_that_forgets_the_count_burns_the_old_one_into_the_program(ops):
    def program(op):
        def run(c, x, out):
            op(c, 3, x, out)
            return out, c.value()
        return run

    x = torch.ones(2)
    try:
        for op, traced in ((ops.bump_into, 5), (ops.bump_into_forgets, 2)):
            c = torch.classes.samples.Counter(2)
            out, value = _compiled(program(op), backend="eager")(c, x, torch.zeros(2))
            assert out.tolist() == [5.0, 5.0] and c.value() == 5  # the real op ran: the object and out are right
            assert value == traced, op  # c.value() read from the fake while tracing, burned in as a constant
    finally:
        torch._dynamo.reset()


def test_custom_op_compares_what_the_op_writes_and_fails_the_fake_that_forgets_the_count(ops):
    engine = engine_of()
    for name in ("scale_into", "bump_into"):
        good = _run(engine, f"custom_op[{name}]")
        assert good.status is Status.PASSED, good.render()
        assert good.evidence.counts.get("result", 0) > 0 and good.evidence.counts.get("object state", 0) > 0
    bad = _run(engine, "custom_op[bump_into_forgets]")
    assert bad.status is Status.FAILED, bad.render()
    [failure] = [f for f in bad.failures if f.rule == "custom_op.state-differs"]
    assert failure.call.startswith("torch.ops.samples_tbout.bump_into_forgets.default(obj, ")
    assert "obj.count: C++ " in failure.details[0] and "the fake keeps 2" in failure.details[0]
    # the reproducer shows what the op wrote on both sides, as the check compares it
    assert "real = {'returned': real, 'out (written)': args[2]}" in failure.repro
    assert "    fake = {'returned': fake, 'out (written)': args[2]}" in failure.repro
    compile(failure.repro, "<reproducer>", "exec")


def test_the_differential_drives_the_out_variant_op_and_names_it(ops):
    outcome = _run(engine_of(), "differential")
    assert outcome.status is Status.FAILED, outcome.render()
    [failure] = outcome.failures
    assert failure.target == "bump_into_forgets" and failure.rule == "differential.observer-drifts"
    assert "torch.ops.samples_tbout.bump_into_forgets.default(obj, " in failure.call


def test_matrix_programs_return_the_written_argument_and_hold_backends_to_its_values(ops):
    engine = engine_of()
    for backend in ("aot_eager", "inductor", "export"):
        cell = _run(engine, f"matrix[op.scale_into-{backend}]")
        assert cell.status is Status.PASSED, cell.render()
        assert "        torch.ops.samples_tbout.scale_into.default(obj, x0, x1)\n        return (x1, )" \
            in cell.cell.program
        assert cell.evidence.counts.get("output", 0) > 0  # the written values, compared on both runs
