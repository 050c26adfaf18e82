"""The one parser of the qualified names users write, ``ns::Cls`` (a TorchBind class; also a ``--torchbind-class``
pattern such as ``ns::*``), shared by ``--torchbind-class``, ``@conformance.examples``, ``@conformance.strategy`` and
``scaffold``, so all of them accept and refuse the same text. Imports nothing (the command line uses it before
torch is imported)."""

from __future__ import annotations

__all__ = ["split_qualname", "node_id", "qualname_of_id"]


def split_qualname(text: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of ``"ns::Cls"``; ``None`` unless ``text`` has exactly one ``::`` with a non-empty
    part on each side (``"ns::"``, ``"::Cls"``, ``"Cls"`` and ``"a::b::c"`` are refused). Raises nothing."""
    parts = text.split("::")
    if len(parts) != 2 or not all(parts):
        return None
    return parts[0], parts[1]


def node_id(qualname: str, item: str) -> str:
    """The pytest node id of the item ``item`` (``coverage[add]``) of the class ``ns::Cls``:
    ``torchbind[ns.Cls]::coverage[add]`` (the collector is named by :attr:`conformance.discovery.ClassInfo.test_name`)."""
    ns, _, name = qualname.partition("::")
    return f"torchbind[{ns}.{name}]::{item}"


def qualname_of_id(nodeid: str) -> str:
    """``ns::Cls`` of an item id ``torchbind[ns.Cls]::...`` (the inverse of :func:`node_id`)."""
    inner = nodeid[len("torchbind["):].partition("]::")[0]
    ns, _, name = inner.rpartition(".")
    return f"{ns}::{name}"
