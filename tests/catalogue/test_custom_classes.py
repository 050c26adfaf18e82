"""Python custom classes (opaque objects): each rule the checks enforce, shown first with plain torch (a compiled
program against eager), then the verdict the plugin gives on the sample classes (sample_classes/custom_classes.py)
and on classes written here, in the test, that the plugin has never seen.

Every class is registered with the API the running torch has (``register_custom_class`` on 2.14+,
``register_opaque_type`` before); one test registers with the old spelling on purpose.
"""

from __future__ import annotations

import zlib

import pytest
import torch
from torch._dynamo.testing import CompileCounter

import conformance
from conformance.custom.discovery import api_names, discover_custom, registered_custom_classes
from conformance.core.results import SelectorError
from conformance.kinds import expand_selector
from conformance.core.qualname import node_id, qualname_of_id
from conformance.core.registry import REGISTRY
from conformance.runner import Engine, run_class
from conformance.core.settings import Settings

from conftest import REGISTRATION_SOURCE, engine_of, run_inprocess

MOD = "sample_classes.custom_classes"


class OldSpelling:
    """Registered with torch 2.11-2.13's spelling (``register_opaque_type``, ``typ="value"``), which torch 2.14
    still accepts (logging a deprecation warning): the plugin sees it through torch's query functions."""

    def __init__(self, n: int):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, OldSpelling) and self.n == other.n

    def __hash__(self):
        return hash(self.n)

    def __fx_repr__(self):
        return f"OldSpelling({self.n!r})", {"OldSpelling": OldSpelling}


torch._library.opaque_object.register_opaque_type(OldSpelling, typ="value")


@pytest.fixture(scope="module")
def cc():
    import sample_classes.custom_classes as module

    return module


def compiled(fn, backend="eager"):
    """A fresh compiled program (dynamo's caches reset first, so no earlier test's program is reused)."""
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, fullgraph=True)


def verdicts(name: str, examples: int = 30) -> dict[tuple[str, str | None], object]:
    """Every item's outcome for the sample class ``name``: 30 hypothesis examples (3 call sequences for a
    symbolic class's guards), enough for every trap in the samples; the gate's default is 100."""
    outcomes = run_class(f"{MOD}.{name}", skip={"matrix"}, engine=Engine(Settings(examples=examples)))
    return {(o.check, o.target): o for o in outcomes}


def only_failure(outcomes, key, rule):
    """The one failure of the item ``key``, breaking ``rule`` (its id); every other item passed (or was skipped with
    a reason)."""
    failed = {k for k, o in outcomes.items() if o.status == "failed"}
    assert failed == {key}, {k: outcomes[k].render() for k in failed}
    [failure] = outcomes[key].failures
    assert failure.rule == rule, failure.render(outcomes[key].qualname, outcomes[key].target)
    return failure, failure.render(outcomes[key].qualname, outcomes[key].target)


# ----- discovery and selection ---------------------------------------------------------------------------------


def test_discovery_through_torchs_query_functions(cc):
    names = registered_custom_classes()
    assert f"{MOD}.Affine" in names and f"{MOD}.Stepper" in names and "enum.Enum" not in names
    affine = discover_custom(f"{MOD}.Affine")
    assert (affine.kind, affine.cls, affine.hoist) == ("constant", cc.Affine, False)
    assert [op.qualname for op in affine.ops] == ["samples_custom::affine"]
    assert affine.ops[0].positions == (1,) and "PyObject" in str(affine.ops[0].schema)
    stepper = discover_custom(f"{MOD}.Stepper")
    assert (stepper.kind, stepper.members) == ("symbolic", {"get_step": "use_real"})
    assert stepper.guard_fn(cc.Stepper(4)) == [4]
    # An op annotated with a base class takes its registered subclasses too.
    assert [op.qualname for op in discover_custom(f"{MOD}.StepperFakeReadsStep").ops] == [
        "samples_custom::scale", "samples_custom::widen"]
    assert api_names()["register"] == ("register_custom_class" if hasattr(
        torch._library.opaque_object, "register_custom_class") else "register_opaque_type")


def test_the_old_api_spelling_is_recognised():
    name = f"{__name__}.OldSpelling"
    info = discover_custom(name)
    assert (info.kind, info.cls) == ("constant", OldSpelling)
    outcomes = run_class(name, engine=Engine(Settings(examples=20)))
    assert {(o.check, o.status) for o in outcomes} == {("eq_hash", "passed"), ("fx_repr", "passed")}


def test_selectors_ids_and_unknown_names(cc):
    assert expand_selector(f"{MOD}.Affine") == [f"{MOD}.Affine"]
    assert expand_selector(f"{MOD}.Stepper*") == [f"{MOD}.Stepper", f"{MOD}.StepperFakeReadsStep",
                                                 f"{MOD}.StepperGuardById", f"{MOD}.StepperGuardMissesStep"]
    with pytest.raises(SelectorError, match=r"no Python custom class sample_classes\.nope\.X is registered.*"
                                            r"Registered: .*sample_classes\.custom_classes\.Affine"):
        expand_selector("sample_classes.nope.X")
    item = node_id(f"{MOD}.Affine", "guards[affine]")
    assert item == f"torchbind[py:{MOD}.Affine]::guards[affine]" and qualname_of_id(item) == f"{MOD}.Affine"
    assert qualname_of_id(node_id("ns::Cls", "coverage[a]")) == "ns::Cls"  # TorchBind ids unchanged


