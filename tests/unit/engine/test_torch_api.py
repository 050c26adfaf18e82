"""conformance/engine/torch_api.py: every private torch API the plugin uses resolves on the running torch, and a
missing one is an error naming the entry and the torch (not an ImportError deep in a check)."""

from __future__ import annotations

import re

import pytest
import torch

from conformance.engine import torch_api


def test_every_entry_resolves_on_the_running_torch():
    missing = []
    for name in torch_api.PRIVATE:
        try:
            torch_api.resolve(name)
        except AttributeError as exc:
            missing.append(str(exc))
    assert not missing, "\n".join(missing)
    assert torch_api.JitType is torch._C.Type and torch_api.dynamo_reset is torch._dynamo.reset
    from conformance.engine.torch_api import maybe_to_fake_obj

    assert maybe_to_fake_obj is torch._library.fake_class_registry.maybe_to_fake_obj


def test_a_moved_api_is_named_with_the_torch_that_lacks_it(monkeypatch):
    monkeypatch.setitem(torch_api.PRIVATE, "gone", ("torch._library.fake_class_registry", "no_such_function"))
    expected = (rf"torch {re.escape(torch.__version__)} has no torch._library.fake_class_registry.no_such_function "
                r"\(conformance.engine.torch_api.gone, checked on torch 2.13.0, 2.14.1, 2.15.0\)")
    with pytest.raises(AttributeError, match=expected):
        torch_api.resolve("gone")
    with pytest.raises(AttributeError, match="has no attribute 'not_an_entry'"):
        torch_api.not_an_entry  # noqa: B018
