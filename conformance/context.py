"""Per-class state shared by the checks: discovery, examples, fakification, calls on both sides, reproducers."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._library.fake_class_registry import maybe_to_fake_obj
from torch._subclasses.fake_tensor import FakeTensorMode

from .arguments import ArgumentSource
from .calls import Call, Callee
from .discovery import ClassInfo, qualname_of
from .example_objects import Example, ExampleSet, build_examples, script_name
from .faults import raise_fault
from .results import NotApplicable, exception_line
from .breadcrumbs import Tracer
from .registry import Registry
from .settings import Settings
from .values import ArgumentSet, Value

__all__ = [
    "new_fake_mode", "to_fake", "import_lazily_imported_modules", "ClassContext", "CallResult",
    "quiet_torch_logs", "defined_on_fake",
]


def new_fake_mode() -> FakeTensorMode:
    """A ``FakeTensorMode`` with a ``ShapeEnv``, as dynamo and export use, so fakes that allocate data-dependent
    sizes (``torch.library.get_ctx().new_dynamic_size()``) work."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv  # sympy: 0.3 s a run that reuses every verdict saves

    return FakeTensorMode(shape_env=ShapeEnv())


def import_lazily_imported_modules() -> None:
    """Import what torch imports on the first fakification: ``maybe_to_fake_obj`` pulls in ``torch._dynamo``
    (about 2 s). The isolation supervisor calls this before forking workers, so no timed call pays for it."""
    import torch._dynamo  # noqa: F401


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


@dataclasses.dataclass
class CallResult:
    """What one side did: ``value`` or ``error`` (an exception), with a one-line ``text`` for messages."""

    value: Any = None
    error: BaseException | None = None

    @property
    def raised(self) -> bool:
        return self.error is not None

    def error_text(self) -> str:
        return f"raised {exception_line(self.error, limit=300)}"