def test_the_torchbind_checks_do_not_apply_and_the_custom_ones_do_not_apply_to_torchbind(cc):
    import sample_classes  # noqa: F401 - builds (cached) and loads the TorchBind samples

    engine = Engine(Settings(examples=5, backends=("eager",)))
    checks = {o.check for o in run_class(f"{MOD}.Affine", engine=engine, backends=("eager",))}
    # op fakes and tracing: every kind
    assert checks == {"eq_hash", "fx_repr", "guards", "recompiles", "fake_kernel", "tracing", "matrix"}
    symbolic = {o.check for o in run_class(f"{MOD}.Stepper", engine=engine, backends=("eager",))}
    assert symbolic == {"guards", "recompiles", "fake_kernel", "baked", "tracing", "matrix"}
    from conformance.runner import plan

    assert not {u.check.name for u in plan("samples::Counter")} & {"eq_hash", "fx_repr", "guards", "recompiles",
                                                                    "fake_kernel", "inlined", "baked"}


# ----- constant (value) types: plain torch first, then the verdicts ---------------------------------------------


def test_plain_torch_a_guard_that_ignores_a_field_reuses_a_stale_program(cc):
    x = torch.ones(1)
    for cls, second in ((cc.Affine, 7.0), (cc.AffineEqIgnoresOffset, 3.0)):
        program = compiled(lambda x, s: cc.affine(x, s))
        assert program(x, cls(2.0, 1.0)).item() == 3.0
        assert program(x, cls(2.0, 5.0)).item() == second  # eager: 7
        assert cc.affine(x, cls(2.0, 5.0)).item() == 7.0


def test_guards_names_the_ignored_field_and_the_stale_numbers(cc):
    outcomes = verdicts("AffineEqIgnoresOffset")
    failure, text = only_failure(outcomes, ("guards", "affine"), "guards.eq-ignores-state")
    assert "AffineEqIgnoresOffset.__eq__ ignores 'offset': a == b, but samples_custom::affine gives different " \
           "results" in text
    # b is made by the class's own constructor (never a field set from outside: a state no real object reaches)
    assert "b = AffineEqIgnoresOffset(" in text and "(b is a with offset changed)" in text
    eager_b = next(d for d in failure.details if d.startswith("eager, b:"))
    stale = next(d for d in failure.details if d.startswith("compiled, b:"))
    assert "(stale)" in stale and eager_b.split(":", 1)[1].split("(stale)")[0].strip() != \
        stale.split(":", 1)[1].split("(stale)")[0].strip()
    assert all(o.status == "passed" for o in verdicts("Affine").values())


class Divisor:
    """A constant class whose ``__eq__`` compares its one field, ``d``, with ``==``: ``Divisor(0.0) ==
    Divisor(-0.0)``, though ``x / 0.0`` is ``inf`` and ``x / -0.0`` is ``-inf``."""

    def __init__(self, d: float):
        self.d = d

    def __eq__(self, other):
        return isinstance(other, Divisor) and self.d == other.d

    def __hash__(self):
        return hash(self.d)

    def __fx_repr__(self):
        return f"Divisor({self.d!r})", {"Divisor": Divisor}


def _register_divisor():
    from sample_classes.custom_classes import register_constant

    register_constant(Divisor)

    @torch.library.custom_op("cc_catalogue::divide", mutates_args=())
    def divide(x: torch.Tensor, q: Divisor) -> torch.Tensor:
        return x / q.d

    @divide.register_fake
    def _(x, q):
        return torch.empty_like(x)


_register_divisor()


def divisors():
    """Example objects of :class:`Divisor`: the two signed zeros."""
    return [Divisor(0.0), Divisor(-0.0)]


def test_plain_torch_a_signed_zero_that_eq_calls_equal_reuses_a_stale_program():
    x = torch.ones(1)
    program = compiled(lambda x, q: torch.ops.cc_catalogue.divide(x, q))
    assert program(x, Divisor(0.0)).item() == float("inf")
    assert program(x, Divisor(-0.0)).item() == float("inf")  # stale: eager gives -inf
    assert torch.ops.cc_catalogue.divide(x, Divisor(-0.0)).item() == float("-inf")


def test_guards_names_a_field_whose_equal_values_a_call_tells_apart():
    name = f"{__name__}.Divisor"

    def register():
        conformance.examples(name)(divisors)

    outcomes = {(o.check, o.target): o for o in run_class(name, engine=engine_of(register, Settings(examples=10)),
                                                          skip={"matrix"})}
    failure, text = only_failure(outcomes, ("guards", "divide"), "guards.eq-ignores-state")
    assert "Divisor.__eq__ ignores 'd' (0.0 and -0.0, which == calls equal): a == b, but cc_catalogue::divide" \
           in text, text
    assert "a = list(divisors())[0]" in text and "b = Divisor(-0.0) (b is a with d changed)" in text, text


def test_plain_torch_a_hoisted_object_is_a_graph_input_so_its_equality_cannot_make_a_result_stale(cc):
    x, inputs = torch.ones(1), []

    def backend(gm, example_inputs):
        inputs.append([type(i) for i in example_inputs])
        return gm.forward

    torch._dynamo.reset()
    program = torch.compile(lambda x, s: cc.affine(x, s), backend=backend, fullgraph=True)
    assert program(x, cc.AffineHoistedEqIgnoresOffset(2.0, 1.0)).item() == 3.0
    assert program(x, cc.AffineHoistedEqIgnoresOffset(2.0, 5.0)).item() == 7.0  # as eager; not hoisted: 3
    assert inputs == [[torch.Tensor, cc.AffineHoistedEqIgnoresOffset]]  # one graph, the object among its inputs


