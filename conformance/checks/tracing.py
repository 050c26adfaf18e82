"""Check ``tracing``, for both kinds of class: tracing a program leaves the caller's real object exactly as eager
would, that is, untouched: torch.compile, non-strict export and strict export trace the program before (or
instead of) running it, and nothing eager does happens while they trace.

Rule source: the issue torch users report beside a fake's own results. Strict export traces TorchBind method calls
on the real ``ScriptObject`` (``call_torchbind`` in ``torch/_higher_order_ops/torchbind.py`` warns "Tracing
torchbind method ... with real ScriptObject. This may cause the original object being mutated"), which left
FakeTensors inside an object; for Python custom classes, a ``USE_REAL`` member is evaluated on the real object
while compiling and an ``INLINED`` member's body is traced on it (``MemberType`` in
``torch/_library/opaque_object.py``), so an ``INLINED`` member that changes its object through a registered one
changes the caller's object at trace time (pytorch#187505 found such members and registered properties running on
real objects during tracing). A later call of the compiled program does not repeat the change, so the object
drifts from eager's.

One object (the first example state in which eager runs the call) and one program per method and custom op of a
TorchBind class (``obj.<method>(...)``, ``torch.ops.ns.op(..., obj, ...)``), and per custom op and registered
member of a Python custom class (``obj.<member>(...)``, ``obj.<member>``), with arguments from the argument
source. The program ``forward(obj, x)`` makes the call and returns ``x + 1`` (so torch.compile always hands a
graph to its backend; what the call returns is not this check's business: the matrix compares results). Stages,
each on a new object built the same way:

* ``compile``: ``torch.compile(program, fullgraph=True)`` with a backend that reads the object's state when it is
  handed the graph, that is after dynamo traced and before the graph runs (running it may change the object as
  eager does);
* ``export non-strict`` and ``export strict``: ``torch.export.export(program, (obj, x), strict=...)``, which
  traces only; the state after it.

The state is the flattened state (``__obj_flatten__``, else ``__getstate__``) of a TorchBind object, and
:func:`conformance.custom.state.state_of` of a custom object; it is compared with the state before. A stage that
cannot trace the program at all, without changing the object, is skipped and named in a note (the coverage matrix
reports why it cannot trace); a stage that changed the object and then raised fails with both. Programs that plain
eager rejects on every example object are not judged.

AOTInductor packaging is left out on purpose: ``torch._inductor.aoti_compile_and_package`` takes an
``ExportedProgram`` (``torch/_inductor/__init__.py``), whose tracing is the export stage this check already runs;
packaging lowers that graph with inductor, with the program's inputs as fake tensors and its objects as the
exported program's inputs or constants, and never calls the program's Python again, so it cannot reach the
caller's object in a way export did not. It costs 10-35 s per program.
"""

from __future__ import annotations

import copy
import itertools
import linecache
import math
import re
from collections.abc import Callable
from typing import Any, Union

import torch
import torch.utils._pytree as pytree

from ..core.evidence import record
from ..core.results import Failure, NotApplicable, Note, exception_line
from ..custom.context import CustomClassContext, same_value, show, state_of
from ..custom.state import snapshot
from ..engine.arguments import draw_fixed
from ..engine.compare import flat_state_differences
from ..engine.dynamo_state import skip_reason
from ..engine.values import ArgumentSet, Value
from ..matrix.backends.export_strict import LEFT_FAKE_TENSORS, fake_tensors_left
from ..torchbind.calls import Call, Callee
from ..torchbind.context import ClassContext
from ..torchbind.examples import comparable_state
from . import with_targets
from ..engine import torch_api

__all__ = ["tracing", "STAGES"]

#: The stages, in the order they run.
STAGES = ("compile", "export non-strict", "export strict")
_COUNTER = itertools.count()


