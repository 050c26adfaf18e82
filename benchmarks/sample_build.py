"""Benchmark: where a cold build of the sample C++ classes spends its time, and what a precompiled header would save.

A fresh clone (CI) builds all ten sample namespaces (``sample_classes/csrc/*.cpp``, one extension each, see
``sample_classes/_build.py``). Each source includes ``torch/types.h``; this prints, for the running torch, the CPU
seconds (user + system, of the compiler) of:

* an empty translation unit that includes only ``torch/types.h`` (what every source pays before its own code),
* ``samples.cpp`` compiled as the build compiles it (``-O0``, C++17, torch's include paths),
* a precompiled header (``.gch``) of ``torch/types.h``, built once, and its size,
* ``samples.cpp`` compiled with that header (``-include``; ``-Winvalid-pch`` says when GCC cannot use it),

and the estimate for the ten sources both ways. Needs ``g++`` on PATH; writes only to a temporary directory.

Run: ``python benchmarks/sample_build.py``. No thresholds: it only prints.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CSRC = Path(__file__).resolve().parent.parent / "sample_classes" / "csrc"


def cpu_seconds(cmd: list[str]) -> float:
    """The compiler's CPU time (children's user + system seconds) for ``cmd``; exits on a failed compile."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"compile failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    if "invalid" in done.stderr.lower() and "pch" in done.stderr.lower():
        print(f"  (GCC could not use the precompiled header: {done.stderr.strip().splitlines()[0]})")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    import torch
    from torch.utils import cpp_extension

    if shutil.which("g++") is None:
        sys.exit("needs g++ on PATH")
    flags = ["g++", "-O0", "-std=c++17", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             *(f"-isystem{p}" for p in cpp_extension.include_paths())]
    sources = sorted(CSRC.glob("*.cpp"))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "empty.cpp").write_text("#include <torch/types.h>\n")
        (work / "pch.h").write_text("#include <torch/types.h>\n")
        header = cpu_seconds([*flags, "-c", str(work / "empty.cpp"), "-o", str(work / "empty.o")])
        plain = cpu_seconds([*flags, "-c", str(CSRC / "samples.cpp"), "-o", str(work / "plain.o")])
        pch = cpu_seconds([*flags, "-x", "c++-header", str(work / "pch.h"), "-o", str(work / "pch.h.gch")])
        size = os.path.getsize(work / "pch.h.gch") / 2**20
        with_pch = cpu_seconds([*flags, "-Winvalid-pch", "-include", str(work / "pch.h"), "-c",
                                str(CSRC / "samples.cpp"), "-o", str(work / "pch.o")])
    n = len(sources)
    print(f"torch {torch.__version__}, {n} sample sources, CPU seconds of g++ at -O0:")
    print(f"  empty unit including torch/types.h: {header:6.1f} s")
    print(f"  samples.cpp:                        {plain:6.1f} s")
    print(f"  precompiled torch/types.h (once):   {pch:6.1f} s  ({size:.0f} MiB)")
    print(f"  samples.cpp with it:                {with_pch:6.1f} s")
    print(f"  all {n} sources, estimated: {n * plain:6.1f} s as built now, {pch + n * with_pch:6.1f} s with the "
          "precompiled header")


if __name__ == "__main__":
    main()
