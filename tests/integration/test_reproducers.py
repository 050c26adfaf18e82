"""Reproducers are checked before they are printed (issue 27 item 8): each failure's script runs in a fresh
interpreter from an empty directory; one that does not show the divergence there says it depends on state
outside the object.

``samples_evidence::Ticketer.next()`` reads a process-wide counter (a C++ static): in the plugin's process, after
earlier calls, C++ returns more than its fake, which returns what a fresh process's first call gives. Plain torch
beside the verdict: the same call in a fresh interpreter agrees with the fake.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conformance.engine.reproducers import NOT_REPRODUCED, check_reproducer, run_fresh
from conformance.core.results import Failure, Status
from conformance.runner import plan, run_target
from conformance.core.settings import Settings
from conftest import engine_of, run_inprocess

ROOT = Path(__file__).resolve().parents[2]
LOAD = ("import sys", f"sys.path.insert(0, {str(ROOT)!r})", "import sample_classes",
        "import sample_classes.fakes_evidence")
TICKETER = "samples_evidence::Ticketer"

pytestmark = pytest.mark.process  # every test here starts interpreters


@pytest.fixture(scope="module")
def evidence_fakes():
    import sample_classes  # noqa: F401
    import sample_classes.fakes_evidence as fakes

    return fakes


def checked_engine():
    return engine_of(settings=Settings(examples=5, check_reproducers=True, load_code=LOAD))


def test_a_divergence_from_process_global_state_is_not_reproduced_and_says_so(evidence_fakes):
    # Plain torch: in this process every call moves the shared counter, so an object's first next() depends on
    # what ran before; in a fresh interpreter the first call gives base + 1, which is what the fake returns.
    before = torch.classes.samples_evidence.Ticketer(1).next()
    assert torch.classes.samples_evidence.Ticketer(1).next() == before + 1
    fresh = subprocess.run([sys.executable, "-c", "\n".join([*LOAD, "import torch",
                            "print(torch.classes.samples_evidence.Ticketer(1).next())"])],
                           capture_output=True, text=True, timeout=120)
    assert fresh.stdout.split()[-1] == "2"

    engine = checked_engine()
    [outcome] = [run_target(u, engine) for u in plan(TICKETER, engine, only={"agreement"})]
    assert outcome.status is Status.FAILED
    text = outcome.render()
    assert "the fake's result differs from the C++ result" in text
    assert f"NOT REPRODUCED in a fresh interpreter: the reproducer below, run from an empty directory, does not " \
           f"show this — it prints {NOT_REPRODUCED!r}" in text
    assert "The divergence depends on state outside the object" in text
    [(cpp, fake)] = re.findall(r"fresh run: C\+\+:  (\d+)\n.*fresh run: fake: (\d+)", text)
    assert cpp == fake  # in a fresh interpreter C++ gives what the fake gives


def test_a_divergence_of_the_fake_itself_is_reproduced(tmp_path):
    import sample_classes  # noqa: F401
    from sample_classes.broken import by_name

    engine = engine_of(settings=Settings(examples=5, check_reproducers=True, load_code=(
        "import sys", f"sys.path.insert(0, {str(ROOT)!r})", "import sample_classes",
        "import sample_classes.broken", "sample_classes.broken.install_counter_increment_off_by_one()")))
    with by_name("counter_increment_off_by_one").installed():
        [outcome] = [run_target(u, engine) for u in plan("samples::Counter", engine, only={"agreement"})
                     if u.target == "increment"]
    assert outcome.status is Status.FAILED
    [failure] = outcome.failures
    assert failure.details[-1].startswith("reproducer checked: run in a fresh interpreter from an empty directory, "
                                          "it ran as shown")
    # The script judges itself: run again by hand from another directory, it shows the disagreement.
    run = run_fresh(failure.repro)
    assert run.returncode == 0 and NOT_REPRODUCED not in run.stdout
    lines = dict(ln.split(":", 1) for ln in run.stdout.splitlines() if ln.startswith(("C++", "fake")))
    assert lines["C++"].strip() != lines["fake"].strip()


def test_a_script_that_cannot_run_outside_the_process_is_not_blamed_on_the_class():
    script = "import torch\nobj = list(<lambda>())[0]\n"
    failure = check_reproducer(Failure("the fake's result differs", repro=script))
    assert failure.details[-1].startswith("the reproducer could not be checked: run in a fresh interpreter from an "
                                          "empty directory, SyntaxError")
    assert "NOT REPRODUCED" not in " ".join(failure.details)
    # An error the failure itself reports (the fake raises) is what the script shows: reproduced.
    raising = "raise RuntimeError('FakeCounter.value: boom')\n"
    failure = check_reproducer(Failure("the fake raises", fake="raised RuntimeError: FakeCounter.value: boom",
                                       repro=raising))
    assert failure.details[-1].startswith("reproducer checked")
    other = check_reproducer(Failure("the fake raises", fake="raised RuntimeError: boom",
                                     repro="raise ValueError('not bound')\n"))
    assert "NOT REPRODUCED" in other.details[0] and "it raises ValueError: not bound" in other.details[0]


def test_the_option_switches_the_check_and_rejects_other_values(pytester, evidence_fakes):
    args = ("--torchbind-load=sample_classes", "--torchbind-load=sample_classes.fakes_evidence",
            f"--torchbind-class={TICKETER}", "--torchbind-checks=agreement")
    on = run_inprocess(pytester, *args, "--torchbind-check-repro=on")
    on.assert_outcomes(failed=1)
    assert "NOT REPRODUCED in a fresh interpreter" in on.stdout.str()
    off = run_inprocess(pytester, *args, "--torchbind-check-repro=off")
    off.assert_outcomes(failed=1)
    assert "fresh interpreter" not in off.stdout.str()
    bad = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args, "--torchbind-isolation=none", "-o",
                                       "torchbind_check_repro=maybe")
    assert bad.ret == 4
    assert "torchbind_check_repro: expected on or off, got 'maybe'" in bad.stderr.str()


def test_a_failed_matrix_cell_prints_a_script_that_shows_it_from_any_directory():
    """A new user found matrix failures printed a program without imports, objects or the compile call: a failed
    TorchBind cell now carries a standalone script (the row's program, both runs' objects, the backend's call),
    which judges itself. Plain torch beside it: export bakes the traced queue's empty clone_queue() in."""
    import sample_classes  # noqa: F401
    from conformance.matrix.cell import cell_failure
    from conformance.matrix.torchbind.run import run_cell

    queue = torch.classes.samples.TensorQueue(torch.zeros(1))

    class Program(torch.nn.Module):
        def forward(self, obj):
            return (obj.clone_queue(),)

    program = torch.export.export(Program(), (queue,), strict=False).module()
    fuller = torch.classes.samples.TensorQueue(torch.zeros(1))
    fuller.push(torch.ones(2))
    assert program(fuller) == ([],) and len(fuller.clone_queue()) == 1  # the traced (empty) length, baked in

    engine = engine_of(settings=Settings(check_reproducers=True, load_code=LOAD[:3]))
    cell = run_cell(engine.context("samples::TensorQueue"), "clone_queue", "export")
    assert cell.status == "torch-defect" and cell.repro  # the fake agrees: the baked-in length is torch's
    run = run_fresh(cell.repro)  # one fresh interpreter: its output read here, and judged by the plugin
    assert run.returncode == 0 and NOT_REPRODUCED not in run.stdout
    failure = check_reproducer(cell_failure(cell), run=run)
    assert failure.details[-1].startswith("reproducer checked: run in a fresh interpreter from an empty directory")
    assert "torch.export.export(module(traced), example" in failure.repro


LIST_OP = '''
import torch
import sample_classes.fakes_stale  # noqa: F401

lib = torch.library.Library("tblists", "DEF")
lib.define("lookup_all(__torch__.torch.classes.samples_stale.Vocab vocab, Tensor[] ids) -> Tensor[]")


@torch.library.impl(lib, "lookup_all", "CompositeExplicitAutograd")
def _lookup_all(vocab, ids):
    return [vocab.lookup(i) for i in ids]


@torch.library.register_fake("tblists::lookup_all")
def _lookup_all_fake(vocab, ids):
    return [torch.empty_like(i) for i in ids]
'''

WRITE_SCRIPT = '''
import sys
sys.path[:0] = [{tests!r}, {root!r}, {where!r}]
import sample_classes, tblists_ops
from conftest import engine_of
from conformance.core.settings import Settings
from conformance.matrix.backends import get_backend
from conformance.matrix.torchbind.repro import cell_repro
from conformance.matrix.torchbind.rows import scenario

engine = engine_of(settings=Settings(load_code={load!r}))
ctx = engine.context("samples_stale::Vocab")
print(cell_repro(ctx, scenario(ctx, "dynamic.ops"), get_backend("export")))
'''


def test_a_dynamic_script_gives_a_list_of_tensors_one_spec_per_element(tmp_path):
    """An op taking ``Tensor[]`` in the dynamic.ops row: the cell exports with one ``Dim.AUTO`` spec per list
    element (``Scenario.dynamic_shapes``); the script did the same with ``None`` for the list, and torch.export
    rejected it (``UserError: ... inputs[1] is a list, but dynamic_shapes[1] is not``). Plain torch beside it."""
    import sample_classes  # noqa: F401
    import sample_classes.fakes_stale  # noqa: F401

    class TakesList(torch.nn.Module):
        def forward(self, xs):
            return [x + 1 for x in xs]

    xs = [torch.ones(2, 3), torch.ones(4)]
    with pytest.raises(Exception, match=r"but .?dynamic_shapes\[0\].? is not"):
        torch.export.export(TakesList(), (xs,), dynamic_shapes=(None,), strict=False)
    torch.export.export(TakesList(), (xs,), strict=False,
                        dynamic_shapes=([{0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO},
                                         {0: torch.export.Dim.AUTO}],))

    (tmp_path / "tblists_ops.py").write_text(LIST_OP)
    load = ("import sys", f"sys.path.insert(0, {str(ROOT)!r})", f"sys.path.insert(0, {str(tmp_path)!r})",
            "import sample_classes", "import tblists_ops")
    writer = WRITE_SCRIPT.format(tests=str(ROOT / "tests"), root=str(ROOT), where=str(tmp_path), load=load)
    made = subprocess.run([sys.executable, "-c", writer], capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-3000:]
    script = made.stdout
    assert "tblists.lookup_all" in script and "DYNAMIC = tuple(dims(x) for x in example)" in script
    run = run_fresh(script)
    assert run.returncode == 0, run.stderr[-3000:]
    assert NOT_REPRODUCED in run.stdout  # the cell passes: the script runs the same program, and agrees