def _without_hoisting(monkeypatch):
    """torch as if it ignored ``hoist=True`` (dynamo's two readers of the flag): objects are baked in again."""
    from torch._dynamo.variables import builder, script_object

    for module in (builder, script_object):
        monkeypatch.setattr(module, "should_hoist", lambda cls: False)


def test_guards_checks_hoisted_classes_as_graph_inputs(cc, monkeypatch):
    for name in ("AffineHoisted", "AffineHoistedEqIgnoresOffset"):
        outcomes = verdicts(name)
        assert outcomes[("guards", "affine")].status == "passed", outcomes[("guards", "affine")].render()
    # The same check on the same class, with torch baking the object in: the stale result is found and shown.
    _without_hoisting(monkeypatch)
    # (the gate's default 100 examples: 10 object sequences, each compiled)
    failure, text = only_failure(verdicts("AffineHoistedEqIgnoresOffset", 100), ("guards", "affine"),
                                 "guards.hoisted-differs")
    assert "registered with hoist=True, yet a compiled program calling samples_custom::affine returns something " \
           "else than eager for a with offset changed" in text
    eager, got = failure.details
    assert eager.startswith("eager:") and got.startswith("compiled:") and eager[9:] != got[9:]
    # The op's inputs are built before the program and passed in, as the check calls it.
    assert "program = torch.compile(lambda x, o: torch.ops.samples_custom.affine(x, o), backend='eager', " \
           "fullgraph=True)" in failure.repro.splitlines()
    # With a sound __eq__ no result differs, but the graph has no input for the object: baked in, named as such.
    _, text = only_failure(verdicts("AffineHoisted"), ("guards", "affine"), "guards.hoisted-baked-in")
    assert "AffineHoisted is registered with hoist=True, but the graph compiled for samples_custom::affine does " \
           "not take the object as an input: it was baked in as a constant" in text


def test_plain_torch_fx_repr_that_drops_a_field_bakes_in_the_wrong_object(cc):
    x = torch.ones(1)
    program = compiled(lambda x, s: cc.affine(x, s))
    assert program(x, cc.AffineReprDropsOffset(2.0, 1.0)).item() == 2.0  # eager: 3
    assert compiled(lambda x, s: cc.affine(x, s))(x, cc.Affine(2.0, 1.0)).item() == 3.0


def test_fx_repr_names_the_lost_field_with_compiled_and_eager_numbers(cc):
    failure, text = only_failure(verdicts("AffineReprDropsOffset"), ("fx_repr", None), "fx_repr.rebuilds-differently")
    assert "differs in offset" in text
    assert any(d.startswith("offset: ") and " rebuilt as 0.0" in d for d in failure.details)
    numbers = next(d for d in failure.details if "samples_custom.affine" in d)
    eager, compiled_ = numbers.split("eager ")[1].split(", compiled ")
    assert eager != compiled_  # the numbers differ, as plain torch showed


def test_plain_torch_identity_equality_recompiles_for_every_object(cc):
    for cls, frames in ((cc.Affine, 1), (cc.AffineEqIdentity, 3)):
        torch._dynamo.reset()
        counter = CompileCounter()
        program = torch.compile(lambda x, s: cc.affine(x, s), backend=counter, fullgraph=True)
        for _ in range(3):
            program(torch.ones(1), cls(2.0, 1.0))
        assert counter.frame_count == frames
    a, a2 = cc.AffineHashById(2.0, 1.0), cc.AffineHashById(2.0, 1.0)
    assert a == a2 and a2 not in {a}  # equal, yet a set (or torch's cache keyed by hash) does not find it


def test_eq_hash_contract(cc):
    # Identity equality breaks the contract (eq_hash) and costs a compile per object (recompiles, whose message and
    # plain-torch lines tests/catalogue/test_recompiles.py pins): both items fail, every other item passes.
    outcomes = verdicts("AffineEqIdentity")
    assert {k for k, o in outcomes.items() if o.status == "failed"} == {("eq_hash", None), ("recompiles", "affine")}
    assert [f.rule for f in outcomes[("eq_hash", None)].failures] == ["eq_hash.equal-state-unequal"]
    assert [f.rule for f in outcomes[("recompiles", "affine")].failures] == ["recompiles.twins-recompile"]
    failure, _ = only_failure(verdicts("AffineHashById"), ("eq_hash", None), "eq_hash.hash-differs")
    assert failure.target == "__hash__"


# ----- symbolic (reference) types --------------------------------------------------------------------------------


def test_plain_torch_a_guard_fn_that_misses_a_field_keeps_a_stale_member(cc):
    for cls, after in ((cc.Stepper, 5), (cc.StepperGuardMissesStep, 2)):
        program = compiled(lambda s: s.get_step())
        s = cls(2)
        assert program(s) == 2
        s.bump(3)
        assert (program(s), s.get_step()) == (after, 5)


def test_guards_on_a_symbolic_class_name_the_call_the_field_and_guard_fn(cc):
    failure, text = only_failure(verdicts("StepperGuardMissesStep"), ("guards", "get_step"),
                                 "guards.unguarded-change")
    # The trigger is a state-changing call (obj.bump(n)) or a new object built with another step, whichever came
    # first (never an attribute set from outside: a state no real object reaches).
    assert ("a compiled program that read get_step() returns a stale result after obj.bump(" in text
            or "a compiled program that read get_step() returns a stale result with a new object (step)" in text)
    assert "obj.step =" not in text
    assert "the change to 'step' is not guarded (guard_fn returned [] before, [] after)" in text
    assert failure.details[0].startswith("eager:") and failure.details[1].startswith("compiled:")
    assert failure.details[0].split(":")[1] != failure.details[1].split(":")[1]
    assert all(o.status == "passed" for o in verdicts("Stepper").values())


