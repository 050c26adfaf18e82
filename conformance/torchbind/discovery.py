"""Find TorchBind classes, their method schemas, their fake class and the custom ops that take them.

Sources (torch 2.13):

* ``torch._C._jit_get_custom_class_schemas()`` — one ``torch.FunctionSchema`` per method of every loaded
  ``torch::class_``; a method's first argument is ``self``, typed ``__torch__.torch.classes.<ns>.<Cls>``.
  Static methods (no ``self``) are not methods of an object and are ignored.
* ``torch._C._jit_get_all_schemas()`` — operator schemas; an op "takes the class" when one of its arguments has the
  class's type (``foo(__torch__.torch.classes.ns.Cls obj, Tensor x) -> Tensor``).
* ``torch._library.fake_class_registry.find_fake_class`` — the class registered with ``register_fake_class``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections import defaultdict

import torch

from ..core.qualname import node_id, split_qualname
from ..core.results import SelectorError, UnknownClassError
from ..engine import torch_api
from ..engine.torch_api import fake_class_registry, simple_registry

__all__ = [
    "CLASS_PREFIX",
    "qualname_of",
    "ClassInfo",
    "OpInfo",
    "ProtocolMethods",
    "class_schemas",
    "registered_classes",
    "expand_torchbind_selector",
    "discover",
    "has_python_fake",
    "runs_on_fakes",
]

CLASS_PREFIX = "__torch__.torch.classes."


def qualname_of(script_qualname: str) -> str:
    """``ns::Cls`` for a TorchBind class's TorchScript name ``__torch__.torch.classes.ns.Cls``."""
    return script_qualname.removeprefix(CLASS_PREFIX).replace(".", "::", 1)

# Methods that torch's fake-class protocol does not expect on the fake: see the ``override_skip_list`` in
# ``torch/_library/fake_class_registry.py::maybe_to_fake_obj`` (plus ``__init__``, which fakes replace with
# ``__obj_unflatten__``).
ProtocolMethods = frozenset({"__init__", "__obj_flatten__", "__getstate__", "__setstate__"})


@dataclasses.dataclass(frozen=True)
class OpInfo:
    """A custom operator with at least one argument of the class's type.

    ``qualname`` is ``ns::op`` (overload name appended as ``ns::op.overload`` when not the default);
    ``schema`` its ``torch.FunctionSchema``; ``class_args`` the positions of the arguments typed as the class.
    """

    qualname: str
    schema: torch.FunctionSchema
    class_args: tuple[int, ...]

    @property
    def short_name(self) -> str:
        return self.qualname.split("::", 1)[1]

    def resolve(self) -> torch_api.OpOverload:
        """The ``torch.ops`` overload packet member for this schema."""
        ns, rest = self.qualname.split("::", 1)
        name, _, overload = rest.partition(".")
        packet = getattr(getattr(torch.ops, ns), name)
        return getattr(packet, overload or "default")


@dataclasses.dataclass(frozen=True)
class ClassInfo:
    """Everything torch knows about one TorchBind class, without making an instance.

    ``qualname`` is the user-facing ``ns::Cls``; ``script_qualname`` the TorchScript name
    ``__torch__.torch.classes.ns.Cls``. ``methods`` maps each C++ method name to its schema (the constructor and
    the pickling/flatten protocol methods included); ``constructors`` holds the ``__init__`` overloads;
    ``static_methods`` the methods bound with ``def_static`` (schemas without ``self``; called on the class, so a
    fake class need not define them, but when it does they must match).
    """

    namespace: str
    name: str
    methods: dict[str, torch.FunctionSchema]
    constructors: tuple[torch.FunctionSchema, ...]
    ops: tuple[OpInfo, ...]
    static_methods: dict[str, torch.FunctionSchema] = dataclasses.field(default_factory=dict)

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.name}"

    @property
    def script_qualname(self) -> str:
        return f"{CLASS_PREFIX}{self.namespace}.{self.name}"

    @property
    def test_name(self) -> str:
        """The collector name used in test ids: ``torchbind[ns.Cls]`` (:func:`conformance.core.qualname.node_id`)."""
        return node_id(self.qualname, "").removesuffix("::")

    @property
    def fake_class(self) -> type | None:
        """The fake class currently registered for this class (looked up live: tests may swap it)."""
        return fake_class_registry.find_fake_class(self.script_qualname)

    @property
    def user_methods(self) -> list[str]:
        """C++ methods a fake class is expected to implement (protocol methods excluded), in C++ order."""
        return [m for m in self.methods if m not in ProtocolMethods]

    @property
    def has_flatten(self) -> bool:
        return "__obj_flatten__" in self.methods

    @property
    def pickles(self) -> bool:
        """True when the class was bound with ``def_pickle`` (``__getstate__`` and ``__setstate__``)."""
        return "__getstate__" in self.methods and "__setstate__" in self.methods

    @property
    def script_class(self):
        """``torch.classes.ns.Cls``, the callable that constructs instances."""
        return getattr(getattr(torch.classes, self.namespace), self.name)


