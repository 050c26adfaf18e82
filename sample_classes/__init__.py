"""Sample TorchBind classes (C++, built with torch.utils.cpp_extension) and
their Python fakes, for testing torchbind-conformance.

Importing the package builds (cached) and loads the sample C++ classes, one
extension per namespace (see ``_build.py``), and registers the correct fakes
for the ``samples``, ``samples_limits`` and ``samples_patterns`` namespaces.
Imported by a pytest run's ``--torchbind-load=sample_classes``, it builds and
loads only the namespaces the run selects (``--torchbind-class=samples::X``:
``samples`` alone; :func:`conformance.selected_classes`), plus
``samples``; anywhere else, all of them.  ``fakes_limits`` and
``fakes_patterns`` are then imported on first use, and every ``fakes_*``
module loads its own namespace when imported.  Not imported automatically:

* ``sample_classes.fakes_broken`` -- fakes for the ``samples_broken`` classes,
  whose C++ side breaks a rule on purpose;
* ``sample_classes.fakes_inputs`` -- fakes for the ``samples_inputs`` classes
  (preconditions), with ``sample_classes.adopter_inputs``: the adopter's
  examples and strategies for them, through the public API;
* ``sample_classes.broken`` -- a catalogue of deliberately broken fakes for the
  ``samples`` classes (``BROKEN_FAKES``, ``by_name``, ``install_<name>``).
"""

import importlib

from ._build import load_library, load_namespaces, namespaces


def _asked() -> list[str] | None:
    """The sample namespaces the pytest run importing this package selects (with ``samples``, whose fakes this
    package registers), or ``None`` (all) outside such a run or when a selector names no sample namespace."""
    from conformance import selected_classes

    selectors = selected_classes()
    if not selectors:
        return None
    asked = {"samples"} | {selector.partition("::")[0] for selector in selectors}
    return sorted(asked) if asked <= set(namespaces()) else None


LIBRARY_PATHS = load_namespaces(_asked())  # namespace -> the path of its library
LIBRARY_PATH = LIBRARY_PATHS["samples"]

from . import fakes  # noqa: E402  (registers on import; needs the library)

fakes.register()
_EAGER = ("fakes_limits", "fakes_patterns")  # imported with the package when their namespace is loaded
for _name in _EAGER:
    if _name.replace("fakes", "samples") in LIBRARY_PATHS:
        importlib.import_module(f".{_name}", __name__)


def __getattr__(name: str):
    """``sample_classes.fakes_limits`` / ``fakes_patterns`` not imported with the package: imported (and their
    namespace built and loaded) on first use."""
    if name in _EAGER:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


CLASS_QUALNAMES = ("samples::TensorQueue", "samples::Counter", "samples::Config")
OP_QUALNAMES = (
    "samples::for_each_add_",
    "samples::queue_size_like",
    "samples::counter_scale",
    "samples::push_scaled",  # takes the object as its third argument
)
PATTERN_CLASS_QUALNAMES = (  # binding patterns a gate must judge right (fakes in fakes_patterns.py)
    "samples_patterns::Versioned",  # def_static methods
    "samples_patterns::AnyBox",  # a c10::IValue result (schema type Any)
    "samples_patterns::Bag",  # dunder methods; merge(Bag other) takes another object
    "samples_patterns::Holder",  # __obj_flatten__ hands out the constructor's tensor (a C++ bug)
    "samples_patterns::CopyingHolder",  # the same class done right
)
BROKEN_CLASS_QUALNAMES = (
    "samples_broken::FlattenDup",
    "samples_broken::FlattenMutates",
    "samples_broken::BadTracingMode",
    "samples_broken::LossyPickle",
    "samples_broken::NoFlatten",
    "samples_broken::FlattenWrongStructure",
    "samples_broken::PickyInit",
)
INPUTS_CLASS_QUALNAMES = (  # preconditions (fakes_inputs.py; the adopter's examples and strategies: adopter_inputs.py)
    "samples_inputs::PagedCache",  # shape/index preconditions, a raw-pointer method, an untyped-self __eq__, op gather
    "samples_inputs::RealEngine",  # tracing_mode() returns "real": torch never uses its (stale) fake
)
LIMITS_CLASS_QUALNAMES = (  # classes that meet torch's limits in the matrix (fakes in fakes_limits.py)
    "samples_limits::Vocab",  # __contains__ / __getitem__ / __len__ taking a str token: dynamo cannot trace them
    "samples_limits::Stash",  # store(t) keeps its tensor: strict export leaves a FakeTensor in the real object
)
OBSERVE_CLASS_QUALNAMES = (  # argument-less methods that are not all observers (fakes in fakes_observe.py)
    "samples_observe::StreamGuard",  # clear() resets a handle __obj_flatten__ omits: flatten unchanged, is_bound() not
    "samples_observe::RunningStats",  # reset() changes nothing on a fresh object
    "samples_observe::Latch",  # settle() changes nothing on any state one call reaches, only after prime(), arm()
    "samples_observe::Debounce",  # settle() changes nothing on any state two calls reach, only after hit(), hit(), arm()
)
STALE_CLASS_QUALNAMES = (  # results a traced program can bake in (fakes in fakes_stale.py)
    "samples_stale::Vocab",  # __getitem__ / get_default_index read a default index: export burns the int in
    "samples_stale::Toggle",  # is_enabled() reads a switch __obj_flatten__ omits: a recompiled program reads it off
)
LIST_CLASS_QUALNAMES = (  # methods taking tensors only as a list (fakes in fakes_lists.py)
    "samples_lists::Batch",  # store(Tensor[]) keeps the tensors as given: the computed row computes each element
)
EVIDENCE_CLASS_QUALNAMES = (  # the evidence rule (fakes in fakes_evidence.py, not imported here)
    "samples_evidence::Span",  # flattened keys that are getters' names; __len__ raises by design
    "samples_evidence::Ticketer",  # next() reads a process-wide counter: divergences a fresh process does not show
    "samples_evidence::Ledger",  # spend(x) changes the object, then reads x's data: strict export changes it, then fails
)
MULTI_CLASS_QUALNAMES = (  # ops taking two objects of the class (fakes in fakes_multi.py, not imported here)
    "samples_multi::StreamGuard",  # enter_compute_stream clears its 2nd object; merge_into(g, g) takes one twice
)
MULTI_OP_QUALNAMES = ("samples_multi::enter_compute_stream", "samples_multi::merge_into")
UNSAFE_CLASS_QUALNAMES = (  # crash, hang or leak in C++ on purpose; only with process isolation
    "samples_unsafe::CrashyStack",
    "samples_unsafe::OverflowPickle",
    "samples_unsafe::Leaky",  # grow(n) leaks memory (fakes_unsafe registers its examples)
)

__all__ = [
    "load_library",
    "load_namespaces",
    "LIBRARY_PATH",
    "LIBRARY_PATHS",
    "fakes",
    "fakes_patterns",
    "fakes_limits",
    "CLASS_QUALNAMES",
    "PATTERN_CLASS_QUALNAMES",
    "OP_QUALNAMES",
    "BROKEN_CLASS_QUALNAMES",
    "INPUTS_CLASS_QUALNAMES",
    "LIMITS_CLASS_QUALNAMES",
    "OBSERVE_CLASS_QUALNAMES",
    "STALE_CLASS_QUALNAMES",
    "LIST_CLASS_QUALNAMES",
    "EVIDENCE_CLASS_QUALNAMES",
    "MULTI_CLASS_QUALNAMES",
    "MULTI_OP_QUALNAMES",
    "UNSAFE_CLASS_QUALNAMES",
]
