"""Matrix verdicts rest on evidence: a limitation applies only when the cell's own failure is that limitation's
(the same exception type, raised at the same torch site), strict export that leaves fake tensors in the real object
is said so, a hang in torch's compiler is told from one in the class's code and costs one timeout, and an n/a cell
names what eager raised.

The classes are ``samples_limits::Vocab`` (``__contains__`` / ``__getitem__`` / ``__len__`` bound in C++, taking a
str token, after a text library's vocabulary) and ``samples_limits::Stash`` (``store(t)`` keeps its tensor;
``stash_scale`` has a CUDA kernel only), with correct fakes (sample_classes/fakes_limits.py). Each verdict is pinned
beside the plain-torch lines that show the failure it reports.
"""

from __future__ import annotations

import io
import json
import logging
import signal
import subprocess
import sys
import textwrap
import time
import traceback

import pytest
import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensor

from conformance.core.breadcrumbs import Tracer
from conformance.matrix.backends import Backend
from conformance.matrix.torchbind.run import run_cell
from conformance.matrix.limitations import LIMITATIONS, find_limitation, raised_at
from conformance.matrix.torchbind.rows import scenario
from conformance.process import Supervisor
from conformance.process.stacks import Frame, hang_site, parse_dump
from conformance.core.results import Outcome
from conftest import REPO, engine_of

VOCAB, STASH, COUNTER, QUEUE = ("samples_limits::Vocab", "samples_limits::Stash", "samples::Counter",
                                "samples::TensorQueue")
ENGINE = engine_of()  # no adopter registrations: the classes' own constructors and schema strategies


@pytest.fixture(scope="module")
def samples():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library, registers the fakes

    return sample_classes


def _frames(exc: BaseException) -> list[str]:
    """``file:function`` of each torch frame of ``exc``'s traceback, innermost last (as a reader of the traceback
    sees them)."""
    return [f"{f.filename.split('/torch/')[-1]}:{f.name}" for f in traceback.extract_tb(exc.__traceback__)
            if "/torch/" in f.filename]


class _Program(torch.nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, obj, x):
        return self.body(obj, x)


# ----- strict export leaves FakeTensors in the real object ---------------------------------------------------------

def test_plain_torch_strict_export_leaves_a_fake_tensor_inside_the_real_object(samples):
    def body(obj, x):
        obj.store(x)
        return (obj.get(),)

    stash = torch.classes.samples_limits.Stash(torch.zeros(2, 3))
    torch.export.export(_Program(body), (stash, torch.ones(2, 3)), strict=True)
    [(key, held)] = stash.__obj_flatten__()
    assert key == "t" and isinstance(held, FakeTensor)  # the real object kept the tensor it was traced with
    with pytest.raises(DataDependentOutputException, match="aten.equal"):  # what the old cell failed with
        torch.equal(held, held)
    # Non-strict export traces a fake object: the real one is left alone.
    other = torch.classes.samples_limits.Stash(torch.zeros(2, 3))
    torch.export.export(_Program(body), (other, torch.ones(2, 3)), strict=False)
    assert not isinstance(other.__obj_flatten__()[0][1], FakeTensor)


def test_strict_export_cell_says_the_object_was_left_holding_fake_tensors(samples):
    cell = run_cell(ENGINE.context(STASH), "store", "export_strict")
    assert (cell.status.value, cell.limitation) == ("unsupported", "strict-export-fake-tensors"), cell.details
    assert cell.details[0].startswith("tracing left FakeTensors in the real object used to trace: state[0][1] is a "
                                      "FakeTensor(shape=[2, 3], dtype=torch.float32)"), cell.details
    assert "observed for this class: tracing left FakeTensors inside the real object" in cell.reason
    assert "DataDependentOutputException" not in cell.details[0].split(" (")[0]
    assert run_cell(ENGINE.context(STASH), "store", "export").status.value == "passed"


# ----- save/load: the weights_only limitation does not cover "Node redefined name" ---------------------------------

def _saveload(module, args):
    ep = torch.export.export(module, args, strict=False)
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    # torch 2.13 logs its weights_only fallback with a malformed format string (a logging error, not the load's).
    quiet = logging.getLogger("torch._export.serde.serialize")
    level, quiet.level = quiet.level, logging.ERROR
    try:
        return torch.export.load(buffer)
    finally:
        quiet.setLevel(level)


