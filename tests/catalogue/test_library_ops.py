"""Ops registered the way real libraries register them (``torch.library.Library.define`` + ``impl`` +
``register_fake``, through a helper that infers the schema; out-variant ops writing into ``Tensor(a!)``), on the
sample ``sample_classes.library_ops``: every op is found, a correct class passes, and a planted ``__eq__`` that
ignores a field only the out-variant op reads fails the items naming that op, with the plain-torch lines beside
the verdict."""

from __future__ import annotations

import pytest
import torch

from conformance.engine.op_definitions import declared_types, kernel_annotations, recording

with recording():  # as --torchbind-load imports it: the helper-built schema string is recorded
    import sample_classes.library_ops as libops

from conftest import run_inprocess

MOD = "sample_classes.library_ops"


def test_plain_torch_the_dispatcher_forgets_the_class_and_a_stale_program_writes_the_first_objects_result():
    # what discovery cannot read from torch: the argument's class is gone from the registered schema
    schema = torch.ops.samples_libops.scaled_store.default._schema
    assert str(schema) == "samples_libops::scaled_store(Tensor key, PyObject s, Tensor(a2!) cache) -> ()"
    # the out-variant op returns nothing: its result is only in the argument it writes
    key, a, b = torch.ones(4), libops.KVScaleEqIgnoresV(2.0, 1.0), libops.KVScaleEqIgnoresV(2.0, 5.0)
    assert a == b
    program = torch.compile(lambda k, s, c: torch.ops.samples_libops.scaled_store(k, s, c), backend="eager",
                            fullgraph=True)
    first, second = torch.zeros(4), torch.zeros(4)
    returned = program(key, a, first)
    assert returned is None or returned == ()
    program(key, b, second)
    eager = torch.zeros(4)
    torch.ops.samples_libops.scaled_store(key, b, eager)
    assert torch.equal(first, torch.full((4,), 3.0)) and torch.equal(eager, torch.full((4,), 7.0))
    assert torch.equal(second, torch.full((4,), 3.0))  # the program compiled for a wrote a's values for b
    # the correct class's __eq__ tells them apart: the program compiles again for b
    torch._dynamo.reset()
    good = torch.zeros(4)
    program(key, libops.KVScale(2.0, 1.0), torch.zeros(4))
    program(key, libops.KVScale(2.0, 5.0), good)
    assert torch.equal(good, torch.full((4,), 7.0))
    torch._dynamo.reset()


def test_the_class_an_op_takes_is_read_from_its_definition():
    assert declared_types("samples_libops::scaled_store")["s"] == f"{MOD}.KVScale"  # recorded from define
    assert declared_types("samples_libops::scaled_store")["cache"] == "Tensor(a2!)"
    # a string literal in the file that made the op's Library is read (not run) without any recording
    literal = declared_types("samples_libops::scale_query", op=torch.ops.samples_libops.scale_query.default)
    assert literal == {"q": "Tensor", "s": f"{MOD}.KVScale"}
    assert declared_types("samples_libops::nothing_like_it") == {}
    assert kernel_annotations("samples_libops::scaled_store") == {}  # its fake is unannotated, as most are


def test_ops_defined_through_library_define_are_found_with_what_they_write():
    from conformance.custom.discovery import discover_custom

    for cls in ("KVScale", "KVScaleEqIgnoresV"):
        ops = {o.qualname: o for o in discover_custom(f"{MOD}.{cls}").ops}
        assert set(ops) == {"samples_libops::scaled_store", "samples_libops::scale_query"}, ops
        assert ops["samples_libops::scaled_store"].written == ("cache",)
        assert ops["samples_libops::scale_query"].written == ()
        assert {o.found_by for o in ops.values()} == {"define"}
        assert all(o.positions == (1,) for o in ops.values())


