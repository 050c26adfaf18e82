"""``python -m conformance scaffold`` (issue 12): generated fake classes pass the structural checks, bodies
inferred by observation pass ``agreement``, and bad input fails with a one-line message and exit status 2.

The scaffold runs in subprocesses that load only the sample C++ library (``sample_classes/_build.py:load_library``
imports ``_build.py`` as a file: the ``sample_classes`` package, which registers the sample fakes, is not
imported), so the generated module is the only fake of its class.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conformance.__main__ import main
from conformance.scaffold.annotations import return_annotation, type_annotation, value_annotation
from conformance.core.results import Status, Verdict
from conformance.scaffold.check import CHECKS, STRUCTURAL, RUN_CHECK, check_modules, format_table, structural
from conformance.scaffold.templates import literal

from conftest import made_once, needs_torch_testlib

ROOT = Path(__file__).resolve().parents[2]
LIBRARY_ONLY = f"{ROOT / 'sample_classes' / '_build.py'}:load_library"
TORCH_LIBRARY_ONLY = "torch.testing._internal.torchbind_impls:load_torchbind_test_lib"

#: Every class the sample C++ library registers.
SAMPLE_CLASSES = {
    "samples::TensorQueue", "samples::Counter", "samples::Config",
    "samples_patterns::Versioned", "samples_patterns::AnyBox", "samples_patterns::Bag", "samples_patterns::Holder",
    "samples_patterns::CopyingHolder",
    "samples_broken::FlattenDup", "samples_broken::FlattenMutates", "samples_broken::BadTracingMode",
    "samples_broken::LossyPickle", "samples_broken::NoFlatten", "samples_broken::FlattenWrongStructure",
    "samples_broken::PickyInit",
    "samples_unsafe::CrashyStack", "samples_unsafe::OverflowPickle", "samples_unsafe::Leaky",
}
#: Classes the scaffold refuses, and what its one-line reason says.
REFUSED = {
    "samples_broken::NoFlatten": "has no __obj_flatten__ method",
    "samples_broken::FlattenWrongStructure": "__obj_flatten__() must return a tuple of (name, value) pairs",
    "samples_broken::PickyInit": "cannot build any samples_broken::PickyInit object to observe",
}
#: Structural failures that are the C++ class's own doing (torch cannot fakify its objects whatever the fake):
#: (class, check) -> what the failure says.
CPP_FAULTS = {
    ("samples_broken::BadTracingMode", "roundtrip"): "fakifying the object failed",  # tracing_mode() is invalid
    ("samples_unsafe::OverflowPickle", "roundtrip"): "SIGSEGV",  # its __setstate__ overflows on deep copy
}
#: class -> (methods whose inferred body must pass agreement, at least; ops with an inferred fake, at least)
EXPECTED = {
    "samples::TensorQueue": ({"push", "pop", "top", "size", "clone_queue", "get_raw_queue", "for_each_add_"}, 3),
    "samples::Counter": ({"increment", "value", "reset", "scale"}, 1),
    "samples_patterns::Versioned": ({"bump", "value"}, 0),
}


def scaffold(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m conformance scaffold ARGS`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "conformance", "scaffold", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=timeout)


def batch(load: str, selectors: list[str], out: Path, *, apart: tuple[str, ...] = ()) -> dict[str, dict]:
    """``python -m conformance.scaffold.batch``: every class of ``selectors`` scaffolded (short timeouts and few
    differential examples keep it quick), in one subprocess, and the selectors in ``apart`` in another one at the
    same time (classes whose calls hang: their waits overlap the other classes' work)."""
    procs = []
    for group in (selectors, apart):
        if group:
            cmd = [sys.executable, "-m", "conformance.scaffold.batch", "--load", load, "--out", str(out),
                   "--timeout", "2", "--examples", "10", *[f"--class={s}" for s in group]]
            procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    entries = {}
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, stderr[-3000:]
        entries.update(json.loads(stdout))
    return entries


def run_checks(load: str, entries: dict[str, dict], apart: str = "samples_unsafe::") -> dict[str, list[Verdict]]:
    """The plugin's checks (``--check``'s set) on every generated module, with process isolation (the unsafe
    samples crash and hang in C++): the classes whose names start with ``apart`` in one pytest run, the others in
    another at the same time (the hangs' waits overlap the other classes' work)."""
    import concurrent.futures

    made = {q: Path(e["module"]) for q, e in entries.items() if "module" in e}
    groups = [g for g in ({q: m for q, m in made.items() if not q.startswith(apart)},
                          {q: m for q, m in made.items() if q.startswith(apart)}) if g]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(groups)) as pool:
        runs = [pool.submit(check_modules, list(g), [load], list(g.values()), checks=CHECKS, examples=10,
                            isolation="process", options=("--torchbind-timeout=2",)) for g in groups]
        return {q: v for run in runs for q, v in run.result().items()}


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """Every sample class scaffolded, and the plugin's verdicts on the generated modules: made once for the test
    session (the suite's most costly setup; under xdist the worker that comes second reads what the first made)."""

    def make(folder: Path) -> dict:
        entries = batch(LIBRARY_ONLY, ["samples::*", "samples_patterns::*", "samples_broken::*"], folder,
                        apart=("samples_unsafe::*",))
        verdicts = run_checks(LIBRARY_ONLY, entries)
        return {"entries": entries, "verdicts": {q: [v.to_json() for v in vs] for q, vs in verdicts.items()}}

    made = made_once(tmp_path_factory, "scaffold-samples", make)
    verdicts = {q: [dataclasses.replace(Verdict.from_json(v), qualname=q) for v in vs]
                for q, vs in made["verdicts"].items()}
    return made["entries"], verdicts


