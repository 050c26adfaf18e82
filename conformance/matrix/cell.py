"""Run one coverage-matrix cell (a row's program through a backend) and compare it with plain eager: the one
skeleton both kinds of class share.

A kind gives its :class:`Rows` (:mod:`conformance.matrix.torchbind.run`, :mod:`conformance.matrix.custom.run`): its
row names, the scenario of a row (the program and the objects it runs on), and how the program runs through a
backend and differs from eager. :meth:`Rows.run_cell` does the rest the same way for both: a cell that cannot run
skips saying why, a difference or an error is ``UNSUPPORTED`` when an entry of the limitation table
(:mod:`conformance.matrix.limitations`) shows it by its evidence and ``FAILED`` otherwise, with the rule id of
what went wrong (:data:`RULES`); a cell that found nothing passes, unless its objects could not tell a stale
program from a right one (``UNTOLD``: every object it ran on gives eager one output), which says what to give.
"""

from __future__ import annotations

import dataclasses
import traceback
from typing import Any

from ..core.evidence import collecting, replay
from ..core.results import NO_EAGER_REFERENCE, Cell, Evidence, Failure, NotApplicable, Status, exception_line
from ..engine.arguments import Excluded
from ..engine.dynamo_state import skip_reason
from .backends import Backend, all_backends, get_backend
from .explain import Agreement, FakeCause
from .limitations import observation, raised_at

__all__ = ["Rows", "Difference", "RULES", "RAISES", "OUTPUT_DIFFERS", "STALE_RESULT", "STATE_DIFFERS",
           "TRACING_CHANGED_OBJECT", "FOLLOWS_FROM_FAKE", "GRADIENT_DIFFERS", "GRADIENT_WRONG", "TORCH_DEFECT",
           "new_cell", "cell_failure", "cell_skip_reason", "defect_signature"]

RAISES = "matrix.raises"
OUTPUT_DIFFERS = "matrix.output-differs"
STALE_RESULT = "matrix.stale-result"
STATE_DIFFERS = "matrix.state-differs"
TRACING_CHANGED_OBJECT = "matrix.tracing-changed-object"
FOLLOWS_FROM_FAKE = "matrix.follows-from-fake"
GRADIENT_DIFFERS = "matrix.gradient-differs"
GRADIENT_WRONG = "matrix.gradient-wrong"
TORCH_DEFECT = "matrix.torch-defect"
#: The rule id of each way a cell fails (the ``rule`` of a failed :class:`~conformance.core.results.Cell` and of
#: its item's :class:`~conformance.core.results.Failure`), listed in docs/reference/checks.md.
RULES = {
    RAISES: "compiling, exporting, loading or running the program through the backend raised where plain eager ran "
            "it, and no known limitation has that exception's type and site",
    OUTPUT_DIFFERS: "an output of the program differs from plain eager's",
    STALE_RESULT: "on an object in another state, an output (or the object's state) is what plain eager gives on "
                  "the traced object: the program kept the traced object's result (burned in, or no guard on the "
                  "object), where no known limitation says the backend does",
    STATE_DIFFERS: "the object's state after the program (or that of another object passed to it) differs from what "
                   "plain eager leaves",
    TRACING_CHANGED_OBJECT: "tracing ahead of time changed the real object it traced with, or left FakeTensors in it",
    FOLLOWS_FROM_FAKE: "the cell fails because a fake returns a wrong result: a method's or op's fake disagrees with "
                       "C++ on the program's calls (the agreement, custom_op or return_type item that reports it is "
                       "named); for a Python custom class, an op's fake returns other shapes or dtypes than the op "
                       "on plain eager's call (its `fake_kernel[op]` item is named)",
    GRADIENT_DIFFERS: "a backward row: a gradient of the loss through the backend differs from plain eager's, or the "
                      "backend's outputs carry no gradient where eager's do",
    GRADIENT_WRONG: "a backward row: plain eager's own gradient (the op's autograd formula) disagrees with finite "
                    "differences (torch.autograd.gradcheck's Jacobians) where the forward is not flat: every backend "
                    "differentiates the same wrong formula, so one cell of the row reports it (its first column "
                    "that differentiates, torch.compile eager), where that backend reproduces eager; the row's "
                    "other cells say so in a note",
    TORCH_DEFECT: "the cell failed (it raised, or its outputs or states differ from plain eager's) where the "
                  "program's calls, replayed on real objects and on their fakes as tracing makes them, agree on every "
                  "result (and, for a backend that copies the object, its pickling keeps its state): torch's defect, "
                  "not the fake's, grouped by its signature; fails its item unless --torchbind-torch-defects=skip",
}


