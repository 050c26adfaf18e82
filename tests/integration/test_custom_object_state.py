"""The state of a custom class's object, as the checks compare it, on classes registered for the test and run
through the engine and pytest: fields changed only through the class's own constructor, twins that cannot be built
equal, pairs the op rejects, slotted objects, example objects shared between items, and torch's trace records
kept out of the report. Each rule beside the plain Python/torch lines that show why it is needed. (The unit rules
of an object's state: tests/unit/custom/test_object_state.py.)"""

from __future__ import annotations

import torch

from conformance.core.settings import Settings
from conformance.custom.state import state_of, twin_differences
from conformance.runner import Engine, run_class

from conftest import run_inprocess


# ----- twins and fields changed only through the constructor ----------------------------------------------------

CLASSES = '''
import itertools
import torch
from torch._library import opaque_object as oo
try:
    from torch._custom_class_base import CustomClassBase as Base
except ImportError:
    from torch._opaque_base import OpaqueBase as Base

_ids = itertools.count()

def register(cls, typ, **kw):
    if hasattr(oo, "register_custom_class"):
        oo.register_custom_class(cls, typ=typ, **kw)
    else:
        oo.register_opaque_type(cls, typ={"constant": "value", "symbolic": "reference"}[typ], **kw)
    return cls

class Pair:
    """total is a + b, always; __eq__ compares a and b, which fix total."""
    def __init__(self, a: int, b: int):
        self.a, self.b, self.total = a, b, a + b
    def __eq__(self, other):
        return isinstance(other, Pair) and (self.a, self.b) == (other.a, other.b)
    def __hash__(self):
        return hash((self.a, self.b))
    def __fx_repr__(self):
        return f"Pair({self.a!r}, {self.b!r})", {"Pair": Pair}

register(Pair, "constant")

@torch.library.custom_op("{NS}::shift", mutates_args=())
def shift(x: torch.Tensor, p: Pair) -> torch.Tensor:
    return x + p.total

shift.register_fake(lambda x, p: torch.empty_like(x))

class Handle(Base):
    """Each object gets a new id, as a mesh gets new subgroups: two built the same way differ."""
    def __init__(self, n: int):
        self.n, self.id = n, next(_ids)
    def read(self) -> int:
        return self.n

register(Handle, "symbolic", guard_fn=lambda h: [h.n], members={"read": oo.MemberType.USE_REAL})

class Slotted(Base):
    """OpaqueBase (no __slots__) + __slots__: an empty __dict__ beside the slots that hold the state; guard_fn
    forgets scale, which the USE_REAL member get_scale reads."""
    __slots__ = ("n", "scale")
    def __init__(self, n: int):
        self.n, self.scale = n, 1
    def set_scale(self, s: int) -> None:
        self.scale = s
    def get_scale(self) -> int:
        return self.scale

register(Slotted, "symbolic", guard_fn=lambda o: [o.n], members={"get_scale": oo.MemberType.USE_REAL})

class Only(Base):
    """A constant class whose op accepts one object only (n == 0): every other object is no input of the op."""
    def __init__(self, n: int):
        self.n = n
    def __eq__(self, other):
        return isinstance(other, Only) and self.n == other.n
    def __hash__(self):
        return hash(self.n)
    def __fx_repr__(self):
        return f"Only({self.n!r})", {"Only": Only}

register(Only, "constant")

@torch.library.custom_op("{NS}::only_zero", mutates_args=())
def only_zero(x: torch.Tensor, o: Only) -> torch.Tensor:
    if o.n != 0:
        raise ValueError("only n == 0")
    return x + 1

only_zero.register_fake(lambda x, o: torch.empty_like(x))

SHARED = []

class Box(Base):
    """A symbolic class whose examples come from a cache (the same objects on every factory call)."""
    def __init__(self, n: int):
        self.n = n
    def bump(self, k: int) -> None:
        self.n += k
    def get(self) -> int:
        return self.n

register(Box, "symbolic", guard_fn=lambda b: [b.n], members={"get": oo.MemberType.USE_REAL})

WORLD = {"up": True}

class Mesh(Base):
    """A mesh of a process-wide world that abort() tears down (as torch 2.15's DeviceMesh.abort() empties the
    world's process-group map): after it, no Mesh can be made in the process."""
    def __init__(self, size: int):
        if not WORLD["up"]:
            raise ValueError("the world is not initialized")
        self.size = size
    def grow(self, k: int) -> None:
        self.size += k
    def abort(self) -> None:
        WORLD["up"] = False

register(Mesh, "symbolic", guard_fn=lambda m: [m.size])

GRID = {"up": True}

class Grid(Base):
    """A mesh of a process-wide world whose finish() tears it down: the name says nothing of it."""
    def __init__(self, size: int):
        if not GRID["up"]:
            raise ValueError("the world is not initialized")
        self.size = size
    def grow(self, k: int) -> None:
        self.size += k
    def finish(self) -> None:
        GRID["up"] = False

register(Grid, "symbolic", guard_fn=lambda m: [m.size])

@torch.library.custom_op("{NS}::per_cell", mutates_args=())
def per_cell(x: torch.Tensor, m: Grid) -> torch.Tensor:
    return x / m.size

per_cell.register_fake(lambda x, m: torch.empty_like(x))

class Comm:
    """A communicator: no value equality of its own (equal only to itself), as a process group or NCCL comm."""
    def __init__(self, size: int):
        self.size = size

class Window(Base):
    """A window over a communicator it holds by identity (a communications library's window and its comm)."""
    def __init__(self, n: int):
        self.n = n
        self._comm = Comm(4)
    def width(self) -> int:
        return self.n * self._comm.size

register(Window, "symbolic", guard_fn=lambda w: [w.n, w._comm.size], members={"width": oo.MemberType.USE_REAL})

@torch.library.custom_op("{NS}::windowed", mutates_args=())
def windowed(x: torch.Tensor, w: Window) -> torch.Tensor:
    return x * w.width()

windowed.register_fake(lambda x, w: torch.empty_like(x))

@torch.library.custom_op("{NS}::per_rank", mutates_args=())
def per_rank(x: torch.Tensor, m: Mesh) -> torch.Tensor:
    return x / m.size

per_rank.register_fake(lambda x, m: torch.empty_like(x))
'''


