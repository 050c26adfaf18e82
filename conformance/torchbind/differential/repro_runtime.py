# ruff: noqa: F821 - make_obj, torch, pytree, FakeTensorMode, ShapeEnv and maybe_to_fake_obj come from the script
"""The runtime of a differential reproducer script: NOT imported, but inlined as text into every script that
:func:`conformance.torchbind.differential.repro.repro_script` writes (everything below this docstring, verbatim).

It runs after the script's own header (:meth:`conformance.torchbind.context.ClassContext.repro`), which imports
``torch``, ``torch.utils._pytree as pytree``, ``FakeTensorMode``, ``ShapeEnv`` and ``maybe_to_fake_obj``, loads
the user's libraries and defines ``make_obj()`` (builds the example object); the script calls :func:`step` and
:func:`observe` after it, once per step of the failing sequence.
"""

import contextlib
import re

# The C++ object and its fake, fakified ONCE (as dynamo / export do before tracing); from here on each side
# evolves by its own methods. The fake's calls run under FakeTensorMode, the call_torchbind path.
mode = FakeTensorMode(shape_env=ShapeEnv())
real = make_obj()
fake = maybe_to_fake_obj(mode, make_obj())
seen = {"C++": [], "fake": []}  # tensors passed in or returned so far, to show aliasing
differs = []


def show(value, side=None, path="result", where=""):
    """Tensors by the metadata a FakeTensor carries and, with a side, the earlier tensors they share storage
    with; anything else by type and value."""
    if isinstance(value, BaseException):
        lines = str(value).strip().splitlines()
        return f"raised {type(value).__name__}: {lines[0][:200] if lines else ''}"
    if isinstance(value, torch.Tensor):
        size = lambda x: str(x) if isinstance(x, int) else "{sym}"  # a data-dependent (symbolic) size
        # Strides of size-1 dims and of empty tensors do not matter (torch._prims_common.check_significant_strides)
        empty = any(isinstance(x, int) and x == 0 for x in value.shape)
        strides = ["*" if empty or n == 1 else size(x) for n, x in zip(value.shape, value.stride())]
        text = (f"Tensor(shape=[{', '.join(map(size, value.shape))}], dtype={value.dtype}, device={value.device}, "
                f"stride=[{', '.join(strides)}]{', requires_grad=True' if value.requires_grad else ''})")
        if side is not None:
            key = value.untyped_storage()._cdata
            hits = [name for name, t in seen[side] if t.untyped_storage()._cdata == key]
            text += f" aliasing [{', '.join(hits)}]" if hits else ""
            seen[side].append((path + where, value))
        return text
    if isinstance(value, (list, tuple)):
        parts = [show(v, side, f"{path}[{i}]", where) for i, v in enumerate(value)]
        return f"{type(value).__name__}[" + ", ".join(parts) + "]"
    return f"{type(value).__name__} {value!r}"


def same(real_text, fake_text, reference_is_cpp=True):
    if real_text.startswith("raised ") and (reference_is_cpp or fake_text.startswith("raised ")):
        return True  # C++ rejected the call: not a comparison
    pattern = re.escape(fake_text).replace(re.escape("{sym}"), "-?[0-9]+")  # a symbolic size matches any
    return re.fullmatch(pattern, real_text) is not None


def report(what, real_text, fake_text, sides=("C++", "fake")):
    mark = "" if same(real_text, fake_text, sides[0] == "C++") else "   <-- DIFFERS"
    if mark:
        differs.append(what)
    print(f"{what}\n    {sides[0] + ':':<12}{real_text}\n    {sides[1] + ':':<12}{fake_text}{mark}")


def fakified(x):
    if isinstance(x, torch.Tensor):
        return mode.from_tensor(x, static_shapes=True)
    try:
        return maybe_to_fake_obj(mode, x)
    except Exception:
        return x


def run(side, call, make_args, where, step=None):
    """call(obj, args, kwargs) on one side (the fake's under FakeTensorMode, with fake arguments)."""
    args, kwargs = make_args()
    if side == "fake":
        args, kwargs = pytree.tree_map_only((torch.Tensor, torch.ScriptObject), fakified, (args, kwargs))
    if step is not None:
        named = [(str(i), v) for i, v in enumerate(args)] + list(kwargs.items())
        for name, v in named:
            show(v, side, f"argument {name}", f" of step {step}")
    try:
        with mode if side == "fake" else contextlib.nullcontext():
            out = call(real if side == "C++" else fake, args, kwargs)
    except Exception as exc:
        out = exc
    return show(out, side, "result", where), out


def step(n, text, call, make_args, cpp_only=False):
    where = f" of step {n}"
    if cpp_only:  # C++ rejects these arguments: not applied to the fake, not compared
        print(f"step {n}: {text}\n    {'C++:':<12}{run('C++', call, make_args, where, n)[0]} (not applied to the fake)")
        return
    report(f"step {n}: {text}", run("C++", call, make_args, where, n)[0], run("fake", call, make_args, where, n)[0])


def observe(n, names, state_changed):
    """Call each observer on both sides, as the test does after every step; after a state-changing step also
    compare the fake with a fresh fake made now from the C++ object's __obj_flatten__."""
    no_args = lambda: ((), {})
    fake_outs = {}
    for name in names:
        call = lambda o, a, k, name=name: getattr(o, name)(*a, **k)
        where = f" of {name}() after step {n}"
        real_text, _ = run("C++", call, no_args, where)
        fake_text, fake_outs[name] = run("fake", call, no_args, where)
        report(f"  after step {n}: obj.{name}()", real_text, fake_text)
    if state_changed and names:
        fresh_mode = FakeTensorMode(shape_env=ShapeEnv())
        fresh = maybe_to_fake_obj(fresh_mode, real)
        for name in names:
            try:
                with fresh_mode:
                    out = getattr(fresh, name)()
            except Exception as exc:
                out = exc
            report(f"  after step {n}: {name}() on a fake made now from the C++ object's state",
                   show(out), show(fake_outs[name]), ("fresh fake", "fake"))