def test_an_op_is_found_from_its_fake_kernels_annotations(tmp_path):
    """An op defined before any recording (a library a conftest imported), its schema built at run time: the
    annotations of its register_fake kernel name the class."""
    from conformance.custom.discovery import discover_custom

    lib = torch.library.Library("samples_libops_late", "FRAGMENT")
    lib.define("late" + torch.library.infer_schema(libops.scaled_store, mutates_args=("cache",)))
    lib.impl("late", libops.scaled_store, "CompositeExplicitAutograd")

    def fake(key: torch.Tensor, s: libops.KVScale, cache: torch.Tensor) -> None:
        return None

    torch.library.register_fake("samples_libops_late::late", lib=lib)(fake)
    try:
        op = next(o for o in discover_custom(f"{MOD}.KVScale").ops if o.qualname == "samples_libops_late::late")
        assert op.found_by == "fake kernel" and op.positions == (1,) and op.written == ("cache",)
    finally:
        lib._destroy()


@pytest.mark.process
def test_the_gate_has_an_item_for_every_op_and_catches_the_stale_out_variant(pytester):
    result = run_inprocess(pytester, f"--torchbind-load={MOD}", f"--torchbind-class={MOD}.KVScale",
                           f"--torchbind-class={MOD}.KVScaleEqIgnoresV", "--torchbind-backends=eager,inductor",
                           "-p", "no:randomly", "-rA")
    out = result.stdout.str()
    for cls in ("KVScale", "KVScaleEqIgnoresV"):
        for item in ("fake_kernel", "guards", "recompiles"):
            for op in ("scaled_store", "scale_query"):
                assert f"torchbind[py:{MOD}.{cls}]::{item}[{op}]" in out, (cls, item, op)
    failed = sorted(line.split()[1] for line in out.splitlines() if line.startswith("FAILED "))
    assert failed == [f"torchbind[py:{MOD}.KVScaleEqIgnoresV]::guards[scaled_store]",
                      f"torchbind[py:{MOD}.KVScaleEqIgnoresV]::matrix[scaled_store-eager]",
                      f"torchbind[py:{MOD}.KVScaleEqIgnoresV]::matrix[scaled_store-inductor]"], out[-6000:]
    # the verdict names the field and shows what the op wrote, eager against the compiled program
    assert "KVScaleEqIgnoresV.__eq__ ignores 'v_scale'" in out
    assert "'cache (written)': tensor([1., 3., 5., 7.])}  (stale)" in out


def test_plain_torch_inductor_reads_an_argument_the_op_writes_without_declaring_it():
    def program(key, layer, cache, op):
        op(key, layer, cache)
        return cache * 1

    key, layer = torch.arange(4.0), libops.CacheLayer(2)
    for name, stale in (("store_undeclared", True), ("store_declared", False)):
        op = getattr(torch.ops.samples_libops, name)
        eager = program(key, layer, torch.zeros(4), op)
        assert eager.tolist() == [2.0, 3.0, 4.0, 5.0]
        torch._dynamo.reset()
        try:
            compiled = torch.compile(program, backend="inductor", fullgraph=True)(key, layer, torch.zeros(4), op)
        finally:
            torch._dynamo.reset()
        # undeclared: inductor takes cache as unchanged and computes cache * 1 from the zeros it was given
        assert compiled.tolist() == ([0.0] * 4 if stale else eager.tolist()), (name, compiled)


def test_an_op_writing_an_undeclared_argument_fails_fake_kernel_naming_it():
    from conformance.core.results import Status
    from conformance.core.settings import Settings
    from conformance.runner import run_class
    from conftest import engine_of

    outcomes = {o.target: o for o in run_class(f"{MOD}.CacheLayer", only={"fake_kernel"},
                                               engine=engine_of(None, Settings(examples=5)))}
    assert outcomes["store_declared"].status is Status.PASSED, outcomes["store_declared"].render()
    bad = outcomes["store_undeclared"]
    assert bad.status is Status.FAILED
    [failure] = bad.failures
    assert failure.rule == "fake_kernel.undeclared-mutation"
    assert failure.summary.startswith("samples_libops::store_undeclared changes its argument 'cache' in place, but "
                                      "its schema does not declare it written")
    assert "'Tensor(a!) cache' in a Library.define schema or mutates_args=('cache',)" in failure.summary
    [detail] = failure.details  # what the argument held before the call and after (drawn arguments here)
    assert detail.startswith("cache: tensor(") and " before the call, tensor(" in detail and detail.endswith(" after")
    assert "print('arguments changed by the call:', changed)" in failure.repro
