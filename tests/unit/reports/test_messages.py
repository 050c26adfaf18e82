"""Whole texts a library author reads, pinned with expecttest: a failure, a reproducer, a matrix program and report.

A wording change is one accept away (``EXPECTTEST_ACCEPT=1 python -m pytest tests/unit/reports/test_messages.py``
rewrites the expected strings in this file; expecttest cannot write non-ASCII text, so the two matrix texts, with
their ✓ ✗ –, are updated by hand from the diff) and a broken message shows as a diff of the whole text.
"""

from __future__ import annotations

import dataclasses

import expecttest

from conformance.torchbind.calls import Call, Callee
from conformance.matrix.torchbind.rows import scenario
from conformance.reports import build_report
from conformance.reports.markdown import render as render_markdown
from conformance.reports.terminal import render_lines
from conformance.core.results import Cell, Failure, Outcome, Status, Verdict
from conformance.runner import run_class
from conformance.runner import Engine
from conformance.core.settings import Settings
from conformance.engine.values import ArgumentSet, Value


def _samples_engine() -> Engine:
    """An engine whose reproducers load the samples (one import line, the same on every machine)."""
    import sample_classes  # noqa: F401 - builds (cached) and loads the library, registers the correct fakes

    return Engine(Settings(load_code=("import sample_classes",)))


