"""Reproducers are checked before they are printed: a failure's script is run in a fresh interpreter, from a
directory of its own, with the run's environment, as its reader will run it.

A check builds its evidence in one long-lived process, where earlier calls may have left state behind that the
object does not carry (a library's global handle, a registry, a static variable in C++). A reproducer that runs
from a fresh interpreter and shows the same thing proves the divergence belongs to the class and its fake; one that
runs and prints the differential script's "no disagreement reproduced" shows that it depends on state outside the
object, and the failure says so. One that raises an error the failure does not show is no evidence of anything:
the failure says what it raised (the whole error, not the last line of stderr) and that the script may be at fault.

What counts as reproduced (the scripts print what each side did; they do not all judge themselves):

* the script printed a line starting with :data:`REPRODUCED`: it made the failure's comparison itself and found the
  difference (:func:`judging_lines`). What it does after that — a compile that then raises, as a fake of the wrong
  shape makes inductor do — follows from the difference, and the failure shows it as what followed, or
* the script ran to the end and did not print :data:`NOT_REPRODUCED` (the differential's script prints it when
  the sequence it replays agrees), or
* it stopped on an error the failure itself reports (its exception's type and the first line of its message appear
  together in the failure's text: a fake that raises, a C++ call the plugin saw raise, a compile that raised).

Anything else — another error before any :data:`REPRODUCED` line, a crash, a time-out — is not. Used by
:func:`conformance.runner.run_target` when :attr:`conformance.core.settings.Settings.check_reproducers` is set (the
plugin sets it unless ``--torchbind-check-repro=off``). Imports nothing of torch.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time

from ..core.results import Failure

__all__ = ["NOT_REPRODUCED", "REPRODUCED", "judging_lines", "ReproRun", "run_fresh", "check_reproducer",
           "self_judging_tail", "MAX_CHECKED", "TIMEOUT", "MESSAGE_LINES", "message_lines"]

#: What a self-judging reproducer prints when the disagreement it replays does not show.
NOT_REPRODUCED = "no disagreement reproduced"
#: How a line starts with which a reproducer says it made the failure's comparison and found the difference (then
#: the difference): the script's own result, whatever a later step of it raises.
REPRODUCED = "REPRODUCED:"
#: Reproducers checked per item (the first failures'); each run starts an interpreter and imports torch.
MAX_CHECKED = 2
#: Seconds one reproducer may run.
TIMEOUT = 120.0
#: Lines of an error's message a failure shows (a dynamo error: its explanation, hint, the user's code, advice).
MESSAGE_LINES = 16


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


def judging_lines(found: str) -> list[str]:
    """The lines with which a reproducer gives its own verdict, once it has compared the two sides and before any
    step that can raise (a compile planned from a wrong fake): ``found`` is the name of the list of differences it
    found (strings); the lines print :data:`REPRODUCED` and them when there are any, else :data:`NOT_REPRODUCED`."""
    return [f"if {found}:", f"    print({REPRODUCED!r}, '; '.join({found}))", "else:", f"    print({NOT_REPRODUCED!r})"]


@dataclasses.dataclass(frozen=True)
class ReproRun:
    """One run of a script: ``returncode`` (``None`` when it was stopped after ``timeout`` seconds), its
    ``stdout`` and ``stderr``, and the wall time in ``seconds``."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float

    @property
    def exception(self) -> tuple[str, list[str]] | None:
        """The exception that stopped the script, read from the last traceback on stderr: ``(type, message)``,
        the type as Python prints it (``torch._dynamo.exc.InternalTorchDynamoError``) and every line of its message
        (a dynamo error's explanation, hint and the user's code that raised among them); ``None`` when stderr
        holds no traceback (a crash, a time-out)."""
        lines = self.stderr.rstrip().splitlines()
        starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last):")]
        if not starts:
            return None
        rest = lines[starts[-1] + 1:]
        for j, ln in enumerate(rest):  # frames and their code are indented; the exception's line is not
            if ln.strip() and not ln[0].isspace():
                kind, _, first = ln.partition(": ")
                return kind.strip(), [first.rstrip(), *(m.rstrip() for m in rest[j + 1:])]
        return None

    @property
    def shown(self) -> str | None:
        """What the script said it found when it printed a :data:`REPRODUCED` line (the rest of its first such
        line, empty when it names nothing), or ``None`` when it printed none."""
        for ln in self.stdout.splitlines():
            if ln.startswith(REPRODUCED):
                return ln[len(REPRODUCED):].strip()
        return None

    @property
    def error_line(self) -> str:
        """The exception's line (``RuntimeError: not bound``: its type and the first line of its message, not
        the last line of stderr, which for a dynamo error is torch's advice to set TORCHDYNAMO_VERBOSE), or the
        last non-empty line of stderr when it holds no traceback."""
        raised = self.exception
        if raised is not None:
            return f"{raised[0]}: {raised[1][0]}" if raised[1][0] else raised[0]
        lines = [ln.strip() for ln in self.stderr.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else ""

    def error_lines(self, limit: int = MESSAGE_LINES) -> list[str]:
        """The whole error the script stopped on, one line per item: :attr:`error_line`, then the rest of its
        message (non-empty lines, at most ``limit`` in all)."""
        raised = self.exception
        if raised is None:
            return [self.error_line] if self.error_line else []
        return message_lines(self.error_line, raised[1][1:], limit)


def message_lines(head: str, rest: list[str], limit: int = MESSAGE_LINES) -> list[str]:
    """``head`` (an error's ``Type: first line``) and the non-empty lines of ``rest`` (the rest of its message,
    each indented by two spaces), at most ``limit`` lines in all, the last saying how many were left out: the
    whole of a dynamo error (its explanation, hint and the user's line) for a failure's details."""
    body = [f"  {ln.rstrip()}" for ln in rest if ln.strip()]
    if len(body) >= limit:
        body = body[: limit - 2] + [f"  ... ({len(body) - (limit - 2)} more lines)"]
    return [head, *body]


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


_SAME = "same error: "
_OTHER = "other error: "


def _reports(failure: Failure, kind: str, message: list[str]) -> bool:
    """Whether ``failure`` reports the exception a script stopped on: its type (the class name, without the module
    Python prints) and the first line of its message, together as :func:`conformance.core.results.exception_line`
    writes them (``RuntimeError: not bound``), the message whole: up to the end of the failure's line, the
    punctuation that closes a clause (``)``, ``;``, `` (``, `` [``), or the ``...`` of a message the failure shows
    cut. The same message under another type, a shorter or longer one (``index`` is not ``index 3 is out of
    bounds``), is another error."""
    first = message[0].strip() if message else ""
    head = f"{kind.rsplit('.', 1)[-1]}: "
    reported = dataclasses.replace(failure, repro=None).render("", None)  # what the plugin saw, not the script
    for line in reported.splitlines():
        at = line.find(head)
        while at >= 0:
            shown = line[at + len(head):].rstrip()
            if shown == first or shown.startswith(first) and shown[len(first):].startswith((")", ";", " (", " [")) \
                    or shown.endswith("...") and len(shown) > 3 and first.startswith(shown[:-3].rstrip()):
                return True
            at = line.find(head, at + 1)
    return False


def _why_not(failure: Failure, run: ReproRun, timeout: float) -> str | None:
    """Why ``run`` does not reproduce ``failure`` (one clause; prefixed with :data:`_BROKEN` when the script cannot
    run at all, :data:`_OTHER` when it raised an error the failure does not show), :data:`_SAME` and the error when
    it stopped on the error the failure reports, or ``None`` when it ran to the end."""
    if run.returncode is None:
        return f"it did not finish within {timeout:g} s"
    if NOT_REPRODUCED in run.stdout:
        return f"it prints {NOT_REPRODUCED!r}"
    if run.returncode == 0:
        return None
    line = run.error_line
    if line.split(":", 1)[0] in _SCRIPT_ERRORS:
        return f"{_BROKEN}{line}"
    if run.exception is not None and _reports(failure, *run.exception):
        return f"{_SAME}{line}"  # it stops on the error the failure reports (a fake, a compile, a C++ call)
    if run.returncode < 0:
        return f"it was killed by signal {-run.returncode}"
    if run.exception is not None:
        return f"{_OTHER}{line}"
    return f"it raises {line or f'(exit status {run.returncode})'}"


def _shown_lines(run: ReproRun, timeout: float) -> list[str]:
    """The detail lines of a run that printed a :data:`REPRODUCED` line: it reproduces the failure, and what the
    script did after that (an error a later step raised, shown whole; a time-out) is what followed from it."""
    line = (f"reproducer checked: run in a fresh interpreter from an empty directory, it made the comparison itself "
            f"and printed the difference ({f'{REPRODUCED} {run.shown}'.strip()}) ({run.seconds:.1f} s)")
    if run.returncode == 0:
        return [line]
    if run.returncode is None:
        return [f"{line}; then, what followed from that difference: it did not finish within {timeout:g} s"]
    raised = run.error_lines() or [f"(exit status {run.returncode})"]
    return [f"{line}; then, what followed from that difference: a later step of the script raised {raised[0]}",
            *(f"  it raised: {ln.strip()}" for ln in raised[1:])]


def check_reproducer(failure: Failure, timeout: float = TIMEOUT, run: ReproRun | None = None) -> Failure:
    """``failure`` with a line saying what its reproducer did in a fresh interpreter: that it reproduces (it printed
    a :data:`REPRODUCED` line, whatever a later step then raised, which is shown as what followed; it ran to the
    end; or it stopped on the error the failure shows: same type and message), that it raised another error
    (then the script is no evidence of the failure, and the whole error it raised is shown), or that it ran and
    did not show the divergence, which then depends on state outside the object (with the script's own output). A
    failure without a reproducer is returned as it is. ``run``: the script's :func:`run_fresh` result where the
    caller has it already (it is judged, not run again)."""
    if not failure.repro:
        return failure
    try:
        run = run if run is not None else run_fresh(failure.repro, timeout)
    except OSError as exc:
        return dataclasses.replace(failure, details=(*failure.details, f"the reproducer could not be checked: "
                                                     f"no interpreter could be started ({exc})"))
    if run.shown is not None:
        return dataclasses.replace(failure, details=(*failure.details, *_shown_lines(run, timeout)))
    why = _why_not(failure, run, timeout)
    if why is not None and why.startswith(_BROKEN):
        return dataclasses.replace(failure, details=(
            *failure.details, f"the reproducer could not be checked: run in a fresh interpreter from an empty "
            f"directory, {why[len(_BROKEN):]} (its load lines, or example code that only the plugin's process can "
            f"run, e.g. a lambda factory: give --torchbind-load specs and @conformance.examples factories defined "
            f"at module level)"))
    if why is None or why.startswith(_SAME):
        how = "it ran as shown" if why is None else f"it raised the same error ({why[len(_SAME):]})"
        line = f"reproducer checked: run in a fresh interpreter from an empty directory, {how} ({run.seconds:.1f} s)"
        return dataclasses.replace(failure, details=(*failure.details, line))
    output = run.stdout.strip().splitlines()[-3:]
    if why.startswith(_OTHER):
        lines = [f"NOT REPRODUCED in a fresh interpreter: the reproducer below, run from an empty directory, does not "
                 f"show this — it raises {why[len(_OTHER):]}; that is not the error this failure shows, so the script "
                 f"is no evidence of it (the failure rests on the plugin's own run, above): either the script does not "
                 f"rebuild what the plugin ran (a fault of the plugin's reproducer: please report it with this "
                 f"output) or what ran depends on process-global state that earlier calls in the plugin's process "
                 f"left behind",
                 *(f"  fresh run: {ln}" for ln in output),
                 *(f"  fresh run raised: {ln}" for ln in run.error_lines())]
        return dataclasses.replace(failure, details=(*failure.details, *lines))
    failed = run.returncode != 0 and run.error_line
    lines = [f"NOT REPRODUCED in a fresh interpreter: the reproducer below, run from an empty directory, does not "
             f"show this — {why}. The divergence depends on state outside the object: process-global state that "
             f"earlier calls in the plugin's process left behind (a library global, a registry, a static in C++), "
             f"so the calls that set that state up (the call sequence above, where the failure shows one) are part "
             f"of it; the reproducer alone is incomplete",
             *(f"  fresh run: {ln}" for ln in output + (run.error_lines() if failed else []))]
    return dataclasses.replace(failure, details=(*failure.details, *lines))
