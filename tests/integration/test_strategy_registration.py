"""``conformance.strategy`` as a new user calls it (issue 29): the documented forms work, an op named alone
included, and a strategy of the wrong kind is one error at registration, naming the registration, what it drew
and what it must draw, instead of a failure of every item that draws arguments."""

from __future__ import annotations

import importlib

import pytest
import torch
from hypothesis import strategies as st

import conformance
from conformance.engine.arguments import ArgumentSource
from conformance.core.registry import REGISTRY
from conftest import TORCH_SPEC, run_inprocess

FOO, OP = "_TorchScriptTesting::_Foo", "_TorchScriptTesting::takes_foo"


def test_an_op_named_alone_gets_the_strategy_for_every_class_it_takes(torch_test_classes):
    with REGISTRY.scratch():
        @conformance.strategy(OP, arg=0)
        def xs():
            return st.sampled_from(["torch.full((2,), 7.0)"])

        assert REGISTRY.strategies(FOO) == {(OP, 0): xs}
        # What the checks draw for the op: the object the plugin gives, then the adopter's value.
        schema = torch._C._jit_get_schemas_for_operator(OP)[0]
        sets = ArgumentSource(FOO, REGISTRY).fixed(OP, schema, skip=0)
        assert sets and all(s.code() == "torch.full((2,), 7.0)" for s in sets)
        # The whole argument list of the op, and its exclusion, alike.
        conformance.strategy(OP)(lambda: None)
        assert (OP, None) in REGISTRY.strategies(FOO)
        assert ArgumentSource(FOO, REGISTRY).excluded(OP)


def test_an_op_named_alone_is_resolved_by_the_module_that_knows_both_kinds():
    """conformance.strategy is conformance.kinds.strategy: which classes an op named alone applies to is asked of
    both kinds there (the engine knows neither); a Python custom op annotated with a custom class finds it and
    the registered classes derived from it."""
    from conformance import kinds

    importlib.import_module("sample_classes.custom_classes")  # registers Affine and samples_custom::affine
    assert conformance.strategy is kinds.strategy
    affine = "sample_classes.custom_classes.Affine"
    owners = kinds.classes_taking("samples_custom::affine")
    assert owners[0] == affine and all(o.startswith(affine) for o in owners)  # AffineHoisted, AffineEqIdentity, ...
    with REGISTRY.scratch():
        conformance.strategy("samples_custom::affine", arg=0)(lambda: st.just("torch.ones(2)"))
        assert all(set(REGISTRY.strategies(o)) == {("samples_custom::affine", 0)} for o in owners)


def test_an_op_named_alone_must_exist_and_take_a_class(torch_test_classes):
    with REGISTRY.scratch():
        with pytest.raises(ValueError, match="no operator nosuchns::op is registered; load its library"):
            conformance.strategy("nosuchns::op", arg=0)
        with pytest.raises(ValueError, match="aten::add_ has no overload .default.; name one of aten::add_.Tensor"):
            conformance.strategy("aten::add_", arg=0)
        with pytest.raises(ValueError, match="aten::mm takes no TorchBind or Python custom class"):
            conformance.strategy("aten::mm", arg=0)
        with pytest.raises(ValueError, match="name the class and its method"):
            conformance.strategy("mylib.Ring", arg=0)
        with pytest.raises(ValueError, match="observer= is said of a whole method"):
            conformance.strategy(OP, observer=True)
        assert REGISTRY.strategies(FOO) == {}


def test_a_strategy_of_the_wrong_kind_is_refused_at_registration(torch_test_classes):
    with REGISTRY.scratch():
        with pytest.raises(TypeError) as drew:
            @conformance.strategy(FOO, "add_tensor", arg=0)
            def tensors():
                return st.just(torch.ones(2))
        message = str(drew.value)
        assert message.startswith(f"conformance.strategy({FOO!r}, 'add_tensor', arg=0): the strategy of tensors drew "
                                  "Tensor tensor([1., 1.]), not an argument; it must draw Python source"), message
        assert '"torch.ones(3)"' in message  # what to draw instead
        with pytest.raises(TypeError, match=r"lists returned Tensor tensor\(\[1\., 1\.\]\), not a hypothesis strategy"):
            @conformance.strategy(FOO, "add_tensor")
            def lists():
                return torch.ones(2)
        with pytest.raises(TypeError, match="drew Tensor .*not an argument list; it must draw the argument list"):
            conformance.strategy(FOO, "add_tensor")(st.tuples(st.just(torch.ones(2))).map(list).map(lambda v: v[0]))
        with pytest.raises(TypeError, match="drew str 'torch.ones\\(2\\) \\+', not an argument list"):
            conformance.strategy(FOO, "add_tensor")(lambda: st.just("torch.ones(2) +"))
        with pytest.raises(ValueError, match="returned None, which excludes a whole method or op: leave arg out"):
            conformance.strategy(FOO, "add_tensor", arg=0)(lambda: None)
        assert REGISTRY.strategies(FOO) == {}  # nothing refused was registered

        # Accepted: source, values written with repr, a factory that takes the object (called only with one), and a
        # factory that cannot be called yet (left to the checks, which call it where it is used).
        conformance.strategy(FOO, "add_tensor", arg=0)(lambda: st.sampled_from(["torch.ones(2)", 3, 1.5, None]))
        conformance.strategy(FOO, "add_tensor")(lambda: st.just(["torch.ones(2)"]))

        def by_object(obj):
            raise AssertionError("called without an object")

        conformance.strategy(FOO, "info")(by_object)
        conformance.strategy(FOO, "add")(lambda: torch.ops.not_loaded_yet.op)
        assert len(REGISTRY.strategies(FOO)) == 4


def test_a_strategy_drawing_tensors_is_one_usage_error(pytester, torch_test_classes):
    pytester.makepyfile(bad_strategy=f"""
        import torch
        from hypothesis import strategies as st
        import conformance

        @conformance.strategy({FOO!r}, "add_tensor", arg=0)
        def tensors():
            return st.just(torch.ones(2))
    """)
    result = run_inprocess(pytester, f"--torchbind-load={TORCH_SPEC}", "--torchbind-load=bad_strategy.py",
                           f"--torchbind-class={FOO}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --torchbind-load='bad_strategy.py': importing *bad_strategy.py failed:",
                                 # one base for errors about the user's input (issue 30): ConformanceError
                                 f"conformance.core.results.RegistrationError: conformance.strategy({FOO!r}, "
                                 "'add_tensor', arg=0): the strategy of tensors drew Tensor tensor(*), not an argument; it must draw Python source*"])
    assert "Traceback" not in result.stderr.str() and "passed" not in result.stdout.str()
