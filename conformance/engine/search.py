"""The hypothesis search both kinds of class run: the plugin's profiles (:data:`CI_PROFILE`, :data:`DEV_PROFILE`,
registered on import), the settings of a search (:func:`hypothesis_settings`), and :class:`Found`, which carries
what a search found out of a hypothesis example.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, settings as Settings

from ..core.settings import DEFAULT_EXAMPLES

__all__ = ["CI_PROFILE", "DEV_PROFILE", "STEP_COUNT", "DEFAULT_EXAMPLES", "hypothesis_settings", "Found"]


#: Hypothesis profile for CI: derandomized (the same sequences on every run), no example database.
CI_PROFILE = "torchbind-ci"
#: Hypothesis profile for local runs: random, with hypothesis's example database (failures are replayed first).
DEV_PROFILE = "torchbind-dev"
#: At most this many steps (method / op calls) per sequence in both profiles (their ``stateful_step_count``; a
#: profile of the user's sets its own). Drifts show within a few calls, and the examples already hold non-empty
#: states, so short sequences buy more distinct sequences per second.
STEP_COUNT = 15

_OUR_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
# Both derive from hypothesis's own "default" profile: a profile registered without a parent inherits the profile
# current at import time, which on a CI machine is hypothesis's "ci" (derandomized, no database).
_DEFAULT = Settings.get_profile("default")
Settings.register_profile(CI_PROFILE, parent=_DEFAULT, derandomize=True, database=None, deadline=None, print_blob=False,
                          stateful_step_count=STEP_COUNT, phases=_OUR_PHASES,
                          suppress_health_check=[HealthCheck.too_slow])
Settings.register_profile(DEV_PROFILE, parent=_DEFAULT, deadline=None, stateful_step_count=STEP_COUNT, phases=_OUR_PHASES,
                          suppress_health_check=[HealthCheck.too_slow])


def hypothesis_settings(examples: int | None = None, base: Settings | None = None) -> Settings:
    """The hypothesis ``settings`` of a search: the differential test's call sequences
    (:func:`conformance.torchbind.differential.run_differential`) and a Python custom class's searches
    (:meth:`conformance.custom.context.CustomClassContext.search`).

    ``base`` defaults to the profile the user loaded (``--hypothesis-profile``); when none was chosen (hypothesis's
    ``default``, or the ``ci`` profile hypothesis loads by itself on CI) it is :data:`CI_PROFILE` if the environment
    variable ``CI`` is set or hypothesis detected a CI, else :data:`DEV_PROFILE`. On top of it: ``max_examples`` =
    ``examples`` (default :data:`DEFAULT_EXAMPLES`, the default of ``--torchbind-examples``), ``deadline=None``,
    and the
    ``too_slow`` health check suppressed. Raises ``hypothesis.errors.InvalidArgument`` for ``examples < 1``.
    """
    if base is None:
        current = Settings.get_current_profile_name()
        if current in ("default", "ci"):
            ci = current == "ci" or bool(os.environ.get("CI"))
            base = Settings.get_profile(CI_PROFILE if ci else DEV_PROFILE)
        else:
            base = Settings.default
    n = DEFAULT_EXAMPLES if examples is None else examples
    # filter_too_much: sequences in which C++ rejected every step are rejected (the validity rule), which a class
    # with preconditions and generated arguments does often; the item then says how much was compared.
    suppressed = tuple(dict.fromkeys((*base.suppress_health_check, HealthCheck.too_slow,
                                      HealthCheck.filter_too_much)))
    return Settings(base, max_examples=n, deadline=None, suppress_health_check=suppressed)


class Found(Exception):
    """Raised inside a hypothesis example to carry what it found (``finding``: a differential test's drift, a
    check's failure) out of the search; hypothesis shrinks towards the simplest example that raises it. The
    exception's text is ``message`` (default ``str(finding)``). Raise it from one place per search, so hypothesis
    sees a single bug while it shrinks."""

    def __init__(self, finding: Any, message: str | None = None):
        super().__init__(str(finding) if message is None else message)
        self.finding = finding
