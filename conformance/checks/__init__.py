"""The check registry: every check is a function in one module of this package, declared, in run order, by one row
of :data:`conformance.core.names.CHECKS` (name, module, scope; ``--help`` reads the table without importing
torch). That table is the registry's only declaration: :func:`all_checks` builds each :class:`Check` from its row
and the module's function of the check's name, and nothing else lists, orders or scopes the checks.

The folder says which classes a check is for (:attr:`conformance.core.names.CheckRow.kinds`), and with it the type
of its context ``ctx``: a module under ``torchbind/`` checks a C++ TorchBind class and its fake class (``ctx`` a
:class:`~conformance.torchbind.context.ClassContext`: :data:`TorchBindCheckFunc`), one under ``custom/`` a Python
custom class (``ctx`` a :class:`~conformance.custom.context.CustomClassContext`: :data:`CustomCheckFunc`), and the
one at the top (``matrix``) both (:data:`CellCheckFunc`).

A check is a function ``(ctx, target)``. It reports what it found as :class:`~conformance.core.results.Failure`
objects, each with its stable ``rule`` id (``<check>.<rule>``, listed in docs/reference/checks.md) — returned in an
iterable (empty, or ``None``, means the class passes; :class:`~conformance.core.results.Note` objects may ride
along) or raised one at a time — without naming itself or the class: the registry knows the check's name and the
runner the class and target. It raises :class:`~conformance.core.results.NotApplicable` to be skipped with a
reason. A ``"cell"``-scope check (the coverage matrix) returns its :class:`~conformance.core.results.Cell`
instead.

``scope`` says what ``target`` is: ``"class"`` (``None``), ``"method"`` (a method name, ``str``), ``"op"`` (an
:class:`~conformance.torchbind.discovery.OpInfo`, or a :class:`~conformance.custom.discovery.CustomOpInfo`) or
``"cell"`` (a :class:`~conformance.checks.matrix.CellTarget`). The targets of a class are listed by the scope's
default (:data:`DEFAULT_TARGETS`) or by the lister the module gives with :func:`with_targets` (so, e.g., the
``tracing_mode`` check exists only for classes that define ``tracing_mode``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, Union

from ..core.names import CHECKS, SCOPES, CheckRow
from ..core.results import Cell, Failure, Note

if TYPE_CHECKING:
    from ..custom.context import CustomClassContext
    from ..torchbind.context import ClassContext

__all__ = ["Check", "CheckFunc", "TorchBindCheckFunc", "CustomCheckFunc", "CellCheckFunc", "Findings",
           "DEFAULT_TARGETS", "with_targets", "all_checks", "get_check"]

#: What a check returns: its failures (and notes), or ``None`` for none.
Findings = Union[Iterable[Union[Failure, Note]], None]
#: A check under ``checks/torchbind/``: ``(ClassContext, target) -> Findings``; the target is ``None``, a method
#: name (``str``) or an :class:`~conformance.torchbind.discovery.OpInfo`, by scope.
TorchBindCheckFunc = Callable[["ClassContext", Any], Findings]
#: A check under ``checks/custom/``: ``(CustomClassContext, target) -> Findings``; the target is ``None``, a member
#: name (``str``) or a :class:`~conformance.custom.discovery.CustomOpInfo`, by scope.
CustomCheckFunc = Callable[["CustomClassContext", Any], Findings]
#: The ``matrix`` check, for both kinds: ``(context, CellTarget) -> Cell``.
CellCheckFunc = Callable[[Union["ClassContext", "CustomClassContext"], Any], Cell]
CheckFunc = Union[TorchBindCheckFunc, CustomCheckFunc, CellCheckFunc]
#: Lists a check's targets in a class: ``(ctx) -> [target, ...]``.
TargetLister = Callable[[Any], list]
#: The cell of an item whose worker process crashed or hung: ``(qualname, target, reason) -> Cell``.
LostCell = Callable[[str, Any, str], Cell]

F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class Check:
    """A registered check: ``name`` (used in test ids), ``scope``, the function, and its target lister.

    ``targets(ctx)`` lists the targets of a class (``ctx``: its class context). ``lost(qualname, target,
    reason)``, when given, returns the :class:`~conformance.core.results.Cell` of an item whose worker process
    crashed or hung, so that reports still show it (as a failed cell). ``kinds``: the kinds of class (``ctx.kind``)
    it applies to, from its module's folder.
    """

    name: str
    scope: str
    func: CheckFunc
    targets: TargetLister
    description: str
    lost: LostCell | None = None
    kinds: tuple[str, ...] = ("torchbind",)

    def target_id(self, target: Any) -> str | None:
        """The bracketed part of the test id: a method name, an op's short name, or ``None``."""
        if target is None:
            return None
        return getattr(target, "short_name", target)


def _class_targets(ctx) -> list[Any]:
    return [None]


def _method_targets(ctx) -> list[Any]:
    return ctx.info.user_methods


def _op_targets(ctx) -> list[Any]:
    return list(ctx.info.ops)


#: The targets of a check that gives no lister of its own, by scope (a ``"cell"`` check must give one).
DEFAULT_TARGETS: dict[str, TargetLister] = {"class": _class_targets, "method": _method_targets, "op": _op_targets,
                                            "cell": lambda ctx: []}


@dataclasses.dataclass(frozen=True)
class _Listing:
    targets: TargetLister
    lost: LostCell | None


def with_targets(targets: TargetLister, lost: LostCell | None = None) -> Callable[[F], F]:
    """Give the decorated check function its own target lister (instead of its scope's default) and, for a cell
    check, its ``lost`` cell maker (see :class:`Check`). Returns the function itself; registers nothing (the row of
    :data:`conformance.core.names.CHECKS` does)."""

    def give(func: F) -> F:
        func._conformance_listing = _Listing(targets, lost)  # type: ignore[attr-defined]
        return func

    return give


def _build(row: CheckRow) -> Check:
    """The :class:`Check` of one row, importing its module. Raises ``LookupError`` when the module defines no
    function of the check's name or the row's scope is unknown."""
    if row.scope not in SCOPES:
        raise LookupError(f"conformance.core.names.CHECKS: check {row.name!r} has the unknown scope {row.scope!r}")
    module = importlib.import_module(f"{__name__}.{row.module}")
    func = getattr(module, row.name, None)
    if not callable(func):
        raise LookupError(f"conformance.core.names.CHECKS lists the check {row.name!r} in {module.__name__}, which "
                          f"defines no function {row.name}")
    listing: _Listing | None = getattr(func, "_conformance_listing", None)
    doc = (func.__doc__ or "").strip().splitlines()
    return Check(row.name, row.scope, func, listing.targets if listing else DEFAULT_TARGETS[row.scope],
                 doc[0] if doc else row.name, listing.lost if listing else None, row.kinds)


@functools.cache
def _checks() -> tuple[Check, ...]:
    return tuple(_build(row) for row in CHECKS)


def all_checks() -> list[Check]:
    """Every check, in the order of :data:`conformance.core.names.CHECKS`, importing the modules it names. Raises
    ``LookupError`` when a row names a module without the check's function, or an unknown scope."""
    return list(_checks())


def get_check(name: str) -> Check:
    """The check named ``name``; ``KeyError`` if there is none (imports the checks first)."""
    found = {chk.name: chk for chk in _checks()}
    return found[name]
