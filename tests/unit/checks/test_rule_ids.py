"""Every failure a check or a matrix cell reports names its rule: each ``Failure(...)`` built under
conformance/checks and conformance/matrix passes ``rule=``, and the rule ids the code holds are exactly those
docs/reference/checks.md lists, each ``<check>.<rule>`` of a registered check."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conformance.core.names import CHECK_NAMES

ROOT = Path(__file__).resolve().parents[3]
SOURCES = sorted(path for package in ("checks", "matrix") for path in (ROOT / "conformance" / package).rglob("*.py"))
DOCS = ROOT / "docs" / "reference" / "checks.md"
#: A rule id: ``<check>.<rule>``, the rule lower-case and hyphenated.
RULE_ID = re.compile(r"([a-z_]+)\.([a-z0-9]+(?:-[a-z0-9]+)*)")


def documented_rule_ids() -> list[str]:
    """The ids in the first column of the tables under docs/reference/checks.md's "Rule ids"."""
    section = DOCS.read_text().split("\n## Rule ids\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)


def _is_failure(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Name) and func.id == "Failure") or \
        (isinstance(func, ast.Attribute) and func.attr == "Failure")


def failures_without_rule(source: str, where: str) -> list[str]:
    """``where:line`` of each ``Failure(...)`` call in ``source`` that passes no ``rule=``, or an empty one."""
    missing = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _is_failure(node):
            rule = next((kw.value for kw in node.keywords if kw.arg == "rule"), None)
            if rule is None or (isinstance(rule, ast.Constant) and not rule.value):
                missing.append(f"{where}:{node.lineno}")
    return missing


def rule_ids_in(source: str) -> set[str]:
    """Every string constant of ``source`` that is a rule id of a registered check."""
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (m := RULE_ID.fullmatch(node.value)) and m.group(1) in CHECK_NAMES}


def test_the_walk_finds_a_failure_without_its_rule():
    source = ("f = Failure('a', rule='flatten.raises')\ng = Failure('b')\nh = results.Failure('c', rule='')\n"
              "i = Failure('d', rule=RULES[phase])\n")
    assert failures_without_rule(source, "x.py") == ["x.py:2", "x.py:3"]
    assert rule_ids_in(source) == {"flatten.raises"}


def test_every_failure_the_checks_and_the_matrix_build_passes_its_rule():
    missing = [where for path in SOURCES
               for where in failures_without_rule(path.read_text(), str(path.relative_to(ROOT)))]
    assert missing == []
    built = sum(1 for path in SOURCES for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Call) and _is_failure(node))
    assert built >= 40  # the walk reaches the checks (a moved package would make it vacuous)


def test_the_rule_ids_in_the_code_are_the_documented_ones():
    listed = documented_rule_ids()
    assert len(listed) == len(set(listed)), "a rule id listed twice"
    assert [r for r in listed if not RULE_ID.fullmatch(r)] == []
    documented = [r for r in listed if r.split(".")[0] in CHECK_NAMES]  # the checks' (not the engine's own)
    in_code = set().union(*(rule_ids_in(path.read_text()) for path in SOURCES))
    assert sorted(in_code - set(documented)) == [], "rule ids missing from docs/reference/checks.md"
    assert sorted(set(documented) - in_code) == [], "rule ids listed in docs/reference/checks.md no check uses"
    assert {r.split(".")[0] for r in documented} == set(CHECK_NAMES)  # every check names its rules


def test_the_rules_outside_the_checks_are_the_documented_ones():
    # The runner, the process layer and the fault handling keep their ids in RULES dicts: all listed, none extra.
    from conformance import runner
    from conformance.core import faults
    from conformance.process import lost

    in_code = set(runner.RULES) | set(faults.RULES) | set(lost.RULES)
    listed = {r for r in documented_rule_ids() if r.split(".")[0] not in CHECK_NAMES}
    assert in_code == listed
    assert {r.split(".")[0] for r in listed} == {"run", "process", "user"}
