"""Build (once, cached) and load the ``torchbind_samples`` C++ extension.

All sources in ``sample_classes/csrc`` go into ONE extension so there is a
single cold build (30-50 s on 2 cores), cached afterwards in
``~/.cache/torch_extensions`` (or ``$TORCH_EXTENSIONS_DIR``), in a directory of
its own for each copy of the sources.  Concurrent
builds from several pytest-xdist workers are serialised by the file lock that
``torch.utils.cpp_extension`` takes in the build directory.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

CSRC_DIR = Path(__file__).resolve().parent / "csrc"
# One build directory per copy of the sources: torch's build (ninja) names the sources by path, so two copies
# (a checkout and a benchmark's scratch copy) sharing one directory would rebuild it for each other in turn.
EXTENSION_NAME = "torchbind_samples_" + hashlib.sha256(str(CSRC_DIR).encode()).hexdigest()[:8]

_lock = threading.Lock()
_library_path: str | None = None


def sources() -> list[str]:
    """The C++ sources of the extension, as absolute paths (sorted)."""
    found = sorted(str(p) for p in CSRC_DIR.glob("*.cpp"))
    if not found:
        raise FileNotFoundError(f"no C++ sources found in {CSRC_DIR}")
    return found


def load_library() -> str:
    """Build (if needed) and load the extension; return the path of the .so.

    Idempotent: the first call builds/loads, later calls return the cached
    path without touching the compiler or the dispatcher again.
    """
    global _library_path
    if _library_path is not None:
        return _library_path
    with _lock:
        if _library_path is not None:
            return _library_path
        from torch.utils import cpp_extension

        path = cpp_extension.load(
            name=EXTENSION_NAME,
            sources=sources(),
            extra_cflags=["-O1"],
            is_python_module=False,  # -> torch.ops.load_library(<so>)
            verbose=bool(os.environ.get("TORCHBIND_SAMPLES_VERBOSE")),
        )
        _library_path = str(path)
        return _library_path
