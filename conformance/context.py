"""Per-class state shared by the checks: discovery, examples, fakification, calls on both sides, reproducers."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._library.fake_class_registry import maybe_to_fake_obj
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from .discovery import ClassInfo, discover, qualname_of
from .example_objects import Example, ExampleSet, build_examples, script_name
from .isolation import calling
from .results import NotApplicable, exception_line
from .values import ArgumentSet, UnsupportedType, Value, argument_sets

__all__ = [
    "new_fake_mode", "to_fake", "import_lazily_imported_modules", "ClassContext", "CallResult", "context_for",
    "reset_contexts", "set_load_code", "quiet_torch_logs",
]

_CONTEXTS: dict[str, "ClassContext"] = {}
_LOAD_CODE: list[str] = []


def new_fake_mode() -> FakeTensorMode:
    """A ``FakeTensorMode`` with a ``ShapeEnv``, as dynamo and export use, so fakes that allocate data-dependent
    sizes (``torch.library.get_ctx().new_dynamic_size()``) work."""
    return FakeTensorMode(shape_env=ShapeEnv())


def import_lazily_imported_modules() -> None:
    """Import what torch imports on the first fakification: ``maybe_to_fake_obj`` pulls in ``torch._dynamo``
    (about 2 s). The isolation supervisor calls this before forking workers, so no timed call pays for it."""
    import torch._dynamo  # noqa: F401


def to_fake(mode: FakeTensorMode, value: Any) -> Any:
    """Replace every tensor in ``value`` (a pytree) by a fake tensor with the same, static, metadata."""
    return pytree.tree_map_only(torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), value)


def set_load_code(lines: list[str]) -> None:
    """Python lines that load the user's libraries and fakes, put at the top of every reproducer."""
    _LOAD_CODE[:] = lines


def context_for(qualname: str) -> "ClassContext":
    """The cached :class:`ClassContext` of ``ns::Cls`` (discovered on first use)."""
    ctx = _CONTEXTS.get(qualname)
    if ctx is None:
        ctx = _CONTEXTS[qualname] = ClassContext(discover(qualname))
    return ctx


def reset_contexts() -> None:
    """Forget cached contexts (after libraries or example factories change)."""
    _CONTEXTS.clear()


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


def resolve_class_values(script_qualname: str) -> list[Value]:
    """Values that build an object of the TorchBind class ``__torch__.torch.classes.ns.Cls`` (the first example),
    for arguments typed as a class; empty when the class has no examples."""
    try:
        ctx = context_for(qualname_of(script_qualname))
    except Exception:  # noqa: BLE001 - unknown class: no values
        return []
    if ctx._building:
        # A constructor needing its own class: only the examples built so far (none for the constructor).
        return []
    exset = ctx.example_set
    return [exset.examples[0].as_value()] if exset.examples else []


