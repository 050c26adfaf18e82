"""Where a hung worker was: the Python stacks :mod:`faulthandler` dumps on request, and what they show.

A worker registers ``faulthandler`` for :data:`STACK_SIGNAL`; before killing a hung worker the supervisor sends it
that signal a few times, a moment apart (:func:`sample`), so the failure can say *where* the worker was, not only
which breadcrumb was open. faulthandler writes from its C signal handler, so the dump comes even while the thread
spins in C++ with the GIL held.

:func:`hang_site` reads the samples: which part of torch's compiler the stack is inside (dynamo tracing the
program, AOTAutograd, inductor, torch.export: the torch source directories below), whether the Python stack moved
between samples (Python code still running, e.g. dynamo looping) or stood still in one frame (waiting in native
code), and whether that frame is one where torch calls into the class's own code (``call_torchbind``,
fakification, an op's kernel).
"""

from __future__ import annotations

import dataclasses
import linecache
import os
import re
import signal
import sysconfig

__all__ = ["STACK_SIGNAL", "Frame", "HangSite", "parse_dump", "hang_site", "COMPILER_PARTS"]

#: The signal on which a worker's faulthandler dumps its Python stacks (without ending the process).
STACK_SIGNAL = signal.SIGUSR1

_THREAD = re.compile(r"(?:Current thread|Thread) (?P<ident>0x[0-9a-fA-F]+)")
_FRAME = re.compile(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+|\?\?\?) in (?P<func>\S+)')

#: Parts of torch's compiler, by the torch source directory a frame is in (``torch/_dynamo/...``), as messages
#: name them. Present under these names in torch 2.13 and 2.14.
COMPILER_PARTS: tuple[tuple[str, str], ...] = (
    ("_dynamo", "dynamo tracing the program"),
    ("_functorch", "AOTAutograd"),
    ("_inductor", "inductor"),
    ("export", "torch.export"),
    ("_export", "torch.export"),
)

#: torch source files whose frames call into the class's own code: ``call_torchbind`` running a method on the real
#: object (strict export), fakification (``__obj_flatten__``, the deep copy through ``def_pickle``), an op's kernel.
_CLASS_CALL_SITES = ("_higher_order_ops/torchbind.py", "_library/fake_class_registry.py", "_ops.py")
#: What a line of torch's source that calls into the class names (torch/_dynamo/guards.py, output_graph.py and
#: variables/builder.py call ``__obj_flatten__`` on the real object; copy.deepcopy pickles it).
_CLASS_CALLS = ("__obj_flatten__", "__obj_unflatten__", "__getstate__", "__setstate__", "_orig_scriptmethod_call",
                "deepcopy")
_STDLIB = sysconfig.get_paths()["stdlib"]
#: Packages torch's compiler calls into itself: a frame in one of them is the compiler's work, not the class's.
_TORCH_DEPENDENCIES = frozenset({"sympy", "mpmath", "networkx", "filelock", "jinja2", "triton", "fsspec", "numpy",
                                 "typing_extensions", "optree"})


@dataclasses.dataclass(frozen=True)
class Frame:
    """One frame of a dump: the file, the line (``0`` when faulthandler printed ``???``) and the function."""

    file: str
    line: int
    func: str

    @property
    def torch_path(self) -> str | None:
        """The path inside the ``torch`` package (``_dynamo/symbolic_convert.py``), or ``None`` outside it."""
        parts = self.file.replace(os.sep, "/").split("/torch/")
        return parts[-1] if len(parts) > 1 else None

    def __str__(self) -> str:
        path = self.torch_path
        return f"{'torch/' + path if path else os.path.basename(self.file)}:{self.line} in {self.func}"


def parse_dump(text: str, thread: int) -> list[list[Frame]]:
    """The stacks of the worker's main thread in ``text`` (one or more faulthandler dumps), one per dump, each
    most recent call first; the frames of :mod:`conformance.process` and below (the worker loop, pytest) are left
    out.

    ``thread``: the main thread's ident (:func:`threading.get_ident` of the thread that forked the worker; a forked
    child's thread keeps it), matched against the ``Thread 0x...`` header faulthandler prints. faulthandler prints
    at most 100 frames of a thread, innermost first (``MAX_FRAME_DEPTH`` in CPython's ``Python/traceback.c``), so a
    deep stack -- dynamo inlining calls, under pytest's own frames -- is cut off before the worker loop's frames;
    the ident finds the main thread all the same (the worker loop's frames, which a cut-off block lacks, would
    not)."""
    stacks: list[list[Frame]] = []
    block: list[Frame] | None = None
    ours = seen_loop = False  # seen_loop: the block reached the worker loop's frames, where it is left out
    for line in [*text.splitlines(), "Thread end"]:
        if line.startswith(("Current thread", "Thread", "Stack")):
            if block is not None and ours:
                stacks.append(block)
            block, seen_loop = [], False
            ident = _THREAD.match(line)
            ours = ident is not None and int(ident["ident"], 16) == thread
            continue
        match = _FRAME.match(line)
        if match is None or block is None:
            continue
        if f"{os.sep}conformance{os.sep}process{os.sep}" in match["file"]:
            seen_loop = True
            continue
        if not seen_loop:
            line_no = match["line"]
            block.append(Frame(match["file"], int(line_no) if line_no.isdigit() else 0, match["func"]))
    return stacks


