"""The expected-failure baseline (--torchbind-baseline / --torchbind-accept)."""

from __future__ import annotations

import json

import pytest
import torch

from conformance.plugin.baseline import (SCHEMA, BaselineError, Entry, load_baseline, merge_accepted, save_baseline,
                                  stale_entries)
from conftest import TORCH_SPEC, run_inprocess, needs_torch_testlib


def torch_series() -> str:
    from conformance.plugin.baseline import series

    return series(torch.__version__)

FOO = "torchbind[_TorchScriptTesting._Foo]"
ARGS = (f"--torchbind-load={TORCH_SPEC}", "--torchbind-class=_TorchScriptTesting::_Foo",
        "-k", "coverage or fake_class")


def run(pytester, *extra):
    return run_inprocess(pytester, *ARGS, *extra)


def test_merge_keeps_reasons_drops_fixed_keeps_unrun():
    old = {"a": "reviewed reason", "b": "fixed since", "c": "not run this time"}
    results = {"a": (True, "new text"), "b": (False, ""), "d": (True, "first failure")}
    assert merge_accepted(old, results, torch_version="2.14.1") == {
        "a": Entry("reviewed reason"), "c": Entry("not run this time"),
        "d": Entry("first failure", observed=("2.14",))}  # where it was observed, and nowhere else


def test_merge_removes_stale_entries_only():
    old = {"a": "still failing", "gone": "names a removed method", "unrun": "kept"}
    assert merge_accepted(old, {"a": (True, "x")}, stale={"gone"}) == {"a": Entry("still failing"),
                                                                       "unrun": Entry("kept")}
    assert stale_entries(["t[A]::x", "t[A]::gone", "t[B]::other"], "t[A]::", {"t[A]::x"}) == ["t[A]::gone"]


