"""Per-class state shared by the checks: discovery, examples, fakification, calls on both sides, reproducers."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from ..engine import torch_api
from ..engine.torch_api import maybe_to_fake_obj
from ..engine.torch_api import FakeTensorMode

from ..engine.arguments import ArgumentSource
from ..engine.compare import CallResult
from .calls import Call, Callee
from .discovery import ClassInfo, qualname_of
from .examples import Example, ExampleSet, build_examples, read_state, script_name
from ..core.faults import raise_fault
from ..engine.reproducers import self_judging_tail
from ..core.results import NotApplicable
from ..core.breadcrumbs import Tracer
from ..core.registry import Registry
from ..core.settings import Settings
from ..engine.values import ArgumentSet, Value

__all__ = [
    "new_fake_mode", "to_fake", "import_lazily_imported_modules", "ClassContext", "CallResult",
    "quiet_torch_logs", "defined_on_fake", "PairedCall", "ObjectState", "kept_fields", "UNREADABLE",
]


def new_fake_mode() -> FakeTensorMode:
    """A ``FakeTensorMode`` with a ``ShapeEnv``, as dynamo and export use, so fakes that allocate data-dependent
    sizes (``torch.library.get_ctx().new_dynamic_size()``) work."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv  # imports sympy: only when a fake mode is made

    return FakeTensorMode(shape_env=ShapeEnv())


def import_lazily_imported_modules() -> None:
    """Import what torch imports on the first fakification: ``maybe_to_fake_obj`` pulls in ``torch._dynamo``
    (seconds). The isolation supervisor calls this before forking workers, so no timed call pays for it."""
    torch_api.resolve("dynamo")


