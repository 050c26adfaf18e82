"""Check 4: each fake method returns a value of the schema's return type.

The fake is called under ``FakeTensorMode`` on a fakified example object with arguments from the class's argument
source (on calls C++ accepts: the validity rule of :class:`conformance.engine.compare.Tally`), exactly as
``call_torchbind`` calls it while tracing; its result must convert to the schema type the way TorchScript would
convert the C++ result (``Tensor``, ``int``, ``float``, ``bool``, ``str``, ``None``, lists, tuples, ``Optional``;
see :func:`conformance.engine.jit_types.value_mismatch`). A return type with a part the comparison does not model
(a ``Stream``, a ``Future``) is not compared: the item skips saying so, never passes. A fake returning ``float``
for ``int``, or a ``tuple`` for a ``Tensor[]``, makes traced programs burn in constants of the wrong type or unpack
the wrong structure.

A schema return type ``Any`` (a C++ ``c10::IValue`` result) says nothing by itself: the fake's result is then
held to the type of what the C++ method returned on the same example and arguments (inferred with
``torch._C._jit_try_infer_type``, as TorchScript infers the type of a Python value).
"""

from __future__ import annotations

import torch

from ...torchbind.calls import Callee
from ...engine.compare import Tally, describe
from ...engine.jit_types import return_type as schema_return_type
from ...engine.jit_types import unmodelled, value_mismatch
from ...core.results import Failure, NotApplicable
from ...torchbind.context import ClassContext
from ...engine import torch_api


def return_type(ctx: ClassContext, method: str) -> list[Failure]:
    """Under FakeTensorMode the fake method returns a value of the C++ schema's return type."""
    ctx.require_fake_method(method)
    schema = ctx.info.methods[method]
    expected = schema_return_type(schema)
    untyped = unmodelled(expected)
    if untyped is not None:  # any value would pass: said, never a pass
        raise NotApplicable(f"the schema's return type {expected} includes {untyped}, a type this check does not "
                            "model, so no result was held to it (agreement compares the results themselves)")
    checked = 0
    tally = Tally()
    for example, call, real, fake in ctx.paired_calls(Callee.method(method)):
        tally.judge(real, fake, call.code())
        if real.raised or fake.raised:
            continue  # not a comparison (C++ rejected the arguments), or agreement[...] reports the fake's raise
        checked += 1
        wanted, summary = expected, f"the fake returns a value that is not of the schema's return type {expected}"
        rule = "return_type.wrong-type"
        cpp = str(schema)
        if expected.kind() == "AnyType":
            inferred = torch_api.try_infer_type(real.value)
            if not inferred.success():
                continue  # C++ returned something TorchScript cannot type: nothing to hold the fake to
            wanted = inferred.type()
            summary = (f"the schema's return type is Any (a c10::IValue); on this call C++ returned a {wanted}, "
                       "the fake something else")
            cpp = f"{schema}; returned {describe(real.value)}"
            rule = "return_type.returned-type"
        why = value_mismatch(fake.value, wanted)
        if why:
            return [Failure(
                summary, cpp=cpp, fake=why,
                example="\n".join(example.code()),
                call=call.code(), repro=ctx.call_repro(example, call), rule=rule,
            )]
    tally.require_compared(f"the C++ method {method}", ctx.arguments.hint(method))
    if not checked:
        raise NotApplicable(f"no call of {method} returned on both sides: the fake raised on every call C++ "
                            f"accepted (see {ctx.info.test_name}::agreement[{method}])")
    return []
