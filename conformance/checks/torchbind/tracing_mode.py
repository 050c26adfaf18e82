"""Check 8a: ``tracing_mode()``, where the C++ class defines it, returns ``"real"`` or ``"fake"``.

Rule source: ``torch/_library/fake_class_registry.py::tracing_with_real`` raises an ``AssertionError`` during
tracing for any other value. ``"real"`` makes torch trace with the real object (no fakification).
"""

from __future__ import annotations

from ...core.evidence import record
from ...core.results import Failure
from ...torchbind.context import ClassContext
from .. import with_targets

ALLOWED = ("real", "fake")


def _targets(ctx):
    return [None] if "tracing_mode" in ctx.info.methods else []


@with_targets(_targets)
def tracing_mode(ctx: ClassContext, _target: None) -> list[Failure]:
    """tracing_mode() returns "real" or "fake"."""
    failures = []
    for example in ctx.require_examples():
        try:
            obj = example.build()
            with ctx.calling(f"{ctx.info.qualname}.tracing_mode() on the example object {example.label}"):
                value = obj.tracing_mode()
        except Exception as exc:  # noqa: BLE001
            value, error, rule = None, f"raised {type(exc).__name__}: {exc}", "tracing_mode.raises"
        else:
            error, rule = None if value in ALLOWED else f"returned {value!r}", "tracing_mode.bad-value"
            record("tracing_mode() result")
        if error:
            failures.append(Failure(
                target="tracing_mode", summary="tracing_mode() must return \"real\" or \"fake\"; torch asserts this while tracing",
                cpp=error, example="\n".join(example.code()),
                repro=ctx.repro(example, ["print(make_obj().tracing_mode())"]), rule=rule))
            break
    return failures
