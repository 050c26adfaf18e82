"""``python -m conformance scaffold NS::CLS --load SPEC ...``: write a starting fake-class module for a TorchBind
class, with bodies inferred by observing the C++ class (issue 12).

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

__all__ = ["ScaffoldError", "generate", "add_parser", "run"]

PROG = "torchbind-conformance scaffold"


class ScaffoldError(Exception):
    """Bad input for the scaffold; the message is one line, printed on stderr with exit status 2."""


def generate(qualname: str, load_specs: list[str], output: str) -> str:
    """The source of the fake-class module for ``qualname`` (its library already loaded in this process).
    ``load_specs`` and ``output`` only go into the header's check command. Raises :class:`ScaffoldError` for an
    unknown class, a class without ``__obj_flatten__`` or without example objects."""
    from ..discovery import SelectorError
    from ..session import Session, current
    from .observe import attribute_names, choose_method, choose_op, choose_static, flat_state
    from .render import check_command, render_module

    session = Session(registry=current().registry)
    try:
        ctx = session.context(qualname)
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
    examples = ctx.example_set.examples
    if not examples:
        raise ScaffoldError(f"cannot build any {qualname} object to observe: {ctx.example_set.problem}")
    values: dict[str, list] = {}
    for example in examples:
        try:
            state = flat_state(example.build())
        except Exception as exc:  # noqa: BLE001
            raise ScaffoldError(f"{qualname}.__obj_flatten__() failed: {exc}".splitlines()[0]) from exc
        for k, v in state.items():
            values.setdefault(k, []).append(v)
    taken = set(info.methods) | set(info.static_methods)
    names = attribute_names(list(values), taken)
    attrs = {names[k]: next((v for v in vs if not (isinstance(v, list) and not v)), vs[0])
             for k, vs in values.items()}
    methods, chosen = {}, {}
    for m in info.user_methods:
        methods[m] = choose_method(ctx, m, names, attrs, chosen)
        if methods[m].fn is not None:
            chosen[m] = methods[m].fn
    statics = {m: choose_static(ctx, m) for m in info.static_methods if m not in info.methods}
    ops = {op.qualname: choose_op(ctx, op) for op in info.ops}
    return render_module(info, names=names, values=values, methods=methods, statics=statics, ops=ops,
                         command=check_command(qualname, load_specs, output), load_specs=load_specs)


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


def run(args: argparse.Namespace) -> int:
    """Run the ``scaffold`` subcommand; returns the exit status."""
    try:
        return _run(args)
    except ScaffoldError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from ..files import write_text_atomically
    from ..loading import LoadError, apply_load_spec

    qualname = args.qualname
    if qualname.count("::") != 1 or not all(qualname.split("::")):
        raise ScaffoldError(f"{qualname!r}: expected NAMESPACE::CLASS")
    ns, cls = qualname.split("::")
    out = Path(args.output or f"fake_{ns}_{cls}.py".lower())
    if out.exists() and not args.force:
        raise ScaffoldError(f"{out} exists; pass --force to overwrite it")
    for spec in args.load:
        try:
            apply_load_spec(spec, Path.cwd())
        except LoadError as exc:
            raise ScaffoldError(" ".join(str(exc).replace("--torchbind-load=", "--load ").split())) from exc
    from torch._library.fake_class_registry import find_fake_class

    from ..discovery import CLASS_PREFIX

    if find_fake_class(f"{CLASS_PREFIX}{ns}.{cls}") is not None:
        if not args.check:
            print(f"{PROG}: note: {qualname} already has a fake class registered by the --load specs; import "
                  "the generated module where that one is not loaded", file=sys.stderr)
        else:
            raise ScaffoldError(f"{qualname} already has a fake class registered by the --load specs; --check "
                                "needs specs that load only the library (the generated module registers the fake)")
    text = generate(qualname, list(args.load), str(out))
    write_text_atomically(out, text)
    stubbed = text.count("raise NotImplementedError(")
    print(f"wrote {out}: fake class for {qualname}" + (f" ({stubbed} bodies not inferred: they raise "
                                                      "NotImplementedError)" if stubbed else ""))
    if not args.check:
        return 0
    from .check import check_module, format_table

    verdicts = check_module(qualname, list(args.load), out)
    print(format_table(verdicts))
    return 0 if verdicts and all(v.passed for v in verdicts if v.structural) else 1
