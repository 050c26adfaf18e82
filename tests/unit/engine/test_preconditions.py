"""Real classes, real inputs: classes whose methods and ops have preconditions get verdicts that match plain torch.

``samples_inputs::PagedCache`` (csrc/samples_inputs.cpp) checks its inputs (a block of its block size, an index
within its length, a 1-d int64 ``gather`` index), has a raw-pointer method that crashes on any made-up int, an
``__eq__`` bound with an untyped self, and a method returning ``torch::empty``; ``samples_inputs::RealEngine``'s
``tracing_mode()`` returns ``"real"``. The adopter's examples and strategies are in
``sample_classes/adopter_inputs.py`` (public API only). Every verdict is pinned, and each rule a check enforces
is shown failing in plain torch (a compiled program or a fakified call) next to it.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch
from hypothesis import strategies as st
from torch._library.fake_class_registry import maybe_to_fake_obj
from torch._subclasses.fake_tensor import FakeTensorMode

import conformance
from conformance.matrix.torchbind.run import run_cell
from conformance.core.names import CHECK_NAMES
from conformance.core.registry import REGISTRY
from conformance.runner import Engine, plan, run_target
from conformance.core.settings import Settings
from conftest import engine_of

CACHE, ENGINE = "samples_inputs::PagedCache", "samples_inputs::RealEngine"


@pytest.fixture(scope="module")
def inputs():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library
    import sample_classes.fakes_inputs  # noqa: F401 - registers the fakes

    return sample_classes.fakes_inputs


@pytest.fixture
def adopter(inputs):
    """An engine whose registry holds exactly what sample_classes/adopter_inputs.py registers."""
    return engine_of(lambda: importlib.reload(importlib.import_module("sample_classes.adopter_inputs")))


@pytest.fixture
def generated(inputs):
    """An engine with the adopter's exclusion of the raw-pointer method only: every other argument generated. It
    reads the process's registry, emptied for the test: what the test registers reaches it."""
    with REGISTRY.scratch():
        conformance.strategy(CACHE, "exec_rawptr")(lambda: None)
        yield Engine(Settings(examples=10))  # every generated call is rejected: more examples find nothing new


def outcomes(engine, qualname, only=None):
    return {(o.check, o.target): o for o in (run_target(u, engine) for u in plan(qualname, engine, only=only))}


def cache(*blocks: float, size: int = 3):
    c = torch.classes.samples_inputs.PagedCache(size, 2)
    for v in blocks:
        c.append(torch.full((size,), v))
    return c


# ----- the argument source --------------------------------------------------------------------------------------


def test_generated_arguments_that_cpp_rejects_compare_nothing_and_skip(generated):
    got = outcomes(generated, CACHE, only={"agreement", "return_type", "custom_op", "differential"})
    for key in [("agreement", "append"), ("agreement", "get"), ("return_type", "get"), ("custom_op", "gather")]:
        outcome = got[key]
        assert outcome.status == "skipped", (key, outcome.render())
        assert "nothing was compared" in outcome.reason and "C++ raised on all" in outcome.reason
        assert f"@conformance.strategy({CACHE!r}, " in outcome.reason
    assert got[("agreement", "size")].status == "passed"  # C++ accepts size() anywhere: a real comparison
    # Nothing calls the excluded raw-pointer method (calling it with a generated int crashes this process).
    assert got[("agreement", "exec_rawptr")].status == "skipped"
    assert "excluded by conformance.strategy" in got[("agreement", "exec_rawptr")].reason


def test_the_adopters_strategies_reach_every_caller_and_the_class_passes(adopter):
    got = outcomes(adopter, CACHE, only={"examples", "coverage", "signature", "agreement", "return_type",
                                         "custom_op", "flatten", "roundtrip", "deepcopy", "differential"})
    bad = {k: o.render() or o.reason for k, o in got.items()
           if o.status == "failed" or (o.status == "skipped" and k[1] != "exec_rawptr")}
    assert bad == {}
    # The excluded method is out of the gate: every item of it skips, coverage and signature included (a new
    # user's signature item failed on a method they had excluded).
    for check in ("coverage", "signature", "agreement", "return_type"):
        assert got[(check, "exec_rawptr")].status == "skipped", check
        assert got[(check, "exec_rawptr")].reason == (
            f"exec_rawptr is excluded by conformance.strategy({CACHE!r}, 'exec_rawptr') returning None: nothing "
            "calls it and no check judges it")