def test_plain_torch_a_program_taking_the_object_saves_and_loads_but_one_with_a_burned_in_result_does_not(samples):
    queue = torch.classes.samples.TensorQueue(torch.zeros(2))

    def push_pop(obj, x):
        obj.push(x)
        return (obj.pop(),)

    # The object is an input, and torch.export.load falls back from weights_only (it logs that it did): it loads.
    loaded = _saveload(_Program(push_pop), (queue, torch.ones(2)))
    assert torch.equal(loaded.module()(torch.classes.samples.TensorQueue(torch.zeros(2)), torch.ones(2))[0],
                       torch.ones(2))
    # Counter.value() returns an int, which export burns in: the call_torchbind node is left unused, and the loaded
    # graph fails its lint. That, not weights_only, is what stops it.
    counter = torch.classes.samples.Counter(2)
    # torch's "torch.export" logger does not propagate (pytest's caplog never sees it): listen on it directly.
    errors = _LoggedErrors()
    logging.getLogger("torch.export").addHandler(errors)
    try:
        with pytest.raises(RuntimeError, match="deserializ"):
            _saveload(_Program(lambda obj, x: (obj.value(), x + 1)), (counter, torch.ones(1)))
    finally:
        logging.getLogger("torch.export").removeHandler(errors)
    [logged] = errors.seen
    assert str(logged) == "Node redefined name call_torchbind!" and _frames(logged)[-1] == "fx/graph.py:lint"


