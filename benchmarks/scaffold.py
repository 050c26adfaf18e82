"""Benchmark: how long the scaffold takes per class, and how many bodies it infers.

For each sample class, runs ``python -m conformance scaffold NS::CLS`` in a subprocess that loads only the sample
C++ library (no fakes), and prints the wall time (seconds) and how many methods and ops got an inferred body
(the rest raise ``NotImplementedError`` saying what was observed).

Run: ``python benchmarks/scaffold.py`` (after the sample extension is built). No thresholds: it only prints.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY_ONLY = f"{ROOT / 'sample_classes' / '_build.py'}:load_library"
CLASSES = ("samples::TensorQueue", "samples::Counter", "samples::Config", "samples_patterns::Versioned",
           "samples_patterns::AnyBox", "samples_patterns::Bag", "samples_patterns::CopyingHolder")


def main() -> None:
    print(f"{'class':32} {'seconds':>8} {'inferred':>9} {'left':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        for qualname in CLASSES:
            out = Path(tmp) / (qualname.replace("::", "_") + ".py")
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "conformance", "scaffold", qualname, "--load", LIBRARY_ONLY,
                                   "--output", str(out)], cwd=ROOT, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            if proc.returncode != 0:
                print(f"{qualname:32} {seconds:8.1f}  failed: {proc.stderr.strip()[:80]}")
                continue
            text = out.read_text()
            left = text.count("raise NotImplementedError(")
            # every method and every op fake has a docstring quoting its C++ schema
            bodies = text.count('"""C++ schema: ')
            print(f"{qualname:32} {seconds:8.1f} {bodies - left:9d} {left:5d}")


if __name__ == "__main__":
    main()
