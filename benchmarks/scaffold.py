"""Benchmark: the scaffold's time per class, and how many generated bodies the plugin's own checks accept.

Scaffolds every class of the sample C++ library and of torch's ``_TorchScriptTesting`` namespace (when this torch
ships ``libtorchbind_test.so``) with ``python -m conformance.scaffold.batch`` (one process per library, loading
only the library: no hand-written fakes), then runs the plugin on the generated modules (``--check``'s checks,
process isolation) and prints, per class: the scaffold's wall time in seconds, the methods and op fakes it wrote,
how many got an inferred body (the scaffold keeps one only when the plugin's ``agreement`` check, ``custom_op``
for an op fake, passes on it), how many of those the plugin run on the generated module passes, and the
``differential`` check over the inferred bodies together (the scaffold's verification; the plugin's differential
on the whole module fails wherever a body still raises ``NotImplementedError``). Classes the scaffold refuses
print its one-line reason.

Run: ``python benchmarks/scaffold.py`` (after the sample extension is built). No thresholds: it only prints.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance.scaffold.check import CHECKS, check_modules  # noqa: E402

LIBRARIES = {
    f"{ROOT / 'sample_classes' / '_build.py'}:load_library":
        ["samples::*", "samples_patterns::*", "samples_broken::*", "samples_unsafe::*"],
    "torch.testing._internal.torchbind_impls:load_torchbind_test_lib": ["_TorchScriptTesting::*"],
}


def main() -> None:
    print(f"{'class':46} {'seconds':>7} {'bodies':>6} {'inferred':>8} {'agree':>5}  differential of the inferred")
    with tempfile.TemporaryDirectory() as tmp:
        for n, (load, selectors) in enumerate(LIBRARIES.items()):
            out = Path(tmp) / str(n)
            proc = subprocess.run([sys.executable, "-m", "conformance.scaffold.batch", "--load", load, "--out",
                                   str(out), *[f"--class={s}" for s in selectors]],
                                  cwd=ROOT, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{load}: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
                continue
            entries = json.loads(proc.stdout)
            made = {q: Path(e["module"]) for q, e in entries.items() if "module" in e}
            verdicts = check_modules(list(made), [load], list(made.values()), checks=CHECKS, isolation="process",
                                     options=("--torchbind-timeout=10",)) if made else {}
            for qualname, e in entries.items():
                if "error" in e:
                    print(f"{qualname:46} {e['seconds']:7.1f}  refused: {e['error'][:70]}")
                    continue
                mine = verdicts.get(qualname, [])
                text = made[qualname].read_text()
                agree = sum(1 for v in mine if v.check in ("agreement", "custom_op") and v.status == "passed"
                            and _inferred(text, v.target))
                diff = e["differential"]
                print(f"{qualname:46} {e['seconds']:7.1f} {e['bodies']:6d} {e['inferred']:8d} {agree:5d}  {diff}")


def _inferred(text: str, target: str) -> bool:
    """Whether the method or op fake ``target`` has an inferred body in the generated module ``text``."""
    for head in (f"    def {target}(", f"def fake_{target.replace('.', '_')}("):
        if head in text:
            body = text.split(head, 1)[1].split("\n    def ", 1)[0].split("\n\n\n", 1)[0]
            return "raise NotImplementedError(" not in body
    return False


if __name__ == "__main__":
    main()
