"""What users register from their fake-class modules: example factories (``@conformance.examples``) and argument
strategies (``@conformance.strategy``), kept in one :class:`Registry`.

The decorators run when the user's module is imported, before any run exists, so they write into the one registry
object of the process, :data:`REGISTRY`; an engine (:class:`conformance.runner.Engine`) is handed the registry it
reads (``REGISTRY`` unless told otherwise). A test that needs a clean slate wraps its registrations in
:meth:`Registry.scratch`. Imports nothing of the project but the qualified-name parser.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["Registry", "REGISTRY", "Factory", "StrategyKey"]

#: An example factory: called with no arguments, returns an iterable of objects of the class.
Factory = Callable[[], Iterable[Any]]
#: ``(ns::Cls, method or ns::op, argument name/index or None)``.
StrategyKey = tuple[str, str, "str | int | None"]


class Registry:
    """Example factories per class and strategy overrides, in registration order."""

    def __init__(self) -> None:
        self._factories: dict[str, list[Factory]] = {}
        self._underived: set[str] = set()
        self._strategies: dict[StrategyKey, Any] = {}
        self._observers: dict[tuple[str, str], bool] = {}

    def add_factory(self, qualname: str, factory: Factory, derive: bool = True) -> None:
        """Register ``factory`` for ``ns::Cls``; ``derive=False`` keeps the plugin from deriving further states
        of the class's examples by calling its methods."""
        self._factories.setdefault(qualname, []).append(factory)
        if not derive:
            self._underived.add(qualname)

    def factories(self, qualname: str) -> list[Factory]:
        """The factories registered for ``ns::Cls``, in registration order."""
        return list(self._factories.get(qualname, ()))

    def derives(self, qualname: str) -> bool:
        """Whether the plugin may derive states of ``ns::Cls``'s examples (no factory said ``derive=False``)."""
        return qualname not in self._underived

    def add_strategy(self, qualname: str, method: str, arg: str | int | None, factory: Any) -> None:
        """Register ``factory`` (see :func:`conformance.strategy`) for ``method`` (or op ``ns::op``) of ``ns::Cls``,
        for the argument ``arg`` (``None``: the whole argument list); a later registration of the same key wins."""
        self._strategies[(qualname, method, arg)] = factory

    def strategies(self, qualname: str) -> dict[tuple[str, str | int | None], Any]:
        """``{(method, arg): factory}`` registered for ``ns::Cls``."""
        return {(m, a): f for (q, m, a), f in self._strategies.items() if q == qualname}

    def set_observer(self, qualname: str, method: str, observer: bool) -> None:
        """Record the adopter's word on whether ``method`` of ``ns::Cls`` is an observer (see
        :func:`conformance.strategy`'s ``observer=``); a later call for the same method wins."""
        self._observers[(qualname, method)] = bool(observer)

    def observers(self, qualname: str) -> dict[str, bool]:
        """``{method: observer}`` as the adopter declared them for ``ns::Cls`` (True: named an observer, False:
        never one)."""
        return {m: o for (q, m), o in self._observers.items() if q == qualname}

    def copy(self) -> Registry:
        """A new registry holding the same registrations (later registrations in either do not reach the other)."""
        other = Registry()
        other._factories = {q: list(fs) for q, fs in self._factories.items()}
        other._underived, other._strategies = set(self._underived), dict(self._strategies)
        other._observers = dict(self._observers)
        return other

    def clear(self) -> None:
        """Forget every registration."""
        self._factories, self._underived, self._strategies, self._observers = {}, set(), {}, {}

    @contextlib.contextmanager
    def scratch(self) -> Iterator[Registry]:
        """Inside the block the registry starts empty; afterwards it holds exactly what it held before (for tests
        that register their own factories and strategies without leaking them)."""
        saved = self._factories, self._underived, self._strategies, self._observers
        self.clear()
        try:
            yield self
        finally:
            self._factories, self._underived, self._strategies, self._observers = saved


#: The registry of the process: ``@conformance.examples`` and ``@conformance.strategy`` register here.
REGISTRY = Registry()
