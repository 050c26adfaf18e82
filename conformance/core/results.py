"""The one result model: what a check found, one status vocabulary, the matrix cell, and the verdict.

A check (see :mod:`conformance.checks`) reports findings as :class:`Failure` objects — returned in an iterable or
raised, one at a time — without naming itself or its class: the runner knows which check ran on which target and
builds the :class:`Verdict`. :class:`NotApplicable` skips the item. A coverage-matrix check returns its
:class:`Cell`. Every item and every cell has one :class:`Status`.

Path of a result, one :class:`Verdict` throughout: check -> :func:`conformance.runner.run_target` -> the pytest
item (:mod:`conformance.plugin.items`: ``torchbind_status`` in ``user_properties``; :meth:`Verdict.to_json` on the
call report's ``torchbind`` attribute, which pytest-xdist carries to the controller; kept in the reuse store the
same way) -> the controller's recorder (:mod:`conformance.plugin.recorder`, which rebuilds it with
:meth:`Verdict.from_json`: terminal summary, report files, baseline) -> the reports (:mod:`conformance.reports`).
"""

from __future__ import annotations

import dataclasses
import enum
import textwrap
from typing import Any

__all__ = ["NO_EAGER_REFERENCE", "Status", "Failure", "Note", "Verdict", "Outcome", "REUSED", "NotApplicable", "Cell",
           "ConformanceError", "SelectorError", "UnknownClassError", "RegistrationError", "Evidence", "exception_line"]

#: How a matrix cell's skip begins when plain eager gave no reference to compare with
#: (:meth:`conformance.matrix.cell.Rows.run_cell`); what follows is the cause, worded as a check's skip words it
#: (the recorder counts the two as one cause).
NO_EAGER_REFERENCE = "no eager reference: "


class Status(str, enum.Enum):
    """The status of an item or a matrix cell. ``UNSUPPORTED``: a matrix cell that failed the way a listed torch
    limitation fails (:mod:`conformance.matrix.limitations`); its item is skipped. ``UNTOLD``: a matrix cell whose
    program gave eager's results, but on objects that could not show whether it follows the object it is given or
    holds the traced one baked in (every object it ran on gives eager the same output); its item is skipped, saying
    what to give, since a stale program would have passed it too. ``TORCH_DEFECT``: a matrix cell that failed where
    the fake agrees with C++ on every call of the cell's program, replayed on real objects and their fakes as
    tracing makes them (:mod:`conformance.matrix.torchbind.explain`): torch's defect, not the fake's; its item fails
    (or, with ``--torchbind-torch-defects=skip``, is skipped) with rule ``matrix.torch-defect``."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    UNSUPPORTED = "unsupported"
    UNTOLD = "untold"
    TORCH_DEFECT = "torch-defect"

    def __str__(self) -> str:
        return self.value


def exception_line(exc: BaseException, limit: int | None = None) -> str:
    """``Type: first line`` of an exception for one-line messages; when the first line only introduces the cause
    (``backend='inductor' raised:``), the next non-empty line is added. Cut to ``limit`` characters (with
    ``...``) when given."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"
    if limit is not None and len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(exc).__name__}: {text}"


class ConformanceError(Exception):
    """The base of the errors a user sees about their own input — a class selector (``SelectorError``), a load
    spec (``LoadError``), a baseline file (``BaselineError``), reports to merge (``MergeError``), a scaffold request
    (``ScaffoldError``), a report path of an unsupported format (``ReportFormatError``), misuse of
    ``conformance.examples``/``conformance.strategy`` (``RegistrationError``): the message says what is wrong and what to do, and the plugin turns it into a usage error
    (exit status 4) or the command line into exit status 2. Findings about the class under test are
    :class:`Failure` objects, not errors."""


class SelectorError(ConformanceError, ValueError):
    """A ``--torchbind-class`` selector (``ns::Cls``, ``module.QualName`` or an fnmatch pattern on either) that is
    malformed or names no loaded class of either kind; the message lists what does exist."""


class UnknownClassError(SelectorError, KeyError):
    """A class name (``ns::Cls`` or ``module.QualName``) that no loaded library or module registered, asked for by
    name (:meth:`conformance.runner.Engine.context`, :func:`conformance.run_class`); the message lists what is
    registered. A ``KeyError`` too, as discovery raised before it was a :class:`SelectorError`."""

    __str__ = SelectorError.__str__  # the message as written, not KeyError's quoted repr