@dataclasses.dataclass(frozen=True)
class Difference:
    """One line of what a cell's program did differently from plain eager: ``line`` (the text the cell reports) and
    ``rule`` (its rule id, one of :data:`RULES`: the cell's, when it is the first line)."""

    rule: str
    line: str

    @classmethod
    def each(cls, rule: str, texts: list[str]) -> list[Difference]:
        """Each of ``texts`` as a :class:`Difference` of ``rule``."""
        return [cls(rule, text) for text in texts]


class Rows:
    """A kind's coverage-matrix rows, and the skeleton that runs one cell of them (:meth:`run_cell`). A kind
    overrides the hooks below; :meth:`run_cell` is the same for both."""

    #: What a hang inside the compile-and-run stretch is blamed on (``side`` of the tracer's ``calling``).
    side: str | None = None

    def names(self, ctx) -> list[str]:
        """The class's rows, in report order (no objects are built)."""
        raise NotImplementedError

    def qualname(self, ctx) -> str:
        """The class's name, as its cells carry it."""
        raise NotImplementedError

    def cannot_run(self, ctx) -> str | None:
        """Why no cell of the class can run at all (its cells skip with it), or ``None``."""
        return None

    def is_backward_row(self, ctx, row: str) -> bool:
        """Whether ``row`` is one of the class's backward rows (:mod:`conformance.matrix.gradients`)."""
        return False

    def cannot_run_in(self, ctx, row: str, backend: Backend) -> str | None:
        """Why ``row`` has no cell through ``backend``, or ``None``: a backward row through a backend autograd
        cannot differentiate (:attr:`~conformance.matrix.backends.Backend.no_backward`); the cell skips with it."""
        if backend.no_backward and self.is_backward_row(ctx, row):
            return backend.no_backward
        return None

    def scenario(self, ctx, row: str) -> Any:
        """The scenario of ``row``. Raises :class:`~conformance.core.results.NotApplicable` when plain eager runs
        no program of the row (with the program as ``program`` where it has one), or
        :class:`~conformance.engine.arguments.Excluded` when the adopter excluded what the row calls."""
        raise NotImplementedError

    def program(self, scn) -> str:
        """The scenario's program and objects, for the cell and its failure."""
        raise NotImplementedError

    def label(self, ctx, row: str, backend: Backend, program: str) -> Any:
        """The tracer's label of the compile-and-run stretch (a string, or a function making one)."""
        raise NotImplementedError

    def run(self, ctx, scn, backend: Backend) -> list[Difference]:
        """Prepare the program through ``backend``, run it, and list every difference from plain eager; raises what
        torch or the class raised."""
        raise NotImplementedError

    def for_backend(self, scn, backend: Backend) -> Any:
        """The scenario ``backend`` runs for the row's ``scn``: ``scn`` itself, unless the kind has a variant for a
        backend that cannot run it as it is."""
        return scn

    def under_autocast(self, scn) -> Any:
        """The scenario whose plain eager reference is made under the autocast the caller entered (a column with
        :attr:`~conformance.matrix.backends.Backend.autocast`): raises what eager raised there. The default, for a
        kind that runs eager inside :meth:`run`, checks nothing and returns ``scn``."""
        return scn

    def cache(self, ctx) -> dict | None:
        """Where the class's cells are kept by program, so that two rows with the same program and objects compile
        and run it once (``None``: never)."""
        return None

    def preface(self, scn) -> list[str]:
        """Detail lines every cell of the scenario starts with (after its evidence)."""
        return []

    def repro(self, ctx, scn, backend: Backend) -> str | None:
        """A standalone script that reproduces a failed cell, or ``None``."""
        return None

    def fake_cause(self, ctx, scn, backend: Backend) -> FakeCause | Agreement | None:
        """Whose a failed cell's failure is: a :class:`~conformance.matrix.explain.FakeCause` when it follows from a
        fake's wrong result, an :class:`~conformance.matrix.explain.Agreement` when the program's calls replayed on
        real objects and their fakes agree on every result (torch's defect), else ``None`` (not told)."""
        return None

    def family(self, row: str) -> str:
        """What kind of program ``row`` runs, in words, for a torch defect's signature (rows of one kind, of any
        class, fail by the same defect): the row itself by default."""
        return row

    def unsure(self, ctx, scn, backend: Backend) -> list[str]:
        """The notes of a cell that passed whose objects could not tell a stale program from a right one: for a
        scenario that is not :meth:`told`, the first says what to give (the ``UNTOLD`` cell's reason)."""
        return []

    def told(self, scn, backend: Backend) -> bool:
        """Whether the scenario's objects can show, through ``backend``, a program that holds the traced object
        baked in: some object it runs on after the first gives eager another output (``scn.telling``). A cell
        that found no difference on a scenario that is not told is ``UNTOLD``, never ``PASSED``."""
        return bool(getattr(scn, "telling", True))

    def notes(self, scn) -> list[str]:
        """The notes every cell of the scenario ends with (how its inputs were chosen)."""
        return []

    # ----- the skeleton ----------------------------------------------------------------------------------------

    def new_cell(self, ctx, row: str, backend: str) -> Cell:
        """A ``PASSED`` :class:`Cell` of ``ctx``'s class for ``row`` through ``backend`` (both by name)."""
        return new_cell(self.qualname(ctx), self.names(ctx).index(row), row, backend)

    def run_cell(self, ctx, row: str, backend: str | Backend) -> Cell:
        """Run the cell of ``ctx``'s class for ``row`` through ``backend`` (by name, or a :class:`Backend`
        object) and compare it with plain eager. Never raises for errors in torch or the class: they make the
        cell ``FAILED`` (with its :data:`RULES` id) or ``UNSUPPORTED`` (a known limitation, by its evidence). A
        cell that cannot run is ``SKIPPED`` saying why: a class no backend can trace, dynamo disabled for a
        ``torch.compile`` backend, a row the adopter excluded, or one whose program plain eager rejects (n/a,
        keeping the program), or rejects under the column's autocast. A column with an ``autocast`` runs the
        program and plain eager's reference (:meth:`under_autocast`) under that same autocast."""
        backend = get_backend(backend) if isinstance(backend, str) else backend
        cell = self.new_cell(ctx, row, backend.name)
        why = self.cannot_run(ctx) or self.cannot_run_in(ctx, row, backend)
        if why is None and backend.dynamo:  # torch.compile would run the program eagerly: nothing to judge
            why = skip_reason(f"the {backend.group} {backend.title} cell")
        if why is not None:
            cell.status, cell.reason = Status.SKIPPED, why
            return cell
        try:
            scn = self.scenario(ctx, row)
        except Excluded as exc:
            cell.status, cell.reason = Status.SKIPPED, str(exc)
            return cell
        except NotApplicable as exc:  # n/a: say what eager raised, and keep the program it raised on
            cell.status, cell.reason = Status.SKIPPED, f"{NO_EAGER_REFERENCE}{exc}"
            program = getattr(exc, "program", None)  # the row's program, where the kind built one
            if program is not None:
                cell.program = program or None
            return cell
        scn = self.for_backend(scn, backend)
        cell.program = self.program(scn)
        if backend.autocast is not None:  # eager's reference runs under the column's autocast too
            try:
                with backend.autocasting():
                    scn = self.under_autocast(scn)
            except Exception as exc:  # noqa: BLE001 - eager rejects the program under autocast: nothing to compare
                cell.status = Status.SKIPPED
                cell.reason = f"{NO_EAGER_REFERENCE}plain eager under {backend.autocast_text} raises " \
                              f"{exception_line(exc, limit=300)}"
                return cell
        cache = self.cache(ctx)
        same = (cell.program, bool(scn.dynamic), backend)  # backend: the object (a test's may reuse a name)
        earlier, compared = (cache or {}).get(same, (None, None))
        if earlier is not None:  # another row generated the same program and objects: compiled and run once
            replay(compared)  # the verdict rests on the comparisons made then
            return dataclasses.replace(earlier, row=row, row_index=cell.row_index, details=[
                *earlier.details, f"the same program and objects as row {earlier.row}: compiled and run once for "
                                  "both"])
        compared = self._judge(ctx, scn, backend, cell)
        replay(compared)
        if cache is not None:
            cache[same] = (cell, compared)  # only once its verdict is set (a BaseException leaves nothing)
        return cell

    def _judge(self, ctx, scn, backend: Backend, cell: Cell) -> Evidence:
        """Run the scenario through the backend and set the cell's verdict from what it did. Returns the
        comparisons of the program with eager (what a twin row's cell rests on too)."""
        compared = Evidence()
        try:
            # The label carries the program: a worker lost in here (a hang in torch's compiler) shows it.
            with ctx.tracer.calling(self.label(ctx, cell.row, backend, cell.program), timed=False, side=self.side), \
                    collecting() as compared, backend.autocasting():
                found = self.run(ctx, scn, backend)
            evidence = [d.line for d in found]
            failure_details, matched, rule = evidence, evidence[0] if evidence else "", found[0].rule if found else ""
        except Exception as exc:  # noqa: BLE001 - compile/export/runtime errors are this cell's result
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            evidence, rule = [exception_line(exc, limit=400)], RAISES
            failure_details = [ln.rstrip() for ln in tb[-4:]] + _compiler_hint(f"{type(exc).__name__}: {exc}")
            matched = exc  # the limitation table matches the exception itself (its type and site), not its text
        cell.details = self.preface(scn)
        if backend.autocast is not None:
            cell.details.insert(0, f"the program through {backend.title} and plain eager both ran under "
                                   f"{backend.autocast_text}")
        if not evidence:
            unsure = self.unsure(ctx, scn, backend)
            cell.details += unsure + self.notes(scn)
            if not self.told(scn, backend):  # a stale program would have passed too: not a pass
                cell.status, cell.reason = Status.UNTOLD, unsure[0]
            return compared
        found_limitation = observation(backend.name, scn, matched)
        left = _unexplained(backend, scn, found) if found_limitation is not None and isinstance(matched, str) else []
        if left:  # a limitation seen in one output explains that output, not the others
            cell.details = [f"known limitation {found_limitation[0].key} explains {evidence[0]!r}, not the output "
                            "lines before it"] + cell.details
            evidence = [d.line for d in left] + [e for e in evidence if e not in {d.line for d in left}]
            failure_details, matched, rule, found_limitation = evidence, left[0].line, left[0].rule, None
        if found_limitation is not None:
            limitation, seen = found_limitation
            cell.status, cell.limitation = Status.UNSUPPORTED, limitation.key
            cell.reason = f"{limitation.reason} (observed for this class: {seen})"
            cell.details = evidence + [f"known limitation {limitation.key}: {limitation.source}"] + cell.details
        else:
            cell.status, cell.reason, cell.rule = Status.FAILED, evidence[0], rule
            raised = [] if isinstance(matched, str) else [f"{raised_at(matched)}: no known limitation has this "
                                                          "exception type and site"]
            cell.details = failure_details + raised + _autocast_hint(backend, rule) + cell.details
            cell.repro = self.repro(ctx, scn, backend) or ""
        # Whose the failure is: a fake's wrong result makes the program wrong (name its item); a fake that agrees
        # with C++ on every call leaves torch's defect. A documented limitation's cell is explained already.
        cause = self.fake_cause(ctx, scn, backend) if cell.status is Status.FAILED else None
        if isinstance(cause, FakeCause) and rule == RAISES and not cause.explains(matched):
            cell.details.insert(0, cause.unexplained(raised_at(matched)))
            cause = None
        if isinstance(cause, Agreement):
            cell.status, cell.rule, cell.found = Status.TORCH_DEFECT, TORCH_DEFECT, rule
            cell.signature = defect_signature(backend, rule, matched, self.family(cell.row))
            cell.details.insert(0, cause.detail)
        elif cause is not None:
            cell.reason = f"{cell.reason} ({cause.reference})"
            cell.details.insert(0, cause.detail)
            cell.rule = FOLLOWS_FROM_FAKE
        cell.details += self.notes(scn)
        return compared


