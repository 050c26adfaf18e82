"""Known torch limitations: the one table that turns a failing matrix cell into "unsupported".

A cell is still run. It is *unsupported* only when an entry applies to its backend and scenario and the error it
raised — or, for entries about wrong results, its first difference from eager — matches the entry's ``error``
pattern; any other failure is a real ✗, and a cell an entry covers that
passes is a pass (the limitation no longer holds there). Entries name where torch states or raises the limit.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["Limitation", "LIMITATIONS", "find_limitation"]


@dataclasses.dataclass(frozen=True)
class Limitation:
    """``backends``: backend names it applies to; ``placement``: ``"input"`` (a TorchBind object is an input of
    the program: the scenario's object, or another object passed to a method), ``"attr"`` (the object is a module
    attribute) or ``None`` (any);
    ``returns``: schema return types (e.g. ``("str",)``; ``"non-tensor"`` stands for any type without a
    Tensor in it, e.g. ``int``, ``str[]``, ``(int, float)``), one of which some call of the scenario must return,
    or ``None``;
    ``dunder``: the scenario calls a dunder method by name (``obj.__eq__(other)``, not ``obj == other``);
    ``error``: regex over ``"ExceptionType: message"``; ``reason``: the report's footnote; ``source``: evidence;
    ``kind``: the kind of class (``"torchbind"``, or ``"custom"`` for a Python custom class, whose scenarios carry
    ``class_kind``); ``class_kind``: ``"constant"`` or ``"symbolic"`` for a custom-class entry about one of them."""

    key: str
    backends: frozenset[str]
    error: str
    reason: str
    source: str
    placement: str | None = None
    returns: tuple[str, ...] | None = None
    dunder: bool = False
    kind: str = "torchbind"
    class_kind: str | None = None

    def applies(self, backend: str, scenario) -> bool:
        if backend not in self.backends or getattr(scenario, "kind", "torchbind") != self.kind:
            return False
        if self.class_kind is not None and getattr(scenario, "class_kind", None) != self.class_kind:
            return False
        if self.dunder and not any(call.call.callee.name.startswith("__") and not call.call.callee.operator
                                   for call in scenario.calls):
            return False
        if self.placement == "input" and not scenario.has_object_input:
            return False
        if self.placement == "attr" and scenario.placement != "attr":
            return False
        if self.returns is not None and not any(_returns_match(call.returns, self.returns)
                                                for call in scenario.calls):
            return False
        return True


_NON_TENSOR = ("non-tensor",)

def _returns_match(returned: str, wanted: tuple[str, ...]) -> bool:
    if returned in wanted:
        return True
    return "non-tensor" in wanted and "Tensor" not in returned and returned != "NoneType"


LIMITATIONS: tuple[Limitation, ...] = (
    # ----- Python custom classes (opaque objects): conformance.matrix.custom ---------------------------------------
    Limitation(
        key="custom-aoti-object",
        kind="custom",
        backends=frozenset({"aoti"}),
        error=r"Unsupported input type as_\w+ for extern kernel",
        reason="AOTInductor cannot pass a Python custom class object to a custom op (its proxy executor has no "
               "input type for it)",
        source="torch/csrc/inductor/aoti_torch/oss_proxy_executor.cpp: 'Unsupported input type ... for extern "
               "kernel' (as_custom_obj for a constant class, as_none for a symbolic one; torch 2.13, 2.14.1)",
    ),
    Limitation(
        key="custom-saveload-object-input",
        kind="custom",
        backends=frozenset({"export_saveload"}),
        error=r"SerializeError: Failed serializing node",
        reason="torch.export.save cannot serialize a program that takes a Python custom class object as an input",
        source="torch/_export/serde/serialize.py serialize_graph: 'Failed serializing node' for the object's "
               "placeholder (torch 2.13, 2.14.1)",
    ),
    Limitation(
        key="custom-export-weakref",
        kind="custom",
        backends=frozenset({"export", "export_strict", "export_saveload", "aoti"}),
        error=r"TypeError: cannot create weak reference to",
        reason="torch.export keeps a weak reference to each custom class object it traces, so a class with "
               "__slots__ and no '__weakref__' slot cannot be exported (adding '__weakref__' to __slots__ lifts it)",
        source="torch/fx/experimental/proxy_tensor.py fetch_object_proxy / get_proxy_slot: the tracer's table of "
               "objects is keyed by weak reference (torch 2.13, 2.14.1)",
    ),
    Limitation(
        key="custom-export-constant-object",
        kind="custom",
        class_kind="constant",
        backends=frozenset({"export", "export_strict"}),
        error=r"^(unequal|changed): obj = ",
        reason="torch.export bakes a constant custom class object into the program (the op takes the traced "
               "object as a constant, the input is unused, and nothing checks it at run time): a program exported "
               "with one object returns that object's result for any other",
        source="torch.export specialises constant (value) opaque objects like other non-tensor inputs "
               "(torch/_library/opaque_object.py, 'value' types are constants); ExportedProgram.module() has no "
               "input check for them (torch 2.13, 2.14.1)",
    ),
    Limitation(
        key="burned-in-constants",
        backends=frozenset({"export", "export_strict", "export_saveload", "aoti"}),
        returns=_NON_TENSOR,
        # The evidence: run 1's output equals eager's on an object in the traced state (conformance.matrix.explain).
        error=r"^run 1 output\S* \(.*\): eager .*: it stayed at the traced object's value|"
              r"Expect returned int value to match the serialized int value",
        reason="non-tensor results of methods (int, float, str, ...) are burned into an exported program as "
               "constants, so a run on an object in another state returns the traced value",
        source="PT2 custom-class notes, 'Constant burning-in graph': methods that return non-tensors 'will be "
               "treated as constants and burned in the graph (consistent with how export deals with constant "
               "inputs)'",
    ),
    Limitation(
        key="non-tensor-op-result",
        backends=frozenset({"eager", "aot_eager", "inductor", "export_strict"}),
        returns=_NON_TENSOR,
        error=r"torch\.\* op returned non-Tensor",
        reason="dynamo cannot keep a call returning a str (or a custom op returning a non-tensor) in the graph: "
               "'torch.* op returned non-Tensor' is a graph break, fatal under fullgraph=True",
        source="torch/_dynamo/variables/torch.py graph break 'torch.* op returned non-Tensor'",
    ),
    Limitation(
        key="str-result-export",
        backends=frozenset({"export", "export_saveload", "aoti"}),
        returns=("str",),
        error=r"only these constant dtypes are supported to be returned from torchbind methods",
        reason="export supports only some constant types as TorchBind method results; str is not one of them",
        source="torch/_higher_order_ops/torchbind.py: 'Currently, only these constant dtypes are supported to be "
               "returned from torchbind methods'",
    ),
    Limitation(
        key="strict-export-real-object",
        backends=frozenset({"export_strict"}),
        error=r"^tracing changed the real object used to trace",
        reason="strict export traces TorchBind method calls on the real ScriptObject, so tracing mutates it",
        source="torch/_higher_order_ops/torchbind.py warns 'Tracing torchbind method ... with real ScriptObject. "
               "This may cause the original object being mutated'; the seed's Coverage Matrix marks strict "
               "export N",
    ),
    Limitation(
        key="strict-export-attribute",
        backends=frozenset({"export_strict"}),
        placement="attr",
        error=r"FakeScriptObject should only exist during tracing",
        reason="strict export keeps the FakeScriptObject it traced with as the program's constant for an "
               "attribute object, so the exported program cannot run",
        source="torch.export strict mode (ep.constants holds a FakeScriptObject for a TorchBind attribute)",
    ),
    Limitation(
        key="aoti-object-input",
        backends=frozenset({"aoti"}),
        placement="input",
        error=r"TorchBind objects found in inputs",
        reason="AOTInductor accepts TorchBind objects only as module attributes, not as inputs",
        source="torch._inductor (aoti_compile_and_package): 'TorchBind object inputs are not supported in "
               "AOTInductor. TorchBind objects can only be attributes.'",
    ),
    Limitation(
        key="explicit-dunder-call",
        backends=frozenset({"eager", "aot_eager", "inductor", "export", "export_strict", "export_saveload"}),
        dunder=True,
        error=r"Unable to cast Python instance of type <class 'method'>|'NoneType' object has no attribute 'returns'",
        reason="a dunder method called by name (obj.__eq__(other)) cannot be traced: on a ScriptObject the name "
               "resolves to Python's own method, not the bound C++ one; the operator form (obj == other, its own "
               "operator.* row) works",
        source="torch/_higher_order_ops/torchbind.py call_torchbind_impl: getattr(obj, method) on a "
               "torch.ScriptObject returns the Python-level magic method for a dunder name, which has no schema",
    ),
    Limitation(
        key="inductor-reruns-fake-method",
        backends=frozenset({"inductor"}),
        error=r"^InductorError: .*While executing %with_effects .*call_torchbind",
        reason="inductor runs a TorchBind method's fake a second time on the same FakeScriptObject while lowering "
               "(fake tensor propagation with the realized strides), so a state-changing fake method is applied "
               "twice and can meet a state eager never reaches (e.g. an empty cache): a torch behaviour, not the "
               "fake's fault",
        source="torch/_inductor/ir.py FallbackKernel.process_kernel: 're-run fake tensor propagation with the "
               "realized strides' on the effectful call_torchbind node (with_effects), whose FakeScriptObject "
               "tracing already mutated",
    ),
    Limitation(
        key="saveload-object-input",
        backends=frozenset({"export_saveload"}),
        placement="input",
        error=r"error when deserializing the saved file",
        reason="torch.export.load cannot deserialize a program whose example inputs hold a ScriptObject "
               "(weights_only unpickling rejects torch.ScriptObject)",
        source="torch/_export/serde/serialize.py deserialize_torch_artifact: 'Unsupported global: GLOBAL "
               "torch.ScriptObject was not an allowed global by default'",
    ),
)


def find_limitation(backend: str, scenario, error_text: str) -> Limitation | None:
    """The first entry that applies to this cell and whose ``error`` matches ``error_text``, else ``None``."""
    for entry in LIMITATIONS:
        if entry.applies(backend, scenario) and re.search(entry.error, error_text, re.S):
            return entry
    return None
