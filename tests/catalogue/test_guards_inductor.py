"""A symbolic class whose ``guard_fn`` covers the size in bytes of a window but not its shape, written the way a
communications library writes its memory window, on the sample :mod:`sample_classes.windows`: torch.compile reuses
a program compiled for a ``[5, 7]`` window on a ``[7, 5]`` one. Dynamo's ``eager`` backend calls the op again and
hides it; inductor asserts the shape it traced and raises. ``guards[op]`` runs such a pair through inductor too and
fails the broken class naming the fields guard_fn leaves out; the correct class (shape and dtype guarded) passes.
Plain torch beside the verdict."""

from __future__ import annotations

import pytest
import torch
from hypothesis import strategies as st

import conformance
from conformance.core.results import Status
from conformance.core.settings import Settings
from conformance.engine.op_definitions import recording
from conformance.runner import run_class

with recording():  # as --torchbind-load imports it: the define strings name the classes
    import sample_classes.windows as win

from conftest import engine_of

MOD = "sample_classes.windows"
OPS = {"Window": "view_as_window", "WindowByBytes": "view_as_window_bytes"}


def _compiled(op, backend):
    torch._dynamo.reset()
    return torch.compile(lambda x, w: op(x, w), backend=backend, fullgraph=True)


def test_plain_torch_inductor_reuses_the_program_for_a_window_of_another_shape_and_raises():
    x = torch.arange(64.0)
    op = torch.ops.samples_win.view_as_window_bytes
    try:
        assert _compiled(op, "eager")(x, win.WindowByBytes(5, 7)).shape == (5, 7)
        program = _compiled(op, "eager")
        program(x, win.WindowByBytes(5, 7))
        assert program(x, win.WindowByBytes(7, 5)).shape == (7, 5)  # the eager backend calls the op again
        program = _compiled(op, "inductor")
        program(x, win.WindowByBytes(5, 7))
        with pytest.raises(AssertionError, match="expected size 7==5"):
            program(x, win.WindowByBytes(7, 5))  # guard_fn gives 140 for both: the [5, 7] program is reused
        program = _compiled(torch.ops.samples_win.view_as_window, "inductor")
        program(x, win.Window(5, 7))
        assert program(x, win.Window(7, 5)).shape == (7, 5)  # the shape is guarded: compiled again
    finally:
        torch._dynamo.reset()


def _guards(cls: str):
    def register():  # the adopter's input: a buffer long enough for every window drawn
        conformance.strategy(f"{MOD}.{cls}", f"samples_win::{OPS[cls]}", arg="x")(lambda: st.just("torch.arange(64.0)"))

    outcomes = run_class(f"{MOD}.{cls}", only={"guards"}, engine=engine_of(register, Settings(examples=20)))
    return {o.target: o for o in outcomes}


def test_guards_fails_the_window_guarded_by_bytes_naming_the_fields_and_passes_the_correct_one():
    bad = _guards("WindowByBytes")["view_as_window_bytes"]
    assert bad.status is Status.FAILED, bad.render()
    [failure] = bad.failures
    assert failure.rule == "guards.unguarded-change"
    assert failure.summary.startswith("a program calling samples_win::view_as_window_bytes compiled with inductor "
                                      "for one object is reused for another whose guard_fn values are the same")
    assert "it differs in 'cols', 'rows'" in failure.summary
    assert failure.details[1].startswith("inductor on other: AssertionError: expected size ")
    assert "backend='inductor'" in failure.repro
    compile(failure.repro, "<reproducer>", "exec")
    good = _guards("Window")
    assert all(o.status is Status.PASSED for o in good.values()), [o.render() for o in good.values()]
    assert good["view_as_window"].evidence.total > 0
