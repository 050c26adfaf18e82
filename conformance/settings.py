"""Run-wide settings the plugin reads from the command line / ini and the checks consult.

The pytest wiring (``conformance.plugin``) fills :data:`SETTINGS` in ``pytest_configure``; code outside pytest
(scripts, the project's tests) may change it directly or use :func:`overridden`.
"""

from __future__ import annotations

import contextlib
import dataclasses

__all__ = ["Settings", "SETTINGS", "overridden"]


@dataclasses.dataclass
class Settings:
    """``examples``: hypothesis examples (method-call sequences) per class for the differential test.
    ``backends``: the coverage-matrix backends to run (``None``: all)."""

    examples: int = 100
    backends: tuple[str, ...] | None = None


SETTINGS = Settings()


@contextlib.contextmanager
def overridden(**changes):
    """Temporarily change fields of :data:`SETTINGS`."""
    old = dataclasses.asdict(SETTINGS)
    for k, v in changes.items():
        setattr(SETTINGS, k, v)
    try:
        yield SETTINGS
    finally:
        for k, v in old.items():
            setattr(SETTINGS, k, v)