class _LoggedErrors(logging.Handler):
    """The exceptions logged with ``exc_info`` while attached."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.seen.append(record.exc_info[1])


def test_the_save_load_cell_fails_with_the_real_error(samples):
    cell = run_cell(ENGINE.context(COUNTER), "value", "export_saveload")
    assert (cell.status.value, cell.limitation, cell.found) == ("torch-defect", None, "matrix.raises")  # was
    assert "Node redefined name call_torchbind!" in cell.reason                              # saveload-object-input
    assert ("RuntimeError raised in torch/fx/graph.py lint: no known limitation has this exception type and site"
            in cell.details)
    assert run_cell(ENGINE.context(QUEUE), "pop", "export_saveload").status.value == "passed"


# ----- explicit dunder calls, and what the operator form does ------------------------------------------------------

def test_plain_torch_a_dunder_called_by_name_and_the_operator_forms_fail_differently(samples):
    vocab = torch.classes.samples_limits.Vocab(["a", "bc"])
    assert not isinstance(vocab.__len__, torch._C.ScriptMethod)  # Python's method of ScriptObject, not C++'s
    compiled = torch.compile(_Program(lambda obj, x: (obj.__len__(), x + 1)), backend="eager", fullgraph=True)
    with pytest.raises(RuntimeError, match="Unable to cast Python instance of type <class 'method'>") as by_name:
        compiled(vocab, torch.ones(1))
    assert _frames(by_name.value)[-1] == "_higher_order_ops/torchbind.py:call_torchbind_impl"
    torch._dynamo.reset()
    # vocab["a"] fails while dynamo traces it: dynamo refuses __getitem__ on a TorchScript object.
    compiled = torch.compile(_Program(lambda obj, x: (obj["a"], x + 1)), backend="eager", fullgraph=True)
    with pytest.raises(torch._dynamo.exc.TorchDynamoException, match="Weird method call on TorchScript object"):
        compiled(vocab, torch.ones(1))
    torch._dynamo.reset()
    # len(obj) fails too, but elsewhere: dynamo raises while tracing, a graph break no limitation lists.
    compiled = torch.compile(_Program(lambda obj, x: (len(obj), x + 1)), backend="eager", fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported, match="Observed exception") as by_operator:
        compiled(vocab, torch.ones(1))
    assert "call_torchbind_impl" not in _frames(by_operator.value)
    torch._dynamo.reset()


def test_explicit_dunder_cells_say_what_was_observed_and_the_operator_cell_fails(samples):
    ctx = ENGINE.context(VOCAB)
    cell = run_cell(ctx, "__len__", "eager")
    assert (cell.status.value, cell.limitation) == ("unsupported", "explicit-dunder-call")
    assert ("observed for this class: RuntimeError raised in torch/_higher_order_ops/torchbind.py "
            "call_torchbind_impl; getattr(obj, '__len__') on the real object is a Python method of "
            "torch.ScriptObject, not the bound ScriptMethod; the operator form is row operator.len, not tried by "
            "this cell") in cell.reason
    assert "works" not in cell.reason  # the old footnote said the operator form works
    operator = run_cell(ctx, "operator.len", "eager")
    assert (operator.status.value, operator.limitation, operator.found) == ("torch-defect", None, "matrix.raises")
    assert operator.reason.startswith("Unsupported: Observed exception")
    assert any(d.endswith("no known limitation has this exception type and site") for d in operator.details)
    getitem = run_cell(ctx, "operator.getitem", "eager")
    assert (getitem.status.value, getitem.limitation) == ("torch-defect", None)
    assert "Weird method call on TorchScript object" in getitem.reason


# ----- a limitation needs the exception's site, not its text -------------------------------------------------------

def test_a_known_message_raised_elsewhere_is_a_failure(samples):
    # What aoti-object-input covers: plain torch's AOTInductor refuses a TorchBind input, raising in
    # torch/_inductor/compile_fx.py _aoti_flatten_inputs.
    scn = scenario(ENGINE.context(COUNTER), "scale")
    ep = torch.export.export(scn.module(None), scn.args(scn.first.build(), 0), strict=False)
    with pytest.raises(torch._dynamo.exc.UserError) as real:
        torch._inductor.aoti_compile_and_package(ep)
    assert raised_at(real.value) == "UserError raised in torch/_inductor/compile_fx.py _aoti_flatten_inputs"
    message = str(real.value)

    def prepare(scn, module, args):  # a backend that raises the same type with the same text, outside torch
        raise torch._dynamo.exc.UserError(real.value.error_type, message)

    liar = Backend("aoti", "AOTInductor", "AOTInductor", prepare, ahead_of_time=True)
    cell = run_cell(engine_of().context(COUNTER), "scale", liar)
    assert (cell.status.value, cell.limitation, cell.found) == ("torch-defect", None, "matrix.raises")
    assert cell.reason.startswith("UserError: TorchBind objects found in inputs")
    assert run_cell(ENGINE.context(COUNTER), "scale", "aoti").limitation == "aoti-object-input"


def test_every_row_keeps_its_source_and_asks_for_evidence():
    for entry in LIMITATIONS:
        assert entry.source and ("torch" in entry.source or "PT2" in entry.source), entry.key
        assert entry.raises or entry.difference, entry.key  # never a message alone
        if entry.raises:
            assert entry.sites or entry.graph_break or entry.via, entry.key
    assert find_limitation("aoti", _AnyScenario(), "UserError: TorchBind objects found in inputs.") is None


def test_every_entry_names_sites_the_running_torch_has():
    """Each form of each entry (``also`` included) names at least one of its ``sites`` and one of its ``via``
    frames as a function torch's source defines there: a site that moved in a new release is found here, not by
    a cell that stops matching (torch 2.13, 2.14.1 and 2.15.0)."""
    import ast
    import os

    root = os.path.dirname(torch.__file__)

    def defined(site: str) -> bool:
        path, _, func = site.rpartition(":")
        try:
            with open(os.path.join(root, path), encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
        except (OSError, SyntaxError):
            return False
        return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func for n in ast.walk(tree))

    gone = []
    for entry in LIMITATIONS:
        for form in (entry, *entry.also):
            for kind in ("sites", "via"):
                names = getattr(form, kind)
                if names and not any(defined(site) for site in names):
                    gone.append(f"{form.key}: none of its {kind} is in torch {torch.__version__}: {names}")
    assert not gone, "\n".join(gone)


class _AnyScenario:
    """A scenario every entry applies to (an object input, a non-tensor result, an explicit dunder call)."""

    placement, has_object_input, kind, class_kind, calls = "input", True, "torchbind", None, ()


# ----- n/a cells -------------------------------------------------------------------------------------------------

def test_plain_torch_an_op_with_a_cuda_kernel_only_raises_on_the_cpu(samples):
    stash = torch.classes.samples_limits.Stash(torch.ones(2, 3))
    with pytest.raises(NotImplementedError, match="Could not run 'samples_limits::stash_scale' with arguments from "
                                                  "the 'CPU' backend"):
        torch.ops.samples_limits.stash_scale(stash, torch.ones(2, 3))


def test_an_n_a_cell_names_what_eager_raised_and_keeps_the_program(samples, pytester):
    cell = run_cell(ENGINE.context(STASH), "op.stash_scale", "eager")
    assert cell.status.value == "skipped"
    assert cell.reason.startswith("no eager reference: plain eager raises on every example object for "
                                  "op.stash_scale: NotImplementedError: Could not run 'samples_limits::stash_scale' "
                                  "with arguments from the 'CPU' backend")
    assert "(torch.ops.samples_limits.stash_scale.default(obj, " in cell.reason and "on the example object" in \
        cell.reason
    assert "r0 = torch.ops.samples_limits.stash_scale.default(obj, x0)" in cell.program
    # ... and the JSON report keeps it.
    from conftest import run_inprocess

    result = run_inprocess(pytester, "--torchbind-load=sample_classes", f"--torchbind-class={STASH}",
                           "--torchbind-checks=matrix", "--torchbind-backends=eager", "-k", "op.stash_scale",
                           "--torchbind-report=r.json")
    result.assert_outcomes(skipped=1)
    [cell_json] = [c for cls in json.loads((pytester.path / "r.json").read_text())["classes"] for c in cls["cells"]]
    assert "stash_scale.default(obj, x0)" in cell_json["program"] and "NotImplementedError" in cell_json["reason"]


# ----- hangs: where, and for how long ------------------------------------------------------------------------------

_DUMP = """Thread 0x00007f00 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait

