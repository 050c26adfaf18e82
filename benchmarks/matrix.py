"""Benchmark: wall time of the full coverage matrix for the seed's TensorQueue sample.

Prints three figures (seconds) and two ratios:

* the plugin, serially: ``pytest --torchbind-class=samples::TensorQueue --torchbind-checks=matrix``;
* the plugin with ``-n 2`` (pytest-xdist);
* the floor: the same programs compiled and run by calling torch directly, without the plugin — each program's
  source is generated once (not timed), then for every cell only ``torch.compile`` / ``torch.export`` /
  ``torch.export.save``+``load`` / ``aoti_compile_and_package``+``aoti_load_package`` and two runs are timed.

Run: ``python benchmarks/matrix.py`` (after the sample extension is built; the first run also warms torch's
inductor caches, so run it twice for steady figures). No thresholds: it only prints.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLASS = "samples::TensorQueue"


def plugin_wall(*extra: str) -> float:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "sample_classes",
           "--torchbind-load=sample_classes", f"--torchbind-class={CLASS}", "--torchbind-checks=matrix", *extra]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def floor_wall() -> tuple[float, int]:
    """Compile and run every (scenario, backend) program with plain torch calls; returns (seconds, cells)."""
    import logging
    import warnings

    import torch

    logging.disable(logging.WARNING)  # torch logs (and mis-formats) warnings for the failing cells
    warnings.simplefilter("ignore")

    import sample_classes  # noqa: F401
    from conformance.runner import Engine
    from conformance.matrix.torchbind.rows import row_names, scenario
    from conformance.core.results import NotApplicable

    ctx = Engine().context(CLASS)
    programs = []
    for row in row_names(ctx):
        try:
            scn = scenario(ctx, row)
            scn.module_class  # noqa: B018 - generate the source outside the timed part
        except NotApplicable:
            continue
        programs.append(scn)

    def export(scn, mod, args):
        return torch.export.export(mod, args, strict=False, dynamic_shapes=scn.dynamic_shapes())

    def saveload(scn, mod, args):
        buf = io.BytesIO()
        torch.export.save(export(scn, mod, args), buf)
        buf.seek(0)
        return torch.export.load(buf).module()

    def aoti(scn, mod, args):
        with tempfile.TemporaryDirectory() as tmp:
            path = torch._inductor.aoti_compile_and_package(export(scn, mod, args),
                                                            package_path=os.path.join(tmp, "p.pt2"))
            return torch._inductor.aoti_load_package(path)

    def compile_with(backend):
        def prepare(scn, mod, args):
            torch._dynamo.reset()
            return torch.compile(mod, backend=backend, fullgraph=True)
        return prepare

    backends = [compile_with("eager"), compile_with("aot_eager"), compile_with("inductor"), aoti,
                lambda s, m, a: export(s, m, a).module(),
                lambda s, m, a: torch.export.export(m, a, strict=True).module(), saveload]
    cells = 0
    devnull = os.open(os.devnull, os.O_WRONLY)
    saved_stderr = os.dup(2)
    os.dup2(devnull, 2)  # AOTInductor's C++ runtime prints its errors straight to fd 2
    start = time.perf_counter()
    for scn in programs:
        for prepare in backends:
            cells += 1
            obj = scn.first.build()
            mod = scn.module(obj)
            try:
                runner = prepare(scn, mod, scn.args(obj, 0))
                runner(*scn.args(obj, 0))
                runner(*scn.args(scn.second.build(), 1))
            except Exception:  # noqa: BLE001 - the floor times the attempt, whatever torch does
                pass
    elapsed = time.perf_counter() - start
    os.dup2(saved_stderr, 2)
    return elapsed, cells


def main() -> None:
    sys.path.insert(0, str(ROOT))
    serial = plugin_wall()
    parallel = plugin_wall("-n", "2")
    floor, cells = floor_wall()
    print(f"coverage matrix for {CLASS}: {cells} cells")
    print(f"plugin, serial:        {serial:7.1f} s")
    print(f"plugin, -n 2:          {parallel:7.1f} s")
    print(f"torch directly (floor): {floor:6.1f} s")
    print(f"plugin serial / floor: {serial / floor:7.2f}x")
    print(f"plugin -n 2 / floor:   {parallel / floor:7.2f}x")


if __name__ == "__main__":
    main()