class TestMessages(expecttest.TestCase):
    def test_an_agreement_failure_as_the_library_author_reads_it(self):
        from sample_classes.broken import by_name

        engine = _samples_engine()
        with by_name("counter_increment_off_by_one").installed():
            [outcome] = [o for o in run_class("samples::Counter", only={"agreement"}, engine=engine)
                         if o.target == "increment"]
        self.assertExpectedInline(outcome.render(), """\
samples::Counter.increment: the fake's result differs from the C++ result
  example object:
    obj = torch.classes.samples.Counter(2)
  call:  obj.increment(2)
  C++:   returned 4
  fake:  returned 5
  - result: C++ gave 4 (int), fake gave 5 (int)
  - 15 of 15 compared calls (example objects x argument sets) disagree; the first is shown
  reproduce with this script:
    | import torch
    | import torch.utils._pytree as pytree
    | from torch._subclasses.fake_tensor import FakeTensorMode
    | from torch.fx.experimental.symbolic_shapes import ShapeEnv
    | from torch._library.fake_class_registry import maybe_to_fake_obj
    | 
    | import sample_classes
    | 
    | def make_obj():
    |     obj = torch.classes.samples.Counter(2)
    |     return obj
    | 
    | def make_args():
    |     return (2, ), {}
    | 
    | obj = make_obj()
    | args, kwargs = make_args()
    | real = obj.increment(*args, **kwargs)
    | print('C++: ', real)
    | 
    | mode = FakeTensorMode(shape_env=ShapeEnv())
    | fake_obj = maybe_to_fake_obj(mode, make_obj())
    | args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), make_args())
    | with mode:
    |     fake = fake_obj.increment(*args, **kwargs)
    | print('fake:', fake)
    | 
    | def meta(v):
    |     if isinstance(v, torch.Tensor):
    |         return ('tensor', tuple(v.shape), v.dtype, v.device, tuple(v.stride()), v.requires_grad)
    |     return (type(v).__name__, v)
    | 
    | try:
    |     same = [pytree.tree_map(meta, side) for side in (real, fake)]
    |     same = same[0] == same[1]
    | except Exception:
    |     same = False
    | if same:
    |     print('no disagreement reproduced')""")

    def test_a_failure_with_every_part(self):
        failure = Failure("the fake's result differs from the C++ result", cpp="returned 3", fake="returned 4",
                          details=("result: expected 3 (int), got 4 (int)",), example="obj = make()",
                          call="obj.increment(1)", repro="print('hi')\n")
        self.assertExpectedInline(failure.render("ns::Cls", "increment"), """\
ns::Cls.increment: the fake's result differs from the C++ result
  example object:
    obj = make()
  call:  obj.increment(1)
  C++:   returned 3
  fake:  returned 4
  - result: expected 3 (int), got 4 (int)
  reproduce with this script:
    | print('hi')""")
        outcome = Outcome.of_failures("agreement", "ns::Cls", "increment", [failure, Failure("second", target="x")])
        self.assertEqual(outcome.status, Status.FAILED)
        self.assertExpectedInline(outcome.summary, """ns::Cls.increment: the fake's result differs from the C++ result""")
        self.assertExpectedInline(outcome.render().split("\n\n")[1], """ns::Cls.x: second""")

    def test_the_program_of_an_op_that_takes_the_object_third(self):
        engine = _samples_engine()
        scn = scenario(engine.context("samples::TensorQueue"), "op.push_scaled")
        self.assertExpectedInline(scn.code(), """\
class Program(torch.nn.Module):
    def forward(self, obj, x0):
        torch.ops.samples.push_scaled.default(x0, 1.5, obj)
        return (torch.ones(1), )

# run 0: object
obj = torch.classes.samples.TensorQueue(torch.arange(6, dtype=torch.float32).reshape(2, 3))
# run 0 inputs: torch.arange(6, dtype=torch.float32).reshape(2, 3)
# run 1: object
obj = torch.classes.samples.TensorQueue(torch.arange(6, dtype=torch.float32).reshape(2, 3))
obj.push(torch.arange(6, dtype=torch.float32).reshape(2, 3))
obj.push(torch.tensor(2.5))
# run 1 inputs: torch.arange(6, dtype=torch.float32).reshape(2, 3)
# then, with run 1's inputs, on the example object:
obj = torch.classes.samples.TensorQueue(torch.ones(3, dtype=torch.float64))
# then, with run 1's inputs, on the example object:
obj = torch.classes.samples.TensorQueue(torch.tensor(2.5))
# then, with run 1's inputs, on the example object:
obj = torch.classes.samples.TensorQueue(torch.arange(4, dtype=torch.int64))
# then, with run 1's inputs, on the example object:
obj = torch.classes.samples.TensorQueue(torch.zeros(0, 3))
""")

    def test_calls_put_the_object_where_the_schema_does(self):
        engine = _samples_engine()
        [op] = [o for o in engine.context("samples::TensorQueue").info.ops if o.short_name == "push_scaled"]
        call = Call(Callee.of_op(op), ArgumentSet((Value("torch.ones(2)"), Value("2.0"))))
        self.assertExpectedInline(call.code("q"), """torch.ops.samples.push_scaled.default(torch.ones(2), 2.0, q)""")
        self.assertExpectedInline(call.callee.spread_source("q"), """torch.ops.samples.push_scaled.default(*args[:2], q, *args[2:], **kwargs)""")
        method = Call(Callee.method("push"), ArgumentSet((), (("x", Value("torch.ones(2)")),)))
        self.assertExpectedInline(method.code(), """obj.push(x=torch.ones(2))""")

    def test_a_reproducer_of_one_op_call(self):
        engine = _samples_engine()
        ctx = engine.context("samples::TensorQueue")
        [op] = [o for o in ctx.info.ops if o.short_name == "push_scaled"]
        call = Call(Callee.of_op(op), ArgumentSet((Value("torch.ones(2)"), Value("2.0"))))
        self.assertExpectedInline(ctx.call_repro(ctx.example_set.examples[0], call), """\
import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch._library.fake_class_registry import maybe_to_fake_obj

import sample_classes

def make_obj():
    obj = torch.classes.samples.TensorQueue(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    return obj

def make_args():
    return (torch.ones(2), 2.0, ), {}

obj = make_obj()
args, kwargs = make_args()
real = torch.ops.samples.push_scaled.default(*args[:2], obj, *args[2:], **kwargs)
print('C++: ', real)

mode = FakeTensorMode(shape_env=ShapeEnv())
fake_obj = maybe_to_fake_obj(mode, make_obj())
args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), make_args())
with mode:
    fake = torch.ops.samples.push_scaled.default(*args[:2], fake_obj, *args[2:], **kwargs)
print('fake:', fake)

def meta(v):
    if isinstance(v, torch.Tensor):
        return ('tensor', tuple(v.shape), v.dtype, v.device, tuple(v.stride()), v.requires_grad)
    return (type(v).__name__, v)

try:
    same = [pytree.tree_map(meta, side) for side in (real, fake)]
    same = same[0] == same[1]
except Exception:
    same = False
if same:
    print('no disagreement reproduced')
""")

    @staticmethod
    def _report():
        cells = [Cell("ns::Q", "push", "eager", 0, 0),
                 Cell("ns::Q", "push", "aoti", 0, 3, Status.UNSUPPORTED, "objects only as attributes",
                      limitation="aoti-object-input"),
                 Cell("ns::Q", "pop", "eager", 1, 0, Status.FAILED, "run 1 output: expected 1, got 2"),
                 Cell("ns::Q", "pop", "aoti", 1, 3, Status.SKIPPED, "plain eager raises"),
                 Cell("ns::Q", "pop", "inductor", 1, 2, Status.TORCH_DEFECT, "run 0 object state 'q': eager left 1, "
                      "inductor left 2", repro="print('eager:   ', 1)\nprint('inductor:', 2)\n",
                      rule="matrix.torch-defect", signature="inductor: the object's state differs from plain eager's "
                      "(one method call)", found="matrix.state-differs")]
        assert [Cell.from_json(c.to_json()) for c in cells] == cells
        # Cells arrive in any order (xdist); the report is ordered by row and column.
        return dataclasses.replace(build_report(reversed(cells)), torch_version="X.Y")

    def test_the_markdown_matrix(self):
        self.assertExpectedInline(render_markdown(self._report()), """\
## TorchBind coverage matrix (torch X.Y)

✓ matches plain eager · ✗ fails or differs from eager · – unsupported: a known torch limitation (the cell ran and failed the documented way) · ? could not tell: the program gave eager's results, but every object it ran on gives one output, so a stale program would too (the footnote says what to give) · T torch's defect: the cell failed where the fake agrees with C++ on every call (see Torch defects) · n/a did not run (no fake class, or no eager reference: the footnote says why)

### ns::Q

| scenario | torch.compile<br>eager | torch.compile<br>inductor | AOTInductor |
|---|---|---|---|
| `push` | ✓ |   | – [1] |
| `pop` | ✗ [2] | T [3] | n/a [4] |

1 ✓, 1 ✗, 1 – (known torch limitation), 1 T (torch's defect), 1 n/a

1. – objects only as attributes
2. ✗ run 1 output: expected 1, got 2
3. T run 0 object state 'q': eager left 1, inductor left 2
4. n/a plain eager raises

### Torch defects

Cells that failed where the fake agrees with C++ on every call of the program (replayed on real objects and their fakes as tracing makes them): torch's, not the library's. Each script runs from any directory in a fresh interpreter and prints what eager and the backend give.

1. **inductor: the object's state differs from plain eager's (one method call)** — 1 cell: ns::Q `pop` × inductor

```python
print('eager:   ', 1)
print('inductor:', 2)
```
""")

    def test_the_terminal_matrix(self):
        self.assertExpectedInline("\n".join(render_lines(self._report())), """\
ns::Q: 1 ✓, 1 ✗, 1 –, 1 T, 1 n/a
              eager  inductor      aoti
  push            ✓                   –
  pop             ✗         T       n/a
T: 1 cell is torch's defect (the fake agrees with C++ on every call), 1 signature; the report's Torch defects section has a script for each:
  inductor: the object's state differs from plain eager's (one method call) (1 cell)""")


