"""Reproducers are checked before they are printed: a failure's script is run in a fresh interpreter, from a
directory of its own, with the run's environment, as its reader will run it.

A check builds its evidence in one long-lived process, where earlier calls may have left state behind that the
object does not carry (a library's global handle, a registry, a static variable in C++). A reproducer that runs
from a fresh interpreter and shows the same thing proves the divergence belongs to the class and its fake; one that
raises something the plugin never saw, or prints the differential script's "no disagreement reproduced", shows
that it depends on state outside the object, and the failure says so.

What counts as reproduced (the scripts print what each side did; they do not all judge themselves):

* the script ran to the end and did not print :data:`NOT_REPRODUCED` (the differential's script prints it when
  the sequence it replays agrees), or
* it stopped on an error the failure itself reports (its exception line appears in the failure's text: a fake
  that raises, a C++ call the plugin saw raise).

Anything else — another error, a crash, a time-out — is not. Used by :func:`conformance.runner.run_target` when
:attr:`conformance.core.settings.Settings.check_reproducers` is set (the plugin sets it unless
``--torchbind-check-repro=off``). Imports nothing of torch.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time

from ..core.results import Failure

__all__ = ["NOT_REPRODUCED", "ReproRun", "run_fresh", "check_reproducer", "self_judging_tail", "MAX_CHECKED",
           "TIMEOUT"]

#: What a self-judging reproducer prints when the disagreement it replays does not show.
NOT_REPRODUCED = "no disagreement reproduced"
#: Reproducers checked per item (the first failures'); each run starts an interpreter and imports torch.
MAX_CHECKED = 2
#: Seconds one reproducer may run.
TIMEOUT = 120.0


def self_judging_tail(states: bool) -> list[str]:
    """The last lines of a paired-call reproducer (:meth:`conformance.torchbind.context.ClassContext.call_repro`), which has
    run the call on real objects (``real``; with ``states``, ``real_states``: each object's flattened state
    afterwards, as a dict) and on their fakes (``fake``, ``fake_states``): they print :data:`NOT_REPRODUCED` when
    the two sides agree in what a FakeTensor carries (shape, dtype, device, strides, requires_grad) and in every
    non-tensor value and its type — stricter than the checks' comparison, so the script never calls a difference
    the check saw absent."""
    pair = "(real, real_states), (fake, fake_states)" if states else "real, fake"
    return ["", "def meta(v):", "    if isinstance(v, torch.Tensor):",
            "        return ('tensor', tuple(v.shape), v.dtype, v.device, tuple(v.stride()), v.requires_grad)",
            "    return (type(v).__name__, v)", "", "try:",
            f"    same = [pytree.tree_map(meta, side) for side in ({pair})]", "    same = same[0] == same[1]",
            "except Exception:", "    same = False", "if same:", f"    print({NOT_REPRODUCED!r})"]


@dataclasses.dataclass(frozen=True)
class ReproRun:
    """One run of a script: ``returncode`` (``None`` when it was stopped after ``timeout`` seconds), its
    ``stdout`` and ``stderr``, and the wall time in ``seconds``."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float

    @property
    def error_line(self) -> str:
        """The last non-empty line of stderr: the exception line of a traceback (``RuntimeError: not bound``)."""
        lines = [ln.strip() for ln in self.stderr.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else ""


def run_fresh(script: str, timeout: float = TIMEOUT) -> ReproRun:
    """Run ``script`` (Python source) with this interpreter in a new process whose working directory is a new
    empty directory, with this process's environment (as the run's reader would, from their shell): what the
    script imports, its load lines or that environment's ``PYTHONPATH`` must find, not the plugin's working
    directory or the ``sys.path`` entries pytest added. Never raises for what the script does; raises ``OSError``
    when no process can be started."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="torchbind-repro-") as where:
        path = os.path.join(where, "repro.py")
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(script)
        start = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, path], cwd=where, env=env, capture_output=True, text=True,
                                  errors="replace", timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return ReproRun(None, out, err, time.monotonic() - start)
        return ReproRun(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


#: Errors that say the script itself cannot run outside the plugin's process (its load lines, or example code that
#: names something only that process has), not that the divergence is gone.
_SCRIPT_ERRORS = ("SyntaxError", "ImportError", "ModuleNotFoundError", "NameError", "IndentationError")
_BROKEN = "the script itself does not run: "


def _why_not(failure: Failure, run: ReproRun, timeout: float) -> str | None:
    """Why ``run`` does not reproduce ``failure`` (one clause), or ``None`` when it does."""
    if run.returncode is None:
        return f"it did not finish within {timeout:g} s"
    if NOT_REPRODUCED in run.stdout:
        return f"it prints {NOT_REPRODUCED!r}"
    if run.returncode == 0:
        return None
    line = run.error_line
    if line.split(":", 1)[0] in _SCRIPT_ERRORS:
        return f"{_BROKEN}{line}"
    message = line.split(": ", 1)[1] if ": " in line else line
    reported = dataclasses.replace(failure, repro=None).render("", None)  # what the plugin saw, not the script
    if message and message in reported:
        return None  # it stops on the error the failure reports (a fake or a C++ call that raises)
    if run.returncode < 0:
        return f"it was killed by signal {-run.returncode}"
    return f"it raises {line or f'(exit status {run.returncode})'}"


def check_reproducer(failure: Failure, timeout: float = TIMEOUT) -> Failure:
    """``failure`` with a line saying what its reproducer did in a fresh interpreter: that it reproduces, or that
    it does not and so the divergence depends on state outside the object (with the script's own output). A
    failure without a reproducer is returned as it is."""
    if not failure.repro:
        return failure
    try:
        run = run_fresh(failure.repro, timeout)
    except OSError as exc:
        return dataclasses.replace(failure, details=(*failure.details, f"the reproducer could not be checked: "
                                                     f"no interpreter could be started ({exc})"))
    why = _why_not(failure, run, timeout)
    if why is not None and why.startswith(_BROKEN):
        return dataclasses.replace(failure, details=(
            *failure.details, f"the reproducer could not be checked: run in a fresh interpreter from an empty "
            f"directory, {why[len(_BROKEN):]} (its load lines, or example code that only the plugin's process can "
            f"run, e.g. a lambda factory: give --torchbind-load specs and @conformance.examples factories defined "
            f"at module level)"))
    if why is None:
        line = (f"reproducer checked: run in a fresh interpreter from an empty directory, it ran as shown "
                f"({run.seconds:.1f} s)")
        return dataclasses.replace(failure, details=(*failure.details, line))
    failed = run.returncode != 0 and run.error_line
    output = run.stdout.strip().splitlines()[-3:] + ([run.error_line] if failed else [])
    lines = [f"NOT REPRODUCED in a fresh interpreter: the reproducer below, run from an empty directory, does not "
             f"show this — {why}. The divergence depends on state outside the object: process-global state that "
             f"earlier calls in the plugin's process left behind (a library global, a registry, a static in C++), "
             f"so the calls that set that state up (the call sequence above, where the failure shows one) are part "
             f"of it; the reproducer alone is incomplete",
             *(f"  fresh run: {ln}" for ln in output)]
    return dataclasses.replace(failure, details=(*failure.details, *lines))