def test_a_strategy_may_depend_on_the_object(adopter):
    ctx = adopter.context(CACHE)
    from conformance.torchbind.calls import Callee

    by_state = {ex.label: [c.code() for c in ctx.calls_of(Callee.method("get"), example=ex)]
                for ex in ctx.require_examples()}
    assert by_state["caches()[0]"] == []  # an empty cache: no valid index (st.nothing())
    assert set(by_state["caches()[1]"]) == {"obj.get(0)"}
    assert set(by_state["caches()[2]"]) == {"obj.get(0)", "obj.get(1)"}
    # The same draws on every run: derandomized.
    assert by_state == {ex.label: [c.code() for c in ctx.calls_of(Callee.method("get"), example=ex)]
                        for ex in ctx.require_examples()}


def test_fixed_draws_are_the_same_every_run():
    from conformance.engine.arguments import draw_fixed

    drawn = draw_fixed(st.integers(0, 1000), 3, "some callee")
    assert len(set(drawn)) == 3 and drawn == draw_fixed(st.integers(0, 1000), 3, "some callee")
    assert draw_fixed(st.nothing(), 3, "some callee") == []
    assert draw_fixed(st.integers(0, 1000).filter(lambda _: False), 3, "some callee") == []


def test_the_constructor_takes_the_adopters_strategy_too(generated):
    conformance.strategy(CACHE, "__init__")(lambda: st.sampled_from(["3", "4, capacity=1"]))
    ctx = generated.context(CACHE)
    assert {e.label for e in ctx.require_examples() if not e.steps} == {"PagedCache(3)",
                                                                       "PagedCache(4, capacity=1)"}


def test_the_differential_applies_only_steps_cpp_accepts(adopter):
    from conformance.torchbind.differential import run_differential

    run = run_differential(adopter.context(CACHE), examples=30)
    assert run.drift is None and run.compared > 0
    assert "exec_rawptr: not driven, excluded by conformance.strategy" in run.plan.notes


# ----- the validity rule, with plain torch beside each verdict --------------------------------------------------


def _compile_gather(c, idx, backend="eager"):
    fn = torch.compile(lambda c, idx: torch.ops.samples_inputs.gather(idx, c), backend=backend, fullgraph=True)
    torch._dynamo.reset()
    return fn(c, idx)


def test_an_op_fake_that_only_raises_fails_where_cpp_accepts(adopter, inputs):
    with inputs.BROKEN["gather_not_implemented"].installed():
        with pytest.raises(Exception, match=r"got NotImplementedError\('gather has no fake implementation yet'\)"):
            _compile_gather(cache(1.0, 2.0), torch.tensor([1, 0]))  # plain torch: the program cannot compile
        outcome = outcomes(adopter, CACHE, only={"custom_op"})[("custom_op", "gather")]
    assert outcome.status == "failed"
    [failure] = outcome.failures
    assert failure.rule == "custom_op.fake-raises"
    assert failure.fake.startswith("raised NotImplementedError: gather has no fake implementation yet")


def test_an_op_fake_that_only_raises_is_not_green_on_rejected_inputs(generated, inputs):
    # Before the validity rule "both raised" counted as agreement: a false green.
    with inputs.BROKEN["gather_not_implemented"].installed():
        outcome = outcomes(generated, CACHE, only={"custom_op"})[("custom_op", "gather")]
    assert outcome.status == "skipped" and "nothing was compared" in outcome.reason


def test_an_op_without_a_python_fake_fails_whatever_the_inputs(generated, inputs):
    with inputs.BROKEN["gather_no_fake"].installed():
        with pytest.raises(Exception):
            _compile_gather(cache(1.0), torch.tensor([0]))  # plain torch: no kernel can take a FakeScriptObject
        outcome = outcomes(generated, CACHE, only={"custom_op"})[("custom_op", "gather")]
    assert outcome.status == "failed"
    assert outcome.failures[0].rule == "custom_op.no-fake"


def test_op_fake_strides_are_compared_on_accepted_calls(adopter, inputs):
    with inputs.BROKEN["gather_transposed"].installed():
        outcome = outcomes(adopter, CACHE, only={"custom_op"})[("custom_op", "gather")]
    assert outcome.status == "failed"
    assert any(d.startswith("result.stride: C++ [3, 1], fake [1,") for d in outcome.failures[0].details)


