"""A ``.py`` file given to ``--torchbind-load`` by its path (a new user's trial, issue 31 finding a): it is imported
under a module name that is the same on every run -- its stem (``fp8_x.py`` -> ``fp8_x``) unless another module has
that name -- so the Python custom classes it registers (``fp8_x.Recipe``), the item ids naming them (baselines,
``-k``, the reuse cache) and a ``--torchbind-class=fp8_x.Recipe`` selector are stable; and a reproducer of one of
its classes imports the file the same way, by absolute path, so it runs from any directory.

Before: the name was ``_torchbind_load_<stem>_<hash(str(path))>``, Python's salted ``str`` hash differing in every
process: the ids changed on every run, ``<stem>.Cls`` was refused (it names no registered class), and the
reproducer ran the file with ``runpy.run_path`` (its classes then named ``<run_path>.Recipe``, which torch's
schema parser rejects) before importing the hashed name, which no fresh interpreter has.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REGISTRATION_SOURCE, run_inprocess

#: A constant (value) class whose ``__eq__`` ignores ``margin`` while its op's result depends on it: torch reuses a
#: program compiled for one object for an equal one with another margin (the trial's fp8 recipe, made small).
#: ``{NS}``: the op namespace, one per test (custom ops are process-wide).
SOURCE = REGISTRATION_SOURCE + '''
@constant
class Recipe:
    def __init__(self, margin: int = 0, scale: int = 1):
        if not (0 <= margin <= 8 and 1 <= scale <= 8):
            raise ValueError("margin must be in [0, 8] and scale in [1, 8]")
        self.margin, self.scale = margin, scale
    def __eq__(self, other):
        return isinstance(other, Recipe) and self.scale == other.scale
    def __hash__(self):
        return hash(self.scale)
    def __fx_repr__(self):
        return (f"Recipe({self.margin!r}, {self.scale!r})", {"Recipe": Recipe})

@torch.library.custom_op("{NS}::shift", mutates_args=())
def shift(x: torch.Tensor, recipe: Recipe) -> torch.Tensor:
    return x * recipe.scale + recipe.margin

@shift.register_fake
def _(x, recipe):
    return torch.empty_like(x)
'''


def write_file(directory: Path, stem: str, ns: str) -> Path:
    """``directory/sub/<stem>.py`` registering :data:`SOURCE` with op namespace ``ns``; a subdirectory, so nothing
    but the load spec can make it importable."""
    path = directory / "sub" / f"{stem}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(SOURCE.replace("{NS}", ns))
    return path


def collected(directory: Path, hash_seed: str, *args: str) -> list[str]:
    """The item ids ``python -m pytest --collect-only -q`` prints in ``directory`` for ``args``, in a fresh process
    whose ``str`` hash is salted with ``hash_seed`` (each run of a shell gets its own salt)."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "--collect-only", "-q", *args], cwd=directory, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if line.startswith("torchbind[")]


@pytest.mark.process
def test_item_ids_of_a_path_loaded_class_are_the_same_on_two_runs(pytester):
    write_file(pytester.path, "tblp_recipes", "tblp_ids")
    args = ("--torchbind-load=sub/tblp_recipes.py", "--torchbind-class=*.Recipe")
    first, second = collected(pytester.path, "1", *args), collected(pytester.path, "2", *args)
    assert first == second
    assert "torchbind[py:tblp_recipes.Recipe]::guards[shift]" in first, first
    assert all(item.startswith("torchbind[py:tblp_recipes.Recipe]::") for item in first), first


def test_the_files_stem_selects_its_class(pytester):
    write_file(pytester.path, "tblp_select", "tblp_sel")
    result = run_inprocess(pytester, "--torchbind-load=sub/tblp_select.py", "--torchbind-class=tblp_select.Recipe",
                           "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["torchbind[[]py:tblp_select.Recipe[]]::guards[[]shift[]]"])


def test_a_second_file_of_the_same_stem_is_named_in_the_header_with_the_reason(pytester):
    # Two files named tblp_twice.py: the first keeps its stem, the second gets a digest name, and the run's header
    # says which name its classes have and why (trial 4: the digest name appeared with no word of why).
    first = write_file(pytester.path, "tblp_twice", "tblp_twice_a")
    (pytester.path / "other").mkdir()
    second = write_file(pytester.path / "other", "tblp_twice", "tblp_twice_b")
    result = run_inprocess(pytester, f"--torchbind-load={first}", f"--torchbind-load={second}",
                           "--torchbind-class=*.Recipe", "--collect-only")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    out = result.stdout.str()
    module = re.search(r"is imported as the module (_torchbind_load_tblp_twice_[0-9a-f]{12}),", out)
    assert module, out
    module = module.group(1)
    assert (f"torchbind: --torchbind-load={second} is imported as the module {module}, not by its file name, "
            f"because {first} was imported as 'tblp_twice' first; its classes are {module}.<Class>") in out, out
    result.stdout.fnmatch_lines([f"<TorchbindClass torchbind[[]py:{module}.Recipe[]]>",
                                 "<TorchbindClass torchbind[[]py:tblp_twice.Recipe[]]>"])


@pytest.mark.process
def test_the_reproducer_of_a_path_loaded_class_runs_from_an_empty_directory(pytester, tmp_path):
    # Plain torch, the failure the plugin reports: equal objects, one compiled program, a's result for b.
    path = write_file(pytester.path, "tblp_repro", "tblp_repro")
    result = run_inprocess(pytester, "--torchbind-load=sub/tblp_repro.py", "--torchbind-class=tblp_repro.Recipe",
                           "--torchbind-checks=guards", "--torchbind-check-repro=on")
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert "FAILED torchbind[py:tblp_repro.Recipe]::guards[shift]" in out
    assert "reproducer checked: run in a fresh interpreter from an empty directory, it ran as shown" in out, out
    assert "NOT REPRODUCED" not in out
    script = "\n".join(line.partition("| ")[2] for line in out.splitlines() if line.startswith("    |")) + "\n"
    assert f"spec_from_file_location('tblp_repro', {str(path)!r})" in script
    assert "from tblp_repro import Recipe" in script
    assert "runpy" not in script and "_torchbind_load_" not in script

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "repro.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "repro.py"], cwd=empty, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    shown = dict(line.split(":", 1) for line in proc.stdout.splitlines() if ":" in line)
    assert shown["a == b"].strip() == "True"
    assert shown["compiled, b"].strip() == shown["eager, a"].strip() != shown["eager, b"].strip(), proc.stdout
