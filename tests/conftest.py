"""Fixtures for the project's tests: torch's shipped TorchBind test classes, loaded once per process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension
from _pytest.pathlib import make_numbered_dir
from _pytest.pytester import SysModulesSnapshot
from torch.testing._internal.torchbind_impls import init_torchbind_implementations

# pytester points HOME at a temporary directory; keep the C++ extension cache where torch itself puts it for this
# Python and accelerator (~/.cache/torch_extensions/py311_cpu), so subprocess runs reuse the sample library built
# once instead of rebuilding it (30-50 s each). Not the bare root: torch 2.13 and 2.14.1 (cu130) would share one
# build directory there, rebuilding each other's library, and the lock file torch 2.14 leaves in place (an flock)
# would make torch 2.13's lock (a file whose mere existence blocks) wait forever.
os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.dirname(
    torch.utils.cpp_extension._get_build_directory("torchbind_samples", verbose=False)))

# sample_classes/ is not installed (the wheel ships the plugin only): pytest runs in other directories (pytester's
# subprocesses, the console script) find it through PYTHONPATH.
REPO = Path(__file__).resolve().parent.parent
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)

TORCH_SPEC = "torch.testing._internal.torchbind_impls:init_torchbind_implementations"

#: The start of a module a test writes (for a pytester run, or a fresh interpreter) that registers Python custom
#: classes with the API the running torch has (``register_custom_class`` from 2.14, ``register_opaque_type``
#: before): ``torch``, ``oo`` (``torch._library.opaque_object``), ``Base`` (the symbolic classes' base),
#: ``register(cls, typ, **kw)`` (``typ`` in 2.13's words, ``"value"`` or ``"reference"``), the decorator ``constant``
#: and the decorator factory ``symbolic(guard_fn=None, **members)`` (each member named is ``USE_REAL``).
#: Self-contained: such a module runs where this file is not importable.
REGISTRATION_SOURCE = '''
import torch
from torch._library import opaque_object as oo
try:
    from torch._custom_class_base import CustomClassBase as Base
except ImportError:
    from torch._opaque_base import OpaqueBase as Base

def register(cls, typ, **kw):
    if hasattr(oo, "register_custom_class"):
        oo.register_custom_class(cls, typ={"value": "constant", "reference": "symbolic"}[typ], **kw)
    else:
        oo.register_opaque_type(cls, typ=typ, **kw)
    return cls

def constant(cls):
    return register(cls, "value")

def symbolic(guard_fn=None, **members):
    def decorate(cls):
        return register(cls, "reference", guard_fn=guard_fn,
                        members={k: oo.MemberType.USE_REAL for k in members})
    return decorate
'''


def _torch_testlib() -> bool:
    """Whether this torch ships ``libtorchbind_test.so`` (torch's own TorchBind test classes): the CPU wheels do;
    the default (CUDA) builds of torch 2.14.1 and 2.15.0 from the package registry do not."""
    from torch.testing._internal.common_utils import find_library_location

    try:  # torch 2.15 raises FileNotFoundError where 2.13 and 2.14 return a path that does not exist
        return Path(find_library_location("libtorchbind_test.so")).exists()
    except Exception:  # noqa: BLE001 - whatever a probe raises means "not shipped"
        return False


TORCH_TESTLIB = _torch_testlib()
#: For tests that need torch's TorchBind test classes (namespace _TorchScriptTesting).
needs_torch_testlib = pytest.mark.skipif(
    not TORCH_TESTLIB, reason=f"torch {torch.__version__} ships no libtorchbind_test.so (torch's TorchBind test "
                              "classes); the CPU wheels do")


@pytest.fixture(autouse=True)
def _torch_as_it_was():
    """Fail a test that leaves torch's process-wide defaults changed (grad mode, default dtype, threads, ...:
    :mod:`conformance.plugin.torch_globals`'s list), after putting them back: a test that changed one made every
    later test on its xdist worker run differently (a fake left registered by an in-process run turned grad mode
    off for whichever test next called it)."""
    from conformance.plugin import torch_globals

    before = torch_globals.snapshot()
    yield
    changed = torch_globals.put_back(before)
    if changed:
        pytest.fail(f"the test left torch's process-wide defaults changed (put back now): {changed}", pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def _processes_started_by_tests_keep_their_bytecode():
    """Python keeps each module's compiled bytecode, and pytest its assertion-rewritten plugin modules (this
    plugin's and hypothesis's, ~200), unless PYTHONDONTWRITEBYTECODE is set, as it is on some CI machines: there
    each pytest subprocess a test started compiled them all again (~1.3 s of CPU a run). The processes the tests
    start keep them, as on a user's machine; this process (a fixture runs after it started) and pytest-xdist's
    other workers are left as they were started. A module a test writes is a new file in a new directory; one
    written again in place between two runs is compiled again when its size or its modification time (in
    seconds) changed."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        yield


