"""Backend ``export_strict``: strict ``torch.export.export(program, args, strict=True)`` (traced by dynamo), run
with ``ep.module()``.

Strict export traces TorchBind method calls on the *real* object with fake arguments (``call_torchbind`` on the
``ScriptObject``; torch/_higher_order_ops/torchbind.py warns "Tracing torchbind method ... with real ScriptObject"),
so a method that keeps a tensor argument (``store(t)``) leaves a ``FakeTensor`` inside the real object.
:func:`fake_tensors_left` finds them in the object's state after tracing, so the cell says that, instead of failing
later on the first use of such a tensor (comparing it raises ``DataDependentOutputException: aten.equal.default``).
"""

from __future__ import annotations

from typing import Any

import torch.utils._pytree as pytree
from ...engine.torch_api import FakeTensor

from . import Backend, export_program, export_script

__all__ = ["BACKEND", "fake_tensors_left", "LEFT_FAKE_TENSORS"]

#: How the difference that :func:`fake_tensors_left` reports begins (the limitation table's evidence).
LEFT_FAKE_TENSORS = "tracing left FakeTensors in the real object used to trace"


def prepare(scenario, module, example_args):
    return export_program(scenario, module, example_args, strict=True).module()


def fake_tensors_left(state: Any, label: str = "state") -> list[str]:
    """One difference line when the real object's flattened ``state`` (``__obj_flatten__()`` after tracing) holds
    ``FakeTensor`` s -- naming each place (``state[0][1]``) and its shape and dtype -- else ``[]``."""
    leaves, _ = pytree.tree_flatten_with_path(state)
    found = [f"{label}{pytree.keystr(path)} is a FakeTensor(shape={list(leaf.shape)}, dtype={leaf.dtype})"
             for path, leaf in leaves if isinstance(leaf, FakeTensor)]
    if not found:
        return []
    return [f"{LEFT_FAKE_TENSORS}: {'; '.join(found)} (tracing called the real object's methods with the fake "
            "tensors it traces with, and the object kept them; the object is unusable afterwards: comparing or "
            "computing with such a tensor raises, e.g. DataDependentOutputException: aten.equal.default)"]


BACKEND = Backend(name="export_strict", group="export", title="strict", prepare=prepare,
                  ahead_of_time=True, script=(export_script(strict=True) + ".module()",))