def _self_class(schema: torch.FunctionSchema) -> str | None:
    args = schema.arguments
    if not args:
        return None
    t = args[0].type
    if t.kind() == "ClassType" and t.qualified_name().startswith(CLASS_PREFIX):
        return t.qualified_name()[len(CLASS_PREFIX):]
    return None


def class_schemas() -> dict[str, dict[str, list[torch.FunctionSchema]]]:
    """``{"ns.Cls": {method: [schema, ...]}}`` for every loaded TorchBind class, in registration order."""
    out: dict[str, dict[str, list[torch.FunctionSchema]]] = defaultdict(lambda: defaultdict(list))
    for schema in torch_api.custom_class_schemas():
        owner = _self_class(schema)
        if owner is not None:
            out[owner][schema.name].append(schema)
    return out


def registered_classes(namespace: str | None = None) -> list[str]:
    """Qualified names ``ns::Cls`` of loaded TorchBind classes (in ``namespace`` only, if given), sorted."""
    names = []
    for dotted in class_schemas():
        ns, _, cls = dotted.rpartition(".")
        if namespace is None or ns == namespace:
            names.append(f"{ns}::{cls}")
    return sorted(names)


def expand_torchbind_selector(selector: str) -> list[str]:
    """Expand a ``--torchbind-class`` value naming TorchBind classes: ``ns::Cls``, or an ``fnmatch`` pattern on
    either part (``ns::*``, ``*::*``, ``*::Cls``, ``quantized::[LE]*``; :func:`fnmatch.fnmatchcase`, so case
    matters). Returns the matching ``ns::Cls`` names, sorted (both kinds: :func:`conformance.kinds.expand_selector`).

    Raises :class:`~conformance.core.results.SelectorError` when the selector is malformed or matches no loaded
    class; the message lists the classes that do exist in the namespaces it names (or the namespaces that exist,
    when it names none).
    """
    parsed = split_qualname(selector)
    if parsed is None:
        raise SelectorError(f"--torchbind-class={selector!r}: expected NAMESPACE::CLASS or NAMESPACE::* "
                            "(a TorchBind class; any fnmatch pattern on either part: *::*, *::CLASS), or module.QualName or a pattern on such "
                            "names (a Python custom class)")
    ns_pattern, pattern = parsed
    everything = registered_classes()
    in_ns = [q for q in everything if fnmatch.fnmatchcase(q.split("::")[0], ns_pattern)]
    matches = [q for q in in_ns if fnmatch.fnmatchcase(q.split("::")[1], pattern)]
    if matches:
        return matches
    if in_ns:
        namespaces = sorted({q.split("::")[0] for q in in_ns})
        which = (f"namespace {namespaces[0]!r}" if len(namespaces) == 1 else
                 f"the namespaces matching {ns_pattern!r}")
        raise SelectorError(
            f"--torchbind-class={selector!r}: no TorchBind class {selector} is registered. "
            f"Classes in {which}: {', '.join(in_ns)}"
        )
    namespaces = sorted({q.split("::")[0] for q in everything})
    raise SelectorError(
        f"--torchbind-class={selector!r}: no TorchBind classes are registered in namespace {ns_pattern!r} "
        f"(is its library loaded? use --torchbind-load=path/to/lib.so). Loaded namespaces: "
        f"{', '.join(namespaces) or '(none)'}"
    )


def _ops_taking(script_qualname: str) -> tuple[OpInfo, ...]:
    found = []
    for schema in torch_api.all_schemas():
        positions = tuple(
            i for i, a in enumerate(schema.arguments)
            if a.type.kind() == "ClassType" and a.type.qualified_name() == script_qualname
        )
        if positions:
            qual = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
            found.append(OpInfo(qual, schema, positions))
    return tuple(sorted(found, key=lambda o: o.qualname))


def has_python_fake(qualname: str) -> bool:
    """Whether ``torch.library.register_fake`` registered a Python fake for the op ``qualname`` (``ns::op``, an
    overload suffix ``ns::op.overload`` is ignored: fakes are registered per op). Only such an op can run on a
    fakified object (a ``FakeScriptObject``); a C++ Meta kernel cannot accept one. Raises nothing."""
    entry = simple_registry.singleton.find(qualname.split(".")[0])
    return entry.fake_impl.kernel is not None


