"""Candidate method bodies (templates) and the observations that accept or reject them.

A template is a few lines of Python over the fake's attributes (one per ``__obj_flatten__`` entry) and the method's
parameters: return an attribute, the length of a list attribute, append / prepend an argument to a list attribute,
pop or peek at its front or back (another attribute when it is empty), return an argument, a tensor like an
argument or an attribute (``torch.empty_like``), add an int argument to an int attribute (or to each), the sum or
product of number attributes (alone or times an argument), reset an attribute, a constant. :mod:`conformance.scaffold.observe` runs each candidate, compiled into a stand-in class, beside the real
object and keeps the first one that agrees everywhere.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from ..engine import torch_api

__all__ = ["Template", "method_templates", "static_templates", "literal", "compile_method"]

_SCALARS = (bool, int, float, str, type(None))


@dataclasses.dataclass(frozen=True)
class Template:
    """One candidate body: ``description`` (for comments and messages) and ``lines`` (the body's source,
    unindented)."""

    description: str
    lines: tuple[str, ...]


def literal(value: Any) -> str | None:
    """Python source that rebuilds ``value`` when it is a scalar, or a list / tuple of them; else ``None``."""
    if isinstance(value, float) and value != value:
        return "float('nan')"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return f"float({str(value)!r})"
    if isinstance(value, _SCALARS):
        return repr(value)
    if isinstance(value, (list, tuple)):
        parts = [literal(v) for v in value]
        if any(p is None for p in parts):
            return None
        if isinstance(value, tuple):
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        return "[" + ", ".join(parts) + "]"
    return None


def _kind(t: torch_api.JitType) -> str:
    return {"TensorType": "tensor", "IntType": "int", "SymIntType": "int"}.get(t.kind(), "other")


def method_templates(attrs: dict[str, Any], params: list[tuple[str, torch_api.JitType]], constant: Any = ...,
                     ) -> list[Template]:
    """Candidate bodies of an object's method, in order of preference. ``attrs``: attribute name -> a value it
    holds on an example object (its kind decides which templates apply); ``params``: the parameters' names and
    schema types (``self`` excluded); ``constant``: an observed result to try as a constant (``...`` for none)."""
    out: list[Template] = []
    lists = [a for a, v in attrs.items() if isinstance(v, list)]
    tensors = [a for a, v in attrs.items() if isinstance(v, torch.Tensor)]
    ints = [a for a, v in attrs.items() if isinstance(v, int) and not isinstance(v, bool)]
    for a in attrs:
        if a in lists:
            out.append(Template(f"a copy of self.{a}", (f"return list(self.{a})",)))
            out.append(Template(f"clones of the tensors in self.{a}", (f"return [t.clone() for t in self.{a}]",)))
        else:
            out.append(Template(f"self.{a}", (f"return self.{a}",)))
    for a in lists:
        out.append(Template(f"the length of self.{a}", (f"return len(self.{a})",)))
        out.append(Template(f"whether self.{a} is empty", (f"return len(self.{a}) == 0",)))
        out.append(Template(f"whether self.{a} is not empty", (f"return len(self.{a}) > 0",)))
        out.append(Template(f"the length of self.{a} as a float", (f"return float(len(self.{a}))",)))
        out.append(Template(f"pop the front of self.{a} (raises when it is empty)", (f"return self.{a}.pop(0)",)))
        out.append(Template(f"pop the back of self.{a} (raises when it is empty)", (f"return self.{a}.pop()",)))
        out.append(Template(f"the front of self.{a} (raises when it is empty)", (f"return self.{a}[0]",)))
        out.append(Template(f"the back of self.{a} (raises when it is empty)", (f"return self.{a}[-1]",)))
        for p, _ in params:
            out.append(Template(f"append {p} to self.{a}", (f"self.{a}.append({p})",)))
            out.append(Template(f"prepend {p} to self.{a}", (f"self.{a}.insert(0, {p})",)))
            if _kind(params[[q for q, _ in params].index(p)][1]) == "tensor":
                out.append(Template(f"add {p} in place to every tensor in self.{a}",
                                    (f"for t in self.{a}:", f"    t.add_({p})")))
        for end, index in (("front", "0"), ("back", "-1")):
            pop = "0" if index == "0" else ""
            for b in attrs:
                if b == a:
                    continue
                out.append(Template(f"pop the {end} of self.{a}, self.{b} when it is empty",
                                    (f"if len(self.{a}) > 0:", f"    return self.{a}.pop({pop})",
                                     f"return self.{b}")))
                out.append(Template(f"the {end} of self.{a}, self.{b} when it is empty",
                                    (f"if len(self.{a}) > 0:", f"    return self.{a}[{index}]",
                                     f"return self.{b}")))
    for p, t in params:
        if _kind(t) == "tensor":
            out.append(Template(f"a new tensor like {p}", (f"return torch.empty_like({p})",)))
    for p, t in params:
        out.append(Template(f"the argument {p}", (f"return {p}",)))
    for a in tensors:
        out.append(Template(f"a new tensor like self.{a}", (f"return torch.empty_like(self.{a})",)))
    numbers = [a for a, v in attrs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for p, t in params:
        if _kind(t) == "tensor":
            out += [Template(f"{p} times self.{a}", (f"return {p} * self.{a}",)) for a in numbers]
            out += [Template(f"{p} times the length of self.{a}", (f"return {p} * len(self.{a})",)) for a in lists]
    for a in ints:
        for p, t in params:
            if _kind(t) == "int":
                out.append(Template(f"add {p} to self.{a} and return it",
                                    (f"self.{a} += {p}", f"return self.{a}")))
                out.append(Template(f"add {p} to self.{a}", (f"self.{a} += {p}",)))
    out += _arithmetic(numbers, ints, params)
    out += _element_reads(attrs, params)
    for a, v in attrs.items():
        zero = {bool: "False", int: "0", float: "0.0", str: "''", list: "[]"}.get(type(v))
        if zero is not None:
            out.append(Template(f"reset self.{a} to {zero}", (f"self.{a} = {zero}",)))
    out += _constant(constant)
    return out


#: Constant positions tried when a getter may read one element of a flattened list.
_MAX_INDEX = 6


def _element_reads(attrs: dict[str, Any], params: list[tuple[str, torch_api.JitType]]) -> list[Template]:
    """Getters that read one element of a flattened list or dict attribute, before any constant: the element at
    an int parameter (a tensor element cloned, as C++ hands out copies), the element at a fixed position (an
    engine's ``serialized_info`` list: ``self.info[2]``, or ``int(self.info[2])`` for a number kept as a
    string), the value under a fixed str key. The flattened state holds the value, so a getter reads it there
    rather than returning what it happened to be on the examples."""
    out: list[Template] = []
    for a, v in attrs.items():
        if isinstance(v, list):
            for p, t in params:
                if _kind(t) == "int":
                    if any(isinstance(x, torch.Tensor) for x in v):
                        out.append(Template(f"a clone of self.{a}[{p}]", (f"return self.{a}[{p}].clone()",)))
                    out.append(Template(f"self.{a}[{p}]", (f"return self.{a}[{p}]",)))
            for i, x in enumerate(v[:_MAX_INDEX]):
                if isinstance(x, (bool, int, float, str)):
                    out.append(Template(f"self.{a}[{i}]", (f"return self.{a}[{i}]",)))
                if isinstance(x, str):
                    out += [Template(f"self.{a}[{i}] as {conv}", (f"return {conv}(self.{a}[{i}])",))
                            for conv in ("int", "float")]
        elif isinstance(v, dict):
            out += [Template(f"self.{a}[{k!r}]", (f"return self.{a}[{k!r}]",)) for k in v if isinstance(k, str)]
    return out


def _arithmetic(numbers: list[str], ints: list[str], params: list[tuple[str, torch_api.JitType]]) -> list[Template]:
    """Combinations of the number attributes: their sum or product (each pair, and all of them), alone or times a
    number or tensor parameter; adding an int parameter to every int attribute."""
    groups = [(a, b) for i, a in enumerate(numbers) for b in numbers[i + 1:]]
    if len(numbers) > 2:
        groups.append(tuple(numbers))
    out = []
    for group in groups:
        for op, word in ((" + ", "sum"), (" * ", "product")):
            expr = op.join(f"self.{a}" for a in group)
            names = ", ".join(f"self.{a}" for a in group)
            out.append(Template(f"the {word} of {names}", (f"return {expr}",)))
            for p, t in params:
                if _kind(t) in ("int", "tensor") or t.kind() == "FloatType":
                    out.append(Template(f"the {word} of {names}, times {p}", (f"return ({expr}) * {p}",)))
    if len(ints) > 1:
        for p, t in params:
            if _kind(t) == "int":
                out.append(Template(f"add {p} to each of {', '.join(f'self.{a}' for a in ints)}",
                                    tuple(f"self.{a} += {p}" for a in ints)))
    return out


def static_templates(params: list[tuple[str, torch_api.JitType]], constant: Any = ...) -> list[Template]:
    """Candidate bodies of a ``def_static`` method: return an argument, a tensor like one, a constant."""
    out = [Template(f"the argument {p}", (f"return {p}",)) for p, _ in params]
    out += [Template(f"a new tensor like {p}", (f"return torch.empty_like({p})",))
            for p, t in params if _kind(t) == "tensor"]
    return out + _constant(constant)


def _constant(value: Any) -> list[Template]:
    if value is ...:
        return []
    src = literal(value)
    if src is None:
        return []
    if value is None:
        return [Template("nothing (returns None)", ("return None",))]
    return [Template(f"the constant {src}", (f"return {src}",))]


def compile_method(name: str, params: list[str], template: Template, static: bool = False):
    """The template as a Python function ``name(self, *params)`` (``name(*params)`` when ``static``), compiled
    with ``torch`` in scope; raises ``SyntaxError`` for a template that is not valid Python."""
    head = ", ".join(params if static else ["self", *params])
    src = f"def {name}({head}):\n" + "".join(f"    {ln}\n" for ln in template.lines)
    scope: dict[str, Any] = {"torch": torch}
    exec(compile(src, f"<template {template.description}>", "exec"), scope)  # noqa: S102 - our own source
    return scope[name]
