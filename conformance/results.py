"""Result dataclasses: what a check found, rendered for a library author who did not write this plugin."""

from __future__ import annotations

import dataclasses
import textwrap

__all__ = ["Failure", "Outcome", "NotApplicable", "Verdict", "exception_line"]


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


class NotApplicable(Exception):
    """Raised by a check that cannot run for this target; the message says why (the item is skipped)."""


@dataclasses.dataclass(frozen=True)
class Failure:
    """One disagreement between a TorchBind class and its fake (or a broken protocol method).

    ``check`` is the check's name (``signature``), ``qualname`` the class (``ns::Cls``), ``target`` the method
    or op it concerns (``None`` for class-level findings). ``summary`` says which rule is broken; ``cpp`` and
    ``fake`` what each side did; ``details`` further lines (e.g. per-field differences); ``example`` the code
    that builds the example object, ``call`` the call made, ``program`` a matrix scenario's program and objects;
    ``repro`` a standalone Python script that shows the disagreement.
    """

    check: str
    qualname: str
    target: str | None
    summary: str
    cpp: str | None = None
    fake: str | None = None
    details: tuple[str, ...] = ()
    example: str | None = None
    call: str | None = None
    repro: str | None = None
    program: str | None = None

    @property
    def where(self) -> str:
        return f"{self.qualname}.{self.target}" if self.target else self.qualname

    def render(self) -> str:
        """Multi-line text: headline, example, call, what C++ and the fake did, differences, reproducer."""
        lines = [f"{self.where}: {self.summary}"]
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

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Verdict:
    """What a check may return instead of a plain failure list: ``failures``, a ``skipped`` reason (shown as a
    pytest skip), and ``data`` for reports (a JSON-serialisable dict, e.g. a matrix cell)."""

    failures: list[Failure] = dataclasses.field(default_factory=list)
    skipped: str | None = None
    data: dict | None = None


@dataclasses.dataclass
class Outcome:
    """Result of running one check on one target: ``failures`` (empty means passed) or ``skipped`` reason."""

    check: str
    qualname: str
    target: str | None
    failures: list[Failure] = dataclasses.field(default_factory=list)
    skipped: str | None = None
    data: dict | None = None

    @property
    def status(self) -> str:
        if self.skipped is not None:
            return "skipped"
        return "failed" if self.failures else "passed"
