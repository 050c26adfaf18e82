"""The schemas of operators as their library wrote them, for the argument types torch's registry forgets.

An op defined with ``torch.library.Library(ns, "FRAGMENT").define("op(Tensor x, mylib.Spec s) -> Tensor")`` (the
way inference engines and training libraries register the ops that take their Python custom classes, often
through a helper that builds the string with ``torch.library.infer_schema``) is stored by the dispatcher with the
class's type replaced by ``PyObject`` (``torch._C._jit_get_all_schemas()``, ``op._schema``: torch 2.13, 2.14 and
2.15 alike). Only the string given to ``define`` says which class the op takes. :func:`recording` keeps those
strings while the plugin imports the adopter's modules (``--torchbind-load``); for an op defined before (torch's
own ``_dtensor::mesh_get_process_group``, a library a ``conftest.py`` imported), the source file that made its
``Library`` (the dispatcher's registration site, ``OperatorHandle.debug()``) is read, not run, for a ``define``
call whose schema is a string literal. :func:`declared_types` reads either back. ``torch.library.custom_op`` ops
need none of this: their Python signature says it (``torch._library.custom_ops.OPDEFS``).

:func:`kernel_annotations` is the second source: the annotations of an op's Python fake kernel
(``torch.library.register_fake``), which helpers copy from the op's function.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import os
import re
import threading
import typing
from collections.abc import Iterator
from typing import Any

__all__ = ["recording", "declared_types", "kernel_annotations", "defined_schemas"]

_lock = threading.Lock()
#: ``ns::name`` or ``ns::name.overload`` -> the schema string given to ``Library.define``, as written.
_DEFINED: dict[str, str] = {}
_depth = 0


def _qualname(ns: str, schema: str) -> str | None:
    """``ns::name[.overload]`` of a ``define`` schema string (``name.overload(...) -> ...``), or ``None``."""
    match = re.match(r"\s*([A-Za-z_][\w]*(?:\.[\w]+)?)\s*\(", schema)
    return f"{ns}::{match.group(1)}" if match else None


@contextlib.contextmanager
def recording() -> Iterator[None]:
    """Keep the schema string of every op defined through ``torch.library.Library.define`` (which
    ``torch.library.define`` calls too) while the block runs; torch's own ``define`` runs unchanged, and is put
    back when the block ends (nested blocks share one wrapper). What it keeps is read by :func:`declared_types`."""
    import torch.library

    global _depth
    with _lock:
        _depth += 1
        if _depth == 1:
            original = torch.library.Library.define

            def define(self, schema, *args, **kwargs):
                result = original(self, schema, *args, **kwargs)
                try:
                    name = _qualname(self.ns, schema) if isinstance(schema, str) else None
                except Exception:  # noqa: BLE001 - recording never changes what define does
                    name = None
                if name is not None:
                    _DEFINED[name] = schema
                return result

            define.__wrapped__ = original  # type: ignore[attr-defined]
            torch.library.Library.define = define
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                torch.library.Library.define = torch.library.Library.define.__wrapped__


def defined_schemas() -> dict[str, str]:
    """Every recorded ``{qualname: schema string}`` (a copy)."""
    return dict(_DEFINED)


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


_SOURCES: dict[tuple[str, float], dict[str, str]] = {}


def _literal_definitions(path: str) -> dict[str, str]:
    """``{ns-less name[.overload] or ns::name: schema}`` of the ``*.define("name(...) -> ...")`` and
    ``torch.library.define("ns::name", "(...) -> ...")`` calls with string literals in the Python file ``path``
    (parsed with :mod:`ast`, never imported); empty for a file that cannot be read or parsed. Cached by path and
    modification time."""
    try:
        key = (path, os.path.getmtime(path))
    except OSError:
        return {}
    if key not in _SOURCES:
        found: dict[str, str] = {}
        try:
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read(), filename=path)
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            tree = None
        for node in ast.walk(tree) if tree is not None else ():
            if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
                    and getattr(node.func, "attr", getattr(node.func, "id", None)) == "define"):
                continue
            texts = [a.value for a in node.args[:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if len(texts) == 2 and "::" in texts[0] and "(" not in texts[0]:
                found[texts[0]] = texts[0].split("::", 1)[1] + texts[1]
            elif texts and "(" in texts[0]:
                name = _qualname("", texts[0])
                if name is not None:
                    found[name.removeprefix("::")] = texts[0]
        _SOURCES[key] = found
    return _SOURCES[key]


def _source_schema(qualname: str, overload: str, op: Any) -> str | None:
    """The schema string of ``qualname`` found by :func:`_literal_definitions` in the file the dispatcher names as
    its registration site (``op._handle.debug()``: ``registered at FILE:LINE``, the line that made the op's
    ``Library``), or ``None``."""
    try:
        debug = op._handle.debug()
    except Exception:  # noqa: BLE001 - an overload without a handle: nothing to read
        return None
    match = re.match(r"registered at (.+\.py):\d+$", str(debug).strip())
    if match is None:
        return None
    found = _literal_definitions(match.group(1))
    name = qualname.split("::", 1)[1] + (f".{overload}" if overload else "")
    return found.get(name) or found.get(f"{qualname}.{overload}" if overload else qualname)


def declared_types(qualname: str, overload: str = "", op: Any = None) -> dict[str, str]:
    """``{argument name: type as written}`` of the definition of ``qualname`` (``ns::op``) and ``overload``
    (``""`` for the default one), e.g. ``{"x": "Tensor", "s": "mylib.Spec", "out": "Tensor(a!)"}``: the recorded
    ``define`` string, else (given the overload ``op``) a string literal in the file that registered it; empty
    when neither is known. The ``*`` separating keyword-only arguments is left out."""
    schema = _DEFINED.get(f"{qualname}.{overload}" if overload else qualname)
    if schema is None and op is not None:
        schema = _source_schema(qualname, overload, op)
    if schema is None:
        return {}
    open_at = schema.find("(")
    depth, close_at = 0, -1
    for i in range(open_at, len(schema)):
        if schema[i] == "(":
            depth += 1
        elif schema[i] == ")":
            depth -= 1
            if depth == 0:
                close_at = i
                break
    if open_at < 0 or close_at < 0:
        return {}
    out = {}
    for part in _split_top(schema[open_at + 1:close_at]):
        if part == "*":
            continue
        declaration = part.split("=", 1)[0].strip()
        pieces = declaration.rsplit(None, 1)
        if len(pieces) == 2:
            out[pieces[1]] = pieces[0]
    return out


def kernel_annotations(qualname: str) -> dict[str, Any]:
    """The parameter annotations of ``qualname``'s Python fake kernel (``torch.library.register_fake`` /
    ``Library._register_fake``, kept in ``torch._library.simple_registry``), by parameter name; empty without a
    fake kernel, or one without annotations. torch wraps the kernel it keeps (``_check_pystubs_once``); the
    adopter's function is found behind the wrapper's closure."""
    try:
        from .torch_api import simple_registry

        holder = simple_registry.singleton.find(qualname).fake_impl
        kernel = getattr(holder, "kernel", None)
        fn = getattr(kernel, "func", None)
    except Exception:  # noqa: BLE001 - a registry laid out otherwise: no annotations
        return {}
    for _ in range(4):  # through torch's own wrappers (module torch.*) to the adopter's function
        if not inspect.isfunction(fn) or not (getattr(fn, "__module__", "") or "").startswith("torch"):
            break
        inner = inspect.getclosurevars(fn).nonlocals.get("func")
        if not callable(inner):
            break
        fn = inner
    fn = inspect.unwrap(fn) if callable(fn) else fn
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable string annotations: as written
        hints = dict(getattr(fn, "__annotations__", {}) or {})
    hints.pop("return", None)
    return hints