def text_of(samples, qualname: str) -> str:
    return Path(samples[0][qualname]["module"]).read_text()


def assert_structural_checks_pass(entries: dict[str, dict], verdicts: dict[str, list[Verdict]],
                                  faults: dict[tuple[str, str], str]) -> None:
    for qualname, entry in entries.items():
        if "module" not in entry:
            continue
        mine = verdicts.get(qualname, [])
        assert {v.check for v in mine if structural(v)} == set(STRUCTURAL), (qualname, mine)
        for v in mine:
            if not structural(v):
                continue
            if (qualname, v.check) in faults:
                assert v.status is Status.FAILED and faults[qualname, v.check] in v.summary, (qualname, v)
            else:
                assert v.status in ("passed", "skipped"), (qualname, v)


@pytest.mark.process
def test_every_sample_class(samples):
    entries, verdicts = samples
    assert set(entries) == SAMPLE_CLASSES
    for qualname, why in REFUSED.items():
        error = entries[qualname].get("error", "")
        assert why in error and "\n" not in error, (qualname, entries[qualname])
    generated = {q for q, e in entries.items() if "module" in e}
    assert generated == SAMPLE_CLASSES - set(REFUSED)
    unfakifiable = {q for q, _check in CPP_FAULTS}  # torch cannot fakify their objects: nothing can be verified
    for qualname in generated:  # what the scaffold kept passed the plugin's differential check together
        entry = entries[qualname]
        if not entry["inferred"]:
            assert entry["differential"] == "nothing to verify", entry
        elif qualname in unfakifiable:  # the entry and the header say so, never "passed"
            assert entry["differential"].startswith("differential did not run: no example object of"), entry
            assert "; differential: differential did not run: " in text_of(samples, qualname)
        else:
            assert entry["differential"] == "passed", entry
    for qualname in generated:
        compile(text_of(samples, qualname), qualname, "exec")
    assert_structural_checks_pass(entries, verdicts, CPP_FAULTS)


