"""Observers are proven, not guessed: the differential test calls an argument-less method after every step only when
calling it is shown to change neither the flattened state nor what any other such method returns.

``samples_observe::StreamGuard`` (csrc/samples_observe.cpp) keeps a bound stream handle that ``__obj_flatten__``
omits: ``clear()`` leaves the flattened state as it was and still unbinds the guard, so "flatten did not change"
took it for an observer, and calling it after every step hid a fake ``bind()`` that forgets the handle.
``samples_observe::RunningStats`` is a newcomer's correct class; with a fresh object as its only example,
``reset()`` changed nothing there, was taken for an observer, and its calls after every step made a correct fake
fail. ``samples_observe::Latch``'s ``settle()`` changes nothing on any state one call reaches, only after
``prime(); arm()``: the proof runs on the states two calls reach too. ``samples_observe::Debounce``'s ``settle()``
changes nothing on any state two calls reach, only after ``hit(); hit(); arm()``: the differential audits its
observers on the states its own sequences reach. Each verdict is pinned beside the plain torch that shows the same thing: a program compiled with
``torch.compile(backend="aot_eager")`` against eager.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import strategies as st

import conformance
from conformance.torchbind import differential as engine
from conformance.runner import plan, run_target
from conformance.core.settings import Settings
from conftest import compiled_once, engine_of

GUARD, STATS = "samples_observe::StreamGuard", "samples_observe::RunningStats"
SETTINGS = Settings(examples=30)


@pytest.fixture(scope="module")
def observe():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library
    import sample_classes.fakes_observe  # noqa: F401 - registers the fakes

    return sample_classes.fakes_observe


def differential(qualname, register=None):
    """The differential item's outcome for ``qualname``, with what ``register()`` registers as the adopter."""
    eng = engine_of(register, SETTINGS)
    [unit] = plan(qualname, eng, only={"differential"})
    return run_target(unit, eng)


def fresh_stats():
    return [torch.classes.samples_observe.RunningStats()]


def fresh_stats_only():
    """The newcomer's examples: one fresh object, no derived states."""
    conformance.examples(STATS, derive=False)(fresh_stats)



def bound_guard():
    g = torch.classes.samples_observe.StreamGuard(0)
    g.bind(3)
    return g


def is_bound_after_bind(x, g):
    g.bind(3)
    return x + int(g.is_bound())


def count_after_reset(x, s):
    s.reset()
    return x + s.count()


def stats(*values):
    s = torch.classes.samples_observe.RunningStats()
    for v in values:
        s.push(v)
    return s


# ----- the proof -------------------------------------------------------------------------------------------------


def test_flatten_unchanged_does_not_make_clear_an_observer(observe):
    g = bound_guard()  # plain torch: clear() leaves __obj_flatten__ as it was, and unbinds the guard
    flat = g.__obj_flatten__()
    g.clear()
    assert g.__obj_flatten__() == flat and g.is_bound() is False
    p = engine.plan_for(engine_of(settings=SETTINGS).context(GUARD))
    assert p.observers == ["is_bound", "device"]
    assert "clear" in [r.name for r in p.rules] and "clear" not in p.observers
    assert p.not_observers["clear"] == ("changes what is_bound() returns on `obj = torch.classes.samples_observe."
                                        "StreamGuard(2); obj.bind(2)`: True before, False after")
    assert p.not_observers["jitter"].startswith("two calls in a row on `obj = torch.classes.samples_observe."
                                                "StreamGuard(2)` give tensor(")


def test_reset_is_judged_on_the_states_a_call_reaches_too(observe):
    s = stats()  # plain torch: on the newcomer's only example, reset() changes nothing; after one push it does
    flat = s.__obj_flatten__()
    s.reset()
    assert s.__obj_flatten__() == flat
    s.push(1.5)
    s.reset()
    assert s.count() == 0
    p = engine.plan_for(engine_of(fresh_stats_only, SETTINGS).context(STATS))
    assert [e.label for e in p.examples] == ["fresh_stats()[0]"]
    assert p.observers == ["count", "mean"]
    assert p.not_observers == {"reset": "changes the flattened state on `from test_observers import fresh_stats; "
                               "obj = list(fresh_stats())[0]; obj.push(1.5)` (count: 1 before, 0 after)"}


