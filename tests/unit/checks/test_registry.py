"""The check registry: one ordered table (conformance.core.names.CHECKS) declares every check, its module and scope;
the module's folder gives its kind of class, and with it the type of the context its function takes."""

from __future__ import annotations

import subprocess
import sys
import typing
from pathlib import Path

import pytest

from conformance.checks import DEFAULT_TARGETS, _build, all_checks, get_check
from conformance.checks.matrix import CellTarget
from conformance.core.names import CHECK_NAMES, CHECKS, CheckRow
from conformance.custom.context import CustomClassContext
from conformance.custom.discovery import CustomOpInfo
from conformance.torchbind.context import ClassContext
from conformance.torchbind.discovery import OpInfo

CHECKS_DIR = Path(__file__).resolve().parents[3] / "conformance" / "checks"
CONTEXT = {("torchbind",): ClassContext, ("custom",): CustomClassContext,
           ("torchbind", "custom"): ClassContext | CustomClassContext}
TARGET = {("class", "torchbind"): type(None), ("class", "custom"): type(None),
          ("method", "torchbind"): str, ("method", "custom"): str,
          ("op", "torchbind"): OpInfo, ("op", "custom"): CustomOpInfo}


def test_the_checks_come_in_the_order_of_the_table_with_its_scopes_and_the_kinds_of_their_folders():
    checks = all_checks()
    assert tuple(c.name for c in checks) == CHECK_NAMES
    assert [(c.name, c.scope, c.kinds) for c in checks] == [(r.name, r.scope, r.kinds) for r in CHECKS]
    assert get_check("custom_op").kinds == ("torchbind",) and get_check("guards").kinds == ("custom",)
    assert get_check("matrix").kinds == ("torchbind", "custom") and get_check("matrix").lost is not None
    assert get_check("coverage").targets is DEFAULT_TARGETS["method"]
    assert get_check("tracing_mode").targets is not DEFAULT_TARGETS["class"]  # its own lister


def test_every_module_of_a_kind_folder_is_a_check_of_the_table():
    listed = {row.module for row in CHECKS}
    for folder in ("torchbind", "custom"):
        for path in sorted((CHECKS_DIR / folder).glob("*.py")):
            if path.stem != "__init__":
                assert f"{folder}.{path.stem}" in listed, f"{path} is no check of conformance.core.names.CHECKS"


@pytest.mark.parametrize("chk", all_checks(), ids=lambda c: c.name)
def test_a_check_function_takes_the_context_of_its_folder_kind_and_the_target_of_its_scope(chk):
    hints = typing.get_type_hints(chk.func)
    ctx, target = list(hints.values())[:2]
    assert ctx == CONTEXT[chk.kinds]
    if chk.scope == "cell":
        assert target is CellTarget
    elif chk.name == "guards":  # a symbolic class's USE_REAL members are targets beside its ops
        assert target == CustomOpInfo | str
    else:
        assert target is TARGET[chk.scope, chk.kinds[0]]


def test_a_row_without_its_function_or_in_no_kind_folder_is_refused():
    with pytest.raises(LookupError, match="defines no function nope"):
        _build(CheckRow("nope", "torchbind.coverage"))
    with pytest.raises(LookupError, match="unknown scope 'module'"):
        _build(CheckRow("coverage", "torchbind.coverage", "module"))
    with pytest.raises(ValueError, match="in no folder of a kind of class"):
        CheckRow("x", "other.x").kinds


def test_the_table_is_read_without_torch():
    code = ("import sys; from conformance.core.names import CHECKS; "
            "assert [r.kinds for r in CHECKS][-1] == ('torchbind', 'custom'); "
            "assert not [m for m in sys.modules if m.split('.')[0] == 'torch'], 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=CHECKS_DIR.parents[1])
