"""A TorchBind class's coverage-matrix scenario: a program (Python source of a ``torch.nn.Module``, shown in failure
messages) over an object of the class, the objects of its two runs, and plain eager's reference — two runs on fresh
objects, the second on an object in another state (or, for an attribute, the same object again), whose outputs and
final states every backend must reproduce. Which rows a class has and how each scenario is chosen is
:mod:`conformance.matrix.torchbind.rows`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import linecache
import warnings
from typing import Any

import torch
import torch.utils._pytree as pytree

from ...core.results import NotApplicable
from ...engine.compare import unstable_paths, value_differences
from ...engine.values import ArgumentSet, Value
from ...torchbind.calls import Call
from ...torchbind.examples import Example, read_state, state_key
from .sweep import SweepRun, eager_sweep

__all__ = ["ProgramCall", "Scenario", "Reference", "NoEagerReference", "argument_objects", "tensor_values",
           "computed_lines", "floating_tensor", "mutation_line", "identity_line"]


@dataclasses.dataclass(frozen=True)
class ProgramCall:
    """One call in a program: a :class:`~conformance.torchbind.calls.Call` (``obj.<name>(args)``, or a custom op with the
    object at its schema position) and ``returns``, the schema's return type (``"Tensor"``, ``"int"``,
    ``"NoneType"``...)."""

    call: Call
    returns: str = "NoneType"

    @property
    def args(self) -> ArgumentSet:
        return self.call.args

    @property
    def op(self) -> Any:
        return self.call.callee.op

    @property
    def returns_none(self) -> bool:
        return self.returns == "NoneType"


@dataclasses.dataclass
class Reference:
    """Eager results: ``outputs[i]`` and ``states[i]`` (``__obj_flatten__`` after run ``i``), for runs 0 and 1;
    ``unstable``: the output positions (``run 0 output[1]``) whose tensor values differed between two identical
    eager runs (uninitialised memory, e.g. a method returning ``torch::empty``), which backends are held to by
    metadata only; ``traced[i]``: the output of one eager call of the program on a fresh object in the traced
    (first) state with run ``i``'s inputs — what a program that baked the traced object in would return — and
    ``traced_states[i]`` that object's state afterwards; ``argument_states[i]``: after run ``i``, the state of each
    other object the program was given (an op's second object of the class: :func:`argument_objects`)."""

    outputs: list[Any]
    states: list[Any]
    unstable: frozenset[str] = frozenset()
    traced: list[Any] = dataclasses.field(default_factory=list)
    traced_states: list[Any] = dataclasses.field(default_factory=list)
    argument_states: list[list[Any]] = dataclasses.field(default_factory=list)


def argument_objects(args: tuple, obj: Any) -> list[torch.ScriptObject]:
    """The objects of a TorchBind class among a program's arguments ``args`` (nested in lists or tuples too), the
    scenario's own object ``obj`` left out: what an op taking several objects was given besides it."""
    found: list[torch.ScriptObject] = []

    def walk(value: Any) -> None:
        if isinstance(value, torch.ScriptObject) and value is not obj:
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(args)
    return found


@dataclasses.dataclass
class Scenario:
    """A program over a TorchBind object and how to run it.

    ``placement`` is ``"input"`` (the object is ``forward``'s first argument) or ``"attr"`` (``self.obj``);
    ``first`` / ``second`` are the example states of the two runs (``second`` is ``first`` for ``attr``: the
    program then runs twice on the same, evolving object — unless ``swap``: before run 1 the program's attribute is
    set to a new object of ``second``, in another state, as a user swaps a compiled or exported module's attribute
    object; a row takes it where the same object run again cannot show a program that holds it baked in).
    ``tensor_inputs[i]`` holds run ``i``'s inputs (tensors and TorchBind objects) (``Value``s: fresh on every
    ``make``). ``dynamic``: tensor inputs get dynamic sizes. ``notes``: what a cell
    reports about how the scenario was chosen (e.g. why the dynamic row keeps a size torch specialises).
    """

    qualname: str
    row: str
    placement: str
    calls: tuple[ProgramCall, ...]
    first: Example
    second: Example
    tensor_inputs: tuple[tuple[Value, ...], tuple[Value, ...]]
    dynamic: bool = False
    notes: tuple[str, ...] = ()
    swap: bool = False
    kept: bool = False  # the row's scenario swaps, but this backend runs the same object again (unswapped)
    #: The other example objects the program runs on after runs 0 and 1 (:mod:`conformance.matrix.torchbind.sweep`).
    sweep: tuple[Example, ...] = ()
    #: Each floating-point tensor argument is computed inside the program (``torch.mm`` by a 1x1 one: the same
    #: values in a new buffer) before the call that takes it, and more computation of the same size follows the call
    #: (returned, so it stays in the program): a compiler that reuses the buffer the object was handed leaves other
    #: numbers in the object (:func:`computed_lines`).
    computed: bool = False
    #: Each floating-point tensor argument is changed in place by the program right after the call that takes it
    #: (``x0.add_(1)``; each element of a list): an object that keeps the tensor without a copy holds the changed
    #: values in eager, and a program that functionalizes the mutation away from what the object holds does not
    #: (the seed's "Aliasing and mutation" limitation, :func:`mutation_line`).
    mutated: bool = False
    #: Each tensor result is compared with ``is`` to each single tensor handed to the object before it, as the seed
    #: does (``x0 + 1 if r2 is x0 else x0 - 1``): eager compares the real tensors (a method that returns the tensor
    #: it kept gives the very object), tracing compares the tensors it traces with (the seed's "is operator").
    identity: bool = False

    # ----- the program --------------------------------------------------------------------------------------
    @functools.cached_property
    def source(self) -> str:
        """Python source of the ``Program`` module."""
        n_inputs = len(self.tensor_inputs[0])
        names = [f"x{i}" for i in range(n_inputs)]
        lines = ["class Program(torch.nn.Module):"]
        if self.placement == "attr":
            lines += ["    def __init__(self, obj):", "        super().__init__()", "        self.obj = obj", "",
                      f"    def forward(self{''.join(', ' + n for n in names)}):", "        obj = self.obj"]
        else:
            lines += [f"    def forward(self, obj{''.join(', ' + n for n in names)}):"]
        results, labels = [], []
        inputs = iter(names)
        handed: list[str] = []  # the single tensors handed to the object so far (for the identity row)
        for i, call in enumerate(self.calls):
            args, after, changed, before = [], [], [], list(handed)
            for value in (*call.args.args, *(v for _, v in call.args.kwargs)):
                arg = next(inputs) if _is_tensor_input(value) else value.code
                if self.computed and arg in names and floating_tensor(value):
                    (arg, handed), more = computed_lines(arg, listed=not isinstance(value.make(), torch.Tensor))
                    lines.append(f"        {handed}")
                    after.append(more)
                elif self.mutated and arg in names and floating_tensor(value):
                    changed.append(mutation_line(arg, listed=not isinstance(value.make(), torch.Tensor)))
                if self.identity and arg in names and isinstance(value.make(), torch.Tensor):
                    handed.append(arg)
                args.append(arg)
            pos = args[: len(call.args.args)]
            kws = [(k, a) for (k, _), a in zip(call.args.kwargs, args[len(call.args.args):])]
            target = call.call.callee.source("obj", pos, kws)
            if call.returns_none:
                lines.append(f"        {target}")
            else:
                lines.append(f"        r{i} = {target}")
                results.append(f"r{i}")
                labels.append(f"r{i} = {target}")
            # An out-variant op gives its result through the inputs it writes (Tensor(a!) out): the program
            # returns each of them, so every backend is held to what eager wrote.
            for name, source in call.call.callee.written_sources(len(pos), [k for k, _ in kws], sources=pos,
                                                                 keyword_sources=dict(kws)):
                if source in names and source not in results:
                    results.append(source)
                    labels.append(f"{source} after {target} (the argument {name!r} the op writes)")
            if self.identity and call.returns == "Tensor":
                for x in before:
                    compared = identity_line(f"r{i}", x)
                    results.append(f"({compared})")
                    labels.append(f"{compared} ({target} compared with is to {x}, handed to the object before)")
            lines += [f"        {line}" for line in changed]  # after the call: the tensor the object was handed
            for name, more in after:  # the same size again, after the object was handed the computed tensor
                lines.append(f"        {more}")
                results.append(name)
                labels.append(f"{more} (computed after {target}, the size of the tensor it was handed)")
        if not results:
            # Every call returns None: return a constant so each backend's program has an output (torch.export
            # save/load rejects a program without outputs, a limit unrelated to TorchBind).
            results, labels = ["torch.ones(1)"], ["the constant torch.ones(1)"]
        lines.append(f"        return ({''.join(r + ', ' for r in results)})")
        self.__dict__["output_labels"] = tuple(labels)
        return "\n".join(lines) + "\n"

    @property
    def output_labels(self) -> tuple[str, ...]:
        """What each output of the program is, by position: the line of :attr:`source` that computes it
        (``r2 = obj.pop()``), for failure messages."""
        self.source  # noqa: B018 - computes the labels with the source
        return self.__dict__["output_labels"]

    @functools.cached_property
    def module_class(self) -> type:
        """The ``Program`` class, compiled from :attr:`source` under a unique file name (so dynamo caches,
        keyed by code object, never mix two scenarios)."""
        filename = f"<torchbind program {self.qualname} {self.row}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        namespace: dict[str, Any] = {"torch": torch}
        exec(compile(self.source, filename, "exec"), namespace)  # noqa: S102 - source generated above
        return namespace["Program"]

    def module(self, obj: torch.ScriptObject | None) -> torch.nn.Module:
        """A fresh ``Program`` instance (holding ``obj`` for the attribute placement)."""
        return self.module_class(obj) if self.placement == "attr" else self.module_class()

    @property
    def has_object_input(self) -> bool:
        """Whether a TorchBind object is an input of the program: the scenario's object (the ``input``
        placement), or an object argument of one of its calls."""
        return self.placement == "input" or any(
            isinstance(x, torch.ScriptObject) for v in self.tensor_inputs[0] for x in pytree.tree_leaves(v.make()))

    def inputs(self, run: int) -> list[Any]:
        """Fresh tensor inputs of run 0 or 1."""
        return [v.make() for v in self.tensor_inputs[run]]

    def args(self, obj: torch.ScriptObject, run: int) -> tuple:
        """``forward`` arguments for run ``run`` (the object first for the input placement)."""
        xs = self.inputs(run)
        return tuple(xs) if self.placement == "attr" else (obj, *xs)

    def dynamic_shapes(self) -> Any:
        """``dynamic_shapes`` for ``torch.export.export``: every dim of every tensor input ``Dim.AUTO`` (lists of
        tensors get one spec per element)."""
        if not self.dynamic:
            return None

        def spec(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                return {d: torch.export.Dim.AUTO for d in range(value.dim())}
            if isinstance(value, torch.ScriptObject):
                return None
            return type(value)(spec(v) for v in value)

        dims = [spec(v.make()) for v in self.tensor_inputs[0]]
        return tuple(dims) if self.placement == "attr" else (None, *dims)

    # ----- eager reference ------------------------------------------------------------------------------------
    @functools.cached_property
    def unmutated(self) -> Reference | None:
        """For a :attr:`mutated` program, eager's :attr:`reference` of the same program without its in-place
        changes (what a backend that functionalizes them away from the object gives); ``None`` otherwise, and
        where eager rejects that program (computed once either way)."""
        if not self.mutated:
            return None
        try:
            return dataclasses.replace(self, mutated=False).reference
        except Exception:  # noqa: BLE001 - nothing to compare with
            return None

    @functools.cached_property
    def reference(self) -> Reference:
        """Outputs and states of plain eager runs (module called without any compilation), made three times —
        plainly, with torch's fill of uninitialised memory (:func:`_filling_uninitialised_memory`), and plainly
        after poisoning freed memory (:func:`_poison_freed_memory`): tensor outputs whose values differ between the
        first and either other are :attr:`Reference.unstable`. Sampling alone missed them: a run can read memory an
        earlier scenario left holding one value, and read it again the next time."""
        first = self._eager()
        others = []
        try:
            with _filling_uninitialised_memory():
                others.append(self._eager().outputs)
        except Exception:  # noqa: BLE001 - the class rejects the NaNs torch filled in: the poisoned run still tells
            pass
        _poison_freed_memory([first.outputs, *others])
        others.append(self._eager().outputs)
        unstable = frozenset(path for run in (0, 1) for other in others
                             for path in unstable_paths(first.outputs[run], other[run], f"run {run} output"))
        traced, traced_states = [], []
        for run in (0, 1):
            obj = self.first.build()
            with self.first.tracer.calling(f"the eager run of scenario {self.row} on {self.qualname} on an object in "
                                           f"the traced state with run {run}'s inputs"):
                traced.append(self.module(obj)(*self.args(obj, run)))
            traced_states.append(read_state(obj, self.first.tracer))
        return dataclasses.replace(first, unstable=unstable, traced=traced, traced_states=traced_states)

    @functools.cached_property
    def telling(self) -> bool:
        """Whether run 1 can show a stale program through a backend whose objects' states are compared
        (:meth:`tells`)."""
        return self.tells(states=True)

    def tells(self, states: bool) -> bool:
        """Whether run 1 can show a program that holds the traced object baked in: eager's run-1 output differs from
        :attr:`Reference.traced`'s (what a program that keeps the traced object's results gives); or, where the
        backend's objects' states are compared (``states``), eager's run 1 changes the state of the object it runs
        on: a program acting on the traced object (or replaying run 0) would leave it as it was. When none does, a
        backend that burns the traced object in passes too, and the cell cannot tell."""
        if self.output_changes:
            return True
        if not states:
            return False
        return self._run1_state_before != state_key(self.reference.states[1])

    @functools.cached_property
    def _run1_state_before(self) -> Any:
        """The state key of run 1's object before run 1: its example's for a new object (an input, a swapped
        attribute), else the one run 0 left on the same object."""
        if self.placement == "input" or self.swap:
            return state_key(read_state(self.second.build(), self.first.tracer))
        return state_key(self.reference.states[0])

    @property
    def output_changes(self) -> bool:
        """Whether eager's run-1 output differs from :attr:`Reference.traced`'s (the objects a row prefers)."""
        ref = self.reference
        return bool(value_differences(ref.traced[1], ref.outputs[1], "run 1 output", metadata_only=ref.unstable))

    def _eager(self) -> Reference:
        outputs, states, argument_states = [], [], []
        obj = self.first.build()
        mod = self.module(obj)
        for run in (0, 1):
            if run == 1 and self.placement == "input":
                obj = self.second.build()
            elif run == 1 and self.swap:  # the program's attribute set to another object
                obj = mod.obj = self.second.build()
            args = self.args(obj, run)
            with self.first.tracer.calling(f"the eager reference run {run} of scenario {self.row} on {self.qualname}"):
                outputs.append(mod(*args))
            states.append(read_state(obj, self.first.tracer))
            argument_states.append([read_state(o, self.first.tracer) for o in argument_objects(args, obj)])
        return Reference(outputs, states, argument_states=argument_states)

    @property
    def run1_object(self) -> str:
        """What run 1 runs on, in words: ``object`` (a new one), ``the same object again`` or, for :attr:`swap`,
        ``the program's attribute set to the object``."""
        if self.placement == "input":
            return "object"
        return "the program's attribute set to the object" if self.swap else "the same object again"

    @functools.cached_property
    def unswapped(self) -> Scenario:
        """This scenario with run 1 on the same object again (no :attr:`swap`): what a backend that runs its own
        copy of an attribute object (AOTInductor) runs."""
        return dataclasses.replace(self, second=self.first, swap=False, kept=True, sweep=()) if self.swap else self

    @functools.cached_property
    def sweep_reference(self) -> list[SweepRun]:
        """Plain eager on each of :attr:`sweep` (:func:`~conformance.matrix.torchbind.sweep.eager_sweep`)."""
        return eager_sweep(self)

    def code(self) -> str:
        """A readable description: the program and the objects of both runs."""
        first = "\n".join(self.first.code("obj"))
        second = "\n".join(self.second.code("obj"))
        inputs = [", ".join(v.code for v in run) for run in self.tensor_inputs]
        return (f"{self.source}\n# run 0: object\n{first}\n# run 0 inputs: {inputs[0] or '(none)'}\n"
                f"# run 1: {self.run1_object}\n"
                + ("" if self.placement == "attr" and not self.swap else second + "\n")
                + f"# run 1 inputs: {inputs[1] or '(none)'}\n"
                + "".join(f"# then, with run 1's inputs, on the example object:\n" + "\n".join(e.code("obj")) + "\n"
                          for e in self.sweep))


@contextlib.contextmanager
def _filling_uninitialised_memory():
    """Within: ``torch::empty`` and its kin fill what they allocate (NaN for floating dtypes, the dtype's largest
    value otherwise), as torch does under ``torch.use_deterministic_algorithms(True)`` with
    ``torch.utils.deterministic.fill_uninitialized_memory`` (``fill_empty_deterministic_`` in
    aten/src/ATen/native/TensorFactories.cpp); ``warn_only``, so an op without a deterministic kernel still runs,
    and its warning is silenced. Both settings are restored on exit."""
    import torch.utils.deterministic as deterministic

    was = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
           deterministic.fill_uninitialized_memory)
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        deterministic.fill_uninitialized_memory = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.use_deterministic_algorithms(was[0], warn_only=was[1])
        deterministic.fill_uninitialized_memory = was[2]


def _poison_freed_memory(runs: list[Any], copies: int = 8) -> None:
    """Allocate and free tensors like each tensor output of the last of ``runs`` (the outputs of earlier eager
    runs of one program, same structure), filled with a marker none of the runs read at that position
    (:func:`_marker_for`), so an uninitialised allocation of the same size in the next eager run (``torch::empty``)
    most likely gets memory holding the marker rather than the same bytes as before. A fixed marker is not
    enough: a run may itself get memory an earlier scenario poisoned with it, and two runs then agree on it."""
    for leaves in zip(*(pytree.tree_leaves(r) for r in runs)):
        t = leaves[-1]
        if isinstance(t, torch.Tensor) and t.numel() and not t.is_meta:
            with contextlib.suppress(Exception):
                held = [torch.full_like(t, _marker_for(leaves)) for _ in range(copies)]
                del held


def _marker_for(tensors: tuple[Any, ...]) -> Any:
    """A fill value, never NaN, that none of ``tensors`` (results of one output position) holds anywhere (for
    bool, one the last does not hold everywhere), so memory filled with it differs from their values at every
    position."""
    t = tensors[-1]
    if t.dtype == torch.bool:
        return not bool(t.all())
    # Never NaN: the NaN that torch's fill leaves (_filling_uninitialised_memory) must stay telling.
    candidates = ((-9.87654e5, 7.65432e5, 6.54321e-7, -5.4321e3) if t.is_floating_point() or t.is_complex()
                  else (-98765432, 87654321, -7654321, 6543210))
    flats = [x.detach().reshape(-1) for x in tensors if isinstance(x, torch.Tensor)]
    for marker in candidates:
        if not any(bool((f == marker).any()) for f in flats):
            return marker
    return candidates[0]


_INPUT_TYPES = (torch.Tensor, torch.ScriptObject)


def _is_tensor_input(value: Value) -> bool:
    """Whether an argument becomes an input of the program (a ``forward`` parameter) rather than a constant in
    its source: tensors, lists of tensors, and objects of TorchBind classes — which a traced program receives
    fakified (a ``FakeScriptObject``), as a fake method must expect."""
    made = value.make()
    if isinstance(made, _INPUT_TYPES):
        return True
    if isinstance(made, (list, tuple)) and any(isinstance(v, _INPUT_TYPES) for v in made):
        return True
    return False


def floating_tensor(value: Value) -> bool:
    """Whether an argument is one floating-point tensor, or a non-empty list (``Tensor[]``) of them: what
    :func:`computed_lines` computes (``torch.mm`` has no integer kernel on CUDA)."""
    made = value.make()
    if isinstance(made, (list, tuple)) and not isinstance(made, torch.Size):
        return bool(made) and all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in made)
    return isinstance(made, torch.Tensor) and made.is_floating_point()


