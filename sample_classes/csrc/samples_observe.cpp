// TorchBind classes whose argument-less methods are not all observers
// (namespace `samples_observe`): the differential test must prove which
// methods only read the state before calling them after every step.
//
// * StreamGuard: a stream-guard-like class, written the way inference
//   runtimes write them. Its flattened state is the device index; the bound
//   stream handle is process-local, so __obj_flatten__ and the pickle OMIT it.
//   - bind(int handle) binds a stream (handle > 0); is_bound() says whether
//     one is bound; clear() unbinds it. clear() leaves __obj_flatten__
//     unchanged, yet it changes what is_bound() returns: it is not an
//     observer, although "flatten did not change" says it is.
//   - device() / set_device(int) read and write the flattened device index.
//   - jitter() draws fresh random retry delays (torch::rand): it reads and
//     changes nothing of the object, but two calls in a row differ, so only
//     the adopter's word (conformance.strategy(..., observer=True)) makes it
//     an observer.
// * RunningStats: a newcomer's running statistics over pushed floats, correct
//   and flattening all its state (count, total). reset() changes the state;
//   on a fresh object (count 0) it changes nothing, so examples holding only
//   fresh objects make it look like an observer.
//
// * Latch: prime() then arm() arms it (arm() on a latch not primed does nothing);
//   settle() disarms it. On the example (a new latch) and on every state one
//   call reaches (primed, or an unprimed arm()), settle() changes nothing, so
//   it looks like an observer; only on the state two calls reach (prime(),
//   arm()) does it change is_armed() and the flattened state.
// * Debounce: a debounced trigger, armed by arm() only once hit() counted two
//   hits; settle() disarms it. settle() changes nothing on any state one or
//   two calls reach (hit(); hit() is not armed yet), so the observers' proof
//   takes it for an observer; only the state three calls reach (hit(); hit();
//   arm()) shows otherwise, and only the differential's own sequences get
//   there.
//
// Correct fakes and broken fakes live in sample_classes/fakes_observe.py.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/types.h>

#include <string>
#include <tuple>

namespace torchbind_samples_observe {

struct StreamGuard : torch::CustomClassHolder {
  explicit StreamGuard(int64_t device_index) : device_index_(device_index) {
    TORCH_CHECK(device_index >= 0, "StreamGuard: device_index must be >= 0, got ", device_index);
  }

  void bind(int64_t handle) {
    TORCH_CHECK(handle > 0, "StreamGuard.bind: a stream handle is positive, got ", handle);
    handle_ = handle;
  }

  bool is_bound() {
    return handle_ != 0;
  }

  void clear() {
    handle_ = 0;
  }

  int64_t device() {
    return device_index_;
  }

  at::Tensor jitter() {
    return torch::rand({2});
  }

  void set_device(int64_t device_index) {
    TORCH_CHECK(device_index >= 0, "StreamGuard.set_device: device_index must be >= 0, got ", device_index);
    device_index_ = device_index;
  }

  // The handle is a process-local stream: not flattened, not pickled.
  std::tuple<std::tuple<std::string, int64_t>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("device_index"), device_index_));
  }

  int64_t device_index_;
  int64_t handle_ = 0;
};

struct RunningStats : torch::CustomClassHolder {
  RunningStats() = default;
  RunningStats(int64_t count, double total) : count_(count), total_(total) {}

  void push(double x) {
    count_ += 1;
    total_ += x;
  }

  int64_t count() {
    return count_;
  }

  double mean() {
    TORCH_CHECK(count_ > 0, "RunningStats.mean: no values pushed yet");
    return total_ / static_cast<double>(count_);
  }

  void reset() {
    count_ = 0;
    total_ = 0.0;
  }

  std::tuple<std::tuple<std::string, int64_t>, std::tuple<std::string, double>> __obj_flatten__() {
    return std::make_tuple(
        std::make_tuple(std::string("count"), count_), std::make_tuple(std::string("total"), total_));
  }

  int64_t count_ = 0;
  double total_ = 0.0;
};

struct Latch : torch::CustomClassHolder {
  Latch() = default;
  Latch(bool primed, bool armed) : primed_(primed), armed_(armed) {}

  void prime() {
    primed_ = true;
  }

  void arm() {
    if (primed_) {
      armed_ = true;
    }
  }

