"""The rows of a TorchBind class's coverage matrix, and the scenario of each (the calls, objects and inputs).

Rows, after the seed document's Coverage Matrix ("Custom Op with torchbind input", "obj.call_method",
"Dynamic shaped tensor in script object"):

* ``<method>``: ``obj.<method>(...)`` with schema-typed arguments, the object a ``forward`` input; a dunder
  method bound in C++ also gets a row through its Python operator (``operator.len``: ``len(obj)``,
  ``operator.eq``: ``obj == other``, see :data:`conformance.torchbind.calls.OPERATORS`);
* ``<op>``: a custom op that takes the object, the object a ``forward`` input;
* ``<op>.backward``: the gradients of the op's row, for an op with an autograd formula
  (:mod:`conformance.matrix.gradients`; its scenario: :mod:`conformance.matrix.torchbind.backward`);
* ``<method>.backward``: the gradients of a method's row, for a method taking and returning a tensor (its scenario,
  and why torch alone decides its cells: :mod:`conformance.matrix.torchbind.method_backward`);
* ``sequence`` / ``sequence.attr``: method calls that mutate then read the state (e.g. push, push, pop, size),
  with the object a ``forward`` input / a module attribute (a constant of the program). Ops have rows of their
  own; methods returning ``str`` are left out, since no backend can trace them (the ``non-tensor-op-result`` and
  ``str-result-export`` limitations), and so are methods the fake class lacks;
* ``tensors.attr``: the attribute sequence restricted to calls returning tensors or nothing, so that the
  attribute placement (the only one AOTInductor accepts) is seen apart from burned-in constants;
* ``dynamic``: the sequence with every tensor input dynamic (``dynamic=True`` / ``torch.export.Dim.AUTO``;
  its sizes: :mod:`conformance.matrix.torchbind.sizes`);
* ``dynamic.ops``: one call of each op taking the class and a tensor, with every tensor input dynamic (an op
  fake's symbolic-shape path runs only here), for a class with such ops.
* ``computed``: the ``tensors.attr`` calls (those returning tensors or nothing), the object an input, with each
  floating-point tensor it hands the object computed inside the program,
  then more computation of the same size after the call (:attr:`Scenario.computed`), for a class with a method
  taking a tensor or a list of them (each element computed): a compiler that reuses the buffer the object holds (inductor before torch 2.15,
  ``torch/_inductor/lowering.py`` ``with_effects``) leaves other numbers in the object, a silent wrong result.

* ``mutated``: the same calls, each floating-point tensor handed to the object changed in place by the program
  right after the call (:attr:`Scenario.mutated`): an object that keeps the tensor holds the change in eager; the
  seed's "Aliasing and mutation" limitation (aot_autograd functionalizes the mutation away from what the object
  holds).

* ``identity``: those calls up to the first returning a tensor after one that took a tensor, the result compared
  with ``is`` to each tensor handed to the object before (:attr:`Scenario.identity`, the seed's "is operator").

Each row's :class:`~conformance.matrix.torchbind.scenarios.Scenario` is chosen so that run 1's eager output differs
from the traced object's, where some example object allows it.
"""

from __future__ import annotations

import torch

from ...core.evidence import collecting
from ...core.results import NotApplicable, exception_line
from ...engine.jit_types import return_type
from ...torchbind.calls import OPERATORS, Callee
from ...torchbind.context import ClassContext, defined_on_fake
from ...torchbind.discovery import runs_on_fakes
from ...torchbind.examples import Example, read_state, state_key
from ..gradients import backward_row, has_backward
from .scenarios import NoEagerReference, ProgramCall, Scenario, floating_tensor, tensor_values
from .sizes import dynamic_inputs
from .sweep import sweep_objects

__all__ = ["row_names", "scenario", "method_backward_rows", "OP_PREFIX", "SEQUENCE", "SEQUENCE_ATTR", "TENSORS_ATTR",
           "DYNAMIC", "DYNAMIC_OPS", "COMPUTED", "MUTATED", "IDENTITY", "row_family"]

