"""Ops taking several objects of one class: every class-typed argument gets an object, and every object an op
received is observed afterwards.

``samples_multi::StreamGuard`` (csrc/samples_multi.cpp) is a stream guard with two ops:
``enter_compute_stream(primary, caller_guard, device)`` clears its SECOND object, and ``merge_into(dst, src)`` may
take one guard twice. Its broken fakes (sample_classes/fakes_multi.py) are the published-style fake that forgets
to clear ``caller_guard`` and a ``merge_into`` fake that is right only for two distinct guards. Each verdict is
pinned beside the plain-torch lines that show the divergence it predicts: a compiled program that calls the op and
then reads the object, against eager, and the fakified objects after the fake op under ``FakeTensorMode``.
"""

from __future__ import annotations

import pytest
import torch
from torch._library.fake_class_registry import maybe_to_fake_obj
from torch._subclasses.fake_tensor import FakeTensorMode

from conformance.torchbind.calls import Call, Callee, may_share
from conformance.torchbind.discovery import OpInfo
from conformance.engine.loading import repro_lines
from conformance.runner import plan, run_target
from conformance.core.settings import Settings
from conformance.engine.values import ArgumentSet, Value
from conftest import engine_of

GUARD = "samples_multi::StreamGuard"
SCRIPT_GUARD = "__torch__.torch.classes.samples_multi.StreamGuard"


@pytest.fixture(scope="module")
def multi():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library
    import sample_classes.fakes_multi

    return sample_classes.fakes_multi


def guard(device: int = 1, stream: int = 7, events: int = 0):
    g = torch.classes.samples_multi.StreamGuard(device, stream)
    g.record(events)
    return g


def custom_op(op: str, *load: str):
    """The custom_op verdict on ``samples_multi::<op>``, with reproducers that load ``load`` (--torchbind-load specs)."""
    lines = tuple(line for spec in ("sample_classes", "sample_classes.fakes_multi", *load) for line in repro_lines(spec))
    engine = engine_of(settings=Settings(load_code=lines))
    [unit] = [u for u in plan(GUARD, engine, only={"custom_op"}) if u.target.short_name == op]
    return run_target(unit, engine)


def enter_then_read(primary, caller_guard, x):
    torch.ops.samples_multi.enter_compute_stream(primary, caller_guard, 2)
    return x + caller_guard.stream_id()


def merge_then_read(dst, src, x):
    torch.ops.samples_multi.merge_into(dst, src)
    return x + dst.event_count()


def compiled(fn, *args):
    """``fn`` compiled with aot_eager (fullgraph), called on ``args``: the result a traced program gives."""
    torch._dynamo.reset()
    return torch.compile(fn, backend="aot_eager", fullgraph=True)(*args)


# ----- the published fake that forgets the second object ---------------------------------------------------


def test_the_published_fake_that_forgets_caller_guard_fails_naming_the_second_argument(multi):
    x = torch.zeros(2)
    with multi.BROKEN["enter_forgets_caller_guard"].installed():
        # Plain torch: eager clears caller_guard (stream 0); the compiled program read the fake's stream, 7.
        assert enter_then_read(guard(2, 2), guard(1, 7), x).tolist() == [0.0, 0.0]
        assert compiled(enter_then_read, guard(2, 2), guard(1, 7), x).tolist() == [7.0, 7.0]
        # Plain torch: the fakified caller_guard after the fake op keeps its stream; the real one is cleared.
        mode, real = FakeTensorMode(), (guard(2, 2), guard(1, 7))
        fakes = [maybe_to_fake_obj(mode, g) for g in (guard(2, 2), guard(1, 7))]
        torch.ops.samples_multi.enter_compute_stream(*real, 2)
        with mode:
            torch.ops.samples_multi.enter_compute_stream(*fakes, 2)
        assert dict(real[1].__obj_flatten__()) == {"device": -1, "stream": 0, "events": 0}
        assert (fakes[1].wrapped_obj.device, fakes[1].wrapped_obj.stream) == (1, 7)
        assert dict(real[0].__obj_flatten__())["stream"] == fakes[0].wrapped_obj.stream == 7  # primary agrees

        outcome = custom_op("enter_compute_stream")
    assert outcome.status == "failed", outcome.render()
    [failure] = outcome.failures
    assert failure.summary.startswith("after the op, the fake leaves caller_guard (argument 1) in a different state")
    assert "caller_guard.stream: C++ 0, the fake keeps 1 (both 1 before the call)" in failure.details
    assert "caller_guard.device: C++ -1, the fake keeps 1 (both 1 before the call)" in failure.details
    assert failure.call == "torch.ops.samples_multi.enter_compute_stream.default(primary, caller_guard, 2)"
    assert failure.example.splitlines() == ["primary = torch.classes.samples_multi.StreamGuard(2, 2)",
                                            "caller_guard = torch.classes.samples_multi.StreamGuard(1, 1)"]
    text = failure.render(GUARD, outcome.target)
    assert text.startswith(f"{GUARD}.enter_compute_stream: after the op")
    assert "caller_guard after: device=-1, stream=0, events=0" in text
    assert "caller_guard keeps: device=1, stream=1, events=0" in text


