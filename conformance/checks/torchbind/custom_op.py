"""Check 7: custom ops that take the class run on fakified objects, match the real op's output metadata, and leave
every object they received in the state the real op leaves it.

Rule source: the PT2 custom-class notes — "since the fake class is implemented in python, we require the fake
implementation of custom op must also be registered in python" (``torch.library.register_fake``); a C++ Meta
kernel cannot accept a ``FakeScriptObject``, so an op without a Python fake fails in every traced program whatever
its inputs, and is reported without calling it. Otherwise the op runs on real objects and, under
``FakeTensorMode``, on fakified ones, with arguments from the class's argument source; under the validity rule
(:class:`conformance.engine.compare.Tally`) only calls the C++ op accepts are compared, like method results
(:mod:`conformance.engine.compare`). An out-variant op (``Tensor(a!) out``, returning ``()``) is compared by what it
wrote too: each call gives ``{'returned': ..., 'out (written)': ...}`` (:func:`conformance.engine.mutations.observed`).

An op with several arguments of the class gets objects at every one of them (:meth:`conformance.torchbind.calls.Callee.layouts`:
distinct objects, and one object at two arguments where the schema lets them alias). After each compared call,
every object it received is observed: the real object's ``__obj_flatten__()`` against what its fake keeps under
each key (the attribute torch.compile reads, ``getattr(fake, key)``). A traced program runs the rest of its code
on the fakes, so a fake op that forgets to change an object (the second guard it should clear) makes every later
read of that object in the program differ from eager — for a non-tensor field, a stale constant burned into the
graph. Tensors are compared by shape, dtype and device (a fake tensor has no values). First of all, the real op must
leave every tensor argument its schema does not declare written (``Tensor(a!)``) as it was (torch.library.opcheck's
schema test, :mod:`conformance.engine.mutations`): torch.compile takes such an argument as unchanged. A key is
judged only where the fake agreed with C++ before the call (else the ``roundtrip`` item reports it); keys left out are noted, and an
op that returns nothing, none of whose objects' states could be compared, skips: nothing it does was compared.
"""

from __future__ import annotations

from ...engine.mutations import Snapshot, declared_writes, reproducer_lines
from ...engine.values import positional_names
from ...torchbind.calls import Callee
from ...engine.compare import Tally, describe, flattened_pairs, kept_differences, side_text
from ...torchbind.context import UNREADABLE
from ...torchbind.discovery import runs_on_fakes
from ...core.evidence import record
from ...core.results import Failure, NotApplicable, Note
from ...torchbind.context import ClassContext
from ...torchbind.discovery import OpInfo


def custom_op(ctx: ClassContext, op: OpInfo) -> list[Failure]:
    """The op has a Python fake; on every call C++ accepts, its output metadata and every object it received agree.

    Objects go to every class-typed argument (:meth:`~conformance.torchbind.calls.Callee.layouts`); each one is observed
    after the call (:meth:`conformance.torchbind.context.ClassContext.observe`). Returns the failures (a result
    disagreement, a state drift) and notes; raises :class:`~conformance.core.results.NotApplicable` when nothing was
    compared."""
    ctx.require_fake()
    if not runs_on_fakes(op):
        return [Failure(
            "the op has no Python fake (torch.library.register_fake), so it cannot run on a fakified object: every "
            "torch.compile / torch.export program that calls it on the object fails, whatever its inputs",
            cpp=str(op.schema), fake="(no Python fake or Python Meta kernel registered)",
            details=(f"register one: @torch.library.register_fake({op.qualname.split('.')[0]!r}) in a module passed to "
                     "--torchbind-load (a C++ Meta kernel cannot take a FakeScriptObject)",), rule="custom_op.no-fake")]
    undeclared = _undeclared_write(ctx, op)
    if undeclared is not None:  # the op's schema is wrong: every compiled program over it may read stale values
        return [undeclared]
    tally, states = Tally(), _States()
    first = None
    for callee in Callee.layouts(op):
        for paired in ctx.pairs(callee):
            found = tally.judge(paired.real, paired.fake, paired.call.code())
            if found is not None:
                first = first or (paired, found)
            elif not paired.real.raised:
                states.judge(paired, ctx.observe(paired))
    tally.require_compared("the C++ op", ctx.arguments.hint(op.qualname))
    if not op.schema.returns and not states.observed and first is None:
        # An op that returns nothing is all effect: both sides returning None compares nothing that matters.
        raise NotApplicable(f"{op.qualname} returns nothing and " + states.unjudged_text(ctx)
                            + ", so nothing the op does was compared")
    failures: list[Failure] = []
    if first is not None:
        paired, (summary, diffs) = first
        failures.append(Failure(summary.replace("method", "op"), cpp=side_text(paired.real),
                                fake=side_text(paired.fake), details=tuple(diffs + [tally.summary() + "; the first is shown"]),
                                example=_objects_code(paired), call=paired.call.code(),
                                repro=ctx.call_repro(_examples(paired), paired.call),
                                rule="custom_op.fake-raises" if paired.fake.raised else "custom_op.result-differs"))
    if states.first is not None:
        failures.append(states.failure(ctx))
    return failures + tally.notes() + states.notes(ctx)