@pytest.fixture(scope="session")
def torch_test_classes():
    """Load ``libtorchbind_test.so`` and torch's four fake classes (namespace ``_TorchScriptTesting``); skips
    where this torch does not ship the library."""
    if not TORCH_TESTLIB:
        pytest.skip(needs_torch_testlib.kwargs["reason"])
    init_torchbind_implementations()
    return "_TorchScriptTesting"


@pytest.fixture
def pytester(pytester, fork_server):
    """pytester, except that modules imported while a test runs are kept, unless they come from the test's own
    temporary directory. pytester drops every module a test or an in-process run imported; torch registers
    operators and libraries when its modules are imported (``torch._inductor.test_operators`` defines a
    TORCH_LIBRARY), so importing one a second time in the same process fails. (pytester's own snapshot keeps
    only zope and readline modules; its two snapshot points are private, hence the name-mangled attributes.)
    A subprocess run of the gate checks no reproducer unless the test asks (each checked failure starts an
    interpreter that imports torch)."""
    tmp = str(pytester.path)

    def snapshot() -> SysModulesSnapshot:
        return SysModulesSnapshot(preserve=lambda name: not str(getattr(sys.modules.get(name), "__file__", None)
                                                                or "").startswith(tmp))

    pytester._sys_modules_snapshot = snapshot()
    pytester._Pytester__take_sys_modules_snapshot = snapshot
    subprocess_run = pytester.runpytest_subprocess

    def repro_off(args) -> tuple[str, ...]:
        """``--torchbind-check-repro=off`` for a run of the gate whose ``args`` do not ask for reproducers (as
        :func:`run_inprocess` does): each checked failure starts an interpreter that imports torch."""
        gate = any(str(a).startswith("--torchbind-") for a in args)
        asked = any(str(a).startswith("--torchbind-check-repro") for a in args)
        return ("--torchbind-check-repro=off",) if gate and not asked else ()

    def runpytest_subprocess(*args, **kwargs):
        """As pytester's, with reproducers unchecked in a run of the gate unless the test asks (:func:`repro_off`)."""
        return subprocess_run(*args, *repro_off(args), **kwargs)

    def runpytest_subprocesses(*runs, timeout: float = 1200):
        """Several runs of :func:`runpytest_subprocess` at once, one subprocess each (its own ``--basetemp`` and
        output files), given as argument lists; their ``RunResult``s in the order given. For runs that spend
        much of their time waiting out a hang, so the waits overlap the other runs' work."""
        from _pytest.pytester import RunResult

        started = []
        for i, args in enumerate(runs):
            base = pytester.path / f"runpytest-concurrent-{i}"
            cmd = [sys.executable, "-mpytest", f"--basetemp={base}", *map(str, args), *repro_off(args)]
            out, err = (open(pytester.path / f"{name}-{i}", "w+", encoding="utf8") for name in ("stdout", "stderr"))
            started.append((pytester.popen(cmd, stdin=pytester.CLOSE_STDIN, stdout=out, stderr=err), out, err,
                            time.monotonic()))
        results = []
        try:
            for proc, out, err, start in started:
                ret = proc.wait(timeout=timeout)
                lines = []
                for handle in (out, err):
                    handle.seek(0)
                    lines.append(handle.read().splitlines())
                results.append(RunResult(ret, lines[0], lines[1], time.monotonic() - start))
        finally:  # a run past its timeout (or any error here) leaves no process behind
            for proc, out, err, _ in started:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                out.close()
                err.close()
        return results

    def runpytest_forked(*args, timeout: float | None = None):
        """As :func:`runpytest_subprocess`, in a process forked from an interpreter that has imported torch
        (:mod:`forked_pytest`, which says what differs from a fresh interpreter): for tests that run the gate
        many times and are about something other than start-up, or than what must hold across fresh interpreters
        (the runs share one hash seed)."""
        from _pytest.pytester import RunResult

        base = make_numbered_dir(root=pytester.path, prefix="runpytest-", mode=0o700)
        args = (f"--basetemp={base}", *map(str, args), *repro_off(args))
        for plugin in pytester.plugins:  # in pytester's order (each put first)
            if not isinstance(plugin, str):
                raise ValueError(f"a forked run takes plugins by name only, as a subprocess run: {plugin}")
            args = ("-p", plugin, *args)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
        out, err = pytester.path / "stdout", pytester.path / "stderr"
        print("running (forked): python -mpytest", *args, "\n     in:", Path.cwd())
        start = time.monotonic()
        try:
            ret = fork_server.run(list(args), Path.cwd(), env, out, err, timeout)
        except subprocess.TimeoutExpired:
            raise pytester.TimeoutExpired(f"{timeout} second timeout expired running pytest {args}") from None
        lines = [path.read_text(encoding="utf8").splitlines() for path in (out, err)]
        print("\n".join(lines[0]))  # shown with a failing test's captured output, as pytester's own runs
        print("\n".join(lines[1]), file=sys.stderr)
        return RunResult(ret, lines[0], lines[1], time.monotonic() - start)

    pytester.runpytest_subprocess = runpytest_subprocess
    pytester.runpytest_subprocesses = runpytest_subprocesses
    pytester.runpytest_forked = runpytest_forked
    return pytester


