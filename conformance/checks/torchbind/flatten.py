"""Check 5: the ``__obj_flatten__`` contract.

From ``torch/_library/fake_class_registry.py`` (``_check_valid_flat_script_obj``, ``maybe_to_fake_obj``) and the
PT2 custom-class notes: ``__obj_flatten__`` returns a tuple of ``(str, value)`` pairs; torch fakifies the tensors
among the values and passes the rest through; dynamo guards on the flattened values, so the result must be
deterministic and calling it must not change the object; tensors that alias one another lose that relationship
when fakified ("This is not supported and may cause unexpected behavior"). Names must be unique because fake
classes rebuild themselves with ``cls(**dict(flattened))``, which keeps only the last duplicate.

Flattened tensors must be copies: one that shares storage with a tensor the caller passed in (a constructor or
method argument) or got back (a method's result) makes dynamo raise ``UnsafeScriptObjectError: ... is aliasing
... Please do a clone for corresponding input`` (``torch/_dynamo/guards.py``, ``make_dupe_guard``) as soon as
both reach a compiled program. Found by storage identity against each example's inputs and step results, and
against each method's arguments and result on a fresh object.
"""

from __future__ import annotations

import itertools

import torch
import torch.utils._pytree as pytree
from ...engine.torch_api import tensor_storage as _tensor_storage
from ...engine.torch_api import check_valid_flat_script_obj as _check_valid_flat_script_obj

from ...torchbind.calls import Callee
from ...engine.compare import describe, flat_state_differences
from ...torchbind.examples import named_arguments
from ...core.results import Failure, NotApplicable
from ...torchbind.context import ClassContext

SUPPORTED_LEAVES = (torch.Tensor, int, float, bool, str, type(None), torch.dtype, torch.device)


def flatten(ctx: ClassContext, _target: None) -> list[Failure]:
    """__obj_flatten__ returns unique (str, value) pairs of supported types, deterministically, without
    changing the object, and with no aliasing tensors."""
    info = ctx.info
    if not info.has_flatten:
        if ctx.traces_with_real_object:
            return []
        return [Failure("the class has no __obj_flatten__, so torch cannot fakify it", target="__obj_flatten__",
                        cpp=f"methods: {', '.join(info.methods)}",
                        details=("add an __obj_flatten__ method returning a tuple of (name, value) pairs, or a "
                                 "tracing_mode() method returning \"real\" to trace with the real object",),
                        rule="flatten.missing")]
    failures: list[Failure] = []
    for example in ctx.require_examples():
        code = "\n".join(example.code())

        def fail(rule, summary, *details, cpp=None):
            failures.append(Failure(summary, target="__obj_flatten__", cpp=cpp, rule=rule,
                                    details=tuple(details), example=code,
                                    repro=ctx.repro(example, ["obj = make_obj()", "print(obj.__obj_flatten__())",
                                                              "print(obj.__obj_flatten__())"])))

        inputs: list[tuple[str, object]] = []
        obj = example.build(record=inputs)
        label = f"{info.qualname}.__obj_flatten__() on the example object {example.label}"
        try:
            with ctx.calling(label):
                first = obj.__obj_flatten__()
        except Exception as exc:  # noqa: BLE001
            fail("flatten.raises", f"__obj_flatten__ raised {type(exc).__name__}: {exc}")
            continue
        try:
            _check_valid_flat_script_obj(first)
        except RuntimeError as exc:
            fail("flatten.structure", f"__obj_flatten__ returned the wrong structure: {exc}",
                 cpp=f"returned {describe(first)}")
            continue
        names = [name for name, _ in first]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            fail("flatten.duplicate-name", f"__obj_flatten__ repeats the name(s) {', '.join(map(repr, dups))}; "
                 "cls(**dict(flattened)) keeps only the last one", cpp=f"returned names {names}")
        leaves = pytree.tree_leaves([v for _, v in first])
        bad = [leaf for leaf in leaves if not isinstance(leaf, SUPPORTED_LEAVES)]
        if bad:
            fail("flatten.unsupported-value", "__obj_flatten__ returns values torch cannot fakify or guard on: "
                 + ", ".join(sorted({type(b).__name__ for b in bad})),
                 "supported: tensors, int, float, bool, str, None, dtype, device, and lists/tuples/dicts of them")
        try:
            with ctx.calling(label):
                second = obj.__obj_flatten__()
        except Exception as exc:  # noqa: BLE001
            fail("flatten.second-call-raises", f"a second __obj_flatten__ call raised {type(exc).__name__}: {exc}")
            continue
        diffs = flat_state_differences(first, second, "flattened")
        if diffs:
            fail("flatten.nondeterministic", "__obj_flatten__ is not deterministic or changes the object: two "
                 "calls on the same object returned different states", *diffs)
        if info.pickles:
            fresh = example.build()
            try:
                with ctx.calling(f"{info.qualname}.__getstate__() and __obj_flatten__() on {example.label}"):
                    before = fresh.__getstate__()
                    fresh.__obj_flatten__()
                    after = fresh.__getstate__()
            except Exception:  # noqa: BLE001 - pickling problems are the deepcopy check's
                pass
            else:
                diffs = flat_state_differences(before, after, "__getstate__()", ("before", "after"))
                if diffs:
                    fail("flatten.changes-state",
                         "calling __obj_flatten__ changed the object's pickled state (__getstate__)", *diffs)
        tensors = [t for t in leaves if isinstance(t, torch.Tensor) and t.numel() > 0]
        aliased = [(i, j) for (i, a), (j, b) in itertools.combinations(enumerate(tensors), 2)
                   if _tensor_storage(a) == _tensor_storage(b)]
        if aliased:
            fail("flatten.aliased-tensors", "tensors returned by __obj_flatten__ alias one another (share storage); "
                 "fakification breaks that relationship",
                 *(f"tensor #{i} and tensor #{j} share storage" for i, j in aliased))
        shared = _shared_storage(first, inputs) + _shared_with_calls(ctx, example)
        if shared:
            fail("flatten.shares-caller-storage", "__obj_flatten__ returns a tensor that shares storage with one the "
                 "caller passed in or got back; dynamo refuses the object (UnsafeScriptObjectError: ... is "
                 "aliasing ... Please do a clone): return a clone", *dict.fromkeys(shared),
                 "rule: torch/_dynamo/guards.py make_dupe_guard (a tensor reached from a flattened script object "
                 "must not be another input of the program)")
    return failures