def unbound_guards():
    return [torch.classes.samples_observe.StreamGuard(1)]


def guards_with_drawn_handles():
    """An adopter's examples (one unbound guard, no derived states) and a strategy for bind's handle whose first
    draw, hypothesis's simplest value, is 0."""
    conformance.examples(GUARD, derive=False)(unbound_guards)
    conformance.strategy(GUARD, "bind", arg=0)(lambda: st.integers(0, 6))


def test_observers_are_proven_on_several_draws_of_each_method_not_the_first(observe):
    # Plain torch: bind(0), the strategy's first draw, is rejected and reaches no state; a later draw binds the
    # guard, and clear() then unbinds it while __obj_flatten__ stays as it was.
    g = torch.classes.samples_observe.StreamGuard(1)
    with pytest.raises(RuntimeError, match="a stream handle is positive, got 0"):
        g.bind(0)
    g.bind(4)
    flat = g.__obj_flatten__()
    g.clear()
    assert g.__obj_flatten__() == flat and g.is_bound() is False
    p = engine.plan_for(engine_of(guards_with_drawn_handles, SETTINGS).context(GUARD))
    assert "clear" not in p.observers and "is_bound" in p.observers
    assert p.not_observers["clear"].startswith("changes what is_bound() returns on `from test_observers import "
                                               "unbound_guards; obj = list(unbound_guards())[0]; obj.bind("), p
    # so the fake bind that forgets its handle is found: clear() called after every step would have hidden it
    with observe.BROKEN["guard_bind_forgets"].installed():
        outcome = differential(GUARD, guards_with_drawn_handles)
    assert outcome.status == "failed", outcome.render()
    assert outcome.failures[0].target == "bind"
    assert outcome.failures[0].summary.endswith("is_bound() afterwards disagrees")


LATCH = "samples_observe::Latch"


def test_observers_are_proven_on_the_states_two_calls_reach(observe):
    # Plain torch: settle() changes nothing on a new latch, on a primed one, or after an unprimed arm(); only after
    # prime(), arm() does it disarm the latch.
    for steps in ((), ("prime",), ("arm",), ("settle",)):
        latch = torch.classes.samples_observe.Latch()
        for step in steps:
            getattr(latch, step)()
        flat = latch.__obj_flatten__()
        latch.settle()
        assert latch.__obj_flatten__() == flat, steps
    latch = torch.classes.samples_observe.Latch()
    latch.prime()
    latch.arm()
    assert latch.is_armed()
    latch.settle()
    assert not latch.is_armed()
    p = engine.plan_for(engine_of(None, SETTINGS).context(LATCH))
    assert p.observers == ["is_armed", "is_primed"]
    assert p.not_observers["settle"] == ("changes the flattened state on `obj = torch.classes.samples_observe.Latch(); "
                                         "obj.prime(); obj.arm()` (armed: True before, False after)")
    # Plain torch: settle() called after every step (before is_armed()) disarms both sides and hides a fake arm()
    # that never arms; the compiled program reads the fake's is_armed() after prime(), arm().
    with observe.BROKEN["latch_arm_forgets"].installed():
        def armed(latch, x):
            latch.prime()
            latch.arm()
            return x + latch.is_armed()

        assert compiled_once(armed, torch.classes.samples_observe.Latch(), torch.zeros(1)).tolist() == [0.0]
        assert armed(torch.classes.samples_observe.Latch(), torch.zeros(1)).tolist() == [1.0]
        outcome = differential(LATCH)
    assert outcome.status == "failed", outcome.render()
    assert outcome.failures[0].target == "arm"
    assert outcome.failures[0].summary.endswith("is_armed() afterwards disagrees")


