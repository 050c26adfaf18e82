"""Memory figures of processes, for the isolation worker's memory limit (``--torchbind-memory-limit``)."""

from __future__ import annotations

__all__ = ["format_size", "worker_memory"]


def format_size(size: float) -> str:
    """Bytes for messages: ``12 GiB``, ``300 MiB``, ``1.5 GiB``, ``812 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            break
        size /= 1024
    text = f"{size:.0f}" if unit == "B" or abs(size) >= 100 else f"{size:.1f}".removesuffix(".0")
    return f"{text} {unit}"


def worker_memory(pid: int | str = "self") -> int | None:
    """A process's anonymous and shared-memory resident bytes (``RssAnon`` + ``RssShmem`` of
    ``/proc/<pid>/status``): the memory it allocated itself, as opposed to mapped files. A forked worker starts
    with the pytest process's value (it shares those pages); ``None`` where ``/proc`` cannot tell (the process is
    gone, or no Linux)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    total, found = 0, False
    for line in text.splitlines():
        if line.startswith(("RssAnon:", "RssShmem:")):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                total += int(parts[1]) * 1024
                found = True
    return total if found else None
