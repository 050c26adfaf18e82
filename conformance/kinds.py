"""The one module that knows both kinds of class: from a name a user writes to the kind, the discovery and the
class context. A TorchBind class is ``ns::Cls`` (:mod:`conformance.torchbind`); a Python custom class is
``module.QualName`` (:mod:`conformance.custom`), as :mod:`conformance.core.qualname` parses them. Everything above
this module (the runner, the pytest layer, the scaffold) asks here instead of telling the kinds apart itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from .core.qualname import is_custom_class_name, node_id, split_qualname

if TYPE_CHECKING:
    from collections.abc import Callable

    from .core.breadcrumbs import Tracer
    from .core.registry import Registry
    from .core.settings import Settings
    from .custom.context import CustomClassContext
    from .torchbind.context import ClassContext

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

