"""Stale results in the coverage matrix: a program traced with one object is also run with an object in another
state, chosen so that eager's output changes, and a failed cell explains itself.

``samples_stale::Vocab`` (csrc/samples_stale.cpp) returns its default index for an unknown token
(``vocab["zz"]``, ``get_default_index()``): an int, which torch.export burns into the program as a constant.
Each verdict is pinned beside the plain-torch lines that show what it predicts. Only the backends a test needs
are compiled (``eager``: torch.compile's eager backend, and non-strict ``export``; no inductor).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import strategies as st
from torch._library.fake_class_registry import maybe_to_fake_obj
from torch._subclasses.fake_tensor import FakeTensorMode

import conformance
from conformance.matrix.backends import Backend, get_backend
from conformance.matrix.cell import cell_skip_reason
from conformance.matrix.torchbind.run import run_cell
from conformance.matrix.torchbind.repro import cell_repro
from conformance.matrix.torchbind.rows import scenario
from conformance.runner import plan, run_target
from conftest import engine_of

VOCAB = "samples_stale::Vocab"
ITEM = "torchbind[samples_stale.Vocab]"


@pytest.fixture(scope="module")
def stale():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library
    import sample_classes.fakes_stale

    return sample_classes.fakes_stale


@pytest.fixture(scope="module")
def engine(stale):
    return engine_of()  # generated examples: Vocab(['a', 'bc'], 2), Vocab([], 1), ... and derived states


def vocab(default: int, tokens=("a", "bc")):
    return torch.classes.samples_stale.Vocab(list(tokens), default)


class GetItem(torch.nn.Module):
    def forward(self, obj):
        return (obj["zz"],)


# ----- 1. a second object whose eager output differs; both numbers shown -----------------------------------------


def test_export_keeps_the_traced_default_and_the_cell_shows_both_numbers(engine):
    # Plain torch: exported with default index 2, the program returns 2 for a vocabulary whose default is 1.
    ep = torch.export.export(GetItem(), (vocab(2),), strict=False)
    assert GetItem()(vocab(1)) == (1,)
    assert ep.module()(vocab(1)) == (2,)
    # torch.compile guards on the flattened state (default_index is in it) and follows the object.
    compiled = torch.compile(lambda obj: obj.get_default_index(), backend="eager", fullgraph=True)
    assert (compiled(vocab(2)), compiled(vocab(1))) == (2, 1)

    ctx = engine.context(VOCAB)
    scn = scenario(ctx, "operator.getitem")
    # The row's objects were chosen so that eager's output changes: the traced object's value differs from run 1's.
    assert scn.telling and scn.reference.traced[1] != scn.reference.outputs[1]
    traced_value, other_value = scn.reference.traced[1][0], scn.reference.outputs[1][0]
    # The same two objects through plain torch.export: the program returns the traced object's value.
    (label,) = scn.output_labels
    program = scn.module_class()
    exported = torch.export.export(program, (scn.first.build(),), strict=False).module()
    assert exported(scn.second.build()) == (traced_value,) != program(scn.second.build())

    cell = run_cell(ctx, "operator.getitem", "export")
    assert (cell.status, cell.limitation) == ("unsupported", "burned-in-constants")
    assert cell.details[0] == (
        f"run 1 output[0] ({label}, on an object in another state): eager {other_value} (int), export "
        f"{traced_value} (int); eager on an object in the traced state gives {traced_value} (int): it stayed at the "
        "traced object's value")
    # torch.compile recompiles for run 1's object, then keeps its value for the further example objects once
    # automatic dynamic shapes made the index dynamic (tests/unit/matrix/test_matrix_sweep.py)
    cell = run_cell(ctx, "get_default_index", "eager")
    assert (cell.status, cell.limitation) == ("unsupported", "automatic-dynamic-stale-result"), cell.details


def test_a_program_that_keeps_the_traced_value_is_never_a_pass(engine):
    """torch.compile backends have no burn-in limitation: a stale value there is a failure, saying so."""
    def keeps_first_result(scn, module, args):
        kept = []

        def run(*a):
            out = module(*a)
            kept.append(out)
            return kept[0]

        return run

    cell = run_cell(engine.context(VOCAB), "get_default_index", Backend("keeps", "test", "keeps", keeps_first_result))
    assert (cell.status, cell.limitation, cell.found) == ("torch-defect", None, "matrix.stale-result")
    assert cell.reason.endswith("(int): it stayed at the traced object's value"), cell.reason
    assert cell.reason.startswith("run 1 output[0] (r0 = obj.get_default_index(), on an object in another state): ")


def test_no_object_that_changes_the_output_means_the_cell_cannot_tell(stale):
    def same_default():  # two vocabularies with the same default index: get_default_index() gives 5 on both
        conformance.examples(VOCAB, derive=False)(lambda: [vocab(5), vocab(5, tokens=("x",))])

    ctx = engine_of(same_default).context(VOCAB)
    scn = scenario(ctx, "get_default_index")
    assert not scn.telling and scn.reference.outputs == [(5,), (5,)]
    # Plain torch: the exported program bakes 5 in, which no object the adopter gave can tell from following it.
    ep = torch.export.export(scn.module_class(), (vocab(5),), strict=False)
    assert ep.module()(vocab(5, tokens=("x",))) == (5,) and ep.module()(vocab(7)) == (5,)
    # Not a pass: a program that baked the traced object in would have passed too. The cell says what to give.
    cell = run_cell(ctx, "get_default_index", "export")
    assert cell.status == "untold"
    assert "so this cell cannot tell a program that follows the object from one that holds the first object " \
           "baked in" in cell.reason and "@conformance.examples" in cell.reason, cell.reason
    assert cell_skip_reason(cell).startswith("could not tell: no example object gives this program another eager")


class HoldsVocab(torch.nn.Module):
    def __init__(self, obj):
        super().__init__()
        self.obj = obj

    def forward(self, ids):
        return (self.obj.get_default_index(), self.obj.lookup(ids))


def _read_only():  # set_default_index left out: the attribute rows only read the object
    conformance.strategy(VOCAB, "set_default_index")(lambda: None)


def test_an_attribute_program_read_twice_is_run_again_with_the_attribute_swapped(stale):
    # Plain torch: a program holding the vocabulary as an attribute, set to another one after compiling. torch.compile
    # follows the new object; the exported program keeps the traced default index (an int burned in) while its
    # tensor result follows. Running the same object twice could show neither.
    ids = torch.tensor([0, 7])
    compiled_module = HoldsVocab(vocab(2))
    compiled = torch.compile(compiled_module, backend="eager", fullgraph=True)
    assert compiled(ids)[0] == 2
    compiled_module.obj = vocab(1, tokens=())
    assert compiled(ids)[0] == 1
    exported = torch.export.export(HoldsVocab(vocab(2)), (ids,), strict=False).module()
    exported.obj = vocab(1, tokens=())
    default, looked_up = exported(ids)
    assert default == 2 and looked_up.tolist() == [1, 1]  # eager: (1, [1, 1])

    ctx = engine_of(_read_only).context(VOCAB)
    scn = scenario(ctx, "sequence.attr")
    assert "set_default_index" not in scn.code() and scn.placement == "attr"
    assert scn.swap and scn.telling and scn.second is not scn.first
    assert "# run 1: the program's attribute set to the object\n" in scn.code()
    assert run_cell(ctx, "sequence.attr", "eager").status == "passed"
    cell = run_cell(ctx, "sequence.attr", "export")
    assert (cell.status, cell.limitation) == ("unsupported", "burned-in-constants"), cell.reason
    # A failed cell's reproducer swaps the attribute of the program it built, as the cell did.
    script = cell_repro(ctx, scn, get_backend("export"))
    assert "            obj = make_second()\n            program.obj = obj\n" in script
    compile(script, "<reproducer>", "exec")


def test_a_program_that_ignores_the_swapped_attribute_fails_and_a_backend_that_cannot_swap_cannot_tell(stale):
    def keeps_traced(scn, module, args):  # a new program holding the traced object: the swap never reaches it
        program = scn.module(module.obj)
        return lambda *inputs: program(*inputs)

    ctx = engine_of(_read_only).context(VOCAB)
    cell = run_cell(ctx, "sequence.attr", Backend("keeps", "test", "keeps", keeps_traced))
    assert (cell.status, cell.found) == ("torch-defect", "matrix.stale-result"), cell.reason
    assert "it stayed at the traced object's value" in cell.reason
    # A backend that runs its own copy of the attribute (AOTInductor) runs the object again: not a pass.
    copies = Backend("copies", "test", "copies", keeps_traced, ahead_of_time=True, state_visible=False,
                     swaps_attribute=False)
    cell = run_cell(ctx, "sequence.attr", copies)
    assert cell.status == "untold", (cell.status, cell.reason)
    assert cell.reason.startswith("copies runs its own copy of the program's attribute object (no other object can be "
                                  "given to the program, and the same object run again gives eager the traced "
                                  "object's output)"), cell.reason
    assert "# run 1: the same object again" in cell.program


# ----- 2. the dynamic row starts from sizes torch does not specialise ---------------------------------------------


class Lookup(torch.nn.Module):
    def forward(self, obj, ids):
        return obj.lookup(ids)


def test_dynamic_row_starts_at_size_two(stale):
    # Plain torch: Dim.AUTO on a size-1 dim specialises it (hint = 1), and the program refuses size 2.
    auto = {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO}
    ep = torch.export.export(Lookup(), (vocab(2), torch.ones(1, 3)), dynamic_shapes=(None, auto), strict=False)
    with pytest.raises(Exception, match=r"size\(\)\[0\]|Expected input at .*shape\[0\] to be equal to 1"):
        ep.module()(vocab(2), torch.ones(2, 3))
    # From size 2, the same export runs on size 4.
    ep = torch.export.export(Lookup(), (vocab(2), torch.ones(2, 3)), dynamic_shapes=(None, auto), strict=False)
    assert ep.module()(vocab(2), torch.ones(4, 3)).shape == (4, 3)

    def batch_of_one():  # the adopter's lookup ids have batch size 1
        conformance.strategy(VOCAB, "lookup", arg=0)(lambda: st.just("torch.tensor([[0.0, 1.0, 5.0]])"))

    ctx = engine_of(batch_of_one).context(VOCAB)
    scn = scenario(ctx, "dynamic")
    assert "obj.lookup(x0)" in scn.source
    first, second = scn.inputs(0), scn.inputs(1)
    assert [tuple(t.shape) for t in first] == [(2, 3)] and [tuple(t.shape) for t in second] == [(3, 3)]
    assert scn.dynamic_shapes()[1] == auto
    cell = run_cell(ctx, "dynamic", "export")
    # No guard failure: what remains is the default index the program reads (burned in, the known limitation).
    assert (cell.status, cell.limitation) == ("unsupported", "burned-in-constants"), (cell.reason, cell.details)
    cell = run_cell(ctx, "dynamic", "eager")  # torch.compile: the further objects meet automatic dynamic
    assert (cell.status, cell.limitation) == ("unsupported", "automatic-dynamic-stale-result"), cell.details


# ----- 3. a failure that follows from a fake's wrong result names the item -----------------------------------------


def test_a_cell_failing_because_of_the_fake_names_the_agreement_item(stale):
    engine = engine_of()  # its own contexts: nothing cached from the correct fake's cells
    with stale.BROKEN["vocab_constant_default"].installed():
        # Plain torch: the fakified object returns 0 where C++ returns 2, and torch.compile burns that 0 in.
        real = vocab(2)
        with FakeTensorMode() as mode:
            fake = maybe_to_fake_obj(mode, vocab(2))
            assert torch.ops.higher_order.call_torchbind(fake, "get_default_index") == 0
        assert real.get_default_index() == 2
        torch._dynamo.reset()
        compiled = torch.compile(lambda obj: obj.get_default_index(), backend="eager", fullgraph=True)
        assert compiled(vocab(2)) == 0
        torch._dynamo.reset()

        ctx = engine.context(VOCAB)
        agreement = next(u for u in plan(VOCAB, engine, only={"agreement"}) if u.target == "get_default_index")
        outcome = run_target(agreement, engine)
        assert outcome.status == "failed"
        item = f"{ITEM}::agreement[get_default_index]"
        cell = run_cell(ctx, "get_default_index", "eager")
        assert (cell.status, cell.rule) == ("failed", "matrix.follows-from-fake")
        assert cell.reason.endswith(f"(follows from the fake's wrong result, see {item})"), cell.reason
        assert cell.details[0] == (f"this follows from the fake's wrong result, see {item}: obj.get_default_index() on "
                                   "an object in the traced state: C++ returned 2, fake returned 0")
        assert item == f"{ITEM}::{agreement.name}"  # the id the plugin gives the agreement item
        # The matrix item reports the cell with its rule (what tools match on, not the reason's prose).
        [unit] = [u for u in plan(VOCAB, engine, only={"matrix"}, backends=["eager"])
                  if u.target.row == "get_default_index"]
        verdict = run_target(unit, engine)
        assert [f.rule for f in verdict.failures] == ["matrix.follows-from-fake"]
        assert verdict.cell.rule == "matrix.follows-from-fake" and verdict.cell.reason == cell.reason


class LookupOnly(torch.nn.Module):
    def forward(self, obj, ids):
        return (obj.lookup(ids),)


@pytest.mark.process  # one inductor compile: runs the C++ compiler
def test_an_inductor_error_from_a_wrong_fake_shape_names_the_agreement_item(stale):
    engine = engine_of()
    with stale.BROKEN["vocab_lookup_scalar"].installed():
        # Plain torch: the fake returns shape [] where C++ returns [2, 3]; inductor's code asserts the fake's shape.
        ids = torch.arange(6.0).reshape(2, 3)
        with FakeTensorMode() as mode:
            fake = maybe_to_fake_obj(mode, vocab(2))
            assert torch.ops.higher_order.call_torchbind(fake, "lookup", mode.from_tensor(ids)).shape == ()
        assert vocab(2).lookup(ids).shape == (2, 3)
        torch._dynamo.reset()
        with pytest.raises(Exception, match="wrong number of dimensions"):
            torch.compile(LookupOnly(), backend="inductor", fullgraph=True)(vocab(2), ids)
        torch._dynamo.reset()

        agreement = next(u for u in plan(VOCAB, engine, only={"agreement"}) if u.target == "lookup")
        assert run_target(agreement, engine).status == "failed"
        item = f"{ITEM}::{agreement.name}"
        cell = run_cell(engine.context(VOCAB), "lookup", "inductor")
        assert (cell.status, cell.limitation, cell.rule) == ("failed", None, "matrix.follows-from-fake")
        assert "wrong number of dimensions" in cell.reason
        assert cell.reason.endswith(f"(follows from the fake's wrong result, see {item})"), cell.reason
        assert cell.details[0].startswith(f"this follows from the fake's wrong result, see {item}: obj.lookup(")
        assert "result.shape: C++ [2, 3], fake []" in cell.details[0]


def test_a_state_difference_names_the_flattened_key(engine):
    """A program run on a copy of the object leaves the object as it was: the cell names the __obj_flatten__ key
    and both values, not a bare position."""
    import copy

    def on_a_copy(scn, module, args):
        def run(*a):
            return module(*(copy.deepcopy(x) if isinstance(x, torch.ScriptObject) else x for x in a))

        return run

    # Plain torch: set_default_index on a copy leaves the object's default index alone.
    obj = vocab(1)
    copy.deepcopy(obj).set_default_index(2)
    assert obj.get_default_index() == 1
    cell = run_cell(engine.context(VOCAB), "set_default_index", Backend("copying", "test", "copying", on_a_copy))
    assert (cell.status, cell.found) == ("torch-defect", "matrix.state-differs")
    assert cell.reason.startswith("run 1 object state 'default_index': eager left "), cell.reason
    assert ", copying left " in cell.reason and "(int)" in cell.reason


def test_a_fake_wrong_only_in_the_second_state_is_named_for_torch_compile(stale):
    """The broken fake returns 0, right for a vocabulary whose default is 0, wrong for one whose default is 3:
    torch.compile traces again for the second object (its guard on the flattened state fails) and burns the
    fake's 0 in, which looks like a stale value; the cell names the agreement item instead of blaming a guard."""
    def defaults():
        conformance.examples(VOCAB, derive=False)(lambda: [vocab(0), vocab(3)])

    engine = engine_of(defaults)
    with stale.BROKEN["vocab_constant_default"].installed():
        # Plain torch: the recompiled program returns the fake's 0 for the second vocabulary.
        torch._dynamo.reset()
        compiled = torch.compile(lambda obj: obj.get_default_index(), backend="eager", fullgraph=True)
        assert (compiled(vocab(0)), compiled(vocab(3))) == (0, 0)
        torch._dynamo.reset()
        cell = run_cell(engine.context(VOCAB), "get_default_index", "eager")
        assert (cell.status, cell.rule) == ("failed", "matrix.follows-from-fake")
        assert cell.reason.startswith("run 1 output[0] (r0 = obj.get_default_index(), on an object in another "
                                      "state): eager 3 (int), torch.compile eager 0 (int)"), cell.reason
        assert cell.reason.endswith(f"(follows from the fake's wrong result, see {ITEM}::agreement[get_default_index])")
        assert cell.details[0].endswith("obj.get_default_index() on the second run's object: C++ returned 3, fake "
                                        "returned 0")
        # Export traces once, on the first object, where the fake is right: the burned-in limitation, no pointer.
        export = run_cell(engine.context(VOCAB), "get_default_index", "export")
        assert (export.status, export.limitation) == ("unsupported", "burned-in-constants")
        assert not any("follows from the fake's wrong result" in d for d in export.details)


