"""Check 4: each fake method returns a value of the schema's return type.

The fake is called under ``FakeTensorMode`` on a fakified example object with schema-typed arguments, exactly as
``call_torchbind`` calls it while tracing; its result must convert to the schema type the way TorchScript would
convert the C++ result (``Tensor``, ``int``, ``float``, ``bool``, ``str``, ``None``, lists, tuples, ``Optional``;
see :func:`conformance.jit_types.value_mismatch`). A fake returning ``float`` for ``int``, or a ``tuple`` for a
``Tensor[]``, makes traced programs burn in constants of the wrong type or unpack the wrong structure.
"""

from __future__ import annotations

from ..calls import Callee
from ..jit_types import return_type as schema_return_type
from ..jit_types import value_mismatch
from ..results import Failure, NotApplicable
from . import check


@check("return_type", scope="method")
def return_type(ctx, method: str) -> list[Failure]:
    """Under FakeTensorMode the fake method returns a value of the C++ schema's return type."""
    ctx.require_fake_method(method)
    schema = ctx.info.methods[method]
    expected = schema_return_type(schema)
    checked = 0
    for example, call, real, fake in ctx.paired_calls(Callee.method(method)):
        if real.raised or fake.raised:
            continue  # no return value to type-check; agreement[...] reports one-sided raises
        checked += 1
        why = value_mismatch(fake.value, expected)
        if why:
            return [Failure(
                f"the fake returns a value that is not of the schema's return type {expected}",
                cpp=str(schema), fake=why, example="\n".join(example.code()),
                call=call.code(), repro=ctx.call_repro(example, call),
            )]
    if not checked:
        raise NotApplicable(f"no call of {method} returned on both sides (see agreement[{method}])")
    return []