SEQUENCE, SEQUENCE_ATTR, TENSORS_ATTR, DYNAMIC = "sequence", "sequence.attr", "tensors.attr", "dynamic"
DYNAMIC_OPS, COMPUTED, MUTATED, IDENTITY = "dynamic.ops", "computed", "mutated", "identity"
_SEQUENCES = (SEQUENCE, SEQUENCE_ATTR, TENSORS_ATTR, DYNAMIC, DYNAMIC_OPS, COMPUTED, MUTATED, IDENTITY)
_HANDS_TENSORS = (COMPUTED, MUTATED)  # rows that change what the program hands the object
_DYNAMIC = (DYNAMIC, DYNAMIC_OPS)
# Results a program can return without anything being burned in as a constant (tensor lists are not: their
# length is fixed when tracing).
_TENSOR_RESULTS = ("Tensor", "Optional[Tensor]", "NoneType")
OP_PREFIX = "op."  # op rows are "op.<name>": an op may share its name with a method (for_each_add_)
_SKIPPED_METHODS = frozenset({"tracing_mode"})


def row_names(ctx: ClassContext) -> list[str]:
    """The scenario rows of a class, in report order (no objects are built): each method (dunder methods
    included, called explicitly: ``obj.__len__()``), each dunder again through its Python operator
    (``operator.len``: ``len(obj)``), each op, the backward row of each op with an autograd formula and of each
    method taking and returning a tensor (:func:`method_backward_rows`), then the sequences."""
    methods = [m for m in ctx.info.user_methods if m not in _SKIPPED_METHODS]
    operators = [Callee.python_operator(m).label for m in methods if m in OPERATORS]
    ops = [OP_PREFIX + op.short_name for op in ctx.info.ops]
    backward = [backward_row(OP_PREFIX + op.short_name) for op in ctx.info.ops if has_backward(op.qualname, op.schema)]
    sequences = [r for r in _SEQUENCES if (r != DYNAMIC_OPS or _dynamic_ops(ctx)) and
                 (r not in _HANDS_TENSORS or _takes_tensor(ctx)) and (r != IDENTITY or _identity_possible(ctx))]
    return methods + operators + ops + backward + method_backward_rows(ctx) + sequences


def method_backward_rows(ctx: ClassContext) -> list[str]:
    """The backward rows of the class's methods (``scale.backward``), read off the schemas alone, as rows are
    planned before any object is built: each method, dunders left out (called by name they are the
    ``explicit-dunder-call`` limitation), that takes a tensor and returns one. Where eager's output on the row's
    inputs does not require grad, the row's cells are n/a, saying so."""
    tensor = lambda t: "Tensor" in str(t)  # noqa: E731 - Tensor, Tensor?, Tensor[]
    return [backward_row(m) for m in _named_methods(ctx)
            if any(tensor(a.type) for a in ctx.info.methods[m].arguments[1:])
            and tensor(return_type(ctx.info.methods[m]))]


def _eager_ok(example: Example, calls: tuple[ProgramCall, ...], errors: list[str] | None = None) -> bool:
    """Whether the calls run in eager on a fresh object of ``example``; what raised goes to ``errors``."""
    doing = "building the object"
    try:
        obj = example.build()
        for call in calls:
            doing = call.call.code()
            with example.tracer.calling(lambda: f"{call.call.code()} on the example object {example.label}, trying the "
                                 "scenario in eager"):
                call.call.invoke(obj)
    except Exception as exc:  # noqa: BLE001 - the scenario is not valid in this state
        if errors is not None:
            errors.append(f"{exception_line(exc, limit=200)} ({doing}, on the example object {example.label})")
        return False
    return True