@pytest.mark.process
@pytest.mark.parametrize("qualname", list(EXPECTED))
def test_inferred_bodies_pass_agreement_and_differential(samples, qualname):
    entries, verdicts = samples
    methods, ops = EXPECTED[qualname]
    mine = verdicts[qualname]
    agreed = {v.target for v in mine if v.check == "agreement" and v.status == "passed"}
    assert methods <= agreed, mine
    assert [v.status for v in mine if v.check == "differential"] == ["passed"], mine
    assert entries[qualname]["inferred"] == entries[qualname]["bodies"]
    header = text_of(samples, qualname)
    assert "# Verified: agreement (custom_op for an op fake) passed for " in header
    assert "; differential: passed (" in header and "# Not verified" not in header
    assert text_of(samples, qualname).count("@torch.library.register_fake(") >= ops


@pytest.mark.process
def test_every_inferred_body_passes_agreement(samples):
    """What the scaffold keeps, the plugin's agreement check accepts (a failing candidate became a stub)."""
    entries, verdicts = samples
    for qualname, entry in entries.items():
        if "module" not in entry:
            continue
        text = text_of(samples, qualname)
        for v in verdicts[qualname]:
            if v.check == "agreement" and v.status == "failed":
                body = text.split(f"    def {v.target}(", 1)[1].split("\n    def ", 1)[0]
                assert "raise NotImplementedError(" in body, (qualname, v)


@pytest.mark.process
def test_crashing_and_hanging_calls_are_left_out(samples):
    text = text_of(samples, "samples_unsafe::CrashyStack")
    assert "# not observed: CrashyStack().pop() crashed the process (killed by SIGSEGV" in text
    assert "self.items.append(_1)" in text and "return len(self.items)" in text
    wait_for = text.split("    def wait_for(", 1)[1]
    assert "raise NotImplementedError(" in wait_for and "did not return within 2 s" in wait_for


@pytest.mark.process
@needs_torch_testlib
def test_every_torch_test_class(tmp_path):
    entries = batch(TORCH_LIBRARY_ONLY, ["_TorchScriptTesting::*"], tmp_path)
    generated = {q for q, e in entries.items() if "module" in e}
    assert {"_TorchScriptTesting::_TensorQueue", "_TorchScriptTesting::_Foo",
            "_TorchScriptTesting::_ContainsTensor", "_TorchScriptTesting::_FlattenWithTensorOp"} <= generated
    for qualname in set(entries) - generated:
        assert "has no __obj_flatten__ method" in entries[qualname]["error"], entries[qualname]
    verdicts = run_checks(TORCH_LIBRARY_ONLY, entries)
    assert_structural_checks_pass(entries, verdicts, {})
    queue = Path(entries["_TorchScriptTesting::_TensorQueue"]["module"]).read_text()
    assert "self.queue.append(_1)" in queue and "def get_raw_queue(self) -> list[torch.Tensor]:" in queue
    # torch's test library names the module its op fakes must live in: the generated op fakes say so
    assert ("lives in the module 'torch.testing._internal.torchbind_impls':\n# torch refuses a fake registered "
            "from any other imported module") in queue


@pytest.mark.process
def test_check_prints_the_verdicts(tmp_path):
    path = tmp_path / "fake_counter.py"
    proc = scaffold("samples::Counter", "--load", LIBRARY_ONLY, "--output", str(path), "--check", "--examples", "10")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = table(proc.stdout)
    assert {v.check for v in rows} == set(CHECKS)
    assert all(v.status == "passed" for v in rows), proc.stdout
    text = path.read_text()
    assert f"#     pytest --torchbind-load={LIBRARY_ONLY} --torchbind-load={path}" in text
    assert "--torchbind-class=samples::Counter" in text


