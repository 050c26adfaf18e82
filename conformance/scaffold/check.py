"""``scaffold --check``: run the plugin on a generated module in a subprocess and read its verdicts."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["CHECKS", "STRUCTURAL", "Verdict", "check_module", "format_table", "absolute_spec"]

#: The checks ``--check`` runs.
CHECKS = ("fake_class", "coverage", "extra_methods", "signature", "roundtrip", "agreement", "differential")
#: The checks a generated module must pass whatever its bodies do (``--check`` exits 1 when one fails).
STRUCTURAL = frozenset({"fake_class", "coverage", "extra_methods", "signature", "roundtrip"})

_LINE = re.compile(r"^(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) (\S+)(?: - (.*))?$")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One plugin item: ``check`` (``signature``), ``target`` (``push``, or ``""``), ``status`` (``passed``,
    ``failed``, ``skipped``, ``error``) and the first line of its message."""

    check: str
    target: str
    status: str
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status in ("passed", "skipped")

    @property
    def structural(self) -> bool:
        return self.check in STRUCTURAL


def absolute_spec(spec: str, cwd: Path) -> str:
    """``spec`` with a file path made absolute (against ``cwd``), so it works from another directory."""
    from ..loading import _parse

    kind, target, func = _parse(spec)
    if kind == "module" or Path(target).is_absolute() or not (cwd / target).exists():
        return spec
    path = str((cwd / target).resolve())
    return f"{path}:{func}" if func else path


def check_module(qualname: str, load_specs: list[str], module: Path, timeout: float = 600) -> list[Verdict]:
    """Run ``python -m pytest --torchbind-load=<specs> --torchbind-load=<module> --torchbind-class=<qualname>``
    with :data:`CHECKS` (no isolation) in a scratch directory and return one :class:`Verdict` per item, in
    order. Module specs are found through ``PYTHONPATH`` (the current directory prepended)."""
    cwd = Path.cwd()
    specs = [absolute_spec(s, cwd) for s in load_specs] + [str(module.resolve())]
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "--torchbind-isolation=none",
           *[f"--torchbind-load={s}" for s in specs], f"--torchbind-class={qualname}",
           f"--torchbind-checks={','.join(CHECKS)}"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(cwd), *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="scaffold-check-") as scratch:
        proc = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
    verdicts = parse_summary(proc.stdout)
    if not verdicts:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        verdicts = [Verdict("pytest", "", "error", f"exit status {proc.returncode}: {tail[0]}")]
    return verdicts


def parse_summary(stdout: str) -> list[Verdict]:
    """The verdicts in pytest's ``-rA`` short summary (``PASSED torchbind[ns.Cls]::signature[push]``)."""
    out = []
    for line in stdout.splitlines():
        m = _LINE.match(line.strip())
        if not m or "::" not in m.group(2):
            continue
        item = m.group(2).split("::", 1)[1]
        check, _, target = item.partition("[")
        out.append(Verdict(check, target.rstrip("]"), m.group(1).lower(), (m.group(3) or "").strip()))
    return out


def format_table(verdicts: list[Verdict]) -> str:
    """A plain-text table, one row per item: check, target, verdict; then a count per verdict."""
    rows = [("check", "target", "verdict")] + [(v.check, v.target or "-", v.status) for v in verdicts]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.status] = counts.get(v.status, 0) + 1
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)
