"""Scaffold many classes in one process: ``python -m conformance.scaffold.batch --load SPEC --class SELECTOR ...
--out DIR``.

Loads the specs once, expands each selector (``ns::Cls``, ``ns::*``, as ``--torchbind-class``), writes one module
per class into ``DIR`` (``fake_<ns>_<cls>.py``) and prints, as JSON on stdout, one entry per class:
``{"module": path, "seconds": s, "bodies": n, "inferred": k, "differential": "passed"}`` (methods and op
fakes written, bodies inferred and kept by the plugin's checks, the differential over them; see
:func:`conformance.scaffold.generate_verified`) or, for a class the scaffold refuses (no
``__obj_flatten__``, no example object), ``{"error": one line, "seconds": s}``. ``seconds`` is wall time.
The project's tests and ``benchmarks/scaffold.py`` use it to scaffold every sample and torch test class without
paying for a Python start and a library load per class.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["scaffold_all", "main"]


def scaffold_all(qualnames: list[str], load_specs: list[str], out_dir: Path, *, timeout: float | None = None,
                 examples: int | None = None) -> dict[str, dict[str, Any]]:
    """Scaffold each class of ``qualnames`` (libraries already loaded) into ``out_dir``; see the module
    docstring for the entries returned."""
    from . import ScaffoldError, generate_verified

    out: dict[str, dict[str, Any]] = {}
    for qualname in qualnames:
        start = time.perf_counter()
        path = out_dir / f"fake_{qualname.replace('::', '_').lower()}.py"
        try:
            text, summary = generate_verified(qualname, load_specs, str(path), timeout=timeout, examples=examples)
        except ScaffoldError as exc:
            out[qualname] = {"error": str(exc), "seconds": round(time.perf_counter() - start, 2)}
            continue
        path.write_text(text)
        out[qualname] = {"module": str(path), "seconds": round(time.perf_counter() - start, 2), **summary}
    return out


def main(argv: list[str] | None = None) -> int:
    from ..core.results import SelectorError
    from ..kinds import expand_selector
    from ..process.loading import LoadError, apply_load_spec

    p = argparse.ArgumentParser(prog="python -m conformance.scaffold.batch", description=__doc__.splitlines()[0])
    p.add_argument("--load", action="append", default=[], metavar="SPEC")
    p.add_argument("--class", dest="classes", action="append", required=True, metavar="SELECTOR")
    p.add_argument("--out", required=True, type=Path, metavar="DIR")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS")
    p.add_argument("--examples", type=int, default=None, metavar="N")
    args = p.parse_args(argv)
    try:
        for spec in args.load:
            apply_load_spec(spec, Path.cwd())
        qualnames = [q for s in args.classes for q in expand_selector(s)]
    except (LoadError, SelectorError) as exc:
        print(f"{p.prog}: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    result = scaffold_all(qualnames, args.load, args.out, timeout=args.timeout, examples=args.examples)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
