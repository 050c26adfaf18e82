"""What a coverage-matrix cell says about its result, for either kind of class: how it shows a value
(:data:`show`), the words that mark a result which stayed at the traced object's (:data:`STAYED`), and the note of
a cell whose objects never change the program's output (:func:`cannot_tell`). What a TorchBind cell says of each
output and state is :mod:`conformance.matrix.torchbind.explain`."""

from __future__ import annotations

import dataclasses
import functools

from ..engine.render import render

__all__ = ["show", "cannot_tell", "STAYED", "FakeCause"]

#: The words that mark an output which stayed at the traced object's value (the limitation table matches them).
STAYED = "it stayed at the traced object's value"


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

    @property
    def reference(self) -> str:
        """For the cell's reason: ``follows from the fake's wrong result, see <items>``."""
        return f"follows from the fake's wrong result, see {' and '.join(self.items)}"

    @property
    def detail(self) -> str:
        """For the cell's details: the call that disagrees and the items."""
        return f"this {self.reference}: {self.call}"
