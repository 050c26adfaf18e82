"""The expected-failure baseline: a reviewed JSON file of known failures, keyed by stable test id.

Format (``"schema": "torchbind-baseline/1"``)::

    {
      "schema": "torchbind-baseline/1",
      "known_failures": {
        "torchbind[samples.TensorQueue]::coverage[top]": "the fake lacks top",
        "torchbind[samples.TensorQueue]::matrix[sequence-inductor]": {
          "reason": "inductor indexes Tensor[] results ...", "torch": "<2.14"},
        "torchbind[samples.TensorQueue]::agreement[pop]": {
          "reason": "the fake returns ...", "observed": ["2.13", "2.14"]},
        ...
      }
    }

An entry is a reason (it applies to every torch), ``{"reason": ..., "torch": SPECIFIER}`` (a PEP 440 specifier set,
``packaging.specifiers``, of the torch releases it applies to, matched against the running torch's release:
``2.14.1+cu130`` counts as ``2.14.1``; written by hand, e.g. ``"<2.14"`` for a torch bug fixed in 2.14), or
``{"reason": ..., "observed": ["2.13", "2.14"]}``: the torch series on which the failure was observed, which is
what ``--torchbind-accept`` writes. Such an entry applies to the series it lists and to every **newer** series
until a run there shows the test passing: an adopter's accepted failures stay known failures on the day they
upgrade torch, and a failure a new torch fixed shows as a strict XPASS (the item fails, saying the entry was
observed on older torch only, so the upgrade is reviewed, not silent). An accepting run on the newer torch that
sees the test pass records that series under ``"passed"`` (``{"reason": ..., "observed": ["2.13", "2.14"],
"passed": ["2.15"]}``); from the oldest passed series on, the entry no longer applies (unless a later run lists a
newer series as observed again). It never applies to an older series it was not observed on. An entry that does
not apply to the running torch leaves its test an ordinary test (neither an expected failure nor an XPASS), so
one file serves every torch version a library tests against.

Listed tests run as ``xfail(strict=True)`` with the listed reason: a listed test that now passes fails the run
(so the file stays true), a failure that is not listed fails it as usual. ``--torchbind-accept`` rewrites the
file from the run (modelled on expecttest's accept mode and ``torch/testing/_internal/optests``'
``failures_dict.json``), changing only what the run saw:

* a test whose check ran and failed is listed, keeping an existing (reviewed) reason, else with its summary and
  ``"observed": [this series]``; this torch's series is added to an existing entry's ``observed``; a
  hand-written ``torch`` specifier that excludes this torch is widened to include it (the specifiers that
  exclude it are dropped);
* a test whose check ran and passed where its entry applied: this torch's series leaves the entry's
  ``observed`` (and is recorded under ``"passed"``, so the entry is not carried forward past it), and an entry
  with no series left is dropped; where the entry applied only as carried forward to a newer series, that series
  is recorded under ``"passed"``; a reason-only or ``torch``-specifier entry is
  dropped (its failure is not observed here; a run on a torch where it still fails lists it again, observed
  there). No entry ever expects a failure on a torch where none was observed;
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
from collections import Counter
from collections.abc import Collection, Iterable
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ..core.files import write_text_atomically
from ..core.qualname import split_id
from ..reports import encodable
from ..core.results import ConformanceError
from ..core.versions import torch_release

__all__ = ["SCHEMA", "BaselineError", "Entry", "load_baseline", "save_baseline", "merge_accepted", "stale_entries",
           "applying", "accept_changes", "accept_warning", "own_failure", "own_part", "TORCH_SIDE_CHECKS",
           "series"]

SCHEMA = "torchbind-baseline/1"


class BaselineError(ConformanceError, ValueError):
    """The baseline file cannot be read or does not have the documented structure."""


def series(torch_version: str) -> str:
    """The torch series (``"2.14"``) of ``torch_version`` (``torch.__version__``, ``"2.14.1+cu130"``)."""
    release = torch_release(torch_version)
    return f"{release.major}.{release.minor}"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One known failure: its ``reason`` and where it applies: ``observed`` (the torch series it was observed on,
    sorted, as ``--torchbind-accept`` records them; it also applies to newer series, up to the oldest of
    ``passed``, the newer series on which an accepting run saw it pass) or ``torch`` (a hand-written PEP 440
    specifier set such as ``"<2.14"``); neither: every release."""

    reason: str
    torch: str | None = None
    observed: tuple[str, ...] = ()
    passed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "observed", _sorted_series(self.observed))  # one spelling: sorted, no repeats
        # Only a series newer than every observed one bounds the carrying forward; an older one that passed is
        # simply not observed (and a series both observed and passed, hand-edited, counts as observed).
        newest = _series_key(self.observed[-1]) if self.observed else ()
        object.__setattr__(self, "passed", _sorted_series(p for p in self.passed if _series_key(p) > newest))

    def applies_to(self, torch_version: str) -> bool:
        """Whether the entry applies to ``torch_version`` (``torch.__version__``; its local label is ignored): a
        series in ``observed``, or one newer than every observed series and older than every ``passed`` one."""
        if self.observed:
            here = series(torch_version)
            return here in self.observed or self.carried_to(here)
        return self.torch is None or SpecifierSet(self.torch).contains(torch_release(torch_version),
                                                                        prereleases=True)

    def carried_to(self, here: str) -> bool:
        """Whether the entry applies to series ``here`` only as carried forward from the older series it was
        observed on (``here`` newer than all of them, not yet seen passing)."""
        if not self.observed or here in self.observed:
            return False
        key = _series_key(here)
        return key > _series_key(self.observed[-1]) and all(key < _series_key(p) for p in self.passed)

    def where(self) -> str:
        """Where it applies, for messages: ``torch 2.13, 2.14 and newer``, ``torch 2.13, 2.14 (passed on 2.15)``,
        ``torch <2.14`` or ``every torch``."""
        if self.observed:
            seen = "torch " + ", ".join(self.observed)
            return f"{seen} (passed on {', '.join(self.passed)})" if self.passed else f"{seen} and newer"
        return f"torch {self.torch}" if self.torch else "every torch"

    def to_json(self) -> str | dict:
        if self.observed:
            out = {"reason": self.reason, "observed": list(self.observed)}
            return {**out, "passed": list(self.passed)} if self.passed else out
        return self.reason if self.torch is None else {"reason": self.reason, "torch": self.torch}