def _module(pytester, name: str) -> str:
    pytester.makepyfile(**{name: CLASSES.replace("{NS}", name)})
    pytester.syspathinsert()
    return name


def test_plain_python_a_transplanted_field_makes_a_state_no_object_reaches(pytester):
    mod = __import__(_module(pytester, "state_pair_plain"))
    import copy

    a = mod.Pair(1, 2)
    b = copy.copy(a)
    b.total = mod.Pair(3, 4).total  # what the old search did: a == b, yet the op reads another total
    assert a == b and not torch.equal(mod.shift(torch.zeros(1), a), mod.shift(torch.zeros(1), b))
    # no object the constructor makes is equal to a and has another total
    assert all(mod.Pair(x, y).total == 3 for x in range(5) for y in range(5) if mod.Pair(x, y) == a)


def test_guards_changes_fields_only_through_the_constructor(pytester):
    mod = _module(pytester, "state_pair")
    outcomes = run_class(f"{mod}.Pair", skip={"matrix"}, engine=Engine(Settings(examples=30)))
    guards = [o for o in outcomes if o.check == "guards"]
    assert guards and all(o.status == "passed" for o in guards), [o.render() for o in guards]
    assert all(o.evidence.total for o in guards)


def test_twins_that_cannot_be_built_equal_are_never_compared(pytester):
    mod = _module(pytester, "state_handle")
    h1, h2 = (getattr(__import__(mod), "Handle")(1) for _ in range(2))
    assert twin_differences(h1, h2) == ["id"]  # plain Python: built the same way, not equal
    [guard] = [o for o in run_class(f"{mod}.Handle", skip={"matrix"}, engine=Engine(Settings(examples=20)))
               if o.check == "guards"]
    assert guard.status == "skipped", guard.render()
    assert "two objects built the same way are not equal" in guard.summary and "'id'" in guard.summary


