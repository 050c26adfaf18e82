"""pytest runs in processes forked from an interpreter that has already imported torch: a run of the gate as
``python -m pytest`` in a fresh interpreter, less the ~1.3 s of CPU every such run spends importing torch.

Run as a script, this module is the server: it imports torch (nothing that is a pytest plugin, so pytest's
assertion rewriting sees every plugin module as in a fresh interpreter), then reads requests, one JSON line each,
from its standard input; for each it forks a child that becomes ``python -m pytest`` with the request's arguments,
working directory, environment, ``sys.path`` and output files, and writes the child's pid and then its exit status
(as :attr:`subprocess.Popen.returncode`: ``-N`` for signal N) to its standard output.

What differs from a fresh interpreter, which is why a test opts in (``pytester.runpytest_forked``) rather than
every run going through here: torch and the modules it imports are in ``sys.modules`` before pytest starts (a test
of what the plugin imports, or when, needs a fresh interpreter); what Python and torch read from the environment
as they start is the server's (a run that changes it is refused: :data:`STARTUP_PREFIXES`); every run has the
server's hash seed (a test of what must hold across fresh interpreters needs them) and numpy's random state; and
``sys.orig_argv`` is the server's command. The plugin forks its own isolation workers from a pytest process that
has imported torch in the same way (``conformance.process``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["ForkServer", "startup_differences"]


def _serve() -> dict:
    """The server's loop. Returns, in a forked child only, the request that child is to run."""
    # torch alone: every run of the gate imports it before the reuse key takes the run's extension modules
    # (conformance.plugin.reuse.KeyMaker.snapshot); torch._dynamo, which a run imports later, would add its own
    # to that list, and the keys of forked runs would not be those of fresh ones.
    import importlib

    importlib.import_module("torch")

    requests = os.fdopen(0, "rb", buffering=0, closefd=False)
    while True:
        line = requests.readline()
        if not line:
            os._exit(0)
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return request
        os.write(1, f"{pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        os.write(1, f"{os.waitstatus_to_exitcode(status)}\n".encode())


def _become(request: dict) -> None:
    """In the forked child: the process state of ``python -m pytest ARGS`` started in ``request["cwd"]`` with
    ``request["env"]`` (its ``PYTHONPATH`` on ``sys.path`` as Python puts it there), stdin from /dev/null and
    stdout/stderr to the request's files."""
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_APPEND),
                            (2, request["stderr"], os.O_WRONLY | os.O_APPEND)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # PYTHONPATH's entries come before the server's own, made absolute and without duplicates as site.py leaves
    # them (site.removeduppaths); then ``-m`` puts the working directory first.
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    path: list[str] = []
    for entry in (os.path.abspath(p) for p in [*extra, *sys.path[1:]]):
        if entry not in path:
            path.append(entry)
    sys.path[:] = [request["cwd"], *path]
    sys.dont_write_bytecode = bool(request["env"].get("PYTHONDONTWRITEBYTECODE"))
    sys.argv = ["pytest", *request["args"]]


#: Environment variables that Python reads as it starts, and torch as it is imported (its ``TORCH*`` settings;
#: OpenMP and MKL read theirs when torch loads them), or may: a forked run has the server's values, so a run whose
#: environment differs in one of them is refused (use ``runpytest_subprocess``). ``PYTHONPATH`` and
#: ``PYTHONDONTWRITEBYTECODE`` are set in the child.
STARTUP_PREFIXES = ("PYTHON", "TORCH", "PYTORCH", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "CUDA", "LD_")
SET_IN_CHILD = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")


def startup_differences(server_env: dict[str, str], env: dict[str, str]) -> list[str]:
    """The variables of :data:`STARTUP_PREFIXES` (less :data:`SET_IN_CHILD`) whose value in ``env`` is not the
    server's, sorted."""
    names = {k for k in (*server_env, *env) if k.startswith(STARTUP_PREFIXES) and k not in SET_IN_CHILD}
    return sorted(k for k in names if server_env.get(k) != env.get(k))


class ForkServer:
    """A server process (this module run as a script) and the runs asked of it, one at a time.

    :meth:`run` has the meaning of pytester's ``runpytest_subprocess``; the server starts on the first run, with
    the environment this object was made in, and ends with :meth:`close`. Raises :class:`RuntimeError` when the
    server is gone (its stderr is in the message) or a run's environment differs from the server's in what a
    process reads as it starts (:func:`startup_differences`). A run that raises (a timeout, an interrupt) ends the
    server with its child: the next run starts another."""

    def __init__(self, log: Path):
        self.log = log
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # each run sets its own sys.path
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        with open(self.log, "a") as err:
            return subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=err, bufsize=0, env=self.env, cwd=os.path.dirname(__file__))

    def run(self, args: list[str], cwd: Path, env: dict[str, str], stdout: Path, stderr: Path,
            timeout: float | None) -> int:
        """Run ``python -m pytest *args`` in ``cwd`` with ``env`` in a forked child, its output in the files
        ``stdout`` and ``stderr`` (created empty); its exit code, ``-N`` when signal N ended it. Raises
        :class:`subprocess.TimeoutExpired` after ``timeout`` seconds, the child killed."""
        differ = startup_differences(self.env, env)
        if differ:
            raise RuntimeError(f"a forked run cannot change {', '.join(differ)}, which are read as a process "
                               "starts: use runpytest_subprocess")
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            self.proc = self._start()
        for path in (stdout, stderr):
            path.write_text("")
        request = {"args": list(map(str, args)), "cwd": str(cwd), "env": env, "stdout": str(stdout),
                   "stderr": str(stderr)}
        pid = 0
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            pid = int(self._line())
            self._wait(timeout, args)
            return int(self._line())
        except BaseException:  # the server's next line would answer this run: end both, start afresh next time
            if pid > 0:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            self._end()
            raise

    def _line(self) -> bytes:
        """The server's next line; :class:`RuntimeError` with its log when it ended."""
        line = self.proc.stdout.readline()  # unbuffered: select() sees every line not yet read
        if not line:
            raise RuntimeError(f"the fork server ended: {self.log.read_text()[-3000:]}")
        return line

    def _wait(self, timeout: float | None, args: list[str]) -> None:
        """Until the child ended (its status line is there), at most ``timeout`` seconds."""
        import select

        if timeout is not None and not select.select([self.proc.stdout], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(args, timeout)

    def _end(self) -> None:
        """Kill the server and close its pipes."""
        if self.proc is not None:
            self.proc.kill()
            self.close()

    def close(self) -> None:
        """End the server (it exits when its standard input closes) and close its pipes."""
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
            self.proc.stdout.close()
            self.proc = None


if __name__ == "__main__":
    _become(_serve())
    import runpy

    runpy.run_module("pytest", run_name="__main__", alter_sys=True)
