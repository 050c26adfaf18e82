"""conformance.engine.mutations: which tensor arguments a call changed that its schema does not declare written
(torch.library.opcheck's schema test)."""

from __future__ import annotations

import torch

from conformance.engine.mutations import Snapshot, declared_writes


def test_declared_writes_are_read_from_the_schemas_write_aliases():
    schema = torch._C.parse_schema("ns::op(Tensor x, Tensor(a!) out, Tensor(b) view, Tensor(c!)[] outs) -> ()")
    assert declared_writes(schema) == {"out", "outs"}


def test_a_snapshot_names_the_arguments_a_call_changed():
    x, nan, xs, kept = torch.ones(3), torch.tensor([float("nan"), 1.0]), [torch.zeros(2), torch.zeros(2)], \
        torch.ones(2)
    snap = Snapshot([("x", x), ("nan", nan), ("xs", xs), ("kept", kept), ("k", 3)], skip=("kept",))
    assert snap.changed() == []  # NaN is NaN: an untouched tensor holding one is unchanged
    x.add_(1)
    xs[1].fill_(5)
    kept.fill_(9)  # a declared write: not judged
    assert snap.changed() == ["x", "xs"]
    before, now = snap.values("x")
    assert before.tolist() == [1.0, 1.0, 1.0] and now is x
    x.resize_(2)  # a change of shape is a change
    assert "x" in snap.changed()