def test_plain_torch_a_fake_kernel_reading_an_unregistered_member_does_not_compile(cc):
    x = torch.ones(3)
    assert cc.widen(x, cc.StepperFakeReadsStep(2)).shape == (2, 3)  # eager is fine
    with pytest.raises(Exception, match="attr 'step' on a FakeScriptObject"):
        compiled(lambda x, s: cc.widen(x, s))(x, cc.StepperFakeReadsStep(2))


def test_fake_kernel_names_the_member(cc):
    outcomes = verdicts("StepperFakeReadsStep")
    _, text = only_failure(outcomes, ("fake_kernel", "widen"), "fake_kernel.unregistered-member")
    assert "the fake kernel of samples_custom::widen reads 'step'" in text and "registered: get_step" in text
    # The guards item of that op cannot judge a program that does not compile: a skip pointing at fake_kernel.
    assert outcomes[("guards", "widen")].status == "skipped"
    assert "the fake_kernel[widen] item judges the op's fake kernel" in outcomes[("guards", "widen")].reason


def test_plain_torch_an_inlined_member_must_read_only_registered_members(cc):
    assert compiled(lambda g: g.doubled())(cc.Gauge(3)) == 6
    with pytest.raises(Exception, match="Member 'level' is not registered"):
        compiled(lambda g: g.bump(1))(cc.GaugeInlinedReadsLevel(3))
    g = cc.GaugeInlinedReadsLevel(3)
    assert (g.bump(1), g.level) == (4, 4)  # eager is fine


def test_inlined_names_the_member_read(cc):
    assert verdicts("Gauge")[("inlined", "doubled")].status == "passed"
    outcomes = verdicts("GaugeInlinedReadsLevel")
    _, text = only_failure(outcomes, ("inlined", "bump"), "inlined.untraceable")
    assert "the INLINED member bump cannot be traced by torch.compile: its body reads 'level'" in text
    assert outcomes[("inlined", "doubled")].status == "passed"


# ----- classes the plugin has never seen -------------------------------------------------------------------------

NEW_CLASSES = REGISTRATION_SOURCE + '''
import enum

@constant
class Quant:
    """scale and zero point; __eq__ forgets the zero point."""
    def __init__(self, scale: float, zero: int):
        self.scale, self.zero = scale, zero
    def __eq__(self, other):
        return isinstance(other, Quant) and self.scale == other.scale
    def __hash__(self):
        return hash(self.scale)
    def __fx_repr__(self):
        return f"Quant({self.scale!r}, {self.zero!r})", {"Quant": Quant}

@torch.library.custom_op("{NS}::quantize", mutates_args=())
def quantize(x: torch.Tensor, q: Quant) -> torch.Tensor:
    return torch.round(x / q.scale) + q.zero

@quantize.register_fake
def _(x, q):
    return torch.empty_like(x)

@constant
class Window:
    """lo and width; __fx_repr__ forgets width (the constructor's default comes back)."""
    def __init__(self, lo: int, width: int = 1):
        self.lo, self.width = lo, width
    def __eq__(self, other):
        return isinstance(other, Window) and (self.lo, self.width) == (other.lo, other.width)
    def __hash__(self):
        return hash((self.lo, self.width))
    def __fx_repr__(self):
        return f"Window({self.lo!r})", {"Window": Window}

@torch.library.custom_op("{NS}::shift", mutates_args=())
def shift(x: torch.Tensor, w: Window) -> torch.Tensor:
    return x + w.lo * w.width

@shift.register_fake
def _(x, w):
    return torch.empty_like(x)

@symbolic(guard_fn=lambda c: [c.capacity])
class Cache(Base):
    """guard_fn covers capacity, not length, which length_now() reads."""
    def __init__(self, capacity: int):
        self.capacity, self.length = capacity, 0
    def length_now(self) -> int:
        return self.length
    def append(self, n: int) -> None:
        if n < 0:
            raise ValueError("n must be >= 0")
        self.length = min(self.capacity, self.length + n)

@symbolic(None)
class Cursor(Base):
    """advance() moves it: one made inside a program exported non-strict is shared by the program's calls."""
    def __init__(self, pos: int):
        self.pos = pos

@torch.library.custom_op("{NS}::advance", mutates_args=())
def advance(x: torch.Tensor, c: Cursor) -> torch.Tensor:
    c.pos += 1
    return x + c.pos

@advance.register_fake
def _(x, c):
    return torch.empty_like(x)
'''


@pytest.fixture
def new_classes(pytester, request):
    """A module of classes written here (names unique to the test, so torch's registries hold no earlier ones)."""
    ns = f"t{zlib.crc32(request.node.name.encode()) % 10**8}"  # the same every run: the draws depend on it
    module = f"newlib_{ns}"
    source = NEW_CLASSES.replace("{NS}", ns)
    source = source.replace("@symbolic(guard_fn=lambda c: [c.capacity])",
                            "@symbolic(guard_fn=lambda c: [c.capacity], length_now=1)")
    pytester.makepyfile(**{module: source})
    pytester.syspathinsert()
    return module


