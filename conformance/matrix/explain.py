"""What a coverage-matrix cell says about its result, for either kind of class: how it shows a value
(:data:`show`), the words that mark a result which stayed at the traced object's (:data:`STAYED`), and the note of
a cell whose objects never change the program's output (:func:`cannot_tell`). What a TorchBind cell says of each
output and state is :mod:`conformance.matrix.torchbind.explain`."""

from __future__ import annotations

import dataclasses
import functools
import os
import traceback

from ..engine.render import render
from .limitation_evidence import failure_chain

__all__ = ["show", "cannot_tell", "STAYED", "UNCHANGED", "FakeCause", "Agreement"]

#: The words that mark an output which stayed at the traced object's value (the limitation table matches them).
STAYED = "it stayed at the traced object's value"
#: The words that mark a value of a ``mutated`` program which is what eager gives without the program's in-place
#: changes of the tensors it handed the object (the limitation table matches them).
UNCHANGED = "the object kept the values from before the program changed them"


#: A value for a cell's message (:func:`conformance.engine.render.render`, style ``cell``): scalars with their type
#: (``3 (int)``), tensors by metadata and, when small, their values (``Tensor(shape=[2], ...) = [0.0, 3.0]``).
show = functools.partial(render, limit=160, style="cell")


def cannot_tell(what: str, hint: str) -> str:
    """The note of a cell whose objects never change the output: ``what`` says which objects were tried and
    on what, ``hint`` what the adopter can give."""
    return (f"{what}, so this cell cannot tell a program that follows the object from one that holds the first "
            f"object baked in (the one it was traced with): {hint}")


@dataclasses.dataclass(frozen=True)
class FakeCause:
    """A failed cell's program calls a method or op whose fake is wrong: ``items`` are the ids of the items that
    report it (``torchbind[ns.Cls]::agreement[m]``, ``torchbind[py:mod.Cls]::fake_kernel[op]``), ``call`` what the
    call did on each side."""

    items: tuple[str, ...]
    call: str
    #: Whose code gives the wrong result (a TorchBind class's ``def_pickle`` that loses state is the library's too).
    whose: str = "the fake's wrong result"
    #: Whether the disagreement changes what tracing builds, not only values: the fake raised, or its result or
    #: kept state differs from C++'s in kind (:func:`conformance.engine.compare.differs_in_kind`).
    reshapes: bool = True
    #: The fake's source files (real paths): a raise made in them is the fake's whatever its results.
    files: tuple[str, ...] = ()

    def explains(self, exc: BaseException) -> bool:
        """Whether this cause can explain a cell that raised ``exc``. A disagreement that changes what tracing
        builds can (a wrong shape fails a later op, a fake that raises fails the trace); one in values only (an
        int of C++'s type, a tensor's contents, which FakeTensorMode never computes) changes results, and explains
        an exception only when it was raised in the fake's own code: a frame of :attr:`files` in a traceback of
        ``exc``'s chain, or a file named in its text (dynamo's ``from user code`` lines). Raises nothing."""
        if self.reshapes:
            return True
        for link in failure_chain(exc):
            frames = traceback.extract_tb(link.__traceback__)
            if any(os.path.realpath(f.filename) in self.files for f in frames) or \
                    any(path in str(link) for path in self.files):
                return True
        return False

    def unexplained(self, site: str) -> str:
        """For the details of a cell that raised at ``site`` (``RuntimeError raised in torch/...``) where this
        cause does not explain it: the disagreement, and why it is not named as the cell's cause."""
        return (f"the fake disagrees with C++ ({self.call}; see {' and '.join(self.items)}), but in values only, "
                f"which does not explain this cell's {site}, raised outside the fake's code: the cell is not "
                "said to follow from the fake, nor to be torch's defect while the fake is wrong; a run with the "
                "fake fixed tells")

    @property
    def reference(self) -> str:
        """For the cell's reason: ``follows from the fake's wrong result, see <items>``."""
        return f"follows from {self.whose}, see {' and '.join(self.items)}"

    @property
    def detail(self) -> str:
        """For the cell's details: the call that disagrees and the items."""
        return f"this {self.reference}: {self.call}"


@dataclasses.dataclass(frozen=True)
class Agreement:
    """A failed cell's program replayed on real objects and on their fakes (``maybe_to_fake_obj`` under a new
    ``FakeTensorMode``, as tracing makes them) agreed call by call: ``calls`` results compared, on the objects
    ``objects`` names, and ``also`` what else was compared (the objects' pickling, for a backend that copies them).
    The library's side gives tracing what C++ gives eager, so the cell's failure is torch's defect
    (:data:`conformance.matrix.cell.TORCH_DEFECT`)."""

    calls: int
    objects: tuple[str, ...]
    also: tuple[str, ...] = ()

    @property
    def detail(self) -> str:
        """For the cell's details: what was replayed and compared, and what follows."""
        also = "".join(f"; {a}" for a in self.also)
        return (f"torch's defect, not the fake's: the program's calls, replayed on real objects and on their fakes "
                f"(maybe_to_fake_obj under a new FakeTensorMode, as tracing makes them) on "
                f"{' and '.join(self.objects)}, agree on all {self.calls} results{also}; so the backend gets wrong "
                "what plain eager gets right from the same class and fake: file it upstream with the reproducer "
                "below (--torchbind-torch-defects=skip skips such items)")
