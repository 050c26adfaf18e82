"""Backend ``autocast``: ``torch.compile(program, backend="aot_eager", fullgraph=True)`` called under CPU autocast
to bfloat16 (``torch.autocast("cpu", dtype=torch.bfloat16)``), compared with plain eager under the same autocast.

Autocast adds a dispatch key (``AutocastCPU``) that every op meets while the program is traced, the op taking a
fakified object included: the path where a fake object reached an autocast key with no handler (pytorch#158414).
Why aot_eager: on torch 2.13 and 2.14.1 both aot_eager and inductor reach that key already in dynamo's fake
propagation (``RuntimeError: no kernel for AutocastCPU on <op>``, torch/_ops.py
``TorchBindOpOverload._dispatch_in_python``), and AOTAutograd, which both share, is where autocast is traced into
the graph and turned off while the compiled graph runs (pytorch#86515); inductor adds only code generation, at
several times the cost of a cell.
"""

import torch

from . import Backend, autocast_source, torch_compile

#: The column's autocast, ``(device_type, dtype)``: its program and plain eager run under ``torch.autocast("cpu",
#: dtype=torch.bfloat16)``.
AUTOCAST = ("cpu", torch.bfloat16)
_WITH = f"with {autocast_source(AUTOCAST)}:"

BACKEND = Backend(
    name="autocast", group="torch.compile", title="aot_eager, autocast bf16", prepare=torch_compile("aot_eager"),
    dynamo=True, autocast=AUTOCAST, script=(
        "compiled = torch.compile(module(traced), backend='aot_eager', fullgraph=True)",
        "",
        "def program(*args):",
        f"    {_WITH}",
        "        return compiled(*args)",
        "",
        "",
        "# Plain eager's reference under the same autocast",
        "first = make_first()",
        _WITH,
        "    expected = run_twice(module(first), first)",
    ))