def test_before_every_argument_got_an_object_the_published_fake_was_not_observed(multi):
    # What the argument source alone gives (Callee.of_op: the caller's object at the first class argument only)
    # never looks at caller_guard; Callee.layouts puts the caller's objects at both.
    ctx = engine_of().context(GUARD)
    [op] = [o for o in ctx.info.ops if o.short_name == "enter_compute_stream"]
    assert Callee.of_op(op).placed == ((0, 0),)
    assert [c.placed for c in Callee.layouts(op)] == [((0, 0), (1, 1)), ((0, 0), (1, 0))]
    with multi.BROKEN["enter_forgets_caller_guard"].installed():
        # The fake's result and primary agree with C++ on every call: only the second object shows the bug.
        for paired in ctx.pairs(Callee.of_op(op)):
            assert not paired.real.raised and not paired.fake.raised
            [state] = ctx.observe(paired)
            assert dict(state.real_after) == state.fake_after


def test_the_correct_fakes_pass_and_compiled_programs_match_eager(multi):
    x = torch.zeros(2)
    assert compiled(enter_then_read, guard(2, 2), guard(1, 7), x).tolist() == \
        enter_then_read(guard(2, 2), guard(1, 7), x).tolist() == [0.0, 0.0]
    one, other = guard(2, 2, events=5), guard(2, 2, events=5)
    assert compiled(merge_then_read, one, one, x).tolist() == merge_then_read(other, other, x).tolist() == [0.0, 0.0]
    for op in ("enter_compute_stream", "merge_into"):
        outcome = custom_op(op)
        assert outcome.status == "passed", outcome.render()


# ----- one object passed twice -------------------------------------------------------------------------------


def test_one_guard_passed_twice_is_checked_where_the_schema_lets_arguments_alias(multi):
    # Plain torch: a class argument cannot carry an alias annotation, and alias analysis lets two arguments of
    # one class alias; two Tensors in distinct mutable alias sets may not.
    with pytest.raises(RuntimeError, match="expected ident"):
        torch._C.parse_schema(f"ns::f({SCRIPT_GUARD}(a!) dst, {SCRIPT_GUARD} src) -> ()")
    ctx = engine_of().context(GUARD)
    [op] = [o for o in ctx.info.ops if o.short_name == "merge_into"]
    assert may_share(op.schema, 0, 1)
    assert not may_share(torch._C.parse_schema("ns::f(Tensor(a!) x, Tensor(b!) y) -> ()"), 0, 1)
    assert may_share(torch._C.parse_schema("ns::f(Tensor(a!) x, Tensor(a) y) -> ()"), 0, 1)
    assert [c.layout for c in Callee.layouts(op)] == [(0, 1), (0, 0)]

    x = torch.zeros(2)
    with multi.BROKEN["merge_into_unaliased"].installed():
        # Plain torch: one guard passed twice: eager leaves 0 events, the compiled program read the fake's 5;
        # two distinct guards: compiled and eager agree, so only the same-object call shows the bug.
        one = guard(2, 2, events=5)
        assert merge_then_read(one, one, x).tolist() == [0.0, 0.0]
        one = guard(2, 2, events=5)
        assert compiled(merge_then_read, one, one, x).tolist() == [5.0, 5.0]
        assert compiled(merge_then_read, guard(events=5), guard(events=5), x).tolist() == \
            merge_then_read(guard(events=5), guard(events=5), x).tolist() == [10.0, 10.0]
        outcome = custom_op("merge_into")
    assert outcome.status == "failed", outcome.render()
    [failure] = outcome.failures
    assert failure.summary.startswith("after the op, the fake leaves dst and src (arguments 0 and 1: one object "
                                      "passed twice) in a different state")
    assert "dst.events: C++ 0, the fake keeps 5 (both 5 before the call)" in failure.details
    assert failure.call == "torch.ops.samples_multi.merge_into.default(dst, dst)"


