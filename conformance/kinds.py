"""The one module that knows both kinds of class: from a name a user writes to the kind, the discovery and the
class context. A TorchBind class is ``ns::Cls`` (:mod:`conformance.torchbind`); a Python custom class is
``module.QualName`` (:mod:`conformance.custom`), as :mod:`conformance.core.qualname` parses them. Everything above
this module (the runner, the pytest layer, the scaffold) asks here instead of telling the kinds apart itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from .core.qualname import is_custom_class_name, node_id, split_qualname
from .core.results import RegistrationError
from .engine import torch_api

if TYPE_CHECKING:
    from collections.abc import Callable

    from .core.breadcrumbs import Tracer
    from .core.registry import Factory, Registry
    from .core.settings import Settings
    from .custom.context import CustomClassContext
    from .torchbind.context import ClassContext

    #: A class context of either kind (for annotations).
    Context = ClassContext | CustomClassContext

__all__ = ["KINDS", "Kind", "kind_of", "context_for", "expand_selector", "why_nothing_to_check"]

Kind = Literal["torchbind", "custom"]
#: The kinds of class, as a check's ``kinds`` and a context's ``kind`` name them.
KINDS: tuple[Kind, ...] = ("torchbind", "custom")


def kind_of(qualname: str) -> Kind:
    """``"torchbind"`` for ``ns::Cls``, ``"custom"`` for ``module.QualName``. Raises nothing."""
    return "torchbind" if "::" in qualname else "custom"


def context_for(qualname: str, settings: Settings, registry: Registry, tracer: Tracer,
                lookup: Callable[[str], Any]) -> ClassContext | CustomClassContext:
    """A new class context of ``qualname``: a :class:`~conformance.torchbind.context.ClassContext` (``lookup``
    gives it the contexts of the classes its schemas name) or a
    :class:`~conformance.custom.context.CustomClassContext`. Raises ``KeyError`` (from discovery) for a class
    torch does not know."""
    if kind_of(qualname) == "custom":
        from .custom.context import CustomClassContext
        from .custom.discovery import discover_custom

        return CustomClassContext(discover_custom(qualname), settings, registry, tracer)
    from .torchbind.context import ClassContext
    from .torchbind.discovery import discover

    return ClassContext(discover(qualname), settings, registry, tracer, lookup)


def expand_selector(selector: str) -> list[str]:
    """Expand a ``--torchbind-class`` value into class names: ``ns::Cls`` or an ``fnmatch`` pattern on either part
    (:func:`conformance.torchbind.discovery.expand_torchbind_selector`), or ``module.QualName`` or a pattern on such
    names (:func:`conformance.custom.discovery.expand_custom_selector`). Raises
    :class:`~conformance.core.results.SelectorError` when the selector is malformed or matches no class; the
    message lists what does exist."""
    if split_qualname(selector) is None and is_custom_class_name(selector):
        from .custom.discovery import expand_custom_selector

        return expand_custom_selector(selector)
    from .torchbind.discovery import expand_torchbind_selector

    return expand_torchbind_selector(selector)


def why_nothing_to_check(qualname: str, kind: Kind, checks, only: tuple[str, ...] | None,
                         backends: tuple[str, ...] | None) -> str:
    """Why a selected class has no item to collect: one clause per check the run selected (``only``, the
    ``--torchbind-checks`` names, or every check of ``checks``, the registered :class:`conformance.checks.Check`
    objects), saying why it has no target in the class of ``kind`` (``"torchbind"`` or ``"custom"``): a check for
    the other kind of class, no op taking the class, no method besides the protocol ones, no matrix cell (with
    ``backends``, the ``--torchbind-backends`` names), or a check that does not apply to it. Raises nothing."""
    selected = [c for c in checks if only is None or c.name in only]
    clauses = []
    for chk in selected:
        if kind not in chk.kinds:
            other = "TorchBind classes" if kind == "custom" else "Python custom classes"
            clauses.append(f"{chk.name} is for {other}")
        elif chk.scope == "op":
            clauses.append(f"{chk.name}: no custom op takes a {qualname} argument")
        elif chk.scope == "method":
            clauses.append(f"{chk.name}: the class has no method besides its constructor and the pickling and "
                           "flatten protocol")
        elif chk.scope == "cell":
            clauses.append(f"{chk.name}: no coverage-matrix cell" +
                           (f" with --torchbind-backends={','.join(backends)}" if backends else ""))
        else:
            clauses.append(f"{chk.name} does not apply to it")
    chosen = f"the checks selected (--torchbind-checks={','.join(only)})" if only else "no check"
    return (f"{node_id(qualname, '').removesuffix('::')}: nothing to check in {qualname}: {chosen} "
            f"{'have' if only else 'has'} no item for it ({'; '.join(clauses) or 'no check is registered'})")


def why_no_ops(qualname: str, kind: Kind, info: Any) -> str | None:
    """For a Python custom class (``kind`` ``"custom"``) that no op takes (``info.ops`` empty), why its op checks
    (``fake_kernel``, ``guards``, ``recompiles``, ``baked``, the matrix) have nothing to run, naming where the ops
    were looked for (:data:`conformance.custom.discovery.WHERE_OPS_ARE_FOUND`); ``None`` otherwise. A TorchBind
    class is checked through its methods, with or without ops."""
    if kind != "custom" or info.ops:
        return None
    from .custom.discovery import WHERE_OPS_ARE_FOUND

    return (f"{node_id(qualname, '').removesuffix('::')}: no op takes a {qualname} argument, so the checks of its "
            f"ops (fake_kernel, guards, recompiles, baked, the coverage matrix) have nothing to run; looked in "
            f"{WHERE_OPS_ARE_FOUND}. An op defined before the plugin imported the --torchbind-load modules, from "
            "a schema string built at run time, with an unannotated fake kernel, is not seen: load the module that "
            "defines it with --torchbind-load")


# ----- conformance.strategy: a name of either kind, or a custom op taking classes of both ---------------------------

__all__ += ["classes_taking", "strategy"]


def classes_taking(op: str) -> list[str]:
    """The classes the custom op ``op`` (``"ns::op"``, or ``"ns::op.overload"``) takes: TorchBind classes
    (``ns::Cls``) where its schema has an argument of the class, Python custom classes (``module.QualName``)
    where a ``torch.library.custom_op`` parameter is annotated with one; sorted. Raises ``ValueError`` when no such
    op is registered (its library is not loaded yet) or it takes no class, naming it."""
    import torch

    from .custom.discovery import discover_custom, registered_custom_classes
    from .torchbind.discovery import CLASS_PREFIX, qualname_of

    name, _, overload = op.partition(".")
    if split_qualname(name) is None:
        raise RegistrationError(
            f"conformance.strategy({op!r}, ...): name the class and its method "
            f"(conformance.strategy({op!r}, 'method', arg=...)), or a custom op alone as 'ns::op'")
    overloads = torch_api.schemas_for_operator(name)
    schemas = [s for s in overloads if s.overload_name == overload]
    if overloads and not schemas:
        raise RegistrationError(
            f"conformance.strategy({op!r}, ...): {name} has no overload {overload or '(default)'}; "
            f"name one of {', '.join(name + ('.' + s.overload_name if s.overload_name else '') for s in overloads)}")
    found = {qualname_of(a.type.qualified_name()) for s in schemas for a in s.arguments
             if a.type.kind() == "ClassType" and a.type.qualified_name().startswith(CLASS_PREFIX)}
    for custom in registered_custom_classes():
        if any(o.qualname == op for o in discover_custom(custom).ops):
            found.add(custom)
    if found:
        return sorted(found)
    if not schemas:
        raise RegistrationError(
            f"conformance.strategy({op!r}, ...): no operator {op} is registered; load its library "
            "(or define the custom op) before the module that registers the strategy, or name a class "
            f"and its method: conformance.strategy('ns::Cls', 'method', arg=...)")
    raise RegistrationError(
        f"conformance.strategy({op!r}, ...): {op} takes no TorchBind or Python custom class "
        f"({schemas[0]}), so no check calls it; a strategy for a class's method names both: "
        "conformance.strategy('ns::Cls', 'method', arg=...)")


def strategy(qualname: str, method: str | None = None, arg: str | int | None = None, *,
             observer: bool | None = None):
    """Say how every caller draws the arguments of one method (or custom op) of a class: the per-call checks, the
    differential test, the coverage matrix, the ``flatten`` probe and the scaffold alike (docs/how-to/strategies.md).

    A decorator on a factory returning a hypothesis strategy (or a strategy object itself)::

        @conformance.strategy("mylib::Tokenizer", "encode", arg="text")   # one argument, by schema name
        def texts():
            return st.sampled_from(["'hello'", "'a b'"])                 # Python source of each value

        @conformance.strategy("mylib::Ring", "resize")                    # the whole argument list
        def sizes():
            return st.integers(1, 8).map(lambda n: f"{n}, keep=True")

        @conformance.strategy("mylib::Ring", "get", arg="i")              # depends on the object
        def indices(obj):
            return st.integers(0, obj.size() - 1) if obj.size() else st.nothing()

        @conformance.strategy("mylib::ring_scale", arg="factor")          # an op alone: every class it takes
        def factors():
            return st.floats(0.5, 2.0).map(repr)

        conformance.strategy("mylib::Ring", "drain")(lambda: None)        # never call drain at all

    ``qualname`` is ``"ns::Cls"`` (or ``"module.QualName"``) and ``method`` a method name or the ``"ns::op"`` name of a
    custom op taking the class; without ``method``, ``qualname`` names a custom op, registered by then, and the
    override applies to every class it takes (:func:`classes_taking`). ``arg`` picks one
    argument by schema name (``"x"``; ``"_1"`` where the binding names none) or position (``0``: the first after
    ``self``; for an op, the first that is not an object of the class: ``arg=0`` of ``copy_blocks(src, dst, seq)``
    is ``seq``). A factory with one parameter is called with the real object the call is for (it must only read
    it; ``st.nothing()``: no call is valid in that state), one without, once per caller.

    Drawn values are **Python source** evaluated with ``torch`` and ``math`` in scope, so that the reproducer
    prints every call: a ``str`` is source (``"torch.ones(3)"``; a string *value* is ``"'abc'"``), a
    :class:`conformance.engine.values.Value` is taken as is, ``int``, ``float``, ``bool`` and ``None`` are ``repr``'d. A
    whole-method draw is the argument list: source text (``"torch.ones(3), alpha=2.0"``), a ``list``/``tuple`` of
    values, a ``dict`` of keyword values, or an :class:`~conformance.engine.values.ArgumentSet`. A whole-method factory
    returning ``None`` excludes the method from the gate: nothing calls it, and every item of it skips
    (``coverage`` and ``signature`` included). Deterministic callers draw a small fixed set
    (:func:`conformance.engine.arguments.draw_fixed`); the differential test draws freely.

    ``observer`` (whole methods; effective at the call) is the adopter's word on whether the differential test may
    call the method after every step to read the state: ``False`` keeps it a step, ``True`` names an observer the
    plugin's proof cannot establish alone (:mod:`conformance.torchbind.differential.plan`; docs/how-to/strategies.md#observers).

    The override goes into :data:`conformance.core.registry.REGISTRY`; a factory that takes no object is called and
    drawn from once, at registration (:func:`conformance.engine.overrides.check_override`). Returns the factory unchanged.
    Raises ``ValueError`` when ``qualname`` is not ``ns::Cls`` (nor, without ``method``, a registered op taking a
    class), for ``observer`` with ``arg`` or without ``method``, or ``None`` returned for one argument;
    ``TypeError`` for a factory that returns no strategy or draws what is not an argument (naming what it drew).
    """
    from .core.qualname import is_class_name
    from .core.registry import REGISTRY
    from .engine.overrides import check_override

    call = f"conformance.strategy({qualname!r}" + (f", {method!r}" if method is not None else "") + (
        f", arg={arg!r})" if arg is not None else ")")
    if observer is not None and (method is None or arg is not None):
        raise RegistrationError(
            f"{call[:-1]}, observer=...): observer= is said of a whole method: name the class and the "
            "method, and leave arg out")
    if method is not None and not is_class_name(qualname):
        raise RegistrationError(
            f"{call}: expected 'namespace::Class' (a TorchBind class) or 'module.QualName' (a Python "
            "custom class), then the method or 'ns::op'")
    owners = classes_taking(qualname) if method is None else [qualname]
    if observer is not None:
        REGISTRY.set_observer(qualname, method, observer)

    def register(factory):
        check_override(call, arg, factory)
        for owner in owners:
            REGISTRY.add_strategy(owner, qualname if method is None else method, arg, factory)
        return factory

    return register


__all__ += ["examples"]


def examples(qualname: str, *, derive: bool = True) -> Callable[[Factory], Factory]:
    """Register a factory of example objects for the TorchBind class ``qualname`` (``"ns::Cls"``), or for the Python
    custom class ``"module.QualName"`` (its factory returns instances of the class).

    Use as a decorator on a zero-argument function returning an iterable of ``torch.ScriptObject`` instances
    of that class. Once a factory is registered for a class, generated constructor arguments are not used for it.
    The factory is called again for every fresh object the checks need; it must return new objects in the same
    states each time. By default the plugin also derives further states from the first example by calling each
    state-changing method twice (e.g. two pushes); ``derive=False`` turns that off for the class, e.g. when such
    a state crashes and the states the factory builds should still be checked. The factory goes into the
    process's registry (:data:`conformance.core.registry.REGISTRY`). Returns the factory unchanged. Raises
    ``ValueError`` if ``qualname`` is not ``ns::Cls``.
    """
    from .core.qualname import is_class_name
    from .core.registry import REGISTRY

    if not is_class_name(qualname):
        raise RegistrationError(
            f"conformance.examples({qualname!r}): expected 'namespace::Class' (a TorchBind "
            "class) or 'module.QualName' (a Python custom class)")

    def register(factory: Factory) -> Factory:
        REGISTRY.add_factory(qualname, factory, derive=derive)
        return factory

    return register


__all__ += ["registered_classes"]


def registered_classes() -> list[str]:
    """Every class torch knows now, of both kinds: the TorchBind classes (``ns::Cls``) and the Python custom
    classes (``module.QualName``), each kind sorted. Raises nothing."""
    from .custom.discovery import registered_custom_classes
    from .torchbind.discovery import registered_classes as registered_torchbind_classes

    return [*registered_torchbind_classes(), *registered_custom_classes()]
