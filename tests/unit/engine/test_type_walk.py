"""The one walk over TorchScript types (conformance.engine.jit_types.walk) and the four purposes built on it."""

from __future__ import annotations

import pytest
import torch
from hypothesis import strategies as st

from conformance.engine.arguments import draw_fixed, value_strategy
from conformance.engine.jit_types import CONTAINER_KINDS, LEAF_KINDS, TypeHandler, value_mismatch, walk
from conformance.scaffold.annotations import type_annotation
from conformance.engine.values import UnsupportedType, Value, candidates

C = torch._C
FOO = "__torch__.torch.classes._TorchScriptTesting._Foo"


def parse(spec: str) -> torch._C.Type:
    """The type of a schema argument spelled ``spec`` (``Tensor?[]``, ``Dict(str, Tensor)``, ...)."""
    return C.parse_schema(f"f({spec} a) -> ()").arguments[0].type


class Recorder(TypeHandler):
    """Answers with the method the walk called and what it passed."""

    def other(self, typ):
        return ("other", typ)


for _name in [*LEAF_KINDS.values(), *(m for m, _ in CONTAINER_KINDS.values())]:
    setattr(Recorder, _name, lambda self, typ, *parts, _n=_name: (_n, typ, *parts))


# ----- the walk ---------------------------------------------------------------------------------------------------
def test_walk_dispatches_every_kind_the_ladders_handled():
    handled = {"TensorType", "IntType", "SymIntType", "FloatType", "SymFloatType", "BoolType", "SymBoolType",
               "StringType", "NoneType", "NumberType", "DeviceObjType", "ClassType", "AnyType", "OptionalType",
               "ListType", "TupleType", "DictType", "UnionType"}
    assert handled == set(LEAF_KINDS) | set(CONTAINER_KINDS)
    methods = [*LEAF_KINDS.values(), *(m for m, _ in CONTAINER_KINDS.values())]
    assert len(set(methods)) == len(methods) and all(callable(getattr(TypeHandler, m)) for m in methods)
    leaves = [
        (C.TensorType.get(), "on_tensor"), (C.IntType.get(), "on_int"), (C.SymIntType.get(), "on_symint"),
        (C.FloatType.get(), "on_float"), (C.BoolType.get(), "on_bool"), (C.SymBoolType.get(), "on_symbool"),
        (C.StringType.get(), "on_str"), (C.NoneType.get(), "on_none"), (C.NumberType.get(), "on_number"),
        (C.DeviceObjType.get(), "on_device"), (C.AnyType.get(), "on_any"),
        (parse("Scalar"), "on_number"), (parse("ScalarType"), "on_int"), (parse("Tensor(a!)"), "on_tensor"),
    ]
    for typ, method in leaves:
        assert walk(typ, Recorder()) == (method, typ), typ


def test_containers_get_their_component_types_unwalked():
    t, i, s = C.TensorType.get(), C.IntType.get(), C.StringType.get()
    assert walk(C.OptionalType(t), Recorder())[0::2] == ("on_optional", t)
    assert walk(C.ListType(i), Recorder())[0::2] == ("on_list", i)
    assert walk(C.TupleType([t, i]), Recorder())[0::2] == ("on_tuple", [t, i])
    assert walk(C.TupleType([]), Recorder())[0::2] == ("on_tuple", [])
    assert walk(C.DictType(s, t), Recorder())[0::2] == ("on_dict", s)
    assert walk(C.DictType(s, t), Recorder())[3] == t
    assert walk(C.UnionType([i, s]), Recorder())[0::2] == ("on_union", [i, s])  # DeviceMesh.get_group's mesh_dim
    nested = parse("Tensor?[]")
    name, typ, elem = walk(nested, Recorder())
    assert (name, typ) == ("on_list", nested) and walk(elem, Recorder()) == ("on_optional", elem, t)


def test_unknown_kinds_reach_the_fallback():
    unknown = [C.ComplexType.get(), C.PyObjectType.get(), parse("Generator"), parse("Stream"), parse("Storage"),
               C.FutureType(C.IntType.get())]
    for typ in unknown:
        assert typ.kind() not in LEAF_KINDS and typ.kind() not in CONTAINER_KINDS
        assert walk(typ, Recorder()) == ("other", typ)
    with pytest.raises(NotImplementedError, match="TypeHandler has no answer for type complex"):
        walk(C.ComplexType.get(), TypeHandler())


def test_every_method_defaults_to_the_fallback():
    class OnlyOther(TypeHandler):
        def other(self, typ):
            return f"other:{typ}"

    for spec in ["Tensor", "int", "float", "bool", "str", "Tensor?", "int[]", "(Tensor, int)", "Dict(str, Tensor)",
                 "Any", "Scalar", "Device", "NoneType", "complex"]:
        assert walk(parse(spec), OnlyOther()) == f"other:{parse(spec)}"
    union = C.UnionType([C.IntType.get(), C.StringType.get()])
    assert walk(union, OnlyOther()) == f"other:{union}"
    assert walk(C.SymBoolType.get(), OnlyOther()) == "other:bool"
    assert OnlyOther().walk(C.IntType.get()) == "other:int"


