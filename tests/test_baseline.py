"""The expected-failure baseline (--torchbind-baseline / --torchbind-accept)."""

from __future__ import annotations

import json

import pytest

from conformance.baseline import SCHEMA, BaselineError, load_baseline, merge_accepted, save_baseline
from conftest import TORCH_SPEC, run_inprocess

FOO = "torchbind[_TorchScriptTesting._Foo]"
ARGS = (f"--torchbind-load={TORCH_SPEC}", "--torchbind-class=_TorchScriptTesting::_Foo",
        "-k", "coverage or fake_class")


def run(pytester, *extra):
    return run_inprocess(pytester, *ARGS, *extra)


def test_merge_keeps_reasons_drops_fixed_keeps_unrun():
    old = {"a": "reviewed reason", "b": "fixed since", "c": "not run this time"}
    results = {"a": (True, "new text"), "b": (False, ""), "d": (True, "first failure")}
    assert merge_accepted(old, results) == {"a": "reviewed reason", "c": "not run this time", "d": "first failure"}


def test_load_rejects_malformed_files(tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text("{not json")
    with pytest.raises(BaselineError, match="cannot read the baseline"):
        load_baseline(bad)
    bad.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(BaselineError, match="torchbind-baseline/1"):
        load_baseline(bad)
    bad.write_text(json.dumps({"schema": SCHEMA, "known_failures": {"x": 1}}))
    with pytest.raises(BaselineError, match="reason strings"):
        load_baseline(bad)
    with pytest.raises(BaselineError, match="no such baseline file"):
        load_baseline(tmp_path / "missing.json")
    assert load_baseline(tmp_path / "missing.json", missing_ok=True) == {}
    save_baseline(bad, {"z": "2", "a": "1"})
    assert list(load_baseline(bad)) == ["a", "z"]


def test_accept_then_gate(pytester):
    path = pytester.path / "baseline.json"
    first = run(pytester, f"--torchbind-baseline={path}", "--torchbind-accept")
    assert first.ret == pytest.ExitCode.TESTS_FAILED  # accepting records failures; it does not hide this run's
    known = load_baseline(path)
    assert set(known) == {f"{FOO}::coverage[{m}]" for m in ("info", "increment", "add", "__eq__", "combine")}
    # A reviewer edits a reason; accepting again keeps it.
    known[f"{FOO}::coverage[add]"] = "reviewed: add is not traced by our models"
    save_baseline(path, known)
    run(pytester, f"--torchbind-baseline={path}", "--torchbind-accept")
    assert load_baseline(path)[f"{FOO}::coverage[add]"] == "reviewed: add is not traced by our models"

    gated = run(pytester, f"--torchbind-baseline={path}", "-rx")
    assert gated.ret == pytest.ExitCode.OK
    gated.assert_outcomes(passed=2, xfailed=5)
    gated.stdout.fnmatch_lines(["XFAIL *coverage?add?* - baseline: reviewed: add is not traced by our models"])

    # A listed test that now passes fails the run, so the file stays true.
    save_baseline(path, {**known, f"{FOO}::fake_class": "stale entry"})
    stale = run(pytester, f"--torchbind-baseline={path}")
    assert stale.ret == pytest.ExitCode.TESTS_FAILED
    stale.stdout.fnmatch_lines(["*XPASS(strict)*"])

    # A failure the baseline does not list fails the run.
    save_baseline(path, {k: v for k, v in known.items() if not k.endswith("coverage[info]")})
    new = run(pytester, f"--torchbind-baseline={path}")
    assert new.ret == pytest.ExitCode.TESTS_FAILED
    new.assert_outcomes(failed=1, passed=2, xfailed=4)


def test_baseline_usage_errors(pytester):
    result = run(pytester, "--torchbind-accept")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--torchbind-accept needs --torchbind-baseline" in result.stderr.str()
    (pytester.path / "b.json").write_text("[]")
    result = run(pytester, "--torchbind-baseline=b.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "torchbind-baseline/1" in result.stderr.str()
