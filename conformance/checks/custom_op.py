"""Check 7: custom ops that take the class run on a fakified object and match the real op's output metadata.

Rule source: the PT2 custom-class notes — "since the fake class is implemented in python, we require the fake
implementation of custom op must also be registered in python" (``torch.library.register_fake``); a C++ Meta
kernel cannot accept a ``FakeScriptObject``, so an op without a Python fake fails in every traced program whatever
its inputs, and is reported without calling it. Otherwise the op runs on a real object and, under
``FakeTensorMode``, on a fakified one, with arguments from the class's argument source; under the validity rule
(:class:`conformance.compare.Tally`) only calls the C++ op accepts are compared, like method results
(:mod:`conformance.compare`).
"""

from __future__ import annotations

from ..calls import Callee
from ..compare import Tally, side_text
from ..discovery import runs_on_fakes
from ..results import Failure
from . import check


@check("custom_op", scope="op")
def custom_op(ctx, op) -> list[Failure]:
    """The op has a Python fake, and on every call the C++ op accepts its output metadata matches the real op's."""
    ctx.require_fake()
    if not runs_on_fakes(op):
        return [Failure(
            "the op has no Python fake (torch.library.register_fake), so it cannot run on a fakified object: every "
            "torch.compile / torch.export program that calls it on the object fails, whatever its inputs",
            cpp=str(op.schema), fake="(no Python fake or Python Meta kernel registered)",
            details=(f"register one: @torch.library.register_fake({op.qualname.split('.')[0]!r}) in a module passed to "
                     "--torchbind-load (a C++ Meta kernel cannot take a FakeScriptObject)",))]
    tally = Tally()
    first = tally.first_disagreement(ctx.paired_calls(Callee.of_op(op)))
    tally.require_compared("the C++ op", ctx.arguments.hint(op.qualname))
    if first is None:
        return tally.notes()
    example, call, real, fake, (summary, diffs) = first
    return [Failure(summary.replace("method", "op"), cpp=side_text(real), fake=side_text(fake),
                    details=tuple(diffs + [tally.summary() + "; the first is shown"]),
                    example="\n".join(example.code()), call=call.code(), repro=ctx.call_repro(example, call)),
            *tally.notes()]
