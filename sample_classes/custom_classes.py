"""Python custom classes (opaque objects) for the plugin's own tests: a correct constant (value) type and, each a
subclass registered on its own, one broken variant per trap the checks look for.

Registered through whichever API the running torch has: ``register_custom_class(cls, typ="constant")`` (torch
2.14+) or ``register_opaque_type(cls, typ="value")`` (torch 2.11-2.13); see :mod:`conformance.custom.discovery`.
The custom op ``samples_custom::affine(x, s) = x * s.factor + s.offset`` takes any of them (its parameter is
annotated with the base class).

What each broken variant does to a compiled program (torch 2.13, CPU; eager gives 3 then 7 for ``x = 1`` and the
objects ``(2, 1)`` then ``(2, 5)``; the tests pin each):

* :class:`AffineEqIgnoresOffset`: ``__eq__``/``__hash__`` ignore ``offset``; dynamo's guard (``__eq__``) holds
  for the second object, so the first program is reused: 3, 3.
* :class:`AffineReprDropsOffset`: ``__fx_repr__`` leaves ``offset`` out, so the object torch rebuilds from it in
  generated code has ``offset = 0``: 2, 2 with a backend that generates code from the graph.
* :class:`AffineHashById`: ``__hash__`` hashes the identity, so equal objects hash differently (breaks torch's
  FakeTensor cache keys and every dict keyed by the object).
* :class:`AffineEqIdentity`: ``__eq__`` is identity, so an object never equals its state-equal copy and no guard
  ever holds for a new object: one recompilation per call, until torch's recompile limit.

Hoisted constant types (``hoist=True``: objects are graph inputs): :class:`AffineHoisted` and
:class:`AffineHoistedEqIgnoresOffset`, whose wrong ``__eq__`` cannot make an op's result stale (3, 7 as eager).

Symbolic (reference) types: :class:`Stepper` (``step``, read through the ``USE_REAL`` member ``get_step``,
changed by ``bump``; ``guard_fn`` covers ``step``), with the op ``samples_custom::scale(x, s) = x * s.step``.

* :class:`StepperGuardMissesStep`: ``guard_fn`` returns nothing, so a program that read ``get_step()`` keeps the
  value it baked in after ``bump(3)``: 2 where eager gives 5.
* :class:`StepperGuardById`: ``guard_fn`` returns ``id(obj)`` beside ``step``: sound (a change to ``step`` is
  guarded), but no two objects share a guard value, so a program calling ``samples_custom::scale`` compiles again
  for every new object, twins included (3 compiles for 3 ``StepperGuardById(2)``, where ``Stepper`` needs 1).
* :class:`StepperFakeReadsStep`: the fake kernel of ``samples_custom::widen`` reads ``s.step``, which is not a
  registered member: torch.compile fails with an ``AttributeError`` on the ``FakeScriptObject``.

``INLINED`` members: :class:`Gauge` (``doubled()``, traced by dynamo, reads ``level`` through the ``USE_REAL``
member ``get_level``) and :class:`GaugeInlinedReadsLevel`, whose ``INLINED`` ``bump(n)`` reads and sets ``level``
directly, which is not a registered member: a program calling it cannot be compiled.
A third, :class:`GaugeInlinedAdvances`, has the ``INLINED`` ``take()`` call the ``USE_REAL`` ``advance()``
(``level += 1``): tracing runs it on the caller's object, so compiling or exporting ``obj.take()`` changes the object.

An op that changes its object: :class:`Ticker` and ``samples_custom::tick`` (``count += 1``, then ``x * count``);
an object made inside a program exported non-strict is baked in and shared by the program's calls.
"""

from __future__ import annotations

import torch
from torch._library import opaque_object as _opaque

try:  # torch 2.14+
    from torch._custom_class_base import CustomClassBase as _SymbolicBase
except ImportError:  # torch 2.11-2.13
    from torch._opaque_base import OpaqueBase as _SymbolicBase

__all__ = ["Affine", "AffineEqIgnoresOffset", "AffineReprDropsOffset", "AffineHashById", "AffineEqIdentity",
           "AffineHoisted", "AffineHoistedEqIgnoresOffset",
           "affine", "register_constant", "register_symbolic", "Stepper", "StepperGuardMissesStep",
           "StepperGuardById", "StepperFakeReadsStep", "scale", "widen", "Gauge", "GaugeInlinedReadsLevel", "Ticker",
           "tick", "GaugeInlinedAdvances"]