@pytest.mark.process  # two inductor compiles: runs the C++ compiler
def test_torchs_own_tensor_queue_fake_is_named_by_its_inductor_cells(torch_test_classes):
    """On a class the project did not write: torch's _TensorQueue fake pops shape [] where C++ pops [2, 3], so
    inductor fails 'wrong number of dimensions'; the method row names agreement[pop], the op row custom_op[queue_pop]
    (the items that fail for that fake)."""
    engine = engine_of()
    qualname, item = "_TorchScriptTesting::_TensorQueue", "torchbind[_TorchScriptTesting._TensorQueue]"
    units = {u.name: u for u in plan(qualname, engine, only={"agreement", "custom_op"})}
    for row, name in (("pop", "agreement[pop]"), ("op.queue_pop", "custom_op[queue_pop]")):
        assert run_target(units[name], engine).status == "failed"
        cell = run_cell(engine.context(qualname), row, "inductor")
        assert cell.status == "failed" and "wrong number of dimensions" in cell.reason, cell.reason
        assert cell.reason.endswith(f"(follows from the fake's wrong result, see {item}::{name})"), cell.reason
        assert "result.shape: C++ [2, 3], fake []" in cell.details[0]


def test_a_fake_returning_the_wrong_type_names_return_type_too(stale):
    """A fake get_default_index returning a float where the schema says int: the compiled program returns the
    float torch burned in from the fake; the cell names both items that report the fake (agreement, return_type)."""
    from sample_classes.broken import BrokenFake, _variant

    as_float = _variant(stale.FakeVocab, "FakeVocabFloatDefault", get_default_index=lambda self: float(self.default_index))
    broken = BrokenFake("vocab_float_default", VOCAB, "return_type", "get_default_index", "returns a float", as_float)
    engine = engine_of()
    with broken.installed():
        # Plain torch: the schema says int; the fake's float is what torch.compile puts in the program.
        assert str(vocab(2).get_default_index.schema.returns[0].type) == "int"
        torch._dynamo.reset()
        compiled = torch.compile(lambda obj: obj.get_default_index(), backend="eager", fullgraph=True)
        got = compiled(vocab(2))
        torch._dynamo.reset()
        assert (got, type(got)) == (2.0, float)
        units = {u.name: u for u in plan(VOCAB, engine, only={"agreement", "return_type"})}
        for name in ("agreement[get_default_index]", "return_type[get_default_index]"):
            assert run_target(units[name], engine).status == "failed", name
        cell = run_cell(engine.context(VOCAB), "get_default_index", "eager")
        assert cell.status == "failed"
        assert cell.reason.startswith("run 0 output[0] (r0 = obj.get_default_index(), on the traced object): eager 2 "
                                      "(int), torch.compile eager 2.0 (float)"), cell.reason
        assert cell.reason.endswith(f"see {ITEM}::agreement[get_default_index] and "
                                    f"{ITEM}::return_type[get_default_index])"), cell.reason


