"""The coverage matrix: cells that can fail, the limitations table, reports, xdist, and the pinned export graph."""

from __future__ import annotations

import copy
import json
import re
import sys

import expecttest
import pytest
import torch

from conformance.matrix.backends import Backend, all_backends
from conformance.matrix.torchbind.run import run_cell
from conformance.matrix.limitations import LIMITATIONS, find_limitation
from conformance.matrix.torchbind.rows import row_names, scenario
from conformance.runner import Engine
from conftest import run_inprocess, undated_report

ENGINE = Engine()  # the module's engine: its contexts cache examples and scenarios across tests
COUNTER = "samples::Counter"
QUEUE = "samples::TensorQueue"


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401

    return sample_classes


def _eager_prepare(scn, module, args):
    return module


def test_rows_and_columns(samples):
    rows = row_names(ENGINE.context(QUEUE))
    assert rows[:2] == ["push", "pop"]
    assert "op.for_each_add_" in rows and "for_each_add_" in rows
    # dynamic.ops: the class has ops taking it and a tensor, each with a Python fake
    assert rows[-8:] == ["sequence", "sequence.attr", "tensors.attr", "dynamic", "dynamic.ops", "computed", "mutated",
                         "identity"]
    assert [b.name for b in all_backends()] == ["eager", "aot_eager", "inductor", "aoti", "export",
                                                "export_strict", "export_saveload", "autocast"]


def test_each_kind_of_class_has_its_rows():
    # The matrix check reaches a kind's rows through one table, keyed as contexts name their kind.
    from conformance.checks.matrix import ROWS_OF_KIND
    from conformance.kinds import KINDS
    from conformance.matrix.custom.run import CustomRows
    from conformance.matrix.torchbind.run import TorchBindRows

    assert {k: type(v) for k, v in ROWS_OF_KIND.items()} == {"torchbind": TorchBindRows, "custom": CustomRows}
    assert set(ROWS_OF_KIND) == set(KINDS)


def test_sequence_program_mutates_then_reads(samples):
    scn = scenario(ENGINE.context(QUEUE), "sequence")
    src = scn.source
    assert src.index("obj.push(x0)") < src.index("obj.push(x1)") < src.index("obj.pop()") < src.index("obj.size()")
    assert "obj.for_each_add_(" in src and "torch.ops." not in src, "ops have rows of their own"
    assert scn.second.steps, "the second run uses an object reached by method calls (another state)"
    attr = scenario(ENGINE.context(QUEUE), "sequence.attr")
    assert "self.obj = obj" in attr.source and attr.second is attr.first


def test_a_faithful_backend_passes(samples):
    faithful = Backend("faithful", "test", "faithful", _eager_prepare)
    for row in ("increment", "sequence", "sequence.attr"):
        assert run_cell(ENGINE.context(COUNTER), row, faithful).status == "passed"


def test_stale_outputs_fail(samples):
    def prepare(scn, module, args):
        cache = []

        def run(*a):
            out = module(*a)
            if not cache:
                cache.append(out)
            return cache[0]  # a program with a burned-in result

        return run

    result = run_cell(ENGINE.context(COUNTER), "increment", Backend("stale", "test", "stale", prepare))
    # The fake agrees with C++ on every call: a backend that gets it wrong is torch's defect.
    assert (result.status, result.rule, result.found) == ("torch-defect", "matrix.torch-defect", "matrix.stale-result")
    # The cell says which output, what eager gave, what the program gave, and that it is the traced object's value.
    assert re.match(r"run 1 output\[0\] \(r0 = obj\.increment\(\d+\), on an object in another state\): eager \d+ "
                    r"\(int\), stale \d+ \(int\); eager on an object in the traced state gives \d+ \(int\): it stayed "
                    r"at the traced object's value$", result.reason), result.reason


def test_program_that_runs_on_a_copy_fails_the_state_comparison(samples):
    def prepare(scn, module, args):
        def run(*a):
            copied = tuple(copy.deepcopy(x) if isinstance(x, torch.ScriptObject) else x for x in a)
            return module(*copied)

        return run

    result = run_cell(ENGINE.context(QUEUE), "push", Backend("copying", "test", "copying", prepare))
    # The fake agrees with C++ on every call: a backend that gets it wrong is torch's defect.
    assert (result.status, result.rule, result.found) == ("torch-defect", "matrix.torch-defect", "matrix.state-differs")
    assert result.reason.startswith("run 0 object state")


