"""``python -m conformance scaffold NS::CLS --load SPEC ...``: write a starting fake-class module for a TorchBind
class, with bodies inferred by observing the C++ class.

The generated module registers a fake class (``__init__`` taking each ``__obj_flatten__`` key, kept as an
attribute of the same name; ``__obj_unflatten__``; one method per C++ method with the schema's parameters,
defaults and annotations, static methods as ``@staticmethod``) and a ``torch.library.register_fake`` function per
custom op that takes the class. Bodies come from :mod:`conformance.scaffold.observe`; where no template agrees with
the C++ class, the body raises ``NotImplementedError`` saying what was observed. ``--check`` runs the plugin on the
result (:mod:`conformance.scaffold.check`).

Exit status: 0 on success (with ``--check``: when the structural checks pass), 1 when ``--check`` found a
structural failure, 2 for bad input (unknown class, no ``__obj_flatten__``, a library that does not load, an
existing output without ``--force``, a class that already has a fake with ``--check``), with a one-line message.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.results import ConformanceError

__all__ = ["ScaffoldError", "generate", "generate_verified", "add_parser", "run"]

PROG = "torchbind-conformance scaffold"


class ScaffoldError(ConformanceError):
    """Bad input for the scaffold; the message is one line, printed on stderr with exit status 2."""


def generate(qualname: str, load_specs: list[str], output: str, *, timeout: float | None = None,
             examples: int | None = None, isolate: bool = True) -> str:
    """The source of the fake-class module for ``qualname``; see :func:`generate_verified`."""
    return generate_verified(qualname, load_specs, output, timeout=timeout, examples=examples, isolate=isolate)[0]


def generate_verified(qualname: str, load_specs: list[str], output: str, *, timeout: float | None = None,
                      examples: int | None = None, isolate: bool = True) -> tuple[str, dict[str, int | str]]:
    """The source of the fake-class module for ``qualname`` (its library already loaded in this process).
    ``load_specs`` and ``output`` only go into the header's check command. The C++ class is observed in supervised
    worker processes (see :mod:`conformance.scaffold.worker`; ``isolate=False`` observes in this process);
    ``timeout``: seconds one call into the class may take while observed (default
    :data:`~conformance.scaffold.worker.DEFAULT_TIMEOUT`; ``0``: no limit); ``examples``: hypothesis examples of
    the ``differential`` check that verifies the inferred bodies (default: the plugin's). Raises
    :class:`ScaffoldError` for an unknown class, a class without ``__obj_flatten__`` or without example
    objects, or an ``__obj_flatten__`` that fails.

    Returns the source and what the plugin's checks said about it: ``{"bodies": methods and op fakes written,
    "inferred": bodies kept (each passed agreement, or custom_op for an op fake), "differential": "passed" (the
    kept bodies together), or "nothing to verify"}``."""
    from ..core.results import SelectorError
    from ..process import WorkerLost
    from ..runner import Engine
    from ..core.settings import DEFAULT_EXAMPLES
    from .observe import Choice, ObservedState
    from .render import check_command, decomposes, render_module
    from .worker import DEFAULT_TIMEOUT, Observer, lost_text

    engine = Engine()
    try:
        ctx = engine.context(qualname)
    except (SelectorError, KeyError) as exc:
        raise ScaffoldError(str(exc).replace("--torchbind-class=", "").replace("--torchbind-load=", "--load ")) \
            from exc
    info = ctx.info
    if not info.has_flatten:
        raise ScaffoldError(
            f"{qualname} has no __obj_flatten__ method, so a fake class cannot be made from its objects: add one "
            f"to the C++ class that returns a tuple of (name, value) tuples of its state, e.g. "
            f'.def("__obj_flatten__", [](const c10::intrusive_ptr<{info.name}>& self) {{ return '
            f'std::make_tuple(std::make_tuple("count", self->count_)); }}) '
            f"(see torch's custom-class tutorial, 'Support for torch.export')")
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    with Observer(engine, qualname, timeout=timeout, isolate=isolate) as observer:
        state = observer.run("state")
        if isinstance(state, WorkerLost):
            raise ScaffoldError(f"cannot observe {qualname}: {lost_text(state)}")
        if not isinstance(state, ObservedState):
            raise ScaffoldError(state)

        def observed(task: str, **fields) -> Choice:
            found = observer.run(task, **fields)
            return Choice(None, lost_text(found)) if isinstance(found, WorkerLost) else found

        methods: dict[str, Choice] = {}
        for m in info.user_methods:
            chosen = {k: list(c.template.lines) for k, c in methods.items() if c.template is not None}
            methods[m] = observed("method", name=m, chosen=chosen)
        statics = {m: observed("static", name=m) for m in info.static_methods if m not in info.methods}
        inferred = sorted(m for m, c in methods.items() if c.template is not None)
        ops = {op.qualname: observed("op", name=op.qualname, inferred=inferred) for op in info.ops
               if not decomposes(op)}  # a CompositeImplicitAutograd op gets no fake (torch refuses one)

        def render(only_inferred: bool = False) -> str:
            return render_module(info, names=state.names, values=state.values, methods=methods, statics=statics,
                                 ops=ops, command=check_command(qualname, load_specs, output),
                                 load_specs=load_specs, only_inferred=only_inferred)

        # The plugin's own checks have the last word: each inferred body must pass agreement (custom_op for an
        # op fake), then all of them together the differential; a body that fails is replaced by
        # NotImplementedError saying so. The checks run in workers without abandoning calls, as the plugin's do.
        budget = examples or DEFAULT_EXAMPLES

        def demote(name: str, why: str) -> None:
            table = methods if name in methods else ops
            old = table[name]
            table[name] = Choice(None, f"the body inferred from observation ({old.template.description}) failed "
                                       f"the plugin's {why}", left_out=old.left_out)

        def verify(check: str, targets: list[str] | None = None
                   ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
            found = observer.run("verify", abandon=False, module=render(only_inferred=True), check=check,
                                 examples=budget, targets=targets)
            if not isinstance(found, WorkerLost):
                return found
            if targets and len(targets) > 1:  # which one crashed or hung: each in a worker of its own
                parts = [verify(check, [t]) for t in targets]
                return [f for p in parts for f in p[0]], [u for p in parts for u in p[1]]
            return [((targets or [""])[0], f"{check} check: " + lost_text(found).replace("observing it ", "it "))], []

        inferred = [n for n, c in [*methods.items(), *ops.items()] if c.template is not None]
        failed, unverified = verify("agreement", inferred) if inferred else ([], [])
        for name, why in failed:
            demote(name, why)
        differential = "not run (no inferred body)"
        while any(c.template is not None for c in [*methods.values(), *ops.values()]):
            failed, skipped = verify("differential")  # each round demotes one more body, or ends
            differential = skipped[0][1] if skipped else f"passed ({budget} examples)"
            if not failed:
                break
            differential = "failed"
            name, why = failed[0]
            if not (name in methods or name in ops) or (methods.get(name) or ops[name]).template is None:
                for other in [n for n, c in [*methods.items(), *ops.items()] if c.template is not None]:
                    demote(other, why)  # no inferred body to blame: none can be vouched for
                break
            demote(name, why)
        kept = [n for n, c in [*methods.items(), *ops.items()] if c.template is not None]
        vouched = [n for n in kept if n not in dict(unverified)]
        summary: dict[str, int | str] = {"bodies": len(methods) + len(ops), "inferred": len(kept),
                                         "differential": ("passed" if differential.startswith("passed") else
                                                          differential) if kept else "nothing to verify"}
        verified = _verified_header(vouched, [(n, why) for n, why in unverified if n in kept], differential,
                                    bool(kept))
    return render().replace("\n# (import it after", f"\n{verified}\n# (import it after", 1), summary


def _verified_header(vouched: list[str], unverified: list[tuple[str, str]], differential: str, kept: bool) -> str:
    """The module header's lines on what the plugin's checks verified: exactly which checks ran on which bodies
    and passed, which bodies a check skipped (nothing compared: not vouched for), and the differential's
    outcome."""
    if not kept:
        return "# No method or op body could be inferred and verified."
    lines = [f"# Verified: agreement (custom_op for an op fake) passed for {len(vouched)} inferred bod"
             f"{'y' if len(vouched) == 1 else 'ies'}" + (f" ({', '.join(vouched)})" if vouched else "")
             + f"; differential: {differential}."]
    lines += [f"# Not verified: {name}: {why}" for name, why in unverified]
    return "\n".join(lines)


def add_parser(sub) -> None:
    """Add the ``scaffold`` subcommand to the ``argparse`` subparsers ``sub``."""
    p = sub.add_parser("scaffold", help="write a starting fake-class module for a TorchBind class, with bodies "
                                        "inferred from the C++ class")
    p.add_argument("qualname", metavar="NS::CLS")
    p.add_argument("--load", action="append", default=[], metavar="SPEC",
                   help="what loads the class (as --torchbind-load: lib.so, file.py[:func], module[:func]); "
                        "repeatable")
    p.add_argument("--output", "-o", metavar="PATH", help="where to write (default: fake_<ns>_<cls>.py)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    p.add_argument("--check", action="store_true", help="run the plugin on the generated module and print "
                                                        "the verdicts")
    from .worker import DEFAULT_TIMEOUT

    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"seconds one call into the class may take while it is observed (default "
                        f"{DEFAULT_TIMEOUT:g}; 0: no limit); a call that takes longer is not observed again")
    p.add_argument("--examples", type=int, default=None, metavar="N",
                   help="hypothesis examples of the differential check that verifies the inferred bodies "
                        "(default: the plugin's --torchbind-examples default)")


def run(args: argparse.Namespace) -> int:
    """Run the ``scaffold`` subcommand; returns the exit status."""
    try:
        return _run(args)
    except ScaffoldError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from ..core.files import write_text_atomically
    from ..process.loading import LoadError, apply_load_spec

    from ..core.qualname import split_qualname

    qualname = args.qualname
    parsed = split_qualname(qualname)
    if parsed is None:
        raise ScaffoldError(f"{qualname!r}: expected NAMESPACE::CLASS")
    ns, cls = parsed
    out = Path(args.output or f"fake_{ns}_{cls}.py".lower())
    if out.exists() and not args.force:
        raise ScaffoldError(f"{out} exists; pass --force to overwrite it")
    for spec in args.load:
        try:
            apply_load_spec(spec, Path.cwd())
        except LoadError as exc:
            raise ScaffoldError(" ".join(str(exc).replace("--torchbind-load=", "--load ").split())) from exc
    from ..engine.torch_api import find_fake_class

    from ..torchbind.discovery import CLASS_PREFIX

    if find_fake_class(f"{CLASS_PREFIX}{ns}.{cls}") is not None:
        if not args.check:
            print(f"{PROG}: note: {qualname} already has a fake class registered by the --load specs; import "
                  "the generated module where that one is not loaded", file=sys.stderr)
        else:
            raise ScaffoldError(f"{qualname} already has a fake class registered by the --load specs; --check "
                                "needs specs that load only the library (the generated module registers the fake)")
    if args.timeout < 0 or (args.examples is not None and args.examples < 1):
        raise ScaffoldError("--timeout must be 0 or positive and --examples at least 1")
    text = generate(qualname, list(args.load), str(out), timeout=args.timeout, examples=args.examples)
    write_text_atomically(out, text)
    stubbed = text.count("raise NotImplementedError(")
    print(f"wrote {out}: fake class for {qualname}" + (f" ({stubbed} bodies not inferred: they raise "
                                                      "NotImplementedError)" if stubbed else ""))
    if not args.check:
        return 0
    from .check import check_module, format_table, passed

    verdicts, status = check_module(qualname, list(args.load), out, examples=args.examples)
    print(format_table(verdicts))
    # The check run's own exit status: a failed item, a crash that left no report, anything but a clean run is 1.
    return 0 if status == 0 and verdicts and all(passed(v) for v in verdicts) else 1
