"""What ``--torchbind-accept`` says each new baseline entry is, from the class's kind and the stable rule ids of the
run's failures (issue 31: a new user's trial accepted a Python custom class whose ``guard_fn`` leaves out a field
its op's backward reads; the warning called the class's ``guards`` failure "a bug in the fake ... disagrees with the
C++ class", though the class has neither, and the three matrix cells that fail because of that ``guard_fn`` were
labelled "[a compiled program differs from eager]", a torch bug, though their own text blames ``guard_fn``).

The plain-torch lines behind the failures these labels describe are pinned elsewhere (``guards.stale-gradient``:
tests/unit/checks/test_guards_backward.py; ``guards.eq-ignores-state``: tests/integration/test_reuse.py); here the
run's verdicts are the plugin's own, and what is asserted is the words put on them.
"""

from __future__ import annotations

import json

from conftest import REGISTRATION_SOURCE, run_inprocess

# Amp: a symbolic class whose guard_fn returns its label and leaves out scale, which only the backward of
# {NS}::amp reads (the trial's FP8 scaling state, made small). Shift: a constant class whose __eq__ leaves out by.
MODULE = REGISTRATION_SOURCE + '''
import conformance


@symbolic(guard_fn=lambda s: [s.label], scale=True)
class Amp(Base):
    def __init__(self, label: str = "a", scale: float = 2.0):
        self.label, self.scale = label, float(scale)


@torch.library.custom_op("{NS}::amp", mutates_args=())
def amp(x: torch.Tensor, s: Amp) -> torch.Tensor:
    return x * s.scale


amp.register_fake(lambda x, s: torch.empty_like(x))


def _setup(ctx, inputs, output):
    ctx.s = inputs[1]


amp.register_autograd(lambda ctx, grad: (grad * ctx.s.scale, None), setup_context=_setup)


@constant
class Shift:
    def __init__(self, at: int = 0, by: int = 1):
        self.at, self.by = at, by

    def __eq__(self, other):
        return isinstance(other, Shift) and self.at == other.at

    def __hash__(self):
        return hash(self.at)

    def __fx_repr__(self):
        return f"Shift({self.at!r}, {self.by!r})", {"Shift": Shift}


@torch.library.custom_op("{NS}::shift", mutates_args=())
def shift(x: torch.Tensor, s: Shift) -> torch.Tensor:
    return x + s.by


shift.register_fake(lambda x, s: torch.empty_like(x))


@conformance.examples("{NS}.Amp")
def amps():
    return [Amp("a", 2.0), Amp("a", 5.0)]


@conformance.examples("{NS}.Shift")
def shifts():
    return [Shift(0, 1), Shift(0, 5)]
'''


def _added(stdout: str) -> dict[str, str]:
    """``{test id: what follows its torch series}`` of the ``added`` lines of the terminal's baseline section."""
    return {line.split()[1]: line.partition(") ")[2] for line in stdout.splitlines() if line.startswith("  added ")}


def test_accepting_a_custom_class_names_its_own_parts_and_the_cells_that_follow_from_them(pytester):
    ns = "acclabels"
    pytester.makepyfile(**{ns: MODULE.replace("{NS}", ns)})
    result = run_inprocess(pytester, f"--torchbind-load={ns}", f"--torchbind-class={ns}.*", "-p", "no:randomly",
                           "--torchbind-checks=guards,matrix", "--torchbind-backends=eager,aot_eager",
                           "--torchbind-baseline=b.json", "--torchbind-accept")
    amp, shift = f"torchbind[py:{ns}.Amp]::", f"torchbind[py:{ns}.Shift]::"
    out = result.stdout.str()
    assert set(json.loads((pytester.path / "b.json").read_text())["known_failures"]) == {
        amp + "guards[amp]", amp + "matrix[amp.backward-aot_eager]", shift + "guards[shift]",
        shift + "matrix[shift-eager]", shift + "matrix[shift-aot_eager]"}, out[-3000:]
    # Each entry's label: the rule and the part of the class it holds; a cell names the guards item it follows
    # from. Before: "[the class's own failure, not ...]" for the guards items, "[a compiled program differs from
    # eager]" for the cells.
    added = _added(out)
    assert sorted(added) == sorted(json.loads((pytester.path / "b.json").read_text())["known_failures"])
    own = "[the class's own failure"
    assert added[amp + "guards[amp]"].startswith(
        f"{own} (guards.stale-gradient: its guard_fn), not a torch limitation: {ns}.Amp.amp: ")
    assert added[shift + "guards[shift]"].startswith(
        f"{own} (guards.eq-ignores-state: its __eq__), not a torch limitation: {ns}.Shift.shift: ")
    assert added[amp + "matrix[amp.backward-aot_eager]"].startswith(
        f"{own}: follows from guards[amp] (guards.stale-gradient: its guard_fn), not a torch limitation: "
        f"{ns}.Amp.amp.backward-aot_eager: ")
    for backend in ("eager", "aot_eager"):
        assert added[shift + f"matrix[shift-{backend}]"].startswith(
            f"{own}: follows from guards[shift] (guards.eq-ignores-state: its __eq__), not a torch limitation: "
            f"{ns}.Shift.shift-{backend}: ")
    # The warning counts all five, says what each is a bug in, and never mentions a fake or C++ (before: "1 failure
    # of the fake's own ... the fake disagrees with the C++ class ... a bug in the fake", cells not counted).
    assert ("torchbind: --torchbind-accept listed 5 failures of a Python custom class's own code as known "
            "(guards.eq-ignores-state: its __eq__; guards.stale-gradient: its guard_fn; 1 matrix cell: follows from "
            "guards[amp] (guards.stale-gradient: its guard_fn); 2 matrix cells: follows from guards[shift] "
            "(guards.eq-ignores-state: its __eq__)): these are bugs in the class (it has no fake class or C++ "
            "class), not torch limitations; fix them, or keep them only with a reviewed reason (pytest without "
            "--torchbind-accept shows each failure)") in out
    assert "fake's own" not in out and "bug in the fake" not in out


