"""Per-class state of a Python custom class (opaque object) shared by its checks: the class as torch registered
it, where its objects come from, the arguments of the custom ops taking it, and reproducer scripts.

Objects come from the adopter's ``@conformance.examples("module.QualName")`` factories when there are any (every
object they return), else from the class's constructor: ``__init__``'s annotated parameters drawn by hypothesis
from the plugin's value strategies (:func:`conformance.engine.arguments.value_strategy`: finite floats, small ints, short
strings, tensors), as ``hypothesis.strategies.builds`` would, with the call written as source so that reproducers
can print it. Every object is a :class:`Recipe`: its source and a way to build a new one.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..engine.arguments import ArgumentSource, draw_fixed, tears_down
from ..core.breadcrumbs import Tracer
from .discovery import CustomClassInfo, CustomOpInfo, api_names
from .state import fresh_copy, learn_memos, same_value, state_of
from ..engine.loading import repro_lines
from ..core.registry import Registry
from ..core.results import Note, NotApplicable
from ..core.settings import Settings
from ..engine.render import render
from ..engine.search import Found, hypothesis_settings
from ..engine.mutations import RETURNED, observed, observed_source, written_key
from ..engine.values import ArgumentSet, UnsupportedType, Value, evaluate, positional_names

__all__ = ["Recipe", "CustomClassContext", "state_of", "same_value", "show", "observed_outputs", "observed_source",
           "written_key", "positional_argument_names", "RETURNED"]  # state: conformance.custom.state

@dataclasses.dataclass(frozen=True)
class Recipe:
    """One object of the class: ``code``, a Python expression that builds it (names bound by ``extra`` and the
    reproducer's imports), and ``build()``, a new object each call."""

    code: str
    make: Callable[[], Any]
    #: The constructor's arguments, when the object is built by the constructor (``None``: a factory's object).
    args: ArgumentSet | None = None

    def build(self) -> Any:
        return self.make()


class CustomClassContext:
    """What the checks of one Python custom class share. ``kind`` is ``"custom"`` (the checks registered for
    custom classes apply); ``info`` the :class:`~conformance.custom.discovery.CustomClassInfo`."""

    kind = "custom"

    def __init__(self, info: CustomClassInfo, settings: Settings, registry: Registry, tracer: Tracer):
        self.info, self.settings, self.registry, self.tracer = info, settings, registry, tracer
        self.arguments = ArgumentSource(info.name, registry)
        #: What the constructor last raised for generated arguments (for the message when it accepts none).
        self.rejected: str | None = None
        #: Whether the constructor accepted any generated argument set; the skip of an item whose search found the
        #: constructor refusing every one while it never accepted any (later items raise it without drawing).
        self.accepted_any = False
        self.refused: NotApplicable | None = None
        #: Example objects (as recipe code) that every factory call returns again and that cannot be copied.
        self.shared: list[str] = []
        #: Methods found to tear down state beyond the object (:meth:`_check_teardown`): name -> the evidence.
        self.torn_down: dict[str, str] = {}
        self._last_built: Recipe | None = None  # the last recipe the constructor accepted
        self._checked: set[str] = set()  # the methods whose first call was followed by a build (_check_teardown)

    @property
    def qualname(self) -> str:
        return self.info.name

    def calling(self, label: str | Callable[[], str], *, timed: bool = True):
        """Report a call into user code to the tracer (a breadcrumb for crash and hang reports)."""
        return self.tracer.calling(label, timed=timed)

    # ----- objects ---------------------------------------------------------------------------------------------

    def example_recipes(self) -> list[Recipe]:
        """One recipe per object the adopter's factories return. A factory that returns the same objects on every
        call (a module-level cache, ``dist.group.WORLD``) would let one item's changes reach the next: each build
        is then a deep copy of the shared object; one that cannot be copied safely is kept as it is and named in
        :attr:`shared` (the checks that change objects say so)."""
        out = []
        for factory in self.registry.factories(self.info.name):
            name = getattr(factory, "__name__", "factory")
            with self.calling(f"the example factory {name}() of {self.info.name}"):
                first, second = list(factory()), list(factory())
            for i, obj in enumerate(first):
                if i < len(second) and second[i] is obj:  # shared between calls
                    if fresh_copy(obj) is not None:
                        out.append(Recipe(f"list({name}())[{i}]",
                                          lambda f=factory, i=i: fresh_copy(list(f())[i])))
                        continue
                    if f"list({name}())[{i}]" not in self.shared:  # examples are made for each check
                        self.shared.append(f"list({name}())[{i}]")
                else:
                    learn_memos(obj)
                out.append(Recipe(f"list({name}())[{i}]", lambda f=factory, i=i: list(f())[i]))
        return out

    def arguments_of(self, key: str) -> SearchStrategy[str] | None:
        """The arguments of a call of the class's ``__init__`` or method ``key`` as Python source (``1.5, 2``),
        from the argument source (:meth:`~conformance.engine.arguments.ArgumentSource.for_signature`: the adopter's
        ``conformance.strategy(name, key, ...)`` overrides, else the parameters' annotations). ``None`` when the
        adopter excluded it. Raises :class:`~conformance.core.results.NotApplicable` for a parameter that cannot be
        generated."""
        func = getattr(self.info.cls, key)
        strat = self.arguments.for_signature(key, func, f"{self.info.name}.{key}")
        return None if strat is None else strat.map(lambda args: args.code())

    def _init_strategy(self) -> SearchStrategy[Recipe]:
        cls, name = self.info.cls, self.info.cls.__qualname__
        if isinstance(cls, enum.EnumMeta):  # an Enum's objects are its members
            return st.sampled_from([Recipe(f"{name}.{m.name}", lambda m=m: m) for m in cls])

        try:
            args = self.arguments.for_signature("__init__", cls.__init__, f"{self.info.name}.__init__")
        except NotApplicable as exc:
            raise NotApplicable(f"{exc}; or give objects with @conformance.examples({self.info.name!r})") from None
        if args is None:
            raise NotApplicable(f"{self.info.name}.__init__ is excluded by conformance.strategy: give objects with "
                                f"@conformance.examples({self.info.name!r})")
        return args.map(self._constructed).filter(self._accepted)

    def _constructed(self, args: ArgumentSet) -> Recipe:
        """The recipe of ``Cls(<args>)``."""
        cls, name = self.info.cls, self.info.cls.__qualname__
        code = f"{name}({args.code()})"
        env = {**_eval_globals(), **dict(args.extra), name: cls}
        return Recipe(code, lambda: evaluate(code, env), args)

    def variants(self, a: Recipe, other: Recipe) -> list[tuple[str, Recipe]]:
        """Objects that differ from ``a``'s only where the class's own constructor makes them differ: for an object
        the constructor built, ``a``'s arguments with one argument taken from ``other``'s (labelled by the
        parameter's name), for each argument whose source differs; then ``other`` itself (``"another object"``).
        An example object from a factory has the constructor call its ``__fx_repr__`` writes (what torch's
        generated code runs to rebuild it), when that is a plain call of the class.
        No field is ever set from outside: a state no real object reaches is no input of the class."""
        out: list[tuple[str, Recipe]] = []
        a, other = self._with_args(a), self._with_args(other)
        if a.args is not None and other.args is not None and len(a.args.args) == len(other.args.args):
            names = _positional_names(self.info.cls.__init__)
            for i, (mine, theirs) in enumerate(zip(a.args.args, other.args.args)):
                if mine.code != theirs.code:
                    swapped = dataclasses.replace(a.args, args=a.args.args[:i] + (theirs,) + a.args.args[i + 1:])
                    out.append((names[i] if i < len(names) else f"argument {i}", self._constructed(swapped)))
            theirs_kw = dict(other.args.kwargs)
            for j, (key, mine) in enumerate(a.args.kwargs):
                if key in theirs_kw and theirs_kw[key].code != mine.code:
                    kwargs = a.args.kwargs[:j] + ((key, theirs_kw[key]),) + a.args.kwargs[j + 1:]
                    out.append((key, self._constructed(dataclasses.replace(a.args, kwargs=kwargs))))
        if other.code != a.code:
            out.append(("another object", other))
        return out

    def _with_args(self, recipe: Recipe) -> Recipe:
        """``recipe``, with the constructor arguments its object's ``__fx_repr__`` names when it has none (a
        factory's object of a constant class), else as it is."""
        if recipe.args is not None or self.info.kind != "constant":
            return recipe
        from ..engine.torch_api import get_opaque_obj_repr

        try:
            text, names = get_opaque_obj_repr(recipe.build())
            call = ast.parse(text, mode="eval").body
        except Exception:  # noqa: BLE001 - no usable __fx_repr__ (the fx_repr check reports it)
            return recipe
        cls = self.info.cls
        if not (isinstance(call, ast.Call) and (names or {}).get(ast.unparse(call.func)) is cls):
            return recipe
        extra = tuple((k, v) for k, v in (names or {}).items() if k != ast.unparse(call.func))
        args = ArgumentSet(tuple(Value(ast.unparse(x), extra) for x in call.args),
                           tuple((k.arg, Value(ast.unparse(k.value), extra)) for k in call.keywords if k.arg))
        return dataclasses.replace(recipe, args=args)

    def _accepted(self, recipe: Recipe) -> bool:
        """Whether the constructor accepts the recipe's arguments: objects it refuses are not inputs of the class
        (like arguments a C++ constructor rejects), so the search draws others."""
        try:
            with self.calling(lambda: f"{recipe.code}, the constructor of {self.info.name}"):
                learn_memos(recipe.build())
        except Exception as exc:  # noqa: BLE001 - a precondition of the class
            self.rejected = f"{type(exc).__name__}: {exc}"
            return False
        self.accepted_any = True
        self._last_built = recipe
        return True

    def _check_teardown(self, method: str) -> None:
        """After the first call of ``method`` on an object: when the last recipe the constructor accepted no longer
        builds, the call tore down state beyond its object (a destroyed world, a closed handle): the evidence is
        recorded in :attr:`torn_down`, and no check calls it again (:meth:`mutators`). One build per method: a
        teardown shows on its first call."""
        if method in self._checked or self._last_built is None:
            return
        self._checked.add(method)
        try:
            self._last_built.build()
        except Exception as exc:  # noqa: BLE001 - the evidence: what built before no longer does
            self.torn_down[method] = (f"after {self.info.cls.__qualname__}.{method}() on an object, "
                                      f"{self._last_built.code}, which built before, raises "
                                      f"{type(exc).__name__}: {str(exc)[:200]}")

    def mutators(self) -> list[str]:
        """The class's public methods (registered members included), Python functions and methods written in C
        (a C type's method descriptors, pybind11's functions) alike: the calls that may change an object's state
        (whether one did is seen by comparing :func:`state_of` before and after). A C method has no Python
        signature, so it is called only with arguments the adopter gives (``conformance.strategy``); the checks
        name the others as never called. Left out: the :meth:`teardowns`."""
        return [m for m in self._public_methods() if not self._left_out(m)]

    def teardowns(self) -> list[str]:
        """The public methods whose name says that a call tears down state beyond the object
        (:func:`~conformance.engine.arguments.tears_down`: ``abort``, ``destroy_process_group``, ``close``) and for
        which the adopter gave no arguments: no check calls them, since one call would break every later item's
        objects (torch 2.15's ``DeviceMesh.abort()`` empties the world's process-group map). Checks that call
        methods say which they left out (:meth:`teardown_note`)."""
        return [m for m in self._public_methods() if self._left_out(m)]

    def _left_out(self, method: str) -> bool:
        return method in self.torn_down or (tears_down(method) and not self.arguments.overridden(method))

    def teardown_note(self) -> Note | None:
        """The note that names the :meth:`teardowns` (``None`` without any)."""
        names = self.teardowns()
        if not names:
            return None
        listed = ", ".join(f"{self.info.cls.__qualname__}.{m}" for m in names)
        return Note(f"not called: {listed} (the name says a call tears down state beyond the object, such as a "
                    "process group's world or a shared handle, which would break every later item's objects); to "
                    f"have one called, give its arguments with conformance.strategy({self.info.name!r}, NAME, ...)")

    def _public_methods(self) -> list[str]:
        out = []
        for klass in self.info.cls.__mro__:
            if klass.__module__ in ("builtins", "pybind11_builtins", "torch._opaque_base",
                                    "torch._custom_class_base"):
                continue
            for name, value in vars(klass).items():
                if name.startswith("_") or name in out or isinstance(value, (staticmethod, classmethod)):
                    continue
                if inspect.isfunction(value) or inspect.ismethoddescriptor(value) and callable(value) or \
                        inspect.isbuiltin(value) or type(value).__name__ == "instancemethod":
                    out.append(name)
        return out

    def call_method(self, obj: Any, method: str, args: str) -> Any:  # args: Python source
        """``obj.method(<args source>)``; after the first call of each method, whether objects still build (the
        evidence of a teardown, :meth:`_check_teardown`)."""
        try:
            return evaluate(f"obj.{method}({args})", {**_eval_globals(), "obj": obj})
        finally:
            self._check_teardown(method)

    def objects(self) -> SearchStrategy[Recipe]:
        """Objects of the class for hypothesis: the adopter's factories' objects, else generated by the
        constructor. Raises :class:`~conformance.core.results.NotApplicable` when neither can give any, and at once
        when an earlier search or draw found the constructor refusing every generated argument set (:meth:`_refusing`):
        every search and draw of the class's objects starts here."""
        recipes = self.example_recipes()
        if recipes:
            return st.sampled_from(recipes)
        if self.refused is not None:
            raise self.refused
        return self._init_strategy()

    # ----- the search ------------------------------------------------------------------------------------------

    def search(self, strategy: SearchStrategy, test: Callable[[Any], Any], examples: int, *, shrink: bool = True):
        """Search ``strategy`` with hypothesis for a value on which ``test`` returns something (a finding: a
        :class:`~conformance.core.results.Failure`, or what the caller turns into one; ``None``: the value is fine),
        over ``examples`` examples with the differential test's hypothesis settings
        (:func:`conformance.engine.search.hypothesis_settings`: the user's profile, derandomized on CI).
        Returns the finding of the shrunk (simplest) value, or ``None``. Keep ``test`` cheap (no compiling):
        shrinking calls it many times; confirm the finding afterwards. ``shrink=False`` returns the first finding
        as found. Raises :class:`~conformance.core.results.NotApplicable` when the constructor accepted none of the
        generated arguments (nothing was compared)."""
        from hypothesis import Phase, given, settings
        from hypothesis.errors import Unsatisfiable

        base = hypothesis_settings(examples)
        phases = base.phases if shrink else tuple(p for p in base.phases if p is not Phase.shrink)

        @settings(base, phases=phases)
        @given(strategy)
        def run(value):
            finding = test(value)
            if finding is not None:
                raise Found(finding)

        torn = len(self.torn_down)
        try:
            run()
        except Found as found:
            return found.finding
        except Unsatisfiable:
            raise self._refusing() from None
        except Exception:
            if len(self.torn_down) > torn:  # a call in this search broke every later object: hypothesis's
                raise self._refusing() from None  # draws became inconsistent, the teardown is the cause
            raise
        return None

    def drawn(self, count: int, digest: str) -> list[Recipe]:
        """Up to ``count`` objects of :meth:`objects`, the same on every run
        (:func:`conformance.engine.arguments.draw_fixed` seeded from ``digest``). Raises :meth:`unbuildable` when
        not one could be built, so that no check blames an op or a member for the constructor's refusal."""
        recipes = draw_fixed(self.objects(), count, digest)
        if not recipes:
            raise self._refusing()
        return recipes

    def _refusing(self) -> NotApplicable:
        """:meth:`unbuildable`, kept for the items after this one when the constructor has refused every generated
        argument set and never accepted one in this process: each later search or draw raises it at once instead of
        drawing and being refused again (seconds per item, for the same skip)."""
        skip = self.unbuildable()
        if self.rejected is not None and (not self.accepted_any or self.torn_down):
            self.refused = skip  # the same text for every item: one cause (the run's nothing-compared line)
        return skip

    def unbuildable(self) -> NotApplicable:
        """The skip of every item that needed an object of the class when none could be built: the constructor's
        last error on the generated arguments (:attr:`rejected`) and what the adopter can give. One text for every
        check and matrix cell: the cause is the constructor, never an op or member "rejecting every object"."""
        name = self.info.name
        if self.torn_down:
            method, evidence = next(iter(self.torn_down.items()))
            return NotApplicable(
                f"{evidence}: {method}() tears down state beyond the object (a destroyed world, a closed handle), so "
                f"no object of {name} can be built in this process any more and nothing was compared; the checks "
                f"no longer call it. Exclude it, conformance.strategy({name!r}, {method!r})(lambda: None), or run "
                "each item in a process of its own")
        why = (f"{name}'s constructor rejected every generated argument set (last: {self.rejected})"
               if self.rejected is not None else f"no argument set for {name}'s constructor could be drawn")
        return NotApplicable(f"{why}, so no object of {name} could be built and nothing was compared; give objects "
                             f"with @conformance.examples({name!r}) or the constructor's arguments with "
                             f"conformance.strategy({name!r}, '__init__', ...)")

    # ----- ops -------------------------------------------------------------------------------------------------

    def op_arguments(self, op: CustomOpInfo) -> SearchStrategy[ArgumentSet]:
        """The other arguments of ``op`` (the object's own position left out), from the argument source.
        Raises :class:`~conformance.core.results.NotApplicable` when they cannot be generated or the op is
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
        ``args`` and ``obj`` at the object's position: what the call gave (:func:`observed_outputs`: the result,
        and for an op that writes arguments, ``Tensor(a!) out``, each written argument after the call)."""
        pos, kw = args.make()
        pos.insert(op.positions[0], obj)
        return observed_outputs(op, (fn or op.op)(*pos, **kw), pos, kw)

    @staticmethod
    def call_code(op: CustomOpInfo, args: ArgumentSet, obj_code: str) -> str:
        """The op's call as source, e.g. ``torch.ops.ns.op(torch.ones(3), obj)``; for an op that writes arguments,
        an expression of the same value :meth:`call_op` returns: ``{'returned': torch.ops.ns.op(x, obj,
        (_written0 := torch.zeros(3))), 'out (written)': _written0}``."""
        written = set(op.written)
        names = positional_argument_names(op, args)
        parts, keys = [], []
        for i, value in enumerate(args.args):
            name = names[i] if i < len(names) else None
            if name in written:
                parts.append(f"(_written{len(keys)} := {value.code})")
                keys.append(name)
            else:
                parts.append(value.code)
        parts.insert(op.positions[0], obj_code)
        for k, v in args.kwargs:
            if k in written:
                parts.append(f"{k}=(_written{len(keys)} := {v.code})")
                keys.append(k)
            else:
                parts.append(f"{k}={v.code}")
        ns, name = op.qualname.split("::")  # name keeps its .overload: torch.ops.ns.op.overload
        return observed_source(f"torch.ops.{ns}.{name}({', '.join(parts)})",
                               [(k, f"_written{i}") for i, k in enumerate(keys)])

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


def positional_argument_names(op: CustomOpInfo, args: ArgumentSet) -> list[str]:
    """The schema names of ``args``' positional values, in order (the object's position left out)."""
    return positional_names(op.schema, op.positions[0], args)


def observed_outputs(op: CustomOpInfo, result: Any, pos: list[Any], kw: dict[str, Any]) -> Any:
    """What one call of ``op`` gave (:func:`conformance.engine.mutations.observed`: its result, and for an
    out-variant op each argument it writes after the call). ``pos`` holds the object at its position, as the op
    was called."""
    return observed(op.schema, result, pos, kw)


def _positional_names(init: Callable) -> list[str]:
    """The names of ``__init__``'s positional parameters after ``self`` (``[]`` without a Python signature)."""
    try:
        params = list(inspect.signature(init).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


#: A result as numbers for a message (:func:`conformance.engine.render.render`, style ``numbers``): a tensor's
#: first 12 values with its shape and dtype, anything else as ``repr``; never cut.
show = functools.partial(render, limit=None, style="numbers")


def _eval_globals() -> dict[str, Any]:
    import math

    return {"torch": torch, "math": math}
