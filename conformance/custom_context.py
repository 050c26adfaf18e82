"""Per-class state of a Python custom class (opaque object) shared by its checks: the class as torch registered
it, where its objects come from, the arguments of the custom ops taking it, and reproducer scripts.

Objects come from the adopter's ``@conformance.examples("module.QualName")`` factories when there are any (every
object they return), else from the class's constructor: ``__init__``'s annotated parameters drawn by hypothesis
from the plugin's value strategies (:func:`conformance.arguments.value_strategy`: finite floats, small ints, short
strings, tensors), as ``hypothesis.strategies.builds`` would, with the call written as source so that reproducers
can print it. Every object is a :class:`Recipe`: its source and a way to build a new one.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .arguments import ArgumentSource, value_strategy
from .breadcrumbs import Tracer
from .custom_classes import CustomClassInfo, CustomOpInfo, api_names
from .loading import repro_lines
from .registry import Registry
from .results import NotApplicable
from .settings import Settings
from .values import ArgumentSet, UnsupportedType, Value

__all__ = ["Recipe", "CustomClassContext", "state_of", "find_failure", "show"]

#: Python annotations of constructor parameters, as the TorchScript types the value strategies know.
_SIMPLE_TYPES = {float: torch._C.FloatType.get, int: torch._C.IntType.get, bool: torch._C.BoolType.get,
                 str: torch._C.StringType.get, torch.Tensor: torch._C.TensorType.get}


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One object of the class: ``code``, a Python expression that builds it (names bound by ``extra`` and the
    reproducer's imports), and ``build()``, a new object each call."""

    code: str
    make: Callable[[], Any]

    def build(self) -> Any:
        return self.make()


def state_of(obj: Any) -> dict[str, Any]:
    """The state of a Python object as pickle sees it: ``__getstate__()`` when the class defines one returning a
    dict, else ``vars(obj)`` (``__slots__`` read one by one). Raises ``TypeError`` for an object with neither."""
    getstate = getattr(type(obj), "__getstate__", None)
    if getstate is not None and getstate is not getattr(object, "__getstate__", None):
        state = obj.__getstate__()
        if isinstance(state, dict):
            return dict(state)
    if hasattr(obj, "__dict__"):
        return dict(vars(obj))
    slots = [s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())]
    if slots:
        return {s: getattr(obj, s) for s in slots if hasattr(obj, s)}
    raise TypeError(f"{type(obj).__name__} has neither __dict__, __slots__ nor a dict __getstate__")


def _torch_type(annotation: Any) -> torch._C.Type:
    if annotation in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[annotation]()
    try:
        from torch.jit.annotations import ann_to_type

        return ann_to_type(annotation, torch._sources.fake_range())
    except Exception as exc:  # noqa: BLE001 - anything TorchScript cannot type
        raise UnsupportedType(f"{annotation!r}") from exc