class _Program:
    """One program: ``call`` (source of the call on ``obj``, its tensor arguments named ``a0``, ``a1``, ...),
    ``member`` (the method, op or member it calls), ``what`` (the same for a sentence), ``inputs`` (the values of
    ``a0``, ...), the namespace its other argument values need, ``build`` (a new object), ``example`` (source lines
    that build it into ``obj``) and ``origin`` (the TorchBind example or custom-class recipe it comes from, for
    reproducers)."""

    def __init__(self, call: str, member: str, what: str, inputs: tuple[Value, ...], namespace: dict[str, Any]):
        self.call, self.member, self.what, self.inputs = call, member, what, inputs
        names = "".join(f", a{i}" for i in range(len(inputs)))
        self.source = (f"class Program(torch.nn.Module):\n    def forward(self, obj, x{names}):\n        {call}\n"
                       "        return x + 1\n")
        filename = f"<tracing program {next(_COUNTER)}>"  # a code object of its own: dynamo's caches never mix
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        env = {"torch": torch, "math": math, **namespace}
        exec(compile(self.source, filename, "exec"), env)  # noqa: S307, S102 - source generated above
        self.module_class = env["Program"]
        self.build: Callable[[], Any] = lambda: None
        self.example, self.origin = "", None

    def on(self, build: Callable[[], Any], example: str, origin: Any) -> _Program:
        """This program over objects made by ``build`` (``example``: the source that builds one)."""
        self.build, self.example, self.origin = build, example, origin
        return self

    def args(self, obj: Any) -> tuple:
        """``forward``'s arguments, new: the object, ``x`` and the tensor arguments."""
        return (obj, torch.ones(2), *(v.make() for v in self.inputs))

    def eager(self, obj: Any) -> None:
        self.module_class()(*self.args(obj))

    def stage_lines(self, stage: str, state: str) -> list[str]:
        """Reproducer lines that print the object's state (``state``, source over ``obj``) before and after
        ``stage`` traces the program; for ``compile``, when the backend is handed the graph (before it runs)."""
        args = ", ".join(["obj", "torch.ones(2)", *(v.code for v in self.inputs)])
        lines = [f"print('before:', {state})"]
        if stage == "compile":
            return lines + ["def backend(gm, inputs):  # called once dynamo has traced, before the graph runs",
                            f"    print('traced:', {state})", "    return gm.forward", "",
                            f"torch.compile(Program(), backend=backend, fullgraph=True)({args})"]
        return lines + [f"torch.export.export(Program(), ({args},), strict={stage == 'export strict'})",
                        f"print('traced:', {state})"]


def _as_inputs(args: ArgumentSet) -> tuple[ArgumentSet, tuple[Value, ...], dict[str, Any]]:
    """``args`` with each tensor-valued argument (a tensor, a list of them, a TorchBind object) replaced by the name
    of a ``forward`` input (``a0``, ...), those inputs' values, and the names the other values' code needs. A
    tensor made inside the program would be a constant, and torch runs an op's real kernel on constant inputs
    while tracing (FakeTensor's constant propagation), which a program given tensors never does."""
    inputs: list[Value] = []

    def place(value: Value) -> Value:
        made = value.make()
        leaves = made if isinstance(made, (list, tuple)) else [made]
        if any(isinstance(v, (torch.Tensor, torch.ScriptObject)) for v in leaves):
            inputs.append(value)
            return Value(f"a{len(inputs) - 1}")
        return value

    placed = ArgumentSet(tuple(place(v) for v in args.args), tuple((k, place(v)) for k, v in args.kwargs))
    return placed, tuple(inputs), dict(args.extra)


class _Kind:
    """What differs between the kinds: how to read and compare an object's state, and the stages where torch itself
    documents that tracing reaches the real object (``known``: stage -> why, with its source), and where to look
    when reading the state changes it (``unstable_hint``, appended to that skip)."""

    def __init__(self, read: Callable[[Any], Any], differences: Callable[[Any, Any, str], list[str]],
                 known: dict[str, str] | None = None, unstable_hint: str = ""):
        self.read, self.differences, self.known = read, differences, known or {}
        self.unstable_hint = unstable_hint


#: Strict export calls a TorchBind object's methods on the real ScriptObject, with the fake tensors it traces with.
STRICT_EXPORT_REAL_OBJECT = (
    "torch's documented behaviour, not the class's: strict export traces TorchBind method calls on the real "
    "ScriptObject (torch/_higher_order_ops/torchbind.py, call_torchbind, warns 'Tracing torchbind method ... with "
    "real ScriptObject. This may cause the original object being mutated'; the coverage matrix's export_strict "
    "cells name it as the limitation strict-export-real-object or strict-export-fake-tensors); an object given "
    "to torch.export.export(..., strict=True) must not be used afterwards, or use non-strict export")


def _snapshot(state: Any) -> Any:
    """A copy of ``state`` that later changes to the object cannot reach (tensors cloned); a custom class's state
    (a dict) keeps its fields held by identity as they are (:func:`conformance.custom.state.snapshot`)."""
    if isinstance(state, dict):
        return snapshot(state)
    try:
        return copy.deepcopy(state)
    except Exception:  # noqa: BLE001 - an uncopyable value: clone the tensors, keep the rest
        return pytree.tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, state)


