"""Reproducers that stop on an error (a new user's trial, issue 31): the check of a reproducer reads the exception a
fresh run raised, not the last line of stderr (a dynamo error ends with torch's advice to set TORCHDYNAMO_VERBOSE);
the same error as the failure's reproduces it; another error is said, whole, as what the script raised, never as
evidence of state outside the object. And the guards reproducer builds the op's inputs outside the compiled
function, as the check does: built inside, a strategy's ``torch.Generator()`` is an opaque object created mid-program,
which dynamo refuses, so the script failed for its own reasons. A script that compared the two sides itself and
printed the difference (``REPRODUCED:``) reproduces the failure, whatever a later step raises: the fake_kernel
script of a fake of the wrong shape compares before its inductor step, which then raises inductor's size assert
(a third trial called that "no evidence", blaming its own script). Each shown first with plain torch.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest
import torch
from hypothesis import strategies as st

import conformance
from conformance.core.results import Failure, Status
from conformance.core.settings import Settings
from conformance.engine.reproducers import check_reproducer, run_fresh
from conformance.runner import plan, run_class, run_target

from conftest import REGISTRATION_SOURCE, engine_of

from test_guards_draws import SOURCE as QUANT_SOURCE  # the trial's QuantScheme ({NS} to fill)

#: A sampling state whose INLINED next_seed reads ``seed``, which is not a registered member: torch.compile cannot
#: trace it (the trial's SamplingState).
SAMPLING_SOURCE = REGISTRATION_SOURCE + '''
class Sampling(Base):
    def __init__(self, seed: int = 0):
        self.seed, self.offset = seed, 0
    def _bump(self) -> int:
        self.offset += 1
        return self.offset
    def next_seed(self) -> int:
        return self.seed + self._bump()

register(Sampling, "reference", guard_fn=lambda s: [s.seed, s.offset],
         members={"_bump": oo.MemberType.USE_REAL, "next_seed": oo.MemberType.INLINED})
'''


def _module(tmp_path, monkeypatch, name: str, source: str):
    """``source`` as the module ``name`` in a file, importable here and by a reproducer run anywhere."""
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{__import__('os').environ.get('PYTHONPATH', '')}")
    return importlib.import_module(name)


def test_plain_torch_a_dynamo_error_ends_with_advice_not_with_what_went_wrong(tmp_path, monkeypatch):
    mod = _module(tmp_path, monkeypatch, "repro_sampling_plain", SAMPLING_SOURCE)
    torch._dynamo.reset()
    program = torch.compile(lambda o: o.next_seed(), backend="eager", fullgraph=True)
    with pytest.raises(Exception) as raised:
        program(mod.Sampling(0))
    lines = [ln for ln in str(raised.value).splitlines() if ln.strip()]
    assert lines[0].startswith("UnsafeScriptObjectError: Attempted to access unregistered member")
    assert "Member 'seed' is not registered" in str(raised.value)
    assert lines[-1].startswith("Set TORCHDYNAMO_VERBOSE=1")  # what the last line of stderr showed


@pytest.mark.process
def test_a_reproducer_raising_the_failures_own_error_reproduces_it(tmp_path, monkeypatch):
    _module(tmp_path, monkeypatch, "repro_sampling", SAMPLING_SOURCE)
    [outcome] = run_class("repro_sampling.Sampling", only={"inlined"}, engine=engine_of(None, Settings(examples=5)))
    assert outcome.status is Status.FAILED and outcome.failures[0].rule == "inlined.untraceable"
    [failure] = outcome.failures
    text = failure.render("repro_sampling.Sampling", "next_seed")
    # The whole dynamo error in the failure: its first line, explanation and hint, not only torch's advice.
    assert "compiled: raised InternalTorchDynamoError: UnsafeScriptObjectError: Attempted to access unregistered " \
           "member on an OpaqueObject" in text, text
    assert "Explanation: Member 'seed' is not registered for this opaque object type." in text, text
    checked = check_reproducer(failure)
    last = checked.details[-1]
    assert last.startswith("reproducer checked: run in a fresh interpreter from an empty directory, it raised the "
                           "same error (torch._dynamo.exc.InternalTorchDynamoError: UnsafeScriptObjectError: "
                           "Attempted to access unregistered member on an OpaqueObject)"), last
    assert not any("NOT REPRODUCED" in d for d in checked.details)


@pytest.mark.process
def test_a_reproducer_raising_another_error_says_what_it_raised_and_is_no_evidence():
    script = ("class InternalTorchDynamoError(RuntimeError):\n    pass\n"
              "raise InternalTorchDynamoError('Unsupported: An opaque object was created in the middle of the program."
              "\\n  Explanation: Opaque objects cannot be created inside the torch.compile region.\\n\\n"
              "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace')\n")
    failure = Failure("a compiled program returns a stale result", details=("eager: 1", "compiled: 2"),
                      repro=script)
    checked = check_reproducer(failure)
    text = "\n".join(checked.details)
    assert "it raises InternalTorchDynamoError: Unsupported: An opaque object was created in the middle of the " \
           "program.; that is not the error this failure shows, so the script is no evidence of it" in text, text
    # The whole error it raised, not only its last line (torch's advice).
    [explained] = [d for d in checked.details if d.startswith("  fresh run raised: ") and "Explanation" in d]
    assert explained.endswith("Explanation: Opaque objects cannot be created inside the torch.compile region.")
    assert "The divergence depends on state outside the object" not in text  # not blamed on the process


def test_plain_torch_a_generator_built_inside_the_compiled_function_is_refused(tmp_path, monkeypatch):
    mod = _module(tmp_path, monkeypatch, "repro_quant_plain", QUANT_SOURCE.replace("{NS}", "repro_quant_plain"))
    op, a = torch.ops.repro_quant_plain.fake_quant, mod.QuantScheme(2, 2, False)
    torch._dynamo.reset()
    inside = torch.compile(lambda o: op(torch.randn(4, 8, generator=torch.Generator().manual_seed(0)), o),
                           backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="An opaque object was created in the middle of the program"):
        inside(a)
    torch._dynamo.reset()
    w = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    outside = torch.compile(lambda w, o: op(w, o), backend="eager", fullgraph=True)  # what the check compiles
    assert torch.equal(outside(w, a), op(w, a))
    torch._dynamo.reset()


@pytest.mark.process
def test_the_guards_reproducer_builds_the_inputs_outside_the_compiled_function(tmp_path, monkeypatch):
    name = "repro_quant"
    _module(tmp_path, monkeypatch, name, QUANT_SOURCE.replace("{NS}", name))

    def register():  # the trial's input: a seeded random weight
        conformance.strategy(f"{name}::fake_quant", arg="w")(
            lambda: st.sampled_from(["torch.randn(4, 8, generator=torch.Generator().manual_seed(0))"]))

    [outcome] = run_class(f"{name}.QuantScheme", only={"guards"}, engine=engine_of(register, Settings(examples=10)))
    [failure] = outcome.failures
    assert failure.rule == "guards.eq-ignores-state"
    lines = failure.repro.splitlines()
    assert "w = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))" in lines
    assert f"program = torch.compile(lambda w, o: torch.ops.{name}.fake_quant(w, o), backend='eager', " \
           "fullgraph=True)" in lines
    run = run_fresh(failure.repro)  # one fresh interpreter: its output read here, and judged by the plugin
    assert run.returncode == 0, run.stderr[-2000:]
    shown = {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in run.stdout.splitlines() if ":" in ln)}
    assert shown["compiled, b"] == shown["eager, a"] != shown["eager, b"]  # the stale result, as the failure says
    assert check_reproducer(failure, run=run).details[-1].startswith("reproducer checked: run in a fresh interpreter from an "
                                                            "empty directory, it ran as shown")


# ----- a script that shows the difference, then raises what follows from it ------------------------------------
#: A new user's trial: the fake of a backward op returned the wrong shape; the fake_kernel failure's script printed
#: both shapes, then its inductor step raised inductor's size assert, and the plugin called the script no evidence.
SHOWS_THEN_RAISES = ("print('real:', (2, 3))\nprint('fake:', (1, 3))\n"
                     "print('REPRODUCED: Shapes torch.Size([2, 3]) and torch.Size([1, 3]) are not equal!')\n"
                     "raise AssertionError('expected size 2==1, stride 3==3 at dim=0\\nError in op: ns.op.default')\n")


@pytest.mark.process
def test_a_reproducer_that_printed_the_difference_reproduces_and_shows_the_later_error():
    failure = Failure("the fake kernel of ns::op disagrees with the real op on result: shape (real [2, 3], fake "
                      "[1, 3])", repro=SHOWS_THEN_RAISES, rule="fake_kernel.metadata-differs")
    checked = check_reproducer(failure)
    text = "\n".join(checked.details)
    assert "NOT REPRODUCED" not in text and "fault of the plugin's reproducer" not in text, text
    assert checked.details[0].startswith(
        "reproducer checked: run in a fresh interpreter from an empty directory, it made the comparison itself and "
        "printed the difference (REPRODUCED: Shapes torch.Size([2, 3]) and torch.Size([1, 3]) are not equal!) ("), text
    assert checked.details[0].endswith("; then, what followed from that difference: a later step of the script "
                                       "raised AssertionError: expected size 2==1, stride 3==3 at dim=0"), text
    assert checked.details[1:] == ("  it raised: Error in op: ns.op.default",)
    # Without the line, the same run is what it was: another error, no evidence of the failure.
    unmarked = check_reproducer(dataclasses.replace(failure, repro=SHOWS_THEN_RAISES.replace("REPRODUCED: ", "")))
    assert "NOT REPRODUCED in a fresh interpreter" in unmarked.details[0]


def test_plain_torch_a_backward_fake_of_the_wrong_shape():
    import sample_classes.custom_autograd as gains
    from torch._subclasses.fake_tensor import FakeTensorMode

    grad = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert gains.gain_backward_wrong(grad, gains.GainBackwardFakeWrong(2.0)).shape == (2, 3)
    with FakeTensorMode() as mode:
        fake = gains.gain_backward_wrong(mode.from_tensor(grad), gains.GainBackwardFakeWrong(2.0))
    assert fake.shape == (1, 3)  # inductor plans its buffer from this and asserts 2 == 1 when the kernel returns


@pytest.mark.process
def test_the_fake_kernel_reproducer_compares_before_it_compiles_and_is_judged_reproduced():
    root = str(Path(__file__).resolve().parents[3])
    load = ("import sys", f"sys.path.insert(0, {root!r})", "import sample_classes.custom_autograd")
    engine = engine_of(None, Settings(examples=5, check_reproducers=True, load_code=load))
    [unit] = [u for u in plan("sample_classes.custom_autograd.GainBackwardFakeWrong", engine, {"fake_kernel"})
              if u.name == "fake_kernel[gain_backward_wrong]"]
    outcome = run_target(unit, engine)
    [failure] = outcome.failures
    assert failure.rule == "fake_kernel.metadata-differs"
    script = failure.repro.splitlines()
    # The script's verdict comes before its inductor step, which is what follows from the wrong shape.
    assert script.index("    print('REPRODUCED:', '; '.join(found))") < \
        next(i for i, ln in enumerate(script) if "backend='inductor'" in ln)
    text = "\n".join(failure.details)
    assert "NOT REPRODUCED" not in text, text
    [checked] = [d for d in failure.details if d.startswith("reproducer checked")]
    assert "it made the comparison itself and printed the difference (REPRODUCED: Shapes torch.Size([2, 3]) and " \
           "torch.Size([1, 3]) are not equal!)" in checked, checked
    assert "then, what followed from that difference: a later step of the script raised AssertionError: expected " \
           "size 2==1, stride 3==3 at dim=0" in checked, checked


@pytest.mark.process
def test_only_the_failures_own_exception_type_and_message_reproduce_it():
    """The same message under another type, or a type the failure shows with another message, is another error:
    no evidence of the failure (the check took any error whose message text appeared in the failure)."""
    failure = Failure("the fake raises but the C++ method returns",
                      details=("fake: raised RuntimeError: index 3 is out of bounds",), repro="")
    same = check_reproducer(dataclasses.replace(
        failure, repro="raise RuntimeError('index 3 is out of bounds')\n"))
    assert same.details[-1].startswith("reproducer checked: run in a fresh interpreter from an empty directory, it "
                                       "raised the same error (RuntimeError: index 3 is out of bounds)"), same.details
    for script in ("raise IndexError('index 3 is out of bounds')\n", "raise RuntimeError('index 4')\n",
                   "raise RuntimeError('index')\n"):
        other = check_reproducer(dataclasses.replace(failure, repro=script))
        text = "\n".join(other.details)
        assert "that is not the error this failure shows, so the script is no evidence of it" in text, (script, text)
        assert "reproducer checked" not in text
