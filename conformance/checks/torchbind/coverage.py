"""Check 2: method coverage.

Every C++ method except ``__init__``, ``__obj_flatten__``, ``__getstate__`` and ``__setstate__`` must be defined
on the fake class itself (a method only inherited from ``object``, such as ``__eq__`` or ``__str__``, does not
count): ``maybe_to_fake_obj`` (``torch/_library/fake_class_registry.py``) only logs a warning for a missing
method, and tracing a call to it then fails. Public fake methods with no C++ counterpart are reported too: they
are either misspelt or dead code that will never be called through ``call_torchbind``.
"""

from __future__ import annotations

import inspect

from ...core.evidence import record
from ...torchbind.context import defined_on_fake
from ...core.results import Failure
from ...torchbind.context import ClassContext


def coverage(ctx: ClassContext, method: str) -> list[Failure]:
    """The fake class defines this C++ method."""
    fake = ctx.require_fake()
    if defined_on_fake(fake, method):
        record("method definition")
        return []
    # Inherited from object (__str__, __repr__, __eq__): a traced call reaches object's method on the fake, with
    # no error (str(obj) compiled gives the fake's default string where eager gives the C++ method's).
    if hasattr(object, method):
        missing = (f"{method} (only inherited from object); a traced program's call to it reaches object's {method} "
                   "on the fake instead of the C++ method, with no error (str(obj) compiles and gives another string "
                   "than eager)")
    else:
        missing = f"{method}; torch.compile / torch.export fail on a call to it"
    return [Failure(
        f"the fake class does not define {missing}",
        cpp=str(ctx.info.methods[method]),
        fake=f"{fake.__qualname__} has no {method}",
        rule="coverage.method-missing",
    )]


def _public_fake_methods(fake: type) -> list[str]:
    names = []
    for klass in fake.__mro__:
        if klass is object:
            break
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in names:
                continue
            if isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw):
                names.append(name)
    return names


def extra_methods(ctx: ClassContext, _target: None) -> list[Failure]:
    """The fake class has no public methods that the C++ class lacks."""
    fake = ctx.require_fake()
    known = {**ctx.info.methods, **ctx.info.static_methods}  # def_static methods are part of the class too
    public = _public_fake_methods(fake)
    extra = [m for m in public if m not in known]
    record("public fake method", len(public))  # none at all: nothing the C++ class could lack
    return [
        Failure("the fake class defines a public method the C++ class does not have", target=name,
                cpp=f"C++ methods: {', '.join([*ctx.info.user_methods, *ctx.info.static_methods])}",
                fake=f"{fake.__qualname__}.{name}", rule="extra_methods.unknown-method")
        for name in extra
    ]
