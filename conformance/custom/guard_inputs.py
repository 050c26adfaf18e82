"""The inputs of the ``guards`` check (:mod:`conformance.checks.custom.guards`) on a constant (value) class: a stale result needs an equal pair *and* an input
that tells the pair apart, and the draw must not decide whether both were found.

Rule source: the ``guards`` check (:mod:`conformance.checks.custom.guards`): torch.compile guards a constant object
with ``__eq__``, so a pair that ``__eq__`` calls equal but an op gives different results for makes a compiled
program return a stale result. Whether the op's result shows a field at all depends on the op's other arguments:
a per-group scale cannot change the result of a one-element tensor. A search that drew the pair and the input
together by chance passed the same broken class on one run and failed it on the next (a new user's trial: a
quantization scheme whose ``__eq__`` forgot ``symmetric``, drawn on tensors of shape ``[1]`` and ``[1, 3, 1]``).
So the search:

* scores each draw with hypothesis's ``target()`` by how many of its one-argument variants changed the op's
  result, which steers generation toward inputs that tell the object's fields apart;
* keeps what it saw (:class:`Seen`): every input eager accepted, those on which a variant changed the result,
  and every pair ``__eq__`` called equal whose results matched; after the search each such pair is tried on the
  kept inputs, those that told a field apart first (:func:`crossed`), so the verdict rests on every input drawn,
  not on which input happened to be drawn with which pair;
* says in a note when no input told a field ``__eq__`` ignores apart (:func:`untold_notes`), as the matrix's cells
  say when their objects could not tell a stale program from a right one, instead of passing as if it had
  compared it.
"""

from __future__ import annotations

import dataclasses

from hypothesis import target

from ..core.evidence import record, uncounted
from ..core.results import NotApplicable, Note
from ..engine.compare import value_differences
from ..engine.values import ArgumentSet
from .context import CustomClassContext, Recipe, observed_source, positional_argument_names
from .discovery import CustomOpInfo
from .state import twin_differences

__all__ = ["Seen", "Finding", "equal_pair_violation", "crossed", "untold_notes", "ProgramCall", "program_call",
           "PAIRS", "INPUTS", "OBJECTS"]

#: Equal pairs (per field) and inputs tried against each other after the search: at most PAIRS x INPUTS eager
#: calls of the op per field, no compiling.
PAIRS = 8
INPUTS = 16
#: The objects drawn (the first ones) whose variants make more equal pairs after the search.
OBJECTS = 12
#: Objects and input sets drawn the same way on every run (seeded by the class and op, not by the search's seed)
#: that join the search's own after it: whether a field is told apart does not rest on the search's draws alone.
FIXED = 6

#: What a search found: ``(a_recipe, b_recipe, label, fields, args, result_a, result_b)``, ``a == b`` and the two
#: results differ (``label``: which constructor argument b took from another object, or ``"another object"``).
Finding = tuple


@dataclasses.dataclass
class Seen:
    """What a search learnt about the inputs of one op. ``inputs``: every argument set (by its source) on which
    eager accepted the drawn object, in drawing order; ``telling``: the sources of those on which an object
    differing from another in one field gave another result; ``told``: the fields some input told apart that way;
    ``unsure``: per field, the pairs ``__eq__`` called equal that differ in it and got the same result (``(a, b,
    label)``), which no input has told apart yet; ``objects``: the objects drawn that the op accepted (by
    source)."""

    inputs: dict[str, ArgumentSet] = dataclasses.field(default_factory=dict)
    telling: set[str] = dataclasses.field(default_factory=set)
    told: set[str] = dataclasses.field(default_factory=set)
    unsure: dict[str, list[tuple[Recipe, Recipe, str]]] = dataclasses.field(default_factory=dict)
    objects: dict[str, Recipe] = dataclasses.field(default_factory=dict)

    def keep_unsure(self, fields: list[str], pair: tuple[Recipe, Recipe, str]) -> None:
        for name in fields:
            pairs = self.unsure.setdefault(name, [])
            if len(pairs) < PAIRS and all((p[0].code, p[1].code) != (pair[0].code, pair[1].code) for p in pairs):
                pairs.append(pair)


