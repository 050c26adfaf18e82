"""torchbind-conformance: check a TorchBind class against its fake class across the PT2 stack.

Public API:

* :func:`examples` — register a factory of example objects for a class whose constructor needs specific args;
* :func:`strategy` — say how every check draws a method's or op's arguments (or exclude it);
* :func:`selected_classes` — in a ``--torchbind-load`` module, the classes the run selects (to build or load only
  those);
* :func:`run_class` — run every check on a class outside pytest and get :class:`Outcome` objects (``Outcome`` is
  the plugin's one verdict type, :class:`conformance.core.results.Verdict`, under its public name; :class:`Failure`
  is one finding of a check).

The pytest plugin (``conformance.plugin.hooks``, entry point ``torchbind``) turns each check into a test item.

Importing this package imports neither torch nor hypothesis: the names above are loaded on first use (PEP 562),
so a pytest run that does not ask for the plugin does not pay for them.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["examples", "strategy", "selected_classes", "run_class", "Failure", "Outcome"]
__version__ = "0.1.0"

_LAZY = {"examples": ".kinds", "strategy": ".kinds", "selected_classes": ".engine.loading", "run_class": ".runner",
         "Failure": ".core.results", "Outcome": ".core.results"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
