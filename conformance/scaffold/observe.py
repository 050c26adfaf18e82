"""Run the real class on its example objects and pick, per method and per op, the first template that agrees.

A trial is one call on a fresh real object in an example's state, optionally after a first call (a two-call
sequence): the real result (or error) and the object's ``__obj_flatten__`` state before and after. A template is
accepted when, on every trial, the stand-in — an object holding the flattened state as attributes, with the
template as its method — returns what the real call returned (compared like the plugin does, with
:func:`conformance.engine.compare.compare_results`: tensors by metadata, other values by value), raises when the real
call raises, and ends in the same state. In a two-call sequence of the same method the stand-in runs both calls
from the state before the first, so a template that mutates state must compound correctly.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import torch
import torch.utils._pytree as pytree

from ..torchbind.calls import Call, Callee
from ..engine.compare import compare_results, describe
from ..torchbind.context import ClassContext
from ..core.breadcrumbs import CallAbandoned, Tracer
from ..torchbind.discovery import OpInfo
from .templates import Template, compile_method, method_templates, static_templates
from ..engine import torch_api

__all__ = ["Choice", "ObservedState", "attribute_names", "choose_method", "choose_static", "choose_op", "flat_state",
           "observe_state"]

_MAX_TRIALS = 400
#: Argument sets observed per method or op (the plugin's checks use 3; more dtypes catch type promotion).
_ARGUMENT_SETS = 6


@dataclasses.dataclass
class Choice:
    """The outcome for one method or op: ``template`` (``None`` when nothing agreed) and, then, ``observed``
    (what the real class did, for the ``NotImplementedError`` message); ``left_out``: calls not observed because
    they crashed or hung the worker process (``"<call> on <state> <what it did>"``), for a comment on the body.
    Picklable (it comes back from the observing worker) once ``fn`` is dropped."""

    template: Template | None
    observed: str = ""
    fn: Any = None  # the template compiled, as the stand-in runs it (not sent between processes)
    left_out: tuple[str, ...] = ()


def flat_state(obj: torch.ScriptObject) -> dict[str, Any]:
    """``dict(obj.__obj_flatten__())``."""
    return dict(obj.__obj_flatten__())


@dataclasses.dataclass
class ObservedState:
    """What ``__obj_flatten__`` gave on the example objects: ``values`` (flatten key -> its value on each example,
    in example order), ``names`` (flatten key -> the fake's attribute, see :func:`attribute_names`) and ``attrs``
    (attribute -> a representative value: the first that is not an empty list, which decides the templates)."""

    values: dict[str, list[Any]]
    names: dict[str, str]
    attrs: dict[str, Any]


def observe_state(ctx: ClassContext) -> ObservedState:
    """Flatten every example object of ``ctx``'s class. Raises ``LookupError`` (one-line message) when no
    example object can be built, ``ValueError`` when ``__obj_flatten__`` fails or returns something that is not
    ``(name, value)`` pairs."""
    info = ctx.info
    examples = ctx.example_set.examples
    if not examples:
        raise LookupError(f"cannot build any {info.qualname} object to observe: {ctx.example_set.problem}")
    values: dict[str, list[Any]] = {}
    for example in examples:
        try:
            obj = example.build()
            with ctx.calling(f"{example.label}.__obj_flatten__()"):
                flat = obj.__obj_flatten__()
        except CallAbandoned:
            continue
        except Exception as exc:  # noqa: BLE001 - C++ may raise anything
            raise ValueError(f"{info.qualname}.__obj_flatten__() failed on {example.label}: {exc}".splitlines()[0]) \
                from exc
        try:
            state = dict(flat)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{info.qualname}.__obj_flatten__() must return a tuple of (name, value) pairs; on "
                             f"{example.label} it returned {describe(flat, 120)}") from exc
        for k, v in state.items():
            values.setdefault(k, []).append(v)
    names = attribute_names(list(values), set(info.methods) | set(info.static_methods))
    attrs = {names[k]: next((v for v in vs if not (isinstance(v, list) and not v)), vs[0])
             for k, vs in values.items()}
    return ObservedState(values, names, attrs)


def attribute_names(keys: list[str], taken: set[str]) -> dict[str, str]:
    """The fake's attribute name per ``__obj_flatten__`` key: the key itself, or ``_key`` when the key is also a
    method name (``self.tags = ...`` would hide the method ``tags``)."""
    return {k: (f"_{k}" if k in taken else k) for k in keys}


def _params(schema: torch.FunctionSchema, skip: int | None) -> list[tuple[str, torch_api.JitType]]:
    return [(a.name, a.type) for i, a in enumerate(schema.arguments) if i != skip]


@dataclasses.dataclass
class _Trial:
    label: str
    before: dict[str, Any]
    # (call, real args, real result, real error, the stand-in's function for it: None for the candidate)
    calls: list[tuple[Call, list[Any], Any, BaseException | None, Any]]
    after: dict[str, Any]


def _run(call: Call, obj, tracer: Tracer, label: str = "") -> tuple[list[Any], Any, BaseException | None]:
    """Call ``call`` on ``obj``: (its arguments, result, error). ``label`` names the call and the object's state
    for the supervisor (reported to ``tracer``, :mod:`conformance.core.breadcrumbs`); a call abandoned for crashing or
    hanging the worker raises :class:`CallAbandoned`."""
    made = call.args.make()
    with tracer.calling(label or call.code()):
        try:
            return made[0], call.invoke(obj, made), None
        except Exception as exc:  # noqa: BLE001 - C++ may raise anything
            return made[0], None, exc


def _calls_per_example(ctx: ClassContext, callee: Callee, limit: int) -> dict[str, list[Call]]:
    """The calls to observe on each example (by label), from the class's argument source: drawn for each example's
    state when the adopter's strategy depends on the object (an index within a non-empty object's length), the
    same calls everywhere otherwise. Raises what :meth:`ClassContext.calls_of` raises (excluded, no arguments)."""
    examples = ctx.example_set.examples
    if not ctx.arguments.depends_on_object(callee.name):
        calls = ctx.calls_of(callee, limit=limit)
        return {e.label: calls for e in examples}
    return {e.label: ctx.calls_of(callee, limit=limit, example=e) for e in examples}


def _trials(ctx: ClassContext, calls: dict[str, list[Call]], prefixes: list[tuple[Call, Any]],
            left_out: list[str] | None = None) -> list[_Trial]:
    """Trials of ``calls`` (per example label, see :func:`_calls_per_example`) on every example: each call alone,
    then each call twice in a row, then each call after each ``(call, fn)`` in ``prefixes``: with ``fn`` (the
    template already chosen for that method) the stand-in runs the prefix too; without, it starts from the real
    state after the prefix. At most ``_MAX_TRIALS``, the single calls on every example first. A trial with a call
    that was abandoned for crashing or hanging the worker process is left out (and named in ``left_out``)."""
    out: list[_Trial] = []
    examples = ctx.example_set.examples
    plans = [(e, [(c, None)], None) for e in examples for c in calls.get(e.label, ())]
    plans += [(e, [(c, None), (c, None)], None) for e in examples for c in calls.get(e.label, ())]
    for p, fn in prefixes:
        if fn is not None:
            plans += [(e, [(p, fn), (c, None)], None) for e in examples for c in calls.get(e.label, ())]
        else:
            plans += [(e, [(c, None)], p) for e in examples for c in calls.get(e.label, ())]
    for example, seq, prefix in plans[:_MAX_TRIALS]:
        label = example.label
        try:
            obj = example.build()
            if prefix is not None:
                label = prefix.code(label)
                with ctx.calling(label):
                    prefix.invoke(obj)
            with ctx.calling(f"{label}.__obj_flatten__()"):
                before = flat_state(obj)
            done, chain = [], label
            for c, fn in seq:
                chain = c.code(chain)  # the calls so far, chained: CrashyStack().pop().pop()
                done.append((c, *_run(c, obj, ctx.tracer, chain), fn))
            with ctx.calling(f"{chain}.__obj_flatten__()"):
                after = flat_state(obj)
        except CallAbandoned as exc:
            entry = f"{exc.label} {exc.cause}"
            if left_out is not None and entry not in left_out:
                left_out.append(entry)
            continue
        except Exception:  # noqa: BLE001 - this state cannot be reached or read: no trial
            continue
        out.append(_Trial(label, before, done, after))
    return out


def _ptr(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr() if t.numel() else 0
    except Exception:  # noqa: BLE001 - no storage (a fake or sparse tensor)
        return 0


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


class _Aliases:
    """Which tensor handed in (an argument) or out (an earlier result) during a sequence each result tensor
    shares storage with: a fake must alias, or copy, exactly where the C++ class does. (The state read through
    ``__obj_flatten__`` may be copies, so aliasing of the state itself is not observable.)"""

    def __init__(self) -> None:
        self.handed: list[int] = []
        self.signature: list[int | None] = []

    def call(self, args: list[Any], result: Any) -> None:
        self.handed += [_ptr(t) for t in _tensors(args)]
        for t in _tensors(result):
            ptr = _ptr(t)
            self.signature.append(self.handed.index(ptr) if ptr and ptr in self.handed else None)
        self.handed += [_ptr(t) for t in _tensors(result)]


def _agrees(trial: _Trial, fn, names: dict[str, str], static: bool) -> bool:
    before = {k: _copy(v) for k, v in trial.before.items()}
    stand_in = types.SimpleNamespace(**{names[k]: v for k, v in before.items()})
    real_aliases, sim_aliases = _Aliases(), _Aliases()
    for call, real_args, result, error, step_fn in trial.calls:
        args, kwargs = call.args.make()
        f = step_fn or fn
        try:
            got = f(*args, **kwargs) if static else f(stand_in, *args, **kwargs)
        except Exception:  # noqa: BLE001 - the template raised
            if error is None:
                return False
            continue
        if error is not None or compare_results(result, got):
            return False
        real_aliases.call(real_args, result)
        sim_aliases.call(args, got)
    if real_aliases.signature != sim_aliases.signature:
        return False
    if static:
        return True
    state = {k: getattr(stand_in, names[k]) for k in trial.after}
    return not compare_results(trial.after, state, "state")


def _copy(v: Any) -> Any:
    return list(v) if isinstance(v, list) else v


def _pick(trials: list[_Trial], name: str, params: list[str], templates: list[Template], names: dict[str, str],
          static: bool = False, left_out: list[str] | None = None) -> Choice:
    gone = tuple(left_out or ())
    if not trials:
        why = "no call could be observed (no example object, or no arguments could be generated)"
        if gone:
            why = f"no call could be observed: {'; '.join(gone)}"
        return Choice(None, why, left_out=gone)
    for template in templates:
        try:
            fn = compile_method(name, params, template, static)
        except SyntaxError:
            continue
        if all(_agrees(t, fn, names, static) for t in trials):
            return Choice(template, fn=fn, left_out=gone)
    return Choice(None, _observed(trials), left_out=gone)


def _observed(trials: list[_Trial]) -> str:
    """What the real class did, from the most telling trials (a state change first), one line."""
    ranked = sorted(trials, key=lambda t: (not _changes(t), len(t.calls) > 1))
    parts = []
    for t in ranked[:2]:
        outs = []
        for call, _, result, error, _ in t.calls:
            what = f"raised {type(error).__name__}" if error is not None else f"returned {_like(result, t)}"
            outs.append(f"{call.code()} {what}")
        change = _changes(t)
        parts.append(f"on {t.label}: {', then '.join(outs)}" + (f"; {change}" if change else ""))
    return "; ".join(parts)


def _like(result: Any, t: _Trial) -> str:
    if isinstance(result, torch.Tensor):
        for k, v in t.before.items():
            if isinstance(v, torch.Tensor) and not compare_results(v, result):
                return f"a tensor like {k}"
            if isinstance(v, list) and v and isinstance(v[0], torch.Tensor) and not compare_results(v[0], result):
                return f"a tensor like the first element of {k}"
        args = t.calls[0][1]
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and not compare_results(a, result):
                return f"a tensor like argument {i}"
    return describe(result, limit=80)


def _changes(t: _Trial) -> str:
    out = []
    for k, v in t.before.items():
        w = t.after.get(k)
        if isinstance(v, list) and isinstance(w, list):
            if len(v) != len(w):
                out.append(f"{k}: {len(v)} -> {len(w)} elements")
        elif compare_results(v, w):
            out.append(f"{k}: {describe(v, 40)} -> {describe(w, 40)}")
    return ", ".join(out)


def _constant(trials: list[_Trial]) -> Any:
    for t in trials:
        for _, _, result, error, _ in t.calls:
            if error is None:
                return result
    return ...


def choose_method(ctx: ClassContext, method: str, names: dict[str, str], attrs: dict[str, Any],
                  chosen: dict[str, Any] | None = None) -> Choice:
    """The first template (see :func:`~conformance.scaffold.templates.method_templates`) that agrees with the
    real ``method`` on every trial, else a :class:`Choice` carrying what was observed. ``chosen``: the compiled
    templates already accepted for other methods (the stand-in runs them in two-call sequences)."""
    chosen = chosen or {}
    schema = ctx.info.methods[method]
    try:
        calls = _calls_per_example(ctx, Callee.method(method), _ARGUMENT_SETS)
    except Exception as exc:  # noqa: BLE001 - NotApplicable: no argument generator, or excluded
        return Choice(None, f"no calls could be generated: {exc}")
    prefixes = []
    for other in ctx.info.user_methods:
        if other != method and not other.startswith("__"):
            try:
                prefixes += [(c, chosen.get(other)) for c in ctx.calls_of(Callee.method(other), limit=1)]
            except Exception:  # noqa: BLE001
                pass
    left_out: list[str] = []
    trials = _trials(ctx, calls, prefixes, left_out)
    params = _params(schema, 0)
    templates = method_templates(attrs, params, _constant(trials))
    return _pick(trials, method, [p for p, _ in params], templates, names, left_out=left_out)


def choose_static(ctx: ClassContext, method: str) -> Choice:
    """The first template that agrees with the ``def_static`` method on every generated argument set."""
    schema = ctx.info.static_methods[method]
    try:
        sets = ctx.arguments.fixed(method, schema, -1, limit=_ARGUMENT_SETS)  # a static method: no object
    except Exception as exc:  # noqa: BLE001
        return Choice(None, f"no calls could be generated: {exc}")
    fn = getattr(ctx.info.script_class, method)
    trials, left_out = [], []
    for args in sets:
        call = Call(Callee.method(method), args)
        try:
            ran = _run(call, _Static(fn), ctx.tracer, call.code(ctx.info.name))
        except CallAbandoned as exc:
            left_out.append(f"{exc.label} {exc.cause}")
            continue
        trials.append(_Trial(ctx.info.name, {}, [(call, *ran, None)], {}))
    params = _params(schema, None)
    return _pick(trials, method, [p for p, _ in params], static_templates(params, _constant(trials)), {},
                 static=True, left_out=left_out)


def _signature(args: list[Any], result: Any) -> list[int | None]:
    aliases = _Aliases()
    aliases.call(args, result)
    return aliases.signature


class _Static:
    """Lets a static method be invoked through :meth:`Call.invoke` (``obj.name(*args)``)."""

    def __init__(self, fn):
        self._fn = fn

    def __getattr__(self, name):
        return self._fn


def choose_op(ctx: ClassContext, op: OpInfo, inferred: set[str] | None = None) -> Choice:
    """The op's fake body: ``return obj.<method>(...)`` when the class has a method named like the op (``pop``
    for ``queue_pop`` too) that does
    what the op does (same result, same state afterwards, same aliasing), else ``torch.empty_like(<a tensor
    argument>)`` when the op leaves the state alone and returns a tensor like it, else ``obj.<m>(torch.empty_like(
    <a tensor argument>))`` for a one-tensor method ``m`` (an op that stores a tensor computed from its argument),
    else a :class:`Choice` carrying what was observed. ``inferred``: the methods whose fake body was inferred
    (only those may be called by the op's fake; default: every method)."""
    pos = op.class_args[0]
    names = [a.name for a in op.schema.arguments]
    obj_name, others = names[pos], [n for i, n in enumerate(names) if i != pos]
    try:
        calls = _calls_per_example(ctx, Callee.of_op(op), _ARGUMENT_SETS)
    except Exception as exc:  # noqa: BLE001
        return Choice(None, f"no calls could be generated: {exc}")
    left_out: list[str] = []
    trials = [t for t in _trials(ctx, calls, [], left_out) if len(t.calls) == 1]
    gone = tuple(left_out)
    if not trials:
        return Choice(None, "no call could be observed" + (f": {'; '.join(gone)}" if gone else ""), left_out=gone)
    examples = {e.label: e for e in ctx.example_set.examples}

    def same(t: _Trial, name: str, make_args) -> bool:
        """The real method ``name``, called with ``make_args(op args)`` on a fresh object in the trial's state,
        does what the op did."""
        _, real_args, real, real_error, _ = t.calls[0]
        args = make_args(real_args)
        try:
            obj = examples[t.label].build()
            with ctx.calling(f"{t.label}.{name}(..), in place of the op {op.qualname}"):
                try:
                    result, error = getattr(obj, name)(*args), None
                except Exception as exc:  # noqa: BLE001
                    result, error = None, exc
        except CallAbandoned:
            return False
        if (error is None) != (real_error is None):
            return False
        return (not compare_results(real, result) and not compare_results(t.after, flat_state(obj))
                and _signature(real_args, real) == _signature(args, result))

    tensor_args = [(others.index(a.name), a.name) for i, a in enumerate(op.schema.arguments)
                   if i != pos and a.type.kind() == "TensorType"]
    short = op.short_name.split(".")[0]
    usable = [m for m in ctx.info.methods if (inferred is None or m in inferred) and not ctx.arguments.excluded(m)]
    named = [m for m in usable if (m == short or short.endswith(f"_{m}")) and not m.startswith("__")
             and len(ctx.info.methods[m].arguments) == len(others) + 1]
    for m in sorted(named, key=lambda m: m != short):
        if all(same(t, m, lambda a: list(a)) for t in trials):
            return Choice(Template(f"the fake method {m}", (f"return {obj_name}.{m}({', '.join(others)})",)),
                          left_out=gone)
    for k, name in tensor_args:
        def like(t: _Trial) -> bool:
            _, args, real, error, _ = t.calls[0]
            return (error is None and not compare_results(real, torch.empty_like(args[k]))
                    and _signature(args, real) == [None] and not compare_results(t.before, t.after))
        if all(like(t) for t in trials):
            return Choice(Template(f"a new tensor like {name}", (f"return torch.empty_like({name})",)), left_out=gone)
    counts = [m for m, sch in ctx.info.methods.items() if m in usable and not m.startswith("__")
              and len(sch.arguments) == 1
              and len(sch.returns) == 1 and sch.returns[0].type.kind() in ("IntType", "FloatType")]
    for m in counts:
        for k, name in tensor_args:
            def times(t: _Trial) -> bool:
                _, args, real, error, _ = t.calls[0]
                obj = examples[t.label].build()
                return (error is None and not compare_results(real, args[k] * getattr(obj, m)())
                        and _signature(args, real) == [None] and not compare_results(t.before, t.after))
            if all(times(t) for t in trials):
                return Choice(Template(f"{name} times the fake method {m}", (f"return {name} * {obj_name}.{m}()",)),
                              left_out=gone)
    one_tensor = [m for m, sch in ctx.info.methods.items() if m in usable and not m.startswith("__")
                  and len(sch.arguments) == 2
                  and sch.arguments[1].type.kind() == "TensorType"]
    scalars = [(others.index(a.name), a.name) for i, a in enumerate(op.schema.arguments)
               if i != pos and a.type.kind() in ("FloatType", "IntType")]
    for m in one_tensor:
        for k, name in tensor_args:
            variants = [(f"a new tensor like {name}", f"torch.empty_like({name})",
                         lambda a, k=k: [torch.empty_like(a[k])])]
            variants += [(f"{name} * {sname}", f"{name} * {sname}", lambda a, k=k, j=j: [a[k] * a[j]])
                         for j, sname in scalars]
            for what, src, make in variants:
                if all(same(t, m, make) for t in trials):
                    return Choice(Template(f"the fake method {m} with {what}", (f"return {obj_name}.{m}({src})",)),
                                  left_out=gone)
    return Choice(None, _observed(trials), left_out=gone)
