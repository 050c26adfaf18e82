"""Check 8b: for a class bound with ``def_pickle``, ``copy.deepcopy`` preserves the object's state.

Rule source: ``FakeScriptObject.__init__`` (``torch/_library/fake_class_registry.py``) deep-copies every real
object it fakifies — through ``__getstate__`` / ``__setstate__`` — and keeps the copy as ``real_obj``; a lossy
copy means the traced program sees a different object. The state is compared through ``__obj_flatten__``
(``__getstate__`` when the class has no flatten, or its flatten raises: the ``flatten`` item reports that;
:func:`conformance.torchbind.examples.comparable_state`). The original object must be unchanged too.
"""

from __future__ import annotations

from ...engine.compare import flat_state_differences
from ...torchbind.examples import comparable_state, deepcopy_differences
from ...core.results import Failure
from ...torchbind.context import ClassContext
from .. import with_targets


def _targets(ctx):
    return [None] if ctx.info.pickles else []


@with_targets(_targets)
def deepcopy(ctx: ClassContext, _target: None) -> list[Failure]:
    """copy.deepcopy(obj), which torch does when it fakifies obj, preserves the state."""
    for example in ctx.require_examples():
        obj = example.build()
        code = "\n".join(example.code())
        state = "__obj_flatten__" if ctx.info.has_flatten and not ctx.example_set.flatten_error else "__getstate__"
        repro = ctx.repro(example, ["import copy", "obj = make_obj()", f"print(obj.{state}())",
                                    f"print(copy.deepcopy(obj).{state}())"])
        try:
            before, diffs = deepcopy_differences(obj, ctx.tracer, copying=lambda: ctx.calling(
                lambda: f"copy.deepcopy of the example object {example.label} (def_pickle: __getstate__, then "
                        "__setstate__ builds the copy)"))
        except Exception as exc:  # noqa: BLE001
            return [Failure(f"copy.deepcopy raised {type(exc).__name__}: {exc}", target="__setstate__", example=code, repro=repro,
                            rule="deepcopy.raises")]
        if diffs:
            return [Failure("copy.deepcopy (through __getstate__/__setstate__) does not preserve the state",
                            target="__setstate__",
                            details=tuple(diffs), example=code, repro=repro, rule="deepcopy.state-lost")]
        diffs = flat_state_differences(before, comparable_state(obj, ctx.tracer)[0], "state", ("before", "after"))
        if diffs:
            return [Failure("copy.deepcopy changed the original object", target="__getstate__", details=tuple(diffs), example=code,
                            repro=repro, rule="deepcopy.changes-original")]
    return []
