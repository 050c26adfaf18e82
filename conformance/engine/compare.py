"""Compare what the C++ object produced with what the fake produced (values are rendered for the messages by
:mod:`conformance.engine.render`).

The rules mirror how torch uses a fake's results while tracing: tensors stand for their metadata only (shape,
dtype, device, strides, requires_grad — what ``FakeTensor`` carries), while every non-tensor result is burned into
the graph as a constant (see "Constant burning-in graph" in the PT2 custom-class design notes), so it must be
equal by value.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math
from typing import Any

import torch
from .torch_api import check_significant_strides

from ..core.evidence import counted
from ..core.results import NotApplicable, Note, exception_line
from .render import render, script_class_name, tensor_meta

__all__ = ["CallResult", "tensor_meta", "compare_results", "describe", "disagreement", "flat_state_differences",
           "flattened_pairs", "kept_differences", "script_class_name", "side_text", "value_differences",
           "unstable_paths", "differs_in_kind", "Tally"]

#: :func:`conformance.engine.render.render` under the name the checks import (its default style, ``metadata``).
describe = render


@dataclasses.dataclass
class CallResult:
    """What one side of a call did: ``value`` or ``error`` (an exception), with a one-line ``text`` for messages."""

    value: Any = None
    error: BaseException | None = None

    @property
    def raised(self) -> bool:
        return self.error is not None

    def error_text(self) -> str:
        return f"raised {exception_line(self.error, limit=300)}"


def _same_scalar(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _meta_equal(key: str, real: Any, fake: Any) -> bool:
    """Metadata equality where a fake size/stride that is an unbacked or symbolic ``SymInt`` (a data-dependent
    output, ``ctx.new_dynamic_size()``) matches any concrete value."""
    if key in ("shape", "stride") and len(real) == len(fake):
        from torch.fx.experimental.symbolic_shapes import is_concrete_int  # imported once fakes run (sympy)

        return all(is_concrete_int(f) is False or r == f for r, f in zip(real, fake))
    return real == fake


def differs_in_kind(real: Any, fake: Any) -> bool:
    """Whether two results differ in what tracing reads of them, not only in their values: their pytree structure
    (container types, lengths, dict keys), a leaf's type, or a tensor leaf's shape, dtype, device or layout (what a
    FakeTensor carries; its contents are never computed). Two Python scalars or strings of one type that differ in
    value, or tensors that differ only in their contents, do not. Raises nothing of its own."""
    import torch.utils._pytree as pytree

    leaves_r, spec_r = pytree.tree_flatten(real)
    leaves_f, spec_f = pytree.tree_flatten(fake)
    if spec_r != spec_f:
        return True
    for r, f in zip(leaves_r, leaves_f):
        if isinstance(r, torch.Tensor) and isinstance(f, torch.Tensor):
            if (r.dtype, r.device.type, r.layout) != (f.dtype, f.device.type, f.layout) or \
                    not _meta_equal("shape", tuple(r.shape), tuple(f.shape)):
                return True
        elif type(r) is not type(f):
            return True
    return False


@counted("result")
def compare_results(real: Any, fake: Any, where: str = "result", sides: tuple[str, str] = ("C++", "fake"), *,
                    significant_strides_only: bool = False) -> list[str]:
    """Differences between a real result and a fake result; an empty list means they agree.

    Tensors: shape, dtype, device, strides and requires_grad must match (values are not compared: a FakeTensor
    has none). Lists, tuples and dicts: same container type and length, compared element-wise. TorchBind objects:
    same class. Anything else (int, float, bool, str, None, dtype, ...): same type and equal value, since torch burns
    non-tensor results into graphs as constants. Each difference names its position, e.g. ``result[1].stride``.
    ``sides`` names the two values in messages.

    With ``significant_strides_only``, tensors of the same shape may differ in the strides of dimensions that do
    not matter (size 1, or any dimension of an empty tensor): the rule of
    ``torch._prims_common.check_significant_strides``, which ``torch._prims.utils.compare_tensor_meta`` applies
    when ``CrossRefFakeMode`` checks fake against real outputs. Eager kernels and meta functions legitimately pick
    different strides there (the C++ ``x * 2`` on a ``[0, 1]`` tensor has strides ``[1, 0]``, its FakeTensor
    ``[1, 1]``). Returns the list of differences, one line each; raises nothing of its own.
    """
    a, b = sides
    diffs: list[str] = []
    if isinstance(real, torch.Tensor) or isinstance(fake, torch.Tensor):
        if not (isinstance(real, torch.Tensor) and isinstance(fake, torch.Tensor)):
            return [f"{where}: {a} gave {render(real)}, {b} gave {render(fake)}"]
        rm, fm = tensor_meta(real), tensor_meta(fake)
        for key in rm:
            if _meta_equal(key, rm[key], fm[key]):
                continue
            if key == "stride" and significant_strides_only and _meta_equal("shape", rm["shape"], fm["shape"]) \
                    and check_significant_strides(real, fake, only_cuda=False, allow_rhs_unbacked=True)[0]:
                continue
            diffs.append(f"{where}.{key}: {a} {render(rm[key], None, style='field')}, "
                         f"{b} {render(fm[key], None, style='field')}")
        return diffs
    if isinstance(real, (list, tuple)) or isinstance(fake, (list, tuple)):
        if type(real) is not type(fake):
            return [f"{where}: {a} gave a {type(real).__name__} {render(real)}, {b} gave a "
                    f"{type(fake).__name__} {render(fake)}"]
        if len(real) != len(fake):
            return [f"{where}: {a} gave {len(real)} elements {render(real)}, {b} gave {len(fake)} "
                    f"{render(fake)}"]
        for i, (r, f) in enumerate(zip(real, fake)):
            diffs.extend(compare_results(r, f, f"{where}[{i}]", sides,
                                         significant_strides_only=significant_strides_only))
        return diffs
    if isinstance(real, dict) or isinstance(fake, dict):
        if not (isinstance(real, dict) and isinstance(fake, dict)) or set(real) != set(fake):
            return [f"{where}: {a} gave {render(real)}, {b} gave {render(fake)}"]
        for k in real:
            diffs.extend(compare_results(real[k], fake[k], f"{where}[{k!r}]", sides,
                                         significant_strides_only=significant_strides_only))
        return diffs
    if isinstance(real, torch.ScriptObject):
        fake_name = script_class_name(fake)
        real_name = real._type().qualified_name()
        if fake_name != real_name:
            return [f"{where}: {a} gave {render(real)}, {b} gave {render(fake)}"]
        return []
    if not _same_scalar(real, fake):
        return [f"{where}: {a} gave {render(real)} ({type(real).__name__}), "
                f"{b} gave {render(fake)} ({type(fake).__name__})"]
    return []


def disagreement(real: CallResult, fake: CallResult, where: str = "result", *,
                 significant_strides_only: bool = False) -> tuple[str, list[str]] | None:
    """Whether a real and a fake :class:`CallResult` of the same call disagree, under the
    validity rule: only a call the C++ side accepted (returned from) is a comparison.

    ``None`` when C++ raised (not a comparison: the arguments are not ones the class accepts, whatever the fake
    did; see :class:`Tally`) or when both returned results that :func:`compare_results` finds no difference
    between (``where`` and ``significant_strides_only`` are passed on to it). Else ``(summary, differences)``:
    the fake raised where C++ returned (a traced program would fail where eager runs; the differences are then
    empty), or the results differ. Raises nothing of its own.
    """
    if real.raised:
        return None
    if fake.raised:
        return "the fake raises but the C++ method returns", []
    diffs = compare_results(real.value, fake.value, where, significant_strides_only=significant_strides_only)
    return ("the fake's result differs from the C++ result", diffs) if diffs else None


@dataclasses.dataclass
class Tally:
    """The calls of one per-call check (``agreement``, ``return_type``, ``custom_op``) under the validity rule.

    A call C++ rejects (raises) is not a comparison: eager raises there too, so no program on those arguments
    runs, and the fake may do anything — ``compared`` counts only calls C++ returned from, and a check with none
    has compared nothing and must not pass (:meth:`require_compared`). A fake that returns where C++ raises is
    recorded (:attr:`fake_accepted`, reported as a note) but is not a failure: torch raises at run time then.
    """

    compared: int = 0
    disagreed: int = 0
    rejected: int = 0
    first_rejection: str | None = None
    fake_accepted: list[str] = dataclasses.field(default_factory=list)
    errors: set[str] = dataclasses.field(default_factory=set)

    def judge(self, real: CallResult, fake: CallResult, call: str, **kwargs: Any) -> tuple[str, list[str]] | None:
        """Count one call (``call``: its source) and return its :func:`disagreement` (``kwargs`` go to it)."""
        if real.raised:
            self.rejected += 1
            self.errors.add(real.error_text())
            if self.first_rejection is None:
                self.first_rejection = f"{call} -> C++ {real.error_text()}"
            if not fake.raised:
                self.fake_accepted.append(f"{call}: C++ {real.error_text()}; the fake returned {render(fake.value)}")
            return None
        self.compared += 1
        found = disagreement(real, fake, **kwargs)
        self.disagreed += found is not None
        return found

    def first_disagreement(self, paired) -> tuple | None:
        """Judge every ``(example, call, real, fake)`` of ``paired`` (:meth:`ClassContext.paired_calls`) and return
        the first that disagrees, as ``(example, call, real, fake, (summary, differences))``, or ``None``."""
        first = None
        for example, call, real, fake in paired:
            found = self.judge(real, fake, call.code())
            if found is not None and first is None:
                first = (example, call, real, fake, found)
        return first

    def require_compared(self, what: str, hint: str) -> None:
        """Raise :class:`~conformance.core.results.NotApplicable` when no call was compared: ``what`` names the callee
        (``the C++ method pop``), ``hint`` what the adopter can give (a ``conformance.strategy`` line)."""
        if not self.compared and len(self.errors) == 1 and self.rejected > 1:
            # One error whatever the object and the arguments: a method that raises by design (a dunder bound to
            # say "not supported"), not arguments the plugin should have drawn differently.
            raise NotApplicable(f"{what} raised the same error on all {self.rejected} calls (example objects x "
                                f"argument sets): {self.first_rejection}; it raises by design or in every state the "
                                f"plugin built, so nothing was compared. If it returns in some state, give example "
                                f"objects in that state; {hint}")
        if not self.compared:
            raise NotApplicable(f"no argument set {what} accepted: C++ raised on all {self.rejected} calls (example "
                                f"objects x argument sets), e.g. {self.first_rejection}; nothing was compared. "
                                f"{hint}")

    def summary(self) -> str:
        """One line: how many calls were compared and how many C++ rejected."""
        text = f"{self.disagreed} of {self.compared} compared calls (example objects x argument sets) disagree"
        if self.rejected:
            text += f"; {self.rejected} more C++ rejected (raised), which are not comparisons"
        return text

    def notes(self) -> list[Note]:
        """:class:`~conformance.core.results.Note` objects for the calls the fake accepted where C++ raised."""
        if not self.fake_accepted:
            return []
        return [Note(f"the fake returns where C++ raises on {len(self.fake_accepted)} call(s) (not a failure: "
                     f"torch raises at run time there); e.g. {self.fake_accepted[0]}")]


def side_text(result: CallResult) -> str:
    """What one side of a call did, for a failure's ``cpp`` / ``fake`` line: the error it raised
    (``CallResult.error_text()``), else ``returned <value>`` (:func:`~conformance.engine.render.render`)."""
    return result.error_text() if result.raised else f"returned {render(result.value)}"


def flattened_pairs(flat: Any) -> list[tuple[str, Any]]:
    """``(key, value)`` of a flattened state (``__obj_flatten__``) as ``dict(flattened)`` keeps them — what a fake's
    ``__obj_unflatten__`` is given (a repeated key's last value: the ``flatten`` check reports the repetition);
    none when it is malformed."""
    try:
        return list(dict((key, value) for key, value in flat if isinstance(key, str)).items())
    except (TypeError, ValueError):
        return []


def kept_differences(real: Any, kept: Any, where: str, real_side: str = "C++") -> list[str]:
    """How a fake's value ``kept`` differs from the real flattened value ``real`` (``real_side`` names it in the
    value lines, e.g. ``C++ flattened``): tensors by shape, dtype and device (the fake holds fake tensors, without
    values); sequences element-wise whatever their container (a fake may keep a list as a tuple or deque); dicts by
    key; TorchBind objects by class; anything else by ``==`` (NaN equal to NaN; a value whose ``==`` raises is not
    judged). One line per difference, named by position under ``where``; raises nothing of its own. Shared by the
    ``roundtrip`` check (right after fakification) and ``custom_op`` (each object after an op)."""
    def differ() -> list[str]:
        return [f"{where}: {real_side} {render(real)}, the fake keeps {render(kept)}"]

    if isinstance(real, torch.Tensor) or isinstance(kept, torch.Tensor):
        if not (isinstance(real, torch.Tensor) and isinstance(kept, torch.Tensor)):
            return differ()
        return [f"{where}.{k}: {real_side} {a}, the fake keeps {b}" for k, a, b in (
            ("shape", list(real.shape), list(kept.shape)), ("dtype", real.dtype, kept.dtype),
            ("device", real.device, kept.device)) if a != b]
    if isinstance(real, (list, tuple)):
        if isinstance(kept, (str, bytes, dict)) or not isinstance(kept, collections.abc.Sequence):
            return differ()
        if len(real) != len(kept):
            return [f"{where}: C++ has {len(real)} elements, the fake keeps {len(kept)}"]
        return [d for i, (a, b) in enumerate(zip(real, kept))
                for d in kept_differences(a, b, f"{where}[{i}]", real_side)]
    if isinstance(real, dict):
        if not isinstance(kept, dict) or set(real) != set(kept):
            return differ()
        return [d for k in real for d in kept_differences(real[k], kept[k], f"{where}[{k!r}]", real_side)]
    if isinstance(real, torch.ScriptObject):
        return [] if script_class_name(kept) == script_class_name(real) else differ()
    if isinstance(real, float) and isinstance(kept, float) and math.isnan(real) and math.isnan(kept):
        return []
    try:
        same = bool(real == kept)
    except Exception:  # noqa: BLE001 - an exotic value: not judged
        same = True
    return [] if same else differ()


@counted("state")
def flat_state_differences(a: Any, b: Any, where: str = "state", sides: tuple[str, str] = ("first", "second")
                           ) -> list[str]:
    """Differences between two flattened states (``__obj_flatten__`` results) of real objects.

    Unlike :func:`compare_results` this also compares tensor *values* (both sides are real), with
    ``torch.equal`` semantics after a metadata match (NaNs compare equal).
    """
    diffs = compare_results(a, b, where, sides)
    if diffs:
        return diffs
    return _value_diffs(a, b, where)


def _value_diffs(a: Any, b: Any, where: str) -> list[str]:
    if isinstance(a, torch.Tensor):
        if a.is_meta or b.is_meta:
            return []
        if not torch.equal(a, b) and not (
            a.is_floating_point() and torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))
            and torch.equal(a.isnan(), b.isnan())
        ):
            return [f"{where}: tensor values differ"]
        return []
    if isinstance(a, (list, tuple)):
        out: list[str] = []
        for i, (x, y) in enumerate(zip(a, b)):
            out.extend(_value_diffs(x, y, f"{where}[{i}]"))
        return out
    if isinstance(a, dict):
        out = []
        for k in a:
            out.extend(_value_diffs(a[k], b[k], f"{where}[{k!r}]"))
        return out
    return []


def unstable_paths(a: Any, b: Any, where: str = "output") -> list[str]:
    """The positions (``output[0]``, named as :func:`value_differences` names them) of tensors whose values differ
    between two results of the same eager call: uninitialised memory (``torch::empty``), or randomness. Raises
    nothing of its own."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        same_meta = (a.shape, a.dtype, a.device) == (b.shape, b.dtype, b.device)
        return [where] if same_meta and _value_diffs(a, b, where) else []
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in unstable_paths(x, y, f"{where}[{i}]")]
    if isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b):
        return [p for k in a for p in unstable_paths(a[k], b[k], f"{where}[{k!r}]")]
    return []