# ----- every object observed, reproduced -------------------------------------------------------------------


@pytest.mark.process  # runs the reproducer in a fresh interpreter
def test_the_reproducer_prints_every_object_and_runs_from_any_directory(multi, tmp_path):
    import subprocess
    import sys

    with multi.BROKEN["enter_forgets_caller_guard"].installed():
        outcome = custom_op("enter_compute_stream", "sample_classes.fakes_multi:install_enter_forgets_caller_guard")
    [failure] = outcome.failures
    script = tmp_path / "repro.py"
    script.write_text(failure.repro)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "C++ primary after: (('device', 2), ('stream', 1), ('events', 1))" in result.stdout
    assert "C++ caller_guard after: (('device', -1), ('stream', 0), ('events', 0))" in result.stdout
    assert "fake primary after: {'device': 2, 'stream': 1, 'events': 1}" in result.stdout
    assert "fake caller_guard after: {'device': 1, 'stream': 1, 'events': 0}" in result.stdout
    assert "no disagreement reproduced" not in result.stdout  # the script judges itself: the states differ


def test_an_op_taking_one_object_has_that_object_observed_too(multi):
    from sample_classes.broken import by_name

    # Plain torch: the fake push_scaled that pushes nothing leaves the fakified queue as it was; C++ pushes.
    queue = torch.classes.samples.TensorQueue(torch.ones(2))
    mode = FakeTensorMode()
    with by_name("op_push_scaled_pushes_nothing").installed():
        fake = maybe_to_fake_obj(mode, torch.classes.samples.TensorQueue(torch.ones(2)))
        torch.ops.samples.push_scaled(torch.ones(2), 1.5, queue)
        with mode:
            torch.ops.samples.push_scaled(mode.from_tensor(torch.ones(2)), 1.5, fake)
        assert len(dict(queue.__obj_flatten__())["queue"]) == 1 and len(fake.wrapped_obj.queue) == 0
        engine = engine_of()
        [unit] = [u for u in plan("samples::TensorQueue", engine, only={"custom_op"})
                  if u.target.short_name == "push_scaled"]
        outcome = run_target(unit, engine)
    assert outcome.status == "failed", outcome.render()
    [failure] = outcome.failures
    assert failure.summary.startswith("after the op, the fake leaves obj, passed as foo (argument 2) in a "
                                      "different state")
    assert any(d.startswith("obj.queue: C++ has ") for d in failure.details), failure.details


# ----- the call specification --------------------------------------------------------------------------------