def _unexplained(backend: Backend, scn, found: list[Difference]) -> list[Difference]:
    """The lines of a cell's outputs (``run N output[i] ...``) that no known limitation explains, where one
    explains the cell's first line, an output too: a limitation seen in one output (an int result export burned in)
    says nothing of another (a list result of the same program whose length export fixed)."""
    outputs = (OUTPUT_DIFFERS, STALE_RESULT)
    if not found or found[0].rule not in outputs:
        return []
    return [d for d in found[1:] if d.rule in outputs and d.line.startswith("run ") and
            observation(backend.name, scn, d.line) is None]


def _autocast_hint(backend: Backend, rule: str) -> list[str]:
    """A detail line for an output of a column under autocast that differs from eager's under the same autocast:
    the usual cause, and the fix on the op's side."""
    if backend.autocast is None or rule != OUTPUT_DIFFERS:
        return []
    return ["under autocast, a compiled program runs its graph with autocast off (AOTAutograd casts as it traced, "
            "then turns autocast off while the graph runs: pytorch#86515), so an op whose kernel relies on the "
            "autocast around it (a matmul inside a custom op or a TorchBind method) computes in another dtype or "
            "precision than in eager; torch.library.register_autocast(op, device_type, dtype) gives a custom op one "
            "rule for both: cast its inputs, run its kernel with autocast off"]