DEBOUNCE = "samples_observe::Debounce"


def test_observers_are_audited_on_the_states_the_sequences_reach(observe):
    # Plain torch: settle() changes nothing on a new debounce or any state one or two calls reach; only after
    # hit(), hit(), arm() does it disarm it.
    calls = ("hit", "arm", "settle")
    for steps in [()] + [(a,) for a in calls] + [(a, b) for a in calls for b in calls]:
        d = torch.classes.samples_observe.Debounce()
        for step in steps:
            getattr(d, step)()
        flat = d.__obj_flatten__()
        d.settle()
        assert d.__obj_flatten__() == flat, steps
    d = torch.classes.samples_observe.Debounce()
    d.hit()
    d.hit()
    d.arm()
    assert d.is_armed()
    d.settle()
    assert not d.is_armed()
    # So the proof (states up to two calls) takes settle() for an observer; the run refutes it on a state its
    # sequences reached, plans again with settle() as a step, and passes the correct fake.
    ctx = engine_of(None, SETTINGS).context(DEBOUNCE)
    assert engine.plan_for(ctx).observers == ["settle", "is_armed", "hits"]
    run = engine.run_differential(ctx, seed=0)
    assert run.drift is None
    assert run.plan.observers == ["is_armed", "hits"] and run.audited > 0
    why = run.plan.not_observers["settle"]
    assert why.startswith("changes the flattened state on `obj = torch.classes.samples_observe.Debounce(); "), why
    assert why.endswith("(armed: True before, False after) (a state a differential sequence reached; the proof's "
                        f"{run.plan.audit.proof.states} states did not show it)"), why
    assert "settle() changes the flattened state" in run.summary()
    # Plain torch: settle() called after every step (before is_armed()) disarms both sides and hides a fake arm()
    # that never arms; the compiled program reads the fake's is_armed() after hit(), hit(), arm().
    with observe.BROKEN["debounce_arm_forgets"].installed():
        def armed(d, x):
            d.hit()
            d.hit()
            d.arm()
            return x + d.is_armed()

        assert compiled_once(armed, torch.classes.samples_observe.Debounce(), torch.zeros(1)).tolist() == [0.0]
        assert armed(torch.classes.samples_observe.Debounce(), torch.zeros(1)).tolist() == [1.0]
        outcome = differential(DEBOUNCE)
    assert outcome.status == "failed", outcome.render()
    assert outcome.failures[0].target == "arm"
    assert outcome.failures[0].summary.endswith("is_armed() afterwards disagrees")


def test_the_audit_is_what_finds_the_debounce_bug_and_a_drift_is_audited_whatever_the_budget(observe):
    from conformance.torchbind.differential import driver, machine
    from conformance.engine.arguments import EMPTY

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine.observers, "MAX_AUDITED", 0)
        with observe.BROKEN["debounce_arm_forgets"].installed():
            # no audited state: settle() stays an observer and hides the fake arm() that never arms
            run = engine.run_differential(engine_of(None, SETTINGS).context(DEBOUNCE), seed=0)
        assert run.drift is None and "settle" in run.plan.observers and run.audited == 0
        # the states on the way to a drift are audited all the same: a drift shown with settle() as an observer
        # would be no verdict
        p = engine.plan_for(engine_of(None, SETTINGS).context(DEBOUNCE))
        rule = {r.label: r for r in p.rules}
        steps = [(rule["hit"], EMPTY), (rule["hit"], EMPTY), (rule["arm"], EMPTY)]
        drift = machine.Drift(p.examples[0], steps, p.observers, [True] * 3, "observer", "s", "", "", [],
                              rejected=[False] * 3)
        driver._audit_drift(p, drift)
    assert list(p.audit.refuted) == ["settle"] and p.audit.audited == 3


# ----- verdicts, with plain torch beside them -----------------------------------------------------------------


