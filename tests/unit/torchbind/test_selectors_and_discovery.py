"""Discovery of classes, methods, fakes and ops (conformance.torchbind.discovery)."""

from __future__ import annotations

import pytest

from conformance.core.results import SelectorError
from conformance.kinds import expand_selector
from conformance.torchbind.discovery import discover


def test_expand_namespace_wildcard(torch_test_classes):
    names = expand_selector("_TorchScriptTesting::*")
    assert "_TorchScriptTesting::_TensorQueue" in names and "_TorchScriptTesting::_Foo" in names
    assert names == sorted(names)
    assert expand_selector("_TorchScriptTesting::_Foo*")[0] == "_TorchScriptTesting::_Foo"


def test_unknown_class_lists_the_namespace(torch_test_classes):
    with pytest.raises(SelectorError) as info:
        expand_selector("_TorchScriptTesting::Nope")
    assert "_TorchScriptTesting::_TensorQueue" in str(info.value)


def test_unknown_namespace_lists_loaded_namespaces(torch_test_classes):
    with pytest.raises(SelectorError, match="no TorchBind classes are registered in namespace 'nosuchns'.*"
                                            "_TorchScriptTesting"):
        expand_selector("nosuchns::*")


@pytest.mark.parametrize("bad", ["Foo", "a::b::c", "::Foo", "ns::"])
def test_malformed_selector(bad):
    with pytest.raises(SelectorError, match="expected NAMESPACE::CLASS"):
        expand_selector(bad)


def test_discover_tensor_queue(torch_test_classes):
    info = discover("_TorchScriptTesting::_TensorQueue")
    assert info.script_qualname == "__torch__.torch.classes._TorchScriptTesting._TensorQueue"
    assert info.test_name == "torchbind[_TorchScriptTesting._TensorQueue]"
    assert info.user_methods[:3] == ["push", "pop", "top"]
    assert "__obj_flatten__" not in info.user_methods and info.has_flatten and info.pickles
    assert [o.short_name for o in info.ops] == ["queue_pop", "queue_push", "queue_size"]
    assert info.fake_class.__name__ == "FakeTensorQueue"
    assert str(info.constructors[0]).startswith("__init__(")


def test_static_methods_are_not_methods(torch_test_classes):
    info = discover("_TorchScriptTesting::_StaticMethod")
    assert info.user_methods == []


@pytest.mark.parametrize("text", ["ns::", "::Cls", "Cls", "a::b::c", ""])
def test_every_entry_point_refuses_the_same_malformed_qualified_names(text):
    """One parser (conformance.core.qualname): --torchbind-class, @conformance.examples and @conformance.strategy accept
    and refuse the same text (examples('ns::') used to be accepted while strategy('ns::', ...) was refused)."""
    import conformance

    with pytest.raises(ValueError, match="expected 'namespace::Class'"):
        conformance.examples(text)
    with pytest.raises(ValueError, match="expected 'namespace::Class'"):
        conformance.strategy(text, "m")
    with pytest.raises(SelectorError, match="expected NAMESPACE::CLASS or NAMESPACE::\\*"):
        expand_selector(text)


def test_errors_about_user_input_share_one_base():
    """A caller (or a wrapper tool) can catch every error about its own input with one except clause."""
    from conformance.plugin.baseline import BaselineError
    from conformance.engine.loading import LoadError
    from conformance.reports.merge import MergeError
    from conformance.core.results import ConformanceError, RegistrationError
    from conformance.scaffold import ScaffoldError

    for error in (SelectorError, LoadError, BaselineError, MergeError, ScaffoldError, RegistrationError):
        assert issubclass(error, ConformanceError), error
    # The public API's registration mistakes too, still a ValueError / TypeError as they were.
    import conformance

    for call in (lambda: conformance.examples("nope"), lambda: conformance.strategy("nope", "m"),
                 lambda: conformance.strategy("ns::Cls", "m")(42)):
        with pytest.raises(ConformanceError):
            call()
    assert issubclass(RegistrationError, ValueError) and issubclass(RegistrationError, TypeError)


# Every pattern the options reference documents (fnmatch on either part of NAMESPACE::CLASS), on the TorchBind
# classes torch itself registers (no library to load): '*::*' used to be refused ("no TorchBind classes are
# registered in namespace '*'").
def _torch_builtin(pattern_ns: str = "", pattern_cls: str = "") -> list[str]:
    import fnmatch

    from conformance.torchbind.discovery import registered_classes

    return [q for q in registered_classes() if fnmatch.fnmatchcase(q.split("::")[0], pattern_ns or "*")
            and fnmatch.fnmatchcase(q.split("::")[1], pattern_cls or "*")]


@pytest.mark.parametrize("selector, must", [
    ("*::*", ["aten::OpaqueObject", "quantized::LinearPackedParamsBase"]),
    ("quantized::*", ["quantized::Conv2dPackedParamsBase", "quantized::LinearPackedParamsBase"]),
    ("*::LinearPackedParamsBase", ["quantized::LinearPackedParamsBase", "sparse::LinearPackedParamsBase"]),
    ("*::OpaqueObject", ["aten::OpaqueObject"]),
    ("quantized::[LE]*", ["quantized::EmbeddingPackedParamsBase", "quantized::LinearPackedParamsBase"]),
    ("[qs]*::Linear*", ["quantized::LinearPackedParamsBase", "sparse::LinearPackedParamsBase"]),
    ("quantized::Conv?dPackedParamsBase", ["quantized::Conv2dPackedParamsBase", "quantized::Conv3dPackedParamsBase"]),
    ("c10d::[!P]*", ["c10d::ReduceOp", "c10d::Work"]),
])
def test_every_documented_pattern_selects_by_fnmatch_on_both_parts(selector, must):
    ns, _, cls = selector.partition("::")
    names = expand_selector(selector)
    assert names == sorted(names) == _torch_builtin(ns, cls)
    assert set(must) <= set(names)
    if selector.startswith("*::") or selector.startswith("["):
        assert len({q.split("::")[0] for q in names}) > 1 or selector == "*::OpaqueObject"


def test_a_pattern_on_the_namespace_that_matches_nothing_lists_the_namespaces():
    with pytest.raises(SelectorError, match="no TorchBind classes are registered in namespace 'zz\\*'.*quantized"):
        expand_selector("zz*::*")
    with pytest.raises(SelectorError, match="no TorchBind class q\\*::Nope is registered.*"
                                            "namespace 'quantized'.*quantized::LinearPackedParamsBase"):
        expand_selector("q*::Nope")
    with pytest.raises(SelectorError, match="the namespaces matching '\\[qs\\]\\*'.*sparse::LinearPackedParamsBase"):
        expand_selector("[qs]*::Nope")


def test_the_command_line_takes_star_colon_colon_star(pytester):
    """The option itself, not only the expansion: '*::*' collects every registered class's items."""
    result = pytester.runpytest_inprocess("--torchbind-class=*::*", "--torchbind-checks=fake_class",
                                          "--collect-only", "-q", "-p", "no:randomly")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    for qualname in _torch_builtin():
        ns, name = qualname.split("::")
        assert f"torchbind[{ns}.{name}]::fake_class" in out