def _torchbind_differences(before: Any, after: Any, stage: str) -> list[str]:
    return fake_tensors_left(after) or flat_state_differences(before, after, "state", ("before", f"after {stage}"))


def _custom_differences(before: dict, after: dict, stage: str) -> list[str]:
    left = fake_tensors_left(after)
    if left:
        return left
    out = []
    for key in sorted(set(before) | set(after), key=str):
        if not same_value(before.get(key, _MISSING), after.get(key, _MISSING)):
            out.append(f"state {key}: before {_shown(before, key)}, after {stage} {_shown(after, key)}")
    return out


_MISSING = object()


def _shown(state: dict, key: str) -> str:
    return show(state[key]) if key in state else "(absent)"


def _run_stage(program: _Program, kind: _Kind, stage: str) -> tuple[list[str], str | None]:
    """``(differences, error)``: what tracing changed in a new object in ``stage``, and what the stage raised
    (``None``: it traced). Raises what building the object or reading its state raises."""
    obj = program.build()
    before = _snapshot(kind.read(obj))
    seen: list[Any] = []
    error = None
    try:
        if stage == "compile":
            def backend(gm, _inputs):  # handed the graph: dynamo has traced, nothing has run yet
                seen.append(_snapshot(kind.read(obj)))
                return gm.forward

            torch_api.dynamo_reset()
            try:
                torch.compile(program.module_class(), backend=backend, fullgraph=True)(*program.args(obj))
            finally:
                torch_api.dynamo_reset()
        else:
            torch.export.export(program.module_class(), program.args(obj), strict=stage == "export strict")
    except Exception as exc:  # noqa: BLE001 - a program the stage cannot trace: reported by the caller
        error = exception_line(exc, limit=300)
    after = seen[0] if seen else kind.read(obj)
    return kind.differences(before, after, stage), error


def _judge(programs: list[_Program], kind: _Kind, qualname: str, repro: Callable[[_Program, str], str],
           unjudged: list[str]) -> list[Failure | Note]:
    found: list[Failure | Note] = []
    skipped: list[str] = []
    compared = 0
    for program in programs:
        obj = program.build()
        first = kind.read(obj)
        unstable = kind.differences(first, kind.read(obj), "a read")  # the same object, read twice
        if unstable:  # reading the state changes it: no comparison can tell what tracing did
            unjudged.append(f"{program.call} (reading the object's state changes it: {unstable[0]}"
                            f"{kind.unstable_hint})")
            continue
        for stage in STAGES:
            diffs, error = _run_stage(program, kind, stage)
            if error is not None and not diffs:
                skipped.append(f"{stage} of {program.call} ({error})")
                continue
            record(f"{stage} state")
            compared += 1
            if not diffs:
                continue
            then = (f"then {stage} failed: {error}",) if error else ()
            changed = (f"{stage} changed the real object while tracing a program that calls {program.what} "
                       f"({_fields(diffs)})")
            if stage in kind.known:
                found.append(Note(f"{changed}: {kind.known[stage]}; " + "; ".join((*diffs, *then))))
                continue
            found.append(Failure(
                f"{changed}: eager never runs the traced code on the caller's object, so the object is no longer "
                "what eager would leave", target=program.member, example=program.example, call=program.call,
                details=(*diffs, *then), program=program.source, repro=repro(program, stage),
                rule="tracing.object-changed"))
            break  # the first stage that changes the object is the one to fix
    if not compared:
        why = "; ".join((skipped + unjudged)[:3]) or "there is no method, op or member to call"
        raise NotApplicable(f"no stage could trace a program over a {qualname} object, so nothing was compared: "
                            f"{why}; give example objects and arguments under which the class's calls can be "
                            "traced (@conformance.examples, conformance.strategy), or see the class's matrix items")
    notes = skipped + unjudged
    if notes:
        found.append(Note(f"not compared: {'; '.join(notes[:5])}"
                          + (f" (and {len(notes) - 5} more)" if len(notes) > 5 else "")))
    return found