# ----- the four purposes give what their ladders gave ---------------------------------------------------------------
GALLERY = ["torch.arange(6, dtype=torch.float32).reshape(2, 3)", "torch.ones(3, dtype=torch.float64)",
           "torch.tensor(2.5)", "torch.arange(4, dtype=torch.int64)", "torch.zeros(0, 3)",
           "torch.tensor([True, False, True])", "torch.arange(12, dtype=torch.float32).reshape(3, 4).t()",
           "torch.arange(8, dtype=torch.float32)[::2]"]

CANDIDATES = {
    "Tensor": GALLERY,
    "int": ["2", "1", "3", "0"],
    "float": ["1.5", "0.5", "2.0", "0.0"],
    "bool": ["True", "False"],
    "str": ["'a'", "'bc'", "''"],
    "Tensor?": [GALLERY[0], "None", *GALLERY[1:]],
    "int[]": ["[2, 1]", "[]", "[2]"],
    "(Tensor, int)": [f"({GALLERY[0]}, 2)", f"({GALLERY[1]}, 1)", f"({GALLERY[2]}, 3)"],
    "Dict(str, Tensor)": [f"{{'a': {GALLERY[0]}, 'bc': {GALLERY[1]}}}", "{}"],
    "(int)": ["(2,)", "(1,)", "(3,)"],
    "Scalar": ["2", "1.5"],
    "Device": ["torch.device('cpu')"],
    "NoneType": ["None"],
    "SymInt": ["2", "1", "3", "0"],
}


def test_candidates_are_unchanged():
    for spec, codes in CANDIDATES.items():
        assert [v.code for v in candidates(parse(spec))] == codes, spec
    assert [v.code for v in candidates(C.SymBoolType.get())] == ["True", "False"]
    assert [v.code for v in candidates(C.TupleType([]))] == ["()"]
    for typ, message in [(C.AnyType.get(), "cannot generate values of type Any"),
                         (parse("Any[]"), "cannot generate values of type Any"),
                         (parse("complex"), "cannot generate values of type complex"),
                         (parse("Generator"), "cannot generate values of type Generator")]:
        with pytest.raises(UnsupportedType) as info:
            candidates(typ)
        assert str(info.value) == message


def test_type_annotations_are_unchanged():
    expected = {"Tensor": "torch.Tensor", "int": "int", "float": "float", "bool": "bool", "str": "str",
                "Tensor?": "Optional[torch.Tensor]", "int[]": "list[int]", "(Tensor, int)": "tuple[torch.Tensor, int]",
                "Dict(str, Tensor)": "dict[str, torch.Tensor]", "Any": None, "Device": "torch.device",
                "NoneType": "None", "Scalar": None, "Any[]": None, "(Tensor, Any)": None, "Dict(str, Any)": None,
                "(int, (float, str), Tensor[])": "tuple[int, tuple[float, str], list[torch.Tensor]]",
                "complex": None, "Generator": None}
    assert {spec: type_annotation(parse(spec)) for spec in expected} == expected
    assert type_annotation(C.TupleType([])) == "tuple[()]"
    assert [type_annotation(t) for t in (C.SymIntType.get(), C.SymBoolType.get())] == ["int", "bool"]


def test_value_mismatches_are_unchanged():
    ones = torch.ones(1)
    assert value_mismatch(ones, parse("Tensor")) is None
    assert value_mismatch(1, parse("Tensor")) == "result: expected Tensor, got int 1"
    assert value_mismatch(True, parse("int")) == "result: expected int, got bool True"
    assert value_mismatch(True, C.SymIntType.get(), "x") == "x: expected int, got bool True"
    assert value_mismatch(1, parse("float")) == "result: expected float, got int 1"
    assert value_mismatch(1, parse("bool")) == "result: expected bool, got int 1"
    assert value_mismatch(1, parse("str")) == "result: expected str, got int 1"
    assert value_mismatch(None, parse("Tensor?")) is None
    assert value_mismatch(1, parse("Tensor?")) == "result: expected Tensor, got int 1"
    assert value_mismatch([1, "a"], parse("int[]")) == "result[1]: expected int, got str 'a'"
    assert value_mismatch((1,), parse("int[]")) == "result: expected a list (List[int]), got tuple (1,)"
    assert value_mismatch((ones, 2), parse("(Tensor, int)")) is None
    assert value_mismatch((1, 2, 3), parse("(Tensor, int)")) == (
        "result: expected a tuple of 2 (Tuple[Tensor, int]), got 3 elements")
    assert value_mismatch([ones, 2], parse("(Tensor, int)")) == (
        "result: expected a tuple (Tuple[Tensor, int]), got list "
        "[Tensor(shape=[1], dtype=float32, device=cpu, stride=[1]), 2]")
    assert value_mismatch({"a": ones}, parse("Dict(str, Tensor)")) is None
    assert value_mismatch({1: ones}, parse("Dict(str, Tensor)"), "out") == "out key: expected str, got int 1"
    assert value_mismatch({"k": 1}, parse("Dict(str, Tensor)")) == "result['k']: expected Tensor, got int 1"
    assert all(value_mismatch(v, C.AnyType.get()) is None for v in (1, None, ones, object()))
    assert value_mismatch(True, parse("Scalar")) is None
    assert value_mismatch("a", parse("Scalar")) == "result: expected number, got str 'a'"
    assert value_mismatch(None, parse("NoneType")) is None
    assert value_mismatch(0, parse("Device")) == "result: expected Device, got int 0"
    # kinds this checker does not model are not reported
    assert value_mismatch("x", C.SymBoolType.get()) is None and value_mismatch("x", parse("complex")) is None


