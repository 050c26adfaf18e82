"""A catalogue of deliberately broken fakes for the ``samples`` classes.

Each :class:`BrokenFake` is a copy of a correct fake from
:mod:`sample_classes.fakes` (or a replacement op fake) that breaks exactly ONE
rule, together with the name of the conformance check expected to report it
and the method / op that the report must name.

Use ``with bf.installed(): ...`` to swap it into torch's registries for the
duration of a block (the previous registrations are restored exactly on exit),
or ``install_<name>()`` -- usable as
``pytest --torchbind-load=sample_classes.broken:install_<name>`` -- to install
it for the rest of the process.

Check names: ``fake_class``, ``coverage``, ``extra_methods``, ``signature``,
``return_type``, ``agreement``, ``roundtrip``, ``custom_op``, ``differential``.

The ``differential`` entries are sequence-dependent: every single call from
an example state agrees with C++ (so every other check passes), and the
defect only shows after two or more calls on the same object; or, for
``counter_increment_one_node``, only on an argument past the small ones the
other checks draw (-2..8).
"""

import atexit
import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping

import torch
from torch._library.fake_class_registry import (
    _full_qual_class_name,
    global_fake_class_registry,
)
from torch._library.simple_registry import singleton as _simple_registry
from torch._library.utils import Kernel

from . import fakes as _fakes
from .fakes import FakeConfig, FakeCounter, FakeTensorQueue
from .fakes_patterns import FakeAnyBox, FakeBag, FakeVersioned

__all__ = ["BrokenFake", "BROKEN_FAKES", "CHECKS", "by_name", "installed_broken"]

CHECKS = (
    "fake_class",
    "coverage",
    "extra_methods",
    "signature",
    "return_type",
    "agreement",
    "roundtrip",
    "custom_op",
    "differential",
)


@dataclasses.dataclass(frozen=True)
class BrokenFake:
    name: str  # short id, e.g. "queue_missing_top"
    qualname: str  # the class whose fake is swapped, e.g. "samples::TensorQueue"
    check: str  # the check expected to report it (one of CHECKS)
    method: str | None  # method / op name the report must name (None: class-level)
    rule: str  # one line: which rule it breaks
    # Fake class registered for `qualname` while installed; None = NO fake class.
    # Entries that only break an op fake carry the correct fake class here.
    fake_class: type | None
    # op qualname -> replacement Python fake (None = no fake for that op).
    op_fakes: Mapping[str, Callable | None] = dataclasses.field(
        default_factory=dict, hash=False
    )

    def __post_init__(self) -> None:
        if self.check not in CHECKS:
            raise ValueError(f"{self.name}: unknown check {self.check!r}")
        # Own copy (a plain dict, so dataclasses.asdict/replace and copy work).
        object.__setattr__(self, "op_fakes", dict(self.op_fakes))

    @property
    def full_qualname(self) -> str:
        """``__torch__.torch.classes.<ns>.<Cls>`` for :attr:`qualname`."""
        return _full_qual_class_name(self.qualname)

    @property
    def installer_name(self) -> str:
        return f"install_{self.name}"

    def installed(self) -> contextlib.AbstractContextManager:
        """Swap this broken fake in; restore the previous registrations on exit."""
        return _installed(self)

    def install(self) -> "BrokenFake":
        """Install for the rest of the process.

        The previous registrations are put back only at interpreter exit: torch's
        Library finalizers remove their fake kernels from the registry by
        identity and would raise (noisily, at exit) on a kernel we took out.
        """
        cm = self.installed()
        cm.__enter__()
        _PERMANENT.append(cm)
        atexit.register(cm.__exit__, None, None, None)
        return self


_PERMANENT: list[contextlib.AbstractContextManager] = []


def _set_fake_class(full_qualname: str, cls: type | None) -> None:
    reg = global_fake_class_registry
    if reg.has_impl(full_qualname):
        reg.deregister(full_qualname)
    if cls is not None:
        reg.register(full_qualname, cls)


