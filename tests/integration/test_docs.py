"""The documentation keeps its promises: the README and the docs pages (docs/**/*.md) and the example CI workflow
only use options and ini keys the plugin registers, the options reference lists every one of them, the workflow
installs torch's CPU build before anything that depends on torch, the README's two commands are what CI runs,
the docs site builds with warnings as errors, and the command examples the pages show on this repository's sample
classes collect what they promise."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.plugin import hooks as plugin
from conftest import TORCH_SPEC, TORCH_TESTLIB, run_inprocess

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
OPTIONS_PAGE = DOCS / "reference" / "options.md"
LIMITATIONS_PAGE = DOCS / "reference" / "limitations.md"
WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"
#: The README and every page of the docs site.
DOCUMENTS = (README, *sorted(DOCS.rglob("*.md")))


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


def _options_table(text: str) -> dict[str, str | None]:
    """The options table's rows: option name -> its ini twin (``None`` where the row has none)."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `--torchbind"):
            cells = re.split(r"(?<!\\)\|", line)
            option = re.match(r" *`(--torchbind-[a-z-]+)", cells[1]).group(1)
            twin = re.fullmatch(r" *`(torchbind_\w+)` *", cells[2])
            rows[option] = twin.group(1) if twin else None
    return rows


def _documented(text: str) -> tuple[set[str], set[str]]:
    """The options a text names, and its ini keys: assignments in configuration snippets, and the "ini twin"
    column of an options table."""
    options = set(re.findall(r"--torchbind-[a-z-]+", text))
    ini = set(re.findall(r"^(torchbind_[a-z_]+)\s*=", text, re.M))
    ini |= {twin for twin in _options_table(text).values() if twin}
    return options, ini


def test_documented_options_and_ini_keys_exist():
    registry = _registered()
    assert len(DOCUMENTS) > 10, DOCUMENTS  # the docs pages were found
    for path in (*DOCUMENTS, WORKFLOW):
        options, ini = _documented(path.read_text())
        if path in (README, OPTIONS_PAGE, WORKFLOW):
            assert options, path  # these name options: the text was read
        assert options <= registry.options, (path, options - registry.options)
        if path == OPTIONS_PAGE:
            assert {"torchbind_classes", "torchbind_timeout"} <= ini, ini  # the table was read
        assert ini <= registry.ini, (path, ini - registry.ini)


def test_every_option_and_ini_key_is_in_the_options_table():
    registry = _registered()
    table = _options_table(OPTIONS_PAGE.read_text())
    missing = registry.options - set(table)
    assert not missing, missing
    assert {twin for twin in table.values() if twin} == registry.ini


def test_example_workflow_runs_each_torch_and_publishes_one_merged_page():
    text = WORKFLOW.read_text()
    assert 'torch: ["2.13.0", "2.14.1"]' in text
    torch_install = text.index("pip install torch==${{ matrix.torch }} --index-url https://download.pytorch.org/whl/cpu")
    assert torch_install < text.index("pip install -e .")
    gate = text[text.index("python -m pytest"):]
    assert "--torchbind-baseline=" in gate and "--torchbind-report=torchbind-matrix-${{ matrix.torch }}.json" in gate
    # Reuse needs pytest's cache, kept between runs with torch's compile cache.
    assert "--torchbind-reuse=on" in gate and "no:cacheprovider" not in gate
    cache = text[text.index("actions/cache"):text.index("name: Install torch")]
    assert ".pytest_cache" in cache and ".cache" in cache and "TORCHINDUCTOR_CACHE_DIR: ${{ github.workspace }}/.cache" in text
    merge = text[text.index("matrix-page:"):]
    assert "needs: conformance" in merge and "merge torchbind-matrix-*.json --output torchbind-matrix.html" in merge
    assert "actions/upload-artifact" in merge and "torchbind-matrix.html" in merge.split("upload-artifact")[1]


