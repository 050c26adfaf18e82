"""Every private torch API the plugin touches, in one table: the next torch release breaks here, in one place.

The plugin's job is to check what torch itself does with custom classes, so it reads torch's own machinery where
no public API says it: fakification (``torch._library.fake_class_registry``), the registries of custom ops, fakes
and opaque objects, TorchScript types and schemas (``torch._C``), dynamo's caches and guards, AOTInductor's
entry points, the fake-tensor checks ``torch.library.opcheck`` runs. Each name below is resolved lazily, on first
use (``from conformance.engine.torch_api import maybe_to_fake_obj`` imports ``torch._library.fake_class_registry``
then, not when this module is imported), from the module and attribute its :data:`PRIVATE` entry gives.

Checked on torch 2.13.0, 2.14.1 and 2.15.0 (:data:`CHECKED_ON`; ``tests/unit/engine/test_torch_api.py`` resolves
every entry on the running torch, and ``tests/unit/test_layout.py`` fails any other module of the plugin that
names a ``torch._*`` module or attribute in code; source text the plugin writes into reproducers may, since it
runs on the adopter's torch, not here). Private *attributes* of torch's objects (``op._schema``,
``opdef._init_fn``) stay at their call sites, each beside the public object it is read from.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["CHECKED_ON", "PRIVATE", "resolve"]

#: The torch releases every entry of :data:`PRIVATE` was resolved on.
CHECKED_ON = ("2.13.0", "2.14.1", "2.15.0")

#: name -> (module, attribute; ``None``: the module itself). One line per private API the plugin uses.
PRIVATE: dict[str, tuple[str, str | None]] = {
    # TorchScript types and schemas; the dispatcher
    "JitType": ("torch._C", "Type"),
    "JitNoneType": ("torch._C", "NoneType"),
    "JitTupleType": ("torch._C", "TupleType"),
    "ScriptMethod": ("torch._C", "ScriptMethod"),
    "DispatchKey": ("torch._C", "DispatchKey"),
    "SchemaInfo": ("torch._C", "_SchemaInfo"),
    "SchemaArgument": ("torch._C", "_SchemaArgument"),
    "SchemaArgType": ("torch._C", "_SchemaArgType"),
    "all_schemas": ("torch._C", "_jit_get_all_schemas"),
    "custom_class_schemas": ("torch._C", "_jit_get_custom_class_schemas"),
    "schemas_for_operator": ("torch._C", "_jit_get_schemas_for_operator"),
    "try_infer_type": ("torch._C", "_jit_try_infer_type"),
    "dispatch_has_kernel_for_dispatch_key": ("torch._C", "_dispatch_has_kernel_for_dispatch_key"),
    "dispatch_pystub": ("torch._C", "_dispatch_pystub"),
    "fake_range": ("torch._jit_internal", "fake_range"),
    "OpOverload": ("torch._ops", "OpOverload"),
    "TorchBindOpOverload": ("torch._ops", "TorchBindOpOverload"),
    # fake classes, fakification, custom ops, fakes, opaque objects
    "fake_class_registry": ("torch._library.fake_class_registry", None),
    "FakeScriptObject": ("torch._library.fake_class_registry", "FakeScriptObject"),
    "maybe_to_fake_obj": ("torch._library.fake_class_registry", "maybe_to_fake_obj"),
    "find_fake_class": ("torch._library.fake_class_registry", "find_fake_class"),
    "global_fake_class_registry": ("torch._library.fake_class_registry", "global_fake_class_registry"),
    "check_valid_flat_script_obj": ("torch._library.fake_class_registry", "_check_valid_flat_script_obj"),
    "custom_ops": ("torch._library.custom_ops", None),
    "OPDEFS": ("torch._library.custom_ops", "OPDEFS"),
    "simple_registry": ("torch._library.simple_registry", None),
    "opaque_object": ("torch._library.opaque_object", None),
    "get_opaque_obj_repr": ("torch._library.opaque_object", "get_opaque_obj_repr"),
    "call_torchbind": ("torch._higher_order_ops.torchbind", "call_torchbind"),
    "call_torchbind_fake": ("torch._higher_order_ops.torchbind", "call_torchbind_fake"),
    "tensor_storage": ("torch._higher_order_ops.utils", "_tensor_storage"),
    # fake tensors and torch.library.opcheck's fake-tensor comparison
    "fake_tensor": ("torch._subclasses.fake_tensor", None),
    "FakeTensor": ("torch._subclasses.fake_tensor", "FakeTensor"),
    "FakeTensorMode": ("torch._subclasses.fake_tensor", "FakeTensorMode"),
    "check_alias_info": ("torch._subclasses.fake_utils", "_check_alias_info"),
    "check_fake_real_tensors": ("torch._subclasses.fake_utils", "_check_fake_real_tensors"),
    "check_significant_strides": ("torch._prims_common", "check_significant_strides"),
    # dynamo, inductor, AOTInductor
    "dynamo": ("torch._dynamo", None),
    "dynamo_config": ("torch._dynamo.config", None),
    "dynamo_reset": ("torch._dynamo", "reset"),
    "maybe_mark_dynamic": ("torch._dynamo", "maybe_mark_dynamic"),
    "CompileCounter": ("torch._dynamo.testing", "CompileCounter"),
    "CompileCounterWithBackend": ("torch._dynamo.testing", "CompileCounterWithBackend"),
    "guard_failures": ("torch._dynamo.utils", "guard_failures"),
    "inductor_cache_dir": ("torch._inductor.runtime.cache_dir_utils", "cache_dir"),
    "aoti_compile_and_package": ("torch._inductor", "aoti_compile_and_package"),
    "aoti_load_package": ("torch._inductor", "aoti_load_package"),
}


def resolve(name: str) -> Any:
    """The object :data:`PRIVATE` names ``name`` (its module imported first). Raises ``AttributeError`` naming
    the entry and the running torch when the module or the attribute is gone (a torch release moved it)."""
    try:
        module_name, attribute = PRIVATE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    try:
        module = importlib.import_module(module_name)
        return module if attribute is None else getattr(module, attribute)
    except (ImportError, AttributeError) as exc:
        import torch

        where = module_name + ("" if attribute is None else f".{attribute}")
        raise AttributeError(f"torch {torch.__version__} has no {where} (conformance.engine.torch_api.{name}, "
                             f"checked on torch {', '.join(CHECKED_ON)}): {exc}") from exc


def __getattr__(name: str) -> Any:  # PEP 562: ``from conformance.engine.torch_api import X`` resolves X lazily
    if name.startswith("__"):
        raise AttributeError(name)
    return resolve(name)
