"""Check C4: the fake kernel (``register_fake``) of each custom op taking a Python custom class, of every kind
(constant or symbolic, hoisted or not), agrees with the real op on the same inputs, and a symbolic object's fake
reads only its registered members.

Rule source: torch.library.opcheck's fake-tensor test (``torch/testing/_internal/optests/fake_tensor.py``
``fake_check``: ``torch._subclasses.fake_utils.CrossRefFakeMode``) runs the op on real inputs and again under
``FakeTensorMode`` on their fakes, and requires the same number of outputs, the same aliasing of inputs by outputs
(``_check_alias_info``) and, per tensor output, the same shape, dtype, device, strides, storage offset and
``requires_grad`` (``_check_fake_real_tensors``, ``torch._prims_common.compare_tensor_meta``). Those functions
decide here too. The object reaches the fake as it does while torch.compile traces: a constant object as itself,
a symbolic or hoisted (``hoist=True``) one as a ``FakeScriptObject`` (``torch._library.fake_class_registry
.maybe_to_fake_obj``), whose ``__getattr__`` allows only the members registered with ``members=`` and raises
``AttributeError("Tried to call __getattr__ with attr ...")`` for anything else, so such an op cannot be compiled.

The real op must also leave every tensor argument its schema does not declare written (``Tensor(a!)``) as it was
(torch.library.opcheck's schema test, :mod:`conformance.engine.mutations`): torch.compile takes such an argument as
unchanged, and inductor then reads its old value after the op (rule ``fake_kernel.undeclared-mutation``).

A fake that returns another shape than the real op passes eager and the torch.compile backends that run the real
kernel (``eager``, ``aot_eager``) and breaks inductor, which plans its buffers from the fake (``expected size
2==6``). Inputs the real op rejects are not compared; when it rejects all, the item skips saying what to give.
The check runs nothing through dynamo, so it does not depend on ``TORCHDYNAMO_DISABLE``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import torch

from ...custom.context import positional_argument_names, show
from ...engine.mutations import Snapshot, reproducer_lines
from ...core.evidence import record
from ...core.results import Failure, NotApplicable
from ...engine.reproducers import judging_lines
from ...custom.context import CustomClassContext
from ...custom.discovery import CustomOpInfo
from .. import with_targets

_MEMBER = re.compile(r"attr '([^']+)' on a FakeScriptObject")

#: The field each message of torch's fake-tensor check names (its first words), and how to read it off a tensor.
_FIELDS = (("Shapes", "shape", lambda t: list(t.shape)), ("Dtypes", "dtype", lambda t: t.dtype),
           ("Devices", "device", lambda t: t.device), ("Stride", "stride", lambda t: list(t.stride())),
           ("Storage offset", "storage offset", lambda t: t.storage_offset()),
           ("mismatched storage offset", "storage offset", lambda t: t.storage_offset()),
           ("mismatched requires_grad", "requires_grad", lambda t: t.requires_grad),
           ("Conj", "is_conj", lambda t: t.is_conj()))


def member_read_by_fake(exc: BaseException) -> str | None:
    """The member named by torch's ``FakeScriptObject`` attribute error anywhere in ``exc``'s message or chain,
    or ``None``."""
    seen = 0
    while exc is not None and seen < 10:
        found = _MEMBER.search(str(exc))
        if found:
            return found.group(1)
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def fakified(ctx, mode, obj: Any) -> Any:
    """``obj`` as an op's fake kernel receives it while torch.compile traces under ``mode``: a symbolic or hoisted
    object as a ``FakeScriptObject`` holding its registered members, a constant one as itself."""
    if ctx.info.kind == "symbolic" or ctx.info.hoist:
        from ...engine.torch_api import maybe_to_fake_obj

        return maybe_to_fake_obj(mode, obj)
    return obj


def run_fake(ctx, op, args, obj: Any) -> tuple[Any, tuple]:
    """``op`` on fakes of new values of ``args`` and ``obj`` (fakified as torch does, :func:`fakified`) under a new
    ``FakeTensorMode`` with a shape environment (a fake may make data-dependent sizes), as opcheck's fake check
    does: ``(fake output, (fake positional args, fake kwargs))``. Raises what the fake kernel raises."""
    from ...engine.torch_api import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.utils import _pytree as pytree

    pos, kw = args.make()
    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        fake_pos, fake_kw = pytree.tree_map_only(
            torch.Tensor, functools.partial(mode.from_tensor, static_shapes=True), (pos, kw))
        fake_pos.insert(op.positions[0], fakified(ctx, mode, obj))
        return op.op(*fake_pos, **fake_kw), (fake_pos, fake_kw)


def metadata_differences(real: Any, real_in: tuple, fake: Any, fake_in: tuple) -> list[tuple[str, str, str]]:
    """What torch's fake-tensor check finds between the real op's output and the fake's: ``(output, field,
    what)`` per difference, ``output`` as a path (``result``, ``result[1]``), ``field`` the metadata named
    (``shape``, ``dtype``, ``device``, ``stride``, ``storage offset``, ``requires_grad``, ``is_conj``, ``number
    of outputs``, ``type``, ``aliasing``) and ``what`` the two values and torch's own message. Empty when they
    agree."""
    from ...engine.torch_api import check_alias_info as _check_alias_info
    from ...engine.torch_api import check_fake_real_tensors as _check_fake_real_tensors
    from torch.utils import _pytree as pytree

    real_leaves, _ = pytree.tree_flatten_with_path(real)
    fake_leaves = pytree.tree_leaves(fake)
    if len(real_leaves) != len(fake_leaves):
        return [("result", "number of outputs", f"real {len(real_leaves)}, fake {len(fake_leaves)}")]
    out = []
    for (path, r), f in zip(real_leaves, fake_leaves):
        name = "result" + pytree.keystr(path)
        if isinstance(r, torch.Tensor) != isinstance(f, torch.Tensor):
            out.append((name, "type", f"real {type(r).__name__}, fake {type(f).__name__}"))
            continue
        if not isinstance(r, torch.Tensor):
            continue  # torch's check compares tensors only
        try:
            _check_fake_real_tensors(r, f, sizes=True, strides=True, storage_offset=True, requires_grad=True)
        except Exception as exc:  # noqa: BLE001 - torch's MetadataMismatchError (or AssertionError) names the field
            text = str(exc).strip()
            field, read = next(((fld, rd) for prefix, fld, rd in _FIELDS if text.startswith(prefix)),
                               ("metadata", None))
            values = f"real {read(r)}, fake {read(f)}; " if read is not None else ""
            out.append((name, field, f"{values}torch: {text}"))
    if not out:
        try:
            _check_alias_info("", real, real_in, fake, fake_in)
        except Exception as exc:  # noqa: BLE001 - torch's MetadataMismatchError
            out.append(("result", "aliasing", f"torch: {str(exc).strip()}"))
    return out


def _targets(ctx):
    return list(ctx.info.ops)


@with_targets(_targets)
def fake_kernel(ctx: CustomClassContext, op: CustomOpInfo) -> list[Failure]:
    """A custom op taking a Python custom class: its fake kernel gives the real op's output metadata (shape, dtype,
    device, strides, aliasing) and reads only registered members of a symbolic object."""
    args_sets = ctx.arguments.fixed(op.qualname, op.schema, op.positions[0], limit=3)
    compared = 0
    for recipe in _objects(ctx):  # at least one object: the op, not the constructor, rejects what follows
        for args in args_sets:
            pos, kw = args.make()
            before = Snapshot([*zip(positional_argument_names(op, args), pos), *kw.items()], skip=op.written)
            pos.insert(op.positions[0], recipe.build())
            try:
                with ctx.calling(lambda: f"{op.qualname} in eager with {recipe.code}"):
                    real = op.op(*pos, **kw)
            except Exception:  # noqa: BLE001 - inputs the real op rejects: nothing to compare
                continue
            call = ctx.call_code(op, args, "obj")
            written = before.changed()
            if written:
                return [_undeclared(ctx, op, args, recipe, call, written, before)]
            try:
                with ctx.calling(lambda: f"the fake kernel of {op.qualname} with {recipe.code}"):
                    fake, fake_in = run_fake(ctx, op, args, recipe.build())
            except Exception as exc:  # noqa: BLE001 - the fake fails where the real op returns: the rule's failure
                return [_raised(ctx, op, args, recipe, call, real, exc)]
            record("fake output")
            compared += 1
            differences = metadata_differences(real, (pos, kw), fake, fake_in)
            if differences:
                return [_disagrees(ctx, op, args, recipe, call, real, differences)]
    if not compared:
        raise NotApplicable(f"{op.qualname} rejected every argument set with the objects tried, so no fake output "
                            "was compared; " + ctx.arguments.hint(op.qualname))
    return []


def _undeclared(ctx, op, args, recipe, call, written: list[str], before: Snapshot) -> Failure:
    names = ", ".join(repr(n) for n in written)
    ns, name = op.qualname.split("::")
    shown, labels = [a.code for a in args.args], positional_argument_names(op, args)
    shown.insert(op.positions[0], "obj")
    labels.insert(op.positions[0], op.schema.arguments[op.positions[0]].name)
    kws = "".join(f", {k}={v.code}" for k, v in args.kwargs)
    return Failure(
        f"{op.qualname} changes its argument {names} in place, but its schema does not declare it written "
        f"({op.schema}): torch.compile and export take the argument as unchanged, so a compiled program may read "
        f"it before the op wrote it; declare it, 'Tensor(a!) {written[0]}' in a Library.define schema or "
        f"mutates_args=({written[0]!r},) for torch.library.custom_op (torch.library.opcheck's schema test fails the "
        "same way)", example=f"obj = {recipe.code}", call=call,
        details=tuple(f"{n}: {show(before.values(n)[0])} before the call, {show(before.values(n)[1])} after"
                      for n in written),
        repro=ctx.repro([f"obj = {recipe.code}", f"args = [{', '.join(shown)}]",
                         *reproducer_lines(f"torch.ops.{ns}.{name}(*args{kws})", labels)]),
        rule="fake_kernel.undeclared-mutation")


def _disagrees(ctx, op, args, recipe, call, real, differences) -> Failure:
    output, field, what = differences[0]
    return Failure(
        f"the fake kernel of {op.qualname} disagrees with the real op on {output}: {field} ({what}); torch.compile "
        "with inductor, export and AOTInductor plan with the fake's output, so they fail or compute with the wrong "
        "metadata (torch.library.opcheck's fake-tensor test fails the same way)",
        example=f"obj = {recipe.code}", call=call,
        details=(f"real op: {show(real)}", *(f"{o}: {f}: {w}" for o, f, w in differences)),
        repro=ctx.repro(_disagreement_script(ctx, op, args, recipe, call)), rule="fake_kernel.metadata-differs")


def _disagreement_script(ctx, op, args, recipe, call) -> list[str]:
    """The body of the reproducer of a fake that disagrees with the real op: the op on real inputs, then on their
    fakes (the object fakified as torch.compile does), both printed and compared as :func:`metadata_differences`
    compares them, with torch's own functions; the script says what it found
    (:func:`~conformance.engine.reproducers.judging_lines`) before its last step, inductor compiling the call,
    which a wrong shape makes raise (that step follows from the difference, it is not the evidence)."""
    pos = [a.code for a in args.args]
    pos.insert(op.positions[0], "obj")
    kw = ", ".join(f"{k!r}: {v.code}" for k, v in args.kwargs)
    fakified = ctx.info.kind == "symbolic" or ctx.info.hoist
    ns, name = op.qualname.split("::")
    return [
        "import torch.utils._pytree as pytree", "from torch._subclasses.fake_tensor import FakeTensorMode",
        "from torch._subclasses.fake_utils import _check_alias_info, _check_fake_real_tensors",
        "from torch.fx.experimental.symbolic_shapes import ShapeEnv",
        *(["from torch._library.fake_class_registry import maybe_to_fake_obj"] if fakified else []), "", "",
        "def make_args(obj):", f"    return [{', '.join(pos)}], {{{kw}}}", "", "",
        f"obj = {recipe.code}", "real_args = make_args(obj)",
        f"real = torch.ops.{ns}.{name}(*real_args[0], **real_args[1])",
        "print('real:', real.shape if isinstance(real, torch.Tensor) else real)",
        "with FakeTensorMode(shape_env=ShapeEnv()) as mode:",
        f"    fake_obj = {f'maybe_to_fake_obj(mode, {recipe.code})' if fakified else recipe.code}",
        "    fake_args = pytree.tree_map_only(torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), "
        "make_args(fake_obj))",
        f"    fake = torch.ops.{ns}.{name}(*fake_args[0], **fake_args[1])",
        "print('fake:', fake.shape if isinstance(fake, torch.Tensor) else fake)", "",
        "# What torch.library.opcheck's fake-tensor test compares (torch._subclasses.fake_utils):",
        "found = []", "reals, fakes = pytree.tree_leaves(real), pytree.tree_leaves(fake)",
        "if len(reals) != len(fakes):", "    found.append(f'number of outputs: real {len(reals)}, fake {len(fakes)}')",
        "for r, f in zip(reals, fakes):",
        "    if isinstance(r, torch.Tensor) != isinstance(f, torch.Tensor):",
        "        found.append(f'type: real {type(r).__name__}, fake {type(f).__name__}')",
        "    elif isinstance(r, torch.Tensor):", "        try:",
        "            _check_fake_real_tensors(r, f, sizes=True, strides=True, storage_offset=True, requires_grad=True)",
        "        except Exception as e:", "            found.append(str(e).strip())",
        "if not found:", "    try:", "        _check_alias_info('', real, real_args, fake, fake_args)",
        "    except Exception as e:", "        found.append(f'aliasing: {str(e).strip()}')",
        *judging_lines("found"), "",
        "# What follows from it: torch.compile with inductor plans its buffers from the fake",
        f"print(torch.compile(lambda obj: {call}, backend='inductor', fullgraph=True)(obj))"]


def _raised(ctx, op, args, recipe, call, real, exc: BaseException) -> Failure:
    member = member_read_by_fake(exc)
    repro = ctx.repro([f"obj = {recipe.code}", f"print('eager:', {call})",
                       f"program = torch.compile(lambda o: {ctx.call_code(op, args, 'o')}, backend='eager', "
                       "fullgraph=True)", "print('compiled:', program(obj))"])
    if member is not None:
        registered = ", ".join(ctx.info.members) or "none"
        return Failure(
            f"the fake kernel of {op.qualname} reads {member!r} of the {ctx.info.cls.__qualname__} object, which is "
            f"not a registered member (registered: {registered}): torch.compile fails with AttributeError on the "
            f"FakeScriptObject; register it in members= (USE_REAL: read on the real object and baked in) or do not "
            f"read it in the fake", example=f"obj = {recipe.code}", call=call, details=(f"eager: {show(real)}",),
            repro=repro, rule="fake_kernel.unregistered-member")
    first = (str(exc).strip().splitlines() or [""])[0]
    return Failure(
        f"the fake kernel of {op.qualname} raised {type(exc).__name__}: {first} where the real op returned (the "
        f"object reaching it as torch.compile passes it: "
        f"{'a FakeScriptObject' if ctx.info.kind == 'symbolic' or ctx.info.hoist else 'the object itself'}); "
        "torch.compile and export cannot trace the op with these inputs",
        example=f"obj = {recipe.code}", call=call, details=(f"eager: {show(real)}",), repro=repro,
        rule="fake_kernel.raises")


def _objects(ctx):
    """The objects compared: every object the adopter's ``@conformance.examples`` factories return (comparing a
    fake is cheap, and any of them may be the one it gets wrong), else three drawn from the constructor (the same
    on every run). Raises the class's :meth:`~conformance.custom.context.CustomClassContext.unbuildable` skip when
    no object could be built."""
    return ctx.example_recipes() or ctx.drawn(3, f"{ctx.info.name}:fake_kernel")