def to_fake(mode: FakeTensorMode, value: Any, tracer: Tracer | None = None) -> Any:
    """``value`` (a pytree of arguments) as a fake method or op receives it while tracing: every tensor a fake
    tensor with the same, static, metadata, and every TorchBind object fakified (a ``FakeScriptObject``, through
    ``maybe_to_fake_obj`` under ``mode``). An object that cannot be fakified is passed as it is (its own
    ``fake_class`` / ``roundtrip`` items say why). ``tracer``: where the fakification is reported (default:
    nowhere)."""

    def convert(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return mode.from_tensor(x, static_shapes=True)
        try:
            return _fakify(x, mode, tracer or Tracer())
        except Exception:  # noqa: BLE001 - not fakifiable: see the docstring
            return x

    return pytree.tree_map_only((torch.Tensor, torch.ScriptObject), convert, value)


@contextlib.contextmanager
def quiet_torch_logs():
    """Silence torch's fake-class warnings (missing fake methods, tensor aliasing): checks report those."""
    logger = logging.getLogger("torch._library.fake_class_registry")
    old = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(old)


#: A fake's value under a flattened key that could not be read (no such attribute, or its getter raised).
UNREADABLE = type("Unreadable", (), {"__repr__": lambda self: "(unreadable)"})()


def kept_fields(fake_obj: Any, flattened: Any, mode: FakeTensorMode) -> dict[str, Any]:
    """What the fake (``fake_obj``, or the instance a ``FakeScriptObject`` wraps) keeps under each key of
    ``flattened``: its attribute of that name, as torch.compile reads it (``getattr(fake, key)``,
    ``torch/_dynamo/output_graph.py``), called under ``mode`` when it is a getter; containers copied, so a later
    in-place change does not reach the snapshot; :data:`UNREADABLE` where it cannot be read."""
    wrapped = getattr(fake_obj, "wrapped_obj", fake_obj)
    out: dict[str, Any] = {}
    try:
        keys = [key for key, _ in flattened if isinstance(key, str)]
    except (TypeError, ValueError):
        return out
    for key in keys:
        try:
            value = getattr(wrapped, key)
            if callable(value) and not isinstance(value, torch.Tensor):
                with mode, quiet_torch_logs():
                    value = value()
            out[key] = pytree.tree_map(lambda x: x, value)
        except Exception:  # noqa: BLE001 - a missing attribute (the roundtrip check reports it) or a raising getter
            out[key] = UNREADABLE
    return out


@dataclasses.dataclass
class PairedCall:
    """One call made on both sides by :meth:`ClassContext.pairs`: each object's example state, the ``call``, what
    each side did, the objects (the fakes made under ``mode``), and per object its flattened state ``before`` the
    call and what its fake ``kept`` under those keys then (:func:`kept_fields`)."""

    examples: tuple[Example, ...]
    call: Call
    real: CallResult
    fake: CallResult
    real_objects: tuple[Any, ...]
    fake_objects: tuple[Any, ...]
    before: tuple[Any, ...]
    kept: tuple[dict[str, Any], ...]
    mode: FakeTensorMode

    @property
    def example(self) -> Example:
        """The state of the first object."""
        return self.examples[0]


@dataclasses.dataclass
class ObjectState:
    """Object ``index`` of a :class:`PairedCall` (:meth:`ClassContext.observe`): the real object's flattened
    state and what its fake keeps under those keys (:func:`kept_fields`), before and after the call."""

    index: int
    real_before: Any
    real_after: Any
    fake_before: dict[str, Any]
    fake_after: dict[str, Any]


class ClassContext:
    """Everything the checks need about one class: its :class:`~conformance.torchbind.discovery.ClassInfo`, and its example
    objects (built lazily, cached), with what the engine (:class:`conformance.runner.Engine`) hands it:
    ``settings`` (:class:`~conformance.core.settings.Settings`), ``registry`` (the adopter's factories and
    strategies), ``tracer`` (where calls into the class are reported, :mod:`conformance.core.breadcrumbs`) and
    ``lookup`` (``ns::Cls`` -> that class's context, for arguments typed as another TorchBind class; raises
    ``KeyError`` for a class torch does not know). ``scenarios`` caches the class's coverage-matrix scenarios
    (:func:`conformance.matrix.torchbind.rows.scenario`). ``kind`` is ``"torchbind"``: the checks registered for
    TorchBind classes apply."""

    kind = "torchbind"

    def __init__(self, info: ClassInfo, settings: Settings, registry: Registry, tracer: Tracer,
                 lookup: Callable[[str], ClassContext]):
        self.info = info
        self.settings, self.registry, self.tracer, self.lookup = settings, registry, tracer, lookup
        self.scenarios: dict[str, Any] = {}
        #: Matrix cells already run, by (program and objects as source, dynamic shapes, the Backend): two rows whose
        #: programs are the same are compiled once (:meth:`conformance.matrix.cell.Rows.run_cell`).
        self.cells_by_program: dict[tuple[str, bool, Any], Any] = {}
        self._examples: ExampleSet | None = None
        self._building = False
        self._real: bool | None = None
        #: Where every caller gets arguments for this class's methods and ops (:mod:`conformance.engine.arguments`).
        self.arguments = ArgumentSource(info.qualname, registry, self.class_values)

    def calling(self, label: str | Callable[[], str], *, timed: bool = True, side: str | None = None):
        """``with ctx.calling(label, timed=..., side=...):`` around a call into the class's code: the engine's
        tracer's :meth:`~conformance.core.breadcrumbs.Tracer.calling` (a no-op outside a worker process)."""
        return self.tracer.calling(label, timed=timed, side=side)

    def class_values(self, script_qualname: str) -> list[Value]:
        """Values that build an object of the TorchBind class ``__torch__.torch.classes.ns.Cls`` (its first
        example), for arguments typed as a class (a :data:`conformance.engine.values.ClassResolver`); empty when that
        class has no examples or is unknown."""
        try:
            ctx = self.lookup(qualname_of(script_qualname))
        except Exception:  # noqa: BLE001 - unknown class: no values
            return []
        if ctx._building:
            # A constructor needing its own class: only the examples built so far (none for the constructor).
            return []
        exset = ctx.example_set
        return [exset.examples[0].as_value()] if exset.examples else []

    # ----- examples -------------------------------------------------------------------------------------------
    @property
    def example_set(self) -> ExampleSet:
        if self._examples is None:
            self._building = True
            try:
                registry, qualname = self.registry, self.info.qualname
                self._examples = build_examples(self.info, registry.factories(qualname), resolver=self.class_values,
                                                derive=registry.derives(qualname), arguments=self.arguments,
                                                tracer=self.tracer)
            finally:
                self._building = False
        return self._examples

    @property
    def examples_lost(self) -> bool:
        """Whether preparing the examples left one out because building it crashed or hung a worker process
        (:attr:`~conformance.torchbind.examples.ExampleSet.lost`); ``False`` before they are built."""
        return self._examples is not None and bool(self._examples.lost)

    def require_examples(self) -> list[Example]:
        """The examples, or :class:`NotApplicable` pointing at the ``examples`` item when there are none."""
        exset = self.example_set
        if not exset.examples:
            raise NotApplicable(f"no example objects of {self.info.qualname} (see {self.info.test_name}::examples)")
        return exset.examples

    @property
    def traces_with_real_object(self) -> bool:
        """True when the class defines ``tracing_mode()`` and it returns ``"real"`` on the first example: torch
        then traces with the real object and never fakifies it (``torch/_library/fake_class_registry.py``,
        ``tracing_with_real``), so a fake class, if any, is never called. Cached; ``False`` when it raises (the
        ``tracing_mode`` check reports that)."""
        if self._real is None:
            self._real = False
            if "tracing_mode" in self.info.methods and self.example_set.examples:
                try:
                    obj = self.example_set.examples[0].build()
                    with self.calling(f"{self.info.qualname}.tracing_mode()"):
                        self._real = obj.tracing_mode() == "real"
                except Exception:  # noqa: BLE001 - the tracing_mode check reports it
                    self._real = False
        return self._real

    def require_fake(self) -> type:
        """The fake class, or :class:`NotApplicable` when torch never uses one (``tracing_mode()`` returns
        ``"real"``) or none is registered (pointing at the ``fake_class`` item)."""
        if self.traces_with_real_object:
            raise NotApplicable(f"{self.info.qualname}.tracing_mode() returns \"real\": torch traces with the real "
                                "object and never calls a fake, so there is no fake to check (flatten, deepcopy "
                                "and the coverage matrix still run)")
        fake = self.info.fake_class
        if fake is None:
            raise NotApplicable(f"no fake class registered for {self.info.qualname} "
                                f"(see {self.info.test_name}::fake_class)")
        return fake

    def require_fake_method(self, method: str):
        fake = self.require_fake()
        if not defined_on_fake(fake, method):
            raise NotApplicable(f"the fake class does not define {method} (see {self.info.test_name}::"
                                f"coverage[{method}])")
        return getattr(fake, method)

    # ----- calls --------------------------------------------------------------------------------------------
    def fakify(self, obj: torch.ScriptObject, mode: FakeTensorMode, state: str | None = None):
        """``maybe_to_fake_obj(mode, obj)``, as dynamo and AOTAutograd do before tracing. ``state`` (the example
        object's label) names the object in the breadcrumb a crash or hang is reported with. A ``BaseException``
        that is not an ``Exception`` (from the fake's ``__obj_unflatten__``) is raised on as a
        :class:`~conformance.core.faults.UserFault` of the fake."""
        return _fakify(obj, mode, self.tracer, state)

    def call_real(self, obj: torch.ScriptObject, call: Call) -> CallResult:
        """Run ``call`` on the real object (a sequence of them for a callee of several objects) with fresh
        arguments; C++ errors are captured in the result."""
        return _invoke(call, obj, None, self.tracer,
                       label=lambda: call.code(script_name(obj) if call.callee.objects == 1 else None))

    def call_fake(self, fake_obj, mode: FakeTensorMode, call: Call) -> CallResult:
        """Run ``call`` on a fakified object (a sequence of them for a callee of several objects) under ``mode``
        — the ``call_torchbind`` path used while tracing — with fresh arguments whose tensors were converted
        with ``mode.from_tensor``."""
        return _invoke(call, fake_obj, mode, self.tracer, label=lambda: (
            f"{call.code('fake_obj')} on the fake" if call.callee.objects == 1 else f"{call.code()} on the fakes"))

    def calls_of(self, callee: Callee, limit: int = 3, example: Example | None = None) -> list[Call]:
        """:class:`Call` objects of a method or an op with arguments from the class's argument source
        (:meth:`conformance.engine.arguments.ArgumentSource.fixed`: the adopter's strategies where registered, else
        generated): for calls on an object in ``example``'s state (default: the first example, used only when
        a strategy depends on the object). Raises :class:`~conformance.engine.arguments.Excluded` for a callee the
        adopter excluded, :class:`NotApplicable` for an argument type without a generator."""
        schema = callee.schema if callee.op is not None else self.info.methods[callee.name]
        obj, state = None, ""
        if self.arguments.depends_on_object(callee.name):
            example = example or self.require_examples()[0]
            obj, state = example.build(), example.label
        sets = self.arguments.fixed(callee.name, schema, callee.position, limit, obj, state)
        return [Call(callee, callee.without_objects(args)) for args in sets]

    def paired_calls(self, callee: Callee):
        """Yield ``(example, call, real, fake)`` for every example and argument set of a method or an op: the
        :class:`PairedCall` records of :meth:`pairs`, as tuples (``example`` the state of the first object)."""
        for paired in self.pairs(callee):
            yield paired.example, paired.call, paired.real, paired.fake

    def pairs(self, callee: Callee):
        """Yield a :class:`PairedCall` for every example and argument set of a method or an op.

        Each pair of calls runs on fresh real objects and on fakes of others built the same way (:meth:`fakify`,
        one new ``FakeTensorMode``, as dynamo fakifies a program's inputs). Object ``k`` of a callee of several
        (:meth:`Callee.layouts`) is in the state of example ``i + k`` (cycling) for example ``i``; an object passed
        twice is one object (and one fake). Examples that cannot be built or fakified are skipped (the
        ``examples`` / ``roundtrip`` checks report them); arguments come from :meth:`calls_of` for the first
        object's state. Raises :class:`~conformance.engine.arguments.Excluded` for an excluded callee, and
        :class:`NotApplicable` when no example object could be fakified.
        """
        examples = self.require_examples()
        fakified = drawn = 0
        for i, example in enumerate(examples):
            states = tuple(examples[(i + k) % len(examples)] for k in range(callee.objects))
            for call in self.calls_of(callee, example=example):
                drawn += 1
                try:
                    reals = tuple(s.build() for s in states)
                    others = tuple(s.build() for s in states)
                    mode = new_fake_mode()
                    fakes = tuple(self.fakify(o, mode, state=s.label) for o, s in zip(others, states))
                    # What the fakes were made from, before the call: the state each object starts in.
                    before = tuple(read_state(o, self.tracer) for o in others)
                    kept = tuple(kept_fields(f, b, mode) for f, b in zip(fakes, before))
                except Exception:  # noqa: BLE001 - reported by the examples / roundtrip checks
                    continue
                label = (f"objects {', '.join(s.label for s in states)}" if len(states) > 1
                         else f"object {example.label}")
                with self.calling(f"on the example {label}", timed=False):
                    real = self.call_real(reals[0] if len(reals) == 1 else reals, call)
                    fake = self.call_fake(fakes[0] if len(fakes) == 1 else fakes, mode, call)
                fakified += 1
                yield PairedCall(states, call, real, fake, reals, fakes, before, kept, mode)
        if not drawn:
            raise NotApplicable(f"no arguments for {callee.label} in any example state: the strategy registered "
                                f"with conformance.strategy({self.info.qualname!r}, {callee.name!r}, ...) draws "
                                "nothing for every example object")
        if not fakified:
            # Nothing was compared: the check must not pass (a gate that is green while nothing ran).
            raise NotApplicable(self.why_not_fakifiable())

    def observe(self, paired: PairedCall) -> list[ObjectState]:
        """Each object ``paired`` received, before and after its call on both sides (:class:`ObjectState`); a real
        ``__obj_flatten__`` that raises afterwards gives :data:`UNREADABLE` (the ``flatten`` item reports it)."""
        out = []
        for k, (real_obj, fake_obj) in enumerate(zip(paired.real_objects, paired.fake_objects)):
            try:
                after = read_state(real_obj, self.tracer)
            except Exception:  # noqa: BLE001 - see the docstring
                after = UNREADABLE
            out.append(ObjectState(k, paired.before[k], after, paired.kept[k],
                                   kept_fields(fake_obj, after, paired.mode)))
        return out

    def why_not_fakifiable(self) -> str:
        """Why no example object could be fakified, pointing at the item that reports it: ``flatten`` for a
        class without ``__obj_flatten__`` or whose ``__obj_flatten__`` raised (saying what it raised), else
        ``roundtrip`` (a fake ``__init__`` or ``__obj_unflatten__`` that raises, a malformed ``__obj_flatten__``)."""
        flatten_error = self._examples.flatten_error if self._examples is not None else None
        if flatten_error:
            return (f"no example object of {self.info.qualname} could be fakified, so nothing was compared: its "
                    f"__obj_flatten__() raised {flatten_error} (see {self.info.test_name}::flatten)")
        item = "flatten" if not self.info.has_flatten else "roundtrip"
        return (f"no example object of {self.info.qualname} could be fakified, so nothing was compared "
                f"(see {self.info.test_name}::{item})")

    # ----- reproducers --------------------------------------------------------------------------------------
    def repro(self, example: Example | Sequence[tuple[str, Example]], body: list[str]) -> str:
        """A standalone script: load the user's libraries, define ``make_obj()`` building an object in
        ``example``'s state (or, given ``(name, example)`` pairs, one ``make_<name>()`` each), then ``body``."""
        makers = [("obj", example)] if isinstance(example, Example) else list(example)
        lines = ["import torch", "import torch.utils._pytree as pytree",
                 "from torch._subclasses.fake_tensor import FakeTensorMode",
                 "from torch.fx.experimental.symbolic_shapes import ShapeEnv",
                 "from torch._library.fake_class_registry import maybe_to_fake_obj", ""]
        lines += list(self.settings.load_code) or ["# load your TorchBind library and fake classes here"]
        lines.append("")
        for name, ex in makers:
            lines.append(f"def make_{name}():")
            lines += ["    " + ln for ln in ex.code("obj")]
            lines.append("    return obj")
            lines.append("")
        lines += body
        return "\n".join(lines) + "\n"

    def call_repro(self, example: Example | Sequence[Example], call: Call, *, states: bool = False) -> str:
        """Reproducer comparing one call (a method, or an op with its objects at their schema positions) on fresh
        real objects and on fresh fakes of the same states: ``example`` is the state of the object, or one per
        object for a callee of several. With ``states`` (always for a callee of several objects) it also prints
        every object's state afterwards: the real object's ``__obj_flatten__()`` and what its fake keeps under
        those keys, as the ``custom_op`` check compares them."""
        examples = [example] if isinstance(example, Example) else list(example)
        several = call.callee.objects > 1 or call.callee.shares
        names, states = (list(call.callee.object_names()), True) if several else (["obj"], states)
        pos = "".join(f"{v.code}, " for v in call.args.args)
        kw = ", ".join(f"{k!r}: {v.code}" for k, v in call.args.kwargs)
        fakes = [f"fake_{n}" if several else "fake_obj" for n in names]
        real_call = call.spread_source(names if several else "obj")
        fake_call = call.spread_source(fakes if several else "fake_obj")
        body = _extra_defs(call.args) + ["def make_args():", f"    return ({pos}), {{{kw}}}", ""]
        body += [f"{n} = make_{n}()" for n in names]
        body += ["args, kwargs = make_args()", f"real = {real_call}"]
        # An out-variant op gives its result through what it writes: both sides show it (as the checks compare).
        body += [f"real = {call.observed_source('real')}"] if call.observed_source("real") != "real" else []
        body += ["print('C++: ', real)"]
        if states:
            body += [f"real_states = [dict(o.__obj_flatten__()) for o in ({', '.join(names)},)]"]
            body += [f"print('C++ {n} after:', {n}.__obj_flatten__())" for n in names]
        body += ["", "mode = FakeTensorMode(shape_env=ShapeEnv())"]
        body += [f"{f} = maybe_to_fake_obj(mode, make_{n}())" for f, n in zip(fakes, names)]
        body += ["args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), "
                 "make_args())",
                 "with mode:",
                 f"    fake = {fake_call}",
                 *([f"    fake = {call.observed_source('fake')}"] if call.observed_source("fake") != "fake" else []),
                 "print('fake:', fake)"]
        if states:
            body += [f"fake_states = [{{key: getattr(f.wrapped_obj, key) for key in s}} for f, s in "
                     f"zip(({', '.join(fakes)},), real_states)]"]
            body += [f"print('fake {n} after:', fake_states[{i}])" for i, n in enumerate(names)]
        return self.repro(list(zip(names, examples)) if several else examples[0], body + self_judging_tail(states))


def _fakify(obj: torch.ScriptObject, mode: FakeTensorMode, tracer: Tracer, state: str | None = None):
    """:meth:`ClassContext.fakify`, reported to ``tracer``."""
    what = f"the example object {state}" if state else f"a {script_name(obj)} object"

    def label() -> str:
        return (f"fakifying {what} (maybe_to_fake_obj: copy.deepcopy through def_pickle's __getstate__ and "
                "__setstate__, __obj_flatten__, the fake's __obj_unflatten__)")

    try:
        with quiet_torch_logs(), tracer.calling(label, side="fake"):
            return maybe_to_fake_obj(mode, obj)
    except Exception:
        raise
    except BaseException as exc:  # SystemExit from __obj_unflatten__, ...
        raise_fault(exc, label, "fake")


def _invoke(call: Call, obj: Any, mode: FakeTensorMode | None, tracer: Tracer, label=None) -> CallResult:
    """Run ``call`` on ``obj`` with fresh arguments — fake ones, under ``mode``, when it is given (the call is then
    the fake's). Exceptions from looking up or running the callable are captured in the :class:`CallResult`.
    ``label`` (text or a function returning it) names the call for ``tracer``. A
    ``BaseException`` that is not an ``Exception`` (``SystemExit``, a ``KeyboardInterrupt`` raised by user code)
    is raised on as a :class:`~conformance.core.faults.UserFault` that fails the item; a real interrupt as it is."""
    made = call.args.make()
    side = "fake" if mode is not None else "C++"
    if mode is not None:
        made = to_fake(mode, made, tracer)
    label = label or "a call into the class"
    try:
        with (mode if mode is not None else contextlib.nullcontext()), quiet_torch_logs(), \
                tracer.calling(label, side=side):
            return CallResult(call.invoke(obj, made))
    except Exception as exc:  # noqa: BLE001 - user and C++ code may raise anything
        return CallResult(error=exc)
    except BaseException as exc:  # not an Exception: fails the item (see conformance.core.faults)
        raise_fault(exc, label, side)


def _extra_defs(args: ArgumentSet) -> list[str]:
    """Definitions of the helper names that argument values refer to (objects of TorchBind classes)."""
    lines: list[str] = []
    for name, fn in args.extra:
        example = getattr(fn, "__self__", None)
        if isinstance(example, Example):
            lines.append(f"def {name}():")
            lines += ["    " + ln for ln in example.code("o")]
            lines += ["    return o", ""]
    return lines


def defined_on_fake(fake: type, method: str) -> bool:
    """True when ``method`` is defined by the fake class or a base other than ``object``."""
    for klass in fake.__mro__:
        if klass is object:
            return False
        if method in vars(klass):
            return True
    return False
