"""Check 7: custom ops that take the class work on a fakified object and match the real op's output metadata.

Rule source: the PT2 custom-class notes — "since the fake class is implemented in python, we require the fake
implementation of custom op must also be registered in python" (``torch.library.register_fake``); a C++ Meta
kernel cannot accept a ``FakeScriptObject``. The op runs on a real object and, under ``FakeTensorMode``, on a
fakified one; outputs are compared like method results (:mod:`conformance.compare`).
"""

from __future__ import annotations

from ..calls import Callee
from ..compare import disagreement, side_text
from ..discovery import has_python_fake
from ..results import Failure
from . import check


@check("custom_op", scope="op")
def custom_op(ctx, op) -> list[Failure]:
    """The op runs on a fakified object under FakeTensorMode and its output metadata matches the real op."""
    ctx.require_fake()
    for example, call, real, fake in ctx.paired_calls(Callee.of_op(op)):
        found = disagreement(real, fake)
        if found is None:
            continue
        summary, diffs = found
        if fake.raised and not has_python_fake(op.qualname):
            summary = ("the op has no Python fake (torch.library.register_fake), so it cannot run on a fakified "
                       "object")
        return [Failure(summary.replace("method", "op"),
                        cpp=side_text(real), fake=side_text(fake), details=tuple(diffs),
                        example="\n".join(example.code()), call=call.code(), repro=ctx.call_repro(example, call))]
    return []
