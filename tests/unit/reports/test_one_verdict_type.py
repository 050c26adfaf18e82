"""One verdict type from the engine to the reports: :class:`conformance.core.results.Verdict` and its one
``to_json``/``from_json`` pair (the xdist report attribute, the reuse entry, the JSON report's rows); the rule ids
of the failures the runner, the process layer and the fault handling build; the reports import no pytest layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import conformance
from conformance.core.faults import UserFault, fault_failure
from conformance.core.results import REUSED, Cell, Evidence, Failure, Outcome, Status, Verdict
from conformance.process.lost import WorkerLost
from conformance.reports import build_report
from conformance.reports.json_report import VERDICT_ROW, render, verdict_row


def _failed() -> Verdict:
    cell = Cell("ns::Q", "push", "inductor", 0, 2, Status.FAILED, "differs", ["a", "b"], "def f(q): ...")
    failure = Failure("differs from eager", cpp="tensor([1])", fake="tensor([2])", details=("x",), call="q.push(t)",
                      repro="import torch\n", rule="matrix.differs")
    return Verdict("matrix", "ns::Q", "push-inductor", Status.FAILED, [failure], cell=cell, notes=["a note"],
                   evidence=Evidence({"output": 3}))


def test_a_verdict_crosses_json_whole_and_says_the_same():
    verdict = _failed()
    data = json.loads(json.dumps(verdict.to_json()))  # what pytest-xdist and pytest's cache carry
    back = Verdict.from_json(data)
    assert back.to_json() == verdict.to_json()
    assert back.status is Status.FAILED and back.cell == verdict.cell and back.evidence == verdict.evidence
    assert back.render() == verdict.render() and back.summary == "ns::Q.push-inductor: differs from eager"
    assert back.failures[0].rule == "matrix.differs" and back.failures[0].details == ("x",)
    assert back.item == "matrix[push-inductor]" and not back.lost and not back.reused
    assert conformance.Outcome is Verdict is Outcome  # the public name is the one verdict type


def test_a_row_of_the_json_report_is_the_verdicts_own_fields_and_reads_back():
    verdict = _failed()
    doc = json.loads(render(build_report([verdict.cell], verdicts={"ns::Q": [verdict]}, labels={"torch": "2.13.0"})))
    [row] = doc["classes"][0]["verdicts"]
    assert list(row) == list(VERDICT_ROW)
    assert row == {"item": "matrix[push-inductor]", "check": "matrix", "target": "push-inductor", "status": "failed",
                   "summary": "ns::Q.push-inductor: differs from eager", "baseline": False, "notes": ["a note"],
                   "evidence": {"output": 3}, "rules": ["matrix.differs"]}
    # A row has no failures: its summary is kept as the verdict's reason and its rules as the verdict's, so it says
    # the same line and names the same rules again.
    again = Verdict.from_json({**row, "qualname": "ns::Q"})
    assert again.summary == row["summary"] and again.status is Status.FAILED and again.failures == []
    assert again.rules == ["matrix.differs"]
    assert verdict_row(again) == row


def test_a_verdict_names_the_rules_of_its_failures_once_each_in_order():
    failures = [Failure("a", rule="signature.arg-type"), Failure("b", rule="signature.return-type"),
                Failure("c", rule="signature.arg-type"), Failure("d")]  # the last names no rule
    verdict = Verdict("signature", "ns::Q", "push", Status.FAILED, failures)
    assert verdict.rules == ["signature.arg-type", "signature.return-type"]
    assert verdict_row(verdict)["rules"] == verdict.rules and "rules" not in verdict.to_json()  # failures hold them
    assert Verdict.from_json(json.loads(json.dumps(verdict.to_json()))).rules == verdict.rules
    assert Verdict("signature", "ns::Q", "push").rules == [] and Verdict.skip("c", "ns::Q", None, "why").rules == []
    # Failures read back win over a stale list: the rules are always the failures' own.
    assert Verdict.from_json({**verdict_row(verdict), **verdict.to_json(), "rules": ["other.rule"]}).rules == \
        verdict.rules


def test_merge_keeps_each_verdicts_rules(tmp_path):
    from conformance.reports import write_report
    from conformance.reports.merge import load_run, merge_runs, write_merged

    def run(torch: str, shard: int) -> Path:
        verdicts = [_failed(), Verdict("signature", "ns::Q", "push", Status.FAILED,
                                       [Failure("bad type", rule="signature.arg-type")]),
                    Verdict("agreement", "ns::Q", "pop", evidence=Evidence({"result": 1}))][shard::2]
        path = tmp_path / f"{torch}-{shard}.json"
        write_report(build_report([v.cell for v in verdicts if v.cell], verdicts={"ns::Q": verdicts},
                                  labels={"torch": torch, "device": "cpu", "platform": "linux"}), path)
        return path

    expected = {"matrix[push-inductor]": ["matrix.differs"], "signature[push]": ["signature.arg-type"],
                "agreement[pop]": []}
    shards = [run("2.13.0", 0), run("2.13.0", 1)]
    read = load_run(shards[1]).verdicts["ns::Q"]
    assert {v.item: v.rules for v in read} == {"signature[push]": ["signature.arg-type"]}
    # The shards of one run: exactly the run's own report, rules included.
    write_merged(merge_runs(load_run(p) for p in shards), tmp_path / "one.json")
    [cls] = json.loads((tmp_path / "one.json").read_text())["classes"]
    assert {row["item"]: row["rules"] for row in cls["verdicts"]} == expected
    # Two runs: each run's verdict has its rules.
    write_merged(merge_runs(load_run(p) for p in [*shards, run("2.14.1", 0), run("2.14.1", 1)]), tmp_path / "two.json")
    [cls] = json.loads((tmp_path / "two.json").read_text())["classes"]
    assert {row["item"]: [r["rules"] for r in row["runs"]] for row in cls["verdicts"]} == {
        item: [rules, rules] for item, rules in expected.items()}


def test_a_reused_verdict_is_known_by_its_note():
    verdict = Verdict("coverage", "ns::Q", "push", notes=["x", f"{REUSED}2026-11-27 10:00 UTC, key 0123456789ab"])
    assert verdict.reused and verdict.item == "coverage[push]" and verdict.summary == "passed"
    assert not Verdict("coverage", "ns::Q", None).reused


def test_the_failures_the_engine_itself_builds_name_their_rule():
    assert WorkerLost("crash", "killed by SIGSEGV (Segmentation fault)", ["call a"], "call a", [], 1.0).failure(
        5.0).rule == "process.crashed"
    assert WorkerLost("hang", "did not return", ["call a"], "call a", [], 50.0).failure(5.0).rule == "process.hung"
    assert WorkerLost("memory", "exceeded", [], None, [], 1.0, used=2 << 30, limit=1 << 30).failure(
        5.0).rule == "process.memory-limit"
    assert WorkerLost("stray", "a result", [], None, [], 1.0, stray=123).failure(5.0).rule == "process.stray-result"
    assert WorkerLost("crash", "exited", ["fake call"], "fake call", [], 1.0, side="fake", status=3).failure(
        5.0).rule == "process.fake-exit"
    assert UserFault(SystemExit(3), "Q.push", "fake").failure().rule == "user.base-exception"
    try:
        raise SystemExit(3)
    except SystemExit as exc:
        assert fault_failure(exc).rule == "user.base-exception-outside-call"
    from conformance.runner import unsendable_outcome

    unsent = unsendable_outcome(Verdict("c", "ns::Q", None), ValueError("x"))
    assert unsent.lost and unsent.failures[0].rule == "process.unsendable-result"


def test_the_reports_import_no_pytest_layer():
    code = ("import sys, conformance.reports.html, conformance.reports.merge, conformance.reports.merged; "
            "print(sorted(m for m in sys.modules if m.startswith('conformance.plugin') or m == 'pytest'))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(
        conformance.__file__)), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_each_checks_targets_are_listed_once_per_engine():
    """The collection's plan, the recorder's count of planned cells, its stale baseline entries and the cells of
    lost items read one listing of each check's targets (``Engine.targets``), not a fresh plan each."""
    import types

    from conformance.runner import Engine

    engine = Engine()
    engine._contexts["ns::Q"] = context = object()  # a context already discovered
    listed = []
    check = types.SimpleNamespace(name="c", targets=lambda ctx: listed.append(ctx) or ["a", "b"])
    assert engine.targets("ns::Q", check) == ["a", "b"] and engine.targets("ns::Q", check) == ["a", "b"]
    assert listed == [context]
    engine.clear()  # libraries, fakes or factories changed: listed again
    engine._contexts["ns::Q"] = context
    engine.targets("ns::Q", check)
    assert listed == [context, context]