def test_correct_running_stats_pass_with_no_false_failure_on_reset(observe):
    # Plain torch: reset() then count() inside one compiled program agrees with eager.
    x = torch.zeros(2)
    assert torch.equal(compiled_once(count_after_reset, x, stats(1.0, 2.0)), count_after_reset(x, stats(1.0, 2.0)))
    for register in (None, fresh_stats_only):
        outcome = differential(STATS, register)
        assert outcome.status == "passed", outcome.render()


def test_a_fake_reset_that_keeps_the_count_is_found(observe):
    x = torch.zeros(2)
    with observe.BROKEN["stats_reset_keeps_count"].installed():
        # Plain torch: the compiled program reads the count the fake kept; eager reads 0.
        assert compiled_once(count_after_reset, x, stats(1.0, 2.0)).tolist() == [2.0, 2.0]
        assert count_after_reset(x, stats(1.0, 2.0)).tolist() == [0.0, 0.0]
        outcome = differential(STATS, fresh_stats_only)
    assert outcome.status == "failed"
    [failure] = outcome.failures
    assert failure.target == "reset"
    assert "count() afterwards disagrees" in failure.summary
    assert "count(): C++ gave 0 (int), fake gave 1 (int)" in failure.details
    assert "observers called after every step on both sides: count(), mean()" in failure.details


def test_a_fake_bind_that_forgets_the_handle_is_found(observe):
    x = torch.zeros(2)
    with observe.BROKEN["guard_bind_forgets"].installed():
        # Plain torch: bind() then is_bound() in one compiled program gives 0 where eager gives 1.
        assert compiled_once(is_bound_after_bind, x, torch.classes.samples_observe.StreamGuard(0)).tolist() == [0.0, 0.0]
        outcome = differential(GUARD)
    assert is_bound_after_bind(x, torch.classes.samples_observe.StreamGuard(0)).tolist() == [1.0, 1.0]
    assert outcome.status == "failed"
    [failure] = outcome.failures
    assert failure.target == "bind"
    assert failure.summary.endswith("the fake's state drifted from the C++ object: is_bound() afterwards disagrees")
    assert (failure.cpp, failure.fake) == ("obj.is_bound() returned True", "obj.is_bound() returned False")
    assert "not an observer, driven as a step: clear() changes what is_bound() returns on `obj = torch.classes." \
           "samples_observe.StreamGuard(2); obj.bind(2)`: True before, False after" in failure.details


def test_the_correct_guard_fails_on_the_handle_its_flatten_omits(observe):
    # Plain torch: within one program the correct fake keeps the handle (compiled agrees with eager) ...
    x = torch.zeros(2)
    assert compiled_once(is_bound_after_bind, x, torch.classes.samples_observe.StreamGuard(0)).tolist() == [1.0, 1.0]
    # ... but a program traced from a bound guard sees it unbound: __obj_flatten__ omits the handle.
    assert compiled_once(lambda x, g: x + int(g.is_bound()), x, bound_guard()).tolist() == [0.0, 0.0]
    assert (x + int(bound_guard().is_bound())).tolist() == [1.0, 1.0]
    outcome = differential(GUARD)
    assert outcome.status == "failed"
    [failure] = outcome.failures
    assert failure.target == "bind" and failure.summary.endswith("disagree on is_bound()")
    assert "is_bound(): fresh fake gave False (bool), fake gave True (bool)" in failure.details
    assert any(d.startswith("C++ is_bound() returned True too, as the fake that made the calls: what it reads is not "
                            "carried by __obj_flatten__") for d in failure.details)


# ----- the adopter's word --------------------------------------------------------------------------------------


def test_the_adopter_excludes_an_observer(observe):
    def register():
        conformance.strategy(GUARD, "device", observer=False)

    p = engine.plan_for(engine_of(register, SETTINGS).context(GUARD))
    assert p.observers == ["is_bound"]
    assert p.not_observers["device"] == ("excluded by the adopter (conformance.strategy("
                                         "'samples_observe::StreamGuard', 'device', observer=False))")
    assert "device" in [r.name for r in p.rules]


