"""The names the command line offers, known without importing torch: the checks, in run order, and the
coverage-matrix backends, in column order.

:data:`CHECKS` is the check registry's only declaration: one :class:`CheckRow` per check, in run order
(``tracing_mode`` first: it decides whether torch uses a fake at all), naming the module under
``conformance.checks`` that defines the check's function (a function of the check's own name) and the check's
``scope``; the check's kinds of class follow from the module's folder (:attr:`CheckRow.kinds`).
:func:`conformance.checks.all_checks` imports those modules and builds the checks from these rows, so neither the
order nor a check's scope or kinds is written anywhere else. ``tests/integration/test_docs.py`` keeps
:data:`BACKEND_NAMES` equal to :func:`conformance.matrix.backends.all_backends`, which imports torch."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["CheckRow", "CHECKS", "CHECK_NAMES", "SCOPES", "BACKEND_NAMES", "ITEM_DATA", "REPORT_ATTR"]

#: What a check's target is: ``"class"`` (the class itself, target ``None``), ``"method"`` (a method name), ``"op"``
#: (a custom op taking the class) or ``"cell"`` (a coverage-matrix cell).
SCOPES = ("class", "method", "op", "cell")
#: The kinds of class (as :data:`conformance.kinds.KINDS` names them), each the folder of ``conformance/checks`` that
#: holds its checks; a module at the top of the package (``matrix``) is for every kind.
_KIND_FOLDERS = ("torchbind", "custom")


class CheckRow(NamedTuple):
    """One check of the registry: its ``name`` (in test ids and ``--torchbind-checks``), the ``module`` under
    ``conformance.checks`` whose function of that name is the check, and its ``scope`` (one of :data:`SCOPES`)."""

    name: str
    module: str
    scope: str = "class"

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of class the check is for, from its module's folder: ``("torchbind",)`` under
        ``checks/torchbind/``, ``("custom",)`` under ``checks/custom/``, both at the top of ``checks/``. Raises ``ValueError``
        for a module in another folder."""
        folder, dot, _rest = self.module.partition(".")
        if not dot:
            return _KIND_FOLDERS
        if folder not in _KIND_FOLDERS:
            raise ValueError(f"check {self.name!r}: module {self.module!r} is in no folder of a kind of class "
                             f"({', '.join(_KIND_FOLDERS)})")
        return (folder,)


CHECKS: tuple[CheckRow, ...] = (
    CheckRow("tracing_mode", "torchbind.tracing_mode"),
    CheckRow("fake_class", "torchbind.fake_class"),
    CheckRow("examples", "torchbind.examples"),
    CheckRow("coverage", "torchbind.coverage", "method"),
    CheckRow("extra_methods", "torchbind.coverage"),
    CheckRow("signature", "torchbind.signature", "method"),
    CheckRow("return_type", "torchbind.return_type", "method"),
    CheckRow("flatten", "torchbind.flatten"),
    CheckRow("roundtrip", "torchbind.roundtrip"),
    CheckRow("agreement", "torchbind.agreement", "method"),
    CheckRow("custom_op", "torchbind.custom_op", "op"),
    CheckRow("deepcopy", "torchbind.deepcopy"),
    CheckRow("differential", "torchbind.differential"),
    CheckRow("eq_hash", "custom.eq_hash"),
    CheckRow("fx_repr", "custom.fx_repr"),
    CheckRow("guards", "custom.guards", "op"),
    CheckRow("recompiles", "custom.recompiles", "op"),
    CheckRow("fake_kernel", "custom.fake_kernel", "op"),
    CheckRow("inlined", "custom.inlined", "method"),
    CheckRow("baked", "custom.baked", "op"),
    CheckRow("tracing", "tracing"),
    CheckRow("matrix", "matrix", "cell"),
)
CHECK_NAMES = tuple(row.name for row in CHECKS)

#: A torchbind item's attribute holding what its call report carries to the controller's recorder (the item's
#: :meth:`~conformance.core.results.Verdict.to_json` data), and the report attribute it travels in (:func:`conformance.plugin.hooks.pytest_runtest_makereport` moves
#: it; :mod:`conformance.plugin.recorder` reads it). Here so that the lazy plugin module names them without torch.
ITEM_DATA, REPORT_ATTR = "torchbind_data", "torchbind"
BACKEND_NAMES = ("eager", "aot_eager", "inductor", "aoti", "export", "export_strict", "export_saveload",
                 "autocast")
