"""The ``guards`` check on a constant class must not let the draw decide its verdict (a new user's trial, issue 31).

A quantization scheme whose ``__eq__`` forgot ``symmetric`` makes a compiled program return a stale result, but
only on inputs whose result depends on ``symmetric``: a tensor of one element (or groups of one) quantizes the same
either way. The trial's run drew such inputs (shapes ``[1]``, ``[1, 3, 1]``) and passed the class; three identical
runs failed it. Shown first with plain torch, then the verdict under several ``--hypothesis-seed`` values (one of
which passed the class before), then the note when no input can tell the field apart.
"""

from __future__ import annotations

import sys
import types

import hypothesis
import pytest
import torch

import conformance
from conformance.core.results import Evidence, Status
from conformance.core.settings import Settings
from conformance.engine.search import hypothesis_settings
from conformance.runner import run_class

from conftest import REGISTRATION_SOURCE, engine_of, run_inprocess

#: The trial's broken class, written here ({NS}: a namespace of the test's own): ``__eq__``/``__hash__`` written
#: before asymmetric quantization was added, so ``symmetric`` is ignored.
SOURCE = REGISTRATION_SOURCE + '''
def _fake_quant(w, num_bits, group_size, symmetric):
    n = w.shape[-1]
    g = group_size if n % group_size == 0 else n
    wg = w.reshape(*w.shape[:-1], n // g, g)
    if symmetric:
        qmax = 2 ** (num_bits - 1) - 1
        scale = wg.abs().amax(-1, keepdim=True).clamp(min=1e-8) / qmax
        out = torch.clamp(torch.round(wg / scale), -qmax - 1, qmax) * scale
    else:
        qmax = 2 ** num_bits - 1
        lo, hi = wg.amin(-1, keepdim=True), wg.amax(-1, keepdim=True)
        scale = (hi - lo).clamp(min=1e-8) / qmax
        zp = torch.round(-lo / scale)
        out = (torch.clamp(torch.round(wg / scale) + zp, 0, qmax) - zp) * scale
    return out.reshape(w.shape)

@constant
class QuantScheme:
    def __init__(self, num_bits: int = 8, group_size: int = 4, symmetric: bool = True):
        if num_bits not in (2, 4, 8):
            raise ValueError(f"num_bits must be 2, 4 or 8, got {num_bits}")
        if group_size <= 0:
            raise ValueError("group_size must be positive")
        self.num_bits, self.group_size, self.symmetric = num_bits, group_size, symmetric
    def __eq__(self, other):
        return (isinstance(other, QuantScheme) and self.num_bits == other.num_bits
                and self.group_size == other.group_size)
    def __hash__(self):
        return hash((self.num_bits, self.group_size))
    def __fx_repr__(self):
        return (f"QuantScheme({self.num_bits!r}, {self.group_size!r}, {self.symmetric!r})",
                {"QuantScheme": QuantScheme})

@torch.library.custom_op("{NS}::fake_quant", mutates_args=())
def fake_quant(w: torch.Tensor, scheme: QuantScheme) -> torch.Tensor:
    return _fake_quant(w, scheme.num_bits, scheme.group_size, scheme.symmetric)

@fake_quant.register_fake
def _(w, scheme):
    return torch.empty_like(w)
'''


