"""The check registry: every check is one module in this package, registered with :func:`check`, and listed, in
run order, in :data:`conformance.core.names.CHECKS` (the one place that orders them; ``--help`` reads it without
importing torch).

A check is a function ``(ctx: ClassContext, target)``. It reports what it found as
:class:`~conformance.core.results.Failure` objects — returned in an iterable (empty, or ``None``, means the class
passes) or raised one at a time — without naming itself or the class: the registry knows the check's name and the
runner the class and target. It raises :class:`~conformance.core.results.NotApplicable` to be skipped with a reason.
A ``"cell"``-scope check (the coverage matrix) returns its :class:`~conformance.core.results.Cell` instead.

``kinds`` says which classes a check is for: ``"torchbind"`` (a C++ TorchBind class and its fake class; ``ctx``
a :class:`~conformance.torchbind.context.ClassContext`) and/or ``"custom"`` (a Python custom class; ``ctx`` a
:class:`~conformance.custom.context.CustomClassContext`).

``scope`` says what ``target`` is: ``"class"`` (``None``), ``"method"`` (a C++ method name), ``"op"`` (an
:class:`~conformance.torchbind.discovery.OpInfo`, or a :class:`~conformance.custom.discovery.CustomOpInfo`) or ``"cell"`` (a coverage-matrix cell, listed by the check's own
``targets``). ``targets(ctx)`` lists the targets a check applies to (so, e.g., the ``tracing_mode`` check
exists only for classes that define ``tracing_mode``).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

from ..core.names import CHECKS
from ..core.results import Cell

__all__ = ["Check", "check", "all_checks", "get_check"]

CheckFunc = Callable[[Any, Any], "Iterable[Failure] | Cell | None"]  # Failure: conformance.core.results.Failure


@dataclasses.dataclass(frozen=True)
class Check:
    """A registered check: ``name`` (used in test ids), ``scope``, the function, and its target lister.

    ``targets(ctx)`` lists the targets of a class (``ctx``: its :class:`~conformance.torchbind.context.ClassContext`).
    ``lost(qualname, target, reason)``, when given, returns the :class:`~conformance.core.results.Cell` of an item
    whose worker process crashed or hung, so that reports still show it (as a failed cell). ``kinds``: the kinds of
    class (``ctx.kind``) it applies to.
    """

    name: str
    scope: str
    func: CheckFunc
    targets: Callable[[Any], list[Any]]
    description: str
    lost: Callable[[str, Any, str], Cell] | None = None
    kinds: tuple[str, ...] = ("torchbind",)

    def target_id(self, target: Any) -> str | None:
        """The bracketed part of the test id: a method name, an op's short name, or ``None``."""
        if target is None:
            return None
        return getattr(target, "short_name", target)


_REGISTRY: dict[str, Check] = {}


def _class_targets(ctx) -> list[Any]:
    return [None]


def _method_targets(ctx) -> list[Any]:
    return ctx.info.user_methods


def _op_targets(ctx) -> list[Any]:
    return list(ctx.info.ops)


_DEFAULT_TARGETS = {"class": _class_targets, "method": _method_targets, "op": _op_targets, "cell": lambda ctx: []}


def check(name: str, scope: str = "class", targets: Callable[[Any], list[Any]] | None = None,
          lost: Callable[[str, Any, str], Cell] | None = None, kinds: tuple[str, ...] = ("torchbind",)):
    """Register the decorated function as the check ``name`` (``lost``, ``kinds``: see :class:`Check`). Raises
    ``ValueError`` on a duplicate name."""
    if scope not in _DEFAULT_TARGETS:
        raise ValueError(f"unknown scope {scope!r}")

    def register(func: CheckFunc) -> CheckFunc:
        if name in _REGISTRY:
            raise ValueError(f"check {name!r} registered twice")
        doc = (func.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = Check(name, scope, func, targets or _DEFAULT_TARGETS[scope], doc[0] if doc else name,
                                lost, tuple(kinds))
        return func

    return register


def all_checks() -> list[Check]:
    """Every check, in the order of :data:`conformance.core.names.CHECKS`, importing the modules it names (each
    registers its checks with :func:`check`). Raises ``LookupError`` when a listed module did not register the
    check listed with it, or a module of this package registered a check the list leaves out."""
    for _name, module in CHECKS:
        importlib.import_module(f"{__name__}.{module}")
    listed = [name for name, _module in CHECKS]
    missing = [name for name in listed if name not in _REGISTRY]
    unlisted = sorted(set(_REGISTRY) - set(listed))
    if missing or unlisted:
        raise LookupError(f"conformance.core.names.CHECKS and the registered checks differ: listed but not registered "
                          f"{missing}, registered but not listed {unlisted}")
    return [_REGISTRY[name] for name in listed]


def get_check(name: str) -> Check:
    """The check registered as ``name``; ``KeyError`` if there is none (imports the checks first)."""
    all_checks()
    return _REGISTRY[name]
