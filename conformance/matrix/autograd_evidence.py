"""The evidence the limitation table's gradient entries read off a backward row's scenario
(:mod:`conformance.matrix.limitations`, :mod:`conformance.matrix.gradients`): kind-neutral, imports no kind."""

from __future__ import annotations

__all__ = ["autograd_falls_through"]


def autograd_falls_through(scenario) -> str | None:
    """The evidence of ``torchbind-op-autograd``, read off the op: a custom op taking a TorchBind object is a
    ``TorchBindOpOverload``, which torch dispatches in Python when it is given a ``FakeScriptObject`` (while
    AOTAutograd traces), and the ``AutogradCPU`` key is among the keys it then falls through
    (``_fallthrough_keys``): the op's autograd formula (registered for the ``Autograd`` alias key) never runs there.
    ``None`` when the scenario's op is not such an op."""
    import torch
    from torch._C import DispatchKey

    op = getattr(scenario, "op", None)
    overload = None
    for call in getattr(scenario, "calls", ()):
        if call.op is not None and getattr(call.op, "qualname", None) == op:
            overload = call.op.resolve()
    if not isinstance(overload, torch._ops.TorchBindOpOverload):
        return None
    if DispatchKey.AutogradCPU not in overload._fallthrough_keys():
        return None
    return (f"{op} is a TorchBindOpOverload whose AutogradCPU key falls through when dispatched in Python with a "
            "FakeScriptObject, so the traced program records no backward for it")