def test_traps_in_classes_never_seen_are_found_by_the_gate(pytester, new_classes):
    # A fixed seed: without one the draws are random (hypothesis's profile for local runs), and a rare draw finds
    # a second, real trap in Quant first (scale 0.0 and -0.0, which its __eq__ calls equal; pinned on Divisor).
    result = run_inprocess(pytester, f"--torchbind-load={new_classes}", f"--torchbind-class={new_classes}.*",
                           "--torchbind-backends=eager", "-rA", "--hypothesis-seed=0")
    out = result.stdout.str()
    # One trap per class: Quant (guards), Cache (guards), Window (fx_repr and its matrix cell), Cursor (baked).
    # Quant's matrix cell passes: its first object (the simplest drawn: scale 0.0) makes every result inf or nan,
    # whatever the zero point, so the stale result cannot show there; the guards search is what finds it.
    result.assert_outcomes(failed=5, passed=17)  # Quant's and Window's fake_kernel items pass, the
    # recompiles items of Quant, Window and Cursor (objects built the same way compile once), and the tracing items
    # of all four (tracing leaves their objects untouched)
    for cls in ("Quant", "Cache", "Window", "Cursor"):
        assert f"PASSED torchbind[py:{new_classes}.{cls}]::tracing" in out
    for item in ("Quant]::recompiles[quantize]", "Window]::recompiles[shift]", "Cursor]::recompiles[advance]"):
        assert f"PASSED torchbind[py:{new_classes}.{item}" in out
    assert f"PASSED torchbind[py:{new_classes}.Quant]::matrix[quantize-eager]" in out
    assert f"FAILED torchbind[py:{new_classes}.Quant]::guards[quantize]" in out
    assert "Quant.__eq__ ignores 'zero'" in out
    assert f"FAILED torchbind[py:{new_classes}.Cache]::guards[length_now]" in out
    assert "the change to 'length' is not guarded (guard_fn returned [" in out
    # append(n) raises for n < 0: such calls are not state changes and never a failure of their own.
    assert "ValueError" not in out
    # An op that moves its object: compiled on a passed-in object it is right; made inside an exported program, the
    # object is baked in and the second call sees the first call's move.
    assert f"PASSED torchbind[py:{new_classes}.Cursor]::guards[advance]" in out
    assert f"FAILED torchbind[py:{new_classes}.Cursor]::baked[advance]" in out
    assert "non-strict export bakes the Cursor created in forward into the program as a constant" in out
    # __fx_repr__ forgets width: the rebuilt object differs, named with compiled-vs-eager numbers (the matrix too).
    assert f"FAILED torchbind[py:{new_classes}.Window]::fx_repr" in out
    assert "Window.__fx_repr__: __fx_repr__ does not rebuild the object: 'Window(" in out
    assert "evaluates to an object that differs in width" in out and ": eager tensor([" in out
    assert f"FAILED torchbind[py:{new_classes}.Window]::matrix[shift-eager]" in out


def test_adopter_examples_for_a_custom_class(pytester, new_classes):
    pytester.makeconftest(f'''
import conformance
from {new_classes} import Quant

@conformance.examples("{new_classes}.Quant")
def quants():
    return [Quant(0.5, 0), Quant(0.5, 3)]
''')
    result = run_inprocess(pytester, f"--torchbind-load={new_classes}", f"--torchbind-class={new_classes}.Quant",
                           "--torchbind-checks=eq_hash,fx_repr,guards", "-rA")
    out = result.stdout.str()
    result.assert_outcomes(failed=1, passed=2)
    assert "list(quants())[" in out and "from conftest import quants" in out  # the reproducer builds them the same way


