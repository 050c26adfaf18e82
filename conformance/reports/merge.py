"""One matrix across runs: merge the JSON reports of several runs (``--torchbind-report=X.json``).

Runs are told apart by their labels (``torch`` version, ``device``, ``platform``; the ``date`` does not count):

* reports with the same labels are **shards of one run** (split by class, or by a sharding plugin such as
  pytest-split): their cells and verdicts are united, and the result is exactly the report a single run writes;
* reports with different labels are **different runs**: each cell shows every run's status, in run order (by
  device and platform, then torch version), and a cell whose status changes between two torch versions of the
  same device and platform is marked (``fixed in 2.14.1``, ``broke in 2.14.1``, ``changed in 2.14.1``).

``python -m conformance merge A.json B.json ... --output OUT.md|.html|.json`` (or the console script
``torchbind-conformance merge``) writes the merged report; see :mod:`conformance.__main__`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path

from packaging.version import InvalidVersion, Version

from . import MatrixReport, build_report
from .json_report import SCHEMA
from ..core.results import Cell, ConformanceError, Status, Verdict
from ..core.versions import torch_release

__all__ = ["MergeError", "RunReport", "MergedReport", "load_run", "merge_runs", "write_merged", "MERGED_SCHEMA"]

MERGED_SCHEMA = "torchbind-matrix-merged/1"


class MergeError(ConformanceError, ValueError):
    """A report cannot be read or merged (not a ``torchbind-matrix/2`` JSON report, shards that disagree)."""


@dataclasses.dataclass
class RunReport:
    """One run's report as read back: its ``labels`` (``torch``, ``device``, ``platform``, ``date``), its
    ``cells``, its item ``verdicts`` per class (``{qualname: [Verdict, ...]}``, read from the report's rows with
    :meth:`~conformance.core.results.Verdict.from_json`) and its ``incomplete`` note (``None`` for a run that
    finished)."""

    labels: dict[str, str]
    cells: list[Cell]
    verdicts: dict[str, list[Verdict]]
    incomplete: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two reports the same run: torch version, device, platform."""
        return (self.labels.get("torch", "?"), self.labels.get("device", "cpu"), self.labels.get("platform", "?"))

    @property
    def title(self) -> str:
        torch, device, platform = self.key
        return f"torch {torch} · {device} · {platform}"