def test_a_named_observer_the_proof_refutes_is_a_step_with_a_note(observe):
    def register():
        conformance.strategy(GUARD, "clear", observer=True)

    p = engine.plan_for(engine_of(register, SETTINGS).context(GUARD))
    assert "clear" not in p.observers and "clear" in [r.name for r in p.rules]
    assert ("clear: named an observer (conformance.strategy('samples_observe::StreamGuard', 'clear', observer=True)) "
            "but calling it changes what is_bound() returns on `obj = torch.classes.samples_observe.StreamGuard(2); "
            "obj.bind(2)`: True before, False after; driven as a step instead") in p.observer_notes
    with observe.BROKEN["guard_bind_forgets"].installed():  # and the bug clear() hid is still found
        outcome = differential(GUARD, register)
    assert outcome.status == "failed" and outcome.failures[0].target == "bind"
    assert any(d.startswith("observers: clear: named an observer") for d in outcome.failures[0].details)

    def reset_named():
        fresh_stats_only()
        conformance.strategy(STATS, "reset", observer=True)

    outcome = differential(STATS, reset_named)  # a correct class passes, and the item's notes say why reset is a step
    assert outcome.status == "passed"
    assert outcome.notes == ["observers: reset: named an observer (conformance.strategy('samples_observe::RunningStats', "
                             "'reset', observer=True)) but calling it changes the flattened state on `from "
                             "test_observers import fresh_stats; obj = list(fresh_stats())[0]; obj.push(1.5)` (count: "
                             "1 before, 0 after); driven as a step instead"]


def test_a_named_observer_whose_own_result_varies_is_trusted(observe):
    g = torch.classes.samples_observe.StreamGuard(0)  # plain torch: two draws differ, the state does not change
    assert not torch.equal(g.jitter(), g.jitter()) and g.__obj_flatten__() == (("device_index", 0),)

    def register():
        conformance.strategy(GUARD, "jitter", observer=True)

    p = engine.plan_for(engine_of(register, SETTINGS).context(GUARD))
    assert p.observers == ["is_bound", "device", "jitter"] and "jitter" not in p.not_observers


def test_observer_declarations_are_checked(observe):
    with pytest.raises(ValueError, match="observer= is said of a whole method"):
        conformance.strategy(GUARD, "bind", arg=0, observer=True)

    def needs_args():
        conformance.strategy(GUARD, "bind", observer=True)

    with pytest.raises(ValueError, match=r"an observer is called without arguments after every step"):
        engine.plan_for(engine_of(needs_args, SETTINGS).context(GUARD))

    def unknown():
        conformance.strategy(GUARD, "flush", observer=False)

    with pytest.raises(ValueError, match="has no method named 'flush'"):
        engine.plan_for(engine_of(unknown, SETTINGS).context(GUARD))


# ----- throughput: what the machine skips, and what it must not ----------------------------------------------


def test_fresh_fakes_are_reused_only_where_fakification_reads_nothing_else(observe):
    import sample_classes.fakes_broken  # noqa: F401 - registers the samples_broken fakes

    run = engine.run_differential(engine_of(settings=SETTINGS).context("samples::TensorQueue"))
    assert run.plan.reads_pure and run.fresh_reused > 0 and run.drift is None
    # Plain torch: this __obj_flatten__ changes the object it reads, so no two reads are the same state.
    o = torch.classes.samples_broken.FlattenMutates(2)
    assert o.__obj_flatten__() != o.__obj_flatten__()
    p = engine.plan_for(engine_of(settings=SETTINGS).context("samples_broken::FlattenMutates"))
    assert not p.reads_pure and p.observers == ["get"]
    assert p.observer_notes == ["reading the flattened state twice in a row gives two states on `obj = torch.classes."
                       "samples_broken.FlattenMutates(2)` (n: 3 before, 4 after): observers are judged by what the "
                       "other candidates return only (see torchbind[samples_broken.FlattenMutates]::flatten)"]