def test_the_call_specification_places_every_object(multi):
    ctx = engine_of().context(GUARD)
    [op] = [o for o in ctx.info.ops if o.short_name == "enter_compute_stream"]
    distinct, shared = Callee.layouts(op)
    call = Call(distinct, ArgumentSet((Value("2"),)))
    assert call.code() == "torch.ops.samples_multi.enter_compute_stream.default(primary, caller_guard, 2)"
    assert call.spread_source(["p", "c"]) == \
        "torch.ops.samples_multi.enter_compute_stream.default(p, c, *args, **kwargs)"
    assert Call(shared, call.args).code() == "torch.ops.samples_multi.enter_compute_stream.default(primary, primary, 2)"
    assert distinct.describe_object(1) == "caller_guard (argument 1)"
    # The argument source draws a value for caller_guard; a callee of both objects drops it.
    [first] = ctx.calls_of(Callee.of_op(op), limit=1)
    assert len(first.args.args) == 2
    assert [v.code for v in ctx.calls_of(distinct, limit=1)[0].args.args] == ["2"]
    # Invoking with two real guards runs the C++ op on them, in schema order.
    primary, caller = guard(2, 2), guard(1, 7)
    call.invoke((primary, caller))
    assert (primary.stream_id(), caller.stream_id()) == (7, 0)
    # A keyword-only class argument goes by name.
    schema = torch._C.parse_schema(f"ns::f({SCRIPT_GUARD} a, int d=1, *, {SCRIPT_GUARD} b) -> ()")
    both = Callee.of_op(OpInfo("ns::f", schema, (0, 2)), (0, 1))
    assert Call(both, ArgumentSet(())).code() == "torch.ops.ns.f.default(a, b=b)"
    assert Call(both, ArgumentSet(())).spread_source(["x", "y"]) == "torch.ops.ns.f.default(x, *args, **kwargs, b=y)"
    with pytest.raises(ValueError, match="one object index per class-typed argument"):
        Callee.of_op(op, (1, 0))
    # Three guards: all distinct, each pair shared (the third distinct), all one object.
    three = torch._C.parse_schema(f"ns::g({SCRIPT_GUARD} a, Tensor x, {SCRIPT_GUARD} b, {SCRIPT_GUARD} c) -> ()")
    layouts = Callee.layouts(OpInfo("ns::g", three, (0, 2, 3)))
    assert [c.layout for c in layouts] == [(0, 1, 2), (0, 0, 1), (0, 1, 0), (0, 1, 1), (0, 0, 0)]
    assert Call(layouts[3], ArgumentSet((Value("torch.ones(1)"),))).code() == \
        "torch.ops.ns.g.default(a, torch.ones(1), b, b)"
    assert layouts[3].describe_object(1) == "b and c (arguments 2 and 3: one object passed twice)"


def test_the_sample_is_registered(multi):
    import sample_classes

    assert sample_classes.MULTI_CLASS_QUALNAMES == (GUARD,)
    for qualname in sample_classes.MULTI_OP_QUALNAMES:
        assert any(o.qualname == qualname for o in engine_of().context(GUARD).info.ops)


def test_a_fake_keeping_no_flattened_key_leaves_the_states_unjudged_and_says_so(multi):
    from sample_classes.broken import BrokenFake

    class RenamedGuard(multi.FakeStreamGuard):  # keeps its state under other names than the flattened keys
        def __init__(self, device, stream, events):
            self._dev, self._str, self._ev = device, stream, events

        @classmethod
        def __obj_unflatten__(cls, flattened):
            return cls(**dict(flattened))

        def stream_id(self):
            return self._str

        def bind(self, device, stream):
            self._dev, self._str = device, stream

        def record(self, n):
            self._ev += n

        def release(self):
            self._dev, self._str = -1, 0

    renamed = BrokenFake(name="renamed", qualname=GUARD, check="roundtrip", method=None, rule="keys renamed",
                         fake_class=RenamedGuard)
    with renamed.installed():
        # Plain torch: the fake has no attribute under a flattened key, so nothing tells what it keeps there.
        fake = maybe_to_fake_obj(FakeTensorMode(), guard())
        assert not hasattr(fake.wrapped_obj, "stream")
        outcome = custom_op("enter_compute_stream")
    # The op returns nothing: both sides returning None is all the results say, and no state could be read, so
    # the item skips saying what was not compared and what to give.
    assert outcome.status == "skipped", outcome.render()
    assert outcome.reason.startswith("samples_multi::enter_compute_stream returns nothing and no object's state "
                                     "could be compared after the op (primary.device: the fake keeps no readable "
                                     "value under this key")
    assert "give the fake an attribute named after each __obj_flatten__ key" in outcome.reason
    assert outcome.reason.endswith("so nothing the op does was compared")


