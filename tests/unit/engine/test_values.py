"""Schema-typed value generation (conformance.engine.values)."""

from __future__ import annotations

import torch

from conformance.torchbind.discovery import discover
from conformance.engine.values import TENSOR_GALLERY, Value, argument_sets, candidates


def test_tensor_gallery_covers_dtypes_shapes_and_layouts():
    tensors = [Value(c).make() for c in TENSOR_GALLERY]
    dtypes = {t.dtype for t in tensors}
    assert {torch.float32, torch.float64, torch.int64, torch.bool} <= dtypes
    assert any(t.dim() == 0 for t in tensors), "a 0-dim scalar tensor"
    assert any(t.numel() == 0 for t in tensors), "a 0-size tensor"
    assert any(not t.is_contiguous() for t in tensors), "a non-contiguous tensor"


def test_make_returns_fresh_objects_with_identical_layout():
    v = Value("torch.arange(12, dtype=torch.float32).reshape(3, 4).t()")
    a, b = v.make(), v.make()
    assert a is not b and a.data_ptr() != b.data_ptr()
    assert a.stride() == b.stride() == (1, 4)


def test_candidates_for_containers():
    opt = torch._C.OptionalType(torch._C.IntType.get())
    assert [c.code for c in candidates(opt)][:2] == ["2", "None"]
    lst = candidates(torch._C.ListType(torch._C.TensorType.get()))
    assert [len(c.make()) for c in lst] == [2, 0, 1]
    tup = candidates(torch._C.TupleType([torch._C.IntType.get(), torch._C.FloatType.get()]))
    assert tup[0].make() == (2, 1.5)


def test_argument_sets_use_keyword_names_and_defaults(torch_test_classes):
    info = discover("_TorchScriptTesting::_DefaultArgs")
    sets = argument_sets(info.methods["scale_add"])  # scale_add(self, int add, int scale=1)
    codes = [s.code() for s in sets]
    assert codes[0] == "2, 2"
    assert codes[1] == "2", "second set leaves the defaulted argument out"
    sets = argument_sets(info.methods["divide"])  # divide(self, int? factor=None)
    assert [s.code() for s in sets][:2] == ["2", ""]