@dataclasses.dataclass(frozen=True)
class HangSite:
    """What the stacks of a hung worker show. ``compiler``: the parts of torch's compiler the stack was inside,
    outermost first (empty: none); ``moving``: the Python stack changed between samples (Python code was running);
    ``frame``: the innermost frame of the last sample; ``class_call``: the stack stood still in a frame where
    torch calls into the class's code (a file that does, or a source line that names such a call); ``user_code``:
    the innermost frame is outside torch and Python's standard library (a fake method, the adopter's code; a frame
    of generated code, ``<string>``, counts as its caller's); ``stack``: the last sample, most recent call first."""

    compiler: tuple[str, ...]
    moving: bool
    frame: Frame | None
    class_call: bool
    user_code: bool
    stack: tuple[Frame, ...]

    @property
    def in_compiler(self) -> bool:
        """The worker hung inside torch's compiler itself (not in a call into the class's code it made, nor in a
        torch call the program made)."""
        return bool(self.compiler) and not self.class_call and not self.user_code and self.torch_runtime is None

    @property
    def torch_runtime(self) -> str | None:
        """Where in torch the stack stood still when that is torch code outside the compiler and outside the places
        it calls the class (``distributed/distributed_c10d.py``: a collective the program ran, waiting), else
        ``None``. A compiled program runs such calls under dynamo's frames; they are no compiler work."""
        path = self.frame.torch_path if self.frame is not None else None
        if path is None or self.moving or self.class_call:
            return None
        top = path.split("/", 1)[0]
        return None if any(top == d for d, _ in COMPILER_PARTS) else path

    def describe(self) -> str:
        """What the worker was doing, for the failure: ``"running Python code inside torch's compiler (dynamo
        tracing the program), at torch/_dynamo/symbolic_convert.py:1603 in step"``."""
        inside = f" inside torch's compiler ({' > '.join(self.compiler)})" if self.compiler else ""
        frame = f", at {self.frame}" if self.frame else ""
        if self.class_call:
            return f"in a call into the class's code made{inside}{frame}, which did not return"
        if self.user_code:
            return f"in Python code outside torch{frame}" + (f", called{inside}" if inside else "")
        if self.torch_runtime is not None:
            hint = ("; a collective waits forever in a worker forked after the process group was made (run with "
                    "--torchbind-isolation=none)" if self.torch_runtime.startswith("distributed/") else "")
            return f"waiting in torch's own {self.torch_runtime}{frame}, a call the program made (not the compiler's " \
                   f"work){hint}"
        if self.moving:
            return f"running Python code{inside}{frame}"
        return f"waiting in one call{inside}{frame} (native code, at no place where torch calls into the class)"


def _generated(frame: Frame) -> bool:
    """Whether ``frame`` runs code made at run time with ``exec`` / ``compile`` (``<string>``, ``<dataclass ...>``),
    not a source file; ``<frozen ...>`` modules are Python's own files."""
    return frame.file.startswith("<") and not frame.file.startswith("<frozen ")


def hang_site(samples: list[list[Frame]]) -> HangSite | None:
    """Read the stack samples of a hung worker (each most recent call first, oldest sample first); ``None``
    without any."""
    samples = [s for s in samples if s]
    if not samples:
        return None
    last = samples[-1]
    moving = any(s != last for s in samples[:-1])
    parts: list[str] = []
    for frame in reversed(last):  # outermost first
        path = frame.torch_path
        if path is None:
            continue
        top = path.split("/", 1)[0]
        part = next((name for d, name in COMPILER_PARTS if d == top), None)
        if part is not None and (not parts or parts[-1] != part):
            parts.append(part)
    inner = last[0]
    inner_path = inner.torch_path or ""
    line = linecache.getline(inner.file, inner.line) if inner.line else ""
    class_call = not moving and (any(inner_path.endswith(site) for site in _CLASS_CALL_SITES)
                                 or any(call in line for call in _CLASS_CALLS))
    # Code generated at run time (a dataclass's __init__, a namedtuple's __new__: file "<string>") belongs to whoever
    # called it: the innermost frame that is a real file decides whether the worker was in the adopter's code.
    owner = next((f for f in last if not _generated(f)), inner)
    directories = set(owner.file.replace(os.sep, "/").split("/"))
    stdlib = owner.file.startswith(_STDLIB) or owner.file.startswith("<frozen ")  # frozen modules are Python's own
    user_code = (owner.torch_path is None and not stdlib and "conformance" not in directories
                 and not directories & _TORCH_DEPENDENCIES)
    return HangSite(tuple(parts), moving, inner, class_call, user_code, tuple(last))