def _tensors(value, where: str) -> list[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` for every non-empty tensor in ``value``, the path rooted at ``where``."""
    return [(where + pytree.keystr(path), leaf) for path, leaf in pytree.tree_leaves_with_path(value)
            if isinstance(leaf, torch.Tensor) and leaf.numel() > 0]


def _shared_storage(flat, others: list[tuple[str, object]]) -> list[str]:
    """Lines naming each flattened tensor that shares storage with a tensor among ``others``."""
    mine = [(path, t) for name, value in flat for path, t in _tensors(value, f"__obj_flatten__ {name!r}")]
    theirs = [(path, t) for what, value in others for path, t in _tensors(value, what)]
    return [f"{path} shares storage with {what}" for path, t in mine for what, u in theirs
            if _tensor_storage(t) == _tensor_storage(u)]


def _shared_with_calls(ctx, example) -> list[str]:
    """Call each method once (its first arguments from the argument source; never one the adopter excluded) on a
    fresh object in the example's state: the
    flattened tensors before the call must not share storage with its result, nor those after it with its
    arguments or result."""
    found: list[str] = []
    for method in ctx.info.user_methods:
        if method == "tracing_mode":
            continue
        try:
            calls = ctx.calls_of(Callee.method(method), limit=1, example=example)
        except NotApplicable:  # excluded by the adopter, or no arguments
            continue
        for call in calls:
            try:
                obj = example.build()
                with ctx.calling(f"{call.code(ctx.info.qualname)} on the example object {example.label} (does "
                             "__obj_flatten__ hand out what the call took or gave?)"):
                    before = obj.__obj_flatten__()
                    made = call.args.make()
                    result = call.invoke(obj, made)
                    after = obj.__obj_flatten__()
            except Exception:  # noqa: BLE001 - the call's own checks report raising
                continue
            seen = named_arguments(call.code(), *made)
            got = [(f"the result of {call.code()}", result)]
            found += _shared_storage(before, got) + _shared_storage(after, seen + got)
    return found