def equal_pair_violation(ctx: CustomClassContext, op: CustomOpInfo, draw, seen: Seen) -> Finding | None:
    """One example of the search: ``draw`` = ``(a_recipe, donor_recipe, args)``; the first variant ``b`` of ``a``
    (:meth:`CustomClassContext.variants`) with ``a == b`` and another result, or ``None``. Records into ``seen``
    and scores the draw with ``target()`` (call it inside a hypothesis test only). Never raises for what the class
    or the op raise: an object the constructor or the op rejects is no input."""
    a_recipe, donor_recipe, args = draw
    with ctx.calling(lambda: f"{op.qualname} with equal {ctx.info.name} objects (from {a_recipe.code})"):
        a = a_recipe.build()
        try:
            ra = ctx.call_op(op, args, a)
        except Exception:  # noqa: BLE001 - the op rejects this object: no program of it runs, nothing to judge
            return None
        seen.inputs.setdefault(args.code(), args)
        seen.objects.setdefault(a_recipe.code, a_recipe)
        changed = 0
        for label, b_recipe in ctx.variants(a_recipe, donor_recipe):
            try:
                b = b_recipe.build()
            except Exception:  # noqa: BLE001 - arguments the constructor rejects: no object of the class
                continue
            try:
                rb = ctx.call_op(op, args, b)
            except Exception:  # noqa: BLE001 - an object the op rejects is no input: this pair is no evidence
                continue
            fields = twin_differences(a, b) or [label]
            if not (a == b):  # told apart by __eq__: torch's guard fails and the program is compiled again
                record("pair of objects told apart by __eq__")
                with uncounted():  # only to learn whether this input shows the fields: no verdict rests on it
                    if value_differences(ra, rb, "result"):
                        changed += 1
                        seen.telling.add(args.code())
                        if len(fields) == 1:
                            seen.told.update(fields)
                continue
            if value_differences(ra, rb, "result"):  # counted: a pair __eq__ calls equal, both results
                return a_recipe, b_recipe, label, twin_differences(a, b), args, ra, rb
            seen.keep_unsure(fields, (a_recipe, b_recipe, label))
        target(float(changed), label="variants of the object the input tells apart")
    return None


def crossed(ctx: CustomClassContext, op: CustomOpInfo, seen: Seen) -> Finding | None:
    """Equal pairs on the inputs the search kept, after it: the pairs it kept (``seen.unsure``) and those the
    objects it drew make with each other (:meth:`CustomClassContext.variants` of every two of the first
    :data:`OBJECTS`), at most :data:`PAIRS` per field, each on at most :data:`INPUTS` inputs (those that told a field
    apart first, then the shortest). Returns the first pair ``a == b`` with different results on one of them, or
    ``None``; the pairs made are added to ``seen.unsure`` (what :func:`untold_notes` reports). :data:`FIXED`
    objects (:meth:`CustomClassContext.drawn`) and argument sets (``ArgumentSource.fixed``), the same on every run,
    join those the search drew: a search whose objects all shared one value of a field (every ``symmetric=True``)
    or whose inputs could not show it would otherwise pass the class on that draw alone. Deterministic given
    ``seen``."""
    digest = f"{ctx.info.name}:guards:{op.qualname}"
    try:
        fixed = ctx.drawn(FIXED, digest)
    except NotApplicable:  # no object built this way: the search's own objects
        fixed = []
    try:
        for args in ctx.arguments.fixed(op.qualname, op.schema, op.positions[0], limit=FIXED):
            seen.inputs.setdefault(args.code(), args)
    except NotApplicable:  # no argument set drawn this way: the search's own inputs
        pass
    objects = list({r.code: r for r in [*list(seen.objects.values())[:OBJECTS], *fixed]}.values())
    for a_recipe in objects:
        for donor in objects:
            if donor is a_recipe:
                continue
            for label, b_recipe in ctx.variants(a_recipe, donor):
                try:
                    a, b = a_recipe.build(), b_recipe.build()
                    if not (a == b):
                        continue
                except Exception:  # noqa: BLE001 - arguments the constructor rejects: no object of the class
                    continue
                seen.keep_unsure(twin_differences(a, b) or [label], (a_recipe, b_recipe, label))
    order = sorted(seen.inputs.items(), key=lambda kv: (kv[0] not in seen.telling, len(kv[0]), kv[0]))
    candidates = [args for _, args in order[:INPUTS]]
    for name in sorted(seen.unsure, key=str):
        for a_recipe, b_recipe, label in seen.unsure[name]:
            for args in candidates:
                with ctx.calling(lambda: f"{op.qualname} with equal {ctx.info.name} objects {a_recipe.code} and "
                                         f"{b_recipe.code}"):
                    try:
                        a, b = a_recipe.build(), b_recipe.build()
                        ra, rb = ctx.call_op(op, args, a), ctx.call_op(op, args, b)
                    except Exception:  # noqa: BLE001 - inputs the class or the op reject: not compared
                        continue
                if value_differences(ra, rb, "result"):
                    return a_recipe, b_recipe, label, twin_differences(a, b), args, ra, rb
    return None


