"""``scaffold --check``: run the plugin on generated modules in a subprocess and read its verdicts from the
run's JSON report."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..core.results import Status, Verdict

__all__ = ["CHECKS", "STRUCTURAL", "RUN_CHECK", "passed", "structural", "check_module", "check_modules", "format_table",
           "absolute_spec"]

#: The checks ``--check`` runs.
CHECKS = ("fake_class", "coverage", "extra_methods", "signature", "roundtrip", "agreement", "custom_op",
          "differential")
#: The checks a generated module must pass whatever its bodies do (``--check`` exits 1 when one fails).
STRUCTURAL = frozenset({"fake_class", "coverage", "extra_methods", "signature", "roundtrip"})


#: The check name of the one verdict :func:`check_modules` gives a class when the pytest run wrote no report.
RUN_CHECK = "pytest"


def passed(verdict: Verdict) -> bool:
    """Whether ``verdict`` (a :class:`~conformance.core.results.Verdict` read from the run's JSON report) passed
    or was skipped."""
    return verdict.status in (Status.PASSED, Status.SKIPPED)


def structural(verdict: Verdict) -> bool:
    """Whether ``verdict`` is of a check every generated module must pass (:data:`STRUCTURAL`)."""
    return verdict.check in STRUCTURAL


def absolute_spec(spec: str, cwd: Path) -> str:
    """``spec`` with a file path made absolute (against ``cwd``), so it works from another directory."""
    from ..engine.loading import parse_spec

    kind, target, func = parse_spec(spec)
    if kind == "module" or Path(target).is_absolute() or not (cwd / target).exists():
        return spec
    path = str((cwd / target).resolve())
    return f"{path}:{func}" if func else path


def check_module(qualname: str, load_specs: list[str], module: Path, timeout: float = 600,
                 examples: int | None = None) -> tuple[list[Verdict], int]:
    """Run the plugin on the generated ``module`` for ``qualname`` (see :func:`check_modules`) with process
    isolation where the plugin has it (Linux), as a user's run would: a crash in C++ fails one item instead of
    the run. Returns the verdicts and the pytest run's exit status (0: every item passed or was skipped)."""
    status: list[int] = []
    isolation = "process" if sys.platform.startswith("linux") else "none"
    verdicts = check_modules([qualname], load_specs, [module], timeout=timeout, examples=examples,
                             isolation=isolation, exit_status=status).get(qualname, [])
    return verdicts, status[0] if status else 1


def check_modules(qualnames: list[str], load_specs: list[str], modules: list[Path], checks: tuple[str, ...] = CHECKS,
                  timeout: float = 600, examples: int | None = None, isolation: str = "none",
                  options: tuple[str, ...] = (), exit_status: list[int] | None = None) -> dict[str, list[Verdict]]:
    """Run ``python -m pytest --torchbind-load=<specs> --torchbind-load=<module>... --torchbind-class=<qualname>...``
    with ``checks`` (``--torchbind-isolation=isolation``; ``examples``: ``--torchbind-examples``; ``options``: more
    pytest options) in a scratch directory and return the
    verdicts per class, read from the run's JSON report (sorted by item id) as the plugin's one
    :class:`~conformance.core.results.Verdict`. Module specs are found through ``PYTHONPATH`` (the current
    directory prepended). A run that writes no report gives each class one failed :data:`RUN_CHECK` verdict
    (shown as ``error``) whose reason is the run's exit status and last output line. ``exit_status``, when given, receives the
    pytest run's exit status."""
    import json

    cwd = Path.cwd()
    specs = [absolute_spec(s, cwd) for s in load_specs] + [str(m.resolve()) for m in modules]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(cwd), *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="scaffold-check-") as scratch:
        report = Path(scratch) / "report.json"
        # Verdicts only (no reproducer is shown): the reproducers are not run again in a fresh interpreter.
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--torchbind-isolation={isolation}",
               "--torchbind-check-repro=off",
               *[f"--torchbind-load={s}" for s in specs], *[f"--torchbind-class={q}" for q in qualnames],
               f"--torchbind-checks={','.join(checks)}", f"--torchbind-report={report}",
               *([f"--torchbind-examples={examples}"] if examples else []), *options]
        proc = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
        if exit_status is not None:
            exit_status.append(proc.returncode)
        data = json.loads(report.read_text()) if report.exists() else {"classes": []}
    out = {c["qualname"]: [dataclasses.replace(Verdict.from_json(v), qualname=c["qualname"])
                           for v in c.get("verdicts", [])] for c in data["classes"]}
    if not any(out.values()):
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        out = {q: [Verdict(RUN_CHECK, q, None, Status.FAILED, reason=f"exit status {proc.returncode}: {tail[0]}")]
               for q in qualnames}
    return out


def format_table(verdicts: list[Verdict]) -> str:
    """A plain-text table, one row per item: check, target, verdict; then a count per verdict."""
    rows = [("check", "target", "verdict")] + [(v.check, v.target or "-", _label(v)) for v in verdicts]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[_label(v)] = counts.get(_label(v), 0) + 1
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)


def _label(verdict: Verdict) -> str:
    """The verdict column: the status, or ``error`` for a run that wrote no report."""
    return "error" if verdict.check == RUN_CHECK else verdict.status.value