@pytest.fixture(scope="session")
def fork_server(tmp_path_factory):
    """The :class:`forked_pytest.ForkServer` of this test process (an xdist worker has its own); it starts on the
    first run asked of it."""
    from forked_pytest import ForkServer

    server = ForkServer(tmp_path_factory.mktemp("fork-server") / "stderr")
    yield server
    server.close()


def run_inprocess(pytester, *args, **kwargs):
    """Run pytest with the plugin in this process (``pytester.runpytest_inprocess``): no interpreter start-up,
    no second torch import. Checks run without process isolation here: forking a worker from a test process
    that has already used torch's thread pools can hang it. Tests about isolation, xdist or the console script
    use ``runpytest_subprocess``. ``kwargs`` go to ``runpytest_inprocess`` (e.g. ``no_reraise_ctrlc=True`` for a
    run that is interrupted on purpose).

    pytester drops the modules a run imported; torch's test-class module must outlive the runs (importing it again
    would register its fakes twice), so this module imports it before any run."""
    if TORCH_TESTLIB:
        init_torchbind_implementations()
    # Reproducers are checked (an interpreter per failure) only where a test asks for it.
    asked = any(str(a).startswith("--torchbind-check-repro") for a in args)
    checked = () if asked else ("--torchbind-check-repro=off",)
    # hypothesis's pytest plugin sets --hypothesis-seed process-wide (hypothesis.core.global_force_seed) and never
    # puts it back: a run given one would seed every later search in this test process.
    import hypothesis.core

    seed = hypothesis.core.global_force_seed
    try:
        return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args, "--torchbind-isolation=none", *checked,
                                            **kwargs)
    finally:
        hypothesis.core.global_force_seed = seed