def register_constant(cls: type | None = None, *, hoist: bool = False):
    """Register ``cls`` as a constant (value) custom class with the API the running torch has; returns ``cls``.
    ``hoist=True`` lifts its objects to graph inputs. Also a decorator factory: ``@register_constant(hoist=True)``."""
    if cls is None:
        return lambda c: register_constant(c, hoist=hoist)
    if hasattr(_opaque, "register_custom_class"):
        _opaque.register_custom_class(cls, typ="constant", hoist=hoist)
    else:
        _opaque.register_opaque_type(cls, typ="value", hoist=hoist)
    return cls


def register_symbolic(guard_fn=None, use_real: tuple[str, ...] = (), inlined: tuple[str, ...] = ()):
    """A decorator: register the class as a symbolic (reference) custom class with ``guard_fn``, the ``USE_REAL``
    members ``use_real`` and the ``INLINED`` ones ``inlined``, with the API the running torch has."""
    members = {m: _opaque.MemberType.USE_REAL for m in use_real}
    members.update({m: _opaque.MemberType.INLINED for m in inlined})

    def register(cls: type) -> type:
        if hasattr(_opaque, "register_custom_class"):
            _opaque.register_custom_class(cls, typ="symbolic", guard_fn=guard_fn, members=members)
        else:
            _opaque.register_opaque_type(cls, typ="reference", guard_fn=guard_fn, members=members)
        return cls

    return register


@register_constant
class Affine:
    """A constant custom class: the affine map ``x * factor + offset`` (``factor``, ``offset``: Python floats)."""

    def __init__(self, factor: float, offset: float):
        self.factor = factor
        self.offset = offset

    def __eq__(self, other):
        return type(other) is type(self) and (self.factor, self.offset) == (other.factor, other.offset)

    def __hash__(self):
        return hash((type(self).__name__, self.factor, self.offset))

    def __fx_repr__(self):
        name = type(self).__name__
        return f"{name}({self.factor!r}, {self.offset!r})", {name: type(self)}

    def __repr__(self):
        return f"{type(self).__name__}({self.factor!r}, {self.offset!r})"


@torch.library.custom_op("samples_custom::affine", mutates_args=())
def affine(x: torch.Tensor, s: Affine) -> torch.Tensor:
    """``x * s.factor + s.offset``: a new tensor, ``x``'s shape and dtype."""
    return x * s.factor + s.offset


@affine.register_fake
def _affine_fake(x, s):
    return torch.empty_like(x)


@register_constant
class AffineEqIgnoresOffset(Affine):
    """Broken: equality and hash ignore ``offset`` (consistently with each other, so only the guard is wrong)."""

    def __eq__(self, other):
        return type(other) is type(self) and self.factor == other.factor

    def __hash__(self):
        return hash(self.factor)


@register_constant
class AffineReprDropsOffset(Affine):
    """Broken: ``__fx_repr__`` leaves ``offset`` out (the constructor's default, 0.0, is rebuilt)."""

    def __init__(self, factor: float, offset: float = 0.0):
        super().__init__(factor, offset)

    def __fx_repr__(self):
        return f"AffineReprDropsOffset({self.factor!r})", {"AffineReprDropsOffset": AffineReprDropsOffset}


@register_constant
class AffineHashById(Affine):
    """Broken: ``__hash__`` hashes the identity, so objects that compare equal hash differently."""

    def __hash__(self):
        return id(self)


@register_constant
class AffineEqIdentity(Affine):
    """Broken: ``__eq__`` is identity, so no other object ever equals this one, not even its copy."""

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)


@register_constant(hoist=True)
class AffineHoisted(Affine):
    """A hoisted constant custom class (``hoist=True``): its objects are graph inputs, not constants."""


@register_constant(hoist=True)
class AffineHoistedEqIgnoresOffset(AffineEqIgnoresOffset):
    """Hoisted, with ``__eq__``/``__hash__`` ignoring ``offset``: harmless for an op, which runs on the object
    passed in (a compiled program gives eager's 3, 7), unlike :class:`AffineEqIgnoresOffset`'s 3, 3."""


