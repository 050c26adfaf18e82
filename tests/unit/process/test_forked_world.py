"""A hang in an isolation worker forked from a process that holds a gloo (or NCCL) process group: the message says
the likeliest cause and what to do (``--torchbind-isolation=none``); a test backend (``fake``) is not named."""

from __future__ import annotations

import torch.distributed as dist

from conformance.process.lost import WorkerLost, forked_world

HANG = WorkerLost("hang", "did not return", ["a call", "DeviceMesh.all_reduce on the example object"],
                  "a call", [], 50.0)


def _world(monkeypatch, backend):
    monkeypatch.setattr(dist, "is_initialized", lambda: backend is not None)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)


def test_a_hang_under_a_gloo_world_says_to_run_without_isolation(monkeypatch):
    _world(monkeypatch, "gloo")
    assert forked_world() == "gloo"
    failure = HANG.failure(5.0)
    [line] = [d for d in failure.details if "process group" in d]
    assert line.startswith("this process has a gloo process group (torch.distributed), and the worker was forked "
                           "from it: a gloo communicator does not survive fork")
    assert line.endswith("run this class's items with --torchbind-isolation=none (they then run in the pytest "
                         "process, which holds the world)")
    assert failure.details.index(line) < next(i for i, d in enumerate(failure.details) if d.startswith("limits:"))


def test_no_world_or_a_test_backend_is_not_named(monkeypatch):
    for backend in (None, "fake"):
        _world(monkeypatch, backend)
        assert forked_world() is None
        assert not any("process group" in d for d in HANG.failure(5.0).details)
    _world(monkeypatch, "nccl")
    crash = WorkerLost("crash", "killed by SIGSEGV (Segmentation fault)", ["a call"], "a call", [], 1.0)
    assert not any("process group" in d for d in crash.failure(5.0).details)  # a hang's cause only
