"""Known torch limitations: the one table that turns a failing matrix cell into "unsupported".

Each entry (:class:`~conformance.matrix.limitation_evidence.Limitation`) names where torch states or raises the
limit and the evidence a cell's own failure must show (matched as
:mod:`conformance.matrix.limitation_evidence` describes); the footnote of an unsupported cell says what was
observed for this class (:func:`observation`).
"""

from __future__ import annotations

from .aoti_evidence import fake_kernel_got_none, registered_fake_got_none
from .dynamic_evidence import automatic_dynamic_confirmed
from .autograd_evidence import autograd_falls_through, method_autograd_not_implemented
from .limitation_evidence import Limitation, explicit_dunders, failure_chain, raised_at
from ..engine import torch_api
from .explain import STAYED, UNCHANGED

__all__ = ["Limitation", "LIMITATIONS", "find_limitation", "observation", "raised_at", "failure_chain"]


def _dunder_is_python_method(scenario) -> str | None:
    """The evidence ``explicit-dunder-call`` rests on, read off the real object: ``getattr(obj, name)`` for the
    dunder methods the scenario calls by name gives Python's own method of ``torch.ScriptObject``, not the
    ``ScriptMethod`` the class binds, which is what ``call_torchbind`` calls. ``None`` when it does not hold."""
    import torch

    obj = scenario.first.build()
    seen = []
    for name in explicit_dunders(scenario):
        found = getattr(obj, name, None)
        if found is None or isinstance(found, torch_api.ScriptMethod):
            return None
        operator = "operator." + name.strip("_")
        seen.append(f"getattr(obj, {name!r}) on the real object is a Python {type(found).__name__} of "
                    f"torch.ScriptObject, not the bound ScriptMethod; the operator form is row {operator}, not tried "
                    "by this cell")
    return "; ".join(seen) or None


_NON_TENSOR = ("non-tensor",)
#: Where a loaded AOTInductor package is called (torch 2.13 and 2.14: pt2_archive; earlier: inductor's package).
_AOTI_RUNNER = ("export/pt2_archive/_package.py:__call__", "_inductor/package/package.py:__call__")


_CUSTOM_AOTI_REASON = ("AOTInductor cannot pass a Python custom class object to a custom op (its proxy executor has no "
                       "input type for it, and while compiling the op's fake kernel is given None for it)")
_CUSTOM_AOTI_SOURCE = ("torch/csrc/inductor/aoti_torch/oss_proxy_executor.cpp: 'Unsupported input type ... for extern "
                       "kernel' (as_custom_obj for a constant class, as_none for a symbolic one); "
                       "torch/_inductor/compile_fx.py _aoti_flatten_inputs: 'Replace non-tensor (constant) inputs with "
                       "Nones' (torch 2.13, 2.14.1)")

def _mutated_after_hand_off(scenario) -> str | None:
    """The evidence ``aliasing-mutation`` rests on besides torch's assert: the program changes, in place, a tensor
    it handed the object (the ``mutated`` row, :attr:`~conformance.matrix.torchbind.scenarios.Scenario.mutated`)."""
    if not getattr(scenario, "mutated", False):
        return None
    return "the program changes in place a tensor it handed the object (the mutated row)"


_ALIASING_REASON = ("AOTAutograd cannot functionalize a TorchBind method: its schema says nothing of what the method "
                    "keeps or returns aliased, so a tensor changed in place after it was handed to the object is not "
                    "safe: the program either fails AOTAutograd's functional-graph assert (the change is copied back "
                    "onto a method's result) or leaves the object holding the values from before the change")
_ALIASING_SOURCE = ("the TorchBind design doc's Known Limitations, \"Aliasing and mutation\" (tq.push(a); a.sin_(): "
                    "'the mutation to the content of tq is not showing up in the graph'); "
                    "torch/_functorch/_aot_autograd/functional_utils.py assert_functional_graph (torch 2.13, 2.15.0)")

