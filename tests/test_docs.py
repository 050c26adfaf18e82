"""The README and the example CI workflow only use options and ini keys the plugin registers, and the workflow
installs torch's CPU build before anything that depends on torch."""

from __future__ import annotations

import re
from pathlib import Path

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


def test_example_workflow_installs_cpu_torch_first_and_publishes_the_report():
    text = WORKFLOW.read_text()
    torch_install = text.index("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
    assert torch_install < text.index("pip install -e .")
    gate = text[text.index("python -m pytest"):]
    assert "--torchbind-baseline=" in gate and "--torchbind-report=torchbind-matrix.html" in gate
    assert "actions/upload-artifact" in text and "torchbind-matrix.html" in text.split("upload-artifact")[1]


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
    venv = ci.index("-m venv .ci-venv")
    assert ci.index("rm -rf .ci-venv") < venv < ci.index("source .ci-venv/bin/activate") < ci.index(test_command)
