"""Differential testing: drive a real TorchBind object and its fake side by side through call sequences.

A fake class can agree with the C++ class on every single call from a fresh object and still drift from it over a
sequence of calls (a ``push`` that never evicts, a ``pop`` that does not remove). This package finds such drifts
with a hypothesis stateful test — the equivalent of a ``RuleBasedStateMachine`` whose ``initialize`` rule picks an
example object and whose rules are the class's methods, written as a drawn list of steps (see
:func:`.driver._program` for why):

* each sequence starts from one example object (:mod:`conformance.torchbind.examples`), builds it twice and fakifies
  one copy **once** with ``maybe_to_fake_obj`` under a ``FakeTensorMode`` (as dynamo / export do before
  tracing); from then on the real ``ScriptObject`` and the ``FakeScriptObject`` evolve side by side, each by its
  own methods (the fake's run under the mode, the ``call_torchbind`` path);
* the rules are the class's methods that the fake class defines and the custom ops that take the class and can
  run on a fakified object (an op once per class-typed argument, the tracked object there, the others drawn), with
  arguments drawn from strategies derived from the schema types
  (:func:`value_strategy`), or from the user's overrides (:func:`conformance.strategy`), both from the class's
  argument source (:mod:`conformance.engine.arguments`);
* every step runs on the C++ object first: a step C++ rejects (raises) is not applied to the fake and is not a
  comparison (a sequence in which C++ rejects every step is rejected); otherwise it compares the two sides: the
  fake raising where C++ returned, tensor metadata (shape, dtype, device, strides,
  requires_grad), non-tensor results by value (:func:`conformance.engine.compare.compare_results`), and aliasing (a
  returned tensor shares storage with an argument or an earlier result on one side only);
* after every step the *observers* — methods callable without arguments proven to change neither the C++
  object's flattened state nor what any other such method returns, e.g. ``size()`` (:mod:`.observers`; the
  adopter may name or exclude one) — run on both sides and must agree; after every state-changing
  step a fresh fake is also made from the C++ object's current state (its ``__obj_flatten__``, through
  ``maybe_to_fake_obj``) and must agree with the evolved fake on every observer. That is how a fake that forgets
  to evict or to remove is caught;
* hypothesis shrinks a failing sequence to a minimal one, which is printed as a standalone script
  (:func:`repro_script`).

Settings: ``max_examples`` is the session's ``settings.examples`` (``--torchbind-examples``). The base
hypothesis settings are the profile the user loaded (``--hypothesis-profile``), else :data:`CI_PROFILE` when the
environment variable ``CI`` is set (or hypothesis detected a CI), else :data:`DEV_PROFILE`; ``--hypothesis-seed``
seeds the run. ``deadline`` is always off: timing is not what this test checks.

The package, one module per job (the strategies live in :mod:`conformance.engine.arguments`, shared by every caller):
:mod:`.plan` (what is driven: :func:`plan_for`), :mod:`.observers` (which methods may read the state after every
step), :mod:`.machine` (one call sequence on both
sides, and the :class:`Drift` it finds), :mod:`.driver` (hypothesis settings and :func:`run_differential`),
:mod:`.repro` (:func:`repro_script`, whose helper program is the text of :mod:`.repro_runtime`).
"""

from .driver import (CI_PROFILE, DEFAULT_EXAMPLES, DEV_PROFILE, STEP_COUNT, Run, hypothesis_settings,
                     run_differential)
from .machine import Drift
from .plan import Plan, Rule, plan_for
from .repro import repro_script
from ...engine.arguments import tensor_strategy, value_strategy

__all__ = [
    "DEFAULT_EXAMPLES",
    "CI_PROFILE",
    "DEV_PROFILE",
    "STEP_COUNT",
    "value_strategy",
    "tensor_strategy",
    "hypothesis_settings",
    "Rule",
    "Plan",
    "plan_for",
    "Drift",
    "Run",
    "run_differential",
    "repro_script",
]
