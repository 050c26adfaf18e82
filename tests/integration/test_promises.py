"""Promises the plugin keeps whatever the run looks like: without process isolation it says what it cannot do and
keeps torch's trace logs out of failures; options mean the same on the command line and in ini; skips point at
the item; a class without a fake class still has its matrix in the report, saying why no cell ran."""

from __future__ import annotations

import json

import pytest

from conftest import TORCH_SPEC, run_inprocess, needs_torch_testlib

LOAD = f"--torchbind-load={TORCH_SPEC}"


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library, registers the correct fakes

    return "samples"


@needs_torch_testlib
def test_without_isolation_the_header_says_what_is_not_enforced(pytester):
    result = run_inprocess(pytester, LOAD, "--torchbind-class=_TorchScriptTesting::_Foo", "--collect-only")
    result.stdout.fnmatch_lines([
        "torchbind: 1 class(es), isolation=none",
        "torchbind: --torchbind-isolation=none: checks run in the pytest process: a crash in C++ ends the run, "
        "and calls are not timed (--torchbind-timeout is not enforced)",
    ])


def test_a_failing_matrix_cell_without_isolation_shows_no_torch_trace_lines(pytester, samples):
    # clone_queue through non-strict export is a known torch failure (the baseline lists it).
    result = run_inprocess(pytester, "--torchbind-load=sample_classes", "--torchbind-class=samples::TensorQueue",
                           "--torchbind-checks=matrix", "--torchbind-backends=export", "-k", "clone_queue")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "export non-strict does not reproduce plain eager for clone_queue" in out
    assert "torch.__trace" not in out and "DEBUG" not in out
    # No log flood: the failure, its program and its reproducer script (about 80 lines since matrix cells print one).
    assert len(result.outlines) < 300, len(result.outlines)


@pytest.mark.parametrize("where", ["command line", "ini"])
def test_zero_examples_is_refused_the_same_way_on_the_command_line_and_in_ini(pytester, where):
    if where == "ini":
        pytester.makeini("[pytest]\ntorchbind_examples = 0\n")
        result = run_inprocess(pytester, LOAD, "--torchbind-class=_TorchScriptTesting::_Foo")
    else:
        result = run_inprocess(pytester, LOAD, "--torchbind-class=_TorchScriptTesting::_Foo", "--torchbind-examples=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--torchbind-examples / torchbind_examples must be at least 1, got" in result.stderr.str()


@needs_torch_testlib
def test_the_command_line_wins_over_ini(pytester):
    pytester.makeini("[pytest]\ntorchbind_examples = 0\n")
    result = run_inprocess(pytester, LOAD, "--torchbind-class=_TorchScriptTesting::_Foo", "--torchbind-examples=5",
                           "--collect-only")
    assert result.ret == 0


@needs_torch_testlib
def test_a_skip_is_reported_at_the_item_not_inside_the_plugin(pytester):
    result = run_inprocess(pytester, LOAD, "--torchbind-class=_TorchScriptTesting::_Foo", "-rs",
                           "--torchbind-checks=agreement")
    skipped = [ln for ln in result.outlines if ln.startswith("SKIPPED")]
    assert skipped, result.stdout.str()
    assert not [ln for ln in skipped if "conformance" in ln], skipped
    assert all("torchbind_impls.py" in ln for ln in skipped), skipped  # where torch's fake class _Foo is defined


@needs_torch_testlib
def test_a_class_without_a_fake_still_has_its_matrix_in_the_report(pytester):
    result = run_inprocess(pytester, LOAD, "--torchbind-class=_TorchScriptTesting::_StackString",
                           "--torchbind-checks=matrix", "--torchbind-backends=eager,export", "--torchbind-report=m.json")
    # Every cell is n/a: the run compared nothing of the class, so it fails (exit 1) and says why, with the report.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*nothing was compared for _TorchScriptTesting::_StackString: all * of its items "
                                 "that ran were skipped*no fake class registered*"])
    [cls] = json.loads((pytester.path / "m.json").read_text())["classes"]
    assert cls["qualname"] == "_TorchScriptTesting::_StackString" and cls["cells"]
    assert {c["status"] for c in cls["cells"]} == {"skipped"}
    assert {c["reason"] for c in cls["cells"]} == {
        "no fake class registered for _TorchScriptTesting::_StackString (see "
        "torchbind[_TorchScriptTesting._StackString]::fake_class): no backend can fakify the object"}
    result.stdout.fnmatch_lines(["*TorchBind coverage matrix*", "_TorchScriptTesting::_StackString: * n/a"])