def _calls_for(ctx: ClassContext, name: str) -> list[tuple[ProgramCall, ...]]:
    """Candidate call lists for a single-method or single-op row (one per argument set)."""
    info = ctx.info
    op = next((o for o in info.ops if OP_PREFIX + o.short_name == name), None)
    dunder = next((m for m in info.methods if m in OPERATORS and Callee.python_operator(m).label == name), None)
    if op is not None:
        callee = Callee.of_op(op)
    elif dunder is not None:
        callee = Callee.python_operator(dunder)
    else:
        callee = Callee.method(name)
    returns = str(return_type(op.schema if op is not None else info.methods[callee.name]))
    if not ctx.arguments.depends_on_object(callee.name):
        return [(ProgramCall(call, returns),) for call in ctx.calls_of(callee)]
    # The adopter's strategy depends on the object: arguments drawn for each example state (an index within its
    # length), each variant then tried on every state.
    variants: dict[str, tuple[ProgramCall, ...]] = {}
    for example in ctx.require_examples():
        for call in ctx.calls_of(callee, example=example):
            variants.setdefault(call.code(), (ProgramCall(call, returns),))
    return list(variants.values())


def _sequence_calls(ctx: ClassContext, base: Example, tensors_only: bool = False) -> tuple[ProgramCall, ...]:
    """Calls that mutate then read the state: the first state-changing method twice, then every other method
    once, each kept only if eager runs it without raising in that state (greedy, on fresh objects).
    ``tensors_only`` keeps only methods returning a tensor or nothing."""
    # Dunder methods have rows of their own (explicit and through the operator), as ops do.
    methods = [m for m in row_names(ctx) if m in ctx.info.methods and not m.startswith("__")]
    fake = ctx.info.fake_class
    if fake is not None and not ctx.traces_with_real_object:
        # Methods the fake lacks fail their own rows (and the coverage check); a sequence of them would only
        # repeat that failure and hide how the rest of the class behaves.
        methods = [m for m in methods if defined_on_fake(fake, m)]
    methods = [m for m in methods if str(return_type(ctx.info.methods[m])) != "str"]
    if tensors_only:
        methods = [m for m in methods if str(return_type(ctx.info.methods[m])) in _TENSOR_RESULTS]
    candidates = {}
    for m in methods:
        try:
            candidates[m] = _calls_for(ctx, m)
        except NotApplicable:  # excluded by the adopter (conformance.strategy ... None), or no arguments
            continue
    methods = [m for m in methods if m in candidates]
    mutator = None
    for m in methods:
        variants = candidates[m]
        if not variants or not variants[0][0].args.args and not variants[0][0].args.kwargs:
            continue
        try:
            before = state_key(read_state(base.build(), base.tracer))
            obj = base.build()
            variants[0][0].call.invoke(obj)
        except Exception:  # noqa: BLE001
            continue
        if state_key(read_state(obj, base.tracer)) != before:
            mutator = m
            break
    calls: list[ProgramCall] = []
    if mutator is not None:
        variants = candidates[mutator]
        calls += [variants[0][0], variants[-1][0]]
    for name in methods:
        if name == mutator:
            continue
        for (call,) in candidates[name]:
            if _eager_ok(base, (*calls, call)):
                calls.append(call)
                break
    return tuple(calls)


def _up_to_identity(calls: tuple[ProgramCall, ...]) -> tuple[ProgramCall, ...]:
    """The calls of the ``identity`` row: the sequence up to its first call returning a tensor after a call that
    took a single tensor (``push(x0), push(x1), pop()``), or ``()`` where there is none."""
    took = False
    for n, call in enumerate(calls):
        if took and call.returns == "Tensor":
            return calls[:n + 1]
        took = took or any(isinstance(v.make(), torch.Tensor) for v in tensor_values((call,)))
    return ()


def _named_methods(ctx: ClassContext) -> list[str]:
    """The class's methods a program calls by name, read off the schemas: dunders (rows of their own, through their
    operator) and :data:`_SKIPPED_METHODS` left out."""
    return [m for m in ctx.info.user_methods if m not in _SKIPPED_METHODS and not m.startswith("__")]


