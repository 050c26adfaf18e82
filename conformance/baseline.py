"""The expected-failure baseline: a reviewed JSON file of known failures, keyed by stable test id.

Format (``"schema": "torchbind-baseline/1"``)::

    {
      "schema": "torchbind-baseline/1",
      "known_failures": {
        "torchbind[samples.TensorQueue]::matrix[sequence-inductor]": "inductor indexes Tensor[] results ...",
        ...
      }
    }

Listed tests run as ``xfail(strict=True)`` with the listed reason: a listed test that now passes fails the run
(so the file stays true), a failure that is not listed fails it as usual. ``--torchbind-accept`` rewrites the
file from the run, keeping the reasons of entries that still fail (modelled on expecttest's accept mode and
``torch/testing/_internal/optests``' ``failures_dict.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["SCHEMA", "BaselineError", "load_baseline", "save_baseline", "merge_accepted"]

SCHEMA = "torchbind-baseline/1"


class BaselineError(ValueError):
    """The baseline file cannot be read or does not have the documented structure."""


def load_baseline(path: Path, missing_ok: bool = False) -> dict[str, str]:
    """``{test id: reason}`` from ``path``. Raises :class:`BaselineError` for a missing (unless ``missing_ok``),
    unreadable or malformed file."""
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
    if not isinstance(failures, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in failures.items()):
        raise BaselineError(f"{path}: \"known_failures\" must map test ids to reason strings")
    return dict(failures)


def save_baseline(path: Path, failures: dict[str, str]) -> None:
    """Write ``failures`` to ``path`` (sorted by test id, so reviews see small diffs)."""
    doc = {"schema": SCHEMA, "known_failures": dict(sorted(failures.items()))}
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def merge_accepted(old: dict[str, str], results: dict[str, tuple[bool, str]]) -> dict[str, str]:
    """The baseline after an accepting run. ``results`` maps each test id that ran to ``(failed, summary)``:
    failing tests are listed (keeping an existing reason, else the failure's summary), passing ones dropped;
    entries for tests that did not run are kept unchanged."""
    merged = {k: v for k, v in old.items() if k not in results}
    for test_id, (failed, summary) in results.items():
        if failed:
            merged[test_id] = old.get(test_id, summary)
    return merged
