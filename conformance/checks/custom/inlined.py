"""Check C5: each ``INLINED`` member of a Python custom class can be traced, and a compiled program using it does
what eager does, to its result and to the object.

Rule source: ``MemberType.INLINED`` (``torch/_library/opaque_object.py``): dynamo traces the member's Python body
instead of calling it. It can read only registered members of the object (dynamo raises
``UnsafeScriptObjectError: Attempted to access unregistered member`` otherwise, and the program cannot be
compiled), and tracing must not change the real object: after one call, a compiled program's result and the
object's state (``__dict__``) must equal eager's on a twin object. A program (dynamo, backend ``eager``) calls the
member with arguments drawn from its annotations, on a few objects (the same on every run).
"""

from __future__ import annotations

import re

import torch

from ...engine.arguments import draw_fixed
from ...engine.compare import value_differences
from ...custom.context import same_value, show, state_of
from ...custom.state import twin_differences
from ...engine.dynamo_state import require_dynamo
from ...engine.reproducers import message_lines
from ...core.results import Failure, NotApplicable
from ...custom.context import CustomClassContext
from .. import with_targets
from ...engine import torch_api

_UNREGISTERED = re.compile(r"Member '([^']+)' is not registered")


def _targets(ctx):
    return [m for m, how in ctx.info.members.items() if how == "inlined"
            and not (m.startswith("__") and m.endswith("__"))]


def _calls(ctx, member: str) -> list[str]:
    """Source of the member's use: ``o.m(<args>)`` for a method (a few argument lists), ``o.m`` otherwise."""
    if not callable(getattr(ctx.info.cls, member, None)):
        return [f"o.{member}"]
    strat = ctx.arguments_of(member)
    if strat is None:
        raise ctx.arguments.exclusion(member)
    return [f"o.{member}({args})" for args in draw_fixed(strat, 3, f"{ctx.info.name}:inlined:{member}")]


@with_targets(_targets)
def inlined(ctx: CustomClassContext, member: str) -> list[Failure]:
    """An INLINED member of a custom class traces, and a compiled program using it matches eager (result, object)."""
    require_dynamo(f"inlined[{member}]")
    compared, untwinned = 0, []
    for recipe in ctx.drawn(3, f"{ctx.info.name}:inlined"):  # none built: the constructor's skip
        for use in _calls(ctx, member):
            code = f"lambda o: {use}"
            eager_fn = eval(code, {})  # noqa: S307 - our source; dynamo traces it
            reference, obj = recipe.build(), recipe.build()
            differ = twin_differences(reference, obj)
            if differ:  # eager on one cannot stand for the compiled program on the other
                untwinned.append(f"{recipe.code} (built twice, they differ in {', '.join(map(repr, differ))})")
                continue
            try:
                with ctx.calling(lambda: f"{use} in eager, obj = {recipe.code}"):
                    expected = eager_fn(reference)
            except Exception:  # noqa: BLE001 - arguments the member rejects: nothing to compare
                continue
            torch_api.dynamo_reset()
            program = torch.compile(eager_fn, backend="eager", fullgraph=True)
            repro = ctx.repro([f"obj, twin = {recipe.code}, {recipe.code}",
                               f"program = torch.compile({code}, backend='eager', fullgraph=True)",
                               f"print('eager:   ', ({code})(twin), vars(twin))",
                               "print('compiled:', program(obj), vars(obj))"])
            try:
                with ctx.calling(lambda: f"torch.compile of {use}, obj = {recipe.code}"):
                    got = program(obj)
            except Exception as exc:  # noqa: BLE001 - the rule's failure
                unregistered = _UNREGISTERED.search(str(exc))
                why = (f"its body reads {unregistered.group(1)!r}, which is not a registered member (register it, "
                       "e.g. as USE_REAL, or read it through one)" if unregistered
                       else f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
                return [Failure(f"the INLINED member {member} cannot be traced by torch.compile: {why}",
                                example=f"obj = {recipe.code}", call=use.replace("o.", "obj.", 1),
                                details=(f"eager: {show(expected)}", *_raised(exc)), repro=repro,
                                rule="inlined.untraceable")]
            finally:
                torch_api.dynamo_reset()
            compared += 1
            diffs = value_differences(expected, got, "result")
            after_eager, after_compiled = state_of(reference), state_of(obj)
            diffs += [f"object state {k}: eager {after_eager.get(k)!r}, compiled {after_compiled.get(k)!r}"
                      for k in sorted(set(after_eager) | set(after_compiled), key=str)
                      if not same_value(after_eager.get(k), after_compiled.get(k))]
            if diffs:
                return [Failure(f"a compiled program calling the INLINED member {member} does something else than "
                                "eager (to its result or to the object)", example=f"obj = {recipe.code}",
                                call=use.replace("o.", "obj.", 1), details=(f"eager:    {show(expected)}",
                                                                             f"compiled: {show(got)}", *diffs),
                                repro=repro, rule="inlined.differs")]
    if not compared and untwinned:
        raise NotApplicable(f"two objects built the same way are not equal: {untwinned[0]}; eager on one cannot "
                            "stand for a compiled program on the other, so nothing was compared; give objects that "
                            f"can be built equal with @conformance.examples({ctx.info.name!r})")
    if not compared:
        raise NotApplicable(f"no call of {member} ran in eager, so nothing was compared; "
                            + ctx.arguments.hint(member))
    return []


def _raised(exc: BaseException) -> list[str]:
    """What the compile raised, whole (a dynamo error's explanation, hint and the user's line), as detail lines."""
    first, *rest = str(exc).splitlines() or [""]
    return message_lines(f"compiled: raised {type(exc).__name__}: {first}", rest)