def _entry(test_id: str, value, path: Path) -> Entry:
    if isinstance(value, str):
        return Entry(value)
    if isinstance(value, dict) and isinstance(value.get("reason"), str) and "observed" in value:
        seen, passed = value["observed"], value.get("passed", [])
        if not set(value) <= {"reason", "observed", "passed"} or not isinstance(seen, list) or not seen \
                or not all(_is_series(x) for x in seen):
            raise BaselineError(f"{path}: {test_id}: \"observed\" must be a non-empty list of torch series such as "
                                f"[\"2.13\", \"2.14\"] (and no \"torch\" beside it), got {seen!r}")
        if not isinstance(passed, list) or not all(_is_series(x) for x in passed):
            raise BaselineError(f"{path}: {test_id}: \"passed\" must be a list of torch series such as [\"2.15\"], "
                                f"got {passed!r}")
        return Entry(value["reason"], observed=_sorted_series(seen), passed=_sorted_series(passed))
    if isinstance(value, dict) and isinstance(value.get("reason"), str) and set(value) <= {"reason", "torch"}:
        spec = value.get("torch")
        if spec is not None:
            try:
                SpecifierSet(spec)
            except (InvalidSpecifier, TypeError):
                raise BaselineError(f"{path}: {test_id}: \"torch\" must be a PEP 440 specifier such as \"<2.14\" "
                                    f"or \"!=2.14.*\", got {spec!r}") from None
        return Entry(value["reason"], spec)
    raise BaselineError(f"{path}: {test_id}: an entry is a reason string, {{\"reason\": ..., \"torch\": "
                        "SPECIFIER} or {\"reason\": ..., \"observed\": [SERIES, ...]}")