def test_tracing_that_mutates_the_object_fails(samples):
    def prepare(scn, module, args):
        module(*args)  # "traces" by running on the real object
        return module

    result = run_cell(ENGINE.context(QUEUE), "push", Backend("mutating", "test", "mutating", prepare, ahead_of_time=True))
    # The fake agrees with C++ on every call: a backend that gets it wrong is torch's defect.
    assert (result.status, result.rule, result.found) == ("torch-defect", "matrix.torch-defect", "matrix.tracing-changed-object")
    assert result.reason.startswith("tracing changed the real object used to trace")


def test_compile_errors_fail_with_the_error(samples):
    def prepare(scn, module, args):
        raise RuntimeError("backend exploded")

    result = run_cell(ENGINE.context(COUNTER), "value", Backend("exploding", "test", "exploding", prepare))
    assert (result.status, result.reason, result.found) == ("torch-defect", "RuntimeError: backend exploded",
                                                           "matrix.raises")


def test_a_wrong_output_fails_with_its_rule(samples):
    def prepare(scn, module, args):
        def run(*a):  # a program that computes something else: every tensor it returns, plus one
            return tuple(x + 1 if isinstance(x, torch.Tensor) else x for x in module(*a))

        return run

    result = run_cell(ENGINE.context(QUEUE), "pop", Backend("off_by_one", "test", "off by one", prepare))
    # The fake agrees with C++ on every call: a backend that gets it wrong is torch's defect.
    assert (result.status, result.rule, result.found) == ("torch-defect", "matrix.torch-defect", "matrix.output-differs")
    assert result.reason.startswith("run 0 output[0] (r0 = obj.pop(), on the traced object): eager "), result.reason


def test_limitations_only_cover_matching_errors(samples):
    # A row applies by evidence: the exception's type and the torch function that raised it, never its text
    # (the old table matched "TorchBind objects found in inputs" in any message).
    scn = scenario(ENGINE.context(QUEUE), "pop")
    ep = torch.export.export(scn.module(None), scn.args(scn.first.build(), 0), strict=False)
    with pytest.raises(torch._dynamo.exc.UserError) as real:  # plain torch: AOTInductor refuses the object input
        torch._inductor.aoti_compile_and_package(ep)
    assert find_limitation("aoti", scn, real.value).key == "aoti-object-input"
    assert find_limitation("inductor", scn, real.value) is None  # not a backend the row covers
    assert find_limitation("aoti", scn, str(real.value)) is None  # the message alone is no evidence
    with pytest.raises(torch._dynamo.exc.UserError) as elsewhere:  # the same type and text, raised outside torch
        raise torch._dynamo.exc.UserError(real.value.error_type, str(real.value))
    assert find_limitation("aoti", scn, elsewhere.value) is None
    assert len({e.key for e in LIMITATIONS}) == len(LIMITATIONS)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor", "export"])
def test_real_backends_on_the_counter_sequence(samples, backend):
    result = run_cell(ENGINE.context(COUNTER), "sequence", backend)
    # export burns size/value results in; torch.compile keeps run 1's ints for the further example objects once
    # automatic dynamic shapes made them dynamic (tests/unit/matrix/test_matrix_sweep.py has the plain torch)
    expected = "burned-in-constants" if backend == "export" else "automatic-dynamic-stale-result"
    assert (result.status, result.limitation) == ("unsupported", expected), result.details


def test_aoti_rejects_object_inputs_as_a_known_limitation(samples):
    result = run_cell(ENGINE.context(COUNTER), "scale", "aoti")
    assert (result.status, result.limitation) == ("unsupported", "aoti-object-input")


@pytest.mark.process  # compiles with inductor / AOTInductor: runs the C++ compiler
def test_aoti_runs_an_attribute_program(samples):
    scn = scenario(ENGINE.context(QUEUE), "tensors.attr")
    assert "obj.size()" not in scn.source and "obj.pop()" in scn.source
    result = run_cell(ENGINE.context(QUEUE), "tensors.attr", "aoti")
    assert result.status == "passed", result.details


def test_an_op_taking_the_object_third_runs_where_the_schema_puts_it(samples):
    ctx = ENGINE.context(QUEUE)
    scn = scenario(ctx, "op.push_scaled")
    assert "torch.ops.samples.push_scaled.default(x0, 1.5, obj)" in scn.source
    for backend in ("eager", "export"):
        cell = run_cell(ctx, "op.push_scaled", backend)
        assert cell.status == "passed", cell.details


def test_dynamic_row_uses_other_sizes_on_the_second_run(samples):
    scn = scenario(ENGINE.context(QUEUE), "dynamic")
    first, second = scn.inputs(0), scn.inputs(1)
    assert [t.shape for t in first] != [t.shape for t in second]
    assert run_cell(ENGINE.context(QUEUE), "dynamic", "eager").status == "passed"


