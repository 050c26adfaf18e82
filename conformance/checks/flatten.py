"""Check 5: the ``__obj_flatten__`` contract.

From ``torch/_library/fake_class_registry.py`` (``_check_valid_flat_script_obj``, ``maybe_to_fake_obj``) and the
PT2 custom-class notes: ``__obj_flatten__`` returns a tuple of ``(str, value)`` pairs; torch fakifies the tensors
among the values and passes the rest through; dynamo guards on the flattened values, so the result must be
deterministic and calling it must not change the object; tensors that alias one another lose that relationship
when fakified ("This is not supported and may cause unexpected behavior"). Names must be unique because fake
classes rebuild themselves with ``cls(**dict(flattened))``, which keeps only the last duplicate.
"""

from __future__ import annotations

import itertools

import torch
import torch.utils._pytree as pytree
from torch._higher_order_ops.utils import _tensor_storage
from torch._library.fake_class_registry import _check_valid_flat_script_obj

from ..compare import describe, flat_state_differences
from ..isolation import calling
from ..results import Failure
from . import check
from .tracing_mode import traces_with_real_object

SUPPORTED_LEAVES = (torch.Tensor, int, float, bool, str, type(None), torch.dtype, torch.device)


@check("flatten")
def flatten(ctx, _target) -> list[Failure]:
    """__obj_flatten__ returns unique (str, value) pairs of supported types, deterministically, without
    changing the object, and with no aliasing tensors."""
    info = ctx.info
    if not info.has_flatten:
        if traces_with_real_object(ctx):
            return []
        return [Failure("the class has no __obj_flatten__, so torch cannot fakify it", target="__obj_flatten__",
                        cpp=f"methods: {', '.join(info.methods)}",
                        details=("add an __obj_flatten__ method returning a tuple of (name, value) pairs, or a "
                                 "tracing_mode() method returning \"real\" to trace with the real object",))]
    failures: list[Failure] = []
    for example in ctx.require_examples():
        code = "\n".join(example.code())

        def fail(summary, *details, cpp=None):
            failures.append(Failure(summary, target="__obj_flatten__", cpp=cpp,
                                    details=tuple(details), example=code,
                                    repro=ctx.repro(example, ["obj = make_obj()", "print(obj.__obj_flatten__())",
                                                              "print(obj.__obj_flatten__())"])))

        obj = example.build()
        label = f"{info.qualname}.__obj_flatten__() on the example object {example.label}"
        try:
            with calling(label):
                first = obj.__obj_flatten__()
        except Exception as exc:  # noqa: BLE001
            fail(f"__obj_flatten__ raised {type(exc).__name__}: {exc}")
            continue
        try:
            _check_valid_flat_script_obj(first)
        except RuntimeError as exc:
            fail(f"__obj_flatten__ returned the wrong structure: {exc}", cpp=f"returned {describe(first)}")
            continue
        names = [name for name, _ in first]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            fail(f"__obj_flatten__ repeats the name(s) {', '.join(map(repr, dups))}; "
                 "cls(**dict(flattened)) keeps only the last one", cpp=f"returned names {names}")
        leaves = pytree.tree_leaves([v for _, v in first])
        bad = [leaf for leaf in leaves if not isinstance(leaf, SUPPORTED_LEAVES)]
        if bad:
            fail("__obj_flatten__ returns values torch cannot fakify or guard on: "
                 + ", ".join(sorted({type(b).__name__ for b in bad})),
                 "supported: tensors, int, float, bool, str, None, dtype, device, and lists/tuples/dicts of them")
        try:
            with calling(label):
                second = obj.__obj_flatten__()
        except Exception as exc:  # noqa: BLE001
            fail(f"a second __obj_flatten__ call raised {type(exc).__name__}: {exc}")
            continue
        diffs = flat_state_differences(first, second, "flattened")
        if diffs:
            fail("__obj_flatten__ is not deterministic or changes the object: two calls on the same object "
                 "returned different states", *diffs)
        if info.pickles:
            fresh = example.build()
            try:
                with calling(f"{info.qualname}.__getstate__() and __obj_flatten__() on {example.label}"):
                    before = fresh.__getstate__()
                    fresh.__obj_flatten__()
                    after = fresh.__getstate__()
            except Exception:  # noqa: BLE001 - pickling problems are the deepcopy check's
                pass
            else:
                diffs = flat_state_differences(before, after, "__getstate__()", ("before", "after"))
                if diffs:
                    fail("calling __obj_flatten__ changed the object's pickled state (__getstate__)", *diffs)
        tensors = [t for t in leaves if isinstance(t, torch.Tensor) and t.numel() > 0]
        aliased = [(i, j) for (i, a), (j, b) in itertools.combinations(enumerate(tensors), 2)
                   if _tensor_storage(a) == _tensor_storage(b)]
        if aliased:
            fail("tensors returned by __obj_flatten__ alias one another (share storage); fakification breaks that "
                 "relationship", *(f"tensor #{i} and tensor #{j} share storage" for i, j in aliased))
    return failures
