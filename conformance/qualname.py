"""The one parser of the qualified names users write, ``ns::Cls`` (a TorchBind class; also a ``--torchbind-class``
pattern such as ``ns::*``), shared by ``--torchbind-class``, ``@conformance.examples``, ``@conformance.strategy`` and
``scaffold``, so all of them accept and refuse the same text. Imports nothing (the command line uses it before
torch is imported)."""

from __future__ import annotations

__all__ = ["split_qualname"]


def split_qualname(text: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of ``"ns::Cls"``; ``None`` unless ``text`` has exactly one ``::`` with a non-empty
    part on each side (``"ns::"``, ``"::Cls"``, ``"Cls"`` and ``"a::b::c"`` are refused). Raises nothing."""
    parts = text.split("::")
    if len(parts) != 2 or not all(parts):
        return None
    return parts[0], parts[1]
