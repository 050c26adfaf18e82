"""Check 7: custom ops that take the class work on a fakified object and match the real op's output metadata.

Rule source: the PT2 custom-class notes — "since the fake class is implemented in python, we require the fake
implementation of custom op must also be registered in python" (``torch.library.register_fake``); a C++ Meta
kernel cannot accept a ``FakeScriptObject``. The op runs on a real object and, under ``FakeTensorMode``, on a
fakified one; outputs are compared like method results (:mod:`conformance.compare`).
"""

from __future__ import annotations

import torch._library.simple_registry as simple_registry

from ..results import Failure
from . import check
from .agreement import _side, disagreement


def has_python_fake(qualname: str) -> bool:
    """True when ``torch.library.register_fake`` registered a fake for the op ``ns::name``."""
    entry = simple_registry.singleton.find(qualname.split(".")[0])
    return entry.fake_impl.kernel is not None


@check("custom_op", scope="op")
def custom_op(ctx, op) -> list[Failure]:
    """The op runs on a fakified object under FakeTensorMode and its output metadata matches the real op."""
    ctx.require_fake()
    position = op.class_args[0]
    call_name = f"torch.ops.{op.qualname.replace('::', '.')}"
    for example, args, real, fake in ctx.paired_calls(op=op):
        found = disagreement(real, fake)
        if found is None:
            continue
        summary, diffs = found
        if fake.raised and not has_python_fake(op.qualname):
            summary = ("the op has no Python fake (torch.library.register_fake), so it cannot run on a fakified "
                       "object")
        repro = ctx.call_repro(example, op.short_name, args, op=call_name, position=position)
        return [Failure("custom_op", ctx.info.qualname, op.short_name, summary.replace("method", "op"),
                        cpp=_side(real), fake=_side(fake), details=tuple(diffs),
                        example="\n".join(example.code()), call=f"{call_name}(obj, {args.code()})",
                        repro=repro)]
    return []