def _unique(pairs: list[tuple[str, object]], path: Path) -> dict:
    """A JSON object from its ``(key, value)`` pairs (``json``'s ``object_pairs_hook``). Raises
    :class:`BaselineError` naming a key given twice: JSON lets the last one win silently, which would drop a
    reviewed reason, or the entry a merge conflict left above it."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise BaselineError(f"{path}: {key!r} is given twice in one JSON object; keep one of them")
        out[key] = value
    return out


def load_baseline(path: Path, missing_ok: bool = False) -> dict[str, Entry]:
    """``{test id: Entry}`` from ``path``. Raises :class:`BaselineError` for a missing (unless ``missing_ok``),
    unreadable or malformed file (a bad entry or ``torch`` specifier named), or a key given twice in one object
    (named)."""
    if not path.exists():
        if missing_ok:
            return {}
        raise BaselineError(f"{path}: no such baseline file (create it with --torchbind-accept)")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=lambda pairs: _unique(pairs, path))
    except BaselineError:
        raise
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


def _is_series(value) -> bool:
    return isinstance(value, str) and value.count(".") == 1 and all(p.isdigit() for p in value.split("."))


def _series_key(value: str) -> tuple[int, ...]:
    return tuple(int(p) for p in value.split("."))


def _sorted_series(values) -> tuple[str, ...]:
    return tuple(sorted(set(values), key=_series_key))


def _as_entry(value) -> Entry:
    if isinstance(value, Entry):
        return value
    if isinstance(value, dict):
        return Entry(value["reason"], value.get("torch"), _sorted_series(value.get("observed", ())),
                     _sorted_series(value.get("passed", ())))
    return Entry(value)


def save_baseline(path: Path, failures: dict[str, Entry | str | dict]) -> None:
    """Write ``failures`` (entries, reasons, or ``{"reason", "torch"}`` dicts) to ``path``, sorted by test id so
    reviews see small diffs, atomically. Raises ``OSError`` naming ``path`` (not the temporary file the write goes
    through) when it cannot be written; the previous file is then unchanged."""
    entries = {k: _as_entry(v).to_json() for k, v in sorted(failures.items())}
    doc = {"schema": SCHEMA, "known_failures": entries}
    # encodable: a summary holding an unpaired surrogate is written as its JSON escape, never a UnicodeEncodeError
    try:
        write_text_atomically(path, encodable(json.dumps(doc, indent=2, ensure_ascii=False) + "\n"))
    except OSError as exc:
        if exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def _widened(entry: Entry, torch_version: str) -> Entry:
    """``entry`` made to apply to ``torch_version`` too: the specifiers that exclude it are dropped."""
    release = torch_release(torch_version)
    kept = [s for s in SpecifierSet(entry.torch or "") if s.contains(release, prereleases=True)]
    return Entry(entry.reason, ",".join(sorted(str(s) for s in kept)) or None)


def merge_accepted(old: dict[str, Entry | str], results: dict[str, tuple[bool, str]],
                   stale: Collection[str] = (), torch_version: str | None = None) -> dict[str, Entry]:
    """The baseline after an accepting run on ``torch_version`` (default: the running torch). ``results`` maps
    each test id whose check ran to a verdict to ``(failed, summary)``: a failing test is listed (a new entry with
    its summary, observed on this series; an existing one keeps its reason and records this series, or is widened
    to this torch when a hand-written specifier excluded it); a passing test whose entry applied loses this
    series (the entry is dropped when no series is left, and a reason-only or specifier entry is dropped: see the
    module docstring). Entries for tests not in ``results`` (skipped, deselected, not collected, errored outside
    the check) are kept unchanged, except the ``stale`` ids (see :func:`stale_entries`), which are removed.
    Returns the new ``{test id: Entry}``."""
    if torch_version is None:
        import torch

        torch_version = torch.__version__
    here = series(torch_version)
    entries = {k: _as_entry(v) for k, v in old.items()}
    merged = {k: v for k, v in entries.items() if k not in results and k not in stale}
    for test_id, (failed, summary) in results.items():
        entry = entries.get(test_id)
        if failed:
            if entry is None:
                merged[test_id] = Entry(summary, observed=(here,))
            elif entry.observed:
                merged[test_id] = dataclasses.replace(entry, observed=_sorted_series((*entry.observed, here)),
                                                      passed=tuple(p for p in entry.passed if p != here))
            else:
                merged[test_id] = entry if entry.applies_to(torch_version) else _widened(entry, torch_version)
        elif entry is not None and entry.carried_to(here):
            # observed on older torch only, passing here: it stays for the older series, no longer for this one
            merged[test_id] = dataclasses.replace(entry, passed=_sorted_series((*entry.passed, here)))
        elif entry is not None and entry.applies_to(torch_version):
            left = tuple(x for x in entry.observed if x != here)
            if left:  # kept for the series it still fails on; this one (and what is newer) passes
                merged[test_id] = dataclasses.replace(entry, observed=left, passed=(*entry.passed, here))
        elif entry is not None:
            merged[test_id] = entry  # passed where it does not apply: nothing learnt about where it does
    return merged


#: Checks whose failure is a compiled program that differs from plain eager: a torch bug (or what a fake's
#: disagreement makes of the program). Every other check holds the fake (or a Python custom class) to the C++
#: class or to torch's protocol: its failure is a bug in the library's own code, never a torch limitation.
TORCH_SIDE_CHECKS = frozenset({"matrix"})

#: The part of a Python custom class each of its checks' rules holds (by rule id, else by check): what an accepted
#: failure of that rule is a bug in. A Python custom class has no fake class and no C++ class.
_CLASS_PARTS = {
    "guards.eq-ignores-state": "its __eq__", "guards.unguarded-change": "its guard_fn",
    "guards.mutated-constant": "a method that changes a constant object in place",
    "guards.stale-gradient": "its guard_fn", "guards.compiled-differs": "its guard_fn or an op's fake kernel",
    "guards.compiled-raises": "a hoisted object under compile", "guards.hoisted-differs":
    "a hoisted object under compile", "guards.hoisted-baked-in": "a hoisted object under compile",
    "recompiles": "its __eq__ or guard_fn", "eq_hash": "its __eq__ and __hash__", "fx_repr": "its __fx_repr__",
    "fake_kernel.undeclared-mutation": "an op's schema (an argument it writes undeclared)",
    "fake_kernel": "an op's fake kernel", "inlined": "an INLINED member", "baked": "an op that changes an object made "
    "in forward", "tracing": "a member that runs on the real object while tracing", "examples": "its example objects",
    "deepcopy": "its deepcopy",
}
#: The part of a TorchBind class's library a rule holds where it is not the fake (by rule id).
_TORCHBIND_PARTS = {"custom_op.undeclared-mutation": "the op's schema (an argument it writes undeclared)"}
#: Matrix rules whose failure is the library's own code, whatever the kind: the cell fails because a fake returns
#: a wrong result (``matrix.follows-from-fake``), or because eager's own gradient, the op's autograd formula,
#: disagrees with finite differences (``matrix.gradient-wrong``).
_OWN_MATRIX_RULES = {"matrix.follows-from-fake": "follows from a fake's wrong result",
                     "matrix.gradient-wrong": "an op's autograd formula disagrees with finite differences"}
#: The rules of a Python custom class's ``guards`` item that say a program compiled for one object is reused for
#: another that gets other results, and the matrix rule of a cell of the op's row (``OP``) or backward row
#: (``OP.backward``, :data:`conformance.matrix.gradients.BACKWARD`) that such a reuse makes.
_REUSE_RULES = {"matrix.stale-result": ("", {"guards.eq-ignores-state", "guards.unguarded-change"}),
                "matrix.gradient-differs": (".backward", {"guards.stale-gradient"})}


def own_part(test_id: str, rules: dict[str, list[str]] | None = None) -> str | None:
    """What of the library's own code the failure of ``test_id`` is a bug in, from the stable rule ids of this run's
    failures (``rules``: ``{test id: Verdict.rules}`` of every failed item; ``None``: not known, only the check
    decides): ``"the fake"`` for a TorchBind class's check (the op's schema for ``custom_op.undeclared-mutation``),
    the class's part for a Python custom class's (its
    ``guard_fn`` for ``guards.stale-gradient``, its ``__eq__`` for ``guards.eq-ignores-state``, ...); for a
    ``matrix`` cell, what it follows from when its rule is one of the library's (``matrix.follows-from-fake``,
    ``matrix.gradient-wrong``) or, for a Python custom class, when it is the stale result (or gradient) that the
    same run's failed ``guards`` item of its op says the class's ``__eq__`` or ``guard_fn`` lets torch give
    (``follows from guards[OP] (guards.stale-gradient: its guard_fn)``). ``None`` for a cell of the compile stack
    and for an id that names no check."""
    collector, check, target = split_id(test_id)
    custom = collector.startswith("torchbind[py:")
    mine = (rules or {}).get(test_id) or []
    rule = mine[0] if mine else ""
    if not check:
        return None
    if check not in TORCH_SIDE_CHECKS:
        if not custom:
            return _TORCHBIND_PARTS.get(rule, "the fake")
        part = _CLASS_PARTS.get(rule) or _CLASS_PARTS.get(check)
        return f"{rule}: {part}" if rule and part else rule  # "": the class's own, its rule not known
    if rule in _OWN_MATRIX_RULES:
        return f"{_OWN_MATRIX_RULES[rule]} ({rule})"
    if custom and rule in _REUSE_RULES:
        suffix, guard_rules = _REUSE_RULES[rule]
        row = target.rpartition("-")[0]
        op = row.removesuffix(suffix) if row.endswith(suffix) else None
        guards = f"{collector}::guards[{op}]"
        found = [r for r in (rules or {}).get(guards, ()) if r in guard_rules]
        if op and found:
            return f"follows from guards[{op}] ({found[0]}: {_CLASS_PARTS[found[0]]})"
    return None


def own_failure(test_id: str, rules: dict[str, list[str]] | None = None) -> bool:
    """Whether ``test_id`` (``torchbind[ns.Cls]::agreement[pop]``) is a failure of the library's own code (the fake
    against the C++ class, a custom class against its contract, a cell that follows from one: :func:`own_part`)
    rather than of the compile stack (``matrix``). ``False`` for an id that names no check."""
    _, check, _ = split_id(test_id)
    return bool(check) and (check not in TORCH_SIDE_CHECKS or own_part(test_id, rules) is not None)


def _label(test_id: str, entry: Entry, rules: dict[str, list[str]] | None) -> str:
    """The bracketed kind of a new entry (see :func:`accept_changes`)."""
    collector, check, _ = split_id(test_id)
    if not check:
        return ""
    part = own_part(test_id, rules)
    if "matrix.torch-defect" in (rules or {}).get(test_id, ()):
        return " [torch's defect: the fake agrees with C++ on every call of the program]"
    if part is None:
        return " [a compiled program differs from eager]"
    custom = collector.startswith("torchbind[py:")
    if check in TORCH_SIDE_CHECKS:
        whose = "class" if custom else "library"
        return f" [the {whose}'s own failure: {part}, not a torch limitation: {entry.reason}]"
    if not custom:
        return f" [the fake's own disagreement, not a torch limitation: {entry.reason}]"
    return f" [the class's own failure{f' ({part})' if part else ''}, not a torch limitation: {entry.reason}]"


def accept_changes(old: dict[str, Entry | str], new: dict[str, Entry],
                   rules: dict[str, list[str]] | None = None) -> list[str]:
    """What an accepting run changed, one line per test id: ``added ID (torch 2.14)``, ``dropped ID``,
    ``changed ID: torch 2.13 -> torch 2.13, 2.14``. A new entry says what kind of failure it accepts, from its
    check, its class's kind and the stable rule ids of this run's failures (``rules``: ``{test id:
    Verdict.rules}``; see :func:`own_part`): ``[a compiled program differs from eager]`` (a ``matrix`` cell of the
    compile stack: a torch bug), ``[the fake's own disagreement, not a torch limitation: SUMMARY]`` (a TorchBind
    class's other checks), ``[the class's own failure (RULE: PART), not a torch limitation: SUMMARY]`` (a Python
    custom class's, e.g. ``guards.stale-gradient: its guard_fn``), or for a cell that follows from the library's
    code ``[the class's own failure: follows from guards[OP] (RULE: PART), not a torch limitation: SUMMARY]``
    (``the library's own failure`` for a TorchBind class's cell). Accepting one of the library's own failures
    baselines a bug a newcomer should fix. Sorted by test id, the new failures of the library's own code last, apart."""
    before = {k: _as_entry(v) for k, v in old.items()}
    lines = []
    for test_id in sorted(set(before) | set(new),
                          key=lambda k: (k in new and k not in before and own_failure(k, rules), k)):
        a, b = before.get(test_id), new.get(test_id)
        if a is None:
            lines.append(f"added {test_id} ({b.where()}){_label(test_id, b, rules)}")
        elif b is None:
            lines.append(f"dropped {test_id}")
        elif a != b:
            lines.append(f"changed {test_id}: {a.where()} -> {b.where()}")
    return lines


def accept_warning(old: dict[str, Entry | str], new: dict[str, Entry],
                   rules: dict[str, list[str]] | None = None) -> str | None:
    """One line for an accepting run that listed failures of the library's own code (:func:`own_failure`, with
    ``rules`` as :func:`accept_changes` takes them) that the baseline did not have: how many, which checks (and,
    for a Python custom class, which rules and what part of the class each holds), and that they are bugs to fix,
    not torch limitations to accept; one sentence per kind of class; ``None`` when it listed none. (A newcomer's
    first ``--torchbind-accept`` baselined a real fake bug without a word.)"""
    added = sorted(k for k in new if k not in old and own_failure(k, rules))
    if not added:
        return None
    sentences = []
    for custom in (False, True):
        mine = [k for k in added if split_id(k)[0].startswith("torchbind[py:") == custom]
        if not mine:
            continue
        n = len(mine)
        many = n != 1
        cells = Counter(own_part(k, rules) for k in mine if split_id(k)[1] in TORCH_SIDE_CHECKS)
        shown = [f"{c} matrix cell{'s' if c != 1 else ''}: {part}" for part, c in sorted(cells.items())]
        if not custom:
            checks = sorted({split_id(k)[1] for k in mine} - TORCH_SIDE_CHECKS)
            if checks:
                shown.insert(0, f"{', '.join(checks)}: the fake disagrees with the C++ class or torch's protocol")
            bugs = f"{'these are bugs' if many else 'this is a bug'} in the "
            what = (f"of the fake's own as known ({'; '.join(shown)}): {bugs}fake" if not cells else
                    f"of the library's own code as known ({'; '.join(shown)}): {bugs}library")
        else:
            parts = Counter(own_part(k, rules) or split_id(k)[1] for k in mine
                            if split_id(k)[1] not in TORCH_SIDE_CHECKS)
            shown[:0] = [part if c == 1 else f"{part} ({c} items)" for part, c in sorted(parts.items())]
            what = (f"of a Python custom class's own code as known ({'; '.join(shown)}): "
                    f"{'these are bugs' if many else 'this is a bug'} in the class (it has no fake class or C++ class)")
        sentences.append(f"{n} failure{'s' if many else ''} {what}")
    many = len(added) != 1
    return (f"--torchbind-accept listed {'; and '.join(sentences)}, "
            f"{'not torch limitations' if many else 'not a torch limitation'}; fix {'them' if many else 'it'}, or "
            f"keep {'them' if many else 'it'} only with a reviewed reason (pytest without --torchbind-accept shows "
            "each failure)")


def stale_entries(known: Iterable[str], prefix: str, planned: Collection[str]) -> list[str]:
    """The ids in ``known`` that belong to one class (they start with ``prefix``, its ``torchbind[ns.Cls]::``)
    but are not among ``planned``, every item id the class's plan has: entries naming tests that no longer
    exist. Sorted."""
    return sorted(k for k in known if k.startswith(prefix) and k not in planned)