class ClassContext:
    """Everything the checks need about one class: its :class:`~conformance.discovery.ClassInfo`, and its example
    objects (built lazily, cached), with what the engine (:class:`conformance.runner.Engine`) hands it:
    ``settings`` (:class:`~conformance.settings.Settings`), ``registry`` (the adopter's factories and
    strategies), ``tracer`` (where calls into the class are reported, :mod:`conformance.breadcrumbs`) and
    ``lookup`` (``ns::Cls`` -> that class's context, for arguments typed as another TorchBind class; raises
    ``KeyError`` for a class torch does not know). ``scenarios`` caches the class's coverage-matrix scenarios
    (:func:`conformance.matrix.scenarios.scenario`). ``kind`` is ``"torchbind"``: the checks registered for
    TorchBind classes apply."""

    kind = "torchbind"

    def __init__(self, info: ClassInfo, settings: Settings, registry: Registry, tracer: Tracer,
                 lookup: Callable[[str], ClassContext]):
        self.info = info
        self.settings, self.registry, self.tracer, self.lookup = settings, registry, tracer, lookup
        self.scenarios: dict[str, Any] = {}
        #: Matrix cells already run, by (program and objects as source, dynamic shapes, the Backend): two rows whose
        #: programs are the same are compiled once (:func:`conformance.matrix.cell.run_cell`).
        self.cells_by_program: dict[tuple[str, bool, Any], Any] = {}
        self._examples: ExampleSet | None = None
        self._building = False
        self._real: bool | None = None
        #: Where every caller gets arguments for this class's methods and ops (:mod:`conformance.arguments`).
        self.arguments = ArgumentSource(info.qualname, registry, self.class_values)

    def calling(self, label: str | Callable[[], str], *, timed: bool = True, side: str | None = None):
        """``with ctx.calling(label, timed=..., side=...):`` around a call into the class's code: the engine's
        tracer's :meth:`~conformance.breadcrumbs.Tracer.calling` (a no-op outside a worker process)."""
        return self.tracer.calling(label, timed=timed, side=side)

    def class_values(self, script_qualname: str) -> list[Value]:
        """Values that build an object of the TorchBind class ``__torch__.torch.classes.ns.Cls`` (its first
        example), for arguments typed as a class (a :data:`conformance.values.ClassResolver`); empty when that
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
        (:attr:`~conformance.example_objects.ExampleSet.lost`); ``False`` before they are built."""
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
        :class:`~conformance.faults.UserFault` of the fake."""
        return _fakify(obj, mode, self.tracer, state)

    def call_real(self, obj: torch.ScriptObject, call: Call) -> CallResult:
        """Run ``call`` on the real object with fresh arguments; C++ errors are captured in the result."""
        return _invoke(call, obj, None, self.tracer, label=lambda: call.code(script_name(obj)))

    def call_fake(self, fake_obj, mode: FakeTensorMode, call: Call) -> CallResult:
        """Run ``call`` on a fakified object under ``mode`` — the ``call_torchbind`` path used while tracing —
        with fresh arguments whose tensors were converted with ``mode.from_tensor``."""
        return _invoke(call, fake_obj, mode, self.tracer, label=lambda: f"{call.code('fake_obj')} on the fake")

    def calls_of(self, callee: Callee, limit: int = 3, example: Example | None = None) -> list[Call]:
        """:class:`Call` objects of a method or an op with arguments from the class's argument source
        (:meth:`conformance.arguments.ArgumentSource.fixed`: the adopter's strategies where registered, else
        generated): for calls on an object in ``example``'s state (default: the first example, used only when
        a strategy depends on the object). Raises :class:`~conformance.arguments.Excluded` for a callee the
        adopter excluded, :class:`NotApplicable` for an argument type without a generator."""
        schema = callee.schema if callee.op is not None else self.info.methods[callee.name]
        obj, state = None, ""
        if self.arguments.depends_on_object(callee.name):
            example = example or self.require_examples()[0]
            obj, state = example.build(), example.label
        sets = self.arguments.fixed(callee.name, schema, callee.position, limit, obj, state)
        return [Call(callee, args) for args in sets]

    def paired_calls(self, callee: Callee):
        """Yield ``(example, call, real, fake)`` for every example and argument set of a method or an op.

        Each pair of calls runs on two fresh objects in the example's state: the real one and a fake made from
        the other with :meth:`fakify` under a new ``FakeTensorMode``. ``real`` and ``fake`` are
        :class:`CallResult`; an example whose object cannot be built or fakified is skipped here (the
        ``examples`` and ``roundtrip`` checks report those). The arguments come from :meth:`calls_of` for each
        example's state. Raises :class:`~conformance.arguments.Excluded` for an excluded callee, and
        :class:`NotApplicable` when no example object could be fakified.
        """
        examples = self.require_examples()
        fakified = drawn = 0
        for example in examples:
            for call in self.calls_of(callee, example=example):
                drawn += 1
                try:
                    real_obj, other = example.build(), example.build()
                    mode = new_fake_mode()
                    fake_obj = self.fakify(other, mode, state=example.label)
                except Exception:  # noqa: BLE001 - reported by the examples / roundtrip checks
                    continue
                with self.calling(f"on the example object {example.label}", timed=False):
                    real = self.call_real(real_obj, call)
                    fake = self.call_fake(fake_obj, mode, call)
                fakified += 1
                yield example, call, real, fake
        if not drawn:
            raise NotApplicable(f"no arguments for {callee.label} in any example state: the strategy registered "
                                f"with conformance.strategy({self.info.qualname!r}, {callee.name!r}, ...) draws "
                                "nothing for every example object")
        if not fakified:
            # Nothing was compared: the check must not pass (a gate that is green while nothing ran).
            raise NotApplicable(self.why_not_fakifiable())

    def why_not_fakifiable(self) -> str:
        """Why no example object could be fakified, pointing at the item that reports it: ``flatten`` for a
        class without ``__obj_flatten__``, else ``roundtrip`` (a fake ``__init__`` or ``__obj_unflatten__`` that
        raises, a malformed ``__obj_flatten__``)."""
        item = "flatten" if not self.info.has_flatten else "roundtrip"
        return (f"no example object of {self.info.qualname} could be fakified, so nothing was compared "
                f"(see {self.info.test_name}::{item})")

    # ----- reproducers --------------------------------------------------------------------------------------
    def repro(self, example: Example, body: list[str]) -> str:
        """A standalone script: load the user's libraries, build ``obj`` from ``example``, then ``body``."""
        lines = ["import torch", "import torch.utils._pytree as pytree",
                 "from torch._subclasses.fake_tensor import FakeTensorMode",
                 "from torch.fx.experimental.symbolic_shapes import ShapeEnv",
                 "from torch._library.fake_class_registry import maybe_to_fake_obj", ""]
        lines += list(self.settings.load_code) or ["# load your TorchBind library and fake classes here"]
        lines.append("")
        lines.append("def make_obj():")
        lines += ["    " + ln for ln in example.code("obj")]
        lines.append("    return obj")
        lines.append("")
        lines += body
        return "\n".join(lines) + "\n"

    def call_repro(self, example: Example, call: Call) -> str:
        """Reproducer comparing one call (a method, or an op with the object at its schema position) on a fresh
        real object and on a fresh fake of the same state."""
        pos = "".join(f"{v.code}, " for v in call.args.args)
        kw = ", ".join(f"{k!r}: {v.code}" for k, v in call.args.kwargs)
        body = _extra_defs(call.args) + [
            "def make_args():",
            f"    return ({pos}), {{{kw}}}",
            "",
            "obj = make_obj()",
            "args, kwargs = make_args()",
            f"print('C++: ', {call.callee.spread_source('obj')})",
            "",
            "mode = FakeTensorMode(shape_env=ShapeEnv())",
            "fake_obj = maybe_to_fake_obj(mode, make_obj())",
            "args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), "
            "make_args())",
            "with mode:",
            f"    print('fake:', {call.callee.spread_source('fake_obj')})",
        ]
        return self.repro(example, body)


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
    is raised on as a :class:`~conformance.faults.UserFault` that fails the item; a real interrupt as it is."""
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
    except BaseException as exc:  # not an Exception: fails the item (see conformance.faults)
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
