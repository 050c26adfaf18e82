"""Benchmark: throughput of the differential test on the seed's TensorQueue sample, against the raw call cost.

Prints, for ``samples::TensorQueue`` (correct fake, so no time goes to shrinking):

* raw real calls/s: ``push`` / ``size`` / ``pop`` called directly on a C++ ``ScriptObject``;
* raw fake calls/s: the same calls through ``call_torchbind`` on a fakified object under ``FakeTensorMode``
  (what a method call becomes while tracing);
* harness steps/s: method-call steps of :func:`conformance.torchbind.differential.run_differential` (hypothesis generating
  the sequences, fresh arguments built from source on both sides, the step on both sides, the observers
  ``top`` / ``size`` / ``clone_queue`` / ``get_raw_queue`` on both sides after every step, and a fresh fake of the
  C++ object's state after every state-changing step), with the whole-run wall time at the default budget;
* the ratio: harness time per step over the raw time of one real call plus one fake call;
* once per run, not per step: the plan (the observers' proof included, :mod:`conformance.torchbind.differential.observers`),
  and how many fresh fakes were made and how many states' fresh-fake results were reused.

Run: ``python benchmarks/differential.py`` (after the sample extension is built). No thresholds: it only prints.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # sample_classes/ lives in the repository root

import torch  # noqa: E402
from hypothesis import settings

import sample_classes  # noqa: F401,E402 - builds (cached) and loads the library, registers the correct fakes
from conformance.torchbind import differential as engine  # noqa: E402
from conformance.torchbind.context import new_fake_mode  # noqa: E402
from conformance.runner import Engine  # noqa: E402

CLASS = "samples::TensorQueue"


def raw_real(n: int) -> float:
    """Real calls per second: ``push(x)``, ``size()``, ``pop()`` repeated ``n`` times on one object."""
    q = torch.classes.samples.TensorQueue(torch.zeros(2, 3))
    x = torch.ones(2, 3)
    start = time.perf_counter()
    for _ in range(n):
        q.push(x)
        q.size()
        q.pop()
    return 3 * n / (time.perf_counter() - start)


def raw_fake(n: int) -> float:
    """Fake calls per second: the same three calls through ``call_torchbind`` under ``FakeTensorMode``."""
    call_torchbind = torch.ops.higher_order.call_torchbind
    mode = new_fake_mode()
    fake = Engine().context(CLASS).fakify(torch.classes.samples.TensorQueue(torch.zeros(2, 3)), mode)
    x = mode.from_tensor(torch.ones(2, 3))
    with mode:
        start = time.perf_counter()
        for _ in range(n):
            call_torchbind(fake, "push", x)
            call_torchbind(fake, "size")
            call_torchbind(fake, "pop")
        return 3 * n / (time.perf_counter() - start)


def harness(examples: int) -> engine.Run:
    """One derandomized differential run (the CI profile) with ``examples`` sequences."""
    return engine.run_differential(Engine().context(CLASS), examples=examples,
                                   settings=settings.get_profile(engine.CI_PROFILE))


def main() -> None:
    logging.disable(logging.WARNING)
    raw_real(1000), raw_fake(200), harness(5)  # warm up: imports, dispatch caches, hypothesis
    real = max(raw_real(20000) for _ in range(3))
    fake = max(raw_fake(2000) for _ in range(3))
    runs = [harness(engine.DEFAULT_EXAMPLES) for _ in range(3)]
    best = min(runs, key=lambda r: r.seconds / r.steps)
    steps_per_s = best.steps / best.seconds
    pair = 1 / real + 1 / fake
    print(f"{CLASS}, torch {torch.__version__}")
    print(f"  raw real calls/s (C++ ScriptObject):              {real:10,.0f}")
    print(f"  raw fake calls/s (call_torchbind, FakeTensorMode): {fake:10,.0f}")
    print(f"  harness steps/s (run_differential):               {steps_per_s:10,.0f}"
          f"   ({best.steps} steps in {best.sequences} sequences, {best.seconds:.2f} s)")
    print(f"  default budget (--torchbind-examples={engine.DEFAULT_EXAMPLES}): "
          f"{', '.join(f'{r.seconds:.2f}' for r in runs)} s per class run")
    print(f"  harness time per step / (one real + one fake call): {1 / steps_per_s / pair:.1f}x")
    observers = len(best.plan.observers)
    print(f"    (each step also calls {observers} observers on both sides and refakifies the C++ object after "
          "state-changing steps)")
    print(f"  once per run: plan {best.plan_seconds:.2f} s (observers proven on the examples and the states one and two "
          f"calls reach); observers audited on {best.audited} states the sequences reached (inside the run's time); "
          f"fresh fakes reused for {best.fresh_reused} state-changing steps")


if __name__ == "__main__":
    main()