def test_load_rejects_malformed_files(tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text("{not json")
    with pytest.raises(BaselineError, match="cannot read the baseline"):
        load_baseline(bad)
    bad.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(BaselineError, match="torchbind-baseline/1"):
        load_baseline(bad)
    bad.write_text(json.dumps({"schema": SCHEMA, "known_failures": {"x": 1}}))
    with pytest.raises(BaselineError, match="an entry is a reason string, "):
        load_baseline(bad)
    with pytest.raises(BaselineError, match="no such baseline file"):
        load_baseline(tmp_path / "missing.json")
    assert load_baseline(tmp_path / "missing.json", missing_ok=True) == {}
    save_baseline(bad, {"z": "2", "a": "1"})
    assert list(load_baseline(bad)) == ["a", "z"]


@needs_torch_testlib
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
    assert load_baseline(path)[f"{FOO}::coverage[add]"] == Entry("reviewed: add is not traced by our models")

    gated = run(pytester, f"--torchbind-baseline={path}", "-rx")
    assert gated.ret == pytest.ExitCode.OK
    gated.assert_outcomes(passed=2, xfailed=5)
    gated.stdout.fnmatch_lines(["XFAIL *coverage?add?* - baseline: reviewed: add is not traced by our models "
                                "(known failure on every torch; *"])

    # A listed test that now passes fails the run, so the file stays true, and says what to do.
    save_baseline(path, {**known, f"{FOO}::fake_class": "stale entry"})
    stale = run(pytester, f"--torchbind-baseline={path}")
    assert stale.ret == pytest.ExitCode.TESTS_FAILED
    stale.stdout.fnmatch_lines([f"*XPASS(strict)*if it passes now, remove the entry from {path} or run with "
                                "--torchbind-accept)*"])

    # A failure the baseline does not list fails the run.
    save_baseline(path, {k: v for k, v in known.items() if not k.endswith("coverage[info]")})
    new = run(pytester, f"--torchbind-baseline={path}")
    assert new.ret == pytest.ExitCode.TESTS_FAILED
    new.assert_outcomes(failed=1, passed=2, xfailed=4)


#: A conftest that skips fake_class and fails coverage[increment] and coverage[combine] in their setup (an error
#: outside the check).
SKIP_AND_SETUP_ERROR = """
    import pytest

    def pytest_collection_modifyitems(items):
        for item in items:
            if item.nodeid.endswith("::fake_class"):
                item.add_marker(pytest.mark.skip(reason="skipped this time"))

    def pytest_runtest_setup(item):
        if item.nodeid.endswith(("::coverage[increment]", "::coverage[combine]")):
            raise RuntimeError("a fixture broke")
"""


def _glob(text: str) -> str:
    """``text`` as a literal fnmatch pattern (its ``[`` would open a character class)."""
    return text.replace("[", "[[]")


@needs_torch_testlib
def test_accept_changes_only_what_ran_to_a_verdict(pytester):
    pytester.makeconftest(SKIP_AND_SETUP_ERROR)
    path = pytester.path / "baseline.json"
    old = {
        f"{FOO}::fake_class": "skipped: kept",
        f"{FOO}::agreement[info]": "its check skips (NotApplicable): kept",
        f"{FOO}::coverage[increment]": "setup error: kept",  # (an xfail at setup; combine's error is not added)
        f"{FOO}::signature[add]": "deselected by -k: kept",
        f"{FOO}::coverage[info]": "reviewed: still failing",
        f"{FOO}::coverage[add_tensor]": "fixed since: dropped",  # XPASS(strict): its check passed
        f"{FOO}::coverage[removed_method]": "stale: removed",
        "torchbind[other.Cls]::coverage[gone]": "a class this run did not select: kept",
    }
    save_baseline(path, old)
    result = run_inprocess(pytester, f"--torchbind-load={TORCH_SPEC}", "--torchbind-class=_TorchScriptTesting::_Foo",
                           "-k", "coverage or fake_class or agreement", f"--torchbind-baseline={path}",
                           "--torchbind-accept")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # add_tensor's XPASS(strict) fails; agreement[...] of methods the fake lacks skip in their call
    result.assert_outcomes(passed=1, failed=3, errors=1, skipped=6, xfailed=2)
    new = load_baseline(path)
    assert {k: v for k, v in new.items() if k in old and not k.endswith("add_tensor]")} == {
        k: Entry(v) for k, v in old.items() if not k.endswith(("add_tensor]", "removed_method]"))}
    # Fixed on this torch: the entry goes (no torch where its failure was observed is left).
    assert f"{FOO}::coverage[add_tensor]" not in new
    added = set(new) - set(old)
    assert added == {f"{FOO}::coverage[{m}]" for m in ("add", "__eq__")}
    here = torch_series()
    assert all(new[k].observed == (here,) for k in added)
    result.stdout.fnmatch_lines(["*= torchbind baseline =*",
                                 f"--torchbind-accept wrote {path}: 3 changes:",
                                 f"  dropped {FOO}::coverage[add_tensor]",
                                 # the fake's own failures last, each saying that it is not a torch limitation
                                 _glob(f"  added {FOO}::coverage[__eq__] (torch {here} and newer) [the fake's own "
                                       "disagreement, not a torch limitation: _TorchScriptTesting::_Foo.__eq__: the "
                                       "fake class does not define __eq__ ") + "*]",
                                 _glob(f"  added {FOO}::coverage[add] (torch {here} and newer) [the fake's own "
                                       "disagreement, not a torch limitation: _TorchScriptTesting::_Foo.add: the fake "
                                       "class does not define add") + "*]",
                                 f"--torchbind-accept removed 1 stale entry from {path} (tests that no longer exist):",
                                 f"  {FOO}::coverage[removed_method]",
                                 "torchbind: --torchbind-accept listed 2 failures of the fake's own as known (coverage: "
                                 "the fake disagrees with the C++ class or torch's protocol): these are bugs in the "
                                 "fake, not torch limitations; fix them, or keep them only with a reviewed reason "
                                 "(pytest without --torchbind-accept shows each failure)"])
    assert "other.Cls" not in result.stdout.str()


@needs_torch_testlib
def test_stale_entries_are_listed_without_accept(pytester):
    path = pytester.path / "baseline.json"
    save_baseline(path, {f"{FOO}::coverage[removed_method]": "stale", f"{FOO}::matrix[increment-inductor]": "kept",
                         "torchbind[other.Cls]::coverage[gone]": "another class"})
    before = path.read_bytes()
    # A run narrowed by --torchbind-checks still knows the class's matrix cells: they are not stale.
    result = run(pytester, f"--torchbind-baseline={path}", "--torchbind-checks=coverage")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*= torchbind baseline =*",
                                 f"1 entry of {path} names tests that no longer exist:",
                                 f"  {FOO}::coverage[removed_method]",
                                 "remove them from the file, or run once with --torchbind-accept*"])
    assert "increment-inductor" not in result.stdout.str() and "other.Cls" not in result.stdout.str()
    assert path.read_bytes() == before