def computed_lines(name: str, listed: bool = False) -> tuple[tuple[str, str], tuple[str, str]]:
    """The variables and lines of a :attr:`Scenario.computed` program for its input ``name``, as ``((variable,
    line), (variable, line))``: ``c_<name>``, the same values in a buffer the program computes (an extern kernel,
    which inductor allocates and may reuse), handed to the call in its place; and ``m_<name>``, twice them,
    computed after the call in a buffer of the same size. ``listed``: the input is a list of tensors
    (``Tensor[]``), each element computed so (a list comprehension, which dynamo unrolls)."""
    def mm(t: str, factor: str) -> str:
        return (f"torch.mm({t}.reshape(-1, 1), torch.full((1, 1), {factor}, dtype={t}.dtype, "
                f"device={t}.device)).reshape({t}.shape)")

    def each(factor: str) -> str:
        return f"[{mm('t', factor)} for t in {name}]" if listed else mm(name, factor)

    handed, more = f"c_{name}", f"m_{name}"
    return (handed, f"{handed} = {each('1.0')}"), (more, f"{more} = {each('2.0')}")


def identity_line(result: str, handed: str) -> str:
    """The output of an :attr:`Scenario.identity` program comparing ``result`` with the tensor ``handed`` with
    ``is``, as the seed's example does: ``x0 + 1 if r2 is x0 else x0 - 1``."""
    return f"{handed} + 1 if {result} is {handed} else {handed} - 1"