@pytest.mark.process
def test_a_class_with_preconditions_is_observed_with_the_adopters_arguments(tmp_path):
    """samples_inputs::PagedCache with sample_classes/adopter_inputs.py (examples, object-dependent strategies, the
    raw-pointer method excluded): get(i) is observed on non-empty caches with valid indices and inferred as an
    element read, the excluded method is never called, the untyped-self __eq__ is an instance method, and the
    header names what the plugin's checks vouched for."""
    path = tmp_path / "fake_cache.py"
    proc = scaffold("samples_inputs::PagedCache", "--load", LIBRARY_ONLY, "--load", "sample_classes.adopter_inputs",
                    "--output", str(path), "--examples", "10")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = path.read_text()
    assert "        # observed: a clone of self.blocks[_1]\n        return self.blocks[_1].clone()" in text
    assert "no calls could be generated: exec_rawptr is excluded by conformance.strategy(" in text
    assert "    def __eq__(self, _1) -> bool:" in text and "@staticmethod\n    def __eq__" not in text
    header = next(ln for ln in text.splitlines() if ln.startswith("# Verified: "))
    assert "passed for 4 inferred bodies (get, evict_oldest, size, block_numel); differential: passed" in header


def test_a_getter_reads_an_element_of_a_flattened_list_before_any_constant():
    """An engine keeps its settings in one flattened list of strings; a getter of one of them reads it there, so
    a constant (what it happened to be on every example) is the last resort."""
    from conformance.scaffold.templates import method_templates

    bodies = [t.lines for t in method_templates({"serialized_info": ["trt", "0", "-1"]}, [], constant=-1)]
    read = bodies.index(("return int(self.serialized_info[2])",))
    assert read < bodies.index(("return -1",)) == len(bodies) - 1


def table(stdout: str) -> list[Verdict]:
    """The verdict rows ``--check`` printed."""
    rows = []
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in ("passed", "failed", "skipped", "error"):
            status = Status.FAILED if parts[2] == "error" else Status(parts[2])
            rows.append(Verdict(RUN_CHECK if parts[2] == "error" else parts[0], "", None if parts[1] == "-" else parts[1],
                                status))
    return rows


@pytest.mark.process
@pytest.mark.parametrize("qualname", list(EXPECTED))
def test_generated_module_content(samples, qualname):
    text = text_of(samples, qualname)
    assert f"#     pytest --torchbind-load={LIBRARY_ONLY} --torchbind-load=" in text
    assert f"--torchbind-class={qualname}" in text
    assert f'@torch._library.register_fake_class("{qualname}")' in text
    assert "def __obj_unflatten__(cls, flattened):\n        return cls(**dict(flattened))" in text
    assert '"""C++ schema: ' in text
    _, ops = EXPECTED[qualname]
    assert text.count("@torch.library.register_fake(") == ops


@pytest.mark.process
def test_tensor_queue_module(samples):
    text = text_of(samples, "samples::TensorQueue")
    assert "def __init__(self, queue: list[torch.Tensor], init_tensor_: torch.Tensor) -> None:" in text
    assert "self.queue = list(queue)\n        self.init_tensor_ = init_tensor_" in text
    assert "def push(self, _1: torch.Tensor) -> None:" in text
    assert "self.queue.append(_1)" in text
    assert "return self.queue.pop(0)\n        return self.init_tensor_" in text
    assert "return [t.clone() for t in self.queue]" in text  # clone_queue copies, get_raw_queue aliases
    assert "def fake_push_scaled(x: torch.Tensor, alpha: float, foo) -> None:" in text
    assert "return foo.push(x * alpha)" in text
    assert "return x * foo.size()" in text


@pytest.mark.process
def test_versioned_static_methods(samples):
    text = text_of(samples, "samples_patterns::Versioned")
    assert "    @staticmethod\n    def version() -> int:" in text
    assert "return 3" in text
    assert "    @staticmethod\n    def clamp(_0: int, _1: int) -> int:" in text


@pytest.mark.process
def test_uninferred_body_says_what_was_observed(samples):
    text = text_of(samples, "samples::Config")
    assert "def add(self, x: torch.Tensor, alpha: float = 1.0) -> None:" in text
    assert "def tag(self, name: str, prefix: str = 'cfg') -> str:" in text
    assert "self._tags = list(tags)" in text  # the flatten key "tags" is also a method name
    assert "raise NotImplementedError('not inferred; on Config(" in text
    assert "items: 0 -> 1 elements" in text


# ----- bad input: in-process, one-line message, exit status 2 -----------------------------------------------------
def run_main(capsys, *args: str) -> tuple[int, str]:
    code = main(["scaffold", *args])
    err = capsys.readouterr().err
    return code, err


