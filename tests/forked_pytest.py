"""pytest runs in processes forked from an interpreter that has already imported torch: a run of the gate as
``python -m pytest`` in a fresh interpreter, less the ~2.5 s of CPU every such run spends importing torch and
``torch._dynamo`` (on 2 cores, about half of a small run of the gate).

Run as a script, this module is the server: it imports torch and ``torch._dynamo`` (nothing that is a pytest
plugin, so pytest's assertion rewriting sees every plugin module as in a fresh interpreter), then reads requests,
one JSON line each, from its standard input; for each it forks a child that becomes ``python -m pytest`` with the
request's arguments, working directory, environment, ``sys.path`` and output files, and writes the child's pid and
then its exit status (as :attr:`subprocess.Popen.returncode`: ``-N`` for signal N) to its standard output.

What differs from a fresh interpreter, which is why a test opts in (``pytester.runpytest_forked``) rather than
every run going through here: torch and the modules it imports are in ``sys.modules`` before pytest starts (a test
of what the plugin imports, or when, needs a fresh interpreter), environment variables torch reads while it is
imported are the server's (set when it started), the hash seed is the server's, and ``sys.orig_argv`` is the
server's command. The plugin forks its own isolation workers from a pytest process that has imported torch in the
same way (``conformance.process``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["ForkServer"]


def _serve() -> dict:
    """The server's loop. Returns, in a forked child only, the request that child is to run."""
    import importlib

    for name in ("torch", "torch._dynamo"):  # what every run of the gate imports, ~2.5 s of CPU
        importlib.import_module(name)

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


class ForkServer:
    """A server process (this module run as a script) and the runs asked of it, one at a time.

    :meth:`run` has the meaning of pytester's ``runpytest_subprocess``; the server starts on the first run and ends
    with :meth:`close`. Raises :class:`RuntimeError` when the server is gone (its stderr is in the message)."""

    def __init__(self, log: Path):
        self.log = log
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # each run sets its own sys.path
        with open(self.log, "w") as err:
            return subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=err, bufsize=0, env=env, cwd=os.path.dirname(__file__))

    def run(self, args: list[str], cwd: Path, env: dict[str, str], stdout: Path, stderr: Path,
            timeout: float | None) -> int:
        """Run ``python -m pytest *args`` in ``cwd`` with ``env`` in a forked child, its output in the files
        ``stdout`` and ``stderr`` (created empty); its exit code, ``-N`` when signal N ended it. Raises
        :class:`subprocess.TimeoutExpired` after ``timeout`` seconds, the child killed."""
        import select

        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        for path in (stdout, stderr):
            path.write_text("")
        request = {"args": list(map(str, args)), "cwd": str(cwd), "env": env, "stdout": str(stdout),
                   "stderr": str(stderr)}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        out = self.proc.stdout  # unbuffered: select() sees every line not yet read
        pid = out.readline()
        if not pid:
            raise RuntimeError(f"the fork server ended: {self.log.read_text()[-3000:]}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is not None and not select.select([out], [], [], max(0.0, deadline - time.monotonic()))[0]:
            if time.monotonic() >= deadline:
                os.kill(int(pid), 9)
                out.readline()
                raise subprocess.TimeoutExpired(args, timeout)
        return int(out.readline())

    def close(self) -> None:
        """End the server (it exits when its standard input closes)."""
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
            self.proc = None


if __name__ == "__main__":
    _become(_serve())
    import runpy

    runpy.run_module("pytest", run_name="__main__", alter_sys=True)