def test_a_backward_op_whose_precondition_spans_two_arguments(adopter, generated, inputs):
    c, idx = cache(1.0, 2.0), torch.tensor([1, 1])
    with pytest.raises(RuntimeError, match=r"expected a float32 grad of shape \[2, 3\]"):
        torch.ops.samples_inputs.gather_backward(torch.ones(2, 2), idx, c)  # plain torch: the precondition
    assert torch.ops.samples_inputs.gather_backward(torch.ones(2, 3), idx, c).tolist()[1] == [2.0, 2.0, 2.0]
    skipped = outcomes(generated, CACHE, only={"custom_op"})[("custom_op", "gather_backward")]
    assert skipped.status == "skipped" and "nothing was compared" in skipped.reason
    assert outcomes(adopter, CACHE, only={"custom_op"})[("custom_op", "gather_backward")].status == "passed"
    with inputs.BROKEN["gather_backward_per_index"].installed():
        outcome = outcomes(adopter, CACHE, only={"custom_op"})[("custom_op", "gather_backward")]
    assert outcome.status == "failed"
    assert any(d.startswith("result.shape: C++ [") for d in outcome.failures[0].details)


def test_a_fake_accepting_what_cpp_rejects_is_noted_not_failed(inputs):
    def register():
        conformance.strategy(CACHE, "exec_rawptr")(lambda: None)
        conformance.strategy(CACHE, "append", arg=0)(lambda: st.sampled_from(["torch.ones(3)", "torch.ones(5)"]))

    with inputs.BROKEN["cache_append_accepts_anything"].installed():
        outcome = outcomes(engine_of(register), CACHE, only={"agreement"})[("agreement", "append")]
    assert outcome.status == "passed"
    [note] = outcome.notes
    assert note.startswith("the fake returns where C++ raises on")
    assert ": C++ raised RuntimeError: PagedCache.append: expected a float32 block of shape [" in note
    assert note.endswith("; the fake returned None")


def test_a_field_swapping_unflatten_fails_the_method_that_reads_the_fields(adopter, inputs):
    bf = inputs.BROKEN["cache_unflatten_swapped"]
    with bf.installed():
        # Plain torch: the fakified object answers block_numel() with the capacity.
        c = cache(1.0)
        fake = maybe_to_fake_obj(FakeTensorMode(), c)
        assert (c.block_numel(), fake.block_numel()) == (3, 2)
        got = outcomes(adopter, CACHE, only={"roundtrip", "agreement"})
    # the method whose result differs fails; roundtrip names the cause in a note (torch itself reads neither
    # int field of the fake: only tensors and SymInts)
    assert got[("agreement", "block_numel")].status == "failed"
    outcome = got[("roundtrip", None)]
    assert outcome.status == "passed"
    [note] = [n for n in outcome.notes if "hold no tensor" in n]
    assert "swapped: 'block_size' and 'capacity'" in note or "swapped: 'capacity' and 'block_size'" in note, note
    assert "block_size: C++ flattened 3, the fake keeps 2" in note and "capacity: C++ flattened 2, the fake keeps 3" in note


# ----- binding patterns -----------------------------------------------------------------------------------------


def test_an_untyped_self_method_belongs_to_its_class(adopter):
    info = adopter.context(CACHE).info
    assert str(info.methods["__eq__"]).startswith("__eq__(Any _0, Any _1) -> bool")
    assert "__eq__" not in info.static_methods
    for other in ("samples_patterns::Versioned", "samples::TensorQueue"):
        assert "__eq__" not in adopter.context(other).info.static_methods
    got = outcomes(adopter, CACHE, only={"coverage", "agreement"})
    assert got[("coverage", "__eq__")].status == "passed" and got[("agreement", "__eq__")].status == "passed"


def test_signature_accepts_any_anywhere_in_a_fake_annotation(adopter, inputs):
    from sample_classes.broken import BrokenFake, _variant

    def get(self, i: int) -> Any:
        return self.blocks[i].clone()

    def scratch(self, n: int) -> list[Any]:
        return [torch.empty(n, self.block_size)]

    loose = _variant(inputs.FakePagedCache, "FakePagedCacheLoose", get=get, scratch=scratch)
    with BrokenFake("loose", CACHE, "signature", "get", "-", loose).installed():
        got = outcomes(adopter, CACHE, only={"signature"})
    assert got[("signature", "get")].status == "passed"  # Any where C++ says Tensor: torch never reads it
    assert got[("signature", "scratch")].status == "failed"  # a list where C++ returns a Tensor is a wrong contract
    assert "return: annotated List[Any], C++ returns Tensor" in got[("signature", "scratch")].failures[0].details


