// Ops that take two objects of one TorchBind class (namespace `samples_multi`),
// modelled on an inference compiler's stream guard: an op may mutate its
// SECOND object, or receive the same object twice.
//
// * StreamGuard(int device, int stream): holds a device index, a stream id
//   (0: none) and a count of events recorded on it. Flattened as
//   (("device", d), ("stream", s), ("events", e)); bound with def_pickle.
//   Methods: device_index(), stream_id(), event_count(), is_bound(),
//   bind(int device, int stream), record(int n), release() (stream 0,
//   device -1), reset_events(). Op fakes reach the state through these
//   methods: while tracing they receive FakeScriptObjects.
// * enter_compute_stream(StreamGuard primary, StreamGuard caller_guard,
//   int device) -> (): primary takes caller_guard's stream on `device` and
//   records one event; caller_guard is cleared (released). Nothing is
//   returned (an op returning an int cannot be traced by torch.compile:
//   "torch.* op returned non-Tensor"). The same object twice: it takes its
//   own stream, then is cleared.
// * merge_into(StreamGuard dst, StreamGuard src) -> (): dst's events grow by
//   src's, then src's are reset. The same object twice: doubled, then reset
//   to 0, in this order.
//
// Correct fakes and broken ones (the published-style fake that forgets to
// clear caller_guard; a merge_into fake correct on distinct objects only)
// are in sample_classes/fakes_multi.py.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/types.h>

#include <string>
#include <tuple>

namespace torchbind_samples_multi {

struct StreamGuard : torch::CustomClassHolder {
  StreamGuard(int64_t device, int64_t stream) : device_(device), stream_(stream) {}

  int64_t device_index() {
    return device_;
  }

  int64_t stream_id() {
    return stream_;
  }

  int64_t event_count() {
    return events_;
  }

  bool is_bound() {
    return stream_ != 0;
  }

  void bind(int64_t device, int64_t stream) {
    device_ = device;
    stream_ = stream;
  }

  void record(int64_t n) {
    TORCH_CHECK(n >= 0, "StreamGuard.record: n must be >= 0, got ", n);
    events_ += n;
  }

  void release() {
    stream_ = 0;
    device_ = -1;
  }

  void reset_events() {
    events_ = 0;
  }

  std::tuple<
      std::tuple<std::string, int64_t>,
      std::tuple<std::string, int64_t>,
      std::tuple<std::string, int64_t>>
  __obj_flatten__() {
    return std::make_tuple(
        std::make_tuple(std::string("device"), device_),
        std::make_tuple(std::string("stream"), stream_),
        std::make_tuple(std::string("events"), events_));
  }

  int64_t device_;
  int64_t stream_;
  int64_t events_ = 0;
};

void enter_compute_stream_op(
    c10::intrusive_ptr<StreamGuard> primary,
    c10::intrusive_ptr<StreamGuard> caller_guard,
    int64_t device) {
  TORCH_CHECK(device >= 0, "enter_compute_stream: device must be >= 0, got ", device);
  int64_t taken = caller_guard->stream_;
  primary->bind(device, taken);
  primary->record(1);
  caller_guard->release();
}

void merge_into_op(c10::intrusive_ptr<StreamGuard> dst, c10::intrusive_ptr<StreamGuard> src) {
  dst->events_ += src->events_;
  src->events_ = 0;
}

} // namespace torchbind_samples_multi

using torchbind_samples_multi::StreamGuard;

TORCH_LIBRARY(samples_multi, m) {
  m.class_<StreamGuard>("StreamGuard")
      .def(torch::init<int64_t, int64_t>())
      .def("device_index", &StreamGuard::device_index)
      .def("stream_id", &StreamGuard::stream_id)
      .def("event_count", &StreamGuard::event_count)
      .def("is_bound", &StreamGuard::is_bound)
      .def("bind", &StreamGuard::bind)
      .def("record", &StreamGuard::record)
      .def("release", &StreamGuard::release)
      .def("reset_events", &StreamGuard::reset_events)
      .def("__obj_flatten__", &StreamGuard::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<StreamGuard>& self) -> std::tuple<int64_t, int64_t, int64_t> {
            return std::make_tuple(self->device_, self->stream_, self->events_);
          },
          [](std::tuple<int64_t, int64_t, int64_t> state) -> c10::intrusive_ptr<StreamGuard> {
            auto guard = c10::make_intrusive<StreamGuard>(std::get<0>(state), std::get<1>(state));
            guard->events_ = std::get<2>(state);
            return guard;
          });

  m.def(
      "enter_compute_stream(__torch__.torch.classes.samples_multi.StreamGuard primary, "
      "__torch__.torch.classes.samples_multi.StreamGuard caller_guard, int device) -> ()");
  m.def(
      "merge_into(__torch__.torch.classes.samples_multi.StreamGuard dst, "
      "__torch__.torch.classes.samples_multi.StreamGuard src) -> ()");
}

// No tensor arguments: the kernels serve every backend.
TORCH_LIBRARY_IMPL(samples_multi, CompositeExplicitAutograd, m) {
  m.impl("enter_compute_stream", torchbind_samples_multi::enter_compute_stream_op);
  m.impl("merge_into", torchbind_samples_multi::merge_into_op);
}
