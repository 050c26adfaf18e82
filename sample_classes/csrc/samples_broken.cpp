// Deliberately broken TorchBind classes (namespace `samples_broken`).
//
// Each class breaks exactly one rule on the C++ side; the Python fakes in
// sample_classes/fakes_broken.py are correct relative to the C++ methods, so a
// conformance checker must blame the C++ class, not the fake.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/types.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace torchbind_samples_broken {

// __obj_flatten__ returns a duplicate name ("t" twice) and two tensors that
// alias each other (t and t.view(-1) share storage).
struct FlattenDup : torch::CustomClassHolder {
  explicit FlattenDup(at::Tensor t) : t_(std::move(t)) {}

  at::Tensor get() {
    return t_;
  }

  std::tuple<
      std::tuple<std::string, at::Tensor>,
      std::tuple<std::string, at::Tensor>>
  __obj_flatten__() {
    return std::make_tuple(
        std::make_tuple(std::string("t"), t_),
        std::make_tuple(std::string("t"), t_.view(-1)));
  }

  at::Tensor t_;
};

// __obj_flatten__ mutates the object: every call bumps the counter it returns,
// so two consecutive calls differ.
struct FlattenMutates : torch::CustomClassHolder {
  explicit FlattenMutates(int64_t n) : n_(n) {}

  int64_t get() {
    return n_;
  }

  std::tuple<std::tuple<std::string, int64_t>> __obj_flatten__() {
    n_ += 1;
    return std::make_tuple(std::make_tuple(std::string("n"), n_));
  }

  int64_t n_;
};

// tracing_mode() must return "real" or "fake"; this one says "sometimes".
struct BadTracingMode : torch::CustomClassHolder {
  explicit BadTracingMode(int64_t v) : v_(v) {}

  int64_t get() {
    return v_;
  }

  std::string tracing_mode() {
    return "sometimes";
  }

  std::tuple<std::tuple<std::string, int64_t>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("v"), v_));
  }

  int64_t v_;
};

// __setstate__ drops the last element, so copy.deepcopy (and pickling) loses
// state.  Everything else is fine.
struct LossyPickle : torch::CustomClassHolder {
  LossyPickle() = default;
  explicit LossyPickle(std::vector<int64_t> items) : items_(std::move(items)) {}

  void push(int64_t x) {
    items_.push_back(x);
  }

  int64_t size() {
    return static_cast<int64_t>(items_.size());
  }

  std::tuple<std::tuple<std::string, std::vector<int64_t>>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("items"), items_));
  }

  std::vector<int64_t> items_;
};

// No __obj_flatten__ at all (and no fake class is registered for it).
struct NoFlatten : torch::CustomClassHolder {
  explicit NoFlatten(int64_t v) : v_(v) {}

  int64_t get() {
    return v_;
  }

  int64_t v_;
};

// __obj_flatten__ returns bare values, not (name, value) pairs, so torch
// cannot fakify the object.
struct FlattenWrongStructure : torch::CustomClassHolder {
  explicit FlattenWrongStructure(at::Tensor t) : t_(std::move(t)) {}

  at::Tensor get() {
    return t_;
  }

  std::tuple<at::Tensor, int64_t> __obj_flatten__() {
    return std::make_tuple(t_, t_.dim());
  }

  at::Tensor t_;
};

// The constructor accepts one magic value only, so no generated argument
// builds an object; users supply example objects with @conformance.examples.
struct PickyInit : torch::CustomClassHolder {
  explicit PickyInit(int64_t n) : n_(n) {
    TORCH_CHECK(n == 4242, "PickyInit needs n == 4242, got ", n);
  }

  int64_t get() {
    return n_;
  }

  std::tuple<std::tuple<std::string, int64_t>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("n"), n_));
  }

  int64_t n_;
};

} // namespace torchbind_samples_broken

using namespace torchbind_samples_broken;

TORCH_LIBRARY(samples_broken, m) {
  m.class_<FlattenDup>("FlattenDup")
      .def(torch::init<at::Tensor>())
      .def("get", &FlattenDup::get)
      .def("__obj_flatten__", &FlattenDup::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<FlattenDup>& self) -> at::Tensor {
            return self->t_;
          },
          [](at::Tensor state) -> c10::intrusive_ptr<FlattenDup> {
            return c10::make_intrusive<FlattenDup>(std::move(state));
          });

  m.class_<FlattenMutates>("FlattenMutates")
      .def(torch::init<int64_t>())
      .def("get", &FlattenMutates::get)
      .def("__obj_flatten__", &FlattenMutates::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<FlattenMutates>& self) -> int64_t {
            return self->n_;
          },
          [](int64_t state) -> c10::intrusive_ptr<FlattenMutates> {
            return c10::make_intrusive<FlattenMutates>(state);
          });

  m.class_<BadTracingMode>("BadTracingMode")
      .def(torch::init<int64_t>())
      .def("get", &BadTracingMode::get)
      .def("tracing_mode", &BadTracingMode::tracing_mode)
      .def("__obj_flatten__", &BadTracingMode::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<BadTracingMode>& self) -> int64_t {
            return self->v_;
          },
          [](int64_t state) -> c10::intrusive_ptr<BadTracingMode> {
            return c10::make_intrusive<BadTracingMode>(state);
          });

  m.class_<LossyPickle>("LossyPickle")
      .def(torch::init<>())
      .def("push", &LossyPickle::push)
      .def("size", &LossyPickle::size)
      .def("__obj_flatten__", &LossyPickle::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<LossyPickle>& self)
              -> std::vector<int64_t> { return self->items_; },
          // BROKEN ON PURPOSE: drops the last element.
          [](std::vector<int64_t> state) -> c10::intrusive_ptr<LossyPickle> {
            if (!state.empty()) {
              state.pop_back();
            }
            return c10::make_intrusive<LossyPickle>(std::move(state));
          });

  m.class_<NoFlatten>("NoFlatten")
      .def(torch::init<int64_t>())
      .def("get", &NoFlatten::get)
      .def_pickle(
          [](const c10::intrusive_ptr<NoFlatten>& self) -> int64_t {
            return self->v_;
          },
          [](int64_t state) -> c10::intrusive_ptr<NoFlatten> {
            return c10::make_intrusive<NoFlatten>(state);
          });

  m.class_<FlattenWrongStructure>("FlattenWrongStructure")
      .def(torch::init<at::Tensor>())
      .def("get", &FlattenWrongStructure::get)
      .def("__obj_flatten__", &FlattenWrongStructure::__obj_flatten__);

  m.class_<PickyInit>("PickyInit")
      .def(torch::init<int64_t>())
      .def("get", &PickyInit::get)
      .def("__obj_flatten__", &PickyInit::__obj_flatten__);
}