def test_tracing_mode_real_skips_what_needs_a_fake_and_runs_the_rest(inputs):
    real = torch.classes.samples_inputs.RealEngine(2)
    # Plain torch: with tracing_mode() == "real" fakification hands back the real object; the fake is never used.
    assert maybe_to_fake_obj(FakeTensorMode(), real) is real
    engine = engine_of()  # an engine with an empty registry
    # Every check but the matrix, whose cell that shows the rule runs below (the others, through inductor and
    # AOTInductor, would compile for nothing this test asserts).
    got = outcomes(engine, ENGINE, only=set(CHECK_NAMES) - {"matrix"})
    for key in [("roundtrip", None), ("coverage", "run"), ("signature", "scale"), ("agreement", "run"),
                ("return_type", "scale"), ("extra_methods", None), ("differential", None)]:
        assert got[key].status == "skipped", key
        assert got[key].reason.startswith(f'{ENGINE}.tracing_mode() returns "real": torch traces with the real')
    for key in [("fake_class", None), ("flatten", None), ("tracing_mode", None), ("deepcopy", None)]:
        assert got[key].status == "passed", key
    # The matrix runs: a compiled program burns in what the real object returned while tracing.
    cell = run_cell(engine.context(ENGINE), "scale", "eager")
    assert cell.status == "failed"
    assert cell.reason == ("run 1 output[0] (r0 = obj.scale(), on an object in another state): eager 1 (int), "
                           "torch.compile eager 2 (int); eager on an object in the traced state gives 2 (int): it "
                           "stayed at the traced object's value")


def test_uninitialised_outputs_are_compared_by_metadata_and_the_cell_says_so(adopter):
    c = cache()
    assert c.scratch(2).shape == (2, 3)  # torch::empty: its values are whatever memory held
    cell = run_cell(adopter.context(CACHE), "scratch", "eager")
    # Compared by metadata, scratch(2) is the same on every example cache (block size 3): the cell cannot tell a
    # stale program, so it is not a pass.
    assert cell.status == "untold", cell.reason
    assert any("its values differ between two identical eager runs" in d and
               "compared by shape, dtype and device only" in d for d in cell.details), cell.details


def test_uninitialised_outputs_are_found_whatever_earlier_scenarios_left_in_freed_memory(adopter):
    # Freed blocks of this size left holding one value (an earlier cell's poisoning, or a real tensor's values):
    # with a fixed poison marker both eager runs once read the same leftover, agreed, and the output was held to
    # its values, so a compiled run that got other memory failed the cell (seen once in CI). torch's own fill of
    # uninitialised memory now takes part, and the poison never repeats what a run read.
    from conformance.matrix.torchbind.run import ROWS

    ctx = adopter.context(CACHE)
    for i in range(300):
        leftover = (float("nan"), -9.87654e5, 7.65432e5, 1.0, 0.0)[i % 5]
        held = [torch.full((2, 3), leftover) for _ in range(1 + i % 12)]
        del held
        scn = ROWS.scenario(ctx, "scratch")
        scn.__dict__.pop("reference", None)  # made afresh, from the memory just left
        assert scn.reference.unstable == {"run 0 output[0]", "run 1 output[0]"}, (i, leftover)
    assert not torch.are_deterministic_algorithms_enabled()  # torch's fill was on for one run only


def test_inductor_rerunning_a_state_changing_fake_is_a_limitation(adopter):
    cell = run_cell(adopter.context(CACHE), "evict_oldest", "inductor")
    assert (cell.status, cell.limitation) == ("unsupported", "inductor-reruns-fake-method")
    assert cell.details[0].startswith("InductorError: RuntimeError: PagedCache.evict_oldest: the cache is empty")
    # The same program through aot_eager (no lowering) reproduces eager: the fake is right.
    assert run_cell(adopter.context(CACHE), "evict_oldest", "aot_eager").status == "passed"
