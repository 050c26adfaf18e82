"""Backends (the matrix columns): how a scenario's program is compiled or exported and then run, for either kind of
class.

Each backend is one module in this package defining ``BACKEND``, which carries all there is to that backend: how a
cell prepares the program, and the lines with which a reproducer script does the same (:attr:`Backend.script`).
:data:`conformance.core.names.BACKEND_NAMES` (the torch-free list ``--help`` offers) fixes the column order, and
:data:`BACKEND_MODULES` follows from it. A backend's ``prepare(scenario, module, example_args)`` returns a callable
that runs the program on ``forward``'s arguments; for ``torch.compile`` backends tracing happens on the first call,
for export and AOTInductor inside ``prepare`` (``ahead_of_time``), which lets the cell check that tracing left the
object alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import torch

from ...core.names import BACKEND_NAMES
from ...engine import torch_api

__all__ = ["Backend", "all_backends", "get_backend", "torch_compile", "compile_script", "export_program",
           "export_script", "BACKEND_MODULES", "autocast_source"]


def autocast_source(autocast: tuple[str, torch.dtype]) -> str:
    """``(device_type, dtype)`` as the call that enters it: ``torch.autocast('cpu', dtype=torch.bfloat16)`` (a
    cell's message, a reproducer's ``with`` line). Raises nothing."""
    device_type, dtype = autocast
    return f"torch.autocast({device_type!r}, dtype={dtype})"


@dataclasses.dataclass(frozen=True)
class Backend:
    """One matrix column.

    ``name`` is the id used in test ids and ``--torchbind-backends`` (``inductor``); ``group`` and ``title`` the
    report's two header rows (``torch.compile`` / ``inductor``). ``ahead_of_time``: ``prepare`` traces (export,
    AOTInductor). ``state_visible``: running mutates the object the cell holds (False for AOTInductor, which runs
    on its own deserialized copy of an attribute object, so only outputs can be compared).
    ``scalars_as_tensors``: the backend returns int/float/bool outputs as 0-dim tensors (AOTInductor's calling
    convention), compared by value. ``dynamo``: ``prepare`` compiles with ``torch.compile`` (dynamo), so with dynamo
    disabled (``TORCHDYNAMO_DISABLE=1``, :mod:`conformance.engine.dynamo_state`) nothing would be compiled and the cell
    skips saying so. ``script``: the lines of a reproducer script (:mod:`conformance.matrix.torchbind.repro`) that
    do what ``prepare`` does: they turn ``module(traced)`` into a callable ``program``, given ``example`` (run 0's
    arguments) and ``DYNAMIC`` (the ``dynamic_shapes``, or ``None``); empty for a backend no script can rebuild (a
    test's own), whose failed cells come without a reproducer. ``autocast``: the ``(device_type, dtype)`` of a
    column whose program runs under ``torch.autocast(device_type, dtype=dtype)``; the cell then makes plain eager's
    reference under the same autocast (:meth:`conformance.matrix.cell.Rows.run_cell`), and its ``script`` rebinds
    the reproducer's ``expected`` the same way. ``None``: no autocast. ``no_backward``: why autograd cannot
    differentiate the backend's program (an inference-only backend), the reason its backward-row cells skip with;
    empty where it can. ``swaps_attribute``: setting the attribute object of the module it was given (torch.compile)
    or of the program's own module (``ExportedProgram.module()``, which keeps it as a constant attribute) makes the
    next call use that object; False for AOTInductor, whose loaded package runs its own deserialized copy.
    """

    name: str
    group: str
    title: str
    prepare: Callable[[Any, torch.nn.Module, tuple], Callable[..., Any]]
    ahead_of_time: bool = False
    state_visible: bool = True
    scalars_as_tensors: bool = False
    dynamo: bool = False
    script: tuple[str, ...] = ()
    autocast: tuple[str, torch.dtype] | None = None
    no_backward: str = ""
    swaps_attribute: bool = True

    def autocasting(self) -> contextlib.AbstractContextManager:
        """``torch.autocast(device_type, dtype=dtype)`` for a column with :attr:`autocast`, else a context that
        does nothing."""
        if self.autocast is None:
            return contextlib.nullcontext()
        device_type, dtype = self.autocast
        return torch.autocast(device_type, dtype=dtype)

    @property
    def autocast_text(self) -> str:
        """The column's autocast as source (:func:`autocast_source`); ``""`` for a column without one."""
        return "" if self.autocast is None else autocast_source(self.autocast)

    @property
    def side(self) -> str:
        """How a difference from plain eager names this backend's result: its ``name``, except torch.compile's
        eager backend (``torch.compile eager``), which beside plain eager would read as the same side twice."""
        return "torch.compile eager" if self.name == "eager" else self.name


#: The module of this package that defines a backend's ``BACKEND``, where it is not the backend's name.
_MODULE_OF = {"export": "export_nonstrict"}
#: The modules defining the backends, in the report's column order (:data:`conformance.core.names.BACKEND_NAMES`:
#: the seed's Coverage Matrix, torch.compile, AOTInductor, export; then torch.compile under autocast).
BACKEND_MODULES = tuple(_MODULE_OF.get(name, name) for name in BACKEND_NAMES)


def all_backends() -> list[Backend]:
    """Every backend, in column order (one per name of :data:`~conformance.core.names.BACKEND_NAMES`)."""
    return [importlib.import_module(f"{__package__}.{m}").BACKEND for m in BACKEND_MODULES]


def get_backend(name: str) -> Backend:
    """The backend called ``name``; ``KeyError`` if there is none."""
    for backend in all_backends():
        if backend.name == name:
            return backend
    raise KeyError(name)


def torch_compile(backend: str) -> Callable[[Any, torch.nn.Module, tuple], Callable[..., Any]]:
    """``prepare`` for ``torch.compile(module, backend=backend, fullgraph=True)``. Dynamo's caches are reset
    first so earlier cells cannot leak guards or recompilation counts.

    For dynamic scenarios every dimension of every tensor argument is marked with
    ``torch._dynamo.maybe_mark_dynamic`` before each call (``dynamic=True`` itself fails in torch 2.13 as soon as
    a ScriptObject is an input: dynamo then indexes the object, "'__getitem__' is not implemented").
    """

    def prepare(scenario, module: torch.nn.Module, example_args: tuple):
        torch_api.dynamo_reset()
        compiled = torch.compile(module, backend=backend, fullgraph=True)
        if not scenario.dynamic:
            return compiled

        def run(*args):
            for arg in args:
                if isinstance(arg, torch.Tensor):
                    for dim in range(arg.dim()):
                        torch_api.maybe_mark_dynamic(arg, dim)
            return compiled(*args)

        return run

    return prepare


def compile_script(backend: str) -> tuple[str, ...]:
    """The :attr:`Backend.script` of a ``torch.compile`` backend: the program compiled with ``backend`` and
    ``fullgraph=True``, as the cell compiles it (without it a graph break would run the failing call eagerly and the
    script would not show the cell's failure), its sizes left to torch (``dynamic=None``: a size that changes
    becomes dynamic), as the cell's marks make them."""
    return (f"program = torch.compile(module(traced), backend={backend!r}, fullgraph=True)",)


def export_script(strict: bool, name: str = "program") -> str:
    """The line of a :attr:`Backend.script` that exports as :func:`export_program` does, into ``name`` (the
    exported program itself, not its ``module()``)."""
    return (f"{name} = torch.export.export(module(traced), example, dynamic_shapes=DYNAMIC, "
            f"strict={strict})")


def export_program(scenario, module: torch.nn.Module, example_args: tuple, *, strict: bool):
    """``torch.export.export`` of the program with the scenario's ``dynamic_shapes``."""
    return torch.export.export(module, example_args, strict=strict, dynamic_shapes=scenario.dynamic_shapes())