def test_pairs_the_op_rejects_are_no_evidence_for_guards(pytester):
    mod = _module(pytester, "state_only")
    lib = __import__(mod)
    x = torch.zeros(1)
    assert torch.equal(lib.only_zero(x, lib.Only(0)), x + 1)
    try:  # plain torch: any other object is rejected in eager, so no compiled call on it can be compared
        lib.only_zero(x, lib.Only(3))
        raise AssertionError("accepted")
    except ValueError:
        pass
    [guard] = [o for o in run_class(f"{mod}.Only", only={"guards"}, engine=Engine(Settings(examples=20)))]
    assert guard.status == "skipped", guard.render()  # no pair with both objects accepted: nothing compared


def test_a_slotted_object_beside_an_empty_dict_has_its_slots_as_state(pytester):
    mod = _module(pytester, "state_slotted")
    lib = __import__(mod)
    obj = lib.Slotted(2)
    assert hasattr(obj, "__dict__") and vars(obj) == {}  # plain Python: the state is not in __dict__
    assert state_of(obj) == {"n": 2, "scale": 1}
    # plain torch: guard_fn misses scale, so a compiled program keeps the get_scale() it baked in
    torch._dynamo.reset()
    program = torch.compile(lambda o: o.get_scale(), backend="eager", fullgraph=True)
    assert program(obj) == 1
    obj.set_scale(5)
    assert (program(obj), obj.get_scale()) == (1, 5)
    torch._dynamo.reset()
    [guard] = [o for o in run_class(f"{mod}.Slotted", skip={"matrix"}, engine=Engine(Settings(examples=20)))
               if o.check == "guards" and o.target == "get_scale"]
    assert guard.status == "failed" and guard.failures[0].rule == "guards.unguarded-change", guard.render()
    assert "'scale'" in guard.failures[0].summary, guard.render()


def test_shared_example_objects_do_not_carry_one_items_changes_into_the_next(pytester):
    mod = _module(pytester, "state_box")
    pytester.makeconftest(f'''
import conformance
from {mod} import Box, SHARED

@conformance.examples("{mod}.Box")
def boxes():
    if not SHARED:
        SHARED.extend([Box(1), Box(2)])
    return SHARED   # the same objects on every call

def pytest_sessionfinish(session):
    import pathlib
    pathlib.Path("shared.txt").write_text(repr([b.n for b in SHARED]))
''')
    result = run_inprocess(pytester, f"--torchbind-load={mod}", f"--torchbind-class={mod}.Box", "-p", "no:randomly",
                           "--torchbind-checks=guards", "-rA")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "shared.txt").read_text() == "[1, 2]"  # every change went to fresh copies


def test_torchs_trace_records_stay_out_of_the_report_without_isolation(pytester):
    """pytest captures non-propagating loggers too: a new user's -rA run without isolation showed ~1,460 empty
    'DEBUG torch.__trace' lines (torch's structured trace, always DEBUG) under 11 items."""
    result = run_inprocess(pytester, "--torchbind-load=sample_classes.custom_classes", "-rA",
                           "--torchbind-class=sample_classes.custom_classes.StepperGuardMissesStep",
                           "--torchbind-checks=guards")
    out = result.stdout.str()
    assert "FAILED torchbind[py:sample_classes.custom_classes.StepperGuardMissesStep]::guards[get_step]" in out
    assert "torch.__trace" not in out