@needs_torch_testlib
def test_baseline_usage_errors(pytester):
    result = run(pytester, "--torchbind-accept")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--torchbind-accept needs --torchbind-baseline" in result.stderr.str()
    (pytester.path / "b.json").write_text("[]")
    result = run(pytester, "--torchbind-baseline=b.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "torchbind-baseline/1" in result.stderr.str()


@needs_torch_testlib
def test_an_empty_baseline_option_switches_off_the_ini_baseline(pytester):
    (pytester.path / "b.json").write_text("[]")  # malformed: reading it is a usage error
    pytester.makeini("[pytest]\ntorchbind_baseline = b.json\n")
    assert run(pytester, "--collect-only").ret == pytest.ExitCode.USAGE_ERROR
    assert run(pytester, "--torchbind-baseline=", "--collect-only").ret == pytest.ExitCode.OK


# ----- entries for some torch versions only ---------------------------------------------------------------------


def test_an_entry_may_name_the_torch_releases_it_applies_to(tmp_path):
    from conformance.plugin.baseline import Entry, applying

    path = tmp_path / "b.json"
    path.write_text(json.dumps({"schema": SCHEMA, "known_failures": {
        "a": "everywhere", "b": {"reason": "fixed in 2.14", "torch": "<2.14"}}}))
    known = load_baseline(path)
    assert known == {"a": Entry("everywhere"), "b": Entry("fixed in 2.14", "<2.14")}
    assert applying(known, "2.13.0+cpu") == {"a": "everywhere", "b": "fixed in 2.14"}
    assert applying(known, "2.14.1+cu130") == {"a": "everywhere"}  # the local label does not count
    save_baseline(path, known)
    assert load_baseline(path) == known
    path.write_text(json.dumps({"schema": SCHEMA, "known_failures": {"b": {"reason": "x", "torch": "two"}}}))
    with pytest.raises(BaselineError, match="must be a PEP 440 specifier"):
        load_baseline(path)


def test_accepting_records_where_a_failure_was_observed_and_drops_it_where_it_passes():
    from conformance.plugin.baseline import Entry, accept_changes

    old = {"fixed": Entry("r1"), "other": Entry("r2", "<2.14"), "back": Entry("r3", "<2.14"), "kept": Entry("r4")}
    results = {"fixed": (False, "passed"), "back": (True, "failing again"), "new": (True, "new failure")}
    on_214 = merge_accepted(old, results, torch_version="2.14.1+cu130")
    assert on_214 == {
        "other": Entry("r2", "<2.14"),    # did not run: untouched
        "back": Entry("r3"),              # fails on 2.14 too: the hand-written specifier is widened to it
        "kept": Entry("r4"),
        "new": Entry("new failure", observed=("2.14",)),
    }                                     # "fixed" passes where it applied: dropped, not narrowed to other torches
    assert accept_changes(old, on_214) == ["changed back: torch <2.14 -> every torch", "dropped fixed",
                                           "added new (torch 2.14 and newer)"]
    # The same test failing on 2.13 records that series too; passing on 2.14 later removes 2.14 only ...
    both = merge_accepted(on_214, {"new": (True, "new failure")}, torch_version="2.13.0+cpu")
    assert both["new"] == Entry("new failure", observed=("2.13", "2.14"))
    fixed_on_214 = merge_accepted(both, {"new": (False, "")}, torch_version="2.14.1")
    assert fixed_on_214["new"] == Entry("new failure", observed=("2.13",), passed=("2.14",))
    assert fixed_on_214["new"].applies_to("2.13.0") and not fixed_on_214["new"].applies_to("2.14.1")
    assert not fixed_on_214["new"].applies_to("2.15.0")  # passed on an older series: not carried past it
    # ... and with no series left the entry goes.
    assert "new" not in merge_accepted(fixed_on_214, {"new": (False, "")}, torch_version="2.13.0")


def test_an_accepted_baseline_upgrades_from_torch_2_14_1_to_2_15_0():
    """An adopter's entries accepted on 2.13 and 2.14.1 stay known failures on 2.15.0 until a run there shows the
    test passing; an accepting run on 2.15.0 records what passes there and what still fails."""
    from conformance.plugin.baseline import accept_changes

    accepted = {"still": Entry("torch defect", observed=("2.13", "2.14")),
                "fixed": Entry("fixed by 2.15", observed=("2.13", "2.14")),
                "unrun": Entry("deselected this time", observed=("2.14",)),
                "old-only": Entry("only 2.13 had it", observed=("2.13",), passed=("2.14",))}
    assert accepted["still"].applies_to("2.15.0+cu132") and accepted["still"].carried_to("2.15")
    assert accepted["still"].where() == "torch 2.13, 2.14 and newer"
    assert not accepted["old-only"].applies_to("2.15.0") and not accepted["old-only"].carried_to("2.15")
    assert not Entry("r", observed=("2.14",)).applies_to("2.13.0")  # never carried backwards
    on_215 = merge_accepted(accepted, {"still": (True, "same failure"), "fixed": (False, "")},
                            torch_version="2.15.0+cu132")
    assert on_215 == {"still": Entry("torch defect", observed=("2.13", "2.14", "2.15")),
                      "fixed": Entry("fixed by 2.15", observed=("2.13", "2.14"), passed=("2.15",)),
                      "unrun": Entry("deselected this time", observed=("2.14",)),
                      "old-only": accepted["old-only"]}
    assert on_215["fixed"].applies_to("2.14.1") and not on_215["fixed"].applies_to("2.15.0")
    assert not on_215["fixed"].applies_to("2.16.0")  # past the series it passed on: not carried any further
    assert on_215["unrun"].applies_to("2.15.0")  # not run there yet: still carried
    assert accept_changes(accepted, on_215) == [
        "changed fixed: torch 2.13, 2.14 and newer -> torch 2.13, 2.14 (passed on 2.15)",
        "changed still: torch 2.13, 2.14 and newer -> torch 2.13, 2.14, 2.15 and newer"]
    # A later failure on the series it had passed on lists it as observed again.
    again = merge_accepted(on_215, {"fixed": (True, "back")}, torch_version="2.15.1")
    assert again["fixed"] == Entry("fixed by 2.15", observed=("2.13", "2.14", "2.15")) and not again["fixed"].passed


def test_observed_entries_round_trip_and_bad_ones_are_refused(tmp_path):
    path = tmp_path / "b.json"
    save_baseline(path, {"a": Entry("r", observed=("2.14", "2.13"))})
    assert json.loads(path.read_text())["known_failures"] == {"a": {"reason": "r", "observed": ["2.13", "2.14"]}}
    assert load_baseline(path) == {"a": Entry("r", observed=("2.13", "2.14"))}
    for bad in ([], ["2"], "2.13", ["2.13.1"]):
        path.write_text(json.dumps({"schema": SCHEMA, "known_failures": {"a": {"reason": "r", "observed": bad}}}))
        with pytest.raises(BaselineError, match="must be a non-empty list of torch series"):
            load_baseline(path)
    save_baseline(path, {"a": Entry("r", observed=("2.13",), passed=("2.14",))})
    assert json.loads(path.read_text())["known_failures"] == {"a": {"reason": "r", "observed": ["2.13"],
                                                                    "passed": ["2.14"]}}
    assert load_baseline(path) == {"a": Entry("r", observed=("2.13",), passed=("2.14",))}
    for bad in ("2.14", ["2.14.1"], [2.14]):
        path.write_text(json.dumps({"schema": SCHEMA, "known_failures": {"a": {"reason": "r", "observed": ["2.13"],
                                                                               "passed": bad}}}))
        with pytest.raises(BaselineError, match="\"passed\" must be a list of torch series"):
            load_baseline(path)


@needs_torch_testlib
def test_an_entry_for_another_torch_is_neither_an_xfail_nor_an_xpass(pytester):
    path = pytester.path / "baseline.json"
    save_baseline(path, {f"{FOO}::coverage[add]": {"reason": "only on an old torch", "torch": "<1.0"},
                         f"{FOO}::fake_class": {"reason": "only on an old torch", "torch": "<1.0"}})
    result = run(pytester, f"--torchbind-baseline={path}")
    result.assert_outcomes(failed=5, passed=2)  # coverage[add] fails as usual; fake_class passes, no XPASS


def test_accepting_says_which_failures_are_the_fakes_own():
    """--torchbind-accept lists a new user's fake bug apart from the compile stack's failures, saying that it is not
    a torch limitation (issue 29: a first accept baselined a real fake bug without a word)."""
    from conformance.plugin.baseline import Entry, accept_changes, accept_warning

    old = {"torchbind[ns.Q]::coverage[gone]": Entry("r"), "torchbind[ns.Q]::agreement[kept]": Entry("reviewed")}
    new = {"torchbind[ns.Q]::agreement[kept]": Entry("reviewed", observed=("2.13",)),
           "torchbind[ns.Q]::agreement[pop]": Entry("ns::Q.pop: the fake's result differs", observed=("2.13",)),
           "torchbind[ns.Q]::matrix[pop-inductor]": Entry("inductor differs", observed=("2.13",)),
           "torchbind[py:m.Spec]::eq_hash": Entry("equal objects hash differently", observed=("2.13",))}
    assert accept_changes(old, new) == [
        "changed torchbind[ns.Q]::agreement[kept]: every torch -> torch 2.13 and newer",
        "dropped torchbind[ns.Q]::coverage[gone]",
        "added torchbind[ns.Q]::matrix[pop-inductor] (torch 2.13 and newer) [a compiled program differs from eager]",
        "added torchbind[ns.Q]::agreement[pop] (torch 2.13 and newer) [the fake's own disagreement, not a torch "
        "limitation: ns::Q.pop: the fake's result differs]",
        "added torchbind[py:m.Spec]::eq_hash (torch 2.13 and newer) [the class's own failure, not a torch "
        "limitation: equal objects hash differently]"]
    # each kind is named for what it has: a Python custom class has no fake class (issue 31: the trial's warning
    # called a custom class's guards failure "a bug in the fake")
    assert accept_warning(old, new) == (
        "--torchbind-accept listed 1 failure of the fake's own as known (agreement: the fake disagrees with the C++ "
        "class or torch's protocol): this is a bug in the fake; and 1 failure of a Python custom class's own code "
        "as known (eq_hash): this is a bug in the class (it has no fake class or C++ class), not torch limitations; "
        "fix them, or keep them only with a reviewed reason (pytest without --torchbind-accept shows each failure)")
    assert accept_warning(old, {k: v for k, v in new.items() if "py:" not in k}) == (
        "--torchbind-accept listed 1 failure of the fake's own as known (agreement: the fake disagrees with the C++ "
        "class or torch's protocol): this is a bug in the fake, not a torch limitation; fix it, or keep it only "
        "with a reviewed reason (pytest without --torchbind-accept shows each failure)")
    assert accept_warning(old, {k: v for k, v in new.items() if "matrix" in k or "kept" in k}) is None


def test_accepting_a_torch_defect_writes_its_signature_and_says_whose_it_is():
    """A matrix cell that is torch's defect (the fake agrees with C++ on every call) is accepted with the defect's
    signature as its reason, never the run's raw error text, and labelled torch's."""
    from conformance.core.results import Cell, Status, Verdict
    from conformance.matrix.cell import cell_failure
    from conformance.plugin.baseline import Entry, accept_changes
    from conformance.plugin.recorder import accept_reason

    cell = Cell("ns::Q", "computed", "inductor", 0, 2, Status.TORCH_DEFECT, "run 0 output[2]: eager 1.0, inductor 2.0",
                rule="matrix.torch-defect", found="matrix.output-differs",
                signature="inductor: an output differs from plain eager's (one method call)")
    verdict = Verdict.of_failures("matrix", "ns::Q", "computed-inductor", [cell_failure(cell)], cell=cell)
    assert verdict.summary.startswith("ns::Q.computed-inductor: torch defect (inductor: an output differs from plain "
                                      "eager's (one method call)), not the fake's: torch.compile inductor does not "
                                      "reproduce plain eager for computed: run 0 output[2]")
    assert accept_reason(verdict) == "torch defect: inductor: an output differs from plain eager's (one method call)"
    test_id = "torchbind[ns.Q]::matrix[computed-inductor]"
    new = {test_id: Entry(accept_reason(verdict), observed=("2.13",))}
    assert accept_changes({}, new, {test_id: verdict.rules}) == [
        f"added {test_id} (torch 2.13 and newer) [torch's defect: the fake agrees with C++ on every call of the "
        "program]"]
    # A cell whose failure is not torch's keeps its summary as the reason.
    failed = Cell("ns::Q", "pop", "inductor", 1, 2, Status.FAILED, "run 0 output[0] differs", rule="matrix.raises")
    mine = Verdict.of_failures("matrix", "ns::Q", "pop-inductor", [cell_failure(failed)], cell=failed)
    assert accept_reason(mine) == mine.summary
