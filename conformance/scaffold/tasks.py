"""The scaffold's tasks, as the observing worker runs them (see :mod:`conformance.scaffold.worker`).

Each ``task_<name>(ctx, **fields)`` takes the class's :class:`~conformance.torchbind.context.ClassContext` and the JSON
fields of its key, and returns something picklable: an :class:`~conformance.scaffold.observe.ObservedState`, a
:class:`~conformance.scaffold.observe.Choice` without its compiled function, or a verification's verdict.
"""

from __future__ import annotations

import dataclasses
import logging
from ..checks import get_check
from ..torchbind.context import ClassContext
from ..core.results import Status
from .observe import Choice, ObservedState, choose_method, choose_op, choose_static, observe_state
from .templates import Template, compile_method

__all__ = ["task_state", "task_method", "task_static", "task_op", "task_verify"]


def _sendable(choice: Choice) -> Choice:
    return dataclasses.replace(choice, fn=None)


def task_state(ctx: ClassContext) -> ObservedState | str:
    """The examples' flattened state, or a one-line reason why there is none."""
    try:
        return observe_state(ctx)
    except (LookupError, ValueError) as exc:
        return str(exc)


def task_method(ctx: ClassContext, name: str, chosen: dict[str, list[str]]) -> Choice:
    """:func:`choose_method` for ``name``; ``chosen``: method -> the lines of the template already accepted for
    it (the stand-in runs them in two-call sequences)."""
    state = observe_state(ctx)
    fns = {}
    for other, lines in chosen.items():
        params = [a.name for a in ctx.info.methods[other].arguments[1:]]
        fns[other] = compile_method(other, params, Template(other, tuple(lines)))
    return _sendable(choose_method(ctx, name, state.names, state.attrs, fns))


def task_static(ctx: ClassContext, name: str) -> Choice:
    """:func:`choose_static` for the ``def_static`` method ``name``."""
    return _sendable(choose_static(ctx, name))


def task_op(ctx: ClassContext, name: str, inferred: list[str]) -> Choice:
    """:func:`choose_op` for the custom op ``name`` (``ns::op``); ``inferred``: the methods with inferred bodies."""
    op = next(op for op in ctx.info.ops if op.qualname == name)
    return _sendable(choose_op(ctx, op, set(inferred)))


def task_verify(ctx: ClassContext, module: str, check: str, examples: int, targets: list[str] | None = None
                ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Load ``module`` (the generated module holding only the inferred bodies) and run the plugin's ``check`` on
    it: ``agreement`` on each method of ``targets`` and ``custom_op`` on each op there (``ns::op``), or
    ``differential`` (``examples`` hypothesis examples) over every inferred method and op. Returns ``(failed,
    unverified)``: ``(name, why)`` per body that failed (for the differential at most one: the method or op of
    its last step, or the observer that disagreed before any step) with the check's first line, and ``(name,
    why)`` per body the check did not vouch for because it skipped (nothing compared) or could not run (the
    differential's name is ``""``)."""
    from ..torchbind.differential.driver import run_differential
    from ..runner import CheckTarget, Engine, run_target
    from ..core.settings import Settings
    from .worker import load_module_text

    # torch logs "already registered" for a fake class registered again, and each fake-tensor error it raises
    logging.getLogger("torch._library.fake_class_registry").setLevel(logging.ERROR)
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    load_module_text(module)
    info = ctx.info
    engine = Engine(Settings(examples=examples), registry=ctx.registry, tracer=ctx.tracer)
    if check == "agreement":
        ops = {op.qualname: op for op in info.ops}
        failed, unverified = [], []
        for name in targets or []:
            unit = CheckTarget(get_check("custom_op"), info.qualname, ops[name]) if name in ops else \
                CheckTarget(get_check("agreement"), info.qualname, name)
            outcome = run_target(unit, engine)
            if outcome.status is Status.FAILED:
                first = outcome.failures[0].summary.splitlines()[0] if outcome.failures else "failed"
                failed.append((name, f"{unit.check.name} check: {first}"))
            elif outcome.status is not Status.PASSED:
                unverified.append((name, f"{unit.check.name} skipped: {outcome.reason}"))
        return failed, unverified
    try:
        run = run_differential(engine.context(info.qualname))
    except Exception as exc:  # noqa: BLE001 - NotApplicable: nothing to drive
        return [], [("", f"differential did not run: {exc}".splitlines()[0])]
    drift = run.drift
    if drift is None:
        return ([], []) if run.compared else ([], [("", "differential skipped: no step C++ accepted")])
    culprit = drift.steps[-1][0].callee.name if drift.steps else drift.observer
    return [(culprit or "", f"differential check: {drift.summary}".splitlines()[0])], []
