"""Fakes for the ``samples_multi`` C++ class and ops (csrc/samples_multi.cpp): ops taking two objects of one class.

``FakeStreamGuard`` and the op fakes in :data:`OP_FAKES` are CORRECT. :data:`BROKEN` holds broken variants, each
breaking one rule, for the tests (``with BROKEN["enter_forgets_caller_guard"].installed(): ...``):

* ``enter_forgets_caller_guard`` -- the kind of fake a library publishes for a stream guard: the result and the
  primary guard are right, but ``caller_guard`` (the op's SECOND object) is never cleared, so a compiled program
  that reads it after the op sees the old stream where eager sees 0;
* ``merge_into_unaliased`` -- correct on two distinct guards, wrong when ``dst`` and ``src`` are the same guard
  (it resets before adding, where C++ adds before resetting).

Op fakes reach the state through the class's methods, never ``.wrapped_obj``: while tracing they receive
``FakeScriptObject`` s, under strict export the real objects. Not imported by ``sample_classes``; load it
explicitly (``--torchbind-load=sample_classes.fakes_multi``). Importing it registers the fakes (idempotently).
"""

from __future__ import annotations

import torch

from .broken import BrokenFake
from .fakes import register_fake_classes, register_op_fakes

__all__ = ["FakeStreamGuard", "fake_enter_compute_stream", "fake_merge_into", "FAKE_CLASSES", "OP_FAKES", "BROKEN",
           "register", "install_enter_forgets_caller_guard", "install_merge_into_unaliased"]

GUARD = "samples_multi::StreamGuard"


class FakeStreamGuard:
    def __init__(self, device: int, stream: int, events: int) -> None:
        self.device = device
        self.stream = stream
        self.events = events

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def device_index(self) -> int:
        return self.device

    def stream_id(self) -> int:
        return self.stream

    def event_count(self) -> int:
        return self.events

    def is_bound(self) -> bool:
        return self.stream != 0

    def bind(self, device: int, stream: int) -> None:
        self.device, self.stream = device, stream

    def record(self, n: int) -> None:
        if n < 0:
            raise RuntimeError(f"StreamGuard.record: n must be >= 0, got {n}")
        self.events += n

    def release(self) -> None:
        self.stream, self.device = 0, -1

    def reset_events(self) -> None:
        self.events = 0


def fake_enter_compute_stream(primary, caller_guard, device: int) -> None:
    if device < 0:
        raise RuntimeError(f"enter_compute_stream: device must be >= 0, got {device}")
    taken = caller_guard.stream_id()
    primary.bind(device, taken)
    primary.record(1)
    caller_guard.release()


def fake_merge_into(dst, src) -> None:
    dst.record(src.event_count())
    src.reset_events()


FAKE_CLASSES = {GUARD: FakeStreamGuard}
OP_FAKES = {"samples_multi::enter_compute_stream": fake_enter_compute_stream,
            "samples_multi::merge_into": fake_merge_into}


def register() -> None:
    """Register the fake class and the op fakes (idempotent)."""
    register_fake_classes(FAKE_CLASSES)
    register_op_fakes(OP_FAKES)


register()


# --- broken variants: each breaks one rule ----------------------------------------------------------------


def _enter_forgets_caller_guard(primary, caller_guard, device: int) -> None:
    # The published fake: models what happens to `primary`, never touches `caller_guard`.
    if device < 0:
        raise RuntimeError(f"enter_compute_stream: device must be >= 0, got {device}")
    primary.bind(device, caller_guard.stream_id())
    primary.record(1)


def _merge_into_unaliased(dst, src) -> None:
    # Reads src, resets it, then adds: the same as C++ for two guards, not for one guard passed twice.
    moved = src.event_count()
    src.reset_events()
    dst.record(moved)


def _guard(name: str, op: str, rule: str, fn) -> BrokenFake:
    return BrokenFake(name=name, qualname=GUARD, check="custom_op", method=op, rule=rule, fake_class=FakeStreamGuard,
                      op_fakes={f"samples_multi::{op}": fn})


BROKEN = {bf.name: bf for bf in (
    _guard("enter_forgets_caller_guard", "enter_compute_stream",
           "the fake never clears caller_guard (the op's second object): a program reading it afterwards sees the "
           "old stream where eager sees 0", _enter_forgets_caller_guard),
    _guard("merge_into_unaliased", "merge_into",
           "the fake resets src before adding it to dst: right for two guards, wrong for one guard passed twice",
           _merge_into_unaliased),
)}


def install_enter_forgets_caller_guard() -> BrokenFake:
    """Install the published-style fake for the rest of the process
    (``--torchbind-load=sample_classes.fakes_multi:install_enter_forgets_caller_guard``)."""
    return BROKEN["enter_forgets_caller_guard"].install()


def install_merge_into_unaliased() -> BrokenFake:
    """Install the ``merge_into`` fake that is wrong for one guard passed twice, for the rest of the process."""
    return BROKEN["merge_into_unaliased"].install()
