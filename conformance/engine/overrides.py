"""What :func:`conformance.strategy` checks when it is called, so that a mistake is one error at registration
(while ``--torchbind-load`` imports the module: a usage error naming it) instead of a failure of every item that
draws arguments (a strategy drawing tensors instead of Python source failed 57 items of one class):

* :func:`classes_taking`: the classes a custom op takes, for ``conformance.strategy("ns::op", arg=...)``, which
  names an op alone and applies to every class it takes;
* :func:`check_override`: a factory that needs no object is called and a few values are drawn from its strategy;
  one that returns no strategy, or draws something that is not an argument (:func:`conformance.strategy` says
  what is), raises, naming the registration, the factory, what it returned and what it should return. A factory
  that takes the object can only be called with one, when a check runs.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis.strategies import SearchStrategy

from .arguments import _as_argument_set, _as_value, draw_fixed, takes_object

__all__ = ["classes_taking", "check_override"]

#: How many values :func:`check_override` draws (derandomized, as the deterministic checks draw).
DRAWS = 3

_ONE_VALUE = ("Python source of the value (a str such as \"torch.ones(3)\"; a string value is \"'abc'\", e.g. "
              "st.text().map(repr)), an int, float, bool or None, or a conformance.engine.values.Value")
_ARGUMENT_LIST = ("the argument list: source text (\"torch.ones(3), alpha=2.0\"), a list or tuple of values, a dict "
                  "of keyword values (each value Python source, an int, float, bool or None), or a "
                  "conformance.engine.values.ArgumentSet")


def classes_taking(op: str) -> list[str]:
    """The classes the custom op ``op`` (``"ns::op"``, or ``"ns::op.overload"``) takes: TorchBind classes
    (``ns::Cls``) where its schema has an argument of the class, Python custom classes (``module.QualName``)
    where a ``torch.library.custom_op`` parameter is annotated with one; sorted. Raises ``ValueError`` when no such
    op is registered (its library is not loaded yet) or it takes no class, naming it."""
    from ..custom.discovery import discover_custom, registered_custom_classes
    from ..torchbind.discovery import CLASS_PREFIX, qualname_of
    from ..core.qualname import split_qualname

    name, _, overload = op.partition(".")
    if split_qualname(name) is None:
        raise ValueError(f"conformance.strategy({op!r}, ...): name the class and its method "
                         f"(conformance.strategy({op!r}, 'method', arg=...)), or a custom op alone as 'ns::op'")
    overloads = torch._C._jit_get_schemas_for_operator(name)
    schemas = [s for s in overloads if s.overload_name == overload]
    if overloads and not schemas:
        raise ValueError(f"conformance.strategy({op!r}, ...): {name} has no overload {overload or '(default)'}; "
                         f"name one of {', '.join(name + ('.' + s.overload_name if s.overload_name else '') for s in overloads)}")
    found = {qualname_of(a.type.qualified_name()) for s in schemas for a in s.arguments
             if a.type.kind() == "ClassType" and a.type.qualified_name().startswith(CLASS_PREFIX)}
    for custom in registered_custom_classes():
        if any(o.qualname == op for o in discover_custom(custom).ops):
            found.add(custom)
    if found:
        return sorted(found)
    if not schemas:
        raise ValueError(f"conformance.strategy({op!r}, ...): no operator {op} is registered; load its library "
                         "(or define the custom op) before the module that registers the strategy, or name a class "
                         f"and its method: conformance.strategy('ns::Cls', 'method', arg=...)")
    raise ValueError(f"conformance.strategy({op!r}, ...): {op} takes no TorchBind or Python custom class "
                     f"({schemas[0]}), so no check calls it; a strategy for a class's method names both: "
                     "conformance.strategy('ns::Cls', 'method', arg=...)")


def _short(value: Any) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."


def check_override(call: str, arg: str | int | None, factory: Any) -> None:
    """Check the override ``factory`` registered by ``call`` (``"conformance.strategy('ns::Cls', 'm', arg=0)"``,
    for messages) for one argument (``arg`` given) or the whole argument list (``arg`` ``None``): a factory that
    takes no object is called and :data:`DRAWS` values are drawn from its strategy. Raises ``TypeError`` for a
    factory that returns something other than a hypothesis strategy (or ``None`` excluding a whole method) or a
    strategy that draws something other than an argument (a ``torch.Tensor`` instead of the source that makes
    it), naming what it returned and what it should return; ``ValueError`` for ``None`` returned for one
    argument. A factory that takes the object, or whose call or draw raises (it may need what is not loaded
    yet), is left to the checks, which call it where it is used."""
    if factory is not None and not isinstance(factory, SearchStrategy) and not callable(factory):
        raise TypeError(f"{call}: registers {type(factory).__name__} {_short(factory)}; give a function returning a "
                        "hypothesis strategy (or a strategy)")
    if takes_object(factory):
        return
    name = getattr(factory, "__name__", None) or _short(factory)
    try:
        strat = factory() if factory is not None and not isinstance(factory, SearchStrategy) else factory
    except Exception:  # noqa: BLE001 - left to the checks (see the docstring)
        return
    if strat is None:
        if arg is not None:
            raise ValueError(f"{call}: {name} returned None, which excludes a whole method or op: leave arg out to "
                             "exclude it, or return a strategy of the argument's values")
        return
    if not isinstance(strat, SearchStrategy):
        raise TypeError(f"{call}: {name} returned {type(strat).__name__} {_short(strat)}, not a hypothesis "
                        f"strategy; return a strategy (from hypothesis import strategies as st) that draws "
                        f"{_ONE_VALUE if arg is not None else _ARGUMENT_LIST}")
    try:
        drawn = draw_fixed(strat, DRAWS, call)
    except Exception:  # noqa: BLE001 - left to the checks (see the docstring)
        return
    for value in drawn:
        try:
            _as_value(value) if arg is not None else _as_argument_set(value)
        except (TypeError, ValueError):
            raise TypeError(f"{call}: the strategy of {name} drew {type(value).__name__} {_short(value)}, not "
                            f"{'an argument' if arg is not None else 'an argument list'}; it must draw "
                            f"{_ONE_VALUE if arg is not None else _ARGUMENT_LIST}, so that every call can be "
                            "printed in a reproducer script") from None
