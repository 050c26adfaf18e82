"""Check C1: a constant (value) custom class keeps the ``__eq__`` / ``__hash__`` contract torch relies on.

Rule source: ``register_custom_class`` / ``register_opaque_type`` (``torch/_library/opaque_object.py``) only
checks that a constant type *defines* ``__eq__`` and ``__hash__``: torch.compile guards a constant object with
``__eq__`` (a program compiled for one object is reused for every object equal to it) and FakeTensor's dispatch
cache keys on its hash. So, searched by hypothesis over objects of the class:

* reflexive: ``a == a``;
* two objects built the same way (equal state) compare equal, else no guard ever holds for a new object and every
  call recompiles;
* symmetric: ``a == b`` exactly when ``b == a``;
* equal objects hash equal.

Whether equal objects are interchangeable for the ops taking them is the ``guards`` check's rule.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ...core.evidence import record
from ...custom.context import state_of
from ...custom.state import twin_differences
from ...core.results import Failure
from ...custom.context import CustomClassContext
from .. import with_targets


def _targets(ctx):
    return [None] if ctx.info.kind == "constant" else []


def _violation(ctx, a_recipe, b_recipe) -> Failure | None:
    name = ctx.info.name
    with ctx.calling(lambda: f"__eq__ / __hash__ of {name} objects {a_recipe.code}, {b_recipe.code}"):
        a, a2, b = a_recipe.build(), a_recipe.build(), b_recipe.build()
        example = f"a = {a_recipe.code}\nb = {b_recipe.code}"
        repro = ctx.repro([f"a = {a_recipe.code}", f"a2 = {a_recipe.code}", f"b = {b_recipe.code}",
                           "print('a == a:', a == a, '| a == a2:', a == a2, '| hash(a), hash(a2):', hash(a), hash(a2))",
                           "print('a == b:', a == b, '| b == a:', b == a, '| hash(a), hash(b):', hash(a), hash(b))"])
        if not a == a:  # noqa: PLR0124 - reflexivity is the rule
            return Failure("__eq__ is not reflexive: a == a is False, so no guard on this object ever holds (every "
                           "call recompiles)", target="__eq__", example=example, repro=repro,
                           rule="eq_hash.not-reflexive")
        if not twin_differences(a, a2) and not a == a2:
            return Failure("two objects built the same way (equal state) compare unequal: torch.compile guards a "
                           "constant object with __eq__, so every new object recompiles the program",
                           target="__eq__", example=f"a = {a_recipe.code}\na2 = {a_recipe.code}",
                           details=(f"state: {state_of(a)!r}",), repro=repro, rule="eq_hash.equal-state-unequal")
        if a == a2 and hash(a) != hash(a2):
            return Failure("objects that compare equal hash differently (hash(a) != hash(a2) for two objects built "
                           "the same way); FakeTensor's cache and every dict keyed by the object rely on it",
                           target="__hash__", example=f"a = {a_recipe.code}\na2 = {a_recipe.code}",
                           details=(f"hash(a) = {hash(a)}, hash(a2) = {hash(a2)}",), repro=repro,
                           rule="eq_hash.hash-differs")
        ab, ba = a == b, b == a
        if bool(ab) != bool(ba):
            return Failure(f"__eq__ is not symmetric: a == b is {ab}, b == a is {ba}", target="__eq__",
                           example=example, repro=repro, rule="eq_hash.not-symmetric")
        if ab and hash(a) != hash(b):
            return Failure("objects that compare equal hash differently", target="__hash__", example=example,
                           details=(f"hash(a) = {hash(a)}, hash(b) = {hash(b)}",), repro=repro,
                           rule="eq_hash.hash-differs")
    record("object pair")  # reflexive, equal state => equal, symmetric, equal => equal hash: all held
    return None


@with_targets(_targets)
def eq_hash(ctx: CustomClassContext, _target: None) -> list[Failure]:
    """A constant custom class: __eq__ reflexive, symmetric, true for equal state; equal objects hash equal."""
    objects = ctx.objects()
    failure = ctx.search(st.tuples(objects, objects), lambda pair: _violation(ctx, *pair), ctx.settings.examples)
    return [failure] if failure else []