def runs_on_fakes(op: OpInfo) -> bool:
    """Whether the op can run on a fakified object (a ``FakeScriptObject``): it has a Python fake
    (``torch.library.register_fake``) or a Python Meta kernel (``OpOverload.py_impl(DispatchKey.Meta)``). A C++
    Meta kernel cannot accept one, so without either every program that calls the op on a traced object fails,
    whatever its inputs. Raises nothing."""
    if has_python_fake(op.qualname):
        return True
    try:
        return torch_api.DispatchKey.Meta in op.resolve().py_kernels
    except Exception:  # noqa: BLE001 - unresolvable op
        return False


def discover(qualname: str) -> ClassInfo:
    """Collect the :class:`ClassInfo` of ``ns::Cls``. Raises :class:`~conformance.core.results.UnknownClassError`
    (a :class:`SelectorError` and a ``KeyError``) if it is not loaded, listing what is."""
    ns, name = split_qualname(qualname) or ("", qualname)
    schemas = class_schemas().get(f"{ns}.{name}") if ns else None
    if schemas is None:
        try:
            expand_torchbind_selector(qualname)  # raises with the listing
        except SelectorError as exc:
            raise UnknownClassError(str(exc)) from None
        raise UnknownClassError(f"no TorchBind class {qualname} is registered")
    methods = {m: overloads[0] for m, overloads in schemas.items()}
    script_class = getattr(getattr(torch.classes, ns), name)
    instance_methods = _instance_method_names(script_class)
    methods = _with_untyped_self(methods, instance_methods)
    info = ClassInfo(
        namespace=ns,
        name=name,
        methods=methods,
        constructors=tuple(schemas.get("__init__", ())),
        ops=_ops_taking(f"{CLASS_PREFIX}{ns}.{name}"),
        static_methods=_static_methods(script_class, instance_methods),
    )
    return info


def _instance_method_names(script_class) -> list[str]:
    """The names of the class's methods (not its ``def_static`` ones), in binding order, from its TorchScript
    ``ClassType`` (``torch.jit.annotations.ann_to_type`` of ``torch.classes.ns.Cls``); empty if torch cannot say."""
    try:
        from ..engine.torch_api import fake_range
        from torch.jit.annotations import ann_to_type

        return list(ann_to_type(script_class, fake_range()).method_names())
    except Exception:  # noqa: BLE001 - older torch: the schemas alone decide
        return []


def _with_untyped_self(methods: dict[str, torch.FunctionSchema], names: list[str]
                       ) -> dict[str, torch.FunctionSchema]:
    """``methods`` plus the methods bound with an untyped ``self`` (a lambda taking ``const c10::IValue& self``:
    schema ``__eq__(Any _0, Any _1) -> bool``, which names no class): a name the class's ``ClassType`` lists
    whose only schema has an ``Any`` first argument belongs to this class. Ordered as the class binds them."""
    missing = [n for n in names if n not in methods]
    if not missing:
        return methods
    untyped: dict[str, torch.FunctionSchema] = {}
    for schema in torch_api.custom_class_schemas():
        args = schema.arguments
        if schema.name in missing and schema.name not in untyped and args and args[0].type.kind() == "AnyType":
            untyped[schema.name] = schema
    found = {**methods, **untyped}
    order = {n: i for i, n in enumerate(names)}
    return dict(sorted(found.items(), key=lambda kv: order.get(kv[0], len(order))))


def _static_methods(script_class, instance_methods: list[str] = ()) -> dict[str, torch.FunctionSchema]:
    """The methods bound with ``def_static``: their schemas have no ``self`` argument, so they name no class;
    a schema belongs to this class when the class resolves its name to a ``torch.ScriptClassFunction``
    (``torch.classes.ns.Cls.<name>``, which raises ``AttributeError`` for any other name; a dunder such as
    ``__eq__`` resolves to Python's own) and the name is not one of its instance methods (an untyped-self method's
    schema has no class either). When several classes bind a static method of the same name, the first such
    schema is taken."""
    out: dict[str, torch.FunctionSchema] = {}
    for schema in torch_api.custom_class_schemas():
        if _self_class(schema) is not None or schema.name in out or schema.name in instance_methods:
            continue
        try:
            found = getattr(script_class, schema.name)
        except (AttributeError, RuntimeError):
            continue
        if isinstance(found, torch.ScriptClassFunction):
            out[schema.name] = schema
    return out
