"""Benchmark: ``--torchbind-reuse=on`` — a cold run, a warm rerun with nothing changed, and a rerun after one fake
method changed, side by side in one run on this machine.

For three selections — the seed's ``samples::TensorQueue`` alone; five sample classes together
(``samples::TensorQueue``, ``samples::Counter``, ``samples::Config``, ``samples_patterns::Bag``,
``samples_patterns::Versioned``); and every well-behaved sample class (``samples::*``, ``samples_patterns::*``,
``samples_inputs::*`` with ``PagedCache``'s adopter module: the scale of a library with a dozen classes) — it
prints the wall time (seconds) of the whole gate (every check, every backend), serially and with ``-n 2``, three ways, in a scratch copy of ``sample_classes`` with its own pytest
cache, as a CI gate runs it: with a reviewed baseline of the selection's known failures (written by an untimed
``--torchbind-accept`` run with caches of its own, as an adopter does once):

* cold: ``--cache-clear`` (nothing to reuse) with torch's compile caches empty (a new ``TORCHINDUCTOR_CACHE_DIR``);
* warm: the same command again (every settled verdict reused);
* one fake changed: ``FakeTensorQueue.size`` edited (a comment line), so TensorQueue's items run again and the other
  classes' verdicts are reused;

and, as the floor, the coverage matrix of TensorQueue compiled by calling torch directly
(``benchmarks/matrix.py``'s floor). Each rerun's count of reused items is printed from its JSON report. The sample
C++ extension is built for the scratch copy before anything is timed (a library's own build is not the gate's).
Python writes bytecode as it does by default (``PYTHONDONTWRITEBYTECODE`` is cleared for the runs), as on a CI
machine that keeps its virtualenv.

Run: ``python benchmarks/reuse.py`` (about 30 minutes on 2 cores). No thresholds: it only prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from conformance.plugin.reuse import REUSED  # noqa: E402 - how a reused item's note begins

SELECTIONS = {  # name: the gate's selection (classes, and the adopter modules they need)
    "TensorQueue": ["--torchbind-class=samples::TensorQueue"],
    "five classes": [f"--torchbind-class={c}" for c in (
        "samples::TensorQueue", "samples::Counter", "samples::Config", "samples_patterns::Bag",
        "samples_patterns::Versioned")],
    # The scale the motivation names (a library with a dozen classes), PagedCache with its adopter module
    # (without it, the examples' exec_rawptr calls crash the process: never a verdict kept for reuse).
    "every well-behaved sample class": ["--torchbind-load=sample_classes.fakes_inputs",
                                        "--torchbind-load=sample_classes.adopter_inputs",
                                        "--torchbind-class=samples::*", "--torchbind-class=samples_patterns::*",
                                        "--torchbind-class=samples_inputs::*"],
}


MODES = {"serial": ["-p", "no:xdist"], "-n 2": ["-n", "2"]}


def _env(project: Path, torch_cache: str) -> dict[str, str]:
    # torch's own compile caches (FX graph, AOTAutograd) in a directory of the project, as a CI would keep them.
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(project / torch_cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def gate(project: Path, selection: list[str], *extra: str, torch_cache: str,
         cache: str = "cache") -> tuple[float, int, int, list[str]]:
    """One run of the gate in ``project``: (seconds, items in the report, items reused, the items that ran with
    their status)."""
    report = project / "report.json"
    cmd = [sys.executable, "-m", "pytest", "-q", "--torchbind-load=sample_classes",
           *selection, "--torchbind-reuse=on", f"--torchbind-report={report}",
           "--torchbind-baseline=baseline.json", "-o", f"cache_dir={project / cache}", *extra]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=project, env=_env(project, torch_cache), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    verdicts = [v for c in json.loads(report.read_text())["classes"] for v in c["verdicts"]]
    ran = [f"{c['qualname']}::{v['item']} ({v['status']}{', baseline' if v.get('baseline') else ''})"
           for c in json.loads(report.read_text())["classes"] for v in c["verdicts"]
           if not any(n.startswith(REUSED) for n in v.get("notes", ()))]
    return elapsed, len(verdicts), len(verdicts) - len(ran), ran


def edit_fake(project: Path, undo: bool = False) -> None:
    """Add (or take out) a comment line in ``FakeTensorQueue.size``: a changed fake method, same behaviour."""
    fakes = project / "sample_classes" / "fakes.py"
    marker = "    def size(self) -> int:\n"
    text = fakes.read_text()
    edited = marker + "        # edited by benchmarks/reuse.py\n"
    fakes.write_text(text.replace(edited, marker) if undo else text.replace(marker, edited, 1))


def main() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        shutil.copytree(ROOT / "sample_classes", project / "sample_classes",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (project / "pytest.ini").write_text("[pytest]\n")
        # The sample extension's build (keyed on its source paths: this copy builds once), not timed.
        subprocess.run([sys.executable, "-c", "import sample_classes"], cwd=project, env=_env(project, "warmup"),
                       check=True)
        for i, (name, selection) in enumerate(SELECTIONS.items()):
            # The adopter's reviewed baseline of this selection's known failures, written once with caches of its
            # own (not timed, and leaving the timed runs' caches empty).
            (project / "baseline.json").unlink(missing_ok=True)
            gate(project, selection, "-n", "2", "--torchbind-accept", torch_cache=f"accept-{i}", cache=f"accept-{i}")
            for mode, flags in MODES.items():
                # Each cold run starts with torch's caches empty. No space in the directory's name: inductor's C++
                # compile command does not quote its paths (a cache directory "a b" fails every C++ compile).
                cache = f"torch-cache-{i}-{'serial' if mode == 'serial' else 'n2'}"
                cold = gate(project, selection, *flags, "--cache-clear", torch_cache=cache)
                warm = gate(project, selection, *flags, torch_cache=cache)
                edit_fake(project)
                changed = gate(project, selection, *flags, torch_cache=cache)
                edit_fake(project, undo=True)
                rows.append((name, mode, cold, warm, changed))
    from matrix import floor_wall

    floor, cells = floor_wall()
    for name, mode, cold, warm, changed in rows:
        print(f"{name} ({cold[1]} items), {mode}:")
        print(f"  cold (--cache-clear):    {cold[0]:7.1f} s   reused {cold[2]}")
        print(f"  warm, nothing changed:   {warm[0]:7.1f} s   reused {warm[2]}   warm/cold {warm[0] / cold[0]:.2f}")
        for item in warm[3]:  # what a warm run still ran: failures the baseline does not list (e.g. a flaky one)
            print(f"      ran: {item}")
        print(f"  one fake method changed: {changed[0]:7.1f} s   reused {changed[2]}")
    print(f"floor: TensorQueue's coverage matrix ({cells} cells) compiled by torch directly: {floor:.1f} s")


if __name__ == "__main__":
    main()