class ClassContext:
    """Everything the checks need about one class; examples are built lazily and cached."""

    def __init__(self, info: ClassInfo):
        self.info = info
        self._examples: ExampleSet | None = None
        self._building = False

    # ----- examples -------------------------------------------------------------------------------------------
    @property
    def example_set(self) -> ExampleSet:
        if self._examples is None:
            self._building = True
            try:
                self._examples = build_examples(self.info, resolver=resolve_class_values)
            finally:
                self._building = False
        return self._examples

    def require_examples(self) -> list[Example]:
        """The examples, or :class:`NotApplicable` pointing at the ``examples`` item when there are none."""
        exset = self.example_set
        if not exset.examples:
            raise NotApplicable(f"no example objects of {self.info.qualname} (see {self.info.test_name}::examples)")
        return exset.examples

    def require_fake(self) -> type:
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

    def argument_sets(self, schema: torch.FunctionSchema, *, skip: tuple[int, ...] = (0,), limit: int = 3):
        """:func:`conformance.values.argument_sets` with this plugin's class resolver; an unsupported argument
        type becomes :class:`NotApplicable`."""
        try:
            return argument_sets(schema, skip=skip, limit=limit, resolver=resolve_class_values)
        except UnsupportedType as exc:
            raise NotApplicable(f"cannot generate arguments for {schema}: {exc}") from exc

    # ----- calls --------------------------------------------------------------------------------------------
    @staticmethod
    def fakify(obj: torch.ScriptObject, mode: FakeTensorMode):
        """``maybe_to_fake_obj(mode, obj)``, as dynamo and AOTAutograd do before tracing."""
        with quiet_torch_logs(), calling(lambda: f"fakifying a {script_name(obj)} object (maybe_to_fake_obj: "
                                                 "copy.deepcopy through def_pickle's __getstate__ and "
                                                 "__setstate__, __obj_flatten__, the fake's __obj_unflatten__)"):
            return maybe_to_fake_obj(mode, obj)

    @staticmethod
    def call_real(obj: torch.ScriptObject, method: str, args: ArgumentSet) -> CallResult:
        """Call ``obj.<method>(...)`` with fresh arguments; C++ errors are captured in the result."""
        return _invoke(lambda: getattr(obj, method), args, None,
                       label=lambda: f"{script_name(obj)}.{method}({args.code()})")

    @staticmethod
    def call_fake(fake_obj, mode: FakeTensorMode, method: str, args: ArgumentSet) -> CallResult:
        """Call ``fake_obj.<method>(...)`` under ``mode`` — the ``call_torchbind`` path used while tracing —
        with fresh arguments whose tensors were converted with ``mode.from_tensor``."""
        return _invoke(lambda: getattr(fake_obj, method), args, mode,
                       label=lambda: f"the fake's {method}({args.code()})")

    def paired_calls(self, method: str | None = None, op=None):
        """Yield ``(example, args, real, fake)`` for every example and argument set of a method or an op.

        Each pair of calls runs on two fresh objects in the example's state: the real one and a fake made from
        the other with :meth:`fakify` under a new ``FakeTensorMode``. ``real`` and ``fake`` are
        :class:`CallResult`; an example whose object cannot be built or fakified is skipped here (the
        ``examples`` and ``roundtrip`` checks report those).
        """
        examples = self.require_examples()
        if op is not None:
            position = op.class_args[0]
            sets = self.argument_sets(op.schema, skip=(position,))
            overload = op.resolve()
        else:
            sets = self.argument_sets(self.info.methods[method])
        for example in examples:
            for args in sets:
                try:
                    real_obj, other = example.build(), example.build()
                    mode = new_fake_mode()
                    fake_obj = self.fakify(other, mode)
                except Exception:  # noqa: BLE001 - reported by the examples / roundtrip checks
                    continue
                with calling(f"on the example object {example.label}", timed=False):
                    if op is not None:
                        real = _invoke(lambda: overload, args, None, (position, real_obj),
                                       label=lambda: f"{op.qualname}({args.code()}) on the object")
                        fake = _invoke(lambda: overload, args, mode, (position, fake_obj),
                                       label=lambda: f"the fake of {op.qualname}({args.code()})")
                    else:
                        real = self.call_real(real_obj, method, args)
                        fake = self.call_fake(fake_obj, mode, method, args)
                yield example, args, real, fake

    # ----- reproducers --------------------------------------------------------------------------------------
    def repro(self, example: Example, body: list[str]) -> str:
        """A standalone script: load the user's libraries, build ``obj`` from ``example``, then ``body``."""
        lines = ["import torch", "import torch.utils._pytree as pytree",
                 "from torch._subclasses.fake_tensor import FakeTensorMode",
                 "from torch.fx.experimental.symbolic_shapes import ShapeEnv",
                 "from torch._library.fake_class_registry import maybe_to_fake_obj", ""]
        lines += _LOAD_CODE or ["# load your TorchBind library and fake classes here"]
        lines.append("")
        lines.append("def make_obj():")
        lines += ["    " + ln for ln in example.code("obj")]
        lines.append("    return obj")
        lines.append("")
        lines += body
        return "\n".join(lines) + "\n"

    def call_repro(self, example: Example, method: str, args: ArgumentSet, op: str | None = None,
                   position: int = 0) -> str:
        """Reproducer comparing one call on a fresh real object and on a fresh fake of the same state.

        ``op`` (``torch.ops.ns.name``) calls a custom op with the object at argument ``position`` instead of
        the method ``method``.
        """
        if op is not None:
            call = f"{op}(*args[:{position}], {{obj}}, *args[{position}:], **kwargs)"
        else:
            call = f"{{obj}}.{method}(*args, **kwargs)"
        pos = "".join(f"{v.code}, " for v in args.args)
        kw = ", ".join(f"{k!r}: {v.code}" for k, v in args.kwargs)
        body = _extra_defs(args) + [
            "def make_args():",
            f"    return ({pos}), {{{kw}}}",
            "",
            "obj = make_obj()",
            "args, kwargs = make_args()",
            f"print('C++: ', {call.format(obj='obj')})",
            "",
            "mode = FakeTensorMode(shape_env=ShapeEnv())",
            "fake_obj = maybe_to_fake_obj(mode, make_obj())",
            "args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), "
            "make_args())",
            "with mode:",
            f"    print('fake:', {call.format(obj='fake_obj')})",
        ]
        return self.repro(example, body)


def _invoke(target, args: ArgumentSet, mode: FakeTensorMode | None, insert: tuple[int, Any] | None = None,
            label=None) -> CallResult:
    """Call ``target()(*args, **kwargs)`` with fresh arguments — fake ones, under ``mode``, when it is given —
    with ``insert = (position, obj)`` placing the object among the arguments (for custom ops). Exceptions from
    looking up or running the callable are captured in the :class:`CallResult`. ``label`` (text or a function
    returning it) names the call for :func:`conformance.isolation.calling`."""
    a, kw = args.make()
    if mode is not None:
        a, kw = to_fake(mode, (a, kw))
    if insert is not None:
        position, obj = insert
        a = [*a[:position], obj, *a[position:]]
    try:
        with (mode if mode is not None else contextlib.nullcontext()), quiet_torch_logs(), \
                calling(label or "a call into the class"):
            return CallResult(target()(*a, **kw))
    except Exception as exc:  # noqa: BLE001 - user and C++ code may raise anything
        return CallResult(error=exc)


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
