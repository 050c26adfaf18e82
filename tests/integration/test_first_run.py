"""The first run of the README's job: ``--torchbind-load=sample_classes`` builds only the sample C++ sources of the
namespaces the run selects (not all ten), and says so on stderr before the build starts and when it ends -- only
when a build really happens."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from conformance.engine import loading

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="builds C++ with the system compiler")


def _run(path, extensions, *args):
    """pytest in a fresh interpreter, as a user starts it (no test of ours running: no PYTEST_CURRENT_TEST), with
    the C++ extension cache in ``extensions``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["TORCH_EXTENSIONS_DIR"] = str(extensions)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "--torchbind-load=sample_classes", *args], cwd=path, env=env, capture_output=True,
                          text=True, timeout=1200)


@pytest.mark.process
def test_a_run_builds_only_the_selected_namespaces_and_says_so_once(tmp_path):
    extensions = tmp_path / "extensions"  # cold: nothing built yet
    extensions.mkdir()
    first = _run(tmp_path, extensions, "--torchbind-class=samples::Counter", "--torchbind-checks=examples")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    import torch

    assert re.search(r"^torchbind-conformance: building the sample C\+\+ classes \(samples\.cpp\) with torch "
                     rf"{re.escape(torch.__version__)}; about 30-50 s the first time, cached in "
                     rf"{re.escape(str(extensions))}\ntorchbind-conformance: built the sample C\+\+ classes in \d+ s$",
                     first.stderr, re.M), first.stderr
    built = sorted(p.name for p in extensions.iterdir())
    assert len(built) == 1 and built[0].endswith("_samples"), built  # not the other nine namespaces
    assert "1 passed" in first.stdout
    # The flags a precompiled torch header is built with (a cold build of four or more namespaces) are the ones
    # torch gave this source: GCC would otherwise skip the header, and every build would pay for it in vain.
    from sample_classes import _build

    ninja = (extensions / built[0] / "build.ninja").read_text()
    cflags = shlex.split(re.search(r"^cflags = (.*)$", ninja, re.M).group(1))
    assert [f for f in cflags if not f.startswith("-DTORCH_EXTENSION_NAME=")] == [*_build.torch_cflags(), "-O0"]
    # Cached: nothing said the second time.
    again = _run(tmp_path, extensions, "--torchbind-class=samples::Counter", "--torchbind-checks=examples")
    assert again.returncode == 0 and "torchbind-conformance: build" not in again.stderr, again.stderr


def test_load_modules_learn_the_selection_of_the_first_run_that_no_test_started(monkeypatch):
    import conformance

    assert conformance.selected_classes is loading.selected_classes  # the public name a load module imports
    assert loading.selected_classes() is None
    with loading.selecting(["samples::TensorQueue"]):
        assert loading.selected_classes() is None  # this test is running: a run it starts may be one of many
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setattr(loading, "_runs", 0)
    with loading.selecting(["samples::TensorQueue", "samples_unsafe::*"]):
        assert loading.selected_classes() == ("samples::TensorQueue", "samples_unsafe::*")
    assert loading.selected_classes() is None
    with loading.selecting(["samples::Counter"]):
        assert loading.selected_classes() is None  # a second run in this process


def test_import_sample_classes_outside_a_run_loads_every_namespace():
    import sample_classes
    from sample_classes import _build

    assert sorted(sample_classes.LIBRARY_PATHS) == _build.namespaces() and len(_build.namespaces()) == 11
    assert sample_classes.fakes_patterns.FAKE_CLASSES and sample_classes.fakes_limits.FAKE_CLASSES
    with pytest.raises(ValueError, match="no sample namespace samples_nowhere; the sample namespaces are samples, "):
        _build.load_namespaces(["samples_nowhere"])


def test_a_lock_a_killed_build_left_is_removed_and_a_fresh_or_held_one_is_kept(tmp_path, capsys):
    # torch 2.13's cpp_extension locks a build directory by creating `lock` (torch.utils.file_baton.FileBaton) and
    # waits while it exists: a build killed mid-way (SIGKILL, a CI job cut off) left every later run of the
    # samples waiting forever, silently. The samples' build removes such a lock when no process holds it.
    import fcntl

    from torch.utils.file_baton import FileBaton

    from sample_classes import _build

    lock = tmp_path / "lock"
    assert FileBaton(str(lock)).try_acquire() and lock.exists()  # what torch 2.13 leaves behind when killed
    assert not FileBaton(str(lock)).try_acquire()  # ... and what makes the next build wait
    assert not _build.clear_stale_lock(str(tmp_path))  # fresh: another build may be running
    assert lock.exists()
    later = lock.stat().st_mtime + _build.STALE_LOCK_S + 60
    with open(lock) as held:  # torch 2.14's lock: the file stays, a running build flocks it
        fcntl.flock(held, fcntl.LOCK_EX)
        assert not _build.clear_stale_lock(str(tmp_path), now=later) and lock.exists()
    assert _build.clear_stale_lock(str(tmp_path), now=later) and not lock.exists()
    assert f"removed {lock}, left 11 min ago by a build that was killed" in capsys.readouterr().err
    assert FileBaton(str(lock)).try_acquire()  # the next build goes ahead
    assert not _build.clear_stale_lock(str(tmp_path / "nowhere"))


def test_the_build_cache_is_keyed_by_the_torch_build_and_the_python_abi(monkeypatch):
    """A library built by one torch is never loaded by another (torch 2.15 once loaded 2.14.1's build from a shared
    TORCH_EXTENSIONS_DIR): the build directory's name changes with the torch version, its build and Python's ABI."""
    import torch

    from sample_classes import _build

    name = _build.extension_name("samples")
    assert name.startswith("torchbind_samples_") and name.endswith("_samples")
    for module, attr, other in ((torch, "__version__", "0.0.1+other"), (torch.version, "git_version", "0" * 40),
                                (torch.version, "cuda", "0.1"), (sys.implementation, "cache_tag", "cpython-01")):
        with monkeypatch.context() as patch:
            patch.setattr(module, attr, other)
            assert _build.extension_name("samples") != name, attr
    assert _build.extension_name("samples") == name  # the same torch and Python: the same directory
