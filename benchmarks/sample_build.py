"""Benchmark: what a cold build of the sample C++ classes costs, and what a precompiled header would save.

A fresh clone (CI) builds all ten sample namespaces (``sample_classes/csrc/*.cpp``, one extension each, see
``sample_classes/_build.py``). This prints, for the running torch:

* the cold build as the suite does it (``_build.load_namespaces()`` in a fresh interpreter, with an empty
  ``TORCH_EXTENSIONS_DIR``): wall seconds, and CPU seconds (user + system) of the compiler and linker;
* every source compiled alone with the flags torch wrote into its ``build.ninja`` (``-O0``, ``-std=c++20``,
  torch's include paths), and again with a precompiled header (``.gch``) of the torch headers every source
  includes, built once with the same flags (``-include``; ``-Winvalid-pch`` says when GCC cannot use it).

Needs a C++ compiler on PATH; writes only to a temporary directory. Run: ``python benchmarks/sample_build.py``.
No thresholds: it only prints.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "sample_classes" / "csrc"
HEADERS = ("torch/custom_class.h", "torch/library.h", "torch/types.h")


def cpu_seconds(cmd: list[str], **kwargs) -> tuple[float, float]:
    """``(CPU seconds of the children (user + system), wall seconds)`` of ``cmd``; exits when it fails."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    wall, after = time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    if "invalid" in done.stderr.lower() and "pch" in done.stderr.lower():
        print(f"  (GCC could not use the precompiled header: {done.stderr.strip().splitlines()[0]})")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    import torch
    from torch.utils import cpp_extension

    sources = sorted(CSRC.glob("*.cpp"))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(work / "extensions")}
        build_cpu, build_wall = cpu_seconds(
            [sys.executable, "-c", "from sample_classes import _build; _build.load_namespaces()"], cwd=ROOT, env=env)
        ninja = next((work / "extensions").glob("*/build.ninja")).read_text()
        cflags = re.search(r"^cflags = (.*)$", ninja, re.M).group(1).split()
        flags = [f for f in cflags if not f.startswith("-DTORCH_EXTENSION_NAME=")]
        cxx = cpp_extension.get_cxx_compiler()
        (work / "pch.h").write_text("".join(f"#include <{h}>\n" for h in HEADERS))
        plain = sum(cpu_seconds([cxx, *flags, "-c", str(s), "-o", str(work / "plain.o")])[0] for s in sources)
        pch = cpu_seconds([cxx, *flags, "-x", "c++-header", str(work / "pch.h"), "-o", str(work / "pch.h.gch")])[0]
        size = os.path.getsize(work / "pch.h.gch") / 2**20
        with_pch = sum(cpu_seconds([cxx, *flags, "-Winvalid-pch", "-include", str(work / "pch.h"), "-c", str(s),
                                    "-o", str(work / "pch.o")])[0] for s in sources)
    n = len(sources)
    print(f"torch {torch.__version__}, {n} sample sources, {os.cpu_count()} CPUs:")
    print(f"  cold build as the suite does it:      {build_wall:6.1f} s wall, {build_cpu:6.1f} s CPU")
    print(f"  the {n} sources compiled alone:        {plain:6.1f} s CPU")
    print(f"  precompiled {', '.join(HEADERS)} (once): {pch:6.1f} s CPU ({size:.0f} MiB)")
    print(f"  the {n} sources with it:               {with_pch:6.1f} s CPU ({pch + with_pch:.1f} s with the header)")


if __name__ == "__main__":
    main()
