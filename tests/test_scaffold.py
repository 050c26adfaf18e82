"""``python -m conformance scaffold`` (issue 12): generated fake classes pass the structural checks, bodies
inferred by observation pass ``agreement``, and bad input fails with a one-line message and exit status 2.

The scaffold runs in subprocesses that load only the sample C++ library (``sample_classes/_build.py:load_library``
imports ``_build.py`` as a file: the ``sample_classes`` package, which registers the sample fakes, is not
imported), so the generated module is the only fake of its class.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conformance.__main__ import main
from conformance.scaffold.annotations import return_annotation, type_annotation, value_annotation
from conformance.scaffold.check import STRUCTURAL, Verdict, format_table, parse_summary
from conformance.scaffold.templates import literal

ROOT = Path(__file__).resolve().parents[1]
LIBRARY_ONLY = f"{ROOT / 'sample_classes' / '_build.py'}:load_library"

#: class -> (methods whose inferred body must pass agreement, at least; ops with an inferred fake)
EXPECTED = {
    "samples::TensorQueue": ({"push", "pop", "top", "size", "clone_queue", "get_raw_queue", "for_each_add_"}, 3),
    "samples::Counter": ({"increment", "value", "reset", "scale"}, 1),
    "samples_patterns::Versioned": ({"bump", "value"}, 0),
}


def scaffold(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m conformance scaffold ARGS`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "conformance", "scaffold", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=timeout)


def table(stdout: str) -> list[Verdict]:
    """The verdict rows ``--check`` printed."""
    rows = []
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in ("passed", "failed", "skipped", "error"):
            rows.append(Verdict(parts[0], "" if parts[1] == "-" else parts[1], parts[2]))
    return rows


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """``scaffold NS::CLS --check`` for each class of :data:`EXPECTED`: ``{qualname: (process, module text)}``."""
    out = {}
    d = tmp_path_factory.mktemp("scaffold")
    for qualname in EXPECTED:
        path = d / f"fake_{qualname.replace('::', '_').lower()}.py"
        proc = scaffold(qualname, "--load", LIBRARY_ONLY, "--output", str(path), "--check")
        out[qualname] = (proc, path.read_text() if path.exists() else "")
    return out


@pytest.mark.parametrize("qualname", list(EXPECTED))
def test_generated_module_passes_structural_checks(checked, qualname):
    proc, text = checked[qualname]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = table(proc.stdout)
    structural = [v for v in verdicts if v.check in STRUCTURAL]
    assert {v.check for v in structural} == set(STRUCTURAL)
    assert all(v.status == "passed" for v in structural), proc.stdout
    methods, _ = EXPECTED[qualname]
    agreed = {v.target for v in verdicts if v.check == "agreement" and v.status == "passed"}
    print(f"{qualname}: agreement passes for {len(agreed)} of "
          f"{len([v for v in verdicts if v.check == 'agreement'])} methods: {sorted(agreed)}")
    assert methods <= agreed, proc.stdout


@pytest.mark.parametrize("qualname", list(EXPECTED))
def test_generated_module_content(checked, qualname):
    _, text = checked[qualname]
    ns, cls = qualname.split("::")
    assert f"#     pytest --torchbind-load={LIBRARY_ONLY} --torchbind-load=" in text
    assert f"--torchbind-class={qualname}" in text
    assert f'@torch._library.register_fake_class("{qualname}")' in text
    assert "def __obj_unflatten__(cls, flattened):\n        return cls(**dict(flattened))" in text
    assert '"""C++ schema: ' in text
    compile(text, "generated", "exec")
    _, ops = EXPECTED[qualname]
    assert text.count("@torch.library.register_fake(") == ops


def test_tensor_queue_module(checked):
    _, text = checked["samples::TensorQueue"]
    assert "def __init__(self, queue: list[torch.Tensor], init_tensor_: torch.Tensor) -> None:" in text
    assert "self.queue = queue\n        self.init_tensor_ = init_tensor_" in text
    assert "def push(self, _1: torch.Tensor) -> None:" in text
    assert "self.queue.append(_1)" in text
    assert "return self.queue.pop(0)\n        return self.init_tensor_" in text
    assert "return [t.clone() for t in self.queue]" in text  # clone_queue copies, get_raw_queue aliases
    assert "def fake_push_scaled(x: torch.Tensor, alpha: float, foo) -> None:" in text
    assert "return foo.push(x * alpha)" in text
    assert "return x * foo.size()" in text


def test_versioned_static_methods(checked):
    _, text = checked["samples_patterns::Versioned"]
    assert "    @staticmethod\n    def version() -> int:" in text
    assert "return 3" in text
    assert "    @staticmethod\n    def clamp(_0: int, _1: int) -> int:" in text


def test_uninferred_body_says_what_was_observed(tmp_path):
    out = tmp_path / "config.py"
    proc = scaffold("samples::Config", "--load", LIBRARY_ONLY, "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "def add(self, x: torch.Tensor, alpha: float = 1.0) -> None:" in text
    assert "def tag(self, name: str, prefix: str = 'cfg') -> str:" in text
    assert "self._tags = tags" in text  # the flatten key "tags" is also a method name
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


def test_library_that_does_not_load(capsys, tmp_path):
    bad = tmp_path / "libbad.so"
    bad.write_text("not a library")
    code, err = run_main(capsys, "samples::Counter", "--load", str(bad), "-o", str(tmp_path / "x.py"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "loading the library failed" in err and "--load " in err


def test_existing_output_needs_force(capsys, tmp_path):
    out = tmp_path / "x.py"
    out.write_text("# mine\n")
    code, err = run_main(capsys, "samples::Counter", "--load", LIBRARY_ONLY, "-o", str(out))
    assert code == 2 and "exists; pass --force" in err
    assert out.read_text() == "# mine\n"
    code, _ = run_main(capsys, "samples::Counter", "--load", LIBRARY_ONLY, "-o", str(out), "--force")
    assert code == 0 and "register_fake_class" in out.read_text()


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
    verdicts = parse_summary("PASSED torchbind[ns.C]::signature[push]\nFAILED torchbind[ns.C]::differential - x\n")
    assert verdicts == [Verdict("signature", "push", "passed"), Verdict("differential", "", "failed", "x")]
    assert "1 passed, 1 failed" in format_table(verdicts)