Current thread 0x00007f01 (most recent call first):
  File "/v/lib/python3.11/site-packages/torch/_dynamo/variables/functions.py", line {line} in call_function
  File "/v/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 1603 in step
  File "/v/lib/python3.11/site-packages/torch/_dynamo/convert_frame.py", line 935 in run_tracer
  File "/repo/conformance/matrix/torchbind/run.py", line 40 in _run
  File "/repo/conformance/process/supervisor.py", line 400 in _worker_main
  File "/v/lib/python3.11/site-packages/_pytest/main.py", line 10 in main
"""


def test_stacks_tell_a_compiler_loop_from_a_call_into_the_class():
    moving = hang_site(parse_dump(_DUMP.format(line=519) + _DUMP.format(line=890), thread=0x7f01))
    assert moving.in_compiler and moving.moving and moving.compiler == ("dynamo tracing the program",)
    assert str(moving.frame) == "torch/_dynamo/variables/functions.py:890 in call_function"
    assert [str(f) for f in moving.stack][-1] == "run.py:40 in _run"  # the worker loop and pytest are left out
    # The thread ident picks its own block of each dump, not the other thread's.
    one = parse_dump(_DUMP.format(line=519), thread=0x7f01)
    assert len(one) == 1 and [str(f) for f in one[0]][-1] == "run.py:40 in _run"
    assert parse_dump(_DUMP.format(line=519), thread=0x7f00) == [[Frame("/usr/lib/python3.11/threading.py", 320,
                                                                         "wait")]]
    # A stack cut off at faulthandler's 100 frames, before the worker loop's frames: the same frames all the same.
    cut = _DUMP.format(line=519).split("  File \"/repo/conformance/process")[0] + "  ...\n"
    assert parse_dump(cut, thread=0x7f01) == one
    still = hang_site([[Frame("/v/torch/_higher_order_ops/torchbind.py", 96, "call_torchbind_impl"),
                        Frame("/v/torch/_dynamo/convert_frame.py", 935, "run_tracer")]] * 2)
    assert still.class_call and not still.in_compiler  # standing still where torch calls the class's method
    assert still.describe() == ("in a call into the class's code made inside torch's compiler (dynamo tracing the "
                                "program), at torch/_higher_order_ops/torchbind.py:96 in call_torchbind_impl, which "
                                "did not return")
    # Standing still on a line of dynamo's that calls the real object's __obj_flatten__ is a call into the class.
    import torch._dynamo.output_graph as output_graph

    path = output_graph.__file__
    line = next(n for n, text in enumerate(open(path).read().splitlines(), 1) if "__obj_flatten__()" in text)
    flatten = hang_site([[Frame(path, line, "remove_unused_graphargs")]] * 2)
    assert flatten.class_call and not flatten.in_compiler
    assert hang_site([]) is None
    # A collective the compiled program ran, waiting in torch.distributed (a new user's gloo op in a forked worker):
    # no compiler hang, and the description says where and why.
    collective = hang_site([[Frame("/v/torch/distributed/distributed_c10d.py", 3000, "all_reduce"),
                             Frame("/v/torch/_dynamo/eval_frame.py", 1166, "compile_wrapper")]] * 2)
    assert not collective.in_compiler and collective.torch_runtime == "distributed/distributed_c10d.py"
    assert "waiting in torch's own distributed/distributed_c10d.py" in collective.describe()
    assert "--torchbind-isolation=none" in collective.describe()
    # A sample that stops inside a frozen standard-library module (isinstance's ABC check while dynamo traces) is
    # Python's own code, not the class's: the hang stays dynamo's (it was blamed on user code under load).
    frozen = hang_site([[Frame("<frozen _collections_abc>", 438, "__new__"),
                         Frame("/v/torch/_dynamo/utils.py", 3949, "get_fake_value"),
                         Frame("/v/torch/_dynamo/symbolic_convert.py", 1000, "step")]] * 2)
    assert not frozen.user_code and frozen.in_compiler
    # A sample that stops in generated code (a dataclass's __init__ made by exec, file "<string>") that dynamo called
    # is the compiler's work (seen on torch 2.15 under load); generated code a fake called stays the fake's.
    generated = hang_site([[Frame("<string>", 3, "__init__"),
                            Frame("/v/torch/_dynamo/variables/builder.py", 500, "wrap"),
                            Frame("/v/torch/_dynamo/symbolic_convert.py", 1000, "step")]] * 2)
    assert not generated.user_code and generated.in_compiler
    from_fake = hang_site([[Frame("<string>", 3, "__init__"), Frame("/home/me/mylib/fakes.py", 12, "push"),
                            Frame("/v/torch/_dynamo/symbolic_convert.py", 1000, "step")]] * 2)
    assert from_fake.user_code and not from_fake.in_compiler


_TRACER = Tracer()
_LOOP = compile(textwrap.dedent("""
    def step(depth):
        until = time.monotonic() + 0.05
        while time.monotonic() < until:  # Python code running, no call that adds a frame
            pass
        step(depth + 1)  # one frame deeper every 50 ms: stack samples 0.2 s apart differ

    def descend(depth):
        return descend(depth - 1) if depth else step(0)
    """), "/site-packages/torch/_dynamo/symbolic_convert.py", "exec")  # code as dynamo's own frames show it
_SPIN = compile(textwrap.dedent("""
    def call_torchbind_impl(seconds):
        time.sleep(seconds)  # stands for the class's C++ method, which holds the stack still
    """), "/site-packages/torch/_higher_order_ops/torchbind.py", "exec")


def _hang_item(key: str):
    namespace = {"time": time}
    with _TRACER.calling("check matrix[sequence-eager] of ns::Cls", timed=False), \
            _TRACER.calling("scenario sequence of ns::Cls through eager (compile and run)", timed=False, side="torch"):
        if key in ("dynamo-loop", "deep-dynamo-loop"):
            exec(_LOOP, namespace)  # noqa: S102 - a loop that shows as dynamo's frames
            # dynamo inlining calls stacks frames deep: faulthandler prints a thread's innermost 100 alone
            namespace["descend"](150 if key == "deep-dynamo-loop" else 0)
        if key == "class-call":
            exec(_SPIN, namespace)  # noqa: S102
            namespace["call_torchbind_impl"](60)
    return Outcome.skip("check", "ns::Cls", None, "done")


@pytest.mark.process
def test_a_cell_that_hangs_in_the_compiler_gets_one_timeout_and_says_where():
    sup = Supervisor(_hang_item, timeout=1.0, tracer=_TRACER)
    for key in ("dynamo-loop", "deep-dynamo-loop", "class-call"):
        sup.register(key)
    try:
        start = time.monotonic()
        lost = sup.run("dynamo-loop", factor=1)  # a matrix cell: --torchbind-timeout as a whole
        assert time.monotonic() - start < 5, "one timeout (1 s) and the stack samples, not ten timeouts"
        failure = lost.failure(timeout=1.0)
        assert failure.rule == "process.compiler-hang", failure  # the details say what the samples showed
        assert failure.summary.startswith("this check hung in torch's compiler (dynamo tracing the program), not in "
                                          "the class's code: scenario sequence of ns::Cls through eager")
        assert failure.summary.endswith("reached its limit of 1 s (1 x --torchbind-timeout)")
        text = "\n".join(failure.details)
        assert "gdb" not in text and failure.cpp is None
        assert "limits: --torchbind-timeout=1 s per call into the class, 1 s for this item (1 x --torchbind-timeout)" \
            in failure.details
        assert "torch/_dynamo/symbolic_convert.py" in text and "moved between the samples" in text
        # More than faulthandler's 100 frames inside the item: the worker loop's frames are cut off the dumps, and
        # the stacks are still the main thread's (found by its thread ident).
        deep = sup.run("deep-dynamo-loop", factor=1).failure(timeout=1.0)
        assert deep.rule == "process.compiler-hang", deep
        assert "moved between the samples" in "\n".join(deep.details)
        # Standing still inside a call into the class: the C++ wording (and the debugger advice) stay.
        still = sup.run("class-call", factor=1).failure(timeout=1.0)
        assert still.summary.startswith("this check hung: scenario sequence")
        assert still.cpp.startswith("no result after") and "gdb" in still.details[-1]
        assert ("when stopped, the worker was in a call into the class's code made, at "
                "torch/_higher_order_ops/torchbind.py:3 in call_torchbind_impl, which did not return") \
            in still.details, still.details
    finally:
        sup.close()


@pytest.mark.process
def test_plain_torch_dynamo_loops_forever_on_token_in_vocab(samples, tmp_path):
    # Plain torch.compile of `token in vocab`, stopped after 8 s: its stack is dynamo iterating the object
    # (CONTAINS_OP -> generic_contains / pysequence_contains -> FOR_ITER), not a call into Vocab's C++ __contains__.
    script = tmp_path / "contains.py"
    script.write_text(textwrap.dedent(f"""
        import faulthandler, signal, sys, torch
        sys.path.insert(0, {str(REPO)!r})
        import sample_classes
        faulthandler.register(signal.SIGUSR1, all_threads=False)
        vocab = torch.classes.samples_limits.Vocab(["a", "bc"])
        print("a" in vocab, flush=True)  # eager: True
        torch.compile(lambda obj, x: ("a" in obj, x + 1), backend="eager", fullgraph=True)(vocab, torch.ones(1))
        print("compiled", flush=True)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "True"
        time.sleep(8)
        assert proc.poll() is None, "the compile finished"
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
    finally:
        proc.kill()
    out, err = proc.communicate()
    assert "compiled" not in out
    # (torch 2.13 loops in generic_contains, 2.14 in pysequence_contains: both dynamo's `in` on the object)
    assert "torch/_dynamo/variables/object_protocol.py" in err, err[-3000:]
    assert "generic_contains" in err or "pysequence_contains" in err, err[-3000:]


