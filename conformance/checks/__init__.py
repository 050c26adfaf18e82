"""The check registry: every check is one module in this package, registered with :func:`check`.

A check is a function ``(ctx: ClassContext, target) -> list[Failure]``: an empty list means the class passes it.
``scope`` says what ``target`` is: ``"class"`` (``None``), ``"method"`` (a C++ method name), ``"op"`` (an
:class:`~conformance.discovery.OpInfo`) or ``"cell"`` (a coverage-matrix cell, listed by the check's own
``targets``). ``targets(info)`` lists the targets a check applies to (so, e.g., the
``tracing_mode`` check exists only for classes that define ``tracing_mode``). A check raises
:class:`~conformance.results.NotApplicable` to be skipped with a reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..discovery import ClassInfo
from ..results import Failure

__all__ = ["Check", "check", "all_checks", "get_check"]

CheckFunc = Callable[[Any, Any], list[Failure]]


@dataclasses.dataclass(frozen=True)
class Check:
    """A registered check: ``name`` (used in test ids), ``scope``, the function, and its target lister.

    ``lost(qualname, target, reason)``, when given, returns the report data (:attr:`Verdict.data`) of an item
    whose worker process crashed or hung, so that reports still show it (e.g. the matrix cell as failed).
    """

    name: str
    scope: str
    func: CheckFunc
    targets: Callable[[ClassInfo], list[Any]]
    description: str
    lost: Callable[[str, Any, str], dict] | None = None

    def target_id(self, target: Any) -> str | None:
        """The bracketed part of the test id: a method name, an op's short name, or ``None``."""
        if target is None:
            return None
        return getattr(target, "short_name", target)


_REGISTRY: dict[str, Check] = {}


def _class_targets(info: ClassInfo) -> list[Any]:
    return [None]


def _method_targets(info: ClassInfo) -> list[Any]:
    return info.user_methods


def _op_targets(info: ClassInfo) -> list[Any]:
    return list(info.ops)


_DEFAULT_TARGETS = {"class": _class_targets, "method": _method_targets, "op": _op_targets, "cell": lambda info: []}


def check(name: str, scope: str = "class", targets: Callable[[ClassInfo], list[Any]] | None = None,
          lost: Callable[[str, Any, str], dict] | None = None):
    """Register the decorated function as the check ``name`` (``lost``: see :class:`Check`). Raises
    ``ValueError`` on a duplicate name."""
    if scope not in _DEFAULT_TARGETS:
        raise ValueError(f"unknown scope {scope!r}")

    def register(func: CheckFunc) -> CheckFunc:
        if name in _REGISTRY:
            raise ValueError(f"check {name!r} registered twice")
        doc = (func.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = Check(name, scope, func, targets or _DEFAULT_TARGETS[scope], doc[0] if doc else name,
                                lost)
        return func

    return register


def all_checks() -> list[Check]:
    """Every registered check, in the order the plugin runs them."""
    return list(_REGISTRY.values())


def get_check(name: str) -> Check:
    return _REGISTRY[name]


# Registration order is the order of the items in a run.
from . import (  # noqa: E402,F401
    fake_class,
    examples,
    coverage,
    signature,
    return_type,
    flatten,
    roundtrip,
    agreement,
    custom_op,
    tracing_mode,
    deepcopy,
    differential,
    matrix,
)
