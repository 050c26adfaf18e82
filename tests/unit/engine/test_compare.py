"""Result comparison rules (conformance.engine.compare)."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from conformance.engine.compare import compare_results, flat_state_differences


def test_tensor_metadata_is_compared_not_values():
    assert compare_results(torch.zeros(2, 3), torch.ones(2, 3)) == []
    diffs = compare_results(torch.zeros(2, 3), torch.zeros(3, 2))
    assert diffs[0].startswith("result.shape: C++ [2, 3], fake [3, 2]")
    assert any("stride" in d for d in diffs)
    assert compare_results(torch.zeros(2), torch.zeros(2, dtype=torch.float64)) == [
        "result.dtype: C++ float32, fake float64"]
    assert "requires_grad" in compare_results(torch.zeros(2, requires_grad=True), torch.zeros(2))[0]


def test_fake_tensor_against_real_tensor():
    mode = FakeTensorMode()
    real = torch.arange(12.0).reshape(3, 4).t()
    assert compare_results(real, mode.from_tensor(real)) == []


def test_non_tensor_results_compare_by_value_and_type():
    assert compare_results(2, 2) == []
    assert compare_results(2, 3) == ["result: C++ gave 2 (int), fake gave 3 (int)"]
    assert compare_results(2, 2.0), "int vs float is a difference: torch burns the constant in with its type"
    assert compare_results(True, 1), "bool vs int"
    assert compare_results(float("nan"), float("nan")) == []


def test_containers():
    assert compare_results([1, 2], (1, 2))[0].startswith("result: C++ gave a list")
    assert compare_results([torch.zeros(1)], [torch.zeros(1), torch.zeros(1)])[0].startswith(
        "result: C++ gave 1 elements")
    assert compare_results((1, torch.zeros(2)), (1, torch.zeros(3)))[0] == "result[1].shape: C++ [2], fake [3]"


def test_flat_state_differences_compares_values_too():
    a = (("t", torch.tensor([1.0, 2.0])),)
    assert flat_state_differences(a, (("t", torch.tensor([1.0, 2.0])),)) == []
    assert flat_state_differences(a, (("t", torch.tensor([1.0, 3.0])),)) == ["state[0][1]: tensor values differ"]
    assert flat_state_differences(a, (("u", torch.tensor([1.0, 2.0])),), sides=("x", "y")) == [
        "state[0][0]: x gave 't' (str), y gave 'u' (str)"]
