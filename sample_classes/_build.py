"""Build (once, cached) and load the sample C++ classes: one extension per source in ``sample_classes/csrc``.

Each source registers one namespace (``samples.cpp``: ``samples``, ``samples_unsafe.cpp``: ``samples_unsafe``, ...)
and is built into an extension of its own, so a run builds only the namespaces it asks for
(:func:`load_namespaces`): the README's main job, which checks ``samples::TensorQueue``, compiles one source,
not ten. Builds are cached in ``~/.cache/torch_extensions`` (or ``$TORCH_EXTENSIONS_DIR``), in a directory of its
own for each copy of the sources and each torch build and Python ABI (:func:`build_key`): a library built by one
torch is never loaded by another, even where several share one ``TORCH_EXTENSIONS_DIR``. An extension whose
library is newer than its source and than torch's installation is loaded without asking the compiler
(``torch.ops.load_library``). When a build does happen, one
line on stderr says so before it starts (what, with which torch, where it is cached) and one says how long it
took. Sources that need building are built in parallel threads (each its own ``torch.utils.cpp_extension.load``),
with a precompiled header of the torch headers they all include when there are enough of them
(:func:`precompiled_header`). Concurrent builds from several processes (pytest-xdist workers) are serialised by
the file lock that ``torch.utils.cpp_extension`` takes in each build directory.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import sys
import threading
import time
from pathlib import Path

CSRC_DIR = Path(__file__).resolve().parent / "csrc"


def build_key() -> str:
    """What a built library depends on besides its source, as one string: the copy of the sources (torch's build,
    ninja, names the sources by path, so two copies sharing one directory would rebuild it for each other in
    turn), the torch version and build (``torch.__version__`` with its local label, ``torch.version.git_version``,
    the CUDA version it was built with) and the Python ABI (``sys.implementation.cache_tag``, e.g.
    ``cpython-311``). A library is ABI-bound to the torch that built it: torch 2.15 loading 2.14.1's build fails
    or misbehaves."""
    import torch

    return "\0".join((str(CSRC_DIR), torch.__version__, str(getattr(torch.version, "git_version", "")),
                      str(torch.version.cuda), sys.implementation.cache_tag or ""))


_digests: dict[str, str] = {}


def _digest() -> str:
    """An 8-hex-digit digest of :func:`build_key`, computed once per process."""
    key = build_key()
    if key not in _digests:
        _digests[key] = hashlib.sha256(key.encode()).hexdigest()[:8]
    return _digests[key]


_lock = threading.Lock()
_loaded: dict[str, str] = {}  # namespace -> path of its loaded library


def sources() -> list[str]:
    """The C++ sources, as absolute paths (sorted)."""
    found = sorted(str(p) for p in CSRC_DIR.glob("*.cpp"))
    if not found:
        raise FileNotFoundError(f"no C++ sources found in {CSRC_DIR}")
    return found


def namespaces() -> list[str]:
    """The namespaces of the sample classes, one per source (its file name without ``.cpp``), sorted."""
    return [Path(p).stem for p in sources()]


def extension_name(namespace: str) -> str:
    """The name of the extension (and of its build directory) that holds ``namespace``."""
    return f"torchbind_samples_{_digest()}_{namespace}"


def load_library() -> str:
    """Build (if needed) and load every namespace; return the path of the ``samples`` namespace's library.
    Idempotent."""
    return load_namespaces()["samples"]


def load_namespaces(names=None) -> dict[str, str]:
    """Build (if needed) and load the extensions of the namespaces ``names`` (default: all); return
    ``{namespace: library path}``. Idempotent: a namespace loaded already is not touched again. Raises
    ``ValueError`` for a name that is no sample namespace."""
    known = namespaces()
    wanted = known if names is None else sorted(set(names))
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"no sample namespace {', '.join(unknown)}; the sample namespaces are {', '.join(known)}")
    with _lock:
        missing = [n for n in wanted if n not in _loaded]
        if missing:
            _load(missing)
    return {n: _loaded[n] for n in wanted}


def _load(missing: list[str]) -> None:
    import torch

    stale = [n for n in missing if _built(n) is None]
    for namespace in missing:
        if namespace not in stale:
            library = _built(namespace)
            torch.ops.load_library(library)
            _loaded[namespace] = library
    if not stale:
        return
    root = os.path.dirname(_build_directory(stale[0]))
    print(f"torchbind-conformance: building the sample C++ classes ({', '.join(f'{n}.cpp' for n in stale)}) with "
          f"torch {torch.__version__}; about 30-50 s the first time, cached in {root}", file=sys.stderr, flush=True)
    start = time.monotonic()
    header = precompiled_header(root) if len(stale) >= PCH_FROM else None
    extra = ["-O0"] if header is None else ["-O0", *header_flags(header)]
    workers = max(1, min(len(stale), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for namespace, library in zip(stale, pool.map(lambda n: _compile(n, extra), stale)):
            _loaded[namespace] = library
    print(f"torchbind-conformance: built the sample C++ classes in {time.monotonic() - start:.0f} s",
          file=sys.stderr, flush=True)


#: Every sample source includes these torch headers: parsing them is most of a source's build (what a
#: precompiled header saves: benchmarks/sample_build.py).
TORCH_HEADERS = ("torch/custom_class.h", "torch/library.h", "torch/types.h")
#: Build a precompiled header of :data:`TORCH_HEADERS` when at least this many sources are to be built: building
#: it costs about as much as two sources, and it more than halves each source's build.
PCH_FROM = 4


def torch_cflags() -> list[str]:
    """The compiler flags ``torch.utils.cpp_extension`` gives a C++ source (its ``cflags`` in ``build.ninja``,
    written by ``_write_ninja_file_to_build_library``), without ``-DTORCH_EXTENSION_NAME`` (one per extension)
    and the extension's own ``extra_cflags``: ``-DTORCH_API_INCLUDE_EXTENSION_H``, ``-isystem`` each of torch's
    CPU include paths and Python's, ``-fPIC -std=c++20``. A precompiled header is used only where it was built
    with flags that agree with the source's (GCC checks, and ``-Winvalid-pch`` says when they do not); a test
    compares these with what torch wrote (tests/integration/test_first_run.py)."""
    import sysconfig

    from torch.utils import cpp_extension

    includes = [*cpp_extension.include_paths("cpu"), sysconfig.get_path("include", scheme="posix_prefix")]
    return ["-DTORCH_API_INCLUDE_EXTENSION_H", *(f for p in includes for f in ("-isystem", p)), "-fPIC",
            "-std=c++20"]


def header_flags(header: str) -> list[str]:
    """The ``extra_cflags`` (after ``-O0``) that make a source use the precompiled ``header``: the extension's
    name macro undefined (the header was built without it; no sample uses it), and a warning where GCC cannot
    use the header, which it then parses as text: the build is the same either way, only slower."""
    return ["-UTORCH_EXTENSION_NAME", "-Winvalid-pch", "-include", header]


def precompiled_header(root: str) -> str | None:
    """The path of ``<root>/torchbind_samples_<digest>_pch/torch_headers.h`` (digest: :func:`build_key`'s), whose precompiled form
    (``torch_headers.h.gch``: :data:`TORCH_HEADERS`, built with :func:`torch_cflags` and ``-O0``) is newer than
    torch's installation and was built with today's flags and headers (kept in ``flags.json``); built here first
    when not. Processes that build at once (pytest-xdist workers) build it once, under an ``flock``. ``None`` when it
    cannot be built (no compiler, a failed build): the sources are then built without it, as before."""
    import fcntl
    import json
    import subprocess

    import torch
    from torch.utils import cpp_extension

    directory = os.path.join(root, f"torchbind_samples_{_digest()}_pch")
    header, flags = os.path.join(directory, "torch_headers.h"), [*torch_cflags(), "-O0"]
    wanted = {"flags": flags, "headers": list(TORCH_HEADERS)}
    try:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
            record = os.path.join(directory, "flags.json")
            try:
                fresh = (json.loads(Path(record).read_text()) == wanted and os.path.getmtime(header + ".gch") >=
                         os.path.getmtime(os.path.join(os.path.dirname(torch.__file__), "version.py")))
            except (OSError, ValueError):
                fresh = False
            if not fresh:
                Path(header).write_text("".join(f"#include <{h}>\n" for h in TORCH_HEADERS))
                partial = header + f".gch.{os.getpid()}"
                subprocess.run([cpp_extension.get_cxx_compiler(), "-x", "c++-header", header, "-o", partial, *flags],
                               check=True, capture_output=True, timeout=600)
                os.replace(partial, header + ".gch")
                Path(record).write_text(json.dumps(wanted))
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"torchbind-conformance: no precompiled torch header ({exc}); building without it", file=sys.stderr,
              flush=True)
        return None
    return header


#: A build lock older than this (seconds) is one a killed build left behind: one namespace builds in under a
#: minute on 2 cores, and nothing refreshes the lock while it builds.
STALE_LOCK_S = 600.0


def clear_stale_lock(directory: str, now: float | None = None) -> bool:
    """Remove ``directory``'s ``lock`` when a killed build left it; return whether it was removed (and say so on
    stderr). torch 2.13's ``torch.utils.cpp_extension`` locks a build directory by creating the file ``lock``
    (``torch.utils.file_baton.FileBaton``: its existence blocks every later build, forever, when the process that
    made it was killed before removing it); torch 2.14 keeps the file and locks it with ``flock`` instead. So: a
    lock older than :data:`STALE_LOCK_S` that no process holds with ``flock`` is stale. Never raises."""
    import fcntl

    lock = os.path.join(directory, "lock")
    try:
        age = (time.time() if now is None else now) - os.path.getmtime(lock)
        if age < STALE_LOCK_S:
            return False
        with open(lock) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # a torch 2.14 build holds it now
                return False
            os.remove(lock)
    except OSError:
        return False
    print(f"torchbind-conformance: removed {lock}, left {age / 60:.0f} min ago by a build that was killed (a torch "
          "2.13 build waits forever while it exists)", file=sys.stderr, flush=True)
    return True


def _compile(namespace: str, extra_cflags: list[str]) -> str:
    """Build (ninja decides what) and load one namespace's extension with ``extra_cflags``; its library's
    path."""
    from torch.utils import cpp_extension

    clear_stale_lock(_build_directory(namespace))
    return str(cpp_extension.load(
        name=extension_name(namespace),
        sources=[str(CSRC_DIR / f"{namespace}.cpp")],
        # -O0 and torch/types.h (not torch/script.h) in the sources: the headers and the optimiser are most of a
        # sample's build, and the samples run a handful of calls each, so neither buys anything back.
        extra_cflags=extra_cflags,
        is_python_module=False,  # -> torch.ops.load_library(<so>)
        verbose=bool(os.environ.get("TORCHBIND_SAMPLES_VERBOSE")),
    ))


def _build_directory(namespace: str) -> str:
    from torch.utils import cpp_extension

    return cpp_extension._get_build_directory(extension_name(namespace), verbose=False)


def _built(namespace: str) -> str | None:
    """The path of the namespace's library when it is built and newer than its source and than torch's
    installation (``torch/version.py``), else ``None`` (a build is needed, or ninja should decide)."""
    import torch

    library = os.path.join(_build_directory(namespace), f"{extension_name(namespace)}.so")
    try:
        built = os.path.getmtime(library)
        newest = max(os.path.getmtime(CSRC_DIR / f"{namespace}.cpp"),
                     os.path.getmtime(os.path.join(os.path.dirname(torch.__file__), "version.py")))
    except OSError:
        return None
    return library if built >= newest else None
