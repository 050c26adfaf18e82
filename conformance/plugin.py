"""pytest wiring (entry point ``torchbind``): options, loading, and one test item per check and target.

Thin by design: loading is :mod:`conformance.loading`, discovery :mod:`conformance.discovery`, the checks live in
:mod:`conformance.checks` and run through :mod:`conformance.runner`; this module only maps them onto pytest.
Test ids: ``torchbind[ns.Cls]::<check>`` or ``torchbind[ns.Cls]::<check>[<method or op>]``.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from .checks import all_checks
from .context import context_for, set_load_code
from .discovery import SelectorError, expand_selector
from .loading import LoadError, apply_load_spec, repro_lines
from .results import Outcome
from .runner import CheckTarget, plan, run_target

_CLASSES = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchbind", "TorchBind class conformance (torchbind-conformance)")
    group.addoption("--torchbind-class", action="append", default=[], metavar="NS::CLS",
                    help="TorchBind class to check against its fake class; NS::* selects a whole namespace. "
                         "Repeatable. Ini: torchbind_classes.")
    group.addoption("--torchbind-load", action="append", default=[], metavar="SPEC",
                    help="load before collection, in order: a .so (torch.ops.load_library), a .py file or dotted "
                         "module (imported), or module:function (imported, then called). Repeatable. "
                         "Ini: torchbind_load.")
    group.addoption("--torchbind-checks", default=None, metavar="NAMES",
                    help="comma-separated check names to run (default: all). "
                         f"Available: {', '.join(c.name for c in all_checks())}.")
    parser.addini("torchbind_classes", "TorchBind classes to check (NS::CLS or NS::*)", type="linelist",
                  default=[])
    parser.addini("torchbind_load", "libraries / modules to load before collection", type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "torchbind: a generated TorchBind conformance check")
    selectors = list(config.getoption("torchbind_class")) or list(config.getini("torchbind_classes"))
    specs = list(config.getoption("torchbind_load")) or list(config.getini("torchbind_load"))
    rootdir = Path(str(config.rootpath))
    for spec in specs:
        try:
            apply_load_spec(spec, rootdir)
        except LoadError as exc:
            raise pytest.UsageError(str(exc)) from None
    set_load_code([line for spec in specs for line in repro_lines(spec, rootdir)])
    only = config.getoption("torchbind_checks")
    if only:
        known = {c.name for c in all_checks()}
        unknown = sorted(set(only.split(",")) - known)
        if unknown:
            raise pytest.UsageError(f"--torchbind-checks: unknown check(s) {', '.join(unknown)}; "
                                    f"available: {', '.join(sorted(known))}")
    classes: list[str] = []
    for selector in selectors:
        try:
            for qualname in expand_selector(selector):
                if qualname not in classes:
                    classes.append(qualname)
        except SelectorError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[_CLASSES] = classes


class CheckFailed(Exception):
    """Raised by a check item whose check reported failures; carries the :class:`Outcome`."""

    def __init__(self, outcome: Outcome):
        super().__init__(outcome.check)
        self.outcome = outcome


class TorchbindClass(pytest.Collector):
    """Collector for one TorchBind class: ``torchbind[ns.Cls]``."""

    def __init__(self, *, qualname: str, **kwargs):
        super().__init__(**kwargs)
        self.qualname = qualname

    def collect(self):
        only = self.config.getoption("torchbind_checks")
        units = plan(context_for(self.qualname), set(only.split(",")) if only else None)
        for unit in units:
            yield TorchbindCheckItem.from_parent(self, name=unit.name, unit=unit)


class TorchbindCheckItem(pytest.Item):
    """One check applied to one target; fails with the check's rendered failures."""

    def __init__(self, *, unit: CheckTarget, **kwargs):
        super().__init__(**kwargs)
        self.unit = unit
        self.add_marker("torchbind")
        self.user_properties += [("torchbind_class", unit.qualname), ("torchbind_check", unit.check.name)]
        if unit.target_name:
            self.user_properties.append(("torchbind_target", unit.target_name))

    def runtest(self) -> None:
        outcome = run_target(self.unit)
        self.user_properties.append(("torchbind_status", outcome.status))
        if outcome.skipped is not None:
            pytest.skip(outcome.skipped)
        if outcome.failures:
            raise CheckFailed(outcome)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CheckFailed):
            outcome = excinfo.value.outcome
            head = f"[{outcome.check}] {self.unit.check.description}"
            return "\n\n".join([head] + [f.render() for f in outcome.failures])
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        fake = context_for(self.unit.qualname).info.fake_class
        path, line = self.path, None
        if fake is not None:
            try:
                path, line = Path(inspect.getsourcefile(fake)), inspect.getsourcelines(fake)[1] - 1
            except (TypeError, OSError):
                pass
        return path, line, f"{self.parent.name}::{self.name}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    for qualname in config.stash.get(_CLASSES, []):
        info = context_for(qualname).info
        collector = TorchbindClass.from_parent(session, name=info.test_name, nodeid=info.test_name,
                                               qualname=qualname)
        items.extend(session.genitems(collector))
