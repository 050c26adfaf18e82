"""Values rendered for messages: :func:`render`, the one renderer of every failure line, note and cell text.

A message says what a value was without running the reader's torch: a tensor by the metadata a ``FakeTensor``
carries (a fake has no data), TorchBind objects by their class, anything else by ``repr``. Five styles, for five
kinds of message (:data:`STYLES`); each keeps the texts the reports and the expecttest-pinned messages show.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from . import torch_api
from .torch_api import FakeScriptObject, global_fake_class_registry

__all__ = ["render", "STYLES", "tensor_meta", "script_class_name"]

#: The styles of :func:`render`: ``metadata`` (a result compared with its fake: tensors by metadata only),
#: ``cell`` (a coverage-matrix cell's eager and compiled outputs: ``metadata``, plus the numbers of a small real
#: tensor and the type of a scalar), ``numbers`` (a Python custom class's results: tensors as their values),
#: ``line`` (any value inside a sentence: its ``repr`` on one line), ``field`` (one field of a tensor's metadata,
#: as ``metadata`` writes it inside ``Tensor(...)``).
STYLES = ("metadata", "cell", "numbers", "line", "field")


def tensor_meta(t: torch.Tensor) -> dict[str, Any]:
    """The metadata a FakeTensor carries: ``shape``, ``dtype``, ``device``, ``stride``, ``requires_grad``."""
    return {
        "shape": tuple(t.shape),
        "dtype": t.dtype,
        "device": t.device,
        "stride": tuple(t.stride()),
        "requires_grad": t.requires_grad,
    }


def render(value: Any, limit: int | None = 200, *, style: str = "metadata", numbers: int = 12) -> str:
    """``value`` as short readable text for a message, cut to ``limit`` characters (``...`` at the end; ``None``:
    never cut; a tensor's own text is never cut).

    ``style`` (one of :data:`STYLES`):

    * ``"metadata"``: a tensor as ``Tensor(shape=[2, 3], dtype=float32, device=cpu, stride=[3, 1])`` (plus
      ``requires_grad=True``), lists, tuples and dicts element-wise, a ``ScriptObject`` or ``FakeScriptObject`` as
      ``<ScriptObject ns.Cls>``, anything else as ``repr``;
    * ``"cell"``: as ``metadata``, and a tensor of at most ``numbers`` elements that holds data (not meta, not
      fake) followed by its values (``... = [0.0, 3.0]``), a value that is neither a tensor, a list nor a tuple
      followed by its type (``3 (int)``);
    * ``"numbers"``: a tensor as its first ``numbers`` values, shape and dtype (``tensor([3.0, 7.0], shape=[2],
      dtype=torch.float32)``, ``, ... (100 elements)`` when there are more), lists and tuples element-wise
      (``[1, "a", tensor(...)]``: the elements' texts unquoted, a string's own quotes double), anything else as
      ``repr``;
    * ``"line"``: ``repr`` on one line (each line break, with the spaces around it, one space: ``tensor([[1, 2],
      [3, 4]])``);
    * ``"field"``: a field of :func:`tensor_meta` as ``metadata`` writes it inside ``Tensor(...)``: a shape or
      stride as a list (``[2, 3]``), a dtype without ``torch.`` (``float32``), a device by name (``cpu``), anything
      else as ``str``.

    Raises ``ValueError`` for another style; nothing else of its own (a ``repr`` that raises propagates)."""
    if style == "metadata":
        return _metadata(value, limit)
    if style == "cell":
        if isinstance(value, torch.Tensor):
            text = _metadata(value, limit)
            if value.numel() <= numbers and not value.is_meta and not isinstance(value, torch_api.FakeTensor):
                text += f" = {value.tolist()}"
            return text
        text = _metadata(value, limit)
        if not isinstance(value, (list, tuple)):
            text = f"{text} ({type(value).__name__})"
        return _cut(text, limit)
    if style == "numbers":
        return _cut(_numbers(value, numbers), limit)
    if style == "line":
        return _cut(re.sub(r"\s*\n\s*", " ", repr(value)), limit)
    if style == "field":
        return _cut(_field(value), limit)
    raise ValueError(f"render(style={style!r}): one of {', '.join(STYLES)}")


def _cut(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def _field(value: Any) -> str:
    return str(list(value)) if isinstance(value, tuple) else str(value).replace("torch.", "")


def _metadata(value: Any, limit: int | None) -> str:
    if isinstance(value, torch.Tensor):
        m = tensor_meta(value)
        extra = ", requires_grad=True" if m["requires_grad"] else ""
        return (
            f"Tensor(shape={_field(m['shape'])}, dtype={_field(m['dtype'])}, device={_field(m['device'])}, "
            f"stride={_field(m['stride'])}{extra})"
        )
    if isinstance(value, list):
        text = "[" + ", ".join(_metadata(v, limit) for v in value) + "]"
    elif isinstance(value, tuple):
        text = "(" + ", ".join(_metadata(v, limit) for v in value) + ("," if len(value) == 1 else "") + ")"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{_metadata(k, 200)}: {_metadata(v, limit)}" for k, v in value.items()) + "}"
    elif isinstance(value, torch.ScriptObject):
        text = f"<ScriptObject {value._type().qualified_name().replace('__torch__.torch.classes.', '')}>"
    elif isinstance(value, FakeScriptObject):
        text = f"<FakeScriptObject {object.__getattribute__(value, 'script_class_name')}>"
    else:
        text = repr(value)
    return _cut(text, limit)


def _numbers(value: Any, count: int) -> str:
    if isinstance(value, torch.Tensor):
        flat = value.detach().flatten()
        head = flat[:count].tolist()
        more = f", ... ({flat.numel()} elements)" if flat.numel() > count else ""
        return f"tensor({head if value.dim() else head[0]}{more}, shape={list(value.shape)}, dtype={value.dtype})"
    if isinstance(value, (list, tuple)):
        return type(value)(_numbers(v, count) for v in value).__repr__().replace("'", "")
    return repr(value)


def script_class_name(obj: Any) -> str | None:
    """The TorchScript class name (``__torch__.torch.classes.ns.Cls``) of a real object, a FakeScriptObject or
    an instance of a registered fake class; ``None`` for anything else."""
    if isinstance(obj, torch.ScriptObject):
        return obj._type().qualified_name()
    if isinstance(obj, FakeScriptObject):
        return object.__getattribute__(obj, "script_class_name")
    for name, klass in global_fake_class_registry._registered_class.items():
        if isinstance(klass, type) and isinstance(obj, klass):
            return name
    return None
