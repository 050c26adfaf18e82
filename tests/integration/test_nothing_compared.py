"""A class of which no object can be built (a new user's trial: an FP8 scaling state whose constructor rejected
every argument the plugin generated): every item skips, and before this rule pytest exited 0 — a CI gate that
compared nothing reported success, and several skips blamed an op or member ("fp8nx::qdq rejected every object
tried in eager", "plain eager raises on every object tried: no object to try") for what the constructor did.

Now every skip gives the one cause (no object could be built: the constructor's error, and what to give), and a
class of which nothing was compared among the items that ran makes the run exit 1 (``pytest.ExitCode.
TESTS_FAILED``) with a summary line naming it. Items the user deselected do not count; a class with one
comparison exits 0 as before; under pytest-xdist the controller decides once.
"""

from __future__ import annotations

import re
import zlib
from xml.etree import ElementTree

import pytest
import torch

from conftest import REGISTRATION_SOURCE, run_inprocess

# The trial's shape: a constant (value) recipe and a symbolic (reference) scaling state with a USE_REAL field and
# an INLINED reader, custom ops taking each, one with an autograd formula. Every constructor call raises.
REFUSING = REGISTRATION_SOURCE + '''
from torch._library.opaque_object import MemberType


class Recipe:
    def __init__(self, margin: int = 0, fmt: str = "E4M3"):
        raise ValueError("Recipe is made by make_recipe() only")

    def __eq__(self, other):
        return isinstance(other, Recipe) and self.margin == other.margin

    def __hash__(self):
        return hash(self.margin)

    def __fx_repr__(self):
        return f"Recipe({self.margin!r})", {"Recipe": Recipe}


constant(Recipe)


class State(Base):
    def __init__(self, margin: int = 0, init_amax: float = 1.0):
        raise ValueError("State is made by make_state() only")

    def get_scale(self) -> float:
        return self.scale


register(State, "reference", guard_fn=lambda s: [s.scale],
         members={"scale": MemberType.USE_REAL, "get_scale": MemberType.INLINED})


@torch.library.custom_op("{NS}::to_scale", mutates_args=())
def to_scale(amax: torch.Tensor, recipe: Recipe) -> torch.Tensor:
    return 448.0 / amax.clamp_min(1e-12) / 2.0 ** recipe.margin


@to_scale.register_fake
def _(amax, recipe):
    return torch.empty_like(amax)


@torch.library.custom_op("{NS}::scale_by", mutates_args=())
def scale_by(x: torch.Tensor, state: State) -> torch.Tensor:
    return x * state.scale


@scale_by.register_fake
def _(x, state):
    return torch.empty_like(x)


def _setup(ctx, inputs, output):
    ctx.state = inputs[1]


scale_by.register_autograd(lambda ctx, grad: (grad * ctx.state.scale, None), setup_context=_setup)


class Picky:
    """Built fine; its op rejects every input in eager: its fake and cells cannot be compared, its __eq__ can."""

    def __init__(self, n: int = 1):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, Picky) and self.n == other.n

    def __hash__(self):
        return hash(self.n)

    def __fx_repr__(self):
        return f"Picky({self.n!r})", {"Picky": Picky}


constant(Picky)


@torch.library.custom_op("{NS}::picky", mutates_args=())
def picky(x: torch.Tensor, p: Picky) -> torch.Tensor:
    raise ValueError("picky accepts nothing")


@picky.register_fake
def _(x, p):
    return torch.empty_like(x)
'''

#: Skip texts that blame an op, a member or eager for what the constructor did (the trial's wrong causes).
WRONG_CAUSES = ("rejected every argument set with the objects tried", "rejected every object tried",
                "no object to try", "raises on every object tried", "ran in eager, so nothing was compared",
                "no fake output was compared")

#: The one skip that holds with or without objects: AOTInductor packages no backward (a matrix n/a).
NO_BACKWARD = "AOTInductor compiles an inference-only program"


@pytest.fixture
def refusing(pytester, request):
    module = f"refusing_{zlib.crc32(request.node.name.encode()) % 10**8}"  # the same every run (the draws)
    pytester.makepyfile(**{module: REFUSING.replace("{NS}", module)})
    pytester.syspathinsert()
    return module