def test_unknown_custom_class_is_a_usage_error(pytester, cc):
    result = run_inprocess(pytester, "--torchbind-class=nosuchmodule.Thing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no Python custom class nosuchmodule.Thing is registered" in result.stderr.str()


EDGE_CLASSES = REGISTRATION_SOURCE + '''
import enum

class Positive:
    """A precondition: the constructor rejects scale <= 0 (most generated floats)."""
    __slots__ = ("scale",)
    def __init__(self, scale: float):
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        self.scale = scale
    def __eq__(self, other):
        return isinstance(other, Positive) and self.scale == other.scale
    def __hash__(self):
        return hash(self.scale)
    def __fx_repr__(self):
        return f"Positive({self.scale!r})", {"Positive": Positive}
register(Positive, "value")

@torch.library.custom_op("{NS}::rescale", mutates_args=())
def rescale(x: torch.Tensor, p: Positive) -> torch.Tensor:
    return x * p.scale

@rescale.register_fake
def _(x, p):
    return torch.empty_like(x)

class Never:
    """Rejects every argument."""
    def __init__(self, n: int):
        raise ValueError("no")
    def __eq__(self, other):
        return self is other
    def __hash__(self):
        return 0
    def __fx_repr__(self):
        return "Never(0)", {"Never": Never}
register(Never, "value")

class Mode(enum.Enum):
    FAST = 1
    EXACT = 2
register(Mode, "value")

class Budget(Base):
    """spend's parameter has no annotation; guard_fn covers total but not spent, which only spend() changes
    (every new object starts with spent = 0) and remaining() reads."""
    def __init__(self, total: int):
        self.total, self.spent = total, 0
    def remaining(self) -> int:
        return self.total - self.spent
    def spend(self, n):
        self.spent += n
register(Budget, "reference", guard_fn=lambda b: [b.total], members={"remaining": oo.MemberType.USE_REAL})
'''


@pytest.fixture
def edge_classes(pytester, request):
    module = f"edgelib_{zlib.crc32(request.node.name.encode()) % 10**8}"  # the same every run (the draws)
    pytester.makepyfile(**{module: EDGE_CLASSES.replace("{NS}", module)})
    pytester.syspathinsert()
    return module


def _by_item(result, module):
    out = result.stdout.str()
    return {line.split(" ", 1)[1].split(" ")[0].replace(f"torchbind[py:{module}.", ""): line.split(" ", 1)[0]
            for line in out.splitlines() if line.startswith(("PASSED ", "FAILED ", "SKIPPED "))
            and "torchbind[py:" in line}, out


def test_preconditions_enums_slots_and_uncallable_methods(pytester, edge_classes):
    result = run_inprocess(pytester, f"--torchbind-load={edge_classes}", f"--torchbind-class={edge_classes}.*",
                           "--torchbind-backends=eager,export", "-rA")
    _, out = _by_item(result, edge_classes)
    # __slots__ without __weakref__: torch.export cannot trace the object (a known limitation, saying what helps);
    # torch.compile can.
    assert f"PASSED torchbind[py:{edge_classes}.Positive]::matrix[rescale-eager]" in out
    assert "adding '__weakref__' to __slots__ lifts it" in out
    # A constructor that rejects arguments: no failure; the objects it accepts are checked (and pass).
    for item in ("Positive]::eq_hash", "Positive]::fx_repr", "Positive]::guards[rescale]"):
        assert f"PASSED torchbind[py:{edge_classes}.{item}" in out
    # Nothing accepted: nothing compared, so a skip that says what to give.
    assert "Never's constructor rejected every generated argument set (last: ValueError: no)" in out
    assert f"@conformance.examples('{edge_classes}.Never')" in out
    # An Enum's objects are its members.
    assert f"PASSED torchbind[py:{edge_classes}.Mode]::eq_hash" in out
    assert f"PASSED torchbind[py:{edge_classes}.Mode]::fx_repr" in out
    # A state-changing method the plugin cannot call: no pass (the guard_fn is wrong, and only spend shows it).
    assert f"SKIPPED [1] {edge_classes}.py" in out and "but some methods were never called: " in out
    assert f"{edge_classes}.Budget.spend's parameter 'n' has no annotation" in out
    assert f"PASSED torchbind[py:{edge_classes}.Budget]::guards[remaining]" not in out
    assert "Traceback" not in out and "could not complete" not in out


def test_a_strategy_for_a_method_reaches_the_guard_search(pytester, edge_classes):
    pytester.makeconftest(f'''
import conformance
from hypothesis import strategies as st

conformance.strategy("{edge_classes}.Budget", "spend", arg="n")(lambda: st.integers(1, 3).map(str))
conformance.strategy("{edge_classes}.Positive", "__init__", arg="scale")(lambda: st.sampled_from(["0.5", "2.0"]))
''')
    result = run_inprocess(pytester, f"--torchbind-load={edge_classes}", f"--torchbind-class={edge_classes}.Budget",
                           f"--torchbind-class={edge_classes}.Positive", "--torchbind-backends=eager", "-rA")
    out = result.stdout.str()
    assert f"FAILED torchbind[py:{edge_classes}.Budget]::guards[remaining]" in out
    assert "returns a stale result after obj.spend(" in out and "the change to 'spent' is not guarded" in out
    assert "Positive(0.5)" in out or "Positive(2.0)" in out or f"PASSED torchbind[py:{edge_classes}.Positive]" in out


# ----- torch's own registered classes: the DTensor placements ------------------------------------------------------

PLACEMENTS = "torch.distributed.tensor.placement_types"


@pytest.fixture
def placements():
    """torch's DTensor placements (constant custom classes registered by torch itself) with example objects: their
    constructors are C++ bindings, so the plugin cannot generate them (a skip saying so) and an adopter gives them."""
    pt = pytest.importorskip(PLACEMENTS)
    with REGISTRY.scratch():
        conformance.examples(f"{PLACEMENTS}.Shard")(lambda: [pt.Shard(0), pt.Shard(1)])
        conformance.examples(f"{PLACEMENTS}.Replicate")(lambda: [pt.Replicate()])
        conformance.examples(f"{PLACEMENTS}.Partial")(lambda: [pt.Partial("sum"), pt.Partial("avg")])
        yield pt, Engine(Settings(examples=20))


def test_torchs_placements_pass_and_mask_partial_is_reported(placements):
    pt, engine = placements
    for name in ("Shard", "Replicate", "Partial"):
        outcomes = run_class(f"{PLACEMENTS}.{name}", engine=engine)
        assert {(o.check, o.status) for o in outcomes} == {("eq_hash", "passed"), ("fx_repr", "passed"),
                                                           ("tracing", "passed")}, name
    found = {o.check: o for o in run_class(f"{PLACEMENTS}._MaskPartial", engine=engine)}
    # Plain torch: _MaskPartial.__fx_repr__ names a class that does not exist (and writes reduce_op unquoted), so
    # the code torch would generate for a graph holding one cannot run.
    text, names = pt._MaskPartial().__fx_repr__()
    with pytest.raises(AttributeError, match="has no attribute 'MaskPartial'"):
        eval(text, {"torch": torch, **names})
    assert found["fx_repr"].status == "failed"
    assert found["fx_repr"].failures[0].rule == "fx_repr.not-evaluable"
    assert "has no attribute 'MaskPartial'" in found["fx_repr"].failures[0].summary
    # Each _MaskPartial owns a mask buffer compared by identity: equal-looking objects are unequal by design, so
    # every new one recompiles a program (reported; an adopter who accepts it lists it in the baseline).
    assert found["eq_hash"].status == "failed"
    assert found["eq_hash"].failures[0].rule == "eq_hash.equal-state-unequal"
    a, b = pt._MaskPartial(), pt._MaskPartial()
    assert vars(a) == vars(b) and a != b


# ----- the gate around them: xdist, isolation, baseline, reports, merge --------------------------------------------


@pytest.mark.process
def test_custom_class_items_go_through_xdist_isolation_baseline_and_merge(pytester, cc):
    import json

    from conformance.__main__ import main

    args = ["-p", "no:cacheprovider", f"--torchbind-load={MOD}", f"--torchbind-class={MOD}.Affine*",
            "--torchbind-examples=20"]
    # Under xdist, each item in a forked worker (process isolation is the default), accepting the failures found.
    accept = pytester.runpytest_subprocess(*args, "-n", "2", "--torchbind-baseline=b.json", "--torchbind-accept",
                                           "--torchbind-report=shard.json", "-k", "eq_hash or fx_repr")
    assert accept.ret == pytest.ExitCode.TESTS_FAILED, accept.stdout.str()[-2000:]
    entries = json.loads((pytester.path / "b.json").read_text())
    keys = set(entries["known_failures"])
    assert {f"torchbind[py:{MOD}.AffineEqIdentity]::eq_hash", f"torchbind[py:{MOD}.AffineHashById]::eq_hash",
            f"torchbind[py:{MOD}.AffineReprDropsOffset]::fx_repr"} <= keys
    # The baseline makes the gate green: the known failures are strict xfails.
    gated = pytester.runpytest_subprocess(*args, "--torchbind-baseline=b.json", "--torchbind-report=rest.json",
                                          "-k", "eq_hash or fx_repr")
    assert gated.ret == pytest.ExitCode.OK, gated.stdout.str()[-2000:]
    gated.assert_outcomes(passed=11, xfailed=3)  # 7 classes, 2 items each
    # Two reports (one under xdist, one serial) merge into one; each class keeps its verdicts.
    assert main(["merge", str(pytester.path / "shard.json"), str(pytester.path / "rest.json"),
                 "--output", str(pytester.path / "merged.json")]) == 0
    merged = json.loads((pytester.path / "merged.json").read_text())
    assert f"{MOD}.AffineReprDropsOffset" in json.dumps(merged)
    doc = json.loads((pytester.path / "rest.json").read_text())
    verdicts = {c["qualname"]: {v["item"]: v["status"] for v in c["verdicts"]} for c in doc["classes"]}
    assert verdicts[f"{MOD}.Affine"] == {"eq_hash": "passed", "fx_repr": "passed"}
    assert verdicts[f"{MOD}.AffineReprDropsOffset"]["fx_repr"] == "failed"


# ----- objects baked into a program as constants -------------------------------------------------------------------


class _MakesTicker(torch.nn.Module):
    def forward(self, x):
        from sample_classes.custom_classes import Ticker

        return torch.ops.samples_custom.tick(x, Ticker(2))


def test_plain_torch_non_strict_export_bakes_an_object_made_in_forward_into_the_program(cc):
    x = torch.ones(1)
    assert [_MakesTicker()(x).item() for _ in range(2)] == [3.0, 3.0]  # a new Ticker per call
    ep = torch.export.export(_MakesTicker(), (x,), strict=False)
    assert [s.kind.name for s in ep.graph_signature.input_specs] == ["CUSTOM_OBJ", "USER_INPUT"]
    program = ep.module()
    assert [program(x).item() for _ in range(2)] == [3.0, 4.0]  # one Ticker, shared by the calls
    with pytest.raises(Exception, match="opaque object was created in the middle of the program"):
        torch.export.export(_MakesTicker(), (x,), strict=True)  # strict export and torch.compile refuse it
    # Passed in, the object is followed: the op that changes it is compiled and compared fairly.
    program, t = compiled(lambda x, t: cc.tick(x, t)), cc.Ticker(2)
    assert [program(x, t).item() for _ in range(2)] == [3.0, 4.0] and t.count == 4


def test_baked_names_the_object_the_op_and_both_calls(cc):
    outcomes = verdicts("Ticker")
    failure, text = only_failure(outcomes, ("baked", "tick"), "baked.shared-object")
    assert "non-strict export bakes the Ticker created in forward into the program as a constant " \
           "(lifted_custom_0), and samples_custom::tick changes it, so call 2 of the exported program" in text
    eager, exported = failure.details
    assert eager.startswith("eager, calls 1 and 2:") and exported.startswith("exported, calls 1 and 2:")
    assert "strict=False).module()" in failure.repro
    assert outcomes[("guards", "tick")].status == "passed"  # eager on a twin: the op's own change is no stale result
    assert verdicts("Stepper")[("baked", "scale")].status == "passed"  # baked in too, but scale leaves it as it is


# ----- the coverage matrix ---------------------------------------------------------------------------------------


def _cell(name: str, row: str, backend: str):
    from conformance.matrix.custom.run import run_cell as run_custom_cell

    return run_custom_cell(Engine(Settings(examples=20)).context(f"{MOD}.{name}"), row, backend)


class _Affine(torch.nn.Module):
    def forward(self, x, s):
        return torch.ops.samples_custom.affine(x, s)


def test_plain_torch_export_bakes_a_constant_object_in_and_cannot_save_it(cc):
    x = torch.arange(3.0)
    ep = torch.export.export(_Affine(), (x, cc.Affine(2.0, 1.0)), strict=False)
    assert ep.module()(x, cc.Affine(3.0, 0.0)).tolist() == [1.0, 3.0, 5.0]  # eager: [0, 3, 6]
    import io

    from torch._export.serde.serialize import SerializeError

    with pytest.raises(SerializeError, match="Failed serializing node"):
        torch.export.save(ep, io.BytesIO())


def test_the_matrix_of_constant_and_symbolic_classes(cc):
    expected = {"eager": "passed", "aot_eager": "passed", "export": "unsupported", "export_strict": "unsupported",
                "export_saveload": "unsupported"}
    cells = {b: _cell("Affine", "affine", b) for b in expected}
    assert {b: c.status.value for b, c in cells.items()} == expected
    assert cells["export"].limitation == "custom-export-constant-object"
    assert cells["export_saveload"].limitation == "custom-saveload-object-input"
    assert "# objects, in order:" in cells["eager"].program and "#   another state: obj = Affine(" in cells["eager"].program
    # A symbolic object is a real graph input: export follows it; so is a hoisted constant one (hoist=True).
    for backend in ("eager", "export", "export_strict"):
        assert _cell("Stepper", "scale", backend).status.value == "passed", backend
        assert _cell("AffineHoistedEqIgnoresOffset", "affine", backend).status.value == "passed", backend
    # The guard bug shows in the matrix too: the object changed in the field __eq__ ignores gets a stale result.
    broken = _cell("AffineEqIgnoresOffset", "affine", "eager")
    assert broken.status.value == "failed"
    # changed only to a state the constructor builds (offset from another object's arguments), never a field alone
    assert broken.reason.startswith("changed: obj = AffineEqIgnoresOffset(")
    assert "obj.__dict__.update(vars(AffineEqIgnoresOffset(" in broken.reason and "obj.offset = " not in broken.reason
    assert any(": eager tensor(" in d and ", torch.compile eager tensor(" in d for d in broken.details)


@pytest.mark.process  # inductor and AOTInductor compile C++ (compiler processes)
def test_the_matrix_through_inductor_and_aotinductor(cc):
    assert _cell("Affine", "affine", "inductor").status.value == "passed"
    aoti = _cell("Stepper", "scale", "aoti")
    assert (aoti.status.value, aoti.limitation) == ("unsupported", "custom-aoti-object")
    assert "Unsupported input type as_" in aoti.details[0]


# ----- the matrix's objects: chosen to show a program that does not follow the object ---------------------------

CLAMP_CLASSES = NEW_CLASSES[:NEW_CLASSES.index("@constant\nclass Quant")] + '''
@constant
class Clamp:
    """A correct constant class: lo and hi, compared and rebuilt whole."""
    def __init__(self, lo: float, hi: float):
        self.lo, self.hi = lo, hi
    def __eq__(self, other):
        return isinstance(other, Clamp) and (self.lo, self.hi) == (other.lo, other.hi)
    def __hash__(self):
        return hash((self.lo, self.hi))
    def __fx_repr__(self):
        return f"Clamp({self.lo!r}, {self.hi!r})", {"Clamp": Clamp}

@torch.library.custom_op("{NS}::clamp", mutates_args=())
def clamp(x: torch.Tensor, c: Clamp) -> torch.Tensor:
    return x.clamp(c.lo, c.hi)

@clamp.register_fake
def _(x, c):
    return torch.empty_like(x)

@torch.library.custom_op("{NS}::passthrough", mutates_args=())
def passthrough(x: torch.Tensor, c: Clamp) -> torch.Tensor:
    return x.clone()

@passthrough.register_fake
def _(x, c):
    return torch.empty_like(x)
'''


def test_the_matrix_picks_objects_that_change_the_output(pytester, request):
    import importlib

    from conformance.matrix.custom.run import run_cell as run_custom_cell

    ns = f"t{zlib.crc32(request.node.name.encode()) % 10**8}"
    pytester.makepyfile(**{f"clamplib_{ns}": CLAMP_CLASSES.replace("{NS}", ns)})
    pytester.syspathinsert()
    lib = importlib.import_module(f"clamplib_{ns}")

    # Plain torch: export takes a constant object as a constant, so the exported program ignores the object it is
    # called with; only an object whose clamp range changes the output shows it (here on non-negative inputs).
    class Program(torch.nn.Module):
        def forward(self, x, c):
            return getattr(torch.ops, ns).clamp(x, c)

    x = torch.arange(6.0)
    exported = torch.export.export(Program(), (x, lib.Clamp(0.0, 0.0)), strict=False).module()
    assert torch.equal(exported(x, lib.Clamp(-1.5, 0.0)), torch.zeros(6))  # the same output as eager: nothing shows
    assert torch.equal(exported(x, lib.Clamp(0.0, 2.0)), torch.zeros(6))  # eager: [0, 1, 2, 2, 2, 2]

    ctx = Engine(Settings(examples=20)).context(f"clamplib_{ns}.Clamp")
    export = run_custom_cell(ctx, "clamp", "export")
    assert (export.status.value, export.limitation) == ("unsupported", "custom-export-constant-object"), export
    assert run_custom_cell(ctx, "clamp", "eager").status.value == "passed"
    # An op whose output no object changes: not a pass (a baked program gives the same), saying it could not tell.
    through = run_custom_cell(ctx, "passthrough", "export")
    assert through.status.value == "untold"
    assert "cannot tell a program that follows the object from one that holds the first object baked in" in \
        through.reason and "give objects that do" in through.reason, through.reason
