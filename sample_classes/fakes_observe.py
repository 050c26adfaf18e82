"""Fakes for the ``samples_observe`` C++ classes (csrc/samples_observe.cpp): argument-less methods that are not all
observers.

``FakeStreamGuard``, ``FakeRunningStats``, ``FakeLatch`` and ``FakeDebounce`` are CORRECT: each mirrors its C++ method one for one.
``FakeStreamGuard`` starts unbound whatever the C++ object's handle was, because ``__obj_flatten__`` omits the
handle (a C++ omission no fake can make up for: a program traced from a bound guard sees it unbound).
:data:`BROKEN` holds broken variants, each breaking one rule, for the tests
(``with BROKEN["guard_bind_forgets"].installed(): ...``, or for a whole run
``--torchbind-load=sample_classes.fakes_observe:install_guard_bind_forgets``):

* ``guard_bind_forgets``: ``bind()`` does not keep the handle, so ``is_bound()`` stays False. Found only if
  ``clear()`` is not taken for an observer: called after every step, it unbinds both sides and hides it;
* ``stats_reset_keeps_count``: ``reset()`` zeroes the total but forgets the count;
* ``latch_arm_forgets``: ``arm()`` never arms. Found only if ``settle()`` is not taken for an observer, which
  only the state two calls reach (``prime(); arm()``) shows;
* ``debounce_arm_forgets``: ``arm()`` never arms. Found only if ``settle()`` is not taken for an observer, which
  only a state three calls reach (``hit(); hit(); arm()``) shows: the differential's own sequences, not the
  observers' proof states.

Not imported by ``sample_classes``; load it explicitly::

    pytest --torchbind-load=sample_classes --torchbind-load=sample_classes.fakes_observe \\
        --torchbind-class='samples_observe::*'

Importing this module registers the fakes (idempotently).
"""

from __future__ import annotations

import torch

from .broken import BrokenFake, _variant
from .fakes import register_fake_classes

__all__ = ["FakeStreamGuard", "FakeRunningStats", "FakeLatch", "FakeDebounce", "FAKE_CLASSES", "BROKEN",
           "register"]


class FakeStreamGuard:
    def __init__(self, device_index: int) -> None:
        self.device_index = device_index
        self.handle = 0  # not in __obj_flatten__: a fake made from a C++ object always starts unbound

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def bind(self, handle: int) -> None:
        if handle <= 0:
            raise RuntimeError(f"StreamGuard.bind: a stream handle is positive, got {handle}")
        self.handle = handle

    def is_bound(self) -> bool:
        return self.handle != 0

    def clear(self) -> None:
        self.handle = 0

    def device(self) -> int:
        return self.device_index

    def jitter(self) -> torch.Tensor:
        return torch.rand(2)

    def set_device(self, device_index: int) -> None:
        if device_index < 0:
            raise RuntimeError(f"StreamGuard.set_device: device_index must be >= 0, got {device_index}")
        self.device_index = device_index


class FakeRunningStats:
    def __init__(self, count: int, total: float) -> None:
        self.count_ = count
        self.total = total

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def push(self, x: float) -> None:
        self.count_ += 1
        self.total += x

    def count(self) -> int:
        return self.count_

    def mean(self) -> float:
        if self.count_ <= 0:
            raise RuntimeError("RunningStats.mean: no values pushed yet")
        return self.total / self.count_

    def reset(self) -> None:
        self.count_ = 0
        self.total = 0.0


class FakeLatch:
    def __init__(self, primed: bool, armed: bool) -> None:
        self.primed, self.armed = primed, armed

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def prime(self) -> None:
        self.primed = True

    def arm(self) -> None:
        if self.primed:
            self.armed = True

    def settle(self) -> None:
        self.armed = False

    def is_armed(self) -> bool:
        return self.armed

    def is_primed(self) -> bool:
        return self.primed


class FakeDebounce:
    def __init__(self, hits: int, armed: bool) -> None:
        self.hits_, self.armed = hits, armed

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def hit(self) -> None:
        self.hits_ += 1

    def arm(self) -> None:
        if self.hits_ >= 2:
            self.armed = True

    def settle(self) -> None:
        self.armed = False

    def is_armed(self) -> bool:
        return self.armed

    def hits(self) -> int:
        return self.hits_


FAKE_CLASSES = {"samples_observe::StreamGuard": FakeStreamGuard,
                "samples_observe::RunningStats": FakeRunningStats,
                "samples_observe::Latch": FakeLatch,
                "samples_observe::Debounce": FakeDebounce}


def register() -> None:
    """Register the correct fake classes (idempotent)."""
    register_fake_classes(FAKE_CLASSES)


register()


# --- broken variants: each breaks one rule ----------------------------------------------------------------


def _bind_forgets(self, handle: int) -> None:  # checks its argument, then drops it
    if handle <= 0:
        raise RuntimeError(f"StreamGuard.bind: a stream handle is positive, got {handle}")


def _reset_keeps_count(self) -> None:  # zeroes the total only
    self.total = 0.0


def _arm_forgets(self) -> None:  # a primed latch, a debounce hit twice, stays unarmed
    pass


BROKEN = {bf.name: bf for bf in (
    BrokenFake(name="guard_bind_forgets", qualname="samples_observe::StreamGuard", check="differential",
               method="bind", rule="the fake bind() does not keep the handle: is_bound() stays False after it",
               fake_class=_variant(FakeStreamGuard, "FakeStreamGuardForgets", bind=_bind_forgets)),
    BrokenFake(name="stats_reset_keeps_count", qualname="samples_observe::RunningStats", check="differential",
               method="reset", rule="the fake reset() zeroes the total but not the count",
               fake_class=_variant(FakeRunningStats, "FakeRunningStatsKeepsCount", reset=_reset_keeps_count)),
    BrokenFake(name="latch_arm_forgets", qualname="samples_observe::Latch", check="differential",
               method="arm", rule="the fake arm() never arms a primed latch: is_armed() stays False after "
               "prime(), arm(). Found only if settle() is not taken for an observer: called after every step "
               "(before is_armed()), it disarms both sides and hides it",
               fake_class=_variant(FakeLatch, "FakeLatchArmForgets", arm=_arm_forgets)),
    BrokenFake(name="debounce_arm_forgets", qualname="samples_observe::Debounce", check="differential",
               method="arm", rule="the fake arm() never arms: is_armed() stays False after hit(), hit(), arm(). "
               "Found only if settle() is not taken for an observer, which only a state three calls reach shows",
               fake_class=_variant(FakeDebounce, "FakeDebounceArmForgets", arm=_arm_forgets)),
)}


def _installer(bf: BrokenFake):
    def install() -> BrokenFake:
        return bf.install()

    install.__name__ = install.__qualname__ = bf.installer_name
    install.__doc__ = f"Install broken fake {bf.name!r} for the rest of the process: {bf.rule}"
    return install


for _bf in BROKEN.values():
    globals()[_bf.installer_name] = _installer(_bf)
    __all__.append(_bf.installer_name)
del _bf