def mutation_line(name: str, listed: bool = False) -> str:
    """The line of a :attr:`Scenario.mutated` program that changes its input ``name`` in place after the call that
    took it: ``x0.add_(1)``, or for a list (``Tensor[]``) each element (``for t in x0: t.add_(1)``, which dynamo
    unrolls)."""
    return f"for t in {name}: t.add_(1)" if listed else f"{name}.add_(1)"


def tensor_values(calls: tuple[ProgramCall, ...]) -> tuple[Value, ...]:
    """The arguments of ``calls`` that become inputs of the program (:func:`_is_tensor_input`), in call order."""
    out = []
    for call in calls:
        out += [v for v in (*call.args.args, *(v for _, v in call.args.kwargs)) if _is_tensor_input(v)]
    return tuple(out)


class NoEagerReference(NotApplicable):
    """No example object lets plain eager run a row's program: ``program`` is the program (on the first example
    object), ``errors`` what eager raised, as ``"Type: first line (the call, on the example object ...)"``."""

    def __init__(self, row: str, program: str, errors: list[str], hint: str = ""):
        raised = f": {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "") if errors else ""
        super().__init__(f"plain eager raises on every example object for {row}{raised}; no reference to compare "
                         f"with{f'; {hint}' if hint else ''}")
        self.program, self.errors = program, errors
