"""pytest wiring (entry point ``torchbind``): every hook is a one-line call into the run's
:class:`~conformance.pytest_run.PluginRun` (kept in ``config.stash``; it is also registered as a plugin for the
one hook without a ``config`` argument, ``pytest_runtest_logreport``).

Options are :mod:`conformance.options`, items :mod:`conformance.items`, the run's state and its reports
:mod:`conformance.pytest_run`; the checks live in :mod:`conformance.checks` and run through
:mod:`conformance.runner`.
"""

from __future__ import annotations

import pytest

from .checks import all_checks
from .matrix.backend import all_backends
from .options import add_options
from .pytest_run import RUN_KEY, PluginRun


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser, [c.name for c in all_checks()], [b.name for b in all_backends()])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "torchbind: a generated TorchBind conformance check")
    config.stash[RUN_KEY] = PluginRun.configure(config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    config.stash[RUN_KEY].collect(session, items)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    config.stash[RUN_KEY].terminal_summary(terminalreporter)


def pytest_sessionfinish(session: pytest.Session) -> None:
    session.config.stash[RUN_KEY].finish()
