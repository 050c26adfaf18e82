"""Whether torch.compile compiles anything in this process: with dynamo disabled, ``torch.compile(fn)`` returns a
wrapper that runs ``fn`` eagerly (or, with ``fullgraph=True`` under ``torch._dynamo.config.disable``, raises "found
no compiled frames"), so a check or matrix cell that compares a compiled program with eager would compare eager
with itself and pass with nothing compiled.

Rule source: ``torch._dynamo.optimize`` (``torch/_dynamo/eval_frame.py``) returns a no-op decorator when
``TORCHDYNAMO_DISABLE=1`` is in the environment (read at each ``torch.compile`` call); ``torch._dynamo.config.disable``
(``TORCH_COMPILE_DISABLE=1`` at import, or set in code) makes dynamo skip every frame
(``torch/_dynamo/convert_frame.py``). torch 2.13 and 2.14.1 behave the same.

Checks and cells that need a compiled program call :func:`require_dynamo` first; it raises
:class:`~conformance.core.results.NotApplicable`, so they skip saying why (the reason names ``TORCHDYNAMO_DISABLE``).
"""

from __future__ import annotations

import os

from ..core.results import NotApplicable
from . import torch_api

__all__ = ["dynamo_disabled", "skip_reason", "require_dynamo"]


def dynamo_disabled() -> str | None:
    """Why torch.compile compiles nothing in this process (``"TORCHDYNAMO_DISABLE=1 is set"`` or
    ``"torch._dynamo.config.disable is set (TORCH_COMPILE_DISABLE=1)"``), or ``None`` when dynamo is enabled.
    Raises nothing."""
    if os.environ.get("TORCHDYNAMO_DISABLE", "") == "1":
        return "TORCHDYNAMO_DISABLE=1 is set"
    if torch_api.dynamo_config.disable:
        return ("torch._dynamo.config.disable is set (TORCH_COMPILE_DISABLE=1, which disables dynamo as "
                "TORCHDYNAMO_DISABLE=1 does)")
    return None


def skip_reason(what: str) -> str | None:
    """The reason a check or cell that needs a compiled program skips when dynamo is disabled
    (:func:`dynamo_disabled`), naming ``what`` (e.g. ``"the inductor cell"``) and the variable; ``None`` when
    dynamo is enabled. Raises nothing."""
    why = dynamo_disabled()
    if why is None:
        return None
    return (f"{what} compares a program compiled by torch.compile with eager, but {why}: torch.compile would run the "
            "code eagerly and nothing would be compiled or compared; unset TORCHDYNAMO_DISABLE (and "
            "TORCH_COMPILE_DISABLE) to run it")


def require_dynamo(what: str) -> None:
    """Raise :class:`~conformance.core.results.NotApplicable` with :func:`skip_reason` when dynamo is disabled:
    ``what`` needs a program compiled by torch.compile, and none would be compiled."""
    reason = skip_reason(what)
    if reason is not None:
        raise NotApplicable(reason)
