"""The names the command line offers, known without importing torch: the checks, in run order, and the
coverage-matrix backends, in column order. ``tests/test_docs.py`` keeps them equal to the registries
(:func:`conformance.checks.all_checks`, :func:`conformance.matrix.backend.all_backends`), which import torch."""

from __future__ import annotations

__all__ = ["CHECK_NAMES", "BACKEND_NAMES"]

CHECK_NAMES = ("tracing_mode", "fake_class", "examples", "coverage", "extra_methods", "signature", "return_type",
               "flatten", "roundtrip", "agreement", "custom_op", "deepcopy", "differential", "matrix")
BACKEND_NAMES = ("eager", "aot_eager", "inductor", "aoti", "export", "export_strict", "export_saveload")
