"""The expected-failure baseline: a reviewed JSON file of known failures, keyed by stable test id.

Format (``"schema": "torchbind-baseline/1"``)::

    {
      "schema": "torchbind-baseline/1",
      "known_failures": {
        "torchbind[samples.TensorQueue]::coverage[top]": "the fake lacks top",
        "torchbind[samples.TensorQueue]::matrix[sequence-inductor]": {
          "reason": "inductor indexes Tensor[] results ...", "torch": "!=2.14.*"},
        ...
      }
    }

An entry is a reason, or ``{"reason": ..., "torch": SPECIFIER}``: a PEP 440 specifier set
(``packaging.specifiers``) of the torch releases it applies to, matched against the running torch's release
(``2.14.1+cu130`` counts as ``2.14.1``). An entry whose specifier does not match the running torch does not apply:
its test runs as an ordinary test (neither an expected failure nor an XPASS), so one file serves every torch
version a library tests against.

Listed tests run as ``xfail(strict=True)`` with the listed reason: a listed test that now passes fails the run
(so the file stays true), a failure that is not listed fails it as usual. ``--torchbind-accept`` rewrites the
file from the run (modelled on expecttest's accept mode and ``torch/testing/_internal/optests``'
``failures_dict.json``), changing only what the run saw:

* a test whose check ran and failed is listed, keeping an existing (reviewed) reason, else with its summary; an
  existing entry that did not apply to this torch is widened to apply to it too (the specifiers that exclude
  it are dropped);
* a test whose check ran and passed narrows its entry to exclude this torch: on the newest tested series (or a
  newer one) from that series on (``"torch": "<2.14"``: fixed in 2.14), on an older series only that series
  (``"!=2.13.*"``: one run cannot tell a fix in a newer torch from a break in an older one); an entry that then
  matches no tested release (:data:`conformance.versions.TESTED`) is dropped;
* entries of tests that did not reach a verdict are kept as they are: skipped, deselected (``-k``, ``-m``), not
  collected, interrupted, or errored outside the check (a setup or teardown error);
* a **stale** entry names a test of a class selected in this run that the class's plan no longer has (a method,
  op or scenario that was removed or renamed; the plan ignores ``--torchbind-checks`` and
  ``--torchbind-backends``, so narrowing a run makes nothing stale). Stale entries are never kept or dropped
  silently: every run lists them in the terminal summary (section "torchbind baseline"); an accepting run
  removes them and says so there. Entries of classes the run did not select are neither stale nor touched.

The file is written atomically (a temporary file, then ``os.replace``), so a failed or interrupted write leaves
the previous file in place.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterable
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .files import write_text_atomically
from .results import ConformanceError
from .versions import NEWEST_TESTED, TESTED, torch_release

__all__ = ["SCHEMA", "BaselineError", "Entry", "load_baseline", "save_baseline", "merge_accepted", "stale_entries",
           "applying"]

SCHEMA = "torchbind-baseline/1"


class BaselineError(ConformanceError, ValueError):
    """The baseline file cannot be read or does not have the documented structure."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One known failure: its ``reason`` and, optionally, the ``torch`` releases it applies to (a PEP 440
    specifier set such as ``"<2.14"`` or ``"!=2.14.*"``; ``None``: every release)."""

    reason: str
    torch: str | None = None

    def applies_to(self, torch_version: str) -> bool:
        """Whether the entry applies to ``torch_version`` (``torch.__version__``; its local label is ignored)."""
        return self.torch is None or SpecifierSet(self.torch).contains(torch_release(torch_version),
                                                                        prereleases=True)

    def to_json(self) -> str | dict[str, str]:
        return self.reason if self.torch is None else {"reason": self.reason, "torch": self.torch}


def _entry(test_id: str, value, path: Path) -> Entry:
    if isinstance(value, str):
        return Entry(value)
    if isinstance(value, dict) and isinstance(value.get("reason"), str) and set(value) <= {"reason", "torch"}:
        spec = value.get("torch")
        if spec is not None:
            try:
                SpecifierSet(spec)
            except (InvalidSpecifier, TypeError):
                raise BaselineError(f"{path}: {test_id}: \"torch\" must be a PEP 440 specifier such as \"<2.14\" "
                                    f"or \"!=2.14.*\", got {spec!r}") from None
        return Entry(value["reason"], spec)
    raise BaselineError(f"{path}: {test_id}: an entry is a reason string or {{\"reason\": ..., \"torch\": "
                        "SPECIFIER}")


def load_baseline(path: Path, missing_ok: bool = False) -> dict[str, Entry]:
    """``{test id: Entry}`` from ``path``. Raises :class:`BaselineError` for a missing (unless ``missing_ok``),
    unreadable or malformed file (a bad entry or ``torch`` specifier named)."""
    if not path.exists():
        if missing_ok:
            return {}
        raise BaselineError(f"{path}: no such baseline file (create it with --torchbind-accept)")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BaselineError(f"{path}: cannot read the baseline: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise BaselineError(f"{path}: expected a JSON object with \"schema\": \"{SCHEMA}\"")
    failures = doc.get("known_failures")
    if not isinstance(failures, dict) or not all(isinstance(k, str) for k in failures):
        raise BaselineError(f"{path}: \"known_failures\" must map test ids to reasons")
    return {k: _entry(k, v, path) for k, v in failures.items()}


def applying(entries: dict[str, Entry], torch_version: str) -> dict[str, str]:
    """``{test id: reason}`` of the entries that apply to ``torch_version``."""
    return {k: e.reason for k, e in entries.items() if e.applies_to(torch_version)}


def _as_entry(value) -> Entry:
    if isinstance(value, Entry):
        return value
    if isinstance(value, dict):
        return Entry(value["reason"], value.get("torch"))
    return Entry(value)


def save_baseline(path: Path, failures: dict[str, Entry | str | dict]) -> None:
    """Write ``failures`` (entries, reasons, or ``{"reason", "torch"}`` dicts) to ``path``, sorted by test id so
    reviews see small diffs, atomically. Raises ``OSError`` when it cannot be written; the previous file is
    then unchanged."""
    entries = {k: _as_entry(v).to_json() for k, v in sorted(failures.items())}
    doc = {"schema": SCHEMA, "known_failures": entries}
    write_text_atomically(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def _narrowed(entry: Entry, torch_version: str) -> Entry | None:
    """``entry`` excluding this torch: from its series on (``<2.14``) when it is the newest tested series or
    newer (a fix, the usual case), else only its series (``!=2.13.*``: one run cannot tell a fix in a newer torch
    from a break in an older one). ``None`` when the entry then matches no tested release."""
    release = torch_release(torch_version)
    if (release.major, release.minor) >= (NEWEST_TESTED.major, NEWEST_TESTED.minor):
        series = f"<{release.major}.{release.minor}"
    else:
        series = f"!={release.major}.{release.minor}.*"
    spec = SpecifierSet(entry.torch or "") & SpecifierSet(series)
    if not any(spec.contains(f"{tested}.0", prereleases=True) for tested in TESTED) and not any(
            spec.contains(f"{tested}.99", prereleases=True) for tested in TESTED):
        return None
    return Entry(entry.reason, str(spec))


def _widened(entry: Entry, torch_version: str) -> Entry:
    """``entry`` made to apply to ``torch_version`` too: the specifiers that exclude it are dropped."""
    release = torch_release(torch_version)
    kept = [s for s in SpecifierSet(entry.torch or "") if s.contains(release, prereleases=True)]
    return Entry(entry.reason, ",".join(sorted(str(s) for s in kept)) or None)


def merge_accepted(old: dict[str, Entry | str], results: dict[str, tuple[bool, str]],
                   stale: Collection[str] = (), torch_version: str | None = None) -> dict[str, Entry]:
    """The baseline after an accepting run on ``torch_version`` (default: the running torch). ``results`` maps
    each test id whose check ran to a verdict to ``(failed, summary)``: a failing test is listed (an existing
    entry keeps its reason and is widened to this torch if it did not apply, else the failure's summary is the
    reason); a passing test's entry is narrowed to exclude this torch's series (dropped when nothing tested is
    left). Entries for tests not in ``results`` (skipped, deselected, not collected, errored outside the check)
    are kept unchanged, except the ``stale`` ids (see :func:`stale_entries`), which are removed. Returns the new
    ``{test id: Entry}``."""
    if torch_version is None:
        import torch

        torch_version = torch.__version__
    entries = {k: _as_entry(v) for k, v in old.items()}
    merged = {k: v for k, v in entries.items() if k not in results and k not in stale}
    for test_id, (failed, summary) in results.items():
        entry = entries.get(test_id)
        if failed:
            merged[test_id] = Entry(summary) if entry is None else (
                entry if entry.applies_to(torch_version) else _widened(entry, torch_version))
        elif entry is not None and entry.applies_to(torch_version):
            narrowed = _narrowed(entry, torch_version)
            if narrowed is not None:
                merged[test_id] = narrowed
        elif entry is not None:
            merged[test_id] = entry  # passed where it does not apply: nothing learnt about where it does
    return merged


def stale_entries(known: Iterable[str], prefix: str, planned: Collection[str]) -> list[str]:
    """The ids in ``known`` that belong to one class (they start with ``prefix``, its ``torchbind[ns.Cls]::``)
    but are not among ``planned``, every item id the class's plan has: entries naming tests that no longer
    exist. Sorted."""
    return sorted(k for k in known if k.startswith(prefix) and k not in planned)
