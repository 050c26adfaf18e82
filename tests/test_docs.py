"""The README and the example CI workflow only use options and ini keys the plugin registers, and the workflow
installs torch's CPU build before anything that depends on torch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance import plugin

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"


class _Registry:
    """Stands in for pytest's parser and option group: records what the plugin registers."""

    def __init__(self):
        self.options: set[str] = set()
        self.ini: set[str] = set()

    def getgroup(self, *args, **kwargs):
        return self

    def addoption(self, *names, **kwargs):
        self.options.update(names)

    def addini(self, name, *args, **kwargs):
        self.ini.add(name)


def _registered() -> _Registry:
    registry = _Registry()
    plugin.pytest_addoption(registry)
    return registry


def test_documented_options_and_ini_keys_exist():
    registry = _registered()
    for path in (ROOT / "README.md", WORKFLOW):
        text = path.read_text()
        options = set(re.findall(r"--torchbind-[a-z-]+", text))
        assert options, path
        assert options <= registry.options, (path, options - registry.options)
        # ini keys: assignments in configuration snippets, and the "ini twin" column of the options table
        ini = set(re.findall(r"^(torchbind_[a-z_]+)\s*=", text, re.M))
        ini |= {cell.strip(" `") for line in text.splitlines() if line.startswith("| `--torchbind")
                for cell in [re.split(r"(?<!\\)\|", line)[2]] if re.fullmatch(r" *`torchbind_\w+` *", cell)}
        if path.name == "README.md":
            assert {"torchbind_classes", "torchbind_timeout"} <= ini, ini  # the table was read
        assert ini <= registry.ini, (path, ini - registry.ini)


def test_every_option_is_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    missing = {name for name in _registered().options if f"`{name}" not in readme}
    assert not missing, missing


def test_example_workflow_runs_each_torch_and_publishes_one_merged_page():
    text = WORKFLOW.read_text()
    assert 'torch: ["2.13.0", "2.14.1"]' in text
    torch_install = text.index("pip install torch==${{ matrix.torch }} --index-url https://download.pytorch.org/whl/cpu")
    assert torch_install < text.index("pip install -e .")
    gate = text[text.index("python -m pytest"):]
    assert "--torchbind-baseline=" in gate and "--torchbind-report=torchbind-matrix-${{ matrix.torch }}.json" in gate
    merge = text[text.index("matrix-page:"):]
    assert "needs: conformance" in merge and "merge torchbind-matrix-*.json --output torchbind-matrix.html" in merge
    assert "actions/upload-artifact" in merge and "torchbind-matrix.html" in merge.split("upload-artifact")[1]


def _readme_commands() -> list[str]:
    """The README's code blocks that are one command line each (the two commands a new user runs)."""
    text = (ROOT / "README.md").read_text()
    return [block.strip() for block in re.findall(r"```\n(.*?)```", text, flags=re.S)
            if block.strip().count("\n") == 0 and block.strip().startswith("pip install")]


def test_ci_runs_the_readme_test_command_in_a_fresh_virtualenv():
    install_and_run, test_command = _readme_commands()[:2]
    assert "python -m pytest sample_classes" in install_and_run
    ci = (ROOT / ".ci" / "run").read_text()
    # CI runs the README's own test command, verbatim, inside a virtualenv it has just created.
    assert test_command in ci
    body = ci[ci.index("fresh_venv() {"):ci.index("\n}\n", ci.index("fresh_venv() {"))]
    assert body.index('rm -rf "$1"') < body.index('-m venv "$1"') < body.index('source "$1/bin/activate"')
    assert ci.index("fresh_venv .ci-venv ") < ci.index(test_command)
    # and a second fresh virtualenv with the other tested torch, running the main job on it
    assert ci.index(test_command) < ci.index("fresh_venv .ci-venv-2.14") < ci.index("pip install -q torch==2.14.1")
    assert "--torchbind-baseline=sample_classes/baseline.json" in ci[ci.index("fresh_venv .ci-venv-2.14"):]


def test_the_light_lists_match_the_registries():
    """The plugin offers check and backend names, and knows its ini keys, without importing torch."""
    from conformance.checks import all_checks
    from conformance.matrix.backend import all_backends
    from conformance.names import BACKEND_NAMES, CHECK_NAMES
    from conformance.options import INI_KEYS

    assert CHECK_NAMES == tuple(c.name for c in all_checks())
    assert BACKEND_NAMES == tuple(b.name for b in all_backends())
    assert set(INI_KEYS) == _registered().ini


@pytest.mark.process
def test_a_run_that_does_not_ask_for_the_plugin_imports_no_torch(pytester):
    pytester.makepyfile(test_plain="import sys\n\ndef test_plain():\n    assert 'torch' not in sys.modules\n"
                                   "    assert 'conformance.pytest_run' not in sys.modules\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    asked = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--torchbind-checks=nonsense")
    assert asked.ret == 4  # asking for the plugin validates its options