def load_run(path: Path) -> RunReport:
    """Read one JSON report. Raises :class:`MergeError` for a missing, unreadable or foreign file."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MergeError(f"{path}: cannot read the report: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise MergeError(f"{path}: not a JSON matrix report (expected \"schema\": \"{SCHEMA}\"; write one with "
                         "--torchbind-report=PATH.json)")
    from ..matrix.backends import BACKEND_MODULES, all_backends

    order = [b.name for b in all_backends()] or list(BACKEND_MODULES)
    cells: list[Cell] = []
    verdicts: dict[str, list[Verdict]] = {}
    try:
        for cls in doc["classes"]:
            qualname, rows = cls["qualname"], cls["rows"]
            for c in cls["cells"]:
                column = order.index(c["backend"]) if c["backend"] in order else len(order)
                cells.append(Cell(qualname, c["row"], c["backend"], rows.index(c["row"]), column, Status(c["status"]),
                                  c["reason"], list(c["details"]), c["program"], c["limitation"],
                                  repro=c.get("repro") or "", signature=c.get("signature") or ""))
            verdicts[qualname] = [Verdict.from_json({**row, "qualname": qualname}) for row in cls.get("verdicts", [])]
        labels = dict(doc.get("run") or {"torch": doc.get("torch", "?")})
    except (KeyError, TypeError, ValueError) as exc:
        raise MergeError(f"{path}: malformed report: {type(exc).__name__}: {exc}") from None
    return RunReport(labels, cells, verdicts, doc.get("incomplete"))


def _unite(shards: list[RunReport]) -> RunReport:
    """The shards of one run as one run. Raises :class:`MergeError` when two shards hold the same cell or item
    with different statuses."""
    cells: dict[tuple[str, str, str], Cell] = {}
    verdicts: dict[str, dict[str, Verdict]] = {}
    for shard in shards:
        for cell in shard.cells:
            key = (cell.qualname, cell.row, cell.backend)
            if key in cells and cells[key].status is not cell.status:
                raise MergeError(f"two shards of {shard.title} disagree on {key[0]} {key[1]}-{key[2]}: "
                                 f"{cells[key].status.value} and {cell.status.value}")
            cells.setdefault(key, cell)
        for qualname, items in shard.verdicts.items():
            mine = verdicts.setdefault(qualname, {})
            for item in items:
                mine.setdefault(item.item, item)
    notes = [s.incomplete for s in shards if s.incomplete]
    dates = sorted(s.labels.get("date", "") for s in shards)
    labels = {**shards[0].labels, "date": dates[-1]} if dates and dates[-1] else dict(shards[0].labels)
    return RunReport(labels, list(cells.values()), {q: list(v.values()) for q, v in verdicts.items()},
                     "; ".join(notes) or None)


#: Statuses a cell fails with (a torch defect fails too, whatever its item does).
_FAILING = (Status.FAILED, Status.TORCH_DEFECT)


def _release_text(version: str) -> str:
    """``2.14.1`` for ``2.14.1+cu130`` (the build label says nothing about what changed)."""
    try:
        return str(torch_release(version))
    except InvalidVersion:
        return version


def _version(run: RunReport) -> Version | str:
    try:
        return Version(run.key[0])
    except InvalidVersion:
        return run.key[0]


@dataclasses.dataclass
class MergedReport:
    """Several runs' matrices side by side. ``runs`` in order (device, platform, then torch version);
    ``reports[i]`` is run ``i``'s :class:`~conformance.reports.MatrixReport`."""

    runs: list[RunReport]
    reports: list[MatrixReport]

    def classes(self) -> list[str]:
        return sorted({m.qualname for r in self.reports for m in r.classes})

    def grid(self, qualname: str) -> tuple[list[str], list[dict], list[tuple[str, list[list[Cell | None]]]]]:
        """``(rows, backends, [(row, [[cell of run i or None for each run] for each backend]])])``."""
        matrices = [next((m for m in r.classes if m.qualname == qualname), None) for r in self.reports]
        rows: list[str] = []
        backends: list[dict] = []
        for m in matrices:
            if m is None:
                continue
            rows += [r for r in m.rows if r not in rows]
            backends += [b for b in m.backends if b not in backends]
        out = []
        for row in rows:
            line = []
            for b in backends:
                line.append([m.cells.get((row, b["name"])) if m is not None else None for m in matrices])
            out.append((row, line))
        return rows, backends, out

    def change(self, cells: list[Cell | None]) -> str | None:
        """How a cell's status changes across torch versions of the same device and platform: ``fixed in X``
        (failed, then passed), ``broke in X`` (passed, then failed), ``changed in X`` (any other change), or
        ``None``."""
        notes = []
        for i in range(1, len(self.runs)):
            a, b = self.runs[i - 1], self.runs[i]
            if a.key[1:] != b.key[1:] or cells[i - 1] is None or cells[i] is None:
                continue
            before, after = cells[i - 1].status, cells[i].status
            if before is after:
                continue
            version = _release_text(b.key[0])
            if before in _FAILING and after is Status.PASSED:
                notes.append(f"fixed in {version}")
            elif before is Status.PASSED and after in _FAILING:
                notes.append(f"broke in {version}")
            else:
                notes.append(f"changed in {version}")
        return "; ".join(notes) or None

    def defects(self) -> list[tuple[str, list[int], str | None, str]]:
        """The torch defects of every run, by signature: ``(signature, the runs it was seen in (0-based), how it
        changed — "fixed in 2.15.0" when a later torch of the same device and platform passes every cell that
        showed it —, a reproducer)``, in first-seen order."""
        seen: dict[str, tuple[list[int], set, list[str]]] = {}
        for i, run in enumerate(self.runs):
            for cell in run.cells:
                if cell.status is Status.TORCH_DEFECT:
                    runs, keys, repros = seen.setdefault(cell.signature, ([], set(), []))
                    if i not in runs:
                        runs.append(i)
                    keys.add((run.key[1:], cell.qualname, cell.row, cell.backend))
                    if cell.repro:
                        repros.append(cell.repro)
        out = []
        for signature, (runs, keys, repros) in seen.items():
            fixed = None
            for j, run in enumerate(self.runs):
                if j <= max(runs):
                    continue
                by_key = {(run.key[1:], c.qualname, c.row, c.backend): c for c in run.cells}
                mine = [k for k in keys if k[0] == run.key[1:]]
                if mine and all(k in by_key and by_key[k].status is Status.PASSED for k in mine):
                    fixed = f"fixed in {_release_text(run.key[0])}"
                    break
            out.append((signature, runs, fixed, repros[0] if repros else ""))
        return out

    def verdicts(self, qualname: str) -> list[tuple[str, list[Verdict | None]]]:
        """Every item of the class (checks and cells) with each run's verdict, in first-seen order."""
        names: list[str] = []
        per_run = []
        for run in self.runs:
            items = {v.item: v for v in run.verdicts.get(qualname, [])}
            per_run.append(items)
            names += [n for n in items if n not in names]
        return [(n, [items.get(n) for items in per_run]) for n in names]


def merge_runs(reports: Iterable[RunReport]) -> MergedReport:
    """Group ``reports`` into runs (shards with equal labels united) and order the runs. Raises
    :class:`MergeError` when there is nothing to merge or shards disagree."""
    groups: dict[tuple[str, str, str], list[RunReport]] = {}
    for report in reports:
        groups.setdefault(report.key, []).append(report)
    if not groups:
        raise MergeError("no reports to merge")
    runs = [_unite(shards) for shards in groups.values()]
    runs.sort(key=lambda r: (r.key[1], r.key[2], str(type(_version(r))), _version(r)))
    return MergedReport(runs, [dataclasses.replace(build_report(r.cells, verdicts=r.verdicts, labels=r.labels),
                                                   incomplete=r.incomplete) for r in runs])


def write_merged(merged: MergedReport, out: Path) -> None:
    """Write ``merged`` to ``out`` in the format its suffix names (``.md``, ``.html``, ``.json``), atomically: one
    run (the shards of one run) as exactly the report that run writes, several as the merged report
    (:mod:`conformance.reports.merged`). Raises :class:`MergeError` for another suffix (the message of
    :func:`~conformance.reports.report_format`), and for a file that cannot be written, naming ``out`` and the
    system's reason (not the temporary file the write goes through)."""
    from ..core.files import describe_os_error, write_text_atomically
    from . import ReportFormatError, _writers, report_format
    from .merged import render

    out = Path(out)
    try:
        suffix = report_format(out, f"--output={out}")
    except ReportFormatError as exc:
        raise MergeError(str(exc)) from None
    text = _writers()[suffix](merged.reports[0]) if len(merged.runs) == 1 else render(merged, out)
    try:
        write_text_atomically(out, text)
    except OSError as exc:
        raise MergeError(f"--output={out}: cannot write the merged report: {describe_os_error(exc)}") from None