@register_symbolic(guard_fn=lambda s: [s.step], use_real=("get_step",))
class Stepper(_SymbolicBase):
    """A symbolic custom class: an integer ``step``; ``get_step()`` is read on the real object while compiling
    (``USE_REAL``), and ``guard_fn`` guards on ``step``, so a program recompiles when it changes."""

    def __init__(self, step: int):
        self.step = step

    def get_step(self) -> int:
        return self.step

    def bump(self, n: int) -> None:
        self.step += n


@torch.library.custom_op("samples_custom::scale", mutates_args=())
def scale(x: torch.Tensor, s: Stepper) -> torch.Tensor:
    """``x * s.step``: a new tensor, ``x``'s shape."""
    return x * s.step


@scale.register_fake
def _scale_fake(x, s):
    return torch.empty_like(x)


@register_symbolic(guard_fn=lambda s: [], use_real=("get_step",))
class StepperGuardMissesStep(Stepper):
    """Broken: ``guard_fn`` guards on nothing, so compiled programs keep the ``get_step()`` they baked in."""


@register_symbolic(guard_fn=lambda s: [s.step, id(s)], use_real=("get_step",))
class StepperGuardById(Stepper):
    """Broken (wasteful, not unsound): ``guard_fn`` returns the object's ``id`` beside ``step``, so a compiled
    program never holds for another object, even one built the same way: a compile per object."""


@register_symbolic(guard_fn=lambda s: [s.step], use_real=("get_step",))
class StepperFakeReadsStep(Stepper):
    """Broken: the fake kernel of ``samples_custom::widen`` reads ``step``, which is not a registered member."""


@torch.library.custom_op("samples_custom::widen", mutates_args=())
def widen(x: torch.Tensor, s: StepperFakeReadsStep) -> torch.Tensor:
    """``x`` repeated ``s.step`` times along a new first dimension (``step`` >= 0)."""
    return x.expand(max(s.step, 0), *x.shape).clone()


@widen.register_fake
def _widen_fake(x, s):
    return x.new_empty((max(s.step, 0), *x.shape))  # the defect: s is a FakeScriptObject while tracing


@register_symbolic(guard_fn=lambda g: [g.level], use_real=("get_level",), inlined=("doubled",))
class Gauge(_SymbolicBase):
    """A symbolic custom class with an ``INLINED`` member that reads the object only through a ``USE_REAL`` one."""

    def __init__(self, level: int):
        self.level = level

    def get_level(self) -> int:
        return self.level

    def doubled(self) -> int:
        return 2 * self.get_level()


@register_symbolic(guard_fn=lambda g: [g.level], use_real=("get_level",), inlined=("doubled", "bump"))
class GaugeInlinedReadsLevel(Gauge):
    """Broken: the ``INLINED`` member ``bump`` reads ``level``, which is not registered."""

    def bump(self, n: int) -> int:
        self.level += n
        return self.level


@register_symbolic()
class Ticker(_SymbolicBase):
    """A symbolic custom class changed by the op that takes it: ``samples_custom::tick`` adds one to ``count``
    (like a generator's state or a cache position). Correct in eager, compiled and passed into an exported program;
    an object created inside a program that is exported non-strict is baked in and shared by its calls (the
    ``baked`` check): eager gives 3, 3 for ``Ticker(2)`` made per call, the exported program 3, 4."""

    def __init__(self, count: int):
        self.count = count


@torch.library.custom_op("samples_custom::tick", mutates_args=())
def tick(x: torch.Tensor, t: Ticker) -> torch.Tensor:
    """Adds one to ``t.count``, then returns ``x * t.count``: a new tensor, ``x``'s shape."""
    t.count += 1
    return x * t.count


@tick.register_fake
def _tick_fake(x, t):
    return torch.empty_like(x)


@register_symbolic(guard_fn=lambda g: [g.level], use_real=("get_level", "advance"), inlined=("doubled", "take"))
class GaugeInlinedAdvances(Gauge):
    """Broken: the ``INLINED`` member ``take()`` advances ``level`` through the ``USE_REAL`` member ``advance()``,
    which tracing evaluates on the real object: torch.compile, non-strict and strict export of ``obj.take()`` each
    leave ``level`` one higher on the caller's object before anything runs (``GaugeInlinedAdvances(2)``: 3 after
    ``torch.export.export``, where eager has not been called at all)."""

    def advance(self) -> int:
        self.level += 1
        return self.level

    def take(self) -> int:
        return self.advance()