def test_labels_follow_the_rule_ids_of_the_run():
    """Without the guards item's failure in the run (deselected, or it passed), a stale cell is not blamed on the
    class; a cell whose rule is the library's own (a fake's wrong result, a wrong autograd formula) is the library's
    own failure on either kind, a TorchBind class's other cells stay the compile stack's."""
    from conformance.plugin.baseline import Entry, accept_changes, accept_warning, own_part

    new = {"torchbind[py:m.S]::matrix[op-inductor]": Entry("stale", observed=("2.13",)),
           "torchbind[ns.Q]::matrix[op.pop-inductor]": Entry("follows", observed=("2.13",)),
           "torchbind[ns.Q]::matrix[op.pop.backward-eager]": Entry("formula", observed=("2.13",)),
           "torchbind[ns.Q]::matrix[op.pop-aot_eager]": Entry("differs", observed=("2.13",))}
    rules = {"torchbind[py:m.S]::matrix[op-inductor]": ["matrix.stale-result"],
             "torchbind[ns.Q]::matrix[op.pop-inductor]": ["matrix.follows-from-fake"],
             "torchbind[ns.Q]::matrix[op.pop.backward-eager]": ["matrix.gradient-wrong"],
             "torchbind[ns.Q]::matrix[op.pop-aot_eager]": ["matrix.output-differs"]}
    assert accept_changes({}, new, rules) == [
        "added torchbind[ns.Q]::matrix[op.pop-aot_eager] (torch 2.13 and newer) [a compiled program differs from "
        "eager]",
        "added torchbind[py:m.S]::matrix[op-inductor] (torch 2.13 and newer) [a compiled program differs from eager]",
        "added torchbind[ns.Q]::matrix[op.pop-inductor] (torch 2.13 and newer) [the library's own failure: follows "
        "from a fake's wrong result (matrix.follows-from-fake), not a torch limitation: follows]",
        "added torchbind[ns.Q]::matrix[op.pop.backward-eager] (torch 2.13 and newer) [the library's own failure: an "
        "op's autograd formula disagrees with finite differences (matrix.gradient-wrong), not a torch limitation: "
        "formula]"]
    assert accept_warning({}, new, rules) == (
        "--torchbind-accept listed 2 failures of the library's own code as known (1 matrix cell: an op's autograd "
        "formula disagrees with finite differences (matrix.gradient-wrong); 1 matrix cell: follows from a fake's "
        "wrong result (matrix.follows-from-fake)): these are bugs in the library, not torch limitations; fix them, "
        "or keep them only with a reviewed reason (pytest without --torchbind-accept shows each failure)")
    # the guards item failed with a rule that is no reuse (a hoisted object): the stale cell is still torch's
    rules["torchbind[py:m.S]::guards[op]"] = ["guards.hoisted-differs"]
    assert own_part("torchbind[py:m.S]::matrix[op-inductor]", rules) is None
    rules["torchbind[py:m.S]::guards[op]"] = ["guards.unguarded-change"]
    assert own_part("torchbind[py:m.S]::matrix[op-inductor]", rules) == (
        "follows from guards[op] (guards.unguarded-change: its guard_fn)")


def test_the_backward_row_suffix_is_the_matrix_one():
    from conformance.matrix.gradients import BACKWARD
    from conformance.plugin.baseline import _REUSE_RULES

    assert _REUSE_RULES["matrix.gradient-differs"][0] == BACKWARD
