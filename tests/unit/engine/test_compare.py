"""Result comparison rules (conformance.engine.compare)."""

from __future__ import annotations

import pytest
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


def test_one_renderer_in_three_styles():
    """conformance.engine.render.render is the one value renderer; compare.describe, the matrix cell's show and the
    custom-class checks' show are its styles, each with the texts their messages had."""
    from conformance.custom.context import show as numbers
    from conformance.engine.compare import describe
    from conformance.engine.render import render
    from conformance.matrix.explain import show as cell

    t = torch.tensor([0.0, 3.0])
    meta = "Tensor(shape=[2], dtype=float32, device=cpu, stride=[1])"
    assert describe(t) == render(t) == meta
    assert render(t, 10) == meta  # a tensor's own text is never cut
    assert render([t, (1,)], 30) == "[" + meta[:26] + "..."
    assert render({"k": torch.zeros(2, requires_grad=True)}) == (
        "{'k': Tensor(shape=[2], dtype=float32, device=cpu, stride=[1], requires_grad=True)}")

    assert cell(t) == render(t, 160, style="cell") == f"{meta} = [0.0, 3.0]"
    assert cell(torch.zeros(13)).endswith("stride=[1])")  # more than 12 numbers: metadata only
    assert cell(torch.empty(2, device="meta")).endswith("stride=[1])")  # no data to show
    assert cell(3) == "3 (int)" and cell([1, t]) == f"[1, {meta}]"
    assert cell("x" * 200) == "'" + "x" * 156 + "..."

    assert numbers(t) == render(t, None, style="numbers") == "tensor([0.0, 3.0], shape=[2], dtype=torch.float32)"
    assert numbers(torch.arange(20.0)) == ("tensor([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0], "
                                           "... (20 elements), shape=[20], dtype=torch.float32)")
    assert numbers(torch.tensor(2)) == "tensor(2, shape=[], dtype=torch.int64)"
    assert numbers((1, "a", [t])) == '(1, "a", [tensor([0.0, 3.0], shape=[2], dtype=torch.float32)])'  # element-wise
    assert numbers("x" * 300) == "'" + "x" * 300 + "'"  # never cut
    with pytest.raises(ValueError, match="one of metadata, cell, numbers"):
        render(1, style="json")


def test_the_short_forms_are_styles_of_the_one_renderer():
    """The value texts of observer notes and registration messages (``line``) and of metadata differences
    (``field``) are styles of conformance.engine.render.render, with the texts those messages had."""
    from conformance.core.results import RegistrationError
    from conformance.engine import overrides
    from conformance.engine.compare import value_differences
    from conformance.engine.render import STYLES, render
    from conformance.torchbind.differential import observers

    assert STYLES[:3] == ("metadata", "cell", "numbers")  # the three styles before, kept
    grid = torch.tensor([[1, 2], [3, 4]])
    assert repr(grid) == "tensor([[1, 2],\n        [3, 4]])"
    assert render(grid, None, style="line") == "tensor([[1, 2], [3, 4]])"  # a line break and its indent: a space
    assert render("a  b", style="line") == "'a  b'"  # the spaces of one line are kept
    assert render("x" * 100, 60, style="line") == "'" + "x" * 56 + "..."
    assert overrides._short.func is render and observers._short.func is render
    assert overrides._short("x" * 100) == "'" + "x" * 76 + "..."
    assert observers._short("x" * 100) == "'" + "x" * 56 + "..."
    with pytest.raises(RegistrationError, match=r"returned Tensor tensor\(\[\[1, 2\], \[3, 4\]\]\), not a hypothesis"):
        overrides.check_override("conformance.strategy('ns::C', 'm')", None, lambda: grid)
    assert observers._flat_change((("n", 3),), (("n", grid),)) == "n: 3 before, tensor([[1, 2], [3, 4]]) after"

    t = torch.zeros(2, 3)
    fields = [render(v, None, style="field") for v in (tuple(t.shape), t.dtype, t.device, tuple(t.stride()), True)]
    assert fields == ["[2, 3]", "float32", "cpu", "[3, 1]", "True"]
    assert render(t) == "Tensor(shape={}, dtype={}, device={}, stride={})".format(*fields[:4])  # the same texts
    assert value_differences(torch.zeros(2), torch.zeros(3, dtype=torch.int64),
                             metadata_only=frozenset({"output"})) == [
        "output.shape: expected [2], got [3]", "output.dtype: expected float32, got int64"]


def test_differs_in_kind_reads_what_tracing_reads_not_values():
    """What a FakeTensor or a traced Python value carries: structure, leaf types, tensor metadata; not values."""
    from conformance.engine.compare import differs_in_kind

    t = torch.zeros(2, 3)
    assert not differs_in_kind(3, 4)  # an int of C++'s type, another value
    assert not differs_in_kind("a", "b")
    assert not differs_in_kind([t, 1], [torch.ones(2, 3), 2])  # contents only
    assert differs_in_kind(3, 3.0)  # a float where C++ returns an int
    assert differs_in_kind([t], (t,))  # a tuple for a list
    assert differs_in_kind([t], [t, t])  # another length
    assert differs_in_kind({"a": 1}, {"b": 1})
    assert differs_in_kind(t, torch.zeros(3, 2))
    assert differs_in_kind(t, t.double())
    assert differs_in_kind(t, None)