LIMITATIONS: tuple[Limitation, ...] = (
    Limitation(
        key="aliasing-mutation",
        backends=frozenset({"aot_eager", "inductor", "autocast"}),
        raises=("AssertionError",),
        sites=("_functorch/_aot_autograd/functional_utils.py:assert_functional_graph",),
        confirm=_mutated_after_hand_off,
        reason=_ALIASING_REASON,
        source=_ALIASING_SOURCE,
        # The silent form, the seed's own example: what the object holds is what eager gives without the change.
        also=(Limitation(
            key="aliasing-mutation", backends=frozenset({"aot_eager", "inductor", "autocast"}),
            difference=rf"^run \d (output|object state)[^;]*;.*: {UNCHANGED}",
            observed="the backend's value is what eager gives without the program's in-place changes",
            confirm=_mutated_after_hand_off, reason=_ALIASING_REASON, source=_ALIASING_SOURCE),),
    ),
    Limitation(
        key="identity-operator",
        backends=frozenset({"export", "export_strict", "export_saveload", "aoti"}),
        difference=rf"^run 1 output\[\d+\] \(\S+ \+ 1 if r\d+ is \S+ else .* compared with is to .*: {STAYED}",
        observed="on an object in another state, an `is` comparison of a returned tensor kept the traced object's answer",
        reason="a tensor a method returns cannot be compared with is to one held by the object: tracing answers is "
               "for the tensors it traces with, and export keeps that answer in the program (Python control flow is "
               "specialised at trace time), so a run on an object in another state takes the traced branch",
        source="the TorchBind design doc's Known Limitations, '\"is\" operator': 'we should not rely on comparing a "
               "tensor with a tensor contained inside a script object with is' (torch 2.13)",
    ),
    # ----- Python custom classes (opaque objects): conformance.matrix.custom -----------------------------------------
    Limitation(
        key="custom-aoti-object",
        kind="custom",
        backends=frozenset({"aoti"}),
        raises=("RuntimeError",),
        sites=(*_AOTI_RUNNER, "_inductor/package/package.py:load_package"),  # loading builds the proxy executor
        cpp_check=r"Unsupported input type as_\w+ for extern kernel",
        reason=_CUSTOM_AOTI_REASON,
        source=_CUSTOM_AOTI_SOURCE,
        # While compiling, AOTInductor runs the op's fake kernel with None for the object: a fake that reads a
        # member of a symbolic object (a USE_REAL one, legal under torch.compile and export) raises there instead.
        also=(Limitation(
            key="custom-aoti-object", kind="custom", backends=frozenset({"aoti"}),
            raises=("Exception",), sites=("_library/custom_ops.py:fake_impl",),
            via=("_inductor/compile_fx.py:compile_fx_aot",), received=fake_kernel_got_none,
            reason=_CUSTOM_AOTI_REASON, source=_CUSTOM_AOTI_SOURCE),
            # The same for an op defined with Library.define and a register_fake kernel: the adopter's kernel is
            # called through torch/library.py's wrapper; torch's own _dtensor::mesh_get_process_group's fake (it
            # reads the mesh it is given) is the innermost torch frame itself.
            Limitation(
            key="custom-aoti-object", kind="custom", backends=frozenset({"aoti"}),
            raises=("Exception",), sites=("library.py:inner",
                                          "distributed/tensor/_collective_utils.py:_mesh_get_process_group_fake"),
            via=("_inductor/compile_fx.py:compile_fx_aot",), received=registered_fake_got_none,
            reason=_CUSTOM_AOTI_REASON, source=_CUSTOM_AOTI_SOURCE),),
    ),
    Limitation(
        key="custom-saveload-object-input",
        kind="custom",
        backends=frozenset({"export_saveload"}),
        raises=("SerializeError",),
        sites=("_export/serde/serialize.py:serialize_graph", "_export/serde/serialize.py:serialize_input",
               "_export/serde/serialize.py:serialize_inputs"),
        reason="torch.export.save cannot serialize a program that takes a Python custom class object as an input",
        source="torch/_export/serde/serialize.py serialize_graph: 'Failed serializing node' for the object's "
               "placeholder (torch 2.13, 2.14.1)",
    ),
    Limitation(
        key="custom-export-weakref",
        kind="custom",
        backends=frozenset({"export", "export_strict", "export_saveload", "aoti"}),
        raises=("TypeError",),
        # Raised where the tracer's weak-keyed table takes a weak reference to the object (torch/utils/weak.py).
        sites=tuple(f"utils/weak.py:{f}" for f in ("get", "__getitem__", "__setitem__", "__contains__",
                                                   "setdefault", "__init__")),
        via=("fx/experimental/proxy_tensor.py:get_proxy_slot", "fx/experimental/proxy_tensor.py:set_proxy_slot",
             "fx/experimental/proxy_tensor.py:fetch_object_proxy"),
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
        difference=r"^(another state|changed): obj = ",
        observed="the program gave the traced object's result for another object",
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
        # The evidence: run 1's output (or a further object's, matrix.torchbind.sweep) equals eager's on an object
        # in the traced state (matrix.torchbind.explain).
        # (On run 1, eager's value must be a non-tensor: a list of tensors whose length export fixed is not this.)
        difference=(r"^(run 1 output\S* \(.*?\): eager (?![\[(]*Tensor\()|the example object .*: .*eager )"
                    r".*: it stayed at the traced object's value"),
        observed="an object in another state returned the traced object's value",
        # AOTInductor's runtime checks the burned-in int against what the method returns now (a C++ error).
        raises=("RuntimeError",),
        sites=_AOTI_RUNNER,
        cpp_check=r"Expect returned int value to match the serialized int value",
        reason="non-tensor results of methods (int, float, str, ...) are burned into an exported program as "
               "constants, so a run on an object in another state returns the traced value",
        source="PT2 custom-class notes, 'Constant burning-in graph': methods that return non-tensors 'will be "
               "treated as constants and burned in the graph (consistent with how export deals with constant "
               "inputs)'",
    ),
    Limitation(
        key="automatic-dynamic-stale-result",
        backends=frozenset({"eager", "aot_eager", "inductor", "autocast"}),
        returns=_NON_TENSOR,
        # The evidence: on a third object (the sweep), the program gave what eager gave on run 0's or run 1's
        # object, though the objects' flattened states all differ (conformance.matrix.torchbind.sweep).
        difference=r"^the example object .*: it stayed at (an earlier object's result|the traced object's value)",
        observed="on a further object, the program returned an earlier object's result",
        confirm=automatic_dynamic_confirmed,
        reason="after recompiling for a second object, torch.compile marks the object's flattened ints dynamic "
               "(automatic dynamic shapes: the guard keeps their type only) but a method's non-tensor result "
               "computed from them stays the value traced for that second object, so every later object gets it; "
               "torch._dynamo.config.automatic_dynamic_shapes = False (or a guard the class can keep static) "
               "avoids it",
        source="torch/_dynamo/guards.py: the second frame of a program over a TorchBind object guards "
               "__obj_flatten__()[i][1] by TYPE_MATCH only (automatic_dynamic_shapes, torch/_dynamo/config.py); "
               "observed on torch 2.13, 2.14.1 and 2.15.0 (tests/unit/matrix/test_matrix_sweep.py)",
    ),
    Limitation(
        key="non-tensor-op-result",
        backends=frozenset({"eager", "aot_eager", "inductor", "export_strict", "autocast"}),
        returns=_NON_TENSOR,
        raises=("Unsupported",),
        graph_break="torch.* op returned non-Tensor",
        reason="dynamo cannot keep a call returning a str (or a custom op returning a non-tensor) in the graph: "
               "'torch.* op returned non-Tensor' is a graph break, fatal under fullgraph=True",
        source="torch/_dynamo/variables/builder.py wrap_fx_proxy_cls: graph break 'torch.* op returned non-Tensor' "
               "(GB0208 in torch/_dynamo/graph_break_registry.json)",
    ),
    Limitation(
        key="str-result-export",
        backends=frozenset({"export", "export_saveload", "aoti"}),
        returns=("str",),
        raises=("AssertionError",),
        sites=("_higher_order_ops/torchbind.py:inner",),
        reason="export supports only some constant types as TorchBind method results; str is not one of them",
        source="torch/_higher_order_ops/torchbind.py: 'Currently, only these constant dtypes are supported to be "
               "returned from torchbind methods'",
    ),
    Limitation(
        key="strict-export-real-object",
        backends=frozenset({"export_strict"}),
        difference=r"^tracing changed the real object used to trace",
        observed="tracing changed the real object's state",
        reason="strict export traces TorchBind method calls on the real ScriptObject, so tracing mutates it",
        source="torch/_higher_order_ops/torchbind.py warns 'Tracing torchbind method ... with real ScriptObject. "
               "This may cause the original object being mutated'; the seed's Coverage Matrix marks strict "
               "export N",
    ),
    Limitation(
        key="strict-export-fake-tensors",
        backends=frozenset({"export_strict"}),
        difference=r"^tracing left FakeTensors in the real object used to trace",
        observed="tracing left FakeTensors inside the real object",
        reason="strict export calls TorchBind methods on the real ScriptObject with the fake tensors it traces "
               "with, so a method that keeps a tensor argument leaves a FakeTensor inside the real object, which "
               "is unusable afterwards (its next comparison raises DataDependentOutputException: "
               "aten.equal.default)",
        source="torch/_higher_order_ops/torchbind.py call_torchbind under strict export: 'Tracing torchbind method "
               "... with real ScriptObject. This may cause the original object being mutated'",
    ),
    Limitation(
        key="strict-export-attribute",
        backends=frozenset({"export_strict"}),
        placement="attr",
        raises=("AssertionError",),
        sites=("export/unflatten.py:_assign_attr",),
        reason="strict export keeps the FakeScriptObject it traced with as the program's constant for an "
               "attribute object, so the exported program cannot run",
        source="torch.export strict mode (ep.constants holds a FakeScriptObject for a TorchBind attribute)",
    ),
    Limitation(
        key="aoti-object-input",
        backends=frozenset({"aoti"}),
        placement="input",
        raises=("UserError",),
        sites=("_inductor/compile_fx.py:_aoti_flatten_inputs",),
        reason="AOTInductor accepts TorchBind objects only as module attributes, not as inputs",
        source="torch._inductor (aoti_compile_and_package): 'TorchBind object inputs are not supported in "
               "AOTInductor. TorchBind objects can only be attributes.'",
    ),
    Limitation(
        key="explicit-dunder-call",
        backends=frozenset({"eager", "aot_eager", "inductor", "export", "export_strict", "export_saveload",
                            "autocast"}),
        dunder=True,
        # The program calls obj.__len__(): call_torchbind(obj, "__len__") calls getattr(obj, "__len__") (eager,
        # export: the pybind cast fails) or looks up its schema (aot_eager, inductor: there is none).
        raises=("RuntimeError", "AttributeError"),
        sites=("_higher_order_ops/torchbind.py:call_torchbind_impl", "_higher_order_ops/effects.py:handle_effects"),
        confirm=_dunder_is_python_method,
        reason="a dunder method called by name (obj.__eq__(other)) cannot be traced: call_torchbind looks the name "
               "up on the ScriptObject, where it resolves to Python's own method, not the bound C++ one",
        source="torch/_higher_order_ops/torchbind.py call_torchbind_impl: getattr(obj, method) on a "
               "torch.ScriptObject returns the Python-level magic method for a dunder name, which has no schema",
    ),
    Limitation(
        key="inductor-reruns-fake-method",
        backends=frozenset({"inductor"}),
        # The fake method raised inside call_torchbind while inductor propagated fake tensors through the graph
        # again: compile_fx.fake_tensor_prop (torch 2.13) or FallbackKernel.process_kernel.
        raises=("InductorError",),
        sites=("_higher_order_ops/torchbind.py:call_torchbind_impl",
               "_higher_order_ops/torchbind.py:call_torchbind_fake"),
        via=("_inductor/compile_fx.py:fake_tensor_prop", "_inductor/ir.py:process_kernel"),
        reason="inductor runs a TorchBind method's fake a second time on the same FakeScriptObject while compiling "
               "(fake tensor propagation over the traced graph), so a state-changing fake method is applied twice "
               "and can meet a state eager never reaches (e.g. an empty cache): a torch behaviour, not the fake's "
               "fault",
        source="torch/_inductor/compile_fx.py codegen_and_compile -> fake_tensor_prop (torch 2.13), and "
               "torch/_inductor/ir.py FallbackKernel.process_kernel ('re-run fake tensor propagation with the "
               "realized strides'), over the effectful call_torchbind node (with_effects) whose FakeScriptObject "
               "tracing already mutated",
    ),
    Limitation(
        key="autocast-torchbind-op",
        backends=frozenset({"autocast"}),
        # The C++ question the Python dispatch asks of the op raises: its AutocastCPU kernel is autocast's backend
        # fallback (a fallthrough for every op), not a kernel of the op's own.
        raises=("RuntimeError",),
        sites=("_ops.py:_dispatch_in_python",),
        cpp_check=r"no kernel for Autocast\w+ on ",
        reason="a C++ op taking a TorchBind object cannot be traced under autocast: with a FakeScriptObject among "
               "its inputs torch dispatches the op in Python, and asking whether the op's autocast kernel is a "
               "fallthrough raises, because autocast's fallthrough is a fallback for all ops, not a kernel of the "
               "op's own (a fallthrough kernel of the op's own at AutocastCPU lifts it, e.g. torch.library.Library("
               "ns, 'IMPL').impl(op, torch.library.fallthrough_kernel, 'AutocastCPU'); eager is unchanged)",
        source="torch/_ops.py TorchBindOpOverload._dispatch_in_python: "
               "torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough(op, AutocastCPU) raises 'no kernel for "
               "AutocastCPU on <op>' (torch 2.13, 2.14.1; pytorch#158414, where the same path raised 'received a "
               "FakeScriptObject input when dispatching DispatchKey.AutocastCUDA')",
    ),
    Limitation(
        key="torchbind-op-autograd",
        backends=frozenset({"aot_eager", "inductor"}),
        placement="input",
        difference=r"^run \d \([^)]*\): no gradient flows back through ",
        observed="the compiled program's output did not require grad where eager's does",
        confirm=autograd_falls_through,
        reason="torch.compile with AOTAutograd drops the gradient of a custom op taking a TorchBind object: the op "
               "is traced with a FakeScriptObject, dispatched in Python, where the AutogradCPU key falls through, so "
               "its autograd formula never runs and the compiled output does not require grad",
        source="torch/_ops.py TorchBindOpOverload._fallthrough_keys (AutogradCPU falls through unless a Python "
               "kernel is registered for that very key; register_autograd registers the Autograd alias key) and "
               "_dispatch_in_python; torch/_functorch/aot_autograd.py then compiles an inference graph, since no "
               "output requires grad (torch 2.13, 2.14.1)",
    ),
    Limitation(
        key="torchbind-method-autograd",
        backends=frozenset({"eager", "aot_eager", "inductor", "export", "export_strict", "export_saveload",
                            "autocast"}),
        difference=r"^run \d \([^)]*\): (gradient of input \d+: expected Tensor.*, got None \(NoneType\)|no gradient "
                   r"flows back through )",
        observed="the backend's gradient of an input was None where eager's is a tensor",
        confirm=method_autograd_not_implemented,
        reason="a traced or exported program calls a TorchBind method through call_torchbind, which has no autograd "
               "formula: with a tensor argument requiring grad its result is detached (and wrapped in a DelayedError), "
               "so the output requires grad but no gradient reaches the inputs; plain eager differentiates the aten "
               "ops the C++ method runs",
        source="torch/_higher_order_ops/torchbind.py: call_torchbind.py_autograd_impl(autograd_not_implemented("
               "call_torchbind, deferred_error=True)); torch/_higher_order_ops/utils.py autograd_not_implemented_inner "
               "(torch 2.13, 2.14.1)",
    ),
    Limitation(
        key="saveload-object-input",
        backends=frozenset({"export_saveload"}),
        placement="input",
        # torch.export.load falls back to weights_only=False after this error (torch 2.13 logs "Fallback to
        # weights_only=False succeeded"), so the entry applies only where that error is the load's failure.
        raises=("UnpicklingError",),
        sites=("serialization.py:load",),
        via=("_export/serde/serialize.py:deserialize_torch_artifact",),
        reason="torch.export.load cannot deserialize a program whose example inputs hold a ScriptObject "
               "(weights_only unpickling rejects torch.ScriptObject)",
        source="torch/_export/serde/serialize.py deserialize_torch_artifact: 'Unsupported global: GLOBAL "
               "torch.ScriptObject was not an allowed global by default'",
    ),
)


def find_limitation(backend: str, scenario, failure: BaseException | str) -> Limitation | None:
    """The first entry that applies to this cell and whose evidence the cell's own ``failure`` shows (the
    exception the cell raised, or its first difference from eager: :meth:`Limitation.observe`), else ``None``."""
    found = observation(backend, scenario, failure)
    return found[0] if found is not None else None


def observation(backend: str, scenario, failure: BaseException | str) -> tuple[Limitation, str] | None:
    """``(entry, what the failure showed of it)`` for the first entry that applies to this cell and whose evidence
    ``failure`` shows, else ``None``. The text goes into the cell's footnote: what was observed for this class."""
    for entry in LIMITATIONS:
        for form in (entry, *entry.also):
            if form.applies(backend, scenario):
                seen = form.observe(failure, scenario)
                if seen is not None:
                    return entry, seen
    return None