class RegistrationError(ConformanceError, ValueError, TypeError):
    """A call of ``conformance.examples`` or ``conformance.strategy`` the plugin cannot use (a malformed class or op
    name, a method or argument the class does not have, a strategy factory that returns or draws the wrong kind of
    value); the message names the call. A ``ValueError`` and a ``TypeError`` too, as these errors were before they
    shared the one base of errors about the user's input."""


class NotApplicable(Exception):
    """Raised by a check that cannot run for this target; the message says why (the item is skipped)."""


@dataclasses.dataclass(frozen=True)
class Note:
    """Something a check found that does not fail its item but that the reports show (the item's captured
    output's "torchbind notes" section, the JSON report's verdicts): e.g. a fake that returns
    where C++ rejects the arguments (torch raises at run time then, so no compiled program goes wrong). A check
    returns notes among its failures."""

    text: str


@dataclasses.dataclass(eq=False)
class Failure(Exception):
    """One disagreement between a TorchBind class and its fake (or a broken protocol method). A check returns
    failures or raises one.

    ``summary`` says which rule is broken; ``target`` the method or op it concerns when that is not the item's own
    target (``None``: the item's); ``cpp`` and ``fake`` what each side did; ``details`` further lines (e.g.
    per-field differences); ``example`` the code that builds the example object; ``call`` the call made;
    ``program`` a matrix scenario's program and objects; ``repro`` a standalone Python script that shows the
    disagreement; ``rule`` the stable id of the rule broken (``check.rule``, e.g. ``signature.arg-type``; listed in
    docs/reference/checks.md), which tests and tools match on instead of the prose of ``summary``.
    """

    summary: str
    target: str | None = None
    cpp: str | None = None
    fake: str | None = None
    details: tuple[str, ...] = ()
    example: str | None = None
    call: str | None = None
    repro: str | None = None
    program: str | None = None
    rule: str = ""

    def __post_init__(self) -> None:
        super().__init__(self.summary)
        self.details = tuple(self.details)

    def __reduce__(self):  # pickled to and from the isolation worker: rebuild from the fields, not Exception.args
        return (_rebuild_failure, (type(self), dataclasses.asdict(self)))

    def __str__(self) -> str:
        return self.summary

    def render(self, qualname: str, target: str | None = None) -> str:
        """Multi-line text for the failure of an item of ``qualname`` (``ns::Cls``) whose target is ``target``:
        headline, example, call, what C++ and the fake did, differences, reproducer."""
        where = self.target or target
        lines = [f"{qualname}.{where}: {self.summary}" if where else f"{qualname}: {self.summary}"]
        if self.example:
            lines.append("  example object:")
            lines += ["    " + ln for ln in self.example.splitlines()]
        if self.program:
            lines.append("  program:")
            lines += ["    " + ln for ln in self.program.splitlines()]
        if self.call:
            lines.append(f"  call:  {self.call}")
        if self.cpp is not None:
            lines.append(f"  C++:   {self.cpp}")
        if self.fake is not None:
            lines.append(f"  fake:  {self.fake}")
        for d in self.details:
            lines.append(f"  - {d}")
        if self.repro:
            lines.append("  reproduce with this script:")
            lines.append(textwrap.indent(self.repro.rstrip(), "    | ", lambda _: True))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON-serialisable dict."""
        return {**dataclasses.asdict(self), "details": list(self.details)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Failure:
        """The inverse of :meth:`to_json`. Raises ``TypeError`` for a malformed dict."""
        return cls(**{**data, "details": tuple(data.get("details", ()))})


def _rebuild_failure(cls: type, fields: dict) -> Failure:
    return cls(**fields)


@dataclasses.dataclass
class Cell:
    """One coverage-matrix cell: a scenario (``row``) of class ``qualname`` through a ``backend``, compared with
    plain eager. ``row_index`` / ``backend_index`` fix its place in the report whatever order cells arrive in.
    ``reason``: one line for the report's footnote; ``details``: further lines (mismatches, traceback tail);
    ``program``: the scenario's source and objects; ``limitation``: the key of the matching
    :data:`~conformance.matrix.limitations.LIMITATIONS` entry of an ``UNSUPPORTED`` cell; ``repro``: a failed
    cell's standalone script (:mod:`conformance.matrix.torchbind.repro`), or empty; ``rule``: a failed cell's rule
    id (:data:`conformance.matrix.cell.RULES`), which its item's :class:`Failure` carries; ``signature``: a
    ``TORCH_DEFECT`` cell's defect signature (:func:`conformance.matrix.cell.defect_signature`: the backend, and the
    exception's type and torch site or the kind of wrong value), by which reports group torch's defects;
    ``found``: what such a cell found, the rule id a cell whose fake is wrong would carry (``matrix.raises``,
    ``matrix.state-differs``...), while its ``rule`` is ``matrix.torch-defect``."""

    qualname: str
    row: str
    backend: str
    row_index: int
    backend_index: int
    status: Status = Status.PASSED
    reason: str = ""
    details: list[str] = dataclasses.field(default_factory=list)
    program: str = ""
    limitation: str | None = None
    repro: str = ""
    rule: str = ""
    signature: str = ""
    found: str = ""

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    def to_json(self) -> dict[str, Any]:
        """The cell as a JSON-serialisable dict (``status`` as its string value)."""
        return {**dataclasses.asdict(self), "status": self.status.value, "details": list(self.details)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cell:
        """The inverse of :meth:`to_json`. Raises ``TypeError`` / ``ValueError`` for a malformed dict."""
        return cls(**data)


@dataclasses.dataclass
class Evidence:
    """What a verdict rests on: how many comparisons of each kind its check made (``counts``: ``{"result": 12,
    "state": 3}`` — results of calls C++ returned from compared with the fake's, flattened states compared, eager
    outputs compared with a compiled program's, signatures compared with C++ schemas). Collected by the engine
    (:mod:`conformance.core.evidence`); a pass needs at least one comparison."""

    counts: dict[str, int] = dataclasses.field(default_factory=dict)

    def add(self, what: str, count: int = 1) -> None:
        """Count ``count`` more comparisons of ``what``."""
        self.counts[what] = self.counts.get(what, 0) + count

    @property
    def total(self) -> int:
        """Every comparison counted."""
        return sum(self.counts.values())

    def describe(self) -> str:
        """One line, e.g. ``12 results, 3 states compared``, ``1 pair of objects told apart by __eq__``; ``nothing
        compared`` when empty. A kind's noun is its last word, or the word before its first ``of``."""
        if not self.counts:
            return "nothing compared"
        return ", ".join(f"{n} {_noun(what, n)}" for what, n in sorted(self.counts.items())) + " compared"


def _noun(what: str, n: int) -> str:
    """``what`` (a noun phrase in the singular: ``"result"``, ``"compiled call of a twin"``) for ``n`` of them."""
    if n == 1:
        return what
    head, of, rest = what.partition(" of ")
    return f"{head}s{of}{rest}"


@dataclasses.dataclass
class Verdict:
    """The verdict on one check of one target of one class (one pytest item): what the engine returns, what the
    item reports, what the reuse store keeps and what the recorder and the reports read. :meth:`to_json` and
    :meth:`from_json` are the only places a verdict becomes a dict and back (the call report's ``torchbind``
    attribute, which pytest-xdist carries to the controller; an entry of the reuse store; a row of the JSON
    report).

    ``check`` is the check's name, ``qualname`` the class (``ns::Cls``), ``target`` the method, op or cell name
    in the item's id (``None`` for class-level checks; ``check`` is ``None`` only for an item whose worker died
    before it said what it was). ``status`` is ``PASSED``, ``FAILED`` (``failures`` says why) or ``SKIPPED``
    (``reason`` says why); ``reason`` is also the line of a failed verdict no :class:`Failure` says (an item that
    reported nothing, a verdict read back from a JSON report). ``cell`` is the matrix cell for matrix items;
    ``notes`` what the check found that does not change the status (:class:`Note` texts); ``lost``: a crash or
    hang decided the verdict (the check's process crashed or hung, its result could not be sent back, or an
    example object of the class was left out because building it did), so it says nothing a rerun would say
    again (``--torchbind-reuse`` never keeps it); ``evidence``: the comparisons the check made (a ``PASSED``
    verdict has at least one: :func:`conformance.runner.run_target` enforces it). ``item``: the item's name in
    its test id (``check[target]``; made from ``check`` and ``target`` when not given); ``baseline``: the
    recorder's mark of a failure the baseline lists (the item was a strict xfail); ``read_rules``: the rule ids
    of a verdict read back from a row of the JSON report, which holds no failures (:attr:`rules` gives them).

    ``conformance.Outcome`` is this class (:data:`Outcome`), its name in the public API.
    """

    check: str | None
    qualname: str
    target: str | None
    status: Status = Status.PASSED
    failures: list[Failure] = dataclasses.field(default_factory=list)
    reason: str | None = None
    cell: Cell | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    lost: bool = False
    evidence: Evidence = dataclasses.field(default_factory=Evidence)
    item: str = ""
    baseline: bool = False
    read_rules: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if not self.item and self.check:
            self.item = self.check if self.target is None else f"{self.check}[{self.target}]"

    @classmethod
    def of_failures(cls, check: str, qualname: str, target: str | None, failures: list[Failure | Note],
                    cell: Cell | None = None) -> Verdict:
        """``FAILED`` with the :class:`Failure` objects among ``failures``, or ``PASSED`` when there are none;
        the :class:`Note` objects among them become :attr:`notes`."""
        notes = [f.text for f in failures if isinstance(f, Note)]
        failures = [f for f in failures if not isinstance(f, Note)]
        return cls(check, qualname, target, Status.FAILED if failures else Status.PASSED, failures,
                   cell=cell, notes=notes)

    @classmethod
    def skip(cls, check: str, qualname: str, target: str | None, reason: str, cell: Cell | None = None
             ) -> Verdict:
        """``SKIPPED``, saying why (``reason``)."""
        return cls(check, qualname, target, Status.SKIPPED, reason=reason, cell=cell)

    def render(self) -> str:
        """Every failure, rendered for this item (see :meth:`Failure.render`), separated by blank lines."""
        return "\n\n".join(f.render(self.qualname, self.target) for f in self.failures)

    @property
    def summary(self) -> str:
        """One line: the headline of the first failure (``ns::Cls.method: summary``), the reason, or the
        status."""
        if self.failures:
            return self.failures[0].render(self.qualname, self.target).splitlines()[0]
        return self.reason or self.status.value

    @property
    def rules(self) -> list[str]:
        """The stable rule ids of its failures (:attr:`Failure.rule`, e.g. ``signature.arg-type``), in order, each
        once; ``[]`` for a verdict that did not fail. A verdict read back from a JSON report row, which holds no
        failures, has the row's (:attr:`read_rules`). Tools match a failed verdict on these, not on its prose."""
        if self.failures:
            return list(dict.fromkeys(f.rule for f in self.failures if f.rule))
        return list(self.read_rules)

    @property
    def reused(self) -> bool:
        """Whether the verdict was read back from the reuse store (a note begins with :data:`REUSED`)."""
        return any(n.startswith(REUSED) for n in self.notes)

    def to_json(self) -> dict[str, Any]:
        """The verdict as a JSON-serialisable dict: ``item``, ``check``, ``target``, ``status`` (its string
        value), ``summary``, ``baseline``, ``notes``, ``evidence`` (counts by kind) — in this order, the fields a
        row of the JSON report has (:mod:`conformance.reports.json_report`) — then ``qualname``, ``reason``,
        ``lost``, ``failures`` (:meth:`Failure.to_json` each) and ``cell`` (:meth:`Cell.to_json`, or ``None``).
        The failures hold the :attr:`rules`; a row, which drops them, adds ``rules`` instead."""
        return {"item": self.item, "check": self.check, "target": self.target, "status": self.status.value,
                "summary": self.summary, "baseline": self.baseline, "notes": list(self.notes),
                "evidence": dict(self.evidence.counts), "qualname": self.qualname, "reason": self.reason,
                "lost": self.lost, "failures": [f.to_json() for f in self.failures],
                "cell": None if self.cell is None else self.cell.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        """The inverse of :meth:`to_json`; every field but ``status`` may be missing (a row of a JSON report has
        no ``qualname``, ``failures`` or ``cell``). A ``summary`` that neither the failures nor the reason give
        becomes the reason, so the verdict says the same line; the ``rules`` of a dict without failures (a row)
        become :attr:`read_rules`, so it names the same rules. Raises ``KeyError``, ``TypeError`` or
        ``ValueError`` for a malformed dict."""
        cell = data.get("cell")
        failures = [Failure.from_json(f) for f in data.get("failures", ())]
        verdict = cls(data.get("check"), data.get("qualname", ""), data.get("target"), Status(data["status"]),
                      failures, data.get("reason"), None if cell is None else Cell.from_json(cell),
                      notes=list(data.get("notes", ())), lost=bool(data.get("lost", False)),
                      evidence=Evidence(dict(data.get("evidence", {}))), item=data.get("item", ""),
                      baseline=bool(data.get("baseline", False)),
                      read_rules=[] if failures else [str(r) for r in data.get("rules", ())])
        summary = data.get("summary")
        if summary is not None and verdict.summary != summary:
            verdict.reason = summary
        return verdict


#: How the note of a verdict read back from the reuse store begins (:func:`conformance.plugin.reuse.reused_note`;
#: :attr:`Verdict.reused` and the reports find reused verdicts by it).
REUSED = "reused from "

#: The public name of :class:`Verdict` (``conformance.Outcome``; :func:`conformance.run_class` returns them).
Outcome = Verdict
