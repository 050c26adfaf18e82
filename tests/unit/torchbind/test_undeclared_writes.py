"""``custom_op`` on a TorchBind op that writes a tensor argument its schema does not declare written (torch.library
.opcheck's schema test): torch.compile takes the argument as unchanged, and inductor reads its old value after the
op. Plain torch beside the verdict; the op is defined for the test (``Library.define`` with the TorchBind class in
its schema, a Python kernel, a fake) and dropped after it, so no other test sees it as an op of the class."""

from __future__ import annotations

import pytest
import torch

from conformance.core.results import Status
from conformance.runner import plan, run_target
from conftest import engine_of

COUNTER = "__torch__.torch.classes.samples.Counter"


@pytest.fixture
def ops():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library, registers the fakes

    lib = torch.library.Library("samples_writes", "FRAGMENT")
    lib.define(f"add_count_undeclared(Tensor x, {COUNTER} c) -> Tensor")
    lib.define(f"add_count_declared(Tensor(a!) x, {COUNTER} c) -> Tensor")

    def kernel(x, c):
        x.add_(c.value())  # writes x
        return x * 2

    def fake(x, c):
        return torch.empty_like(x)

    for name in ("add_count_undeclared", "add_count_declared"):
        lib.impl(name, kernel, "CompositeExplicitAutograd")
        torch.library.register_fake(f"samples_writes::{name}", lib=lib)(fake)
    yield torch.ops.samples_writes
    lib._destroy()


def _outcome(op: str):
    engine = engine_of()
    [unit] = [u for u in plan("samples::Counter", engine, only={"custom_op"}) if u.target.short_name == op]
    return run_target(unit, engine)


def test_plain_torch_inductor_reads_the_undeclared_argument_before_the_write(ops):
    def program(c, x, op):
        a = x + 1
        op(a, c)  # a += 3
        return a * 2

    for name, stale in (("add_count_undeclared", True), ("add_count_declared", False)):
        op = getattr(ops, name)
        eager = program(torch.classes.samples.Counter(3), torch.zeros(2), op)
        assert eager.tolist() == [8.0, 8.0]
        torch._dynamo.reset()
        try:
            compiled = torch.compile(program, backend="inductor", fullgraph=True)(
                torch.classes.samples.Counter(3), torch.zeros(2), op)
        finally:
            torch._dynamo.reset()
        # undeclared: inductor computes a * 2 from a as it was before the op wrote it
        assert compiled.tolist() == ([2.0, 2.0] if stale else [8.0, 8.0]), name


def test_custom_op_fails_an_op_writing_an_undeclared_argument_and_passes_the_declared_one(ops):
    bad = _outcome("add_count_undeclared")
    assert bad.status is Status.FAILED, bad.render()
    [failure] = bad.failures
    assert failure.rule == "custom_op.undeclared-mutation"
    assert failure.summary.startswith("samples_writes::add_count_undeclared changes its argument 'x' in place, but "
                                      "its schema does not declare it written")
    assert "declare it 'Tensor(a!) x' in the op's schema" in failure.summary
    assert failure.details[0].startswith("x: ") and " before the call, " in failure.details[0]
    assert "torch.ops.samples_writes.add_count_undeclared.default(*args[:1], obj, *args[1:], **kwargs)" \
        in failure.repro
    compile(failure.repro, "<reproducer>", "exec")
    good = _outcome("add_count_declared")
    assert good.status is Status.PASSED, good.render()
