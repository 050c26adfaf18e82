"""The evidence the limitation table's gradient entries read off a backward row's scenario
(:mod:`conformance.matrix.limitations`, :mod:`conformance.matrix.gradients`): kind-neutral, imports no kind."""

from __future__ import annotations
from ..engine import torch_api

__all__ = ["autograd_falls_through", "method_autograd_not_implemented"]


def autograd_falls_through(scenario) -> str | None:
    """The evidence of ``torchbind-op-autograd``, read off the op: a custom op taking a TorchBind object is a
    ``TorchBindOpOverload``, which torch dispatches in Python when it is given a ``FakeScriptObject`` (while
    AOTAutograd traces), and the ``AutogradCPU`` key is among the keys it then falls through
    (``_fallthrough_keys``): the op's autograd formula (registered for the ``Autograd`` alias key) never runs there.
    ``None`` when the scenario's op is not such an op."""
    import torch
    from ..engine.torch_api import DispatchKey

    op = getattr(scenario, "op", None)
    overload = None
    for call in getattr(scenario, "calls", ()):
        if call.op is not None and getattr(call.op, "qualname", None) == op:
            overload = call.op.resolve()
    if not isinstance(overload, torch_api.TorchBindOpOverload):
        return None
    if DispatchKey.AutogradCPU not in overload._fallthrough_keys():
        return None
    return (f"{op} is a TorchBindOpOverload whose AutogradCPU key falls through when dispatched in Python with a "
            "FakeScriptObject, so the traced program records no backward for it")



def method_autograd_not_implemented(scenario) -> str | None:
    """The evidence of ``torchbind-method-autograd``, read off torch: every call of the scenario is a method of the
    TorchBind object (no custom op), which a traced or exported program makes through
    ``torch.ops.higher_order.call_torchbind``, and that operator's ``Autograd`` kernel (``py_kernels``, registered by
    ``py_autograd_impl`` in ``torch/_higher_order_ops/torchbind.py``) wraps torch's
    ``autograd_not_implemented(call_torchbind, deferred_error=True)`` (``torch/_higher_order_ops/utils.py``): with a
    tensor argument requiring grad, it detaches the result and wraps it in a ``DelayedError``. ``None`` when either
    does not hold (another torch that gives the operator a formula: the entry no longer applies)."""
    import inspect

    from ..engine.torch_api import DispatchKey
    from ..engine.torch_api import call_torchbind

    calls = getattr(scenario, "calls", ())
    if not calls or any(call.op is not None for call in calls):
        return None
    kernel = call_torchbind.py_kernels.get(DispatchKey.Autograd)
    try:
        wrapped = inspect.getclosurevars(kernel).nonlocals.get("fn", kernel)
        held = inspect.getclosurevars(wrapped).nonlocals
    except TypeError:  # not a Python function: not torch's autograd_not_implemented
        return None
    if getattr(wrapped, "__qualname__", "") != "autograd_not_implemented.<locals>.inner" \
            or held.get("op") is not call_torchbind or held.get("deferred_error") is not True:
        return None
    methods = ", ".join(dict.fromkeys(f"{call.call.callee.name}" for call in calls))
    return (f"the program calls {methods} through call_torchbind, whose Autograd kernel is torch's "
            "autograd_not_implemented(call_torchbind, deferred_error=True): the result is detached from the inputs")
