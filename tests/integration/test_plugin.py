"""End-to-end behaviour of the pytest plugin, run in subprocesses with pytester (torch's shipped classes)."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import TORCH_SPEC, run_inprocess, needs_torch_testlib

LOAD = f"--torchbind-load={TORCH_SPEC}"
FOO = "--torchbind-class=_TorchScriptTesting::_Foo"


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


@needs_torch_testlib
def test_collects_stable_readable_ids_in_an_empty_directory(pytester):
    result = run_inprocess(pytester, LOAD, FOO, "--collect-only", "-q")
    assert result.ret == 0
    ids = [ln for ln in result.outlines if ln.startswith("torchbind[")]
    assert ids[:3] == ["torchbind[_TorchScriptTesting._Foo]::fake_class",
                       "torchbind[_TorchScriptTesting._Foo]::examples",
                       "torchbind[_TorchScriptTesting._Foo]::coverage[info]"]
    for expected in ("signature[add_tensor]", "return_type[add]", "flatten", "roundtrip", "agreement[add_tensor]",
                     "custom_op[takes_foo]", "deepcopy", "extra_methods"):
        assert f"torchbind[_TorchScriptTesting._Foo]::{expected}" in ids
    again = run_inprocess(pytester, LOAD, FOO, "--collect-only", "-q")
    assert [ln for ln in again.outlines if ln.startswith("torchbind[")] == ids


@needs_torch_testlib
def test_failure_message_names_class_method_and_both_sides(pytester):
    result = run_inprocess(pytester, LOAD, "--torchbind-class=_TorchScriptTesting::_TensorQueue", "-k", "agreement")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "_TorchScriptTesting::_TensorQueue.pop: the fake's result differs from the C++ result" in out
    assert "C++:   returned Tensor(shape=[2, 3], dtype=float32" in out
    assert "fake:  returned Tensor(shape=[], dtype=float32" in out
    assert "reproduce with this script:" in out
    result.assert_outcomes(failed=1, passed=4, skipped=3)


def run_inprocess_plain(pytester, *args):
    """pytest in this process with no plugin option at all (run_inprocess adds --torchbind-isolation=none)."""
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def _ordinary_test_and_ini_gate(pytester) -> None:
    """A project with one ordinary test and the gate configured in its ini file."""
    pytester.makepyfile(test_ordinary="def test_plain():\n    assert 1 + 1 == 2\n")
    pytester.makeini(f"""
        [pytest]
        torchbind_classes = _TorchScriptTesting::_ContainsTensor
        torchbind_load = {TORCH_SPEC}
    """)


@needs_torch_testlib
@pytest.mark.process
def test_runs_beside_ordinary_tests_and_ini_twins(pytester):
    _ordinary_test_and_ini_gate(pytester)
    result = run(pytester, "-k", "plain or fake_class or roundtrip")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*collected*items*"])


@needs_torch_testlib
def test_the_gate_is_collected_only_where_the_run_selects_it(pytester):
    _ordinary_test_and_ini_gate(pytester)

    def collected(*args):
        result = run_inprocess(pytester, "--collect-only", "-q", *args)
        assert result.ret in (0, pytest.ExitCode.NO_TESTS_COLLECTED), result.stdout.str()
        return [ln for ln in result.outlines if "::" in ln and not ln.startswith(" ")]

    # One's own file, or one test of it: only what was asked for, and the plugin sets nothing up.
    assert collected("test_ordinary.py") == ["test_ordinary.py::test_plain"]
    assert collected("test_ordinary.py::test_plain") == ["test_ordinary.py::test_plain"]
    result = run_inprocess(pytester, "test_ordinary.py")
    result.assert_outcomes(passed=1)
    assert not any(ln.startswith("torchbind:") for ln in result.outlines)  # no header: nothing was loaded
    # No paths: the ini's gate beside the testpaths.
    everything = collected()
    assert "test_ordinary.py::test_plain" in everything and "torchbind[_TorchScriptTesting._ContainsTensor]::roundtrip" \
        in everything
    # The gate by name (a path-like argument), a class of it, a check of it, one item; or by marker; or by option.
    gate = [i for i in everything if i.startswith("torchbind[")]
    assert collected("torchbind") == gate
    assert collected("torchbind[_TorchScriptTesting._ContainsTensor]") == gate
    assert collected("torchbind[_TorchScriptTesting._ContainsTensor]::roundtrip") == [
        "torchbind[_TorchScriptTesting._ContainsTensor]::roundtrip"]
    assert collected("test_ordinary.py", "torchbind") == ["test_ordinary.py::test_plain", *gate]
    assert collected("test_ordinary.py", "-m", "torchbind") == gate
    assert collected("test_ordinary.py", "--torchbind-class=_TorchScriptTesting::_ContainsTensor") == [
        "test_ordinary.py::test_plain", *gate]
    result = run_inprocess(pytester, "torchbind[_TorchScriptTesting._ContainsTensor]::fake_class")
    result.assert_outcomes(passed=1)
    # The gate named where nothing configures it: a usage error saying what to add.
    (pytester.path / "tox.ini").unlink()
    result = run_inprocess_plain(pytester, "torchbind")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "torchbind names the TorchBind conformance gate, but this run selects no class" in result.stderr.str()
    _ordinary_test_and_ini_gate(pytester)
    # A name that matches nothing is a usage error, not an empty green run.
    result = run_inprocess(pytester, "torchbind[nosuch.Cls]")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "torchbind[nosuch.Cls]: no conformance item matches; the selected classes' items are " \
           "torchbind[_TorchScriptTesting._ContainsTensor]" in result.stderr.str()


@needs_torch_testlib
@pytest.mark.process
def test_the_users_own_tests_see_torch_as_they_left_it(pytester):
    # Under xdist the plugin runs its items with fewer intra-op threads per worker; the user's tests in the same
    # worker keep torch's own default (it used to be changed for the whole run and never restored).
    fresh = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    pytester.makepyfile(test_user=f"""
        import torch

        def test_torch_defaults():
            assert torch.get_num_threads() == {fresh}
            assert torch.get_default_device() == torch.device("cpu")
    """)
    result = run(pytester, LOAD, FOO, "-k", "torch_defaults or fake_class or examples", "-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=3)


@needs_torch_testlib
@pytest.mark.process
def test_xdist_gives_the_same_outcomes_as_a_serial_run(pytester):
    # 20 examples: what is compared is the two runs' outcomes, not how hard each searched.
    serial = run(pytester, LOAD, FOO, "-k", "not matrix", "--torchbind-examples=20")
    parallel = run(pytester, LOAD, FOO, "-k", "not matrix", "--torchbind-examples=20", "-n", "2")
    # xdist deselects on the workers, so the controller's summary has no "deselected" count.
    counts = {k: v for k, v in serial.parseoutcomes().items() if k != "deselected"}
    assert parallel.parseoutcomes() == counts
    failed = sorted(ln for ln in serial.outlines if ln.startswith("FAILED "))
    assert sorted(ln for ln in parallel.outlines if ln.startswith("FAILED ")) == failed


def test_a_misspelt_ini_key_is_a_usage_error_naming_the_closest_key(pytester):
    # pytest itself only warns about an unknown key, and the gate would silently not run.
    pytester.makeini("[pytest]\ntorchbind_class = _TorchScriptTesting::_Foo\n")
    result = run_inprocess(pytester, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown ini key 'torchbind_class' in " in result.stderr.str()
    assert "did you mean torchbind_classes?" in result.stderr.str()


@needs_torch_testlib
def test_loading_without_selecting_a_class_is_a_usage_error_listing_the_classes(pytester):
    # Not "no tests ran" (exit status 5) with no hint.
    result = run_inprocess(pytester, LOAD)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--torchbind-load loaded libraries and fakes but no class is selected" in err
    assert "add --torchbind-class=NS::CLS" in err and "_TorchScriptTesting::_Foo" in err


def test_loading_python_custom_classes_without_selecting_lists_them_too(pytester):
    # The listing asks the module that knows both kinds (it named TorchBind classes only, so a load module that
    # registers Python custom classes was told "(none)" or shown torch's own classes).
    result = pytester.runpytest_subprocess("--torchbind-load=sample_classes.custom_classes", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "or module.QualName for a Python custom class" in err
    listed = err.partition("Classes registered: ")[2]
    # (importing sample_classes also loads its C++ samples: both kinds are listed)
    assert "sample_classes.custom_classes.Affine" in listed and "samples::TensorQueue" in listed


def test_plugin_can_be_disabled(pytester):
    result = run_inprocess(pytester, "-p", "no:torchbind", FOO)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unrecognized arguments: --torchbind-class" in result.stderr.str()


@needs_torch_testlib
def test_unknown_class_is_a_usage_error_listing_the_namespace(pytester):
    result = run_inprocess(pytester, LOAD, "--torchbind-class=_TorchScriptTesting::Missing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "no TorchBind class _TorchScriptTesting::Missing is registered" in err
    assert "_TorchScriptTesting::_TensorQueue" in err
    assert "Traceback" not in err + result.stdout.str()


def test_namespace_with_no_classes(pytester):
    result = run_inprocess(pytester, "--torchbind-class=nothing_here::*")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no TorchBind classes are registered in namespace 'nothing_here'" in result.stderr.str()


@pytest.mark.process
def test_broken_library_is_a_usage_error_with_the_loader_message(pytester):
    (pytester.path / "libbroken.so").write_bytes(b"this is not an ELF file")
    result = run_inprocess(pytester, "--torchbind-load=libbroken.so", FOO)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--torchbind-load='libbroken.so': loading the library failed" in err
    assert re.search(r"OSError: .*libbroken\.so", err), err


@pytest.mark.process
def test_missing_library(pytester):
    result = run_inprocess(pytester, "--torchbind-load=nowhere/libmissing.so", FOO)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "library file not found" in result.stderr.str()


def test_fake_module_that_raises_on_import(pytester):
    pytester.makepyfile(badfakes="raise ValueError('boom in the fake module')\n")
    result = run_inprocess(pytester, "--torchbind-load=badfakes.py", FOO)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ValueError: boom in the fake module" in result.stderr.str()


@pytest.mark.process
def test_fake_module_with_a_syntax_error(pytester):
    pytester.makepyfile(syntaxfakes="def broken(:\n    pass\n")
    result = run(pytester, "--torchbind-load=syntaxfakes", FOO)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "SyntaxError" in result.stderr.str()


def test_unknown_check_name(pytester):
    result = run_inprocess(pytester, LOAD, FOO, "--torchbind-checks=signature,nonsense")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown check(s) nonsense" in result.stderr.str()


@needs_torch_testlib
@pytest.mark.process
def test_user_code_that_raises_fails_the_check_not_the_run(pytester):
    pytester.makepyfile(userfakes="""
        import torch
        import conformance
        from torch.testing._internal.torchbind_impls import init_torchbind_implementations
        init_torchbind_implementations()

        @conformance.examples("_TorchScriptTesting::_ContainsTensor")
        def explode():
            raise RuntimeError("factory exploded")

        class Unflattenable:
            @classmethod
            def __obj_unflatten__(cls, flat):
                raise KeyError("no such field")

            def get(self):
                return None

        torch._library.register_fake_class("_TorchScriptTesting::_FlattenWithTensorOp")(Unflattenable)
    """)
    result = run(pytester, "--torchbind-load=userfakes",
                 "--torchbind-class=_TorchScriptTesting::_ContainsTensor",
                 "--torchbind-class=_TorchScriptTesting::_FlattenWithTensorOp", "-k", "examples or roundtrip")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "INTERNALERROR" not in out
    assert "example factory explode() raised RuntimeError: factory exploded" in out
    assert "fakifying the object failed" in out and "KeyError: 'no such field'" in out
    result.assert_outcomes(failed=2, skipped=1, passed=1)


@needs_torch_testlib
def test_junit_xml_carries_check_properties(pytester):
    result = run_inprocess(pytester, LOAD, FOO, "-k", "fake_class or coverage", "--junitxml=out.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    root = ET.parse(pytester.path / "out.xml").getroot()
    # pytest splits an item's node id into the JUnit `classname` and `name` attributes, and has changed where it
    # splits a non-file node id (pytest 9.2 writes classname="torchbind[ns.Cls]" name="coverage[add]"; earlier
    # releases wrote the whole id as the name): read the id back whichever way it was split.
    cases = {"::".join(part for part in (c.get("classname"), c.get("name")) if part): c
             for c in root.iter("testcase")}
    cases.update({c.get("name"): c for c in root.iter("testcase")})
    case = cases["torchbind[_TorchScriptTesting._Foo]::coverage[add]"]
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    # Class, check, target and status only: summaries, notes and matrix cells travel on the reports, not in JUnit.
    assert props == {"torchbind_class": "_TorchScriptTesting::_Foo", "torchbind_check": "coverage",
                     "torchbind_target": "add", "torchbind_status": "failed"}
    assert "_TorchScriptTesting::_Foo.add: the fake class does not define add" in case.find("failure").text


@pytest.mark.process
def test_printed_reproducer_runs_on_its_own(torch_test_classes, tmp_path):
    from conformance.runner import Engine, run_class
    from conformance.core.settings import Settings

    engine = Engine(Settings(load_code=(
        "from torch.testing._internal.torchbind_impls import init_torchbind_implementations",
        "init_torchbind_implementations()")))
    [outcome] = [o for o in run_class("_TorchScriptTesting::_TensorQueue", only={"agreement"}, engine=engine)
                 if o.target == "pop"]
    script = tmp_path / "repro.py"
    script.write_text(outcome.failures[0].repro)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cpp_line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("C++:"))
    fake_line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("fake:"))
    assert "tensor([[0., 1., 2.]" in cpp_line
    assert "size=()" in fake_line


def test_a_verdict_without_check_data_keeps_the_items_class_check_and_target():
    # A setup error (or an error outside the check) reports no `torchbind` data; the verdict still names the item.
    from conformance.plugin.options import RunOptions
    from conformance.plugin.recorder import Recorder
    from conformance.runner import Engine, RunPlan
    from conformance.core.settings import Settings

    recorder = Recorder(RunOptions([], [], Settings()), RunPlan(Engine(), []), dict)
    props = [("torchbind_class", "ns::Cls"), ("torchbind_check", "coverage"), ("torchbind_target", "add")]
    recorder.pytest_runtest_logreport(pytest.TestReport(
        "torchbind[ns.Cls]::coverage[add]", ("x", None, "x"), {}, "failed", "a fixture broke", "setup",
        user_properties=props))
    [verdict] = recorder.verdicts.values()
    assert (verdict.qualname, verdict.check, verdict.target, verdict.status.value) == (
        "ns::Cls", "coverage", "add", "failed")
    assert "torchbind[ns.Cls]::coverage[add]" not in recorder.accepted  # an error outside the check: no verdict


def test_the_collection_and_the_recorder_read_one_plan_and_the_recorder_never_plans(torch_test_classes,
                                                                                   monkeypatch):
    # Issue 30: the recorder used to call back into the engine three times to plan the classes again. Now the run
    # plans once (RunPlan) and both roles read that plan: a second reader of the same units plans nothing.
    from conformance import runner
    from conformance.core.settings import Settings
    from conformance.plugin.items import Collection
    from conformance.plugin.options import RunOptions
    from conformance.plugin.recorder import Recorder

    planned = []
    real_plan = runner.plan
    monkeypatch.setattr(runner, "plan", lambda *a, **k: planned.append((a[0], k)) or real_plan(*a, **k))
    qualname = "_TorchScriptTesting::_Foo"
    engine = runner.Engine(Settings(checks=("signature", "coverage")))
    run_plan = runner.RunPlan(engine, [qualname])
    collection = Collection(engine, run_plan, {}, "2.13.0", lambda nodeid, unit: None)
    recorder = Recorder(RunOptions([], [], engine.settings), run_plan, dict)
    assert recorder.classes is collection.classes == (qualname,)
    assert not hasattr(recorder, "engine")
    units = collection.plan(qualname)
    assert {u.check.name for u in units} == {"signature", "coverage"} and len(planned) == 1
    assert recorder._planned(qualname, only=("signature", "coverage"))[1] == units and len(planned) == 1
    # The full plan (the baseline's stale entries) is planned once more, then serves every narrower reader.
    prefix, full = recorder._planned(qualname)
    assert prefix == "torchbind[_TorchScriptTesting._Foo]::" and set(units) < set(full) and len(planned) == 2
    assert recorder._planned(qualname, only=("matrix",))[1] == [u for u in full if u.check.name == "matrix"]
    assert len(planned) == 2


def test_a_command_line_list_that_replaces_the_ini_list_says_what_it_leaves_out(pytester):
    """Found by a new user: ``--torchbind-load`` on the command line replaces the ini's ``torchbind_load`` (pytest's
    rule), so the ini's examples module was silently dropped and the gate missed the bugs it exercised."""
    from conftest import run_inprocess

    pytester.makeini("[pytest]\ntorchbind_load = sample_classes\n    sample_classes.fakes_evidence\n"
                     "torchbind_classes = samples_evidence::Span\n")
    result = run_inprocess(pytester, "--torchbind-load=sample_classes", "--torchbind-checks=signature", "-W",
                           "always")
    assert "--torchbind-load on the command line replaces the ini's torchbind_load list, so this run leaves out " \
           "sample_classes.fakes_evidence" in result.stdout.str()
    quiet = run_inprocess(pytester, "--torchbind-checks=signature")
    assert "replaces the ini's" not in quiet.stdout.str()
