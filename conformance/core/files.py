"""Writing the plugin's output files safely: atomically (a reader, or a run killed mid-write, sees the old file or
the new one, never a truncated or empty one), and probing at configure time that a file could be written without
creating it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_text_atomically", "check_writable", "describe_os_error"]


def _new_file_mode() -> int:
    """The permission bits ``open(path, "w")`` would give a new file (0o666 less the umask)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same directory, then ``os.replace``.

    An existing file keeps its permission bits; a new one gets those a plain ``open`` would give. On any error
    (or interruption) the temporary file is removed and ``path`` is left as it was. Raises ``OSError`` when the
    file cannot be written (e.g. its directory does not exist)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = _new_file_mode()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def check_writable(path: Path) -> None:
    """Check that ``path`` could be written by :func:`write_text_atomically`, creating nothing: its directory
    exists and accepts a new file (a temporary file is created there and deleted), and an existing ``path`` is a
    writable file. Raises ``OSError`` saying why not."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(path))
    if not path.parent.is_dir():
        raise FileNotFoundError(2, "No such directory", str(path.parent))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".probe")
    os.close(fd)
    os.unlink(tmp)
    if path.exists() and not os.access(path, os.W_OK):
        raise PermissionError(13, "Permission denied", str(path))


def describe_os_error(exc: OSError) -> str:
    """``[Errno N] message`` of an ``OSError`` without the name of the (possibly temporary) file it was about;
    ``str(exc)`` when it has no errno."""
    if exc.errno is not None and exc.strerror:
        return f"[Errno {exc.errno}] {exc.strerror}"
    return str(exc)
