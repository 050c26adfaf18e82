"""Coverage-matrix reports: a model built from cell data, and one writer per format (one module each).

The cells are the :class:`~conformance.core.results.Cell` objects the ``matrix`` check returns and the verdicts the
:class:`~conformance.core.results.Verdict` objects of every item; under pytest-xdist they travel to the controller
as JSON on the test reports (their ``torchbind`` attribute, see :mod:`conformance.plugin.recorder`), so the
controller builds the same report a serial run does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from ..core.files import write_text_atomically
from ..core.results import Cell, ConformanceError, Status, Verdict

__all__ = ["ClassMatrix", "MatrixReport", "Defect", "build_report", "write_report", "encodable", "FORMATS", "SYMBOLS",
           "ReportFormatError", "report_format"]

#: Cell symbols, as in the seed document's Coverage Matrix (Y / N / blank): passed, failed, unsupported, could not
#: tell, torch's defect, skipped.
SYMBOLS = {Status.PASSED: "✓", Status.FAILED: "✗", Status.UNSUPPORTED: "–", Status.UNTOLD: "?",
           Status.TORCH_DEFECT: "T", Status.SKIPPED: "n/a"}


def encodable(text: str) -> str:
    """``text`` with every character UTF-8 cannot encode written as its backslash escape (``\\udc80``; Python's
    ``backslashreplace``). Such a character is an unpaired surrogate, which Python makes of bytes that are not
    UTF-8 (``surrogateescape``: a C++ exception message, a file name); one in one exception message would otherwise
    make every file the plugin writes fail with ``UnicodeEncodeError``. Every writer returns its text through
    this, so a report, the merged report and the baseline survive any text. In a JSON document the escape is a
    JSON escape, so the file reads back with the character it held. Raises nothing."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclasses.dataclass
class ClassMatrix:
    """One class's matrix: ``rows`` (scenarios) × ``backends``; ``cells[(row, backend)]`` is the :class:`Cell`;
    ``footnotes`` numbers each distinct (status, reason) of a non-passing cell, in table order."""

    qualname: str
    rows: list[str]
    backends: list[dict]
    cells: dict[tuple[str, str], Cell]
    footnotes: list[tuple[int, Status, str]]

    def footnote(self, cell: Cell) -> int | None:
        for number, status, reason in self.footnotes:
            if (status, reason) == (cell.status, cell.reason):
                return number
        return None

    def table(self) -> list[tuple[str, list[tuple[dict, Cell | None, int | None]]]]:
        """The grid the writers render: per row, ``(backend, cell or None, footnote number or None)`` for each
        backend column (``None`` cell: that cell did not run, e.g. deselected)."""
        grid = []
        for row in self.rows:
            line = []
            for b in self.backends:
                cell = self.cells.get((row, b["name"]))
                line.append((b, cell, self.footnote(cell) if cell is not None else None))
            grid.append((row, line))
        return grid

    def counts(self) -> dict[Status, int]:
        """How many cells have each status."""
        out = {s: 0 for s in SYMBOLS}
        for cell in self.cells.values():
            out[cell.status] += 1
        return out


@dataclasses.dataclass(frozen=True)
class Defect:
    """One torch defect of a report: its ``signature`` (:func:`conformance.matrix.cell.defect_signature`) and the
    ``TORCH_DEFECT`` cells that show it, in report order; :attr:`repro` is the first one's checked reproducer."""

    signature: str
    cells: tuple[Cell, ...]

    @property
    def repro(self) -> str:
        """The standalone script of the first cell that has one (``""`` when none has)."""
        return next((c.repro for c in self.cells if c.repro), "")


@dataclasses.dataclass
class MatrixReport:
    """Every class's :class:`ClassMatrix`, in first-seen class order sorted by name, plus the limitations table.
    ``incomplete``: ``None`` for a run that finished, else why cells are missing, e.g. ``"interrupted: 47 of 91
    cells ran"`` (every writer shows it)."""

    classes: list[ClassMatrix]
    torch_version: str
    limitations: list[dict]
    incomplete: str | None = None
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    verdicts: dict[str, list[Verdict]] = dataclasses.field(default_factory=dict)

    def defects(self) -> list[Defect]:
        """The run's torch defects (``TORCH_DEFECT`` cells), grouped by signature, in the order the tables show
        their first cell."""
        grouped: dict[str, list[Cell]] = {}
        for matrix in self.classes:
            for _, line in matrix.table():
                for _, cell, _ in line:
                    if cell is not None and cell.status is Status.TORCH_DEFECT:
                        grouped.setdefault(cell.signature, []).append(cell)
        return [Defect(signature, tuple(cells)) for signature, cells in grouped.items()]