def test_a_cell_over_a_method_the_fake_lacks_points_at_coverage(stale):
    """A fake without ``top``: the agreement item skips the method, the coverage item fails it, and the cell that
    follows from it names coverage (it named the skipped agreement item)."""
    import sample_classes  # noqa: F401 - the TensorQueue library
    from sample_classes.broken import installed_broken

    with installed_broken("queue_missing_top"):
        cell = run_cell(engine_of().context("samples::TensorQueue"), "top", "eager")
    assert (cell.status, cell.rule) == ("failed", "matrix.follows-from-fake"), cell.reason
    assert cell.reason.endswith("see torchbind[samples.TensorQueue]::coverage[top])"), cell.reason


# ----- 4. a cause before the call that shows it: a setter that keeps nothing, a flatten that leaves state out ----


def test_a_setter_that_keeps_nothing_is_named_not_the_getter_after_it(stale):
    """The broken setter returns None, as C++ does, so its own result agrees; the getter after it is correct
    (agreement[get_default_index] passes) yet returns the old index: the cell names the setter's call and the
    differential item, which drives both."""
    def setter_args():  # an index other than the examples' own, so that the setter has something to keep
        conformance.strategy(VOCAB, "set_default_index", arg=0)(lambda: st.just(5))

    engine = engine_of(setter_args)
    with stale.BROKEN["vocab_setter_keeps_nothing"].installed():
        # Plain torch: compiled, the getter after the setter returns the fake's old index; eager the new one.
        torch._dynamo.reset()
        compiled = torch.compile(SetThenGet(), backend="eager", fullgraph=True)
        assert compiled(vocab(2)) == (2,) and SetThenGet()(vocab(2)) == (5,)
        torch._dynamo.reset()
        getter = next(u for u in plan(VOCAB, engine, only={"agreement"}) if u.target == "get_default_index")
        assert run_target(getter, engine).status == "passed"
        cell = run_cell(engine.context(VOCAB), "sequence.attr", "eager")
        assert (cell.status, cell.rule) == ("failed", "matrix.follows-from-fake"), (cell.status, cell.reason)
        assert cell.reason.endswith(f"(follows from the fake's wrong result, see {ITEM}::differential)"), cell.reason
        assert cell.details[0].startswith(f"this follows from the fake's wrong result, see {ITEM}::differential: "
                                          "obj.set_default_index("), cell.details[0]
        assert "returned as C++ did, but then the flattened key 'default_index': C++ flattens " in cell.details[0]