@contextlib.contextmanager
def _installed(bf: BrokenFake) -> Iterator[BrokenFake]:
    reg = global_fake_class_registry
    full = bf.full_qualname
    had_class = reg.has_impl(full)
    orig_class = reg.get_impl(full) if had_class else None
    saved_kernels = {
        q: list(_simple_registry.find(q).fake_impl.kernels) for q in bf.op_fakes
    }
    try:
        _set_fake_class(full, bf.fake_class)
        for q, fn in bf.op_fakes.items():
            holder = _simple_registry.find(q).fake_impl
            if fn is None:
                # No Python fake.  (The Meta kernel that torch.library.register_fake
                # put into the dispatcher stays; it looks the kernel up at call time
                # and asserts when there is none.)
                holder.kernels.clear()
            else:
                holder.kernels.append(Kernel(fn, f"sample_classes.broken:{bf.name}"))
        yield bf
    finally:
        for q, kernels in saved_kernels.items():
            _simple_registry.find(q).fake_impl.kernels[:] = kernels
        _set_fake_class(full, orig_class if had_class else None)


@contextlib.contextmanager
def installed_broken(name: str) -> Iterator[BrokenFake]:
    """``with installed_broken("queue_missing_top"): ...``"""
    with by_name(name).installed() as bf:
        yield bf


# --- helpers to derive broken copies of the correct fakes --------------------


def _variant(base: type, name: str, drop: tuple[str, ...] = (), **members) -> type:
    """A copy of ``base`` (same bases, copied namespace) minus ``drop`` plus ``members``.

    A copy rather than a subclass so that a method can really be absent
    (``hasattr`` is False), not merely overridden.
    """
    ns = {
        k: v
        for k, v in base.__dict__.items()
        if k not in ("__dict__", "__weakref__") and k not in drop
    }
    for k in drop:
        if k not in base.__dict__:
            raise AttributeError(f"{base.__name__} has no {k!r} to drop")
    ns.update(members)
    ns["__module__"] = __name__
    ns["__qualname__"] = name
    ns["__doc__"] = f"Broken copy of {base.__name__}."
    return type(name, base.__bases__, ns)


# -- coverage --
def _counter_peek(self) -> int:
    return self.count


# -- signature --
def _queue_push_arity(self, x: torch.Tensor, y: torch.Tensor) -> None:
    self.queue.append(x)


def _config_add_default(self, x: torch.Tensor, alpha: float = 2.0) -> None:
    self.items.append(x * (alpha * self.scale))
    while len(self.items) > self.capacity:
        self.items.pop(0)


def _config_add_kwname(self, t: torch.Tensor, alpha: float = 1.0) -> None:
    self.items.append(t * (alpha * self.scale))
    while len(self.items) > self.capacity:
        self.items.pop(0)


def _counter_value_annotation(self) -> float:
    return self.count


def _config_tag_no_default(self, name: str, prefix: str) -> str:
    full = prefix + ":" + name
    self._tags.append(full)
    return full


# -- return_type --
def _counter_value_float(self) -> int:
    return float(self.count)


def _queue_clone_queue_tuple(self) -> list[torch.Tensor]:
    return tuple(t.clone() for t in self.queue)


def _config_stats_list(self) -> tuple[int, float]:
    return [len(self.items), float(self.scale)]


# -- agreement --
def _counter_increment_off_by_one(self, step: int) -> int:
    self.count = self.count + step
    return self.count + 1


def _queue_size_off_by_one(self) -> int:
    # An int of the right type, one too many: only the value differs.
    return len(self.queue) + 1


def _queue_pop_empty(self) -> torch.Tensor:
    # The bug in torch's own fake for _TorchScriptTesting::_TensorQueue.
    if len(self.queue) > 0:
        return self.queue.pop(0)
    return torch.empty([])


def _config_total_dtype(self, fallback: torch.Tensor | None = None) -> torch.Tensor:
    if len(self.items) == 0 and fallback is not None:
        return fallback
    acc = torch.zeros((), dtype=torch.float64)
    for t in self.items:
        acc = acc + t.to(torch.float64).sum()
    return acc