def test_a_method_that_tears_down_the_world_is_never_called(pytester):
    """A call of ``abort()`` would break the construction of every later object of the class (torch 2.15: a guards
    item called ``DeviceMesh.abort()`` and 35 later DeviceMesh items failed); the checks leave it out, say so, and
    judge the other methods as before."""
    mod = __import__(_module(pytester, "state_mesh"))
    mesh = mod.Mesh(2)
    mesh.abort()  # plain Python: after it, no object can be made
    try:
        mod.Mesh(2)
        raise AssertionError("Mesh(2) after abort() did not raise")
    except ValueError:
        mod.WORLD["up"] = True
    outcomes = run_class("state_mesh.Mesh", skip={"matrix"}, engine=Engine(Settings(examples=20)))
    assert mod.WORLD["up"], "a check called Mesh.abort()"
    guards = next(o for o in outcomes if o.item == "guards[per_rank]")
    assert guards.status == "passed", guards.render()
    assert any(n.startswith("not called: Mesh.abort (the name says a call tears down state beyond the object")
               for n in guards.notes), guards.render()
    assert guards.evidence.total, guards.render()  # grow() was called and compared
    assert all(o.status != "failed" for o in outcomes), [o.render() for o in outcomes if o.status == "failed"]


def test_a_method_found_to_tear_down_the_world_is_named_and_no_longer_called(pytester):
    """A teardown whose name says nothing (``finish()``): the first item that calls it breaks the construction of
    every later object. The evidence (an object that built before no longer builds, after the call) names the method;
    the checks stop calling it, and the items that need objects skip saying why, instead of each failing or saying
    the constructor rejects its arguments."""
    mod = __import__(_module(pytester, "state_grid"))
    mod.Grid(2).finish()  # plain Python: after it, no object can be made
    try:
        mod.Grid(2)
        raise AssertionError("Grid(2) after finish() did not raise")
    except ValueError:
        mod.GRID["up"] = True
    engine = Engine(Settings(examples=20))
    outcomes = run_class("state_grid.Grid", skip={"matrix"}, engine=engine)
    assert not mod.GRID["up"]  # a check called finish(): nothing in its name said not to
    ctx = engine.context("state_grid.Grid")
    assert list(ctx.torn_down) == ["finish"], ctx.torn_down
    assert "finish" not in ctx.mutators()
    assert ctx.torn_down["finish"].startswith("after Grid.") and "raises ValueError: the world is not initialized" \
        in ctx.torn_down["finish"]
    skipped = [o for o in outcomes if o.status == "skipped" and "finish() tears down state beyond the object" in
               (o.reason or "")]
    assert skipped and skipped[0].item == "guards[per_cell]", [(o.item, o.reason) for o in outcomes]
    assert all(o.status != "failed" for o in outcomes), [o.render() for o in outcomes if o.status == "failed"]
    assert all(o.status == "skipped" for o in outcomes[outcomes.index(skipped[0]):])  # one cause, said each time
    assert "conformance.strategy('state_grid.Grid', 'finish')(lambda: None)" in skipped[0].reason
    mod.GRID["up"] = True


# ----- a field held by identity ------------------------------------------------------------------------------------


def test_a_field_without_value_equality_is_compared_by_identity(pytester):
    """A window holding its communicator: a copy of the communicator is never equal to it (plain Python), so the
    state before a call is kept with the communicator itself, and tracing that leaves the field holding the same
    communicator changed nothing; two windows (twins, eager's object and the compiled program's) compare the
    states of the communicators they hold. Before, tracing failed with '_comm changed', and guards and the matrix
    skipped the class: 'built twice by Window(0), they differ in _comm'."""
    import copy

    mod = _module(pytester, "state_window")
    lib = __import__(mod)
    w = lib.Window(2)
    assert copy.deepcopy(w._comm) != w._comm and w._comm == w._comm  # plain Python: equality is identity
    # two windows built the same way hold two communicators in one state: twins; another size is another state
    assert twin_differences(lib.Window(2), lib.Window(2)) == []
    other = lib.Window(2)
    other._comm.size = 8
    assert twin_differences(lib.Window(2), other) == ["_comm"]
    outcomes = run_class(f"{mod}.Window", only={"tracing", "guards", "matrix"}, backends={"eager"},
                         engine=Engine(Settings(examples=10)))
    assert {o.check for o in outcomes} == {"tracing", "guards", "matrix"}
    assert all(o.status == "passed" for o in outcomes), [o.render() for o in outcomes]
    assert all("_comm" not in o.render() for o in outcomes)
