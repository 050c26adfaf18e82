"""Run-wide state: one :class:`Session` per plugin run (kept in ``config.stash``), or per script.

Everything a run accumulates lives on its session instead of in module globals: the settings read from the
command line and ini, the lines that load the user's libraries (put at the top of reproducers), the per-class
contexts and the matrix scenarios built from them (caches: :meth:`Session.clear` drops them all), the table of
collected items the isolation worker runs, the calls abandoned while preparing examples, and the breadcrumbs of a
worker process. Example factories (``@conformance.examples``) and strategy overrides (``@conformance.strategy``)
are registered into the session's :class:`Registry`.

Code that is not handed a session reads :func:`current`: the session a ``with session.activated():`` block (the
plugin's run, a test) made active, else a default session created on first use for scripts. The plugin's session
shares the registry of the session active when pytest configured it, so decorators that ran earlier (in a
``conftest.py``, or in a module imported by an earlier in-process run) still count; a test that wants a clean
slate builds ``Session(registry=Registry())``.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - annotations only; these modules import torch
    from .context import ClassContext
    from .matrix.scenarios import Scenario
    from .runner import CheckTarget

__all__ = ["Settings", "Registry", "Session", "current", "DEFAULT_EXAMPLES"]

#: Default of ``--torchbind-examples``: random call sequences per class in the differential test (after the
#: explicit two-call ones): 1–5 s per sample class on 2 CPU cores. Without the explicit sequences, the random
#: search alone caught the broken sample fakes ``queue_pop_keeps`` and ``config_add_no_evict`` in 40 of 40 seeds,
#: and a pop-on-emptied queue bug that takes three calls to show (push, pop, pop) in 77 of 80.
DEFAULT_EXAMPLES = 100


@dataclasses.dataclass
class Settings:
    """What the command line and ini chose. ``examples``: hypothesis examples (random call sequences) per class
    for the differential test (``--torchbind-examples``); ``backends``: coverage-matrix backend names to run
    (``--torchbind-backends``; ``None``: all); ``checks``: check names to run (``--torchbind-checks``;
    ``None``: all); ``device``: where the example objects' tensors and the programs' inputs live
    (``--torchbind-device``: ``cpu``, ``cuda``, ``cuda:N``)."""

    examples: int = DEFAULT_EXAMPLES
    backends: tuple[str, ...] | None = None
    checks: tuple[str, ...] | None = None
    device: str = "cpu"


Factory = Callable[[], Iterable[Any]]
StrategyKey = tuple[str, str, "str | int | None"]  # (ns::Cls, method or ns::op, argument or None)


class Registry:
    """What users register from their fake-class modules: example factories per class (``@conformance.examples``)
    and hypothesis strategy overrides (``@conformance.strategy``). Registration order is kept."""

    def __init__(self) -> None:
        self._factories: dict[str, list[Factory]] = {}
        self._underived: set[str] = set()
        self._strategies: dict[StrategyKey, Any] = {}

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
        self._strategies[(qualname, method, arg)] = factory

    def strategies(self, qualname: str) -> dict[tuple[str, str | int | None], Any]:
        """``{(method, arg): factory}`` registered for ``ns::Cls``."""
        return {(m, a): f for (q, m, a), f in self._strategies.items() if q == qualname}


class Session:
    """The state of one run. Attributes:

    ``settings`` (:class:`Settings`), ``registry`` (:class:`Registry`), ``load_code`` (Python lines that load the
    user's libraries and fakes in a reproducer script), ``classes`` (the ``ns::Cls`` names selected),
    ``items`` (pytest node id -> :class:`~conformance.runner.CheckTarget`, for the isolation worker), ``abandoned``
    (call label -> what it did to a worker, see :mod:`conformance.isolation`), ``worker`` (the breadcrumb page when
    this process is an isolation worker, else ``None``), ``sigint`` (``None``: nobody watches SIGINT, so every
    ``KeyboardInterrupt`` counts as a real interrupt; ``False``: watched, or ignored as in a worker, and none came;
    ``True``: a real Ctrl-C came; see :mod:`conformance.faults`), and the caches :attr:`contexts` and
    :attr:`scenarios`.
    """

    def __init__(self, settings: Settings | None = None, registry: Registry | None = None,
                 load_code: Iterable[str] = ()) -> None:
        self.settings = settings if settings is not None else Settings()
        self.registry = registry if registry is not None else Registry()
        self.load_code: list[str] = list(load_code)
        self.classes: list[str] = []
        self.items: dict[str, CheckTarget] = {}
        self.abandoned: dict[str, str] = {}
        self.worker: Any = None
        self.sigint: bool | None = None
        self.contexts: dict[str, ClassContext] = {}
        self.scenarios: dict[tuple[str, str], Scenario] = {}

    def context(self, qualname: str) -> ClassContext:
        """The :class:`~conformance.context.ClassContext` of ``ns::Cls``, discovered on first use and cached.
        Raises ``KeyError`` (from discovery) for a class torch does not know."""
        ctx = self.contexts.get(qualname)
        if ctx is None:
            from .context import ClassContext
            from .discovery import discover

            ctx = self.contexts[qualname] = ClassContext(discover(qualname), self)
        return ctx

    def clear(self) -> None:
        """Forget every cache (contexts, their example objects, scenarios): needed after libraries, fakes or
        factories change."""
        self.contexts.clear()
        self.scenarios.clear()

    @contextlib.contextmanager
    def activated(self) -> Iterator[Session]:
        """Make this the :func:`current` session inside the block."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def activate(self) -> Callable[[], None]:
        """Make this the :func:`current` session until the returned function is called (for pytest's
        configure / unconfigure pair, which cannot share a ``with`` block)."""
        token = _ACTIVE.set(self)
        return lambda: _ACTIVE.reset(token)


# The one pointer to run-wide state: which session is active (a context variable, so a ``with`` block restores
# the previous one), and the default session scripts get when none is.
_ACTIVE: contextvars.ContextVar[Session | None] = contextvars.ContextVar("torchbind_session", default=None)
_DEFAULT: list[Session] = []


def current() -> Session:
    """The active session: the innermost :meth:`Session.activated` one, else the process's default session
    (created on first use)."""
    session = _ACTIVE.get()
    if session is not None:
        return session
    if not _DEFAULT:
        _DEFAULT.append(Session())
    return _DEFAULT[0]
