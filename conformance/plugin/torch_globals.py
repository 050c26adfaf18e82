"""torch's process-wide defaults, kept for the user's own tests when the plugin's items run in the pytest process
(``--torchbind-isolation=none``).

A fake, a class's code or an example factory that calls ``torch.set_default_dtype(torch.float64)``,
``torch.set_grad_enabled(False)``, ``torch.set_num_threads(1)``, ``torch.use_deterministic_algorithms(True)`` or
``torch.set_default_device("meta")`` changes torch for everything that runs after it in that process. Under
process isolation that process is a worker, thrown away; without it, it is pytest's, and the user's own tests that
run after a plugin item would see torch changed. :func:`snapshot` reads what :func:`put_back` restores, which
returns what an item changed, for the plugin's warning (:func:`describe`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["snapshot", "put_back", "describe"]


def _set_default_device(device) -> None:
    torch.set_default_device(None if device == torch.device("cpu") else device)


def _set_deterministic(mode: tuple[bool, bool]) -> None:
    torch.use_deterministic_algorithms(mode[0], warn_only=mode[1])


def _set_anomaly(mode: tuple[bool, bool]) -> None:
    torch.autograd.set_detect_anomaly(mode[0], check_nan=mode[1])


#: (what a message calls it, how to read it, how to set it back): torch's own getters and setters.
_DEFAULTS: tuple[tuple[str, Callable[[], Any], Callable[[Any], None]], ...] = (
    ("the default dtype (torch.set_default_dtype)", torch.get_default_dtype, torch.set_default_dtype),
    ("grad mode (torch.set_grad_enabled)", torch.is_grad_enabled, torch.set_grad_enabled),
    ("the number of threads (torch.set_num_threads)", torch.get_num_threads, torch.set_num_threads),
    ("deterministic algorithms (torch.use_deterministic_algorithms; on, warn only)",
     lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
     _set_deterministic),
    ("the default device (torch.set_default_device)", torch.get_default_device, _set_default_device),
    ("float32 matmul precision (torch.set_float32_matmul_precision)", torch.get_float32_matmul_precision,
     torch.set_float32_matmul_precision),
    ("anomaly detection (torch.autograd.set_detect_anomaly; on, check NaN)",
     lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()), _set_anomaly),
)


def snapshot() -> dict[str, Any]:
    """torch's process-wide defaults now, by name."""
    return {name: read() for name, read, _ in _DEFAULTS}


def put_back(saved: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Set every default that differs from ``saved`` (a :func:`snapshot`) back; returns those, as
    ``{name: (saved value, value found)}``. A setter that refuses (e.g. a thread count torch no longer lets
    change) leaves that default as found; it is still returned."""
    changed = {}
    for name, read, write in _DEFAULTS:
        found = read()
        if found != saved[name]:
            changed[name] = (saved[name], found)
            try:
                write(saved[name])
            except (RuntimeError, ValueError):
                pass
    return changed


def describe(changed: dict[str, tuple[Any, Any]]) -> str:
    """``"the default dtype (...): torch.float32 -> torch.float64; ..."`` for a warning."""
    return "; ".join(f"{name}: {before} -> {after}" for name, (before, after) in changed.items())