def _readme_commands() -> list[str]:
    """The code blocks of the README's "The two commands" section that are one command line each (the two
    commands a new user of this repository runs)."""
    text = README.read_text()
    start = text.index("\n## The two commands\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end != -1 else None]
    return [block.strip() for block in re.findall(r"```\n(.*?)```", section, flags=re.S)
            if block.strip().count("\n") == 0 and block.strip().startswith("pip install")]


def test_ci_runs_the_readme_test_command_in_a_fresh_virtualenv():
    commands = _readme_commands()
    assert len(commands) == 2, commands
    install_and_run, test_command = commands
    assert "python -m pytest sample_classes" in install_and_run
    ci = (ROOT / ".ci" / "run").read_text()
    # CI runs the README's own test command, verbatim, inside a virtualenv it has just created.
    assert test_command in ci
    body = ci[ci.index("fresh_venv() {"):ci.index("\n}\n", ci.index("fresh_venv() {"))]
    assert body.index('rm -rf "$1"') < body.index('-m venv "$1"') < body.index('source "$1/bin/activate"')
    assert ci.index("fresh_venv .ci-venv ") < ci.index(test_command)
    # then, in the same virtualenv, the docs site with warnings as errors
    assert ci.index(test_command) < ci.index("mkdocs build --strict") < ci.index("deactivate", ci.index(test_command))
    # and a fresh virtualenv for each later tested torch, running the main job and the cross-version files on it
    leg = ci[ci.index("later_torch_leg() {"):ci.index("\n}\n", ci.index("later_torch_leg() {"))]
    assert leg.index('fresh_venv ".ci-venv-$version"') < leg.index('pip install -q "$@"') \
        < leg.index("--torchbind-baseline=sample_classes/baseline.json") < leg.index("@tests/cross-version.args")
    assert ci.index(test_command) < ci.index("later_torch_leg 2.14 torch==2.14.1") \
        < ci.index("later_torch_leg 2.15 -r .ci/requirements-torch-2.15.txt")
    assert "torch==2.15.0" in (ROOT / ".ci" / "requirements-torch-2.15.txt").read_text().splitlines()
    # every file the later legs run exists (pytest would only say "file not found" there)
    listed = (ROOT / "tests" / "cross-version.args").read_text().split()
    assert listed and all((ROOT / f).is_file() for f in listed), [f for f in listed if not (ROOT / f).is_file()]


def test_the_light_lists_match_the_registries():
    """The plugin offers check and backend names, and knows its ini keys, without importing torch."""
    from conformance.checks import all_checks
    from conformance.matrix.backends import all_backends
    from conformance.core.names import BACKEND_NAMES, CHECK_NAMES
    from conformance.plugin.options import INI_KEYS

    assert CHECK_NAMES == tuple(c.name for c in all_checks())
    assert BACKEND_NAMES == tuple(b.name for b in all_backends())
    assert set(INI_KEYS) == _registered().ini


@pytest.mark.process
def test_a_run_that_does_not_ask_for_the_plugin_imports_no_torch(pytester):
    pytester.makepyfile(test_plain="import sys\n\ndef test_plain():\n    assert 'torch' not in sys.modules\n"
                                   "    assert 'conformance.plugin.run' not in sys.modules\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    asked = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--torchbind-checks=nonsense")
    assert asked.ret == 4  # asking for the plugin validates its options


# ----- the docs site -------------------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """A heading's anchor, as both GitHub and MkDocs (Python-Markdown's toc) write it for these pages."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return re.sub(r"[\s-]+", "-", text).strip("-")


def test_the_readme_links_lead_somewhere():
    """The README is not part of the site (mkdocs does not check it): its relative links name existing files, and
    its anchors headings of the page they point at."""
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert any(link.startswith("docs/") for link in local), local
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else README
        assert target.exists(), link
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, (link, headings)


def test_the_limitations_page_lists_every_known_torch_limitation():
    from conformance.matrix.limitations import LIMITATIONS

    text = LIMITATIONS_PAGE.read_text()
    rows = {m.group(1): line for line in text.splitlines() if (m := re.match(r"\| `([a-z-]+)` \|", line))}
    assert set(rows) == {entry.key for entry in LIMITATIONS}
    for entry in LIMITATIONS:
        assert entry.reason in rows[entry.key], entry.key
        assert all(f"`{backend}`" in rows[entry.key].split("|")[2] for backend in entry.backends), entry.key


@pytest.mark.process
def test_the_docs_site_builds_with_warnings_as_errors(tmp_path):
    """``mkdocs build --strict``, as CI runs it: a broken link or anchor between pages, a page missing from the
    navigation or a missing included file fails it."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs and mkdocs-material are not installed here (pip install -e '.[docs]')")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for page in DOCUMENTS[1:]:
        relative = page.relative_to(DOCS).with_suffix("")
        built = site / "index.html" if relative.name == "index" else site / relative / "index.html"
        assert built.exists(), built


# ----- the command examples the docs show ----------------------------------------------------------------------
#
# Every fenced code block of the README and the docs pages is read for pytest command lines: a block's `$ `
# lines, or a block that is one command line (a line ending in `\` continues on the next); `a && b` are several
# commands; `CI=1 pytest ...` sets CI for the run. Those that run this repository's sample classes
# (`--torchbind-load=sample_classes...`), or torch's own test classes, are checked here:
#
# - executed, with `--collect-only -q`, in this process (`run_inprocess`): those whose load specs only import
#   modules (and torch's test classes, which conftest loads once per process anyway): the main job, the coverage
#   matrix of the sample TensorQueue, the crashing and hanging samples, torch's shipped classes. They must exit 0
#   and collect torchbind items. Collecting runs no check (no compile, no call into C++ beyond loading), so it
#   takes seconds; whether the checks then pass or fail as the pages say is what the rest of the suite pins.
# - only parsed: those that also call a set-up function (`module:function`), i.e. the `sample_classes.broken`
#   installers: installing a broken fake lasts until the interpreter exits (BrokenFake.install), so running one
#   here would break every later test of this process that needs the correct fakes. For those, every load spec
#   must name a module that exists and a function it defines, and every option must be registered.


@dataclasses.dataclass(frozen=True)
class _Command:
    where: str  # page:line
    env: tuple[tuple[str, str], ...]
    args: tuple[str, ...]  # after `pytest` / `python -m pytest`

    @property
    def loads(self) -> list[str]:
        return [arg.split("=", 1)[1] for arg in self.args if arg.startswith("--torchbind-load=")]

    @property
    def runs_here(self) -> bool:
        """Whether its load specs only import modules (or load torch's test classes, as conftest does)."""
        return all(":" not in spec or spec == TORCH_SPEC for spec in self.loads)


def _logical_lines(block: str) -> list[tuple[int, str]]:
    """(offset, line) with backslash continuations joined."""
    out, pending, start = [], "", 0
    for offset, line in enumerate(block.splitlines()):
        if not pending:
            start = offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def _commands(path: Path) -> list[_Command]:
    text = path.read_text()
    found = []
    for fence in re.finditer(r"^```([^\n`]*)\n(.*?)^```\s*$", text, flags=re.S | re.M):
        if fence.group(1).strip() not in ("", "bash", "console", "sh", "shell"):
            continue
        first_line = text.count("\n", 0, fence.start(2)) + 1
        lines = _logical_lines(fence.group(2))
        if any(line.startswith("$ ") for _, line in lines):
            lines = [(offset, line[2:]) for offset, line in lines if line.startswith("$ ")]
        elif len(lines) != 1:
            continue  # output, a listing or a script: not a command
        for offset, line in lines:
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                env = []
                while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
                    env.append(tuple(words.pop(0).split("=", 1)))
                if words[:1] == ["pytest"]:
                    args = words[1:]
                elif words[:3] == ["python", "-m", "pytest"]:
                    args = words[3:]
                else:
                    continue
                found.append(_Command(f"{path.relative_to(ROOT)}:{first_line + offset}", tuple(env), tuple(args)))
    return found


def _sample_commands() -> list[_Command]:
    return [command for path in DOCUMENTS for command in _commands(path)
            if any(spec.split(":")[0].split(".")[0] == "sample_classes" or spec == TORCH_SPEC
                   for spec in command.loads)]


SAMPLE_COMMANDS = _sample_commands()


def test_the_docs_show_commands_on_the_samples():
    """The examples below were found: the parser reads the pages as they are written."""
    where = {command.where.split(":")[0] for command in SAMPLE_COMMANDS}
    assert {"README.md", "docs/how-to/crashes-and-hangs.md", "docs/explanation/matrix.md",
            "docs/explanation/differential.md", "docs/reference/checks.md", "docs/explanation/findings.md"} <= where
    assert sum(command.runs_here for command in SAMPLE_COMMANDS) >= 4
    assert any(not command.runs_here for command in SAMPLE_COMMANDS)


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library, registers the correct fakes

    return "samples"


@pytest.mark.parametrize("command", [c for c in SAMPLE_COMMANDS if c.runs_here], ids=lambda c: c.where)
def test_a_docs_command_collects_what_it_names(pytester, samples, monkeypatch, command):
    if TORCH_SPEC in command.loads and not TORCH_TESTLIB:
        pytest.skip("this torch ships no libtorchbind_test.so (torch's TorchBind test classes)")
    for name, value in command.env:
        monkeypatch.setenv(name, value)
    # Paths in the command (the `sample_classes` path argument, sample_classes/baseline.json) are the repository's,
    # as when the command runs in its root.
    (pytester.path / "sample_classes").symlink_to(ROOT / "sample_classes", target_is_directory=True)
    result = run_inprocess(pytester, *command.args, "--collect-only", "-q")
    assert result.ret == 0, (command, result.stdout.str()[-3000:], result.stderr.str()[-3000:])
    assert any(line.startswith("torchbind[") for line in result.outlines), (command, result.stdout.str()[-3000:])


@pytest.mark.parametrize("command", [c for c in SAMPLE_COMMANDS if not c.runs_here], ids=lambda c: c.where)
def test_a_docs_command_with_a_setup_call_names_what_exists(samples, command):
    registry = _registered()
    options = {arg.split("=", 1)[0] for arg in command.args if arg.startswith("--torchbind-")}
    assert options <= registry.options, options - registry.options
    for spec in command.loads:
        module, _, function = spec.partition(":")
        assert importlib.util.find_spec(module) is not None, spec
        if function:
            assert callable(getattr(importlib.import_module(module), function, None)), spec