def _compiler_hint(error: str) -> list[str]:
    """A detail line for a cell whose compile failed in inductor's C++ compiler (``CppCompileError``, from
    ``torch/_inductor/cpp_builder.py``): a toolchain problem, not the class's, that fails plain ``torch.compile``
    the same way; names the cache directory when its path holds a space, which inductor's compile command does
    not quote (``g++: fatal error: input file '/tmp/a' is the same as output file``)."""
    if "CppCompileError" not in error:
        return []
    from ..engine.torch_api import inductor_cache_dir as cache_dir

    where = cache_dir()
    spaced = (f" Torch's cache directory {where!r} (TORCHINDUCTOR_CACHE_DIR) has a space in its path, which "
              "inductor's C++ compile command does not quote: use a directory without one."
              if any(c.isspace() for c in where) else "")
    return ["inductor's C++ compiler failed on the code inductor generated: a toolchain problem (the compiler, its "
            "flags, the paths it is given) fails every inductor and AOTInductor cell, and plain torch.compile, the "
            f"same way.{spaced}"]


def new_cell(qualname: str, row_index: int, row: str, backend: str) -> Cell:
    """A ``PASSED`` :class:`Cell` of ``qualname`` for ``row`` (at ``row_index``) through ``backend`` (by name),
    placed by the backends' order in the report (a backend that is not one of the plugin's, e.g. a test's, goes
    last)."""
    names = [b.name for b in all_backends()]
    return Cell(qualname, row, backend, row_index, names.index(backend) if backend in names else len(names))


