"""``roundtrip`` holds a fake to each flattened value only where a program reads it: tensors (torch reads their
metadata from the fake's attributes) and values behind a getter of the key's name that C++ also has. A fake that
keeps a non-tensor field in another form, as Torch-TensorRT's published fake keeps its engine string
base64-decoded, changes no program: that is a note, not a failure. Plain torch beside each verdict, on
``samples_multi::StreamGuard`` (keys ``device``, ``stream``, ``events``; getters ``device_index()``,
``stream_id()``, ``event_count()``)."""

from __future__ import annotations

import pytest
import torch
from torch._library.fake_class_registry import maybe_to_fake_obj
from torch._subclasses.fake_tensor import FakeTensorMode

import conformance
from conformance.core.results import Status
from conformance.runner import plan, run_target
from conftest import compiled_once, engine_of

GUARD = "samples_multi::StreamGuard"


@pytest.fixture(scope="module")
def multi():
    import sample_classes  # noqa: F401 - builds (cached) and loads the library
    import sample_classes.fakes_multi

    return sample_classes.fakes_multi


def _fakes(multi):
    from sample_classes.broken import BrokenFake

    class FakeGuardEncoded(multi.FakeStreamGuard):
        """Correct: keeps the stream id as text (a handle kept encoded), its methods decode it."""

        def __init__(self, device: int, stream: int, events: int) -> None:
            super().__init__(device, stream, events)
            self.stream = str(stream)

        def stream_id(self) -> int:
            return int(self.stream)

        def is_bound(self) -> bool:
            return int(self.stream) != 0

        def bind(self, device: int, stream: int) -> None:
            self.device, self.stream = device, str(stream)

        def release(self) -> None:
            self.stream, self.device = "0", -1

    class FakeGuardSwapped(multi.FakeStreamGuard):
        """Broken: reads the flattened fields by position the wrong way round (device and stream swapped)."""

        @classmethod
        def __obj_unflatten__(cls, flattened):
            (_, device), (_, stream), (_, events) = flattened
            return cls(stream, device, events)

    def install(name, fake_class):
        return BrokenFake(name=name, qualname=GUARD, check="roundtrip", method=None, rule=name, fake_class=fake_class,
                          op_fakes=multi.OP_FAKES).installed()

    return install("encoded", FakeGuardEncoded), install("swapped", FakeGuardSwapped)


def _stream_plus(g, x):
    return x + g.stream_id()



def _guards():
    return [torch.classes.samples_multi.StreamGuard(1, 7)]


def _verdicts():
    engine = engine_of(lambda: conformance.examples(GUARD, derive=False)(_guards))
    return {(o.check, o.target): o for o in (run_target(u, engine) for u in plan(GUARD, engine,
                                                                                 only={"roundtrip", "agreement"}))}


def test_a_field_kept_in_another_form_that_no_program_reads_is_a_note(multi):
    encoded, _swapped = _fakes(multi)
    with encoded:
        # Plain torch: the fake keeps "7" where C++ flattened 7, and every program agrees with eager.
        g = torch.classes.samples_multi.StreamGuard(1, 7)
        assert dict(g.__obj_flatten__())["stream"] == 7
        assert maybe_to_fake_obj(FakeTensorMode(), g).wrapped_obj.stream == "7"
        x = torch.zeros(2)
        assert torch.equal(compiled_once(_stream_plus, g, x), _stream_plus(g, x))
        verdicts = _verdicts()
    rt = verdicts[("roundtrip", None)]
    assert rt.status is Status.PASSED, rt.render()
    [note] = [n for n in rt.notes if "hold no tensor" in n]
    assert "stream" in note and "remove_unused_graphargs" in note, note
    assert verdicts[("agreement", "stream_id")].status is Status.PASSED


def test_swapped_fields_a_getter_reads_still_fail(multi):
    _encoded, swapped = _fakes(multi)
    with swapped:
        # Plain torch: the compiled program reads the fake's stream_id(), the device index.
        g = torch.classes.samples_multi.StreamGuard(1, 7)
        x = torch.zeros(2)
        assert compiled_once(_stream_plus, g, x).tolist() == [1.0, 1.0]
        assert _stream_plus(g, x).tolist() == [7.0, 7.0]
        verdicts = _verdicts()
    # no getter of the key's own name (stream_id() reads "stream"): roundtrip notes it, agreement fails it
    rt = verdicts[("roundtrip", None)]
    assert any("hold no tensor" in n and "device" in n for n in rt.notes), rt.render()
    assert verdicts[("agreement", "stream_id")].status is Status.FAILED
