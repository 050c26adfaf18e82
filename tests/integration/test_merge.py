"""One matrix across runs: ``python -m conformance merge`` on the JSON reports of runs and of shards of a run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conformance.core.results import Verdict
from conformance.__main__ import main
from conftest import run_inprocess, undated_report

COUNTER = ("--torchbind-load=sample_classes", "--torchbind-class=samples::Counter",
           "--torchbind-checks=fake_class,coverage,matrix", "--torchbind-backends=eager,export")


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401

    return "samples"


def _report(pytester, name, *extra):
    result = run_inprocess(pytester, *COUNTER, f"--torchbind-report={name}", *extra)
    assert result.ret in (0, 1), result.stdout.str()[-2000:]
    return pytester.path / name


def test_shards_of_one_run_merge_into_the_report_the_whole_run_writes(pytester, samples):
    whole = _report(pytester, "whole.json")
    first = _report(pytester, "shard1.json", "-k", "eager or fake_class")
    second = _report(pytester, "shard2.json", "-k", "not (eager or fake_class)")
    assert main(["merge", str(first), str(second), "--output", str(pytester.path / "merged.json")]) == 0
    assert undated_report(pytester.path / "merged.json") == undated_report(whole)
    doc = json.loads(whole.read_text())
    assert doc["run"]["torch"] and doc["run"]["device"] == "cpu" and doc["run"]["platform"].startswith(sys.platform)
    [cls] = doc["classes"]
    assert {v["item"] for v in cls["verdicts"]} >= {"fake_class", "coverage[increment]", "matrix[increment-eager]"}


def test_runs_of_two_torch_versions_show_both_statuses_and_what_changed(pytester, samples, tmp_path):
    old = _report(pytester, "old.json")
    doc = json.loads(old.read_text())
    # The same run as it would come from a newer torch that fixed one cell and broke another.
    doc["run"]["torch"] = doc["torch"] = "9.9.0"
    [cls] = doc["classes"]
    fixed = next(c for c in cls["cells"] if c["status"] == "unsupported")
    broken = next(c for c in cls["cells"] if c["status"] == "passed")
    fixed["status"], broken["status"] = "passed", "failed"
    new = tmp_path / "new.json"
    new.write_text(json.dumps(doc))
    for suffix in (".md", ".html", ".json"):
        assert main(["merge", str(old), str(new), "--output", str(tmp_path / f"m{suffix}")]) == 0
    md = (tmp_path / "m.md").read_text()
    assert "2. torch 9.9.0 · cpu ·" in md
    assert f"`{broken['row']}` / {broken['backend']}: broke in 9.9.0" in md
    assert f"`{fixed['row']}` / {fixed['backend']}: changed in 9.9.0" in md  # unsupported -> passed
    merged = json.loads((tmp_path / "m.json").read_text())
    assert [r["torch"] for r in merged["runs"]] == [json.loads(old.read_text())["torch"], "9.9.0"]
    [mcls] = merged["classes"]
    cell = next(c for c in mcls["cells"] if (c["row"], c["backend"]) == (broken["row"], broken["backend"]))
    assert [r["status"] for r in cell["runs"]] == ["passed", "failed"] and cell["change"] == "broke in 9.9.0"
    html = (tmp_path / "m.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "http" not in html.split("</style>")[1]
    assert "every check&#x27;s verdict, per run" in html or "every check's verdict, per run" in html


def test_a_torch_defect_fixed_by_a_newer_torch_says_so_with_its_script(pytester, samples, tmp_path):
    old = _report(pytester, "old.json")
    doc = json.loads(old.read_text())
    [cls] = doc["classes"]
    cell = next(c for c in cls["cells"] if c["status"] == "passed")
    signature = f"{cell['backend']}: an output differs from plain eager's (one method call)"
    cell.update(status="torch-defect", signature=signature, repro="print('the standalone script')\n")
    defective = tmp_path / "defect.json"
    defective.write_text(json.dumps(doc))
    doc["run"]["torch"] = doc["torch"] = "9.9.0"
    cell.update(status="passed", signature=None, repro=None)
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps(doc))
    for suffix in (".md", ".json"):
        assert main(["merge", str(defective), str(fixed), "--output", str(tmp_path / f"m{suffix}")]) == 0
    md = (tmp_path / "m.md").read_text()
    assert f"`{cell['row']}` / {cell['backend']}: fixed in 9.9.0" in md
    section = md.split("### Torch defects across runs", 1)[1]
    assert f"1. **{signature}** — in run 1; fixed in 9.9.0" in section
    assert "print('the standalone script')" in section
    merged = json.loads((tmp_path / "m.json").read_text())
    assert merged["torch_defects"] == [{"signature": signature, "runs": [1], "change": "fixed in 9.9.0",
                                        "repro": "print('the standalone script')\n"}]


@pytest.mark.process
def test_bad_input_is_one_line_and_exit_status_2(tmp_path):
    missing = subprocess.run([sys.executable, "-m", "conformance", "merge", str(tmp_path / "nope.json"), "-o",
                              str(tmp_path / "m.md")], capture_output=True, text=True)
    assert missing.returncode == 2 and "cannot read the report" in missing.stderr
    assert "Traceback" not in missing.stderr
    (tmp_path / "other.json").write_text("{}")
    assert main(["merge", str(tmp_path / "other.json"), "-o", str(tmp_path / "m.md")]) == 2
    assert main(["merge", str(tmp_path / "other.json"), "-o", str(tmp_path / "m.txt")]) == 2


def test_the_reports_of_runs_on_several_torches_feed_one_baseline(tmp_path, capsys):
    from conformance.plugin.baseline import Entry, load_baseline, save_baseline
    from conformance.reports import build_report
    from conformance.reports.json_report import render as render_json

    def report(torch_version, statuses):
        verdicts = {"ns::Q": [Verdict.from_json({"item": item, "check": item.partition("[")[0], "target": None,
                                                 "status": status, "summary": f"{item} failed on {torch_version}",
                                                 "baseline": False, "notes": []})
                              for item, status in statuses.items()]}
        path = tmp_path / f"r{torch_version}.json"
        labels = {"torch": torch_version, "device": "cpu", "platform": "linux-x86_64", "date": "2026-11-24T00:00:00Z"}
        path.write_text(render_json(build_report([], verdicts=verdicts, labels=labels)))
        return str(path)

    baseline = tmp_path / "b.json"
    save_baseline(baseline, {"torchbind[ns.Q]::coverage[fixed]": Entry("was broken", observed=("2.13", "2.14"))})
    runs = [report("2.13.0", {"agreement[pop]": "failed", "coverage[fixed]": "passed", "coverage[skip]": "skipped"}),
            report("2.14.1", {"agreement[pop]": "failed", "agreement[only214]": "failed", "coverage[fixed]": "passed"})]
    assert main(["merge", *runs, "--baseline", str(baseline)]) == 0
    assert load_baseline(baseline) == {
        "torchbind[ns.Q]::agreement[pop]": Entry("agreement[pop] failed on 2.13.0", observed=("2.13", "2.14")),
        "torchbind[ns.Q]::agreement[only214]": Entry("agreement[only214] failed on 2.14.1", observed=("2.14",))}
    out = capsys.readouterr().out
    assert f"accepted the verdicts of 2 run(s) (torch 2.13.0 · cpu · linux-x86_64, torch 2.14.1 · cpu · " \
           f"linux-x86_64) into {baseline}: 3 change(s)" in out
    assert "  dropped torchbind[ns.Q]::coverage[fixed]" in out and "  added torchbind[ns.Q]::agreement[pop] " \
           "(torch 2.13, 2.14 and newer)" in out
    assert main(["merge", *runs]) == 2  # neither --output nor --baseline


def _one_run(tmp_path):
    from conformance.reports import build_report
    from conformance.reports.json_report import render as render_json

    verdicts = {"ns::Q": [Verdict.from_json({"item": "agreement[pop]", "check": "agreement", "target": "pop",
                                             "status": "failed", "summary": "differs", "baseline": False, "notes": []})]}
    path = tmp_path / "r.json"
    path.write_text(render_json(build_report([], verdicts=verdicts, labels={"torch": "2.13.0", "device": "cpu",
                                                                          "platform": "linux", "date": "d"})))
    return path


def test_an_output_that_cannot_be_written_is_named_not_its_temporary_file(tmp_path, capsys):
    from conformance.reports.merge import MergeError, load_run, merge_runs, write_merged

    merged = merge_runs([load_run(_one_run(tmp_path))])
    out = tmp_path / "no" / "such" / "dir" / "m.md"
    with pytest.raises(MergeError) as refused:
        write_merged(merged, out)
    assert str(refused.value) == f"--output={out}: cannot write the merged report: [Errno 2] No such file or directory"
    write_merged(merged, tmp_path / "m.md")
    assert (tmp_path / "m.md").read_text().startswith("## TorchBind coverage matrix (torch 2.13.0)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.md", "r.json"]  # no temporary file left
    # The baseline merge accepts into: named too, in one line, exit status 2.
    baseline = tmp_path / "no" / "b.json"
    assert main(["merge", str(tmp_path / "r.json"), "--baseline", str(baseline)]) == 2
    err = capsys.readouterr().err
    assert err == f"torchbind-conformance merge: [Errno 2] No such file or directory: '{baseline}'\n", err


def test_merge_to_an_unwritable_output_is_one_line_naming_it(tmp_path, capsys):
    out = tmp_path / "no" / "m.html"
    assert main(["merge", str(_one_run(tmp_path)), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"torchbind-conformance merge: --output={out}: cannot write the merged report: [Errno 2] No such "
                   "file or directory\n"), err
