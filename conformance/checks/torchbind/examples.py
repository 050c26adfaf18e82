"""Check: example objects of the class can be built (from generated constructor arguments or user factories),
and rebuilding an example gives the same state (every other check relies on fresh, identical objects).

A class with no constructor bound (``torch::init``) and no factory registered cannot be judged: a skip naming
what to give. Where ``__obj_flatten__`` raises, the objects are still built and compared by ``__getstate__``
(:func:`conformance.torchbind.examples.comparable_state`); the note says what ``__obj_flatten__`` raised, and the
``flatten`` item fails on it."""

from __future__ import annotations

from ...engine.compare import flat_state_differences
from ...torchbind.examples import comparable_state
from ...core.results import Failure, Note, NotApplicable
from ...torchbind.context import ClassContext


def examples(ctx: ClassContext, _target: None) -> list[Failure | Note]:
    """At least one example object can be built, and rebuilding gives the same state."""
    info = ctx.info
    exset = ctx.example_set
    lost = [Failure(f"building an example object {cause}",
                    example=code, details=("this state is left out of every other check of the class; the check "
                                           "of the method involved shows the crash or hang itself",),
                    rule="examples.build-lost")
            for code, cause in exset.lost]
    give = (f"give example objects with @conformance.examples({info.qualname!r}) in a module passed to "
            "--torchbind-load")
    if exset.problem and exset.no_constructor and not lost:
        raise NotApplicable(f"{exset.problem}; {give}")
    if exset.problem:
        details = tuple(f"{code.splitlines()[-1]}  ->  {err}" for code, err in exset.rejected[:6])
        return lost + [Failure(exset.problem,
                        details=details + ("supply objects with @conformance.examples(" + repr(info.qualname) +
                                           ") in a module passed to --torchbind-load",),
                        rule="examples.unbuildable")]
    failures: list[Failure | Note] = list(lost)
    if exset.flatten_error:
        how = ("their rebuilds were compared by __getstate__() instead" if info.pickles else
               "their rebuilds could not be compared (the class has no __getstate__ either)")
        failures.append(Note(f"the example objects were built, but {info.qualname}.__obj_flatten__() raised "
                             f"{exset.flatten_error}; {how} (see {info.test_name}::flatten)"))
        if not info.pickles:
            return failures
    for ex in exset.examples:
        try:
            # Both objects stay alive while their states are compared: a state may hold memory its object owns
            # (torch's EmbeddingPackedParamsBase.__getstate__ does: docs/explanation/findings.md).
            one, two = ex.build(), ex.build()
            first, second = comparable_state(one, ctx.tracer)[0], comparable_state(two, ctx.tracer)[0]
        except Exception as exc:  # noqa: BLE001
            failures.append(Failure("building an example object a second time "
                                    f"raised {type(exc).__name__}: {exc}", example="\n".join(ex.code()),
                                    rule="examples.rebuild-raises"))
            continue
        diffs = flat_state_differences(first, second, "state", ("first build", "second build"))
        del one, two
        if diffs:
            failures.append(Failure("building the same example twice gave different states",
                                    example="\n".join(ex.code()), details=tuple(diffs),
                                    rule="examples.rebuild-differs"))
    return failures
