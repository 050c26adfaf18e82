"""Correct Python fake classes and op fakes for the ``samples`` namespace.

Each fake mirrors its C++ class in ``csrc/samples.cpp`` method for method:
same method names, same parameter names/defaults where the C++ schema names
them (``samples::Config``), return annotations matching the schema, and
behaviour that only uses ordinary torch ops so it runs under FakeTensorMode
(no fake ever reads tensor data; non-tensor results equal the C++ ones).

Importing this module loads the C++ library and registers everything
(idempotently); :func:`register` may be called again at any time.

Note: annotations are real objects (no ``from __future__ import annotations``)
so ``inspect.signature`` shows types, not strings.
"""

import torch
from torch._library.fake_class_registry import (
    _full_qual_class_name,
    global_fake_class_registry,
    register_fake_class,
)
from torch._library.simple_registry import singleton as _simple_registry

from . import _build

__all__ = [
    "FakeTensorQueue",
    "FakeCounter",
    "FakeConfig",
    "fake_for_each_add_",
    "fake_queue_size_like",
    "fake_counter_scale",
    "FAKE_CLASSES",
    "OP_FAKES",
    "register",
    "register_fake_classes",
]


class FakeTensorQueue:
    """Fake of ``samples::TensorQueue`` (flatten: queue, init_tensor_)."""

    def __init__(self, queue: list[torch.Tensor], init_tensor_: torch.Tensor) -> None:
        self.queue = list(queue)
        self.init_tensor_ = init_tensor_

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def push(self, x: torch.Tensor) -> None:
        self.queue.append(x)

    def pop(self) -> torch.Tensor:
        if len(self.queue) > 0:
            return self.queue.pop(0)
        return self.init_tensor_

    def top(self) -> torch.Tensor:
        if len(self.queue) > 0:
            return self.queue[0]
        return self.init_tensor_

    def size(self) -> int:
        return len(self.queue)

    def clone_queue(self) -> list[torch.Tensor]:
        return [t.clone() for t in self.queue]

    def get_raw_queue(self) -> list[torch.Tensor]:
        return list(self.queue)

    def for_each_add_(self, inc: torch.Tensor) -> None:
        for t in self.queue:
            t.add_(inc)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class FakeCounter:
    """Fake of ``samples::Counter`` (flatten: count)."""

    def __init__(self, count: int) -> None:
        self.count = count

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def increment(self, step: int) -> int:
        new = self.count + step
        if not (_INT64_MIN <= new <= _INT64_MAX):
            raise RuntimeError("Counter.increment: int64 overflow")
        self.count = new
        return self.count

    def value(self) -> int:
        return self.count

    def reset(self) -> None:
        self.count = 0

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        # Same expression as C++ `x * count_`, hence the same type promotion.
        return x * self.count


class FakeConfig:
    """Fake of ``samples::Config`` (flatten: items, capacity, scale, tags).

    The schema names and defaults of the C++ methods are reproduced exactly:
    ``add(x, alpha=1.0)``, ``total(fallback=None)``, ``extend(xs)``,
    ``tag(name, prefix="cfg")``.
    """

    def __init__(
        self,
        items: list[torch.Tensor],
        capacity: int,
        scale: float,
        tags: list[str],
    ) -> None:
        self.items = list(items)
        self.capacity = capacity
        self.scale = scale
        self._tags = list(tags)  # not `self.tags`: that would shadow the method

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def add(self, x: torch.Tensor, alpha: float = 1.0) -> None:
        self.items.append(x * (alpha * self.scale))
        while len(self.items) > self.capacity:
            self.items.pop(0)

    def total(self, fallback: torch.Tensor | None = None) -> torch.Tensor:
        if len(self.items) == 0 and fallback is not None:
            return fallback
        acc = torch.zeros((), dtype=torch.float32)
        for t in self.items:
            acc = acc + t.to(torch.float32).sum()
        return acc

    def extend(self, xs: list[torch.Tensor]) -> int:
        for x in xs:
            self.add(x, 1.0)
        return len(self.items)

    def tags(self) -> list[str]:
        return list(self._tags)

    def tag(self, name: str, prefix: str = "cfg") -> str:
        full = prefix + ":" + name
        self._tags.append(full)
        return full

    def stats(self) -> tuple[int, float]:
        return (len(self.items), float(self.scale))


# --- op fakes ---------------------------------------------------------------


def fake_for_each_add_(foo, inc):
    foo.for_each_add_(inc)


def fake_queue_size_like(foo, x):
    return x * foo.size()


def fake_counter_scale(c, x):
    return c.scale(x)


def fake_push_scaled(x, alpha, foo):
    foo.push(x * alpha)


FAKE_CLASSES = {
    "samples::TensorQueue": FakeTensorQueue,
    "samples::Counter": FakeCounter,
    "samples::Config": FakeConfig,
}

OP_FAKES = {
    "samples::for_each_add_": fake_for_each_add_,
    "samples::queue_size_like": fake_queue_size_like,
    "samples::counter_scale": fake_counter_scale,
    "samples::push_scaled": fake_push_scaled,
}

# Library handle that owns the registrations made by register_fake.  If it were
# garbage-collected, torch would drop those registrations (Library.__del__), so
# keep it across importlib.reload() of this module.
_lib = globals().get("_lib")


def register_fake_classes(fake_classes: dict[str, type], force: bool = False) -> None:
    """Load the library, then register each ``qualname -> fake class`` unless one is registered already
    (``force``: replace it). Shared by this module, ``fakes_broken`` and ``fakes_unsafe``."""
    _build.load_namespaces({qualname.split("::", 1)[0] for qualname in fake_classes})
    for qualname, cls in fake_classes.items():
        full = _full_qual_class_name(qualname)
        if force and global_fake_class_registry.has_impl(full):
            global_fake_class_registry.deregister(full)
        if not global_fake_class_registry.has_impl(full):
            register_fake_class(qualname, cls)


#: The ``FRAGMENT`` library handle per namespace that owns the op fakes :func:`register_op_fakes` registered (kept
#: across ``importlib.reload``, as ``_lib`` is).
_LIBS: dict = globals().get("_LIBS", {})


def register_op_fakes(op_fakes: dict, force: bool = False) -> None:
    """Register each ``"ns::op" -> fake`` of ``op_fakes`` with ``torch.library.register_fake`` unless the op has a
    fake already (``force``: replace it), in a library handle kept for the op's namespace. Shared by the sample
    fake modules whose ops live in namespaces of their own."""
    _build.load_namespaces({qualname.split("::", 1)[0] for qualname in op_fakes})
    for qualname, fn in op_fakes.items():
        if _simple_registry.find(qualname).fake_impl.kernel is not None and not force:
            continue
        ns = qualname.split("::", 1)[0]
        if ns not in _LIBS:
            _LIBS[ns] = torch.library.Library(ns, "FRAGMENT")
        torch.library.register_fake(qualname, fn, lib=_LIBS[ns])


def register(force: bool = False) -> None:
    """Register the correct fake classes and op fakes.

    Idempotent: a class or op that already has a fake registered is left
    alone (so calling this twice, or re-importing/reloading the module, does
    not stack duplicate kernels or clobber a fake somebody swapped in).
    ``force=True`` re-registers this module's fakes regardless.
    """
    global _lib
    register_fake_classes(FAKE_CLASSES, force)
    for qualname, fn in OP_FAKES.items():
        holder = _simple_registry.find(qualname).fake_impl
        if holder.kernel is not None and not force:
            continue
        if _lib is None:
            _lib = torch.library.Library("samples", "FRAGMENT")
        torch.library.register_fake(qualname, fn, lib=_lib)


register()
