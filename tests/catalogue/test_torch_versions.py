"""What changed for custom classes between the tested torch releases, in plain torch lines, each pinned on the
versions where it differs (torch 2.15.0 against 2.13 and 2.14.1): a behaviour the checks depend on that moves in a
new release shows here first. Each script runs in a fresh interpreter (no import of this project's plugin)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from conformance.core.versions import torch_release

AT_LEAST_2_15 = torch_release(torch.__version__) >= torch_release("2.15")


def _run(script: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


REGISTRATION = """
    import torch
    from torch._library import opaque_object as oo
    try:
        from torch._custom_class_base import CustomClassBase as Base
    except ImportError:
        from torch._opaque_base import OpaqueBase as Base
"""


def test_plain_torch_unregister_custom_class_and_infer_schema_of_optional_tensor_lists():
    out = _run(REGISTRATION + """
    print("unregister:", hasattr(oo, "unregister_custom_class"))
    def f(x: torch.Tensor, ys: "list[torch.Tensor | None] | None") -> torch.Tensor:
        return x
    try:
        print("infer:", torch.library.infer_schema(f, mutates_args=()))
    except ValueError:
        print("infer: ValueError")
    """)
    if AT_LEAST_2_15:
        assert "unregister: True" in out and "infer: (Tensor x, Tensor?[]? ys) -> Tensor" in out, out
    else:
        assert "unregister: False" in out and "infer: ValueError" in out, out


def test_plain_torch_a_missing_test_library_raises_from_torch_2_15():
    """``find_library_location`` (how a suite finds ``libtorchbind_test.so``, torch's TorchBind test classes) raises
    ``FileNotFoundError`` for a library that is not shipped on 2.15; before, it returned a path that did not exist
    (tests/conftest.py's probe takes either as "not shipped")."""
    out = _run("""
    from torch.testing._internal.common_utils import find_library_location
    try:
        print("found:", find_library_location("no_such_library.so").exists())
    except FileNotFoundError:
        print("raised: FileNotFoundError")
    """)
    assert ("raised: FileNotFoundError" if AT_LEAST_2_15 else "found: False") in out, out


def test_plain_torch_hasattr_on_a_symbolic_object_compiles_from_torch_2_15():
    """dynamo (``_dynamo/variables/script_object.py``) turns reading an attribute a custom-class object lacks into
    an observed ``AttributeError`` on 2.15, so ``hasattr`` compiles; before, compiling raised
    ``UnsafeScriptObjectError``."""
    out = _run(REGISTRATION + """
    class Window(Base):
        def __init__(self, n):
            self.n = n
        def size(self):
            return self.n
    members = {"size": oo.MemberType.USE_REAL}
    if hasattr(oo, "register_custom_class"):
        oo.register_custom_class(Window, typ="symbolic", guard_fn=lambda w: [w.n], members=members)
    else:
        oo.register_opaque_type(Window, typ="reference", guard_fn=lambda w: [w.n], members=members)
    def g(x, w):
        return x + 1 if hasattr(w, "no_such_attribute") else x - 1
    try:
        print("compiled:", torch.compile(g, backend="eager", fullgraph=True)(torch.zeros(1), Window(2)).tolist())
    except Exception as exc:
        print("compiled raised:", type(exc).__name__, str(exc).splitlines()[0])
    """)
    if AT_LEAST_2_15:
        assert "compiled: [-1.0]" in out, out
    else:
        assert "UnsafeScriptObjectError: Attempted to access unregistered member" in out, out


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401 - builds (cached) the sample library the script loads

    return "samples"


@pytest.mark.process
def test_plain_torch_inductor_recycles_the_input_of_an_effectful_op_before_torch_2_15(samples):
    """inductor (``_inductor/lowering.py``, ``with_effects``) reused the buffer of a tensor handed to a TorchBind
    object for the next matmul of the same size on 2.13 and 2.14.1, so the object holds other numbers than eager
    pushed: a silent wrong result, fixed in 2.15.0 (inputs of effectful ops are never reused)."""
    out = _run("""
    import torch, sample_classes
    def f(q, x, w):
        q.push(torch.mm(x, w).relu())
        y = torch.mm(x, w) * 2
        return torch.mm(y, w) + 1
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    w = torch.randn(4, 4, generator=torch.Generator().manual_seed(1))
    eager_q = torch.classes.samples.TensorQueue(torch.zeros(4, 4))
    compiled_q = torch.classes.samples.TensorQueue(torch.zeros(4, 4))
    same_out = torch.allclose(f(eager_q, x, w), torch.compile(f, backend="inductor", fullgraph=True)(compiled_q, x, w))
    print("outputs equal:", same_out, "pushed equal:", torch.allclose(eager_q.pop(), compiled_q.pop()))
    """)
    assert "outputs equal: True" in out, out
    assert f"pushed equal: {AT_LEAST_2_15}" in out, out
