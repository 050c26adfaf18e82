"""Check 6b: per method, a fresh real object and a fresh fake of the same state agree on every call C++ accepts.

For every example object and argument set (from the class's argument source: the adopter's
``conformance.strategy`` where registered, else generated), the C++ method runs on a real object and the fake
method on ``maybe_to_fake_obj(FakeTensorMode(shape_env=ShapeEnv()), obj)`` through ``call_torchbind`` (as while
tracing). Under the validity rule (:class:`conformance.engine.compare.Tally`) only calls C++ returned from are
comparisons: the fake must then return too, a result equal under :func:`conformance.engine.compare.compare_results`
(tensors in shape, dtype, device, strides and requires_grad; everything else by value, since torch burns
non-tensor results into the graph as constants). A call C++ rejects is not a comparison; a fake that returns
there is noted, not failed (torch raises at run time). An item with no compared call skips saying what to give.
"""

from __future__ import annotations

from ...torchbind.calls import Callee
from ...engine.compare import Tally, side_text
from ...core.results import Failure
from ...torchbind.context import ClassContext


def agreement(ctx: ClassContext, method: str) -> list[Failure]:
    """On fresh objects in every example state, the fake method agrees with the C++ method where C++ returns."""
    ctx.require_fake_method(method)
    tally = Tally()
    first = tally.first_disagreement(ctx.paired_calls(Callee.method(method)))
    tally.require_compared(f"the C++ method {method}", ctx.arguments.hint(method))
    if first is None:
        return tally.notes()
    example, call, real, fake, (summary, diffs) = first
    extra = [tally.summary() + "; the first is shown"]
    return [Failure(summary, cpp=side_text(real), fake=side_text(fake),
                    details=tuple(diffs + extra), example="\n".join(example.code()),
                    call=call.code(), repro=ctx.call_repro(example, call),
                    rule="agreement.fake-raises" if fake.raised else "agreement.result-differs"), *tally.notes()]