def test_the_matrix_compares_every_object_an_op_was_given(multi):
    """The matrix row of a two-object op ends with each object's state compared with eager's, the second object's
    too: a program that works on a copy of its second object (leaving the caller's untouched, as a backend that
    rebuilt argument objects would) fails, naming that argument; the faithful program passes on that comparison."""
    import copy

    from conformance.matrix.backends import Backend
    from conformance.matrix.torchbind.run import run_cell

    def faithful(scn, module, args):
        return module

    def copying_second(scn, module, args):
        def run(obj, *rest):
            return module(obj, *(copy.deepcopy(x) if isinstance(x, torch.ScriptObject) else x for x in rest))

        return run

    engine = engine_of()
    ctx = engine.context(GUARD)
    # Plain torch: the op clears its second object's stream in eager.
    primary, caller = torch.classes.samples_multi.StreamGuard(2, 2), torch.classes.samples_multi.StreamGuard(2, 2)
    caller.bind(1, 7)
    torch.ops.samples_multi.enter_compute_stream(primary, caller, 1)
    assert (caller.stream_id(), primary.stream_id()) == (0, 7)
    good = run_cell(ctx, "op.enter_compute_stream", Backend("faithful", "test", "faithful", faithful))
    assert good.status == "passed", good.details
    bad = run_cell(ctx, "op.enter_compute_stream", Backend("copying", "test", "copying", copying_second))
    assert bad.status == "torch-defect"  # the fake agrees: the copying backend is torch's side
    assert bad.reason.startswith("run 0 state of the argument object 1 (not the row's own object)"), bad.reason


def test_an_ops_argument_position_counts_only_arguments_that_are_not_objects(multi):
    """``conformance.strategy(cls, op, arg=0)`` names the op's first argument that is not an object of the class
    (the plugin gives every object): for enter_compute_stream(primary, caller_guard, device) that is ``device``,
    in custom_op's paired calls and in the matrix row alike (a new user's arg=0 once reached the second object in
    the matrix, whose eager reference then failed on every call, and was dropped by custom_op)."""
    import conformance
    from conformance.matrix.torchbind.rows import scenario

    engine = engine_of(lambda: conformance.strategy(GUARD, "samples_multi::enter_compute_stream", arg=0)(
        lambda: __import__("hypothesis").strategies.just(3)))
    ctx = engine.context(GUARD)
    op = next(o for o in ctx.info.ops if o.short_name == "enter_compute_stream")
    for callee in Callee.layouts(op):
        for call in ctx.calls_of(callee):
            assert call.code().endswith(", 3)"), call.code()
    program = scenario(ctx, "op.enter_compute_stream").code()
    assert "torch.ops.samples_multi.enter_compute_stream.default(obj, x0, 3)" in program, program
    [outcome] = [run_target(u, engine) for u in plan(GUARD, engine, only={"custom_op"})
                 if u.target_name == "enter_compute_stream"]
    assert outcome.status == "passed", outcome.render()


def test_the_differential_drives_the_op_with_the_tracked_object_at_every_class_typed_argument(multi):
    """The differential's tracked object goes to ``caller_guard`` too, so the fake that forgets to clear it fails
    there, on the states the sequences reach (not only the examples), naming the op; before, the tracked object
    went to ``primary`` only and a drawn guard took ``caller_guard``, whose state nothing read afterwards."""
    ctx = engine_of().context(GUARD)
    [op] = [o for o in ctx.info.ops if o.short_name == "enter_compute_stream"]
    assert Callee.of_op(op, at=1).placed == ((1, 0),) and Callee.of_op(op, at=1).position == 1
    with pytest.raises(ValueError, match="at=2 for samples_multi::enter_compute_stream"):
        Callee.of_op(op, at=2)
    engine = engine_of()
    [unit] = plan(GUARD, engine, only={"differential"})
    assert run_target(unit, engine).status == "passed"  # the correct fakes
    with multi.BROKEN["enter_forgets_caller_guard"].installed():
        engine = engine_of()
        [unit] = plan(GUARD, engine, only={"differential"})
        outcome = run_target(unit, engine)
    assert outcome.status == "failed", outcome.render()
    [failure] = outcome.failures
    assert failure.target == "enter_compute_stream", failure.render(GUARD, outcome.target)
    assert "torch.ops.samples_multi.enter_compute_stream.default(" in failure.call
    assert ", obj, " in failure.call  # the tracked object as caller_guard, the op's second argument
