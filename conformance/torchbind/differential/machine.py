"""One differential call sequence: the real object and its fake driven side by side (:class:`_Machine`), compared
after every step (results, aliasing, observers, a fresh fake of the C++ object's state); a disagreement is a
:class:`Drift`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch
import torch.utils._pytree as pytree
from ...engine.torch_api import call_torchbind_fake

from ...engine.compare import CallResult, disagreement, side_text
from ..context import ClassContext, new_fake_mode, to_fake
from ..examples import Example, state_key
from ...core.faults import raise_fault
from ...core.results import ConformanceError
from ...engine.arguments import EMPTY as _EMPTY
from ...engine.search import Found
from ...engine.values import ArgumentSet
from .plan import Plan, Rule

__all__ = ["Drift"]


@dataclasses.dataclass
class Drift:
    """A disagreement found by the machine, with everything needed to report and reproduce it.

    ``steps`` is the sequence run from ``example`` (``(rule, args)`` pairs, the last one where it showed);
    ``rejected[i]`` is true for a step the C++ object rejected (raised on): it was not applied to the fake;
    ``phase`` is ``"call"`` (the step itself disagrees), ``"alias"`` (aliasing of the step's result),
    ``"observer"`` (an observer disagrees after the step) or ``"state"`` (a fresh fake of the C++ object's state
    disagrees with the evolved fake); ``observer`` names the observer for the last two.
    """

    example: Example
    steps: list[tuple[Rule, ArgumentSet]]
    observers: list[str]
    mutating_steps: list[bool]
    phase: str
    summary: str
    cpp: str
    fake: str
    details: list[str]
    observer: str | None = None
    rejected: list[bool] = dataclasses.field(default_factory=list)


def _disagree(real: CallResult, fake: CallResult, where: str = "result") -> tuple[str, list[str]] | None:
    """:func:`conformance.engine.compare.disagreement` with strides compared in significant dimensions only (see
    :func:`conformance.engine.compare.compare_results`): eager kernels and meta functions legitimately pick different
    strides for size-0/1 dimensions. Differences are named from ``where`` (``result``, ``size()``...)."""
    return disagreement(real, fake, where, significant_strides_only=True)


def _grad(args: list, kwargs: dict) -> bool:
    """Whether a tensor among the arguments requires grad (so that autograd's kernel of ``call_torchbind`` runs)."""
    if not args and not kwargs:
        return False
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves((args, kwargs)))


def _storage(t: torch.Tensor):
    try:
        return t.untyped_storage()._cdata
    except Exception:  # noqa: BLE001 - tensors without a storage (sparse, ...) never alias here
        return None


def _opaque(value: Any) -> bool:
    """Only lists, tuples and dicts are looked into for tensors, as
    :func:`conformance.engine.compare.compare_results` does."""
    return not isinstance(value, (list, tuple, dict))


def _keystr(keys: tuple, value: Any) -> str:
    """``pytree.keystr(keys)``, except that a namedtuple's field reads as its index (``[0]``, not ``.x``): the
    position as :func:`conformance.engine.compare.compare_results` names it."""
    if not any(isinstance(k, pytree.GetAttrKey) for k in keys):
        return pytree.keystr(keys)
    parts = []
    for k in keys:
        parts.append(f"[{value._fields.index(k.name)}]" if isinstance(k, pytree.GetAttrKey) else str(k))
        value = k.get(value)
    return "".join(parts)


def _tensor_leaves(value: Any, path: str) -> list[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` for every tensor in ``value`` (itself or held in lists, tuples and dicts), in order;
    ``path`` extended by the position, e.g. ``result[0]``, ``result['k']``."""
    return [(path + _keystr(keys, value), leaf)
            for keys, leaf in pytree.tree_leaves_with_path(value, is_leaf=_opaque)
            if isinstance(leaf, torch.Tensor)]


class _Side:
    """One side (the C++ object or its fake) of a run: the object, the mode its calls run under, and the tensors
    it has passed in or got back so far (kept alive, so storages are never reused), for aliasing."""

    def __init__(self, name: str, obj, mode):
        self.name, self.obj, self.mode = name, obj, mode
        self.seen: list[tuple[str, torch.Tensor, Any]] = []
        self.by_storage: dict[Any, list[str]] = {}  # storage -> the labels in seen that hold it, in order
        self.keep: list[Any] = []

    def _args(self, args: ArgumentSet, tracer=None):
        """Fresh arguments; on a fake side tensors become fake tensors (as
        :func:`conformance.torchbind.context.to_fake`) and TorchBind objects are fakified, as they would be while
        tracing."""
        if not args.args and not args.kwargs:
            return [], {}
        a, kw = args.make()
        if self.mode is not None:
            self.keep.append((a, kw))
            a, kw = to_fake(self.mode, (a, kw), tracer)
        return a, kw

    def call(self, rule: Rule, args: ArgumentSet, ctx: ClassContext, step: int | None) -> CallResult:
        """Run one rule with fresh arguments; ``step`` given, remember the argument tensors for aliasing.

        A method call on the fake side goes straight to ``call_torchbind``'s ``FakeTensorMode`` kernel
        (``torch/_higher_order_ops/torchbind.py`` ``call_torchbind_fake``: the fake method under the mode, tensors it
        returns made fake), the kernel ``obj.method(...)`` reaches through ``HigherOrderOperator.dispatch``
        (``torch/_ops.py``: the current mode's ``python_key_table`` entry) when no argument requires grad; skipping
        the dispatch halves the cost of a fake call. With an argument that requires grad (an adopter's override),
        the call goes through the operator, so that its autograd kernel runs as it does while tracing.
        Errors from the call are captured in the :class:`CallResult`; a ``RuntimeError`` when the arguments
        themselves cannot be built (a user override that draws bad source; a
        :class:`~conformance.core.results.RegistrationError` as it is); a ``BaseException`` that is not an
        ``Exception`` is raised on as a :class:`~conformance.core.faults.UserFault` that fails the item (a real
        interrupt as it is)."""
        try:
            a, kw = self._args(args, ctx.tracer)
        except ConformanceError:  # a user strategy that draws what no call can take: the error names the call
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. a user override drew bad source
            raise RuntimeError(f"building the arguments {args.code()!r} of {rule.label} raised {exc!r}") from exc
        if step is not None:
            names = [f"argument {i}" for i in range(len(a))] + [f"argument {k}" for k in kw]
            for name, value in zip(names, [*a, *kw.values()]):
                for path, t in _tensor_leaves(value, name):
                    self._remember(f"{path} of step {step}", t, _storage(t))
        side = "fake" if self.mode is not None else "C++"

        def label() -> str:
            return f"{rule.label}({args.code()}) on the {self.name} side"

        try:
            if self.mode is not None and rule.callee.op is None and not rule.callee.operator and not _grad(a, kw):
                with ctx.calling(label, side=side):
                    value = call_torchbind_fake(self.mode, self.obj, rule.callee.name, *a, **kw)
            else:
                with self.mode if self.mode is not None else contextlib.nullcontext(), ctx.calling(label, side=side):
                    value = rule.callee.invoke(self.obj, a, kw)
            return CallResult(value)
        except Exception as exc:  # noqa: BLE001 - user and C++ code may raise anything
            return CallResult(error=exc)
        except BaseException as exc:  # not an Exception: fails the item (see conformance.core.faults)
            raise_fault(exc, label, side)

    def _remember(self, name: str, t: torch.Tensor, key: Any) -> None:
        self.seen.append((name, t, key))
        if key is not None:
            self.by_storage.setdefault(key, []).append(name)

    def aliases(self, result: CallResult, label: str) -> list[tuple[str, tuple[str, ...]]]:
        """For each tensor in the result: ``(path, labels of earlier tensors sharing its storage)``; then
        remember the result's tensors as ``<path> of <label>``."""
        if result.raised:
            return []
        out = []
        leaves = _tensor_leaves(result.value, "result")
        for path, t in leaves:
            key = _storage(t)
            hits = tuple(self.by_storage.get(key, ())) if key is not None else ()
            out.append((path, hits))
            self._remember(f"{path} of {label}", t, key)
        return out


class _Machine:
    """One call sequence: the real object and its fake, built from one example and then driven step by step.

    :meth:`start` builds the pair, :meth:`step` runs one :class:`Rule` on both sides and compares; both raise
    :class:`~conformance.engine.search.Found` carrying the :class:`Drift` on a disagreement (always through
    :meth:`_fail`).

    The validity rule: a step runs on the C++ object first; when C++ rejects it (raises), it is not applied to
    the fake and is not a comparison (``stats["rejected"]``); :attr:`compared` counts the steps C++ accepted.
    Likewise an observer C++ raises on is not compared.
    """

    def __init__(self, plan: Plan, stats: dict):
        self.plan, self.stats = plan, stats
        self.example: Example | None = None
        self.steps: list[tuple[Rule, ArgumentSet]] = []
        self.mutating: list[bool] = []
        self.rejected: list[bool] = []
        self.compared = 0

    def start(self, example: int) -> None:
        plan = self.plan
        self.stats["sequences"] += 1
        self.index = example
        self.example = plan.examples[example]
        self.real = _Side("C++", self.example.build(), None)
        mode = new_fake_mode()
        self.fake = _Side("fake", plan.ctx.fakify(self.example.build(), mode, state=self.example.label), mode)

    def step(self, rule: Rule, args: ArgumentSet) -> None:
        self.stats["steps"] += 1
        ctx = self.plan.ctx
        self.steps.append((rule, args))
        self.mutating.append(not rule.observer)
        n = len(self.steps)
        with ctx.calling(lambda: f"step {n} of a differential sequence from {self.example.label}: "
                             + ", ".join(f"{r.label}({a.code()})" for r, a in self.steps), timed=False):
            real = self.real.call(rule, args, ctx, n)
            self.rejected.append(real.raised)
            if real.raised:
                self.stats["rejected"] = self.stats.get("rejected", 0) + 1
                return  # C++ rejects these arguments in this state: not applied to the fake, not a comparison
            fake = self.fake.call(rule, args, ctx, n)
        self.compared += 1
        self.stats["compared"] = self.stats.get("compared", 0) + 1
        found = _disagree(real, fake)
        if found is not None:
            summary, diffs = found
            self._fail("call", summary.replace("method", "op") if rule.op is not None else summary,
                       side_text(real), side_text(fake), diffs)
        diffs = self._alias_diffs(real, fake, f"step {n}")
        if diffs:
            self._fail("alias", "the fake's result aliases differently from the C++ result (an argument or an "
                       "earlier result on one side only)", side_text(real), side_text(fake), diffs)
        self._observe(n, mutated=not rule.observer)
        # The state reached, to the plan's observers audit, when C++ accepted every step so far (a rejected step
        # cannot be replayed: the rebuilt object would raise there).
        if self.plan.audit is not None and not any(self.rejected):
            self.plan.audit.visit(self.example, tuple(rule.call(args) for rule, args in self.steps))

    def _alias_diffs(self, real: CallResult, fake: CallResult, label: str, where: str = "result") -> list[str]:
        real_alias, fake_alias = self.real.aliases(real, label), self.fake.aliases(fake, label)
        return [f"{path.replace('result', where, 1)}: C++ aliases {_names(r)}, fake aliases {_names(f)}"
                for (path, r), (_, f) in zip(real_alias, fake_alias) if set(r) != set(f)]

    def _observe(self, n: int, mutated: bool) -> None:
        """Call every observer on both sides after step ``n`` (results and aliasing must agree); after a
        state-changing step also compare the evolved fake with a fresh fake of the C++ object's state."""
        plan, ctx = self.plan, self.plan.ctx
        if not plan.observer_rules:
            return
        fake_results, real_results = {}, {}
        unequal = plan.unequal.get(self.index, {})
        for obs in plan.observer_rules:
            name = obs.name
            if name in unequal:
                continue  # the fake made from this example disagrees on it before any call (see Plan.unequal)
            r = self.real.call(obs, _EMPTY, ctx, None)
            if r.raised:
                continue  # C++ rejects the observer in this state (top() of an empty queue): not a comparison
            f = self.fake.call(obs, _EMPTY, ctx, None)
            fake_results[name], real_results[name] = f, r
            found = _disagree(r, f, f"{name}()")
            if found is not None:
                self._fail("observer", f"the fake's state drifted from the C++ object: {name}() afterwards "
                           "disagrees", side_text(r), side_text(f), found[1], observer=name)
            diffs = self._alias_diffs(r, f, f"{name}() after step {n}", f"{name}()")
            if diffs:
                self._fail("observer", f"{name}() afterwards returns a tensor that aliases an argument or an "
                           "earlier result on one side only", side_text(r), side_text(f), diffs, observer=name)
        if not mutated:
            return
        fresh = self._fresh_results([obs for obs in plan.observer_rules if obs.name in fake_results])
        for name, r in fresh.items():
            f = fake_results[name]
            # Two fakes, both held to what C++ returned: the fresh one raising is a finding too.
            found = ("the fresh fake raises", []) if r.raised and not f.raised else _disagree(r, f, f"{name}()")
            if found is not None:
                details = [d.replace("C++", "fresh fake", 1) for d in found[1]]
                if _disagree(real_results[name], f) is None:
                    details.append(f"C++ {name}() returned {side_text(real_results[name]).removeprefix('returned ')} "
                                   "too, as the fake that made the calls: what it reads is not carried by "
                                   "__obj_flatten__ (or __obj_unflatten__ drops it), so a program traced from the "
                                   "C++ object in this state sees the fresh fake's value")
                self._fail("state", f"the fake's state drifted from the C++ object's: a fake made now from its "
                           f"__obj_flatten__ (maybe_to_fake_obj) and the fake that made the calls disagree on "
                           f"{name}()", side_text(r), side_text(f), details, observer=name)

    def _fresh_results(self, rules: list[Rule]) -> dict[str, CallResult]:
        """The observers ``rules``' results, in order, on a fresh fake made from the C++ object now
        (``maybe_to_fake_obj``, in the same FakeTensorMode: a ShapeEnv costs milliseconds, and the two fakes share
        no tensors); fails the sequence when the object can no longer be fakified.

        Fakification reads only ``__obj_flatten__`` (its tensors become fake ones: metadata and storage sharing,
        no values) and ``__getstate__`` (the deep copy); so when the plan proved both read-only
        (:attr:`Plan.reads_pure`), a state read the same way as an earlier one gives the same fresh fake, and its
        results are taken from :attr:`Plan.fresh` instead of fakifying again (``stats["fresh_reused"]``). That
        assumes a fake class whose ``__obj_unflatten__`` and observers depend only on what they are given."""
        plan, ctx = self.plan, self.plan.ctx
        key = None
        if plan.reads_pure:
            try:
                key = (_fresh_key(self.real.obj), tuple(r.name for r in rules))
            except Exception:  # noqa: BLE001 - not readable this way now: fakify below reports what it finds
                key = None
            if key is not None and key in plan.fresh:
                self.stats["fresh_reused"] = self.stats.get("fresh_reused", 0) + 1
                return plan.fresh[key]
        try:
            fresh = _Side("fresh fake", ctx.fakify(self.real.obj, self.fake.mode), self.fake.mode)
        except Exception as exc:  # noqa: BLE001 - a state torch cannot fakify is a finding
            self._fail("state", "after the calls the C++ object can no longer be fakified (maybe_to_fake_obj "
                       "raised)", CallResult(error=exc).error_text(), "-", [])
        results = {obs.name: fresh.call(obs, _EMPTY, ctx, None) for obs in rules}
        if key is not None and len(plan.fresh) < MAX_FRESH:
            plan.fresh[key] = results
        return results

    def _fail(self, phase: str, summary: str, cpp: str, fake: str, details: list[str],
              observer: str | None = None) -> None:
        drift = Drift(self.example, list(self.steps), list(self.plan.observers), list(self.mutating), phase, summary,
                      cpp, fake, list(details), observer, list(self.rejected))
        raise Found(drift, drift.summary)


#: At most this many fresh fakes' results are kept per run (:meth:`_Machine._fresh_results`).
MAX_FRESH = 4096


def _fresh_key(obj: torch.ScriptObject) -> Any:
    """What ``maybe_to_fake_obj`` reads of ``obj``: ``__obj_flatten__``'s tensors by the metadata a FakeTensor
    keeps (shape, dtype, strides, storage offset, device, requires_grad, which of them share a storage) and its
    other values as they are; ``__getstate__``'s result by value (the deep copy rebuilds the object from it)."""
    storages: dict[Any, int] = {}

    def meta(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            shared = storages.setdefault(_storage(value) or id(value), len(storages))
            return ("T", tuple(value.shape), str(value.dtype), tuple(value.stride()), value.storage_offset(),
                    str(value.device), value.requires_grad, shared)
        if isinstance(value, (list, tuple)):
            return (type(value).__name__, tuple(meta(v) for v in value))
        if isinstance(value, dict):
            return ("dict", tuple((meta(k), meta(v)) for k, v in value.items()))
        return state_key(value)

    names = obj._method_names()
    pickled = state_key(obj.__getstate__()) if "__getstate__" in names else None
    return meta(obj.__obj_flatten__()), pickled


def _names(labels: tuple[str, ...]) -> str:
    return ", ".join(labels) if labels else "nothing"