@counted("output")
def value_differences(expected: Any, actual: Any, where: str = "output", scalars_as_tensors: bool = False,
                      metadata_only: frozenset[str] = frozenset()) -> list[str]:
    """Differences between two *real* results, e.g. eager vs a compiled program's outputs.

    Tensors are compared with ``torch.testing.assert_close`` (values, shape, dtype, device; strides are not part
    of a compiled program's contract); containers element-wise; other values by type and equality. With
    ``scalars_as_tensors`` a 0-dim tensor stands for an int/float/bool (AOTInductor's calling convention).
    Tensors at the positions in ``metadata_only`` (see :func:`unstable_paths`) are compared by shape, dtype and
    device only: their values differ between two identical eager runs, so no backend can be held to them.
    """
    if scalars_as_tensors and isinstance(actual, torch.Tensor) and actual.dim() == 0 and \
            isinstance(expected, (bool, int, float)):
        actual = type(expected)(actual.item())
    if isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor) and where in metadata_only:
        fields = (("shape", tuple(expected.shape), tuple(actual.shape)), ("dtype", expected.dtype, actual.dtype),
                  ("device", expected.device, actual.device))
        return [f"{where}.{k}: expected {render(e, None, style='field')}, got {render(g, None, style='field')}"
                for k, e, g in fields if e != g]
    if isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor):
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True)
        except AssertionError as exc:
            first = str(exc).strip().splitlines()
            return [f"{where}: {first[0] if first else 'tensors differ'} (expected {render(expected)}, got "
                    f"{render(actual)})"]
        return []
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)) and \
            type(expected) is type(actual) and len(expected) == len(actual):
        out: list[str] = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out += value_differences(e, a, f"{where}[{i}]", scalars_as_tensors, metadata_only)
        return out
    if isinstance(expected, dict) and isinstance(actual, dict) and set(expected) == set(actual):
        out = []
        for k in expected:
            out += value_differences(expected[k], actual[k], f"{where}[{k!r}]", scalars_as_tensors, metadata_only)
        return out
    if isinstance(expected, torch.ScriptObject) or isinstance(actual, torch.ScriptObject):
        return [] if script_class_name(expected) == script_class_name(actual) else [
            f"{where}: expected {render(expected)}, got {render(actual)}"]
    if type(expected) is not type(actual) or not _same_scalar(expected, actual):
        return [f"{where}: expected {render(expected)} ({type(expected).__name__}), got {render(actual)} "
                f"({type(actual).__name__})"]
    return []
