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
import enum
import inspect
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .arguments import ArgumentSource
from .breadcrumbs import Tracer
from .custom_classes import CustomClassInfo, CustomOpInfo, api_names
from .loading import repro_lines
from .registry import Registry
from .results import NotApplicable
from .settings import Settings
from .values import ArgumentSet, UnsupportedType

__all__ = ["Recipe", "CustomClassContext", "state_of", "same_value", "show"]

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


class CustomClassContext:
    """What the checks of one Python custom class share. ``kind`` is ``"custom"`` (the checks registered for
    custom classes apply); ``info`` the :class:`~conformance.custom_classes.CustomClassInfo`."""

    kind = "custom"

    def __init__(self, info: CustomClassInfo, settings: Settings, registry: Registry, tracer: Tracer):
        self.info, self.settings, self.registry, self.tracer = info, settings, registry, tracer
        self.arguments = ArgumentSource(info.name, registry)
        #: What the constructor last raised for generated arguments (for the message when it accepts none).
        self.rejected: str | None = None

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

    def arguments_of(self, key: str) -> SearchStrategy[str] | None:
        """The arguments of a call of the class's ``__init__`` or method ``key`` as Python source (``1.5, 2``),
        from the argument source (:meth:`~conformance.arguments.ArgumentSource.for_signature`: the adopter's
        ``conformance.strategy(name, key, ...)`` overrides, else the parameters' annotations). ``None`` when the
        adopter excluded it. Raises :class:`~conformance.results.NotApplicable` for a parameter that cannot be
        generated."""
        func = getattr(self.info.cls, key)
        strat = self.arguments.for_signature(key, func, f"{self.info.name}.{key}")
        return None if strat is None else strat.map(lambda args: args.code())

    def _init_strategy(self) -> SearchStrategy[Recipe]:
        cls, name = self.info.cls, self.info.cls.__qualname__
        if isinstance(cls, enum.EnumMeta):  # an Enum's objects are its members
            return st.sampled_from([Recipe(f"{name}.{m.name}", lambda m=m: m) for m in cls])

        def recipe(args: str) -> Recipe:
            code = f"{name}({args})"
            return Recipe(code, lambda: eval(code, {**_eval_globals(), name: cls}))  # noqa: S307 - our source

        try:
            args = self.arguments_of("__init__")
        except NotApplicable as exc:
            raise NotApplicable(f"{exc}; or give objects with @conformance.examples({self.info.name!r})") from None
        if args is None:
            raise NotApplicable(f"{self.info.name}.__init__ is excluded by conformance.strategy: give objects with "
                                f"@conformance.examples({self.info.name!r})")
        return args.map(recipe).filter(self._accepted)

    def _accepted(self, recipe: Recipe) -> bool:
        """Whether the constructor accepts the recipe's arguments: objects it refuses are not inputs of the class
        (like arguments a C++ constructor rejects), so the search draws others."""
        try:
            with self.calling(lambda: f"{recipe.code}, the constructor of {self.info.name}"):
                recipe.build()
        except Exception as exc:  # noqa: BLE001 - a precondition of the class
            self.rejected = f"{type(exc).__name__}: {exc}"
            return False
        return True

    def mutators(self) -> list[str]:
        """The class's public methods (registered members included): the calls that may change an object's state
        (whether one did is seen by comparing :func:`state_of` before and after)."""
        out = []
        for klass in self.info.cls.__mro__:
            if klass.__module__ in ("builtins", "torch._opaque_base", "torch._custom_class_base"):
                continue
            for name, value in vars(klass).items():
                if not name.startswith("_") and inspect.isfunction(value) and name not in out:
                    out.append(name)
        return out

    def call_method(self, obj: Any, method: str, args: str) -> Any:  # args: Python source
        """``obj.method(<args source>)``."""
        return eval(f"obj.{method}({args})", {**_eval_globals(), "obj": obj})  # noqa: S307 - our source

    def objects(self) -> SearchStrategy[Recipe]:
        """Objects of the class for hypothesis: the adopter's factories' objects, else generated by the
        constructor. Raises :class:`~conformance.results.NotApplicable` when neither can give any."""
        recipes = self._factory_recipes()
        if recipes:
            return st.sampled_from(recipes)
        return self._init_strategy()

    # ----- the search ------------------------------------------------------------------------------------------

    def search(self, strategy: SearchStrategy, test: Callable[[Any], Any], examples: int, *, shrink: bool = True):
        """Search ``strategy`` with hypothesis for a value on which ``test`` returns something (a finding: a
        :class:`~conformance.results.Failure`, or what the caller turns into one; ``None``: the value is fine),
        over ``examples`` examples with the differential test's hypothesis settings
        (:func:`conformance.differential.driver.hypothesis_settings`: the user's profile, derandomized on CI).
        Returns the finding of the shrunk (simplest) value, or ``None``. Keep ``test`` cheap (no compiling):
        shrinking calls it many times; confirm the finding afterwards. ``shrink=False`` returns the first finding
        as found. Raises :class:`~conformance.results.NotApplicable` when the constructor accepted none of the
        generated arguments (nothing was compared)."""
        from hypothesis import Phase, given, settings
        from hypothesis.errors import Unsatisfiable

        from .differential.driver import hypothesis_settings

        base = hypothesis_settings(examples)
        phases = base.phases if shrink else tuple(p for p in base.phases if p is not Phase.shrink)

        @settings(base, phases=phases)
        @given(strategy)
        def run(value):
            finding = test(value)
            if finding is not None:
                raise _Found(finding)

        try:
            run()
        except _Found as found:
            return found.failure
        except Unsatisfiable:
            raise NotApplicable(
                f"{self.info.name}'s constructor rejected every generated argument set (last: {self.rejected}), so "
                f"nothing was compared; give objects with @conformance.examples({self.info.name!r}) or arguments "
                f"with conformance.strategy({self.info.name!r}, '__init__', ...)") from None
        return None

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
        # A line the load specs already give (the class's own module, loaded with --torchbind-load) once only;
        # blank lines and repeated statements of the body (print(...)) stay.
        seen: set[str] = set()
        head = [ln for ln in lines if not ln or not (ln in seen or seen.add(ln))]
        return "\n".join(head + body) + "\n"


def same_value(a: Any, b: Any) -> bool:
    """Whether two field values of objects are the same: tensors of one shape and dtype with equal values, else
    the same type and ``==`` (values that cannot be compared are not the same)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and bool(torch.equal(a, b)))
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are not the same
        return False


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


def _eval_globals() -> dict[str, Any]:
    import math

    return {"torch": torch, "math": math}
