"""Out-variant custom ops on a TorchBind class, written the way libraries write them: defined from Python with
``torch.library.Library.define`` over the C++ class ``samples::Counter`` (the class in the schema as
``__torch__.torch.classes.samples.Counter``), a Python kernel registered with ``impl``, a fake with
``torch.library.register_fake``, and the result written into a ``Tensor(a!) out`` argument, the op returning ``()``
(as attention and KV-cache ops do).

Ops (namespace ``samples_tbout``):

* ``scale_into(Counter c, Tensor x, Tensor(a!) out) -> ()`` (CORRECT): writes ``x * c.value()`` into ``out``; the
  object is read, not changed. Its written output depends on the object's count, so every matrix cell is held to
  the values eager writes.
* ``bump_into(Counter c, int step, Tensor x, Tensor(a!) out) -> ()`` (CORRECT): increments the counter by ``step``
  and writes ``x * <new value>`` into ``out``; its fake increments the fake counter the same way.
* ``bump_into_forgets(...)`` (BROKEN): the same kernel, but its fake leaves the fake counter alone, so a traced
  program reads the old count after the op (``c.value()`` burned in as a constant).

Loading this module (``--torchbind-load=sample_classes.torchbind_out``) adds these ops to the class's ops.
:func:`unregister` drops them again (the project's tests use it so no other test sees them).
"""

from __future__ import annotations

import torch

import sample_classes  # noqa: F401 - builds (cached) and loads samples::Counter and registers its fake

__all__ = ["LIB", "COUNTER", "unregister"]

COUNTER = "__torch__.torch.classes.samples.Counter"

LIB = torch.library.Library("samples_tbout", "FRAGMENT")
LIB.define(f"scale_into({COUNTER} c, Tensor x, Tensor(a!) out) -> ()")
LIB.define(f"bump_into({COUNTER} c, int step, Tensor x, Tensor(a!) out) -> ()")
LIB.define(f"bump_into_forgets({COUNTER} c, int step, Tensor x, Tensor(a!) out) -> ()")


def _scale_into(c, x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x * c.value())


def _bump_into(c, step: int, x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x * c.increment(step))


LIB.impl("scale_into", _scale_into, "CompositeExplicitAutograd")
LIB.impl("bump_into", _bump_into, "CompositeExplicitAutograd")
LIB.impl("bump_into_forgets", _bump_into, "CompositeExplicitAutograd")


@torch.library.register_fake("samples_tbout::scale_into", lib=LIB)
def _fake_scale_into(c, x, out):
    return None


@torch.library.register_fake("samples_tbout::bump_into", lib=LIB)
def _fake_bump_into(c, step, x, out):
    c.increment(step)  # the fake counter follows the real one
    return None


@torch.library.register_fake("samples_tbout::bump_into_forgets", lib=LIB)
def _fake_bump_into_forgets(c, step, x, out):
    return None  # BROKEN: the fake counter keeps its old count


def unregister() -> None:
    """Drop the ops and their fakes (``Library._destroy``), so the class has its own ops only again."""
    LIB._destroy()