def _undeclared_write(ctx, op: OpInfo) -> Failure | None:
    """The first call (the object at the op's first class-typed argument, on each example, real objects only) that
    changes a tensor argument the op's schema does not declare written (:mod:`conformance.engine.mutations`), as
    a failure naming it; ``None`` when none does. Calls C++ rejects are not comparisons."""
    callee, skip = Callee.of_op(op), declared_writes(op.schema)
    names = [a.name for a in op.schema.arguments]
    for example in ctx.require_examples():
        for call in ctx.calls_of(callee, example=example):
            try:
                obj = example.build()
                args, kwargs = call.args.make()
                full, named = callee.arrange((obj,), args, kwargs)
                before = Snapshot([*zip(names, full), *named.items()], skip=skip)
                with ctx.calling(lambda: f"{call.code()} on the example object {example.label}, watching the "
                                         "tensor arguments it changes"):
                    op.resolve()(*full, **named)
            except Exception:  # noqa: BLE001 - what C++ rejects is not a comparison
                continue
            written = before.changed()
            if written:
                shown = ", ".join(repr(n) for n in written)
                body = ["obj = make_obj()", f"args = [{', '.join(v.code for v in call.args.args)}]",
                        f"kwargs = {{{', '.join(f'{k!r}: {v.code}' for k, v in call.args.kwargs)}}}",
                        *reproducer_lines(call.spread_source("obj"),
                                          positional_names(op.schema, callee.position, call.args))]
                return Failure(
                    f"{op.qualname} changes its argument {shown} in place, but its schema does not declare it "
                    f"written ({op.schema}): torch.compile and export take the argument as unchanged, so a compiled "
                    f"program may read it before the op wrote it; declare it 'Tensor(a!) {written[0]}' in the "
                    "op's schema (torch.library.opcheck's schema test fails the same way)",
                    example="\n".join(example.code()), call=call.code(),
                    details=tuple(f"{n}: {describe(before.values(n)[0])} before the call, "
                                  f"{describe(before.values(n)[1])} after" for n in written),
                    repro=ctx.repro(example, body), rule="custom_op.undeclared-mutation")
    return None


def _examples(paired):
    return paired.example if len(paired.examples) == 1 else paired.examples


def _objects_code(paired) -> str:
    """The code that builds every object the call received, each into the variable the call names it by."""
    callee = paired.call.callee
    if callee.objects == 1 and not callee.shares:
        return "\n".join(paired.example.code())
    return "\n".join(ln for name, ex in zip(callee.object_names(), paired.examples) for ln in ex.code(name))