def test_value_strategies_are_unchanged():
    assert repr(value_strategy(parse("int"))) == "integers(min_value=-2, max_value=8).map(lambda i: Value(repr(i)))"
    assert repr(value_strategy(C.SymIntType.get())) == repr(value_strategy(parse("int")))
    assert repr(value_strategy(parse("int[]"))) == (
        "lists(integers(min_value=-2, max_value=8).map(lambda i: Value(repr(i))), max_size=3)"
        ".map(lambda vs: _join('[{}]', vs))")
    assert repr(value_strategy(parse("str"))) == "text(alphabet='abc:_ ', max_size=4).map(lambda s: Value(repr(s)))"
    assert [v.code for v in draw_fixed(value_strategy(parse("bool")), 4, "walk")] in (["False", "True"],
                                                                                       ["True", "False"])
    assert [v.code for v in draw_fixed(value_strategy(parse("Device")), 4, "walk")] == ["torch.device('cpu')"]
    assert {v.code for v in draw_fixed(value_strategy(parse("Scalar")), 4, "walk")} == {"2", "1.5"}
    assert "None" in [v.code for v in draw_fixed(value_strategy(parse("Tensor?")), 8, "walk")]
    for typ in (C.AnyType.get(), parse("(Tensor, Any)"), parse("complex")):
        with pytest.raises(UnsupportedType, match="cannot generate values of type"):
            value_strategy(typ)


@pytest.mark.parametrize("spec", ["Tensor", "int", "float", "bool", "str", "Tensor?", "int[]", "(Tensor, int)",
                                  "Dict(str, Tensor)", "Scalar", "Device", "(int, (float, str), Tensor[])"])
def test_generated_values_are_of_their_type(spec):
    typ = parse(spec)
    for v in [*candidates(typ), *draw_fixed(value_strategy(typ), 8, f"walk:{spec}")]:
        assert value_mismatch(v.make(), typ) is None, v.code


def test_torchbind_class_type(torch_test_classes):
    typ = parse(FOO)
    assert typ.kind() == "ClassType" and walk(typ, Recorder()) == ("on_class", typ)
    made = [Value(f"torch.classes._TorchScriptTesting._Foo({a}, {b})") for a, b in ((1, 2), (3, 4))]

    def resolver(name):
        return made if name == FOO else []

    assert candidates(typ, resolver) == made
    assert [v.code for v in candidates(C.OptionalType(typ), resolver)] == [made[0].code, "None", made[1].code]
    with pytest.raises(UnsupportedType, match=f"^no example objects of {FOO} to pass as an argument$"):
        candidates(typ)
    assert type_annotation(typ) is None and type_annotation(C.ListType(typ)) is None
    assert {v.code for v in draw_fixed(value_strategy(typ, resolver), 4, "walk")} == {v.code for v in made}
    assert value_mismatch(made[0].make(), typ) is None
    assert value_mismatch(1, typ) == f"result: expected a {FOO} object, got int 1"
    assert isinstance(value_strategy(C.ListType(typ), resolver), st.SearchStrategy)


def test_unions_are_drawn_from_every_member_that_can_be_generated():
    from typing import Optional, Union

    from conformance.engine.jit_types import annotation_type, value_mismatch
    from conformance.engine.values import candidates

    typ = annotation_type(Union[int, None, str])  # DeviceMesh.get_group(mesh_dim)
    drawn = {type(eval(v.code)) for v in draw_fixed(value_strategy(typ), 40, "union")}
    assert drawn == {int, type(None), str}
    assert {type(eval(v.code)) for v in candidates(typ, None)} == {int, type(None), str}
    assert value_mismatch("a", typ) is None and value_mismatch(1.5, typ) is not None
    # torch's own spelling of a size that may be symbolic: a plain int outside tracing
    assert str(annotation_type(int | torch.SymInt)) == "int" and str(annotation_type(int | None)) == str(
        annotation_type(Optional[int]))