class CustomClassContext:
    """What the checks of one Python custom class share. ``kind`` is ``"custom"`` (the checks registered for
    custom classes apply); ``info`` the :class:`~conformance.custom_classes.CustomClassInfo`."""

    kind = "custom"

    def __init__(self, info: CustomClassInfo, settings: Settings, registry: Registry, tracer: Tracer):
        self.info, self.settings, self.registry, self.tracer = info, settings, registry, tracer
        self.arguments = ArgumentSource(info.name, registry)
        self._fixed: list[Recipe] | None = None

    @property
    def qualname(self) -> str:
        return self.info.name

    def calling(self, label: str | Callable[[], str], *, timed: bool = True):
        """Report a call into user code to the tracer (a breadcrumb for crash and hang reports)."""
        return self.tracer.calling(label, timed=timed)

    # ----- objects ---------------------------------------------------------------------------------------------

    def _factory_recipes(self) -> list[Recipe]:
        out = []
        for factory in self.registry.factories(self.info.name):
            name = getattr(factory, "__name__", "factory")
            with self.calling(f"the example factory {name}() of {self.info.name}"):
                count = len(list(factory()))
            for i in range(count):
                out.append(Recipe(f"list({name}())[{i}]", lambda f=factory, i=i: list(f())[i]))
        return out

    def arguments_of(self, func: Callable, what: str) -> SearchStrategy[str]:
        """The arguments of a call of ``func`` (``self`` left out) as Python source (``1.5, 2``), drawn from its
        parameters' annotations with the plugin's value strategies; parameters with defaults and no annotation
        are left to their defaults. ``what`` names the callee in messages. Raises
        :class:`~conformance.results.NotApplicable` for a parameter that cannot be generated."""
        params = [p for p in inspect.signature(func).parameters.values()][1:]
        try:
            hints = typing.get_type_hints(func)
        except Exception:  # noqa: BLE001 - unresolvable annotations: as written
            hints = dict(getattr(func, "__annotations__", {}))
        parts = []
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or (p.name not in hints and p.default is not p.empty):
                continue
            hint = f"give them with @conformance.examples({self.info.name!r})" if what.endswith("__init__") else (
                f"exclude it with conformance.strategy({self.info.name!r}, {what.rpartition('.')[2]!r})"
                "(lambda: None)")
            if p.name not in hints:
                raise NotApplicable(f"{what}'s parameter {p.name!r} has no annotation, so it cannot be generated; "
                                    + hint)
            try:
                parts.append((p, value_strategy(_torch_type(hints[p.name]))))
            except UnsupportedType as exc:
                raise NotApplicable(f"cannot generate {what}'s parameter {p.name!r} ({exc}); {hint}") from None

        def source(values) -> str:
            return ", ".join(f"{p.name}={v.code}" if p.kind is p.KEYWORD_ONLY else v.code
                             for (p, _), v in zip(parts, values))

        return st.tuples(*[s for _, s in parts]).map(source)

    def _init_strategy(self) -> SearchStrategy[Recipe]:
        cls, name = self.info.cls, self.info.cls.__qualname__

        def recipe(args: str) -> Recipe:
            code = f"{name}({args})"
            return Recipe(code, lambda: eval(code, {**_eval_globals(), name: cls}))  # noqa: S307 - our source

        return self.arguments_of(cls.__init__, f"{self.info.name}.__init__").map(recipe)

    def mutators(self) -> list[str]:
        """The class's public methods that are not registered members: the calls that may change an object's
        state (whether one did is seen by comparing :func:`state_of` before and after)."""
        out = []
        for klass in self.info.cls.__mro__:
            if klass.__module__ in ("builtins", "torch._opaque_base", "torch._custom_class_base"):
                continue
            for name, value in vars(klass).items():
                if (not name.startswith("_") and inspect.isfunction(value) and name not in self.info.members
                        and name not in out):
                    out.append(name)
        return out

    def call_method(self, obj: Any, method: str, args: str) -> Any:
        """``obj.method(<args source>)``."""
        return eval(f"obj.{method}({args})", {**_eval_globals(), "obj": obj})  # noqa: S307 - our source

    def objects(self) -> SearchStrategy[Recipe]:
        """Objects of the class for hypothesis: the adopter's factories' objects, else generated by the
        constructor. Raises :class:`~conformance.results.NotApplicable` when neither can give any."""
        recipes = self._factory_recipes()
        if recipes:
            return st.sampled_from(recipes)
        return self._init_strategy()

    # ----- ops -------------------------------------------------------------------------------------------------

    def op_arguments(self, op: CustomOpInfo) -> SearchStrategy[ArgumentSet]:
        """The other arguments of ``op`` (the object's own position left out), from the argument source.
        Raises :class:`~conformance.results.NotApplicable` when they cannot be generated or the op is
        excluded."""
        try:
            strat = self.arguments.strategy(op.qualname, op.schema, op.positions[0])
        except UnsupportedType as exc:
            raise NotApplicable(f"cannot generate the arguments of {op.qualname} ({exc}); give them with "
                                f"conformance.strategy({self.info.name!r}, {op.qualname!r}, ...)") from None
        if strat is None:
            raise self.arguments.exclusion(op.qualname)
        return strat

    @staticmethod
    def call_op(op: CustomOpInfo, args: ArgumentSet, obj: Any, fn: Callable | None = None) -> Any:
        """``op`` (or ``fn``, e.g. a compiled program taking the op's arguments) called with new values of
        ``args`` and ``obj`` at the object's position."""
        pos, kw = args.make()
        pos.insert(op.positions[0], obj)
        return (fn or op.op)(*pos, **kw)

    @staticmethod
    def call_code(op: CustomOpInfo, args: ArgumentSet, obj_code: str) -> str:
        """The op's call as source, e.g. ``torch.ops.ns.op(torch.ones(3), obj)``."""
        parts = [a.code for a in args.args]
        parts.insert(op.positions[0], obj_code)
        parts += [f"{k}={v.code}" for k, v in args.kwargs]
        ns, name = op.qualname.split("::")
        return f"torch.ops.{ns}.{name}({', '.join(parts)})"

    # ----- reproducers -----------------------------------------------------------------------------------------

    def repro(self, body: list[str]) -> str:
        """A standalone script: the user's load specs, the import that registers the class, then ``body``."""
        cls = self.info.cls
        lines = ["import torch", ""]
        lines += list(self.settings.load_code)
        lines += repro_lines(cls.__module__)
        top = cls.__qualname__.split(".")[0]
        lines.append(f"from {cls.__module__} import {top}")
        lines += [f"from {f.__module__} import {f.__name__}" for f in self.registry.factories(self.info.name)
                  if getattr(f, "__module__", None) and f.__name__.isidentifier()]
        lines.append(f"# {self.info.name}: a {api_names()[self.info.kind]} custom class")
        lines.append("")
        return "\n".join(lines + body) + "\n"