def untold_notes(ctx: CustomClassContext, op: CustomOpInfo, seen: Seen) -> list[Note]:
    """A note per field that ``__eq__`` ignored in some pair (``a == b``, the field differs) and no input the
    search kept told apart: the check could not tell whether a program compiled for ``a`` is right for ``b``."""
    short = ctx.info.cls.__qualname__
    notes = []
    for name in sorted(set(seen.unsure) - seen.told, key=str):
        a_recipe, b_recipe, _ = seen.unsure[name][0]
        n = len(seen.inputs)
        notes.append(Note(
            f"could not tell {name!r} apart: {short}.__eq__ calls objects equal that differ in {name!r} "
            f"({a_recipe.code} == {b_recipe.code}), and {op.qualname} gave them the same result on every input "
            f"tried ({n} input{'s' if n != 1 else ''}, e.g. {_sample(seen)}), so whether a program compiled for one "
            f"is right for the other was not judged. Not a finding: no result may depend on {name!r}; if one does "
            f"on other inputs, give them. " + ctx.arguments.hint(op.qualname)))
    return notes


def _sample(seen: Seen) -> str:
    """The first input kept, as source, shortened for a note."""
    code = next(iter(seen.inputs), "")
    return code if len(code) <= 120 else code[:117] + "..."


#: Names a reproducer's own lines use: an op's argument of one of these names is renamed (``w`` stays ``w``).
_TAKEN = frozenset({"torch", "math", "a", "b", "o", "obj", "twin", "program", "print", "sys"})


@dataclasses.dataclass(frozen=True)
class ProgramCall:
    """How a reproducer calls an op through a compiled program the way the check does: the op's other arguments
    are built first, outside the program, and passed in (the check calls the program with them as inputs; built
    inside the compiled function, a strategy's code such as ``torch.Generator().manual_seed(0)`` would be code
    dynamo is asked to trace, and the script would fail for its own reasons). ``setup``: the lines that build
    them; ``program``: the function to compile (source), taking them and ``o``."""

    setup: tuple[str, ...]
    program: str
    _names: tuple[str, ...]
    _keywords: tuple[tuple[str, str], ...]
    _position: int
    _op: str
    #: ``(argument name, input name)`` of each argument the op writes (``Tensor(a!)``): a call's source then shows
    #: them after the call, as :func:`~conformance.custom.context.observed_outputs` observes the check's calls.
    _written: tuple[tuple[str, str], ...] = ()

    def _observed(self, call: str) -> str:
        return observed_source(call, list(self._written))

    def call(self, fn: str, obj: str) -> str:
        """``fn`` (``program``, or the source of the eager function) called on the inputs and ``obj``: with the
        written arguments beside its result for an op that writes some."""
        names = list(self._names)
        names.insert(self._position, obj)
        return self._observed(f"{fn}({', '.join(names + [name for _, name in self._keywords])})")

    def eager(self, obj: str) -> str:
        """The op itself called in eager on the inputs and ``obj`` (source), as :meth:`call` shows it."""
        names = list(self._names)
        names.insert(self._position, obj)
        return self._observed(f"{self._op}({', '.join(names + [f'{k}={name}' for k, name in self._keywords])})")


def program_call(op: CustomOpInfo, args: ArgumentSet) -> ProgramCall:
    """The :class:`ProgramCall` of ``op`` on ``args`` (the object's own position left out), each input named after
    its parameter in the op's schema."""
    position = op.positions[0]
    params = [a.name for i, a in enumerate(op.schema.arguments) if i != position]
    used: set[str] = set()

    def name(wanted: str) -> str:
        out = wanted if wanted.isidentifier() else "x"
        while out in _TAKEN or out in used:
            out += "_"
        used.add(out)
        return out

    names = tuple(name(params[i] if i < len(params) else f"x{i}") for i in range(len(args.args)))
    keywords = tuple((k, name(k)) for k, _ in args.kwargs)
    setup = tuple(f"{n} = {v.code}" for n, v in zip(names, args.args)) + \
        tuple(f"{n} = {v.code}" for (_, n), (_, v) in zip(keywords, args.kwargs))
    ns, short = op.qualname.split("::")
    inside = list(names)
    inside.insert(position, "o")
    body = f"torch.ops.{ns}.{short}({', '.join(inside + [f'{k}={n}' for k, n in keywords])})"
    program = f"lambda {', '.join(inside + [n for _, n in keywords])}: {body}"
    positional = positional_argument_names(op, args)
    written = tuple((p, n) for p, n in zip(positional, names) if p in op.written) + \
        tuple((k, n) for k, n in keywords if k in op.written)
    return ProgramCall(setup, program, names, keywords, position, f"torch.ops.{ns}.{short}", written)