#: What a wrong value of each rule is, for a defect's signature.
_WRONG = {OUTPUT_DIFFERS: "an output differs from plain eager's", STATE_DIFFERS: "the object's state differs from "
          "plain eager's", STALE_RESULT: "a result stays at the traced object's", TRACING_CHANGED_OBJECT:
          "tracing changes the real object"}


def defect_signature(backend: Backend, rule: str, matched: Any, family: str) -> str:
    """The signature of a torch defect, by which reports group cells of any class that fail the same way:
    ``inductor: RuntimeError raised in torch/_inductor/ir.py realize`` for a cell that raised (its exception's type
    and innermost torch site, :func:`~conformance.matrix.limitations.raised_at`), ``inductor: the object's state
    differs from plain eager's (computed)`` for a wrong value (what is wrong, and the kind of row: ``family``)."""
    if isinstance(matched, BaseException):
        return f"{backend.name}: {raised_at(matched)}"
    return f"{backend.name}: {_WRONG.get(rule, rule)} ({family})"


def cell_failure(cell: Cell) -> Failure:
    """The :class:`Failure` a ``FAILED`` cell's item reports, with the cell's rule id (:data:`RULES`): which
    backend does not reproduce eager, why, and the program; for ``matrix.gradient-wrong`` (eager's own formula is
    wrong, the backend reproduces it) why, naming no backend."""
    backend = get_backend(cell.backend)
    headline = (cell.reason if cell.rule == GRADIENT_WRONG  # eager's own formula is wrong: no backend's fault
                else f"{backend.group} {backend.title} does not reproduce plain eager for {cell.row}: {cell.reason}")
    if cell.status is Status.TORCH_DEFECT:
        headline = f"torch defect ({cell.signature}), not the fake's: {headline}"
    return Failure(headline,
                   details=tuple(cell.details), program=cell.program or None, repro=cell.repro or None,
                   rule=cell.rule)


def cell_skip_reason(cell: Cell) -> str:
    """The skip message of an ``UNSUPPORTED`` cell (a listed torch limitation), an ``UNTOLD`` one (its objects could
    not show a stale program; the reason says what to give) or a ``SKIPPED`` one (its reason says why it did not
    run: no fake class to trace with, or no eager reference to compare with)."""
    if cell.status is Status.UNSUPPORTED:
        return f"unsupported: {cell.reason}"
    if cell.status is Status.UNTOLD:
        return f"could not tell: {cell.reason}"
    if cell.status is Status.TORCH_DEFECT:
        return f"torch defect ({cell.signature}; --torchbind-torch-defects=skip): {cell.reason}"
    return cell.reason