def _run_matrix(pytester, *extra):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--torchbind-load=sample_classes",
                                         f"--torchbind-class={COUNTER}", "--torchbind-checks=matrix",
                                         "--torchbind-backends=eager,export,aoti", *extra)


@pytest.mark.process
def test_reports_serial_and_xdist_are_identical(pytester, samples, monkeypatch):
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    # One run each way, writing every format at once (--torchbind-report repeats): each report of a run is built
    # from the same verdicts, so the serial and xdist runs are compared as before, with 2 runs compiling, not 5.
    serial = _run_matrix(pytester, "--torchbind-report=serial.md", "--torchbind-report=serial.json",
                         "--torchbind-report=serial.html", "-k", "not aoti or scale", "--junitxml=serial.xml")
    assert serial.ret == 0, serial.stdout.str()[-3000:]
    parallel = _run_matrix(pytester, "--torchbind-report=parallel.md", "--torchbind-report=parallel.json", "-k",
                           "not aoti or scale", "-n", "2")
    assert parallel.ret == 0
    md = (pytester.path / "serial.md").read_text()
    assert md == (pytester.path / "parallel.md").read_text()
    assert undated_report(pytester.path / "serial.json") == undated_report(pytester.path / "parallel.json")
    assert "| `increment` | – [1] |   | – [2] |" in md, md  # the aoti cell was deselected
    assert re.search(r"^1\. – after recompiling for a second object, torch.compile marks", md, re.M)
    assert re.search(r"^2\. – non-tensor results of methods", md, re.M)
    doc = json.loads((pytester.path / "serial.json").read_text())
    assert doc["schema"] == "torchbind-matrix/2"
    [cls] = doc["classes"]
    cell = next(c for c in cls["cells"] if (c["row"], c["backend"]) == ("scale", "aoti"))
    assert (cell["status"], cell["limitation"], cell["footnote"]) == ("unsupported", "aoti-object-input", 3)
    html = (pytester.path / "serial.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "<table>" in html and "http" not in html.split("</style>")[1]
    assert summary.read_text().count("### samples::Counter") == 2  # each of the two runs appended its matrix once
    serial.stdout.fnmatch_lines(["*TorchBind coverage matrix*", "samples::Counter: *✓*"])
    xml = (pytester.path / "serial.xml").read_text()
    assert 'name="torchbind_status" value="skipped"' in xml and "torchbind_cell" not in xml  # JUnit: status only


def test_bad_report_path_and_backend_are_usage_errors(pytester, samples):
    result = run_inprocess(pytester, "--torchbind-report=no/such/dir/m.md")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot write the report" in result.stderr.str()
    result = run_inprocess(pytester, "--torchbind-report=m.txt")
    assert "unsupported format .txt" in result.stderr.str()
    result = run_inprocess(pytester, "--torchbind-backends=eager,tvm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown backend(s) tvm" in result.stderr.str()


class TestForEachAddExportGraph(expecttest.TestCase):
    """The seed's ForEachAdd module: its non-strict export, decomposed to ATen, threads an effect token through
    with_effects."""

    def test_with_effects_token(self):
        import sample_classes  # noqa: F401

        class ForEachAdd(torch.nn.Module):
            def forward(self, tq: torch.ScriptObject, a: torch.Tensor) -> torch.ScriptObject:
                torch.ops.samples.for_each_add_(tq, a)
                return tq

        tq = torch.classes.samples.TensorQueue(torch.empty(0).fill_(-1))
        for _ in range(10):
            tq.push(torch.zeros(1))
        ep = torch.export.export(ForEachAdd(), (tq, torch.ones(1)), strict=False)
        # torch 2.13's export IR keeps the op as is; the ATen-level (functionalized) program threads the effect
        # token through with_effects, as the seed document shows.
        self.assertExpectedInline(ep.graph_module.code.strip(), """\
def forward(self, tq, a):
    for_each_add_ = torch.ops.samples.for_each_add_.default(tq, a);  a = for_each_add_ = None
    return (tq,)""")
        self.assertExpectedInline(ep.run_decompositions().graph_module.code.strip(), """\
def forward(self, token, tq, a):
    with_effects = torch.ops.higher_order.with_effects(token, torch.ops.samples.for_each_add_.default, tq, a);  token = a = None
    getitem = with_effects[0];  with_effects = None
    return (getitem, tq)""")
        output_tq = ep.module()(tq, torch.ones(1))
        self.assertEqual(output_tq.size(), 10)
        self.assertEqual(output_tq.top(), torch.ones(1))


def test_a_failed_load_names_the_error_torch_logged(monkeypatch):
    # torch.export.load logs the deserialization error and raises "Please check the warnings above"
    # (torch/export/__init__.py); the cell must say what torch logged, not point at a log nobody sees.
    import io
    import logging

    from conformance.matrix.backends.export_saveload import load_program

    def load(buffer):
        try:
            raise KeyError("serialized_exported_program.json")
        except KeyError:
            logging.getLogger("torch.export").warning("Ran into the following error when deserializing", exc_info=True)
        raise RuntimeError("We ran into an error when deserializing the saved file. Please check the warnings above "
                           "for possible errors. ")

    monkeypatch.setattr(torch.export, "load", load)
    with pytest.raises(RuntimeError) as info:
        load_program(io.BytesIO(b""))
    assert str(info.value) == ("We ran into an error when deserializing the saved file. Please check the warnings "
                               "above for possible errors. [the error torch.export.load logged: KeyError: "
                               "'serialized_exported_program.json']")
    # The cause is kept on the exception, and the limitation table judges by it: a KeyError logged by the load is
    # not the weights_only rejection of a ScriptObject (the old table matched the outer message and said it was).
    from types import SimpleNamespace

    assert isinstance(info.value.__cause__, KeyError)
    object_input = SimpleNamespace(has_object_input=True, placement="input", calls=())
    assert find_limitation("export_saveload", object_input, info.value) is None


def test_two_rows_with_the_same_program_compile_it_once(samples, monkeypatch):
    """Bag's ``sequence.attr`` and ``tensors.attr`` rows generate the same program and objects (its methods take
    no tensors): each backend compiles and runs it once, and both cells carry the verdict."""
    import conformance.matrix.torchbind.run as cell_module

    bag = Engine().context("samples_patterns::Bag")
    assert scenario(bag, "sequence.attr").code() == scenario(bag, "tensors.attr").code()
    runs = []
    real_run = cell_module._run
    monkeypatch.setattr(cell_module, "_run", lambda scn, backend: runs.append(scn.row) or real_run(scn, backend))
    first, second = run_cell(bag, "sequence.attr", "aot_eager"), run_cell(bag, "tensors.attr", "aot_eager")
    assert runs == ["sequence.attr"]
    assert (first.row, second.row) == ("sequence.attr", "tensors.attr") and second.row_index == first.row_index + 1
    assert second.status == first.status == "passed"
    assert second.details[-1] == "the same program and objects as row sequence.attr: compiled and run once for both"
    assert run_cell(bag, "tensors.attr", "eager").status == "passed" and runs[-1] == "tensors.attr"  # per backend


def test_a_cell_interrupted_by_a_base_exception_is_not_taken_for_its_twin_row(samples, monkeypatch):
    """A fake raising SystemExit (a BaseException) ends row A's cell without a verdict: row B, the same program,
    runs for itself instead of inheriting a default pass."""
    import conformance.matrix.torchbind.run as cell_module

    bag = Engine().context("samples_patterns::Bag")
    real_run = cell_module._run

    def exits_once(scn, backend):
        monkeypatch.setattr(cell_module, "_run", real_run)
        raise SystemExit(3)

    monkeypatch.setattr(cell_module, "_run", exits_once)
    with pytest.raises(SystemExit):
        run_cell(bag, "sequence.attr", "aot_eager")
    second = run_cell(bag, "tensors.attr", "aot_eager")
    assert second.status == "passed" and not any("compiled and run once" in d for d in second.details)


PLAIN_COMPILE = """
import torch
def f(x):
    return x.sin() * 3 + 1
try:
    torch.compile(f, backend="inductor")(torch.arange(5.0))
except Exception as exc:
    print(type(exc).__name__, "CppCompileError" in str(exc))
else:
    print("compiled")
"""


@pytest.mark.process  # two fresh processes whose inductor compiles C++ with a cache directory named "with space"
def test_a_broken_cpp_toolchain_fails_the_inductor_cell_and_says_so(pytester, samples, monkeypatch):
    # Plain torch first: inductor's C++ compile command does not quote its paths, so a cache directory whose path
    # holds a space fails every C++ compile (g++: input file '.../with' is the same as output file).
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(pytester.path / "with space"))
    plain = pytester.run(sys.executable, "-c", PLAIN_COMPILE)
    assert plain.stdout.lines[-1] == "InductorError True", plain.stdout.str()
    # The gate's cell fails the same way, and its message says the toolchain, not the class, is at fault.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--torchbind-load=sample_classes",
                                           f"--torchbind-class={QUEUE}", "--torchbind-checks=matrix",
                                           "--torchbind-backends=inductor", "-k", "push-inductor")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "CppCompileError" in out and "inductor's C++ compiler failed on the code inductor generated" in out
    assert "has a space in its path, which inductor's C++ compile command does not quote" in out