def _fields(diffs: list[str]) -> str:
    """What the differences name, for the headline: ``level changed``, ``state[0][1][0] left a FakeTensor``."""
    out = []
    for d in diffs:
        if d.startswith(LEFT_FAKE_TENSORS):
            out += [f"{place} left a FakeTensor" for place in re.findall(r"(state\S*) is a FakeTensor", d)]
            continue
        head = d.split(":", 1)[0]
        out.append((head.replace("state ", "", 1) if head.startswith("state ") else head) + " changed")
    out = list(dict.fromkeys(out))
    return ", ".join(out[:4]) + (f" and {len(out) - 4} more" if len(out) > 4 else "")


# ----- TorchBind classes ----------------------------------------------------------------------------------------


def _torchbind_programs(ctx: ClassContext, unjudged: list[str]) -> list[_Program]:
    if not ctx.traces_with_real_object:
        # No fake class: torch cannot fakify the object, so no stage traces a program taking it and nothing would
        # be compared; the class's C++ methods are not called for nothing (on a fresh object some crash the process).
        ctx.require_fake()
    examples = ctx.require_examples()
    callees = [Callee.method(m) for m in ctx.info.user_methods if m != "tracing_mode"]
    callees += [Callee.of_op(op) for op in ctx.info.ops]
    programs = []
    for callee in callees:
        try:
            calls = ctx.calls_of(callee, limit=1)
        except NotApplicable as exc:  # excluded, or arguments that cannot be generated
            unjudged.append(f"{callee.label} ({exc})")
            continue
        if not calls:
            continue
        placed, inputs, namespace = _as_inputs(calls[0].args)
        call = Call(callee, placed)
        what = f"the op {callee.name}" if callee.op is not None else f"the method {callee.name}"
        program = _Program(call.code("obj"), callee.label, what, inputs, namespace)
        example, raised = _first_eager(program, examples)
        if example is None:
            unjudged.append(f"{call.code()} (plain eager raises on every example object: {raised})")
            continue
        programs.append(program.on(example.build, "\n".join(example.code("obj")), example))
    return programs


def _first_eager(program: _Program, sources: list) -> tuple[Any, str]:
    """The first of ``sources`` (examples or recipes, each with ``build()``) on which plain eager runs ``program``,
    and ``""``; or ``None`` and what eager raised on the last one, with the program's tensor arguments (an input
    the real class rejects is not judged, but the skip says which input it was)."""
    error: BaseException | None = None
    for source in sources:
        try:
            program.eager(source.build())
        except Exception as exc:  # noqa: BLE001 - an input the real class rejects: not judged
            error = exc
            continue
        return source, ""
    inputs = "; ".join(f"a{i} = {v.code}" for i, v in enumerate(program.inputs))
    raised = exception_line(error) if error is not None else "no object to try"
    return None, f"{raised}{f'; with {inputs}' if inputs else ''}"


def _torchbind_repro(ctx: ClassContext):
    def repro(program: _Program, stage: str) -> str:
        return ctx.repro(program.origin, [*program.source.splitlines(), "", "obj = make_obj()",
                                           *program.stage_lines(stage, "obj.__obj_flatten__()")])
    return repro


def _torchbind_read(ctx: ClassContext) -> Callable[[Any], Any]:
    return lambda obj: comparable_state(obj, ctx.tracer)[0]


# ----- Python custom classes ------------------------------------------------------------------------------------


def _custom_programs(ctx: CustomClassContext, unjudged: list[str]) -> list[_Program]:
    drawn_recipes = ctx.drawn(3, f"{ctx.info.name}:tracing")  # none built: the constructor's skip, not a program's
    # An object every factory call returns again, uncopyable: a change would reach the items after this one.
    recipes = [r for r in drawn_recipes if r.code not in ctx.shared]
    if not recipes:  # no object to try: no program is one eager rejected
        unjudged.append(f"the example objects ({', '.join(ctx.shared)}) are the same object on every factory call "
                        "and cannot be copied, so a change tracing made would reach the items after this one; "
                        "return new objects from the factory")
        return []
    candidates: list[_Program] = []
    refused: dict[_Program, str] = {}  # a program eager may reject, and what to say then
    for op in ctx.info.ops:
        try:
            drawn = draw_fixed(ctx.op_arguments(op), 1, f"{ctx.info.name}:tracing:{op.qualname}")
        except NotApplicable as exc:
            unjudged.append(f"{op.qualname} ({exc})")
            continue
        for args in drawn:
            placed, inputs, namespace = _as_inputs(args)
            candidates.append(_Program(ctx.call_code(op, placed, "obj"), op.short_name, f"the op {op.qualname}",
                                       inputs, namespace))
    for member, how in ctx.info.members.items():
        if member.startswith("__") and member.endswith("__"):
            continue
        what = f"the {how.upper()} member {member}"
        if not callable(getattr(ctx.info.cls, member, None)):
            candidates.append(_Program(f"obj.{member}", member, what, (), {}))
            continue
        try:
            strat = ctx.arguments_of(member)
        except NotApplicable as exc:  # no Python signature (a C method): called without arguments, if eager can
            candidates.append(_Program(f"obj.{member}()", member, what, (), {}))
            refused[candidates[-1]] = str(exc)
            continue
        if strat is None:
            unjudged.append(f"{member} (excluded by conformance.strategy)")
            continue
        for args in draw_fixed(strat, 1, f"{ctx.info.name}:tracing:{member}"):
            candidates.append(_Program(f"obj.{member}({args})", member, what, (), {}))
    programs = []
    for program in candidates:
        recipe, raised = _first_eager(program, recipes)
        if recipe is None:
            why = refused.get(program, f"plain eager raises on every object tried: {raised}")
            unjudged.append(f"{program.call} ({why})")
            continue
        programs.append(program.on(recipe.build, f"obj = {recipe.code}", recipe))
    return programs


