"""Benchmark: what the installed plugin costs a pytest run that does not use it.

Prints the wall time (seconds, best of N) of an unrelated one-test project run three ways: with the plugin
installed and not asked for (no ``--torchbind-*`` option, no ``torchbind_*`` ini key), with ``-p no:torchbind``,
and — for scale — with the plugin asked for a TorchBind class's collection only. The first two should be close:
the plugin imports neither torch nor its engine unless a run asks for it.

Run: ``python benchmarks/plugin_overhead.py [N]``. No thresholds: it only prints.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path


def wall(args: list[str], cwd: Path, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=cwd,
                       check=False, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        installed = wall([], project, runs)
        disabled = wall(["-p", "no:torchbind"], project, runs)
        asked = wall(["--torchbind-load=torch.testing._internal.torchbind_impls:init_torchbind_implementations",
                      "--torchbind-class=_TorchScriptTesting::_Foo", "--collect-only"], project, runs)
    print(f"one-test project, best of {runs} runs:")
    print(f"  plugin installed, not asked for: {installed:6.2f} s")
    print(f"  -p no:torchbind:                 {disabled:6.2f} s")
    print(f"  plugin asked for (collect only): {asked:6.2f} s")
    print(f"  overhead when not asked for:     {installed - disabled:+6.2f} s")


if __name__ == "__main__":
    main()