  void settle() {
    armed_ = false;
  }

  bool is_armed() {
    return armed_;
  }

  bool is_primed() {
    return primed_;
  }

  std::tuple<std::tuple<std::string, bool>, std::tuple<std::string, bool>> __obj_flatten__() {
    return std::make_tuple(
        std::make_tuple(std::string("primed"), primed_), std::make_tuple(std::string("armed"), armed_));
  }

  bool primed_ = false;
  bool armed_ = false;
};

struct Debounce : torch::CustomClassHolder {
  Debounce() = default;
  Debounce(int64_t hits, bool armed) : hits_(hits), armed_(armed) {}

  void hit() {
    hits_ += 1;
  }

  void arm() {
    if (hits_ >= 2) {
      armed_ = true;
    }
  }

  void settle() {
    armed_ = false;
  }

  bool is_armed() {
    return armed_;
  }

  int64_t hits() {
    return hits_;
  }

  std::tuple<std::tuple<std::string, int64_t>, std::tuple<std::string, bool>> __obj_flatten__() {
    return std::make_tuple(
        std::make_tuple(std::string("hits"), hits_), std::make_tuple(std::string("armed"), armed_));
  }

  int64_t hits_ = 0;
  bool armed_ = false;
};

}  // namespace torchbind_samples_observe

using torchbind_samples_observe::Debounce;
using torchbind_samples_observe::Latch;
using torchbind_samples_observe::RunningStats;
using torchbind_samples_observe::StreamGuard;

TORCH_LIBRARY(samples_observe, m) {
  m.class_<StreamGuard>("StreamGuard")
      .def(torch::init<int64_t>(), "", {torch::arg("device_index") = 0})
      .def("bind", &StreamGuard::bind)
      .def("clear", &StreamGuard::clear)
      .def("is_bound", &StreamGuard::is_bound)
      .def("device", &StreamGuard::device)
      .def("set_device", &StreamGuard::set_device)
      .def("jitter", &StreamGuard::jitter)
      .def("__obj_flatten__", &StreamGuard::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<StreamGuard>& self) -> int64_t {
            return self->device_index_;
          },
          [](int64_t device_index) -> c10::intrusive_ptr<StreamGuard> {
            return c10::make_intrusive<StreamGuard>(device_index);
          });

  m.class_<RunningStats>("RunningStats")
      .def(torch::init<>())
      .def("push", &RunningStats::push)
      .def("count", &RunningStats::count)
      .def("mean", &RunningStats::mean)
      .def("reset", &RunningStats::reset)
      .def("__obj_flatten__", &RunningStats::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<RunningStats>& self) -> std::tuple<int64_t, double> {
            return std::make_tuple(self->count_, self->total_);
          },
          [](std::tuple<int64_t, double> state) -> c10::intrusive_ptr<RunningStats> {
            return c10::make_intrusive<RunningStats>(std::get<0>(state), std::get<1>(state));
          });
  m.class_<Latch>("Latch")
      .def(torch::init<>())
      .def("prime", &Latch::prime)
      .def("arm", &Latch::arm)
      .def("settle", &Latch::settle)
      .def("is_armed", &Latch::is_armed)
      .def("is_primed", &Latch::is_primed)
      .def("__obj_flatten__", &Latch::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Latch>& self) -> std::tuple<bool, bool> {
            return std::make_tuple(self->primed_, self->armed_);
          },
          [](std::tuple<bool, bool> state) -> c10::intrusive_ptr<Latch> {
            return c10::make_intrusive<Latch>(std::get<0>(state), std::get<1>(state));
          });
  m.class_<Debounce>("Debounce")
      .def(torch::init<>())
      .def("hit", &Debounce::hit)
      .def("arm", &Debounce::arm)
      .def("settle", &Debounce::settle)
      .def("is_armed", &Debounce::is_armed)
      .def("hits", &Debounce::hits)
      .def("__obj_flatten__", &Debounce::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Debounce>& self) -> std::tuple<int64_t, bool> {
            return std::make_tuple(self->hits_, self->armed_);
          },
          [](std::tuple<int64_t, bool> state) -> c10::intrusive_ptr<Debounce> {
            return c10::make_intrusive<Debounce>(std::get<0>(state), std::get<1>(state));
          });
}