def _takes(ctx: ClassContext, accepts) -> bool:
    """Whether some named method (:func:`_named_methods`) has an argument whose schema type ``accepts``."""
    return any(accepts(a.type) for m in _named_methods(ctx) for a in ctx.info.methods[m].arguments[1:])


def _is_tensor(t) -> bool:
    return t.isSubtypeOf(torch.TensorType.get())


def _identity_possible(ctx: ClassContext) -> bool:
    """Whether a method takes a tensor and one returns a tensor (read off the schemas), as ``identity`` needs."""
    return any(str(return_type(ctx.info.methods[m])) == "Tensor" for m in _named_methods(ctx)) and \
        _takes(ctx, _is_tensor)


def _takes_tensor(ctx: ClassContext) -> bool:
    """Whether a method of the class takes a tensor or a list of them (read off the schemas), as the ``computed``
    and ``mutated`` rows need."""
    return _takes(ctx, lambda t: _is_tensor(t) or isinstance(t, torch.ListType) and _is_tensor(t.getElementType()))


def row_family(row: str) -> str:
    """The kind of program a row runs, in words, for a torch defect's signature
    (:func:`~conformance.matrix.cell.defect_signature`): the same for a row of any class."""
    if row.endswith(".backward"):
        return "the gradients of a call"
    if row in _SEQUENCES:
        return {COMPUTED: "tensors computed in the program handed to the object, then more of the same size",
                MUTATED: "tensors handed to the object, then changed in place by the program",
                IDENTITY: "a returned tensor compared with is to the tensor handed to the object",
                SEQUENCE_ATTR: "a sequence of calls on an attribute object",
                TENSORS_ATTR: "a sequence of calls on an attribute object"}.get(row, f"the {row} sequence of calls")
    return "one op call" if row.startswith(OP_PREFIX) else "one method call"


def _dynamic_ops(ctx: ClassContext) -> list:
    """The ops the ``dynamic.ops`` row calls, read off their schemas: those taking a tensor, with a Python fake (an
    op without one fails its own row)."""
    return [op for op in ctx.info.ops if runs_on_fakes(op) and any("Tensor" in str(a.type) for a in op.schema.arguments)]


def _op_calls(ctx: ClassContext, base: Example) -> tuple[ProgramCall, ...]:
    """The ``dynamic.ops`` row's calls: one call of each of :func:`_dynamic_ops`, the first argument set eager runs
    after the calls so far. An op fake's symbolic-shape path (output sizes computed from SymInts, as
    Torch-TensorRT's ``execute_engine`` fake computes them) runs only on dynamic inputs."""
    added: list[ProgramCall] = []
    for op in _dynamic_ops(ctx):
        try:
            variants = _calls_for(ctx, OP_PREFIX + op.short_name)
        except NotApplicable:  # excluded by the adopter, or no arguments
            continue
        for (call,) in variants:
            if _eager_ok(base, (*added, call)):
                added.append(call)
                break
    return tuple(added)


def _state_differs(a: Example, b: Example) -> bool:
    try:
        return state_key(read_state(a.build(), a.tracer)) != state_key(read_state(b.build(), b.tracer))
    except Exception:  # noqa: BLE001
        return False


def scenario(ctx: ClassContext, row: str) -> Scenario:
    """The :class:`Scenario` of a row of ``ctx``'s class, cached in the context (the backend cells of a row
    share it; :meth:`conformance.runner.Engine.clear` drops it with the context).

    Raises :class:`NotApplicable` when no example state lets plain eager run the row's program.
    """
    cached = ctx.scenarios.get(row)
    if cached is None:
        with collecting():  # choosing the objects compares eager with eager: no backend's evidence
            cached = ctx.scenarios[row] = _build_scenario(ctx, row)
    return cached