def made_once(tmp_path_factory, name: str, make):
    """What ``make(folder)`` returns (JSON data; ``folder`` a new directory for the files it writes), made once per
    test session, under xdist too: the first worker to ask makes it while holding a lock in the directory all the
    workers' temporary directories share, and keeps it there as JSON; a worker asking later waits for the lock and
    reads it. For a costly module fixture that several tests read, which ``-n 2`` would otherwise make again in
    each worker that runs one of them (pytest-xdist's ``--dist=loadgroup`` groups nothing with pytest 9.2)."""
    import fcntl
    import json

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # pytest-of-<user>/pytest-<n>/, above popen-gw0, popen-gw1
    done = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, a failed make included
        if done.exists():
            return json.loads(done.read_text())
        folder = shared / name
        folder.mkdir(exist_ok=True)
        value = make(folder)
        done.write_text(json.dumps(value))
        return value


def undated_report(path) -> dict:
    """A JSON matrix report without the date it was written (the one label two runs of the same suite differ
    in), for comparing the reports of two runs."""
    import json

    doc = json.loads(path.read_text())
    doc["run"].pop("date")
    return doc


def compiled_once(fn, *args, backend: str = "aot_eager"):
    """Plain torch: ``torch.compile(fn, backend=backend, fullgraph=True)(*args)`` between two
    ``torch._dynamo.reset()`` calls, so that no earlier compile's cache serves it and none is left behind."""
    torch._dynamo.reset()
    try:
        return torch.compile(fn, backend=backend, fullgraph=True)(*args)
    finally:
        torch._dynamo.reset()


def engine_of(register=None, settings=None):
    """An engine with a registry of its own holding exactly what ``register()`` registers with
    ``@conformance.examples`` / ``conformance.strategy`` (nothing when ``None``); the process's registry is left as
    it was. ``settings``: the engine's :class:`~conformance.core.settings.Settings`."""
    from conformance.core.registry import REGISTRY
    from conformance.runner import Engine

    with REGISTRY.scratch():
        if register is not None:
            register()
        registry = REGISTRY.copy()
    return Engine(settings, registry=registry)


# ----- the `process` marker -----------------------------------------------------------------------------------
# `pytest -m "not process and not budget"` is the quick in-process core. With TORCHBIND_AUDIT_PROCESSES=1 every test that is not marked
# `process` fails when its call (fixtures excluded) forks or starts a process: how the markers were found, and how
# to check them after a change. (Off by default: torch starts some helpers once per process, e.g. inductor's
# compile workers, so whether a test starts one can depend on what ran before it in that process.)
_AUDIT = os.environ.get("TORCHBIND_AUDIT_PROCESSES") == "1"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not _AUDIT or item.get_closest_marker("process"):
        return (yield)
    import multiprocessing.util
    import subprocess

    started: list[str] = []
    fork, execute, spawnv = os.fork, subprocess.Popen._execute_child, multiprocessing.util.spawnv_passfds

    def watched_fork():
        started.append("os.fork()")
        return fork()

    def watched_execute(self, args, *rest, **kwargs):
        started.append(f"subprocess {args if isinstance(args, str) else ' '.join(map(str, args))[:120]}")
        return execute(self, args, *rest, **kwargs)

    def watched_spawnv(path, args, passfds):
        started.append(f"multiprocessing spawn {path}")
        return spawnv(path, args, passfds)

    os.fork, subprocess.Popen._execute_child, multiprocessing.util.spawnv_passfds = \
        watched_fork, watched_execute, watched_spawnv
    try:
        result = yield
    finally:
        os.fork, subprocess.Popen._execute_child, multiprocessing.util.spawnv_passfds = fork, execute, spawnv
    if started:
        raise AssertionError(f"started a process without the `process` marker: {started[0]} "
                             f"({len(started)} in all); mark the test @pytest.mark.process")
    return result
