"""Check 3: each fake method accepts exactly what the C++ schema accepts.

Rules, from the fake-class protocol ("fake methods ... should have the same schema as the C++ implementation",
PyTorch tutorial *Supporting Custom C++ Classes in torch.compile/torch.export*) and from how ``call_torchbind``
forwards the traced call's ``*args, **kwargs`` unchanged to the fake method:

* the same number of positional parameters (``self`` excluded), no ``*args`` / ``**kwargs`` catch-alls;
* a default exactly where the schema has one, with an equal value;
* the schema's argument names where the binding names them (``torch::arg("x")``; unnamed C++ arguments are
  ``_0``, ``_1``, … and are not compared);
* Python annotations, where present, equal to the schema's types (compared as TorchScript types via
  ``torch.jit.annotations.ann_to_type``), the return annotation included. ``Any`` anywhere in the fake's
  annotation (``-> Any``, ``List[Any]``) accepts what the schema has there: torch never reads a fake's
  annotations (:func:`conformance.engine.jit_types.annotation_accepts`). A schema type ``Any`` (a C++ ``c10::IValue``)
  accepts any annotation, a ``Union`` included: ``return_type`` compares what the fake returns with what C++
  returned;
* methods bound with ``def_static`` have no ``self``: a fake need not define them (``coverage`` does not ask for
  them), but one that does defines them as a ``staticmethod`` or ``classmethod`` with the schema's parameters.
"""

from __future__ import annotations

import inspect
import re
import typing

from ...core.evidence import record
from ...torchbind.context import defined_on_fake
from ...engine.jit_types import annotation_accepts, annotation_type, return_type
from ...core.results import Failure
from ...torchbind.context import ClassContext
from .. import with_targets

_UNNAMED = re.compile(r"_\d+$")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _fake_signature(fake: type, method: str) -> tuple[inspect.Signature, list[inspect.Parameter], dict]:
    raw = inspect.getattr_static(fake, method)
    func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    if not isinstance(raw, staticmethod) and params and params[0].kind in _POSITIONAL:
        params = params[1:]  # self (or cls)
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # noqa: BLE001 - unresolvable string annotations are not compared
        hints = {}
    return sig, params, hints


def _targets(ctx) -> list[str]:
    """Every C++ method, and the ``def_static`` methods the fake class defines."""
    fake = ctx.info.fake_class
    static = [m for m in ctx.info.static_methods if fake is not None and defined_on_fake(fake, m)]
    return [*ctx.info.user_methods, *static]


def _any(t) -> bool:
    return t.kind() == "AnyType"


@with_targets(_targets)
def signature(ctx: ClassContext, method: str) -> list[Failure]:
    """The fake method's parameters match the C++ schema: arity, defaults, keyword names, annotations."""
    fake = ctx.require_fake()
    ctx.require_fake_method(method)
    static = method in ctx.info.static_methods and method not in ctx.info.methods
    schema = ctx.info.static_methods[method] if static else ctx.info.methods[method]
    try:
        sig, params, hints = _fake_signature(fake, method)
    except (TypeError, ValueError) as exc:
        return [Failure(f"cannot read the fake method's signature: {exc}", rule="signature.unreadable")]
    cpp_args = list(schema.arguments) if static else list(schema.arguments)[1:]
    problems: list[tuple[str, str]] = []  # (rule, what is wrong)
    if static and not isinstance(inspect.getattr_static(fake, method), (staticmethod, classmethod)):
        problems.append(("signature.static-method", f"C++ binds {method} with def_static (no self): define it as "
                         "a @staticmethod or @classmethod"))

    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        problems.append(("signature.var-positional", "the fake takes *args: it accepts any number of positional "
                         f"arguments, C++ takes exactly {len([a for a in cpp_args if not a.kwarg_only])}"))
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        problems.append(("signature.var-keyword",
                         "the fake takes **kwargs: it accepts keyword arguments the C++ method rejects"))
    positional = [p for p in params if p.kind in _POSITIONAL]
    cpp_positional = [a for a in cpp_args if not a.kwarg_only]
    if len(positional) != len(cpp_positional) and not problems:
        problems.append(("signature.arity", f"the fake takes {len(positional)} positional argument(s) after self, "
                         f"C++ takes {len(cpp_positional)}"))
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    cpp_required = [a for a in cpp_positional if not a.has_default_value()]
    if len(required) != len(cpp_required) and len(positional) == len(cpp_positional):
        problems.append(("signature.required-count",
                         f"the fake requires {len(required)} argument(s), C++ requires {len(cpp_required)}"))

    by_name = {p.name: p for p in params}
    pairs = list(zip(cpp_positional, positional))
    pairs += [(a, by_name.get(a.name)) for a in cpp_args if a.kwarg_only]
    for i, (arg, param) in enumerate(pairs):
        label = arg.name if not _UNNAMED.match(arg.name) else f"argument {i + 1}"
        if param is None:
            problems.append(("signature.kwarg-missing",
                             f"C++ has keyword-only argument {arg.name!r}; the fake has no such parameter"))
            continue
        if not _UNNAMED.match(arg.name) and param.name != arg.name:
            problems.append(("signature.arg-name", f"{label}: C++ names it {arg.name!r}, the fake names it "
                             f"{param.name!r} (a call {method}({arg.name}=...) fails on the fake)"))
        has_default = param.default is not inspect.Parameter.empty
        if arg.has_default_value() and not has_default:
            problems.append(("signature.default-missing",
                             f"{label}: C++ default {repr(arg.default_value)}, the fake has no default"))
        elif has_default and not arg.has_default_value():
            problems.append(("signature.default-extra", f"{label}: the fake has default {repr(param.default)}, "
                             "C++ has none (the argument is required)"))
        elif has_default and not _same_default(param.default, arg.default_value):
            problems.append(("signature.default-value", f"{label}: C++ default {repr(arg.default_value)}, fake "
                             f"default {repr(param.default)}"))
        if param.name in hints and not _any(arg.type):
            ann = annotation_type(hints[param.name])
            if ann is not None and not annotation_accepts(ann, arg.type):
                problems.append(("signature.arg-type", f"{label}: annotated {ann}, C++ type is {arg.type}"))
    expected = return_type(schema)
    if "return" in hints and not _any(expected):
        ann = annotation_type(hints["return"])
        if ann is not None and not annotation_accepts(ann, expected):
            problems.append(("signature.return-type", f"return: annotated {ann}, C++ returns {expected}"))
    record("signature")  # the fake's parameters, defaults and annotations against the C++ schema
    if not problems:
        return []
    # One failure lists every problem; its rule is the first one's.
    return [Failure("the fake method's signature does not match the C++ schema",
                    cpp=str(schema), fake=f"def {method}{sig}", details=tuple(text for _rule, text in problems),
                    rule=problems[0][0])]


def _same_default(a, b) -> bool:
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return False