class _States:
    """The objects' states after the compared calls: how many were judged and drifted, the first drift, and the
    keys that could not be judged."""

    def __init__(self):
        self.observed = self.drifted = 0
        self.first: tuple | None = None
        self.unjudged: dict[str, str] = {}

    def judge(self, paired, observed) -> None:
        callee = paired.call.callee
        names = callee.object_names()
        diffs, judged = [], 0
        for state in observed:
            name, before, compared = names[state.index], dict(flattened_pairs(state.real_before)), False
            if state.real_after is UNREADABLE:
                self.unjudged.setdefault(name, "the C++ __obj_flatten__ raised after the op (see the flatten item)")
            for key, real in flattened_pairs(state.real_after):
                kept = state.fake_after.get(key, UNREADABLE)
                if kept is UNREADABLE or state.fake_before.get(key, UNREADABLE) is UNREADABLE:
                    self.unjudged.setdefault(f"{name}.{key}", "the fake keeps no readable value under this key")
                    continue
                if key in before and kept_differences(before[key], state.fake_before[key], key):
                    self.unjudged.setdefault(f"{name}.{key}", "the fake disagreed with C++ before the call "
                                                              "(see the roundtrip item)")
                    continue
                compared = True
                found = kept_differences(real, kept, f"{name}.{key}")
                if found and key in before:
                    found = [f"{d} (both {describe(before[key])} before the call)" for d in found]
                diffs += [(state, d) for d in found]
            judged += compared
        record("object state", judged)  # the evidence: each object whose state after the call was compared
        self.observed += judged > 0
        if diffs:
            self.drifted += 1
            if self.first is None:
                self.first = (paired, observed, diffs)

    def failure(self, ctx) -> Failure:
        paired, observed, diffs = self.first
        callee = paired.call.callee
        names = callee.object_names()
        which = sorted({state.index for state, _ in diffs})
        culprits = ", ".join(_who(callee, k, names[k]) for k in which)
        received = "; ".join(f"{_who(callee, k, names[k])} in the state {ex.label}" for k, ex in enumerate(paired.examples))
        return Failure(
            f"after the op, the fake leaves {culprits} in a different state than C++ does: a traced program reads "
            "the fake's state afterwards where eager reads the C++ object's",
            cpp="; ".join(f"{names[s.index]} after: {_fields(flattened_pairs(s.real_after))}" for s in observed
                          if s.index in which),
            fake="; ".join(f"{names[s.index]} keeps: {_fields(s.fake_after.items())}" for s in observed if s.index in which),
            details=tuple([d for _, d in diffs] + [
                f"objects received: {received}",
                f"{self.drifted} of {self.observed} compared calls whose objects' states could be compared leave an "
                "object in a different state; the first is shown"]),
            example=_objects_code(paired), call=paired.call.code(),
            repro=ctx.call_repro(_examples(paired), paired.call, states=True), rule="custom_op.state-differs")

    def notes(self, ctx) -> list[Note]:
        """A note when some object's state could not be compared after the op (what was left out, and why)."""
        if not self.unjudged:
            return []
        return [Note(self.unjudged_text(ctx))]

    def unjudged_text(self, ctx) -> str:
        """What was not compared after the op and why, and what the user can give."""
        left = "; ".join(f"{k}: {why}" for k, why in list(self.unjudged.items())[:4]) or "the class has no fields"
        head = ("no object's state could be compared after the op" if not self.observed
                else "some fields were not compared after the op")
        if not any("the fake" in why for why in self.unjudged.values()):
            return f"{head} ({left})"
        return (f"{head} ({left}); give the fake an attribute named after each __obj_flatten__ key holding its "
                f"value (see {ctx.info.test_name}::roundtrip)")


def _who(callee, k: int, name: str) -> str:
    """Object ``k`` for messages, with the variable ``name`` the call and details use: ``caller_guard (argument
    1)``, or ``obj, passed as foo (argument 2)`` where the variable is not the argument's name."""
    text = callee.describe_object(k)
    return text if text.startswith(f"{name} ") else f"{name}, passed as {text}"


def _fields(items) -> str:
    return ", ".join(f"{k}={describe(v, 60)}" for k, v in items)
