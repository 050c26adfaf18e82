"""What one run was asked to do: a frozen :class:`Settings` value, built once (by the plugin from the command line
and ini, by a script or a test directly) and passed to the engine (:class:`conformance.runner.Engine`), which hands
it to every class context. Nothing reads settings from anywhere else. Imports nothing of the project."""

from __future__ import annotations

import dataclasses

__all__ = ["Settings", "DEFAULT_EXAMPLES"]

#: Default of ``--torchbind-examples``: random call sequences per class in the differential test (after the
#: explicit two-call ones); its cost and what it catches are measured in docs/explanation/differential.md.
DEFAULT_EXAMPLES = 100


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the command line and ini chose (immutable; derive another with ``dataclasses.replace``).

    ``examples``: hypothesis examples (random call sequences) per class for the differential test
    (``--torchbind-examples``); ``backends``: coverage-matrix backend names to run (``--torchbind-backends``;
    ``None``: all); ``checks``: check names to run (``--torchbind-checks``; ``None``: all); ``device``: where the
    example objects' tensors and the programs' inputs live (``--torchbind-device``: ``cpu``, ``cuda``, ``cuda:N``);
    ``load_code``: Python lines that load the user's libraries and fakes, put at the top of every reproducer
    script (from ``--torchbind-load``); ``check_reproducers``: run each failure's reproducer in a fresh interpreter
    before it is printed and say whether it reproduces (``--torchbind-check-repro``; only with ``load_code``,
    which a reproducer needs to run anywhere: :mod:`conformance.engine.reproducers`); ``torch_defects``: what the
    item of a matrix cell that is torch's defect does (:attr:`~conformance.core.results.Status.TORCH_DEFECT`):
    ``"fail"`` (the default: the library's users get that wrong result on this torch; a baseline entry accepts it)
    or ``"skip"`` (``--torchbind-torch-defects``)."""

    examples: int = DEFAULT_EXAMPLES
    backends: tuple[str, ...] | None = None
    checks: tuple[str, ...] | None = None
    device: str = "cpu"
    load_code: tuple[str, ...] = ()
    check_reproducers: bool = False
    torch_defects: str = "fail"