def build_report(cells: Iterable[Cell], *, incomplete: str | None = None,
                 verdicts: dict[str, list[Verdict]] | None = None,
                 labels: dict[str, str] | None = None) -> MatrixReport:
    """Group cells into matrices, ordered by the plan's row/backend indices (never by arrival order, so a
    serial and an xdist run give identical reports). ``incomplete`` becomes :attr:`MatrixReport.incomplete`;
    ``verdicts`` (``{ns::Cls: [Verdict, ...]}``) every item's verdict, sorted by item id; ``labels`` the run's
    labels (``torch``, ``device``, ``platform``, ``date``; the running torch when not given). A class with
    verdicts but no cells gets an empty matrix."""
    import torch

    from ..matrix.backends import all_backends
    from ..matrix.limitations import LIMITATIONS

    backend_info = {b.name: {"name": b.name, "group": b.group, "title": b.title} for b in all_backends()}
    by_class: dict[str, list[Cell]] = {q: [] for q in verdicts or {}}
    for cell in cells:
        by_class.setdefault(cell.qualname, []).append(cell)
    classes = []
    for qualname in sorted(by_class):
        items = sorted(by_class[qualname], key=lambda c: (c.row_index, c.backend_index))
        rows = list(dict.fromkeys(c.row for c in items))
        backends = [backend_info[b] for b in dict.fromkeys(
            c.backend for c in sorted(items, key=lambda c: c.backend_index))]
        footnotes: list[tuple[int, Status, str]] = []
        for c in items:
            key = (c.status, c.reason)
            if c.status is not Status.PASSED and key not in [(s, r) for _, s, r in footnotes]:
                footnotes.append((len(footnotes) + 1, *key))
        classes.append(ClassMatrix(qualname, rows, backends, {(c.row, c.backend): c for c in items}, footnotes))
    limitations = [{"key": e.key, "backends": sorted(e.backends), "reason": e.reason, "source": e.source}
                   for e in LIMITATIONS]
    labels = dict(labels) if labels else {"torch": torch.__version__}
    ordered = {q: sorted(v, key=lambda verdict: verdict.item) for q, v in sorted((verdicts or {}).items())}
    return MatrixReport(classes, labels.get("torch", torch.__version__), limitations, incomplete=incomplete,
                        labels=labels, verdicts=ordered)


def _writers():
    from . import html, json_report, markdown

    return {".md": markdown.render, ".json": json_report.render, ".html": html.render}


#: The report formats, by file suffix: every report (a run's, a merged one) is written in one of these.
FORMATS = (".md", ".json", ".html")


class ReportFormatError(ConformanceError, ValueError):
    """A report path whose suffix names none of the :data:`FORMATS`."""


def report_format(path: str | Path, given: str | None = None) -> str:
    """The format ``path``'s suffix names (case-insensitive), one of :data:`FORMATS`: the one check of a report's
    format, made for ``--torchbind-report``, for ``merge --output`` and by every writer. ``given``: how the user
    named the path (``--torchbind-report=m.txt``), for the message; the path itself when not given.

    Raises :class:`ReportFormatError` (``<given>: unsupported format .txt; use .md, .json, .html``) for another
    suffix or none."""
    suffix = Path(path).suffix
    if suffix.lower() not in FORMATS:
        raise ReportFormatError(f"{given or path}: unsupported format {suffix or '(none)'}; "
                                f"use {', '.join(FORMATS)}")
    return suffix.lower()


def write_report(report: MatrixReport, path: Path) -> None:
    """Write ``report`` to ``path`` in the format its suffix names (``.md``, ``.json``, ``.html``), atomically (a
    temporary file in the same directory, then ``os.replace``): a fault leaves the previous file, never an empty
    or truncated one.

    Raises :class:`ReportFormatError` (a ``ValueError``) for another suffix (:func:`report_format`) and ``OSError``
    when the file cannot be written.
    """
    write_text_atomically(path, _writers()[report_format(path)](report))