def test_the_html_page_shows_the_matrix_first_and_counts_known_failures_and_skips_apart():
    from conformance.reports.html import render as render_html

    def verdict(item, status, baseline=False):
        return Verdict(item.partition("[")[0], "ns::Q", None, Status(status), reason=f"{item} said so", item=item,
                       baseline=baseline)

    cells = [Cell("ns::Q", "push", "eager", 0, 0), Cell("ns::Q", "pop", "eager", 1, 0, Status.SKIPPED, "no eager")]
    verdicts = {"ns::Q": [verdict("coverage[a]", "passed"), verdict("agreement[b]", "failed", baseline=True),
                          verdict("coverage[c]", "skipped"), verdict("agreement[d]", "failed")]}
    page = render_html(build_report(cells, verdicts=verdicts))
    assert page.index("<th rowspan='2'>scenario</th>") < page.index("<summary>4 checks:")  # the matrix first
    assert "<summary>4 checks: 1 passed, 1 failed, 1 known failure (baseline), 1 n/a</summary>" in page
    assert "<details open>" in page  # a failure the baseline does not list opens the table
    rows = [page.index(f"{item} said so") for item in ("agreement[d]", "agreement[b]", "coverage[c]", "coverage[a]")]
    assert rows == sorted(rows)  # new failures, known failures, n/a, passes
    assert "<td class='skipped' title='no eager'>n/a" in page and ">·<" not in page  # n/a is written one way
    assert "<p class='totals'>1 class(es), 4 checks: 1 passed, 1 failed, 1 known failure(s) (baseline), 1 n/a</p>" \
        in page  # the page's header counts skips and known failures too
    # A matrix cell the baseline lists is marked as a known failure in the matrix itself.
    failing = [Cell("ns::Q", "push", "eager", 0, 0, Status.FAILED, "differs")]
    known_page = render_html(build_report(failing, verdicts={"ns::Q": [verdict("matrix[push-eager]", "failed", True)]}))
    assert "<td class='known' title='differs'>✗ known" in known_page
    assert "<td class='failed' title='differs'>✗" in render_html(build_report(failing))
    # Only known failures: the table stays closed.
    quiet = {"ns::Q": [verdict("coverage[a]", "passed"), verdict("agreement[b]", "failed", baseline=True)]}
    assert "<details open>" not in render_html(build_report(cells, verdicts=quiet))
