"""Check 6b: per method, a fresh real object and a fresh fake of the same state agree on every call.

For every example object and argument set, the C++ method runs on a real object and the fake method on
``maybe_to_fake_obj(FakeTensorMode(shape_env=ShapeEnv()), obj)`` through ``call_torchbind`` (as while tracing). They agree when both
raise, or both return results equal under :func:`conformance.compare.compare_results`: tensors in shape, dtype,
device, strides and requires_grad; everything else by value, since torch burns non-tensor results into the
graph as constants. Raising on one side only is a disagreement.
"""

from __future__ import annotations

from ..compare import compare_results, describe
from ..results import Failure
from . import check


def disagreement(real, fake) -> tuple[str, list[str]] | None:
    """``(summary, differences)`` when a real and a fake :class:`~conformance.context.CallResult` disagree."""
    if real.raised and fake.raised:
        return None
    if real.raised:
        return "the C++ method raises but the fake returns", []
    if fake.raised:
        return "the fake raises but the C++ method returns", []
    diffs = compare_results(real.value, fake.value)
    return ("the fake's result differs from the C++ result", diffs) if diffs else None


def _side(result) -> str:
    return result.error_text() if result.raised else f"returned {describe(result.value)}"


@check("agreement", scope="method")
def agreement(ctx, method: str) -> list[Failure]:
    """On fresh objects in every example state, the fake method agrees with the C++ method."""
    ctx.require_fake_method(method)
    first = None
    count = total = 0
    for example, args, real, fake in ctx.paired_calls(method):
        total += 1
        found = disagreement(real, fake)
        if found is None:
            continue
        count += 1
        if first is None:
            first = (example, args, real, fake, found)
    if first is None:
        return []
    example, args, real, fake, (summary, diffs) = first
    extra = [f"{count} of {total} calls (example objects x argument sets) disagree; the first is shown"]
    return [Failure("agreement", ctx.info.qualname, method, summary, cpp=_side(real), fake=_side(fake),
                    details=tuple(diffs + extra), example="\n".join(example.code()),
                    call=f"obj.{method}({args.code()})", repro=ctx.call_repro(example, method, args))]
