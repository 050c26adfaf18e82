"""The names the command line offers, known without importing torch: the checks, in run order, and the
coverage-matrix backends, in column order.

:data:`CHECKS` is the one ordered list of checks: ``(name, module)`` pairs, the module under
``conformance.checks`` that registers the check. :func:`conformance.checks.all_checks` imports those modules and
returns the checks in this order (``tracing_mode`` first: it decides whether torch uses a fake at all), so the run
order is written here, not made by imports. ``tests/integration/test_docs.py`` keeps :data:`BACKEND_NAMES` equal to
:func:`conformance.matrix.backend.all_backends`, which imports torch."""

from __future__ import annotations

__all__ = ["CHECKS", "CHECK_NAMES", "BACKEND_NAMES", "ITEM_DATA", "REPORT_ATTR"]

CHECKS = (
    ("tracing_mode", "torchbind.tracing_mode"),
    ("fake_class", "torchbind.fake_class"),
    ("examples", "torchbind.examples"),
    ("coverage", "torchbind.coverage"),
    ("extra_methods", "torchbind.coverage"),
    ("signature", "torchbind.signature"),
    ("return_type", "torchbind.return_type"),
    ("flatten", "torchbind.flatten"),
    ("roundtrip", "torchbind.roundtrip"),
    ("agreement", "torchbind.agreement"),
    ("custom_op", "torchbind.custom_op"),
    ("deepcopy", "torchbind.deepcopy"),
    ("differential", "torchbind.differential"),
    ("eq_hash", "custom.eq_hash"),
    ("fx_repr", "custom.fx_repr"),
    ("guards", "custom.guards"),
    ("fake_kernel", "custom.fake_kernel"),
    ("inlined", "custom.inlined"),
    ("baked", "custom.baked"),
    ("matrix", "matrix"),
)
CHECK_NAMES = tuple(name for name, _module in CHECKS)

#: A torchbind item's attribute holding what its call report carries to the controller's recorder (summary, notes,
#: matrix cell), and the report attribute it travels in (:func:`conformance.plugin.hooks.pytest_runtest_makereport` moves
#: it; :mod:`conformance.plugin.recorder` reads it). Here so that the lazy plugin module names them without torch.
ITEM_DATA, REPORT_ATTR = "torchbind_data", "torchbind"
BACKEND_NAMES = ("eager", "aot_eager", "inductor", "aoti", "export", "export_strict", "export_saveload")
