"""The one parser of the qualified names users write, ``ns::Cls`` (a TorchBind class; also a ``--torchbind-class``
pattern such as ``ns::*``) or ``module.QualName`` (a Python custom class, as torch names it), shared by
``--torchbind-class``, ``@conformance.examples``, ``@conformance.strategy`` and ``scaffold``, so all of them accept
and refuse the same text. Imports nothing (the command line uses it before torch is imported).

Test ids: a TorchBind class ``ns::Cls`` is the collector ``torchbind[ns.Cls]``; a Python custom class
``module.QualName`` is ``torchbind[py:module.QualName]`` (the prefix keeps the two apart: both contain dots)."""

from __future__ import annotations

__all__ = ["split_qualname", "is_custom_class_name", "is_class_name", "node_id", "qualname_of_id", "split_id",
           "item_of_id"]


def split_qualname(text: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of ``"ns::Cls"``; ``None`` unless ``text`` has exactly one ``::`` with a non-empty
    part on each side (``"ns::"``, ``"::Cls"``, ``"Cls"`` and ``"a::b::c"`` are refused). Raises nothing."""
    parts = text.split("::")
    if len(parts) != 2 or not all(parts):
        return None
    return parts[0], parts[1]


def is_custom_class_name(text: str) -> bool:
    """Whether ``text`` names a Python custom class (``module.QualName``, or an fnmatch pattern on such names):
    dotted, with no ``::``. Raises nothing."""
    return "::" not in text and "." in text.strip(".") and not any(c.isspace() for c in text)


def is_class_name(text: str) -> bool:
    """Whether ``text`` names one class, no pattern: ``ns::Cls`` or ``module.QualName``. Raises nothing."""
    if any(c in text for c in "*?["):
        return False
    return split_qualname(text) is not None or is_custom_class_name(text)


def node_id(qualname: str, item: str) -> str:
    """The pytest node id of the item ``item`` (``coverage[add]``) of the class ``ns::Cls``:
    ``torchbind[ns.Cls]::coverage[add]``; of a Python custom class ``module.QualName``:
    ``torchbind[py:module.QualName]::item`` (the collector is named by the class info's ``test_name``)."""
    if "::" not in qualname:
        return f"torchbind[py:{qualname}]::{item}"
    ns, _, name = qualname.partition("::")
    return f"torchbind[{ns}.{name}]::{item}"


def qualname_of_id(nodeid: str) -> str:
    """``ns::Cls`` (or ``module.QualName``) of an item id ``torchbind[ns.Cls]::...`` (``torchbind[py:...]``): the
    inverse of :func:`node_id`."""
    inner = split_id(nodeid)[0][len("torchbind["):].removesuffix("]")
    if inner.startswith("py:"):
        return inner[len("py:"):]
    ns, _, name = inner.rpartition(".")
    return f"{ns}::{name}"


def split_id(nodeid: str) -> tuple[str, str, str]:
    """``(collector, check, target)`` of an item id ``torchbind[ns.Cls]::check[target]``: ``("torchbind[ns.Cls]",
    "check", "target")``; ``target`` is ``""`` for an item without one (``torchbind[ns.Cls]::coverage``), and an id
    of no class's item gives ``(nodeid, "", "")``. The one reader of item ids in the pytest layer (the baseline,
    the recorder, the reuse store, the collection). Raises nothing."""
    collector, sep, item = nodeid.partition("]::")
    if not sep:
        return nodeid, "", ""
    check, _, target = item.partition("[")
    return collector + "]", check, target.removesuffix("]")


def item_of_id(nodeid: str) -> str:
    """The item part of an item id: ``check[target]`` of ``torchbind[ns.Cls]::check[target]`` (``""`` for an id of
    no class's item). Raises nothing."""
    return nodeid.partition("]::")[2]