def _queue_size_raises(self) -> int:
    raise NotImplementedError("FakeTensorQueue.size is not implemented")


# -- roundtrip --
def _counter_unflatten_raises(cls, flattened):
    # C++ flattens to (("count", n),); there is no "value" key.
    return cls(count=dict(flattened)["value"])


# -- custom_op --
def _fake_counter_scale_wrong_dtype(c, x):
    out = c.scale(x)
    # Always a dtype C++ does not return (reads metadata only).
    return out.to(torch.float32 if out.dtype == torch.float64 else torch.float64)


def _fake_push_scaled_pushes_nothing(x, alpha, foo):
    # Right return value (None), wrong effect: the object never grows.
    return None


# -- binding patterns (samples_patterns) --
def _versioned_clamp_three(x: int, hi: int, lo: int = 0) -> int:
    return max(lo, min(x, hi))


def _anybox_get_str(self):
    return str(len(self.items))


def _bag_len_counts_one_more(self) -> int:
    return len(self.xs) + 1


def _bag_merge_reads_the_real_object(self, other) -> None:
    # Written against the real ScriptObject: a FakeScriptObject (what torch passes while tracing) has no
    # __obj_flatten__ to call.
    self.xs.extend(dict(other.__obj_flatten__())["xs"])


def _queue_init_renamed(self, queue: list[torch.Tensor], init_tensor_: torch.Tensor) -> None:
    # Stores the flattened state under other names: torch.compile reads getattr(fake, "queue").
    self._items = list(queue)
    self._init = init_tensor_


def _queue_renamed_push(self, x: torch.Tensor) -> None:
    self._items.append(x)


def _queue_renamed_pop(self) -> torch.Tensor:
    return self._items.pop(0) if self._items else self._init


def _queue_renamed_top(self) -> torch.Tensor:
    return self._items[0] if self._items else self._init


def _queue_renamed_size(self) -> int:
    return len(self._items)


def _queue_renamed_clone_queue(self) -> list[torch.Tensor]:
    return [t.clone() for t in self._items]


def _queue_renamed_raw(self) -> list[torch.Tensor]:
    return list(self._items)


def _queue_renamed_for_each_add_(self, inc: torch.Tensor) -> None:
    for t in self._items:
        t.add_(inc)


# -- differential, values past the small ones: right for every argument the fixed draws give (-2..8) --
def _counter_increment_one_node(self, step: int) -> int:
    # A formula from a one-node setup: a step past one node's 8 ranks counts as 8.
    self.count = self.count + min(step, 8)
    return self.count


# -- differential (each defect needs two or more calls on the same object) --
def _queue_pop_keeps(self) -> torch.Tensor:
    # Returns the front without removing it: the result is right, the queue
    # never shrinks (visible to the next size() / pop()).
    if len(self.queue) > 0:
        return self.queue[0]
    return self.init_tensor_


def _config_add_no_evict(self, x: torch.Tensor, alpha: float = 1.0) -> None:
    # Forgets the capacity: never evicts the oldest item.  (extend() keeps its
    # own eviction below, so its returned count stays right.)
    self.items.append(x * (alpha * self.scale))


def _config_extend_evicting(self, xs: list[torch.Tensor]) -> int:
    for x in xs:
        self.items.append(x * (1.0 * self.scale))
        while len(self.items) > self.capacity:
            self.items.pop(0)
    return len(self.items)


def _queue_pop_empty_last(self) -> torch.Tensor:
    # Reuses init_tensor_ as the slot of the last popped tensor: right on a
    # queue created empty (nothing popped yet), wrong once pops have emptied
    # it -- an empty pop (and top) then answer with the last popped tensor's
    # shape, not init_tensor_'s.
    if len(self.queue) > 0:
        self.init_tensor_ = self.queue.pop(0)
        return self.init_tensor_
    return self.init_tensor_