def _build_scenario(ctx: ClassContext, row: str) -> Scenario:
    qualname = ctx.info.qualname
    examples = ctx.require_examples()
    if row in _SEQUENCES:
        base = examples[0]
        calls = _op_calls(ctx, base) if row == DYNAMIC_OPS else _sequence_calls(ctx, base,
                                                                                 tensors_only=row in (TENSORS_ATTR,
                                                                                                      *_HANDS_TENSORS,
                                                                                                      IDENTITY))
        if not calls:
            what = ("no method that returns a tensor or nothing" if row == TENSORS_ATTR
                    else "no op taking the class and a tensor" if row == DYNAMIC_OPS
                    else "no method of the class that the fake class defines and that returns no str")
            raise NotApplicable(f"{what} runs in eager on the example objects")
        variants = [calls]
        if row in _HANDS_TENSORS and not any(floating_tensor(v) for v in tensor_values(calls)):
            what = "compute in the program" if row == COMPUTED else "change in place after the call"
            raise NotApplicable(f"no call of the sequence takes a floating-point tensor to {what}")
        if row == IDENTITY:
            calls = _up_to_identity(calls)
            if not calls:
                raise NotApplicable("no call of the sequence returns a tensor after one that takes a tensor")
            variants = [calls]
    else:
        variants = _calls_for(ctx, row)
    placement = "attr" if row in (SEQUENCE_ATTR, TENSORS_ATTR) else "input"
    fallback, errors = None, []
    for calls in variants:
        valid = [e for e in examples if _eager_ok(e, calls, errors)]
        xs = tensor_values(calls)
        inputs = dynamic_inputs(xs) if row in _DYNAMIC else [(xs, xs, ())]
        for first in valid[:_FIRSTS]:
            for second, swap in _seconds(first, valid, placement):
                for run0, run1, notes in inputs:
                    # Every other example the row's calls run on, where each run can take a new object.
                    sweep = sweep_objects((first, second), valid) if placement == "input" or swap else ()
                    scn = Scenario(qualname, row, placement, calls, first, second, (run0, run1),
                                   dynamic=row in _DYNAMIC, notes=notes, swap=swap, sweep=sweep,
                                   computed=row == COMPUTED, mutated=row == MUTATED, identity=row == IDENTITY)
                    try:
                        scn.reference  # noqa: B018 - eager must run the program itself (module-level code paths)
                    except Exception as exc:  # noqa: BLE001
                        errors.append(f"{exception_line(exc, limit=200)} (the program, on the example object "
                                      f"{first.label})")
                        continue
                    if scn.telling:
                        return scn
                    fallback = fallback or scn
                    break  # other inputs only matter when eager rejects these
    if fallback is not None:
        return fallback
    xs = tensor_values(variants[0]) if variants else ()
    program = Scenario(qualname, row, placement, variants[0], examples[0], examples[0], (xs, xs)).code() \
        if variants else ""
    raise NoEagerReference(row, program, errors, hint=f"give example objects in states where the row's calls run "
                           f"(@conformance.examples({qualname!r})) or arguments they accept (conformance.strategy)")


_FIRSTS = 4  # traced objects tried, in example order, for a pair whose eager outputs differ


def _seconds(first: Example, valid: list[Example], placement: str) -> list[tuple[Example, bool]]:
    """Run 1's candidate objects, each with whether the program's attribute is swapped for it
    (:attr:`Scenario.swap`): for the input placement, the objects in another state than ``first`` — those reached
    by method calls (whose contents, not just their constructor arguments, differ) first — else ``first`` itself;
    for an attribute, ``first`` (the program runs again on the same, evolved object), then those others swapped
    in."""
    others = [e for e in valid if e is not first and _state_differs(first, e)]
    others.sort(key=lambda e: len(e.steps) == len(first.steps))  # stable: derived states first
    if placement == "attr":
        return [(first, False)] + [(e, True) for e in others]
    return [(e, False) for e in others] or [(first, False)]