def _custom_repro(ctx: CustomClassContext):
    def repro(program: _Program, stage: str) -> str:
        return ctx.repro([*program.source.splitlines(), "", program.example,
                          *program.stage_lines(stage, _state_source(program.build()))])
    return repro


def _state_source(obj: Any) -> str:
    """Source over ``obj`` that reads what :func:`state_of` reads of it with nothing but Python, for a reproducer
    that runs with torch and the user's module only: ``obj.__getstate__()`` where the class defines one, else its
    ``__dict__`` (fields the trace adds show too) and ``__slots__``, else the fields :func:`state_of` found, read
    with ``getattr`` (a C type's properties and members)."""
    cls = type(obj)
    if getattr(cls, "__getstate__", None) not in (None, getattr(object, "__getstate__", None)):
        return "obj.__getstate__()"
    declared = [vars(c).get("__slots__", ()) for c in cls.__mro__]
    slots = [s for names in declared for s in ((names,) if isinstance(names, str) else names)
             if s not in ("__dict__", "__weakref__")]
    parts = ([f"**{{k: getattr(obj, k) for k in {tuple(slots)!r} if hasattr(obj, k)}}"] if slots else []) + \
        (["**vars(obj)"] if hasattr(obj, "__dict__") else [])
    if parts:
        return "vars(obj)" if parts == ["**vars(obj)"] else "{" + ", ".join(parts) + "}"
    keys = tuple(k for k in state_of(obj) if isinstance(k, str) and k.isidentifier())
    return f"{{k: getattr(obj, k) for k in {keys!r} if hasattr(obj, k)}}"


# ----- the check --------------------------------------------------------------------------------------------------


def _targets(ctx) -> list[None]:
    """One item for a class with something a program can call on its object: a method or custom op of a TorchBind
    class; a custom op or registered member (dunders aside) of a Python custom class. None otherwise."""
    if isinstance(ctx, CustomClassContext):
        members = [m for m in ctx.info.members if not (m.startswith("__") and m.endswith("__"))]
        return [None] if ctx.info.ops or members else []
    return [None] if [m for m in ctx.info.user_methods if m != "tracing_mode"] or ctx.info.ops else []


@with_targets(_targets)
def tracing(ctx: Union[ClassContext, CustomClassContext], _target: None) -> list[Failure | Note]:
    """Tracing a program (torch.compile, export non-strict, export strict) leaves the caller's object untouched."""
    reason = skip_reason("tracing")
    if reason is not None:  # dynamo disabled: no stage would trace
        raise NotApplicable(reason)
    unjudged: list[str] = []
    if isinstance(ctx, CustomClassContext):
        programs = _custom_programs(ctx, unjudged)
        kind, repro = _Kind(state_of, _custom_differences), _custom_repro(ctx)
        qualname = ctx.info.name
    else:
        programs = _torchbind_programs(ctx, unjudged)
        kind = _Kind(_torchbind_read(ctx), _torchbind_differences, {"export strict": STRICT_EXPORT_REAL_OBJECT},
                     "; see the flatten check")
        repro = _torchbind_repro(ctx)
        qualname = ctx.info.qualname
    return _judge(programs, kind, qualname, repro, unjudged)