def test_fake_method_calls_take_torchs_fake_kernel_unless_an_argument_requires_grad(observe, monkeypatch):
    from conformance.engine.arguments import EMPTY
    from conformance.torchbind.calls import Callee
    from conformance.torchbind.context import new_fake_mode
    from conformance.torchbind.differential import machine
    from conformance.engine.values import ArgumentSet, Value

    ctx = engine_of(settings=SETTINGS).context("samples::TensorQueue")
    mode = new_fake_mode()
    fake = ctx.fakify(torch.classes.samples.TensorQueue(torch.zeros(2, 3)), mode)
    side = machine._Side("fake", fake, mode)
    routed, kernel = [], machine.call_torchbind_fake
    monkeypatch.setattr(machine, "call_torchbind_fake", lambda m, o, name, *a, **k: routed.append(name) or
                        kernel(m, o, name, *a, **k))
    push, top = engine.Rule(Callee.method("push"), None), engine.Rule(Callee.method("top"), None)
    assert not side.call(push, ArgumentSet((Value("torch.ones(2, 3)"),)), ctx, 1).raised
    assert not side.call(push, ArgumentSet((Value("torch.ones(4).requires_grad_()"),)), ctx, 2).raised
    assert routed == ["push"]  # the argument requiring grad went through the operator, whose autograd kernel runs
    direct = side.call(top, EMPTY, ctx, None).value
    with mode:
        through_op = torch.ops.higher_order.call_torchbind(fake, "top")
    assert routed == ["push", "top"]
    assert (direct.shape, direct.dtype, direct.stride()) == (through_op.shape, through_op.dtype, through_op.stride())


def test_a_named_observer_that_is_not_driven_is_noted(observe):
    def register():
        conformance.strategy(GUARD, "device", observer=True)
        conformance.strategy(GUARD, "device")(lambda: None)  # and excluded from every caller

    p = engine.plan_for(engine_of(register, SETTINGS).context(GUARD))
    assert "device" not in p.observers
    assert p.observer_notes == ["device: named an observer (conformance.strategy('samples_observe::StreamGuard', "
                                "'device', observer=True)) but not driven: excluded by conformance.strategy"]


def test_an_observer_the_fake_gets_wrong_from_the_start_is_not_blamed_on_a_step(observe):
    # A stub getter, as published fakes have them: hits() returns None where C++ returns the count. Plain torch:
    # the fakified debounce answers None before any call; agreement reports it.
    from sample_classes.broken import BrokenFake, _variant

    stub = BrokenFake(name="debounce_hits_stub", qualname=DEBOUNCE, check="agreement", method="hits",
                      rule="a stub getter", fake_class=_variant(observe.FakeDebounce, "FakeDebounceStub",
                                                                hits=lambda self: None))
    with stub.installed():
        d = torch.classes.samples_observe.Debounce()
        from torch._library.fake_class_registry import maybe_to_fake_obj
        from torch._subclasses.fake_tensor import FakeTensorMode

        assert (d.hits(), maybe_to_fake_obj(FakeTensorMode(), d).wrapped_obj.hits()) == (0, None)
        ctx = engine_of(None, SETTINGS).context(DEBOUNCE)
        run = engine.run_differential(ctx, seed=0)
        outcome = differential(DEBOUNCE)
    # Before: "after 1 call hit(): hits() afterwards disagrees", blaming hit(). Now hits() is left out of the
    # sequences from that example, said in a note, and the rest of the fake (correct) passes.
    assert run.drift is None, run.summary()
    assert any(n.startswith("hits: not compared in sequences from the example ") and "agreement[hits]" in n
               for n in run.plan.notes), run.plan.notes
    assert outcome.status == "passed", outcome.render()
