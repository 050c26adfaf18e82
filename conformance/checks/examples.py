"""Check: example objects of the class can be built (from generated constructor arguments or user factories),
and rebuilding an example gives the same state (every other check relies on fresh, identical objects)."""

from __future__ import annotations

from ..compare import flat_state_differences
from ..example_objects import read_state
from ..results import Failure
from . import check


@check("examples")
def examples(ctx, _target) -> list[Failure]:
    """At least one example object can be built, and rebuilding gives the same state."""
    info = ctx.info
    exset = ctx.example_set
    lost = [Failure(f"building an example object {cause}",
                    example=code, details=("this state is left out of every other check of the class; the check "
                                           "of the method involved shows the crash or hang itself",))
            for code, cause in exset.lost]
    if exset.problem:
        details = tuple(f"{code.splitlines()[-1]}  ->  {err}" for code, err in exset.rejected[:6])
        return lost + [Failure(exset.problem,
                        details=details + ("supply objects with @conformance.examples(" + repr(info.qualname) +
                                           ") in a module passed to --torchbind-load",))]
    failures = lost
    for ex in exset.examples:
        try:
            first, second = read_state(ex.build(), ctx.tracer), read_state(ex.build(), ctx.tracer)
        except Exception as exc:  # noqa: BLE001
            failures.append(Failure("building an example object a second time "
                                    f"raised {type(exc).__name__}: {exc}", example="\n".join(ex.code())))
            continue
        diffs = flat_state_differences(first, second, "state", ("first build", "second build"))
        if diffs:
            failures.append(Failure("building the same example twice gave different states",
                                    example="\n".join(ex.code()), details=tuple(diffs)))
    return failures
