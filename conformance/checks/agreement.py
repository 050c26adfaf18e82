"""Check 6b: per method, a fresh real object and a fresh fake of the same state agree on every call.

For every example object and argument set, the C++ method runs on a real object and the fake method on
``maybe_to_fake_obj(FakeTensorMode(shape_env=ShapeEnv()), obj)`` through ``call_torchbind`` (as while tracing). They agree when both
raise, or both return results equal under :func:`conformance.compare.compare_results`: tensors in shape, dtype,
device, strides and requires_grad; everything else by value, since torch burns non-tensor results into the
graph as constants. Raising on one side only is a disagreement.
"""

from __future__ import annotations

from ..calls import Callee
from ..compare import disagreement, side_text
from ..results import Failure
from . import check


@check("agreement", scope="method")
def agreement(ctx, method: str) -> list[Failure]:
    """On fresh objects in every example state, the fake method agrees with the C++ method."""
    ctx.require_fake_method(method)
    first = None
    count = total = 0
    for example, call, real, fake in ctx.paired_calls(Callee.method(method)):
        total += 1
        found = disagreement(real, fake)
        if found is None:
            continue
        count += 1
        if first is None:
            first = (example, call, real, fake, found)
    if first is None:
        return []
    example, call, real, fake, (summary, diffs) = first
    extra = [f"{count} of {total} calls (example objects x argument sets) disagree; the first is shown"]
    return [Failure(summary, cpp=side_text(real), fake=side_text(fake),
                    details=tuple(diffs + extra), example="\n".join(example.code()),
                    call=call.code(), repro=ctx.call_repro(example, call))]
