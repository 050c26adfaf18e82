"""Command line: ``python -m conformance SUBCOMMAND`` (also the console script ``torchbind-conformance``).

``merge A.json B.json ... --output OUT.md|.html|.json``: one matrix across the JSON reports of several runs (torch
versions, devices, platforms) or of the shards of one run (:mod:`conformance.reports.merge`). Exit status 0 on success,
2 for bad input (a missing or foreign report, an unsupported output format, shards that disagree), with a
one-line message.

``scaffold NS::CLS --load SPEC [--output PATH] [--force] [--check]``: write a starting fake-class module for a
TorchBind class, bodies inferred by observing the C++ class (:mod:`conformance.scaffold`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["main"]


def _merge(args: argparse.Namespace) -> int:
    from .reports.merge import MergeError, load_run, merge_runs, write_merged
    from .reports import ReportFormatError, report_format

    from .plugin.baseline import BaselineError

    if args.output is None and args.baseline is None:
        print("torchbind-conformance merge: give --output OUT (a merged report), --baseline FILE (accept every "
              "run's verdicts into one baseline), or both", file=sys.stderr)
        return 2
    out = Path(args.output) if args.output is not None else None
    if out is not None:
        try:
            report_format(out, f"--output={out}")  # before reading any report
        except ReportFormatError as exc:
            print(f"torchbind-conformance merge: {exc}", file=sys.stderr)
            return 2
    try:
        merged = merge_runs(load_run(Path(p)) for p in args.reports)
        if out is not None:
            write_merged(merged, out)  # a MergeError naming OUT when it cannot be written
        changes = accept_runs(merged.runs, Path(args.baseline)) if args.baseline is not None else None
    except (MergeError, BaselineError, OSError) as exc:
        print(f"torchbind-conformance merge: {exc}", file=sys.stderr)
        return 2
    runs = ", ".join(run.title for run in merged.runs)
    if out is not None:
        print(f"merged {len(args.reports)} report(s) of {len(merged.runs)} run(s) ({runs}) into {out}")
    if changes is not None:
        print(f"accepted the verdicts of {len(merged.runs)} run(s) ({runs}) into {args.baseline}: "
              + (f"{len(changes)} change(s)" if changes else "unchanged"))
        for line in changes:
            print(f"  {line}")
    return 0


def accept_runs(runs, path: Path) -> list[str]:
    """Accept every run's verdicts (:class:`~conformance.reports.merge.RunReport`, each on its own torch) into the
    baseline at ``path`` (created when missing), as ``--torchbind-accept`` on each would, and write it; returns the
    changes (:func:`~conformance.plugin.baseline.accept_changes`). Stale entries are not judged here (a report has
    no plan). Raises :class:`~conformance.plugin.baseline.BaselineError` for a malformed file, ``OSError`` when it
    cannot be written."""
    from .plugin.baseline import accept_changes, load_baseline, merge_accepted, save_baseline
    from .core.qualname import node_id
    from .core.results import Status

    old = load_baseline(path, missing_ok=True)
    new = dict(old)
    for run in runs:
        results = {node_id(qualname, v.item): (v.status is Status.FAILED, v.summary)
                   for qualname, verdicts in run.verdicts.items() for v in verdicts
                   if v.status in (Status.PASSED, Status.FAILED)}
        new = merge_accepted(new, results, torch_version=run.labels.get("torch", "0"))
    save_baseline(path, new)
    return accept_changes(old, new)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="torchbind-conformance",
                                     description="torchbind-conformance tools (the checks themselves run as a "
                                                 "pytest plugin: pytest --torchbind-class=NS::CLS)")
    sub = parser.add_subparsers(dest="command", required=True)
    merge = sub.add_parser("merge", help="combine the JSON matrix reports of several runs (or of the shards of "
                                         "one run) into one report")
    merge.add_argument("reports", nargs="+", metavar="REPORT.json", help="reports written with "
                                                                          "--torchbind-report=PATH.json")
    merge.add_argument("--output", "-o", metavar="OUT", help="OUT.md, OUT.html or OUT.json")
    merge.add_argument("--baseline", metavar="FILE", help="accept every run's verdicts into this baseline file, each "
                                                          "on its own torch (as --torchbind-accept on each would)")
    from .scaffold import add_parser as add_scaffold_parser
    from .scaffold import run as run_scaffold

    add_scaffold_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "scaffold":
        return run_scaffold(args)
    return _merge(args)


if __name__ == "__main__":
    sys.exit(main())
