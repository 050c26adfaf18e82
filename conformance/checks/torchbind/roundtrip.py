"""Check 6a: flatten -> fakify -> ``__obj_unflatten__`` succeeds for every example object.

This is ``torch._library.fake_class_registry.maybe_to_fake_obj``, which dynamo and AOTAutograd run on every
TorchBind input and attribute before tracing; it must also yield an instance of the registered fake class,
because torch then dispatches method calls to that object. That instance must keep every ``__obj_flatten__`` key
as an attribute of the same name: torch.compile reads ``getattr(fake, key)`` for each flattened key
(``torch/_dynamo/output_graph.py``, ``remove_unused_graphargs``), so a fake that stores its state under other
names fails every torch.compile and strict-export program with ``AttributeError``. And it must keep each key's
*value* there (tensors as fake tensors of the same shape and dtype): a fake whose ``__obj_unflatten__`` reads the
fields by position and swaps two of them passes the key test but traces with the wrong state.

What torch itself reads of those attributes is their tensors and SymInts (``remove_unused_graphargs`` maps over
them only; guards are built on the C++ object's ``__obj_flatten__``, ``torch/_dynamo/guards.py``), so a key whose
value holds no tensor may be kept in another form (an engine string kept base64-decoded, as Torch-TensorRT's
published fake keeps it) with no effect on any program: such a difference fails the item only where the value is
read through a getter method of the key's name that C++ also has (the program's result then differs), and is a
note otherwise (the fake's methods that read it are held to C++ by ``agreement`` and ``differential``).
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from ...engine.compare import describe, flattened_pairs, kept_differences
from ...core.evidence import record
from ...torchbind.context import new_fake_mode
from ...core.results import Failure, NotApplicable, Note, exception_line
from ...torchbind.context import ClassContext

#: How roundtrip's lines name the real value: what C++ flattened.
FLATTENED = "C++ flattened"


def roundtrip(ctx: ClassContext, _target: None) -> list[Failure]:
    """maybe_to_fake_obj (flatten, fakify tensors, __obj_unflatten__) works on every example object."""
    fake_class = ctx.require_fake()
    info = ctx.info
    if not info.has_flatten:
        return []  # the flatten check reports the missing __obj_flatten__
    failures = []
    flatten_errors: list[str] = []
    kept_otherwise: list[tuple[str, list[str]]] = []  # (example, differences) under keys no program reads
    for example in ctx.require_examples():
        code = "\n".join(example.code())
        repro = ctx.repro(example, ["fake_obj = maybe_to_fake_obj(FakeTensorMode(shape_env=ShapeEnv()), make_obj())",
                                    "print(fake_obj.wrapped_obj)"])
        obj = example.build()
        try:
            with ctx.calling(f"{info.qualname}.__obj_flatten__() on the example object {example.label}"):
                flat = obj.__obj_flatten__()
        except Exception as exc:  # noqa: BLE001 - the flatten check reports it
            flatten_errors.append(exception_line(exc, limit=300))
            continue
        try:
            # A fresh object: flattening may change the object (the flatten check reports that), so the fake is
            # made from an object flattened once, like `flat`.
            fake_obj = ctx.fakify(example.build(), new_fake_mode(), state=example.label)
        except Exception as exc:  # noqa: BLE001
            failures.append(Failure(
                "fakifying the object failed (flatten -> fake tensors -> __obj_unflatten__)", target="__obj_unflatten__",
                cpp=f"__obj_flatten__() returned {describe(flat)}",
                fake=f"raised {type(exc).__name__}: {exc}", example=code, repro=repro, rule="roundtrip.fakify-raises"))
            continue
        wrapped = fake_obj.wrapped_obj
        if not isinstance(wrapped, fake_class):
            failures.append(Failure(
                target="__obj_unflatten__", summary=f"__obj_unflatten__ must return an instance of the fake class {fake_class.__qualname__}",
                cpp=f"__obj_flatten__() returned {describe(flat)}",
                fake=f"__obj_unflatten__ returned {describe(wrapped)}", example=code, repro=repro,
                rule="roundtrip.wrong-class"))
            continue
        missing = [key for key in _keys(flat) if not _has_attribute(wrapped, key)]
        if missing:
            failures.append(Failure(
                f"the fake keeps no attribute for the __obj_flatten__ key(s) {', '.join(map(repr, missing))}; "
                "torch.compile reads getattr(fake, key) for every flattened key", target="__obj_unflatten__",
                cpp=f"__obj_flatten__() returned the keys {', '.join(map(repr, _keys(flat)))}",
                fake=f"{type(wrapped).__qualname__} has attributes "
                     f"{', '.join(sorted(k for k in vars(wrapped) if not k.startswith('__'))) or '(none)'}",
                details=("store each flattened value under its key's name, e.g. cls(**dict(flattened)) with an "
                         "__init__ that sets self.<key> = <value> (torch/_dynamo/output_graph.py, "
                         "remove_unused_graphargs)",),
                example=code, repro=repro, rule="roundtrip.key-missing"))
            continue
        record("fakified object")  # an instance of the fake class keeping every flattened key
        pairs = flattened_pairs(flat)
        held, getters = _held_values(ctx, example, wrapped, pairs)
        record("flattened value", len(held))
        read = {key for key, value in pairs if key in getters or _holds_tensor(value)}  # what a program reads
        unread = [d for key, value in pairs if key in held and key not in read
                  for d in kept_differences(value, held[key], key, FLATTENED)]
        if unread:
            swapped = _swaps([(k, v) for k, v in pairs if k not in read], held)
            kept_otherwise.append((example.label, ([f"swapped: {swapped[0]}"] if swapped else []) + unread))
        pairs = [(key, value) for key, value in pairs if key in read]
        wrong = [d for key, value in pairs if key in held for d in kept_differences(value, held[key], key, FLATTENED)]
        if wrong:
            swapped = _swaps(pairs, held)
            failures.append(Failure(
                (f"the fake's __obj_unflatten__ swaps the values of the __obj_flatten__ keys {swapped[0]}"
                 if swapped else
                 "the fake keeps a different value under an __obj_flatten__ key than C++ flattened (an "
                 "__obj_unflatten__ that reads fields by position?)"), target="__obj_unflatten__",
                cpp=f"__obj_flatten__() returned {describe(flat)}",
                fake=f"{type(wrapped).__qualname__} keeps "
                     + ", ".join(f"{key}={describe(held[key])}" for key, _ in pairs if key in held),
                details=tuple(swapped) + tuple(wrong) + ("each attribute must hold its key's flattened value (tensors as fake "
                                        "tensors of the same shape and dtype): torch.compile guards and traces "
                                        "on them",),
                example=code, repro=repro, rule="roundtrip.values-swapped" if swapped else "roundtrip.value-differs"))
    if kept_otherwise:
        label, unread = kept_otherwise[0]
        failures.append(Note(
            f"the fake keeps other values than C++ flattened under keys that hold no tensor and that no getter of "
            f"the key's name reads (on {len(kept_otherwise)} example object(s); on {label}: {'; '.join(unread[:4])})"
            ": torch reads only the tensors and SymInts of a fake's attributes (torch/_dynamo/output_graph.py, "
            "remove_unused_graphargs) and guards on the C++ object's __obj_flatten__, so no program changes "
            f"because of it; the fake's methods that read them are compared by {info.test_name}::agreement and "
            "::differential"))
    if flatten_errors and len(flatten_errors) == len(ctx.require_examples()):
        raise NotApplicable(f"{info.qualname}.__obj_flatten__() raised {flatten_errors[0]} on every example object, "
                            "so torch cannot fakify one (maybe_to_fake_obj calls it first) and there is no fake "
                            f"object to judge (see {info.test_name}::flatten)")
    return failures


def _holds_tensor(value) -> bool:
    """Whether a flattened value is or holds (in lists, tuples, dicts) a tensor."""
    return any(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_leaves(value))


def _held_values(ctx, example, wrapped, pairs) -> tuple[dict[str, object], set[str]]:
    """What the fake object ``wrapped`` holds for each flattened ``(key, value)``: its attribute of that name, or,
    where the attribute is a method (a key that is also a method name, e.g. ``size``), what that method returns
    when called without arguments — only where the C++ method of the same name returns the flattened value
    itself on a fresh object of ``example`` (so the getter is held to what C++ shows it to be). Keys whose value
    cannot be judged that way are left out. Also the keys read through such a getter."""
    held: dict[str, object] = {}
    getters: set[str] = set()
    real = None
    for key, value in pairs:
        kept = getattr(wrapped, key, None)
        if not callable(kept) or isinstance(kept, torch.Tensor):
            held[key] = kept
            continue
        try:
            if real is None:
                real = example.build()
            with ctx.calling(f"{ctx.info.qualname}.{key}() on the example object {example.label} (the getter "
                             f"of the flattened key {key!r}?)", side="C++"):
                from_cpp = getattr(real, key)()
            if kept_differences(value, from_cpp, key, FLATTENED):
                continue  # C++'s method of that name is not a getter of the flattened value: not judged
            with ctx.calling(f"{type(wrapped).__qualname__}.{key}() on the fakified object {example.label}",
                             side="fake"):
                held[key] = kept()
            getters.add(key)
        except Exception:  # noqa: BLE001 - takes arguments, or raises: not a getter, not judged here
            continue
    return held, getters


def _swaps(pairs, held) -> list[str]:
    """``'a' and 'b' (...)`` for each two keys whose values the fake keeps the other way round: what ``a`` holds
    matches ``b``'s flattened value and the reverse, while neither matches its own."""
    flat = dict(pairs)
    keys = [k for k in flat if k in held and kept_differences(flat[k], held[k], k, FLATTENED)]
    found = []
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if not kept_differences(flat[b], held[a], a, FLATTENED) and \
                    not kept_differences(flat[a], held[b], b, FLATTENED):
                found.append(f"{a!r} and {b!r} ({a} holds {describe(held[a])}, C++ flattened {describe(flat[a])} "
                             f"for it and {describe(flat[b])} for {b})")
    return found


def _keys(flat) -> list[str]:
    """The keys of an ``__obj_flatten__`` result; none when it is malformed (the flatten check reports that)."""
    try:
        return [key for key, _ in flat if isinstance(key, str)]
    except (TypeError, ValueError):
        return []


def _has_attribute(obj, name: str) -> bool:
    try:
        getattr(obj, name)
    except AttributeError:
        return False
    except Exception:  # noqa: BLE001 - a property that raises something else still exists
        return True
    return True