def show(value: Any, limit: int = 12) -> str:
    """A result as numbers for a message: a tensor with up to ``limit`` elements as its values (``tensor([3.,
    7.])``), a larger one as its metadata and first values; anything else as ``repr``."""
    if isinstance(value, torch.Tensor):
        flat = value.detach().flatten()
        head = flat[:limit].tolist()
        more = f", ... ({flat.numel()} elements)" if flat.numel() > limit else ""
        return f"tensor({head if value.dim() else head[0]}{more}, shape={list(value.shape)}, dtype={value.dtype})"
    if isinstance(value, (list, tuple)):
        return type(value)(show(v, limit) for v in value).__repr__().replace("'", "")
    return repr(value)


class _Found(Exception):
    """Carries a check's failure out of a hypothesis example (hypothesis shrinks towards the simplest one)."""

    def __init__(self, failure):
        super().__init__(str(failure))
        self.failure = failure


def find_failure(strategy: SearchStrategy, test: Callable[[Any], Any], examples: int, *, shrink: bool = True):
    """Search ``strategy`` with hypothesis for a value on which ``test`` returns something (a finding: a
    :class:`~conformance.results.Failure`, or what the caller turns into one; ``None``: the value is fine), over
    ``examples`` examples with the differential test's hypothesis settings
    (:func:`conformance.differential.driver.hypothesis_settings`: the user's profile, derandomized on CI).
    Returns the finding of the shrunk (simplest) value, or ``None``. Keep ``test`` cheap (no compiling): shrinking
    calls it many times; confirm the finding afterwards. ``shrink=False`` returns the first finding as found."""
    from hypothesis import Phase, given

    from .differential.driver import hypothesis_settings

    base = hypothesis_settings(examples)
    phases = base.phases if shrink else tuple(p for p in base.phases if p is not Phase.shrink)

    @settings_with(base, phases)
    @given(strategy)
    def run(value):
        finding = test(value)
        if finding is not None:
            raise _Found(finding)

    try:
        run()
    except _Found as found:
        return found.failure
    return None


def settings_with(base, phases):
    from hypothesis import settings

    return settings(base, phases=phases)


def _eval_globals() -> dict[str, Any]:
    import math

    return {"torch": torch, "math": math}