@pytest.mark.process
def test_the_plugin_attributes_the_vocab_hang_to_dynamo(samples, pytester):
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--torchbind-load=sample_classes",
                                           f"--torchbind-class={VOCAB}", "--torchbind-checks=matrix",
                                           "--torchbind-backends=eager", "-k", "operator.contains",
                                           "--torchbind-timeout=8")
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert ("samples_limits::Vocab.operator.contains-eager: this check hung in torch's compiler (dynamo tracing the "
            "program), not in the class's code") in out
    assert "reached its limit of 8 s (1 x --torchbind-timeout)" in out
    assert "C++:" not in out and "gdb" not in out
    assert "  program:\n    class Program(torch.nn.Module):" in out and "r0 = 'a' in obj" in out  # what to rerun


def test_strict_export_that_changes_the_real_object_then_fails_is_that_limitation():
    """Found by a new user (a block allocator's allocate under strict export): strict export calls the real object's
    method with the FakeTensor it traces with; the method changes the object, then fails reading the tensor's data.
    The cell rests on the change it observed (the limitation's evidence), and names the error that followed."""
    import sample_classes  # noqa: F401
    import sample_classes.fakes_evidence  # noqa: F401
    from conformance.matrix.torchbind.run import run_cell
    from conftest import engine_of

    # Plain torch: strict export raises, and the object it was given has booked an entry.
    ledger = torch.classes.samples_evidence.Ledger(0)

    class Program(torch.nn.Module):
        def forward(self, obj, x):
            return obj.spend(x)

    with pytest.raises(RuntimeError, match="data is not allocated yet|Cannot access data pointer"):
        torch.export.export(Program(), (ledger, torch.ones(2)), strict=True)
    assert ledger.entries() == 1
    cell = run_cell(engine_of().context("samples_evidence::Ledger"), "spend", "export_strict")
    assert (cell.status, cell.limitation, cell.rule) == ("unsupported", "strict-export-real-object", "")
    assert cell.details[0].startswith("tracing changed the real object used to trace: ")
    assert cell.details[1].startswith("then export strict failed: RuntimeError: ")
