"""Check 1: a fake class is registered for the TorchBind class, and ``__obj_unflatten__`` is a classmethod.

Rule source: ``torch/_library/fake_class_registry.py`` — ``register_fake_class`` requires a classmethod
``__obj_unflatten__``; ``_find_fake_class_for_script_object`` fails tracing when no fake class is registered.
Classes whose ``tracing_mode()`` returns ``"real"`` are traced with the real object and need no fake.
"""

from __future__ import annotations

import inspect

from ...core.evidence import record
from ...core.results import Failure
from ...torchbind.context import ClassContext


def fake_class(ctx: ClassContext, _target: None) -> list[Failure]:
    """A fake class is registered and its __obj_unflatten__ is a classmethod."""
    info = ctx.info
    fake = info.fake_class
    if fake is None:
        if ctx.traces_with_real_object:
            record("tracing_mode() result")  # "real": torch traces with the real object and needs no fake
            return []
        return [Failure(
            "no fake class is registered, so torch.compile / torch.export cannot fakify this object",
            cpp=f"TorchBind class {info.script_qualname} with methods {', '.join(info.user_methods) or '(none)'}",
            fake="(no class registered)",
            details=(f"register one with @torch._library.register_fake_class({info.qualname!r}), or make the C++ "
                     "class's tracing_mode() return \"real\" to trace with the real object",),
            rule="fake_class.missing",
        )]
    raw = inspect.getattr_static(fake, "__obj_unflatten__", None)
    if raw is None:
        return [Failure("the fake class has no __obj_unflatten__ classmethod",
                        fake=f"{fake.__module__}.{fake.__qualname__}", rule="fake_class.no-unflatten")]
    if not isinstance(raw, classmethod):
        return [Failure("__obj_unflatten__ is not a classmethod",
                        fake=f"{fake.__qualname__}.__obj_unflatten__ is a {type(raw).__name__}",
                        details=("torch calls fake_class.__obj_unflatten__(flattened) on the class itself",),
                        rule="fake_class.unflatten-not-classmethod")]
    record("fake class")
    return []
