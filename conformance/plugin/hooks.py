"""pytest wiring (entry point ``torchbind``): every hook is a one-line call into the run's
:class:`~conformance.plugin.run.PluginRun` (kept in ``config.stash``) or, on the controller only, its
:class:`~conformance.plugin.recorder.Recorder` (registered as a plugin there for the hooks without a ``config``
argument, ``pytest_runtest_logreport`` and xdist's ``pytest_handlecrashitem``).

Lazy, as hypothesis's own pytest plugin is: importing this module, and a pytest run that sets no ``--torchbind-*``
option and no ``torchbind_*`` ini key, import neither torch nor the plugin's engine; ``pytest_configure`` imports
:mod:`conformance.plugin.run` only when the run asks for the plugin. Options are :mod:`conformance.plugin.options`,
items :mod:`conformance.plugin.items`, the run's setup and how it runs an item :mod:`conformance.plugin.run`, its
reports :mod:`conformance.plugin.recorder`; the checks live in :mod:`conformance.checks` and run through
:mod:`conformance.runner`.
"""

from __future__ import annotations

import pytest

from ..core.names import BACKEND_NAMES, CHECK_NAMES, ITEM_DATA, REPORT_ATTR
from .options import add_options, claim_run

RUN_KEY = pytest.StashKey["PluginRun"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser, list(CHECK_NAMES), list(BACKEND_NAMES))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "torchbind: a generated TorchBind conformance check")
    named = claim_run(config)
    if named is not None:
        from .run import PluginRun

        config.stash[RUN_KEY] = PluginRun.configure(config, named)


def _run(config: pytest.Config):
    return config.stash.get(RUN_KEY, None)


def _recorder(config: pytest.Config):
    return _run(config) and _run(config).recorder


def pytest_report_header(config: pytest.Config) -> list[str]:
    return _run(config).report_header() if _run(config) else []


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    _run(config) and _run(config).collect(session, items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    # A torchbind item's data for the controller's recorder rides on its call report (as hypothesis's statistics
    # do), so pytest-xdist carries it from the workers and --junitxml never sees it.
    outcome = yield
    data = getattr(item, ITEM_DATA, None)
    if call.when == "call" and data is not None:
        setattr(outcome.get_result(), REPORT_ATTR, data)
    if data is not None:  # a torchbind item: what torch logged or printed may hold unencodable text
        from .items import encodable_report

        encodable_report(outcome.get_result())


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    _recorder(config) and _recorder(config).terminal_summary(terminalreporter)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _recorder(session.config) and _recorder(session.config).finish(session, exitstatus)