def _skips(out: str) -> list[str]:
    """The reasons of the ``-rs`` summary lines (``SKIPPED [n] file:line: reason``)."""
    return [m.group(1) for m in re.finditer(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", out, re.M)]


def test_plain_torch_the_constructors_raise_whatever_the_arguments(pytester, refusing):
    import importlib

    mod = importlib.import_module(refusing)
    for args in ((), (0, "E4M3"), (3, "E5M2")):
        with pytest.raises(ValueError, match="made by make_recipe"):
            mod.Recipe(*args)
    for args in ((), (0, 1.0), (2, 448.0)):
        with pytest.raises(ValueError, match="made by make_state"):
            mod.State(*args)
    # The ops themselves are fine: given an object, eager runs them (the object is what is missing).
    state = object.__new__(mod.State)
    state.scale = 2.0
    assert torch.equal(mod.scale_by(torch.ones(2), state), torch.full((2,), 2.0))


def test_no_object_built_every_skip_says_so_and_the_run_fails(pytester, refusing):
    result = run_inprocess(pytester, f"--torchbind-load={refusing}", f"--torchbind-class={refusing}.Recipe",
                           f"--torchbind-class={refusing}.State", "--torchbind-examples=10", "-rs",
                           "--torchbind-backends=eager,aot_eager,inductor,export",
                           "--junitxml=junit.xml")
    out = result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == outcomes.get("failed", 0) == 0 and outcomes["skipped"] > 20, out[-3000:]
    # Nothing compared: the gate does not report success.
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    for cls, error in (("Recipe", "ValueError: Recipe is made by make_recipe() only"),
                       ("State", "ValueError: State is made by make_state() only")):
        name = f"{refusing}.{cls}"
        line = next((ln for ln in out.splitlines() if ln.startswith(f"torchbind: nothing was compared for {name}:")),
                    None)
        assert line is not None, out[-3000:]
        assert "items that ran were skipped" in line and f"@conformance.examples({name!r})" in line, line
        assert f"conformance.strategy({name!r}, '__init__', ...)" in line and error in line, line
    reasons = _skips(out)
    assert reasons, out[-3000:]
    for reason in reasons:
        assert not any(wrong in reason for wrong in WRONG_CAUSES), reason
        if reason.startswith(NO_BACKWARD):
            continue
        cls = "State" if f"{refusing}.State" in reason else "Recipe"
        name = f"{refusing}.{cls}"
        assert f"so no object of {name} could be built and nothing was compared" in reason, reason
        assert f"{cls}'s constructor rejected every generated argument set (last: ValueError: {cls} is made" \
            in reason, reason
        assert f"@conformance.examples({name!r})" in reason, reason
        assert f"conformance.strategy({name!r}, '__init__', ...)" in reason, reason
    # Item by item (JUnit XML names each): the checks that used to blame an op or member, the constructor's own
    # checks and the matrix cells all give the constructor's cause.
    skipped = {f'{case.get("classname")}::{case.get("name")}': case.find("skipped").get("message", "")
               for case in ElementTree.parse(pytester.path / "junit.xml").iter("testcase")
               if case.find("skipped") is not None}
    assert len(skipped) == outcomes["skipped"], sorted(skipped)
    for item in ("fake_kernel[to_scale]", "fake_kernel[scale_by]", "baked[scale_by]", "inlined[get_scale]",
                 "tracing", "recompiles[scale_by]", "guards[scale_by]", "eq_hash", "fx_repr",
                 "matrix[scale_by-eager]", "matrix[scale_by-export]", "matrix[scale_by.backward-eager]",
                 "matrix[to_scale-inductor]"):
        message = next((m for name, m in skipped.items() if name.endswith(item)), None)
        assert message is not None, (item, sorted(skipped))
        assert "could be built and nothing was compared" in message, (item, message)


def test_a_class_with_one_comparison_exits_0_and_only_its_ran_items_count(pytester, refusing):
    picky = f"{refusing}.Picky"
    common = (f"--torchbind-load={refusing}", f"--torchbind-class={picky}", "--torchbind-checks=eq_hash,fake_kernel,"
              "matrix", "--torchbind-backends=eager", "--torchbind-examples=10", "-rA")
    # Plain torch: an object is built; the op rejects it; __eq__ holds.
    import importlib

    mod = importlib.import_module(refusing)
    with pytest.raises(ValueError, match="picky accepts nothing"):
        mod.picky(torch.ones(2), mod.Picky(1))
    assert mod.Picky(2) == mod.Picky(2) and hash(mod.Picky(2)) == hash(mod.Picky(2))

    result = run_inprocess(pytester, *common)
    out = result.stdout.str()
    result.assert_outcomes(passed=1, skipped=2)  # eq_hash compared; the op's fake and cell could not be
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    assert "nothing was compared for" not in out
    # Objects were built, so the op is what rejected them: its own text, not the constructor's.
    assert "picky rejected every argument set with the objects tried" in out, out[-3000:]
    assert "could be built" not in out

    # The user narrows the run to the items that could not compare: those ran and compared nothing.
    narrowed = run_inprocess(pytester, *common, "-k", "not eq_hash")
    assert narrowed.ret == pytest.ExitCode.TESTS_FAILED, narrowed.stdout.str()[-3000:]
    assert f"torchbind: nothing was compared for {picky}: all 2 of its items" in narrowed.stdout.str()

    # A class whose items the user deselected ran none: it does not fail the run.
    deselected = run_inprocess(pytester, *common, f"--torchbind-class={refusing}.State", "-k", "Picky and eq_hash")
    assert deselected.ret == pytest.ExitCode.OK, deselected.stdout.str()[-3000:]
    deselected.assert_outcomes(passed=1)
    assert "nothing was compared" not in deselected.stdout.str()


@pytest.mark.process
def test_under_xdist_the_controller_decides_once(pytester, refusing):
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--torchbind-load={refusing}",
                                           f"--torchbind-class={refusing}.State", "-n", "2",
                                           "--torchbind-checks=fake_kernel,baked,inlined,tracing",
                                           "--torchbind-backends=eager", "--torchbind-examples=10")
    out = result.stdout.str()
    result.assert_outcomes(skipped=4)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert out.count(f"torchbind: nothing was compared for {refusing}.State: all 4 of its items") == 1, out[-3000:]


def test_the_summary_counts_skips_by_cause_not_by_wording(pytester, refusing):
    """A matrix cell words the constructor's cause "no eager reference: CAUSE", a check "CAUSE": one cause, and the
    summary line counts it once (issue 31: a new user's trial read "the most common reason (38 of 55)" where 53 of
    55 skips had that cause; the other 15 were the checks' wording)."""
    state = f"{refusing}.State"
    result = run_inprocess(pytester, f"--torchbind-load={refusing}", f"--torchbind-class={state}", "-rs",
                           "--torchbind-checks=fake_kernel,baked,guards,matrix", "--torchbind-backends=eager,export",
                           "--torchbind-examples=10")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    cause = (f"{state}'s constructor rejected every generated argument set (last: ValueError: State is made by "
             f"make_state() only), so no object of {state} could be built and nothing was compared; give objects "
             f"with @conformance.examples({state!r}) or the constructor's arguments with "
             f"conformance.strategy({state!r}, '__init__', ...)")
    counts = {m.group(2): int(m.group(1)) for m in re.finditer(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$", out, re.M)}
    # Both wordings are there (so counting wordings would split the cause), and every skip has the cause.
    assert counts == {cause: counts[cause], f"no eager reference: {cause}": counts[f"no eager reference: {cause}"]}
    n = sum(counts.values())
    assert (f"torchbind: nothing was compared for {state}: all {n} of its items that ran were skipped (n/a "
            f"included), so this run is no evidence about it and fails; the most common reason ({n} of {n}): {cause}; "
            "pytest -rs lists every item's reason") in out, out[-3000:]


def test_the_summary_quotes_a_cause_as_worded_when_it_has_one_wording():
    from conformance.core.results import Verdict
    from conformance.plugin.recorder import nothing_compared

    verdicts = [Verdict.skip("matrix", "m.C", f"op-{b}", "no eager reference: plain eager raises ValueError: no")
                for b in ("eager", "inductor")] + [Verdict.skip("guards", "m.C", "op", "other")]
    assert nothing_compared(verdicts) == [
        "nothing was compared for m.C: all 3 of its items that ran were skipped (n/a included), so this run is no "
        "evidence about it and fails; the most common reason (2 of 3): no eager reference: plain eager raises "
        "ValueError: no; give what the reasons ask for (example objects with @conformance.examples('m.C'), "
        "arguments with conformance.strategy('m.C', ...)); pytest -rs lists every item's reason"]


def test_once_the_constructor_refused_every_draw_later_items_skip_without_drawing(pytester, refusing, monkeypatch):
    # Each item used to draw and be refused again (the trial's run took 118 s to compare nothing): the first
    # refusal is kept on the class's context, and every later search or draw raises the same skip at once.
    import importlib

    from conformance.core.results import NotApplicable
    from conformance.core.settings import Settings
    from conftest import engine_of

    mod = importlib.import_module(refusing)
    calls = []
    original = mod.Recipe.__init__

    def counting(self, *args, **kwargs):
        calls.append(args)
        original(self, *args, **kwargs)

    monkeypatch.setattr(mod.Recipe, "__init__", counting)
    ctx = engine_of(None, Settings(examples=10)).context(f"{refusing}.Recipe")
    with pytest.raises(NotApplicable) as first:
        ctx.drawn(3, "first item")
    assert calls and "could be built and nothing was compared" in str(first.value)
    tried = len(calls)
    for later in (lambda: ctx.drawn(3, "second item"), lambda: ctx.search(ctx.objects(), lambda o: None, 10)):
        with pytest.raises(NotApplicable) as again:
            later()
        assert str(again.value) == str(first.value) and len(calls) == tried  # the same skip, nothing drawn