def _module(name: str) -> types.ModuleType:
    """The class registered in a module of its own (op namespace ``name``), importable by name."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(SOURCE.replace("{NS}", name), f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - ours
    return module


@pytest.fixture(scope="module")
def gd():
    return _module("guards_draws")


def test_plain_torch_the_stale_result_shows_only_on_inputs_that_depend_on_the_ignored_field(gd):
    a, b = gd.QuantScheme(2, 2, False), gd.QuantScheme(2, 2, True)
    assert a == b
    op = torch.ops.guards_draws.fake_quant
    for w in (torch.ones(1), torch.ones(1, 3, 1)):  # the trial's draws: eager cannot tell a from b here
        assert torch.equal(op(w, a), op(w, b))
    w = torch.arange(3, dtype=torch.float32)
    torch._dynamo.reset()
    program = torch.compile(lambda x, s: op(x, s), backend="eager", fullgraph=True)
    assert torch.equal(program(w, a), op(w, a))
    assert not torch.equal(op(w, a), op(w, b))  # eager: symmetric changes the result
    assert torch.equal(program(w, b), op(w, a))  # compiled: a's result for b (the program compiled for a)
    torch._dynamo.reset()


@pytest.mark.process
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_guards_verdict_does_not_depend_on_the_seed(pytester, monkeypatch, seed):
    # Seed 0 drew only pairs and inputs that could not tell symmetric apart and passed the class (before the fix).
    # The plugin's profile for local runs (random draws, seeded by --hypothesis-seed), as the trial ran it; on CI
    # the plugin derandomizes and the seed would not matter.
    monkeypatch.delenv("CI", raising=False)
    previous = hypothesis.settings.get_current_profile_name()
    hypothesis.settings.load_profile("default")
    assert not hypothesis_settings().derandomize
    ns = f"gdseed{seed}"
    pytester.makepyfile(**{ns: SOURCE.replace("{NS}", ns)})
    pytester.syspathinsert()
    try:
        result = run_inprocess(pytester, f"--torchbind-load={ns}", f"--torchbind-class={ns}.QuantScheme",
                               "--torchbind-checks=guards", f"--hypothesis-seed={seed}", "-rA")
    finally:
        hypothesis.settings.load_profile(previous)
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert f"FAILED torchbind[py:{ns}.QuantScheme]::guards[fake_quant]" in out
    assert "QuantScheme.__eq__ ignores 'symmetric': a == b" in out, out


def test_guards_says_when_no_input_told_the_ignored_field_apart(gd):
    name = "guards_draws.QuantScheme"

    def register():  # inputs on which symmetric never changes the result: one element per group
        conformance.strategy("guards_draws::fake_quant", arg="w")(
            lambda: __import__("hypothesis").strategies.sampled_from(["torch.ones(1)", "torch.ones(1, 3, 1)"]))

    [outcome] = run_class(name, engine=engine_of(register, Settings(examples=30)), only={"guards"})
    assert outcome.status is Status.PASSED, outcome.render()
    [note] = [n for n in outcome.notes if "could not tell 'symmetric' apart" in n]
    assert "QuantScheme.__eq__ calls objects equal that differ in 'symmetric'" in note, note
    assert "gave them the same result on every input tried (2 inputs" in note, note
    assert "was not judged" in note and "conformance.strategy('guards_draws.QuantScheme', " \
        "'guards_draws::fake_quant'" in note, note


def test_guards_on_a_field_every_result_depends_on_needs_no_note(gd):
    # The same class on inputs that show symmetric: the stale result is found; no note alongside it.
    [outcome] = run_class("guards_draws.QuantScheme", engine=engine_of(None, Settings(examples=30)),
                          only={"guards"})
    assert outcome.status is Status.FAILED and not outcome.notes, outcome.render()
    assert outcome.failures[0].rule == "guards.eq-ignores-state"


def test_the_verdict_does_not_rest_on_the_searchs_own_objects(gd, monkeypatch):
    # Under hypothesis seed 122 (the plugin's profile for local runs, random draws) every object the search kept had
    # one value of 'symmetric', so no equal pair differed in it and the class passed with a note: objects and inputs
    # drawn the same way on every run (seeded by the class and op) now join the search's before pairs are crossed.
    import hypothesis.core

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(hypothesis.core, "global_force_seed", 122)  # what --hypothesis-seed=122 sets
    previous = hypothesis.settings.get_current_profile_name()
    hypothesis.settings.load_profile("default")
    try:
        [outcome] = run_class("guards_draws.QuantScheme", engine=engine_of(None, Settings(examples=30)),
                              only={"guards"})
    finally:
        hypothesis.settings.load_profile(previous)
    assert outcome.status is Status.FAILED and not outcome.notes, outcome.render()
    assert outcome.failures[0].rule == "guards.eq-ignores-state"


def test_evidence_reads_for_one_and_many():
    evidence = Evidence({"pair of objects told apart by __eq__": 1, "output": 16, "compiled call of a twin": 3})
    assert evidence.describe() == ("3 compiled calls of a twin, 16 outputs, 1 pair of objects told apart by __eq__ "
                                   "compared")
    evidence.add("pair of objects told apart by __eq__", 76)
    assert "77 pairs of objects told apart by __eq__" in evidence.describe()