def test_unknown_class(capsys, tmp_path):
    code, err = run_main(capsys, "samples::Nope", "--load", LIBRARY_ONLY, "-o", str(tmp_path / "x.py"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no TorchBind class samples::Nope is registered" in err and "samples::Counter" in err
    assert not (tmp_path / "x.py").exists()


def test_malformed_class_name(capsys, tmp_path):
    code, err = run_main(capsys, "Counter", "-o", str(tmp_path / "x.py"))
    assert code == 2 and "expected NAMESPACE::CLASS" in err


def test_class_without_flatten(capsys, tmp_path):
    code, err = run_main(capsys, "samples_broken::NoFlatten", "--load", LIBRARY_ONLY, "-o", str(tmp_path / "x.py"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "has no __obj_flatten__ method" in err and "tuple of (name, value) tuples" in err


@pytest.mark.process
def test_library_that_does_not_load(capsys, tmp_path):
    bad = tmp_path / "libbad.so"
    bad.write_text("not a library")
    code, err = run_main(capsys, "samples::Counter", "--load", str(bad), "-o", str(tmp_path / "x.py"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "loading the library failed" in err and "--load " in err


@pytest.mark.process
def test_existing_output_needs_force(capsys, tmp_path):
    out = tmp_path / "x.py"
    out.write_text("# mine\n")
    code, err = run_main(capsys, "samples::Counter", "--load", LIBRARY_ONLY, "-o", str(out))
    assert code == 2 and "exists; pass --force" in err
    assert out.read_text() == "# mine\n"
    # generating forks observation workers: not from this pytest process, which may have run OpenMP work
    proc = scaffold("samples::Counter", "--load", LIBRARY_ONLY, "-o", str(out), "--force", "--examples", "5")
    assert proc.returncode == 0 and "register_fake_class" in out.read_text(), proc.stderr


def test_check_refuses_a_class_that_has_a_fake(capsys, tmp_path):
    code, err = run_main(capsys, "samples::Counter", "--load", "sample_classes", "-o", str(tmp_path / "x.py"),
                         "--check")
    assert code == 2 and "already has a fake class registered" in err
    assert not (tmp_path / "x.py").exists()


# ----- units ------------------------------------------------------------------------------------------------------
def test_annotations():
    schema = torch._C.parse_schema("f(Tensor a, int? b, float[] c, (int, str) d, Dict(str, Tensor) e, Any f, "
                                   "Tensor?[] g) -> (int, Tensor)")
    got = [type_annotation(a.type) for a in schema.arguments]
    assert got == ["torch.Tensor", "Optional[int]", "list[float]", "tuple[int, str]", "dict[str, torch.Tensor]",
                   None, "list[Optional[torch.Tensor]]"]
    assert return_annotation(schema) == "tuple[int, torch.Tensor]"
    assert return_annotation(torch._C.parse_schema("g() -> ()")) == "None"
    assert value_annotation([[], [torch.ones(1)]]) == "list[torch.Tensor]"
    assert value_annotation([1, 2]) == "int" and value_annotation([[], []]) == "list"


def test_literal_and_table():
    assert literal((1, 2.5, "a", None, True)) == "(1, 2.5, 'a', None, True)"
    assert literal(torch.ones(1)) is None
    verdicts = [Verdict("signature", "ns::Cls", "push", Status.PASSED),
                Verdict("differential", "ns::Cls", None, Status.FAILED, reason="x")]
    assert format_table(verdicts).splitlines() == [
        "check         target  verdict", "------------  ------  -------", "signature     push    passed",
        "differential  -       failed", "1 passed, 1 failed"]
    # A run that wrote no report: one failed verdict of the run itself, shown as an error.
    lost = [Verdict(RUN_CHECK, "ns::Cls", None, Status.FAILED, reason="exit status 4: ERROR: ...")]
    assert format_table(lost).splitlines()[2:] == ["pytest  -       error", "1 error"]