BROKEN_FAKES: tuple[BrokenFake, ...] = (
    # [fake_class]
    BrokenFake(
        name="counter_no_fake_class",
        qualname="samples::Counter",
        check="fake_class",
        method=None,
        rule="a TorchBind class must have a registered fake class",
        fake_class=None,
    ),
    # [coverage]
    BrokenFake(
        name="queue_missing_top",
        qualname="samples::TensorQueue",
        check="coverage",
        method="top",
        rule="the fake class must implement every C++ method (top is missing)",
        fake_class=_variant(FakeTensorQueue, "FakeTensorQueueNoTop", drop=("top",)),
    ),
    BrokenFake(
        name="counter_missing_reset",
        qualname="samples::Counter",
        check="coverage",
        method="reset",
        rule="the fake class must implement every C++ method (reset is missing)",
        fake_class=_variant(FakeCounter, "FakeCounterNoReset", drop=("reset",)),
    ),
    # [extra_methods]
    BrokenFake(
        name="counter_extra_peek",
        qualname="samples::Counter",
        check="extra_methods",
        method="peek",
        rule="the fake class must not have public methods the C++ class lacks (peek)",
        fake_class=_variant(FakeCounter, "FakeCounterExtraPeek", peek=_counter_peek),
    ),
    # [signature]
    BrokenFake(
        name="queue_push_arity",
        qualname="samples::TensorQueue",
        check="signature",
        method="push",
        rule="fake push(self, x, y) takes 2 arguments, C++ push takes 1",
        fake_class=_variant(
            FakeTensorQueue, "FakeTensorQueuePushArity", push=_queue_push_arity
        ),
    ),
    BrokenFake(
        name="config_add_default",
        qualname="samples::Config",
        check="signature",
        method="add",
        rule="fake add(x, alpha=2.0) has a default that differs from the schema's alpha=1.0",
        fake_class=_variant(
            FakeConfig, "FakeConfigAddDefault", add=_config_add_default
        ),
    ),
    BrokenFake(
        name="config_add_kwname",
        qualname="samples::Config",
        check="signature",
        method="add",
        rule="fake add(t, alpha=1.0) names its first parameter t, the schema names it x",
        fake_class=_variant(FakeConfig, "FakeConfigAddKwname", add=_config_add_kwname),
    ),
    BrokenFake(
        name="counter_value_annotation",
        qualname="samples::Counter",
        check="signature",
        method="value",
        rule="fake value() is annotated -> float, the schema returns int",
        fake_class=_variant(
            FakeCounter, "FakeCounterValueAnnotation", value=_counter_value_annotation
        ),
    ),
    BrokenFake(
        name="config_tag_no_default",
        qualname="samples::Config",
        check="signature",
        method="tag",
        rule='fake tag(name, prefix) lacks the schema default prefix="cfg"',
        fake_class=_variant(
            FakeConfig, "FakeConfigTagNoDefault", tag=_config_tag_no_default
        ),
    ),
    # [return_type]
    BrokenFake(
        name="counter_value_float",
        qualname="samples::Counter",
        check="return_type",
        method="value",
        rule="fake value() returns a float, C++ returns int",
        fake_class=_variant(FakeCounter, "FakeCounterValueFloat", value=_counter_value_float),
    ),
    BrokenFake(
        name="queue_clone_queue_tuple",
        qualname="samples::TensorQueue",
        check="return_type",
        method="clone_queue",
        rule="fake clone_queue() returns a tuple, C++ returns a list (Tensor[])",
        fake_class=_variant(
            FakeTensorQueue, "FakeTensorQueueCloneTuple", clone_queue=_queue_clone_queue_tuple
        ),
    ),
    BrokenFake(
        name="config_stats_list",
        qualname="samples::Config",
        check="return_type",
        method="stats",
        rule="fake stats() returns a list, C++ returns a tuple (int, float)",
        fake_class=_variant(FakeConfig, "FakeConfigStatsList", stats=_config_stats_list),
    ),
    # [agreement]
    BrokenFake(
        name="counter_increment_off_by_one",
        qualname="samples::Counter",
        check="agreement",
        method="increment",
        rule="fake increment() returns the new value + 1 (off by one)",
        fake_class=_variant(
            FakeCounter, "FakeCounterIncrementOffByOne", increment=_counter_increment_off_by_one
        ),
    ),
    BrokenFake(
        name="queue_pop_empty_shape",
        qualname="samples::TensorQueue",
        check="agreement",
        method="pop",
        rule="fake pop() on an empty queue returns torch.empty([]), C++ returns init_tensor_"
        " (metadata differs unless init_tensor_ is a 0-dim float32)",
        fake_class=_variant(FakeTensorQueue, "FakeTensorQueuePopEmpty", pop=_queue_pop_empty),
    ),
    BrokenFake(
        name="config_total_dtype",
        qualname="samples::Config",
        check="agreement",
        method="total",
        rule="fake total() sums in float64, C++ returns float32"
        " (the empty-with-fallback path still agrees)",
        fake_class=_variant(FakeConfig, "FakeConfigTotalDtype", total=_config_total_dtype),
    ),
    BrokenFake(
        name="queue_size_off_by_one",
        qualname="samples::TensorQueue",
        check="agreement",
        method="size",
        rule="fake size() returns the length + 1: an int, as C++ returns, with another value",
        fake_class=_variant(FakeTensorQueue, "FakeTensorQueueSizeOffByOne", size=_queue_size_off_by_one),
    ),
    BrokenFake(
        name="queue_size_raises",
        qualname="samples::TensorQueue",
        check="agreement",
        method="size",
        rule="fake size() raises NotImplementedError, C++ size() returns",
        fake_class=_variant(FakeTensorQueue, "FakeTensorQueueSizeRaises", size=_queue_size_raises),
    ),
    # [roundtrip]
    BrokenFake(
        name="counter_unflatten_raises",
        qualname="samples::Counter",
        check="roundtrip",
        method=None,
        rule='fake __obj_unflatten__ expects a key "value" that __obj_flatten__ does not give',
        fake_class=_variant(
            FakeCounter,
            "FakeCounterUnflattenRaises",
            __obj_unflatten__=classmethod(_counter_unflatten_raises),
        ),
    ),
    # [custom_op]
    BrokenFake(
        name="op_for_each_add_missing",
        qualname="samples::TensorQueue",
        check="custom_op",
        method="for_each_add_",
        rule="custom op samples::for_each_add_ takes a TorchBind object but has no Python fake",
        fake_class=FakeTensorQueue,
        op_fakes={"samples::for_each_add_": None},
    ),
    BrokenFake(
        name="op_counter_scale_dtype",
        qualname="samples::Counter",
        check="custom_op",
        method="counter_scale",
        rule="the Python fake of samples::counter_scale returns the wrong dtype",
        fake_class=FakeCounter,
        op_fakes={"samples::counter_scale": _fake_counter_scale_wrong_dtype},
    ),
    # [binding patterns]
    BrokenFake(
        name="versioned_static_signature",
        qualname="samples_patterns::Versioned",
        check="signature",
        method="clamp",
        rule="the fake's def_static clamp takes a third argument the C++ static method does not",
        fake_class=_variant(FakeVersioned, "FakeVersionedClampThree", clamp=staticmethod(_versioned_clamp_three)),
    ),
    BrokenFake(
        name="anybox_get_str",
        qualname="samples_patterns::AnyBox",
        check="return_type",
        method="get",
        rule="get() returns c10::IValue (schema type Any); the fake returns a str where C++ returns an int or a "
        "Tensor",
        fake_class=_variant(FakeAnyBox, "FakeAnyBoxGetStr", get=_anybox_get_str),
    ),
    BrokenFake(
        name="bag_len_off_by_one",
        qualname="samples_patterns::Bag",
        check="agreement",
        method="__len__",
        rule="the fake's __len__ (a dunder bound in C++) counts one element too many",
        fake_class=_variant(FakeBag, "FakeBagLenOffByOne", __len__=_bag_len_counts_one_more),
    ),
    BrokenFake(
        name="bag_merge_reads_real_object",
        qualname="samples_patterns::Bag",
        check="agreement",
        method="merge",
        rule="merge(other) reads other.__obj_flatten__(), which a FakeScriptObject (the argument while tracing) "
        "does not have",
        fake_class=_variant(FakeBag, "FakeBagMergeReadsReal", merge=_bag_merge_reads_the_real_object),
    ),
    BrokenFake(
        name="queue_flatten_keys_renamed",
        qualname="samples::TensorQueue",
        check="roundtrip",
        method="__obj_unflatten__",
        rule="the fake keeps the flattened queue and init_tensor_ as _items and _init: torch.compile reads "
        "getattr(fake, 'queue') and fails",
        fake_class=_variant(
            FakeTensorQueue, "FakeTensorQueueRenamed", __init__=_queue_init_renamed, push=_queue_renamed_push,
            pop=_queue_renamed_pop, top=_queue_renamed_top, size=_queue_renamed_size,
            clone_queue=_queue_renamed_clone_queue, get_raw_queue=_queue_renamed_raw,
            for_each_add_=_queue_renamed_for_each_add_),
    ),
    # [differential]
    BrokenFake(
        name="op_push_scaled_pushes_nothing",
        qualname="samples::TensorQueue",
        check="differential",
        method="push_scaled",
        rule="the Python fake of samples::push_scaled (object third) never pushes: size() afterwards differs",
        fake_class=FakeTensorQueue,
        op_fakes={"samples::push_scaled": _fake_push_scaled_pushes_nothing},
    ),
    BrokenFake(
        name="queue_pop_keeps",
        qualname="samples::TensorQueue",
        check="differential",
        method="pop",
        rule="fake pop() returns the front without removing it (size() after a pop differs)",
        fake_class=_variant(FakeTensorQueue, "FakeTensorQueuePopKeeps", pop=_queue_pop_keeps),
    ),
    BrokenFake(
        name="config_add_no_evict",
        qualname="samples::Config",
        check="differential",
        method="add",
        rule="fake add() ignores the capacity and never evicts (stats() after an add on a full Config differs)",
        fake_class=_variant(FakeConfig, "FakeConfigAddNoEvict", add=_config_add_no_evict,
                            extend=_config_extend_evicting),
    ),
    BrokenFake(
        name="queue_pop_empty_last",
        qualname="samples::TensorQueue",
        check="differential",
        method="pop",
        rule="fake pop() on a queue emptied by pops returns the last popped tensor (so does top()), C++ returns"
        " init_tensor_ (right on a queue created empty)",
        fake_class=_variant(FakeTensorQueue, "FakeTensorQueuePopEmptyLast", pop=_queue_pop_empty_last),
    ),
    BrokenFake(
        name="counter_increment_one_node",
        qualname="samples::Counter",
        check="differential",
        method="increment",
        rule="fake increment() counts a step past 8 (one node's ranks) as 8: every call with the small arguments"
        " the other checks draw agrees; the differential's wider int draws (up to 1024) show it",
        fake_class=_variant(FakeCounter, "FakeCounterIncrementOneNode", increment=_counter_increment_one_node),
    ),
)

_BY_NAME = {bf.name: bf for bf in BROKEN_FAKES}
if len(_BY_NAME) != len(BROKEN_FAKES):
    raise AssertionError("duplicate BrokenFake names")


def by_name(name: str) -> BrokenFake:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"no broken fake named {name!r}; known: {', '.join(sorted(_BY_NAME))}"
        ) from None


def _make_installer(bf: BrokenFake) -> Callable[[], BrokenFake]:
    def install() -> BrokenFake:
        return bf.install()

    install.__name__ = install.__qualname__ = bf.installer_name
    install.__doc__ = f"Install broken fake {bf.name!r} for the rest of the process: {bf.rule}"
    install.__module__ = __name__
    return install


for _bf in BROKEN_FAKES:
    globals()[_bf.installer_name] = _make_installer(_bf)
    __all__.append(_bf.installer_name)
del _bf

# The correct op fakes, for reference by name.
CORRECT_OP_FAKES = dict(_fakes.OP_FAKES)