class SetThenGet(torch.nn.Module):
    def forward(self, obj):
        obj.set_default_index(5)
        return (obj.get_default_index(),)


class TickReadEnable(torch.nn.Module):
    def __init__(self, obj):
        super().__init__()
        self.obj = obj

    def forward(self):
        self.obj.tick()
        enabled = self.obj.is_enabled()
        self.obj.enable()
        return (enabled,)


def test_a_flatten_that_leaves_state_out_is_the_classs_not_torchs(stale):
    """``samples_stale::Toggle``'s C++ ``__obj_flatten__`` leaves its switch out and its fake is correct. Run again
    on the same attribute object, the program is compiled again (the flattened count changed) from a fake that
    starts disabled: the cell fails and names the class's flatten and the differential item, not torch (every
    call of the program agrees between the object and the fake that made them)."""
    # Plain torch: the second compiled run reads the new fake's False where eager reads the object's True.
    torch._dynamo.reset()
    obj, twin = torch.classes.samples_stale.Toggle(1), torch.classes.samples_stale.Toggle(1)
    compiled = torch.compile(TickReadEnable(obj), backend="eager", fullgraph=True)
    eager = TickReadEnable(twin)
    assert (compiled(), eager()) == ((False,), (False,))
    assert (compiled(), eager()) == ((False,), (True,))
    torch._dynamo.reset()
    item = "torchbind[samples_stale.Toggle]::differential"
    cell = run_cell(engine_of().context("samples_stale::Toggle"), "sequence.attr", "eager")
    assert (cell.status, cell.rule) == ("failed", "matrix.follows-from-fake"), (cell.status, cell.reason)
    assert cell.reason.endswith("(follows from the class's __obj_flatten__, which leaves out state the program's "
                                f"calls read, see {item})"), cell.reason
    assert "obj.is_enabled() on an object in the traced state, run again: C++ returned True, and so does the fake " \
           "that made the first run's calls, but a fake made from the object's flattened state after that run " \
           "(as torch.compile fakifies it when it compiles again) returned False" in cell.details[0], cell.details[0]
