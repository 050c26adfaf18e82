"""Fixtures for the project's tests: torch's shipped TorchBind test classes, loaded once per process."""

from __future__ import annotations

import os

import pytest
import torch.utils.cpp_extension

# pytester points HOME at a temporary directory; keep the C++ extension cache where it is, so subprocess runs
# reuse the sample library built once instead of rebuilding it (30-50 s each).
os.environ.setdefault("TORCH_EXTENSIONS_DIR", torch.utils.cpp_extension.get_default_build_root())

TORCH_SPEC = "torch.testing._internal.torchbind_impls:init_torchbind_implementations"


@pytest.fixture(scope="session")
def torch_test_classes():
    """Load ``libtorchbind_test.so`` and torch's four fake classes (namespace ``_TorchScriptTesting``)."""
    from torch.testing._internal.torchbind_impls import init_torchbind_implementations

    init_torchbind_implementations()
    return "_TorchScriptTesting"
