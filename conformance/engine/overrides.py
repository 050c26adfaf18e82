"""What :func:`conformance.strategy` checks of a factory when it is called, so that a mistake is one error at
registration (while ``--torchbind-load`` imports the module: a usage error naming it) instead of a failure of every
item that draws arguments (a strategy drawing tensors instead of Python source failed 57 items of one class).

:func:`check_override`: a factory that needs no object is called and a few values are drawn from its strategy;
one that returns no strategy, or draws something that is not an argument (:func:`conformance.strategy` says what
is), raises, naming the registration, the factory, what it returned and what it should return. A factory that
takes the object can only be called with one, when a check runs. (Which classes an op named alone applies to is
kind-aware: :func:`conformance.kinds.classes_taking`.)
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis.strategies import SearchStrategy

from .arguments import _as_argument_set, _as_value, draw_fixed, takes_object
from .render import render
from ..core.results import RegistrationError

__all__ = ["check_override"]

#: How many values :func:`check_override` draws (derandomized, as the deterministic checks draw).
DRAWS = 3

_ONE_VALUE = ("Python source of the value (a str such as \"torch.ones(3)\"; a string value is \"'abc'\", e.g. "
              "st.text().map(repr)), an int, float, bool or None, or a conformance.engine.values.Value")
_ARGUMENT_LIST = ("the argument list: source text (\"torch.ones(3), alpha=2.0\"), a list or tuple of values, a dict "
                  "of keyword values (each value Python source, an int, float, bool or None), or a "
                  "conformance.engine.values.ArgumentSet")


#: A value in a registration message: its ``repr`` on one line, at most 80 characters (the one renderer,
#: :func:`~conformance.engine.render.render`, in its ``line`` style).
_short = functools.partial(render, limit=80, style="line")


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
        raise RegistrationError(
            f"{call}: registers {type(factory).__name__} {_short(factory)}; give a function returning a "
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
            raise RegistrationError(
                f"{call}: {name} returned None, which excludes a whole method or op: leave arg out to "
                "exclude it, or return a strategy of the argument's values")
        return
    if not isinstance(strat, SearchStrategy):
        raise RegistrationError(
            f"{call}: {name} returned {type(strat).__name__} {_short(strat)}, not a hypothesis "
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
            raise RegistrationError(
                f"{call}: the strategy of {name} drew {type(value).__name__} {_short(value)}, not "
                f"{'an argument' if arg is not None else 'an argument list'}; it must draw "
                f"{_ONE_VALUE if arg is not None else _ARGUMENT_LIST}, so that every call can be "
                "printed in a reproducer script") from None
