"""Fixtures for the project's tests: torch's shipped TorchBind test classes, loaded once per process."""

from __future__ import annotations

import pytest

TORCH_SPEC = "torch.testing._internal.torchbind_impls:init_torchbind_implementations"


@pytest.fixture(scope="session")
def torch_test_classes():
    """Load ``libtorchbind_test.so`` and torch's four fake classes (namespace ``_TorchScriptTesting``)."""
    from torch.testing._internal.torchbind_impls import init_torchbind_implementations

    init_torchbind_implementations()
    return "_TorchScriptTesting"
