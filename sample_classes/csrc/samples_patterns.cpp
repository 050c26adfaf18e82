// TorchBind classes that use binding patterns a gate must judge right
// (namespace `samples_patterns`): a static method, an IValue result, Python
// dunder methods and a method taking another object of the class, and an
// __obj_flatten__ that hands out a tensor the caller passed in.
//
// Their correct fakes live in sample_classes/fakes_patterns.py; broken fakes
// for each pattern in sample_classes/broken.py.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/types.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace torchbind_samples_patterns {

// A counter with static helpers bound with def_static: part of the class, but
// called on the class, never on an object.
struct Versioned : torch::CustomClassHolder {
  explicit Versioned(int64_t start) : n_(start) {}

  int64_t bump(int64_t by) {
    n_ += by;
    return n_;
  }

  int64_t value() {
    return n_;
  }

  static int64_t version() {
    return 3;
  }

  static int64_t clamp(int64_t x, int64_t hi) {
    return x < hi ? x : hi;
  }

  std::tuple<std::tuple<std::string, int64_t>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("n"), n_));
  }

  int64_t n_;
};

// get() returns c10::IValue: an int while the box is empty, the held tensor
// afterwards. The schema's return type is Any.
struct AnyBox : torch::CustomClassHolder {
  explicit AnyBox(int64_t tag) : tag_(tag) {}

  void put(at::Tensor t) {
    items_.push_back(t.clone());
  }

  c10::IValue get() {
    if (items_.empty()) {
      return c10::IValue(tag_);
    }
    return c10::IValue(items_.back());
  }

  std::tuple<
      std::tuple<std::string, int64_t>,
      std::tuple<std::string, std::vector<at::Tensor>>>
  __obj_flatten__() {
    std::vector<at::Tensor> copies;
    for (const auto& t : items_) {
      copies.push_back(t.clone());
    }
    return std::make_tuple(
        std::make_tuple(std::string("tag"), tag_),
        std::make_tuple(std::string("items"), copies));
  }

  int64_t tag_;
  std::vector<at::Tensor> items_;
};

// A set of small integers with Python's container protocol bound as dunder
// methods, and a method that takes another Bag.
struct Bag : torch::CustomClassHolder {
  explicit Bag(std::vector<int64_t> xs) : xs_(std::move(xs)) {}

  void add(int64_t x) {
    xs_.push_back(x);
  }

  int64_t __len__() {
    return static_cast<int64_t>(xs_.size());
  }

  bool __contains__(int64_t x) {
    for (auto v : xs_) {
      if (v == x) {
        return true;
      }
    }
    return false;
  }

  int64_t __getitem__(int64_t i) {
    auto n = static_cast<int64_t>(xs_.size());
    TORCH_CHECK(i >= -n && i < n, "Bag index out of range");
    return xs_[i < 0 ? i + n : i];
  }

  bool __eq__(c10::intrusive_ptr<Bag> other) {
    return xs_ == other->xs_;
  }

  std::string __str__() {
    return "Bag(" + std::to_string(xs_.size()) + ")";
  }

  void merge(c10::intrusive_ptr<Bag> other) {
    for (auto v : other->xs_) {
      xs_.push_back(v);
    }
  }

  std::tuple<std::tuple<std::string, std::vector<int64_t>>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("xs"), xs_));
  }

  std::vector<int64_t> xs_;
};

// __obj_flatten__ returns the very tensor the constructor was given (no
// clone), and get() returns it too: dynamo refuses such an object
// (UnsafeScriptObjectError: "... is aliasing ... Please do a clone").
struct Holder : torch::CustomClassHolder {
  explicit Holder(at::Tensor t) : t_(std::move(t)) {}

  at::Tensor get() {
    return t_;
  }

  std::tuple<std::tuple<std::string, at::Tensor>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("t"), t_));
  }

  at::Tensor t_;
};

// The same class done right: __obj_flatten__ and get() hand out copies.
struct CopyingHolder : torch::CustomClassHolder {
  explicit CopyingHolder(at::Tensor t) : t_(t.clone()) {}

  at::Tensor get() {
    return t_.clone();
  }

  std::tuple<std::tuple<std::string, at::Tensor>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("t"), t_.clone()));
  }

  at::Tensor t_;
};

} // namespace torchbind_samples_patterns

using torchbind_samples_patterns::AnyBox;
using torchbind_samples_patterns::Bag;
using torchbind_samples_patterns::CopyingHolder;
using torchbind_samples_patterns::Holder;
using torchbind_samples_patterns::Versioned;

TORCH_LIBRARY(samples_patterns, m) {
  m.class_<Versioned>("Versioned")
      .def(torch::init<int64_t>())
      .def("bump", &Versioned::bump)
      .def("value", &Versioned::value)
      .def_static("version", &Versioned::version)
      .def_static("clamp", &Versioned::clamp)
      .def("__obj_flatten__", &Versioned::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Versioned>& self) -> int64_t {
            return self->n_;
          },
          [](int64_t state) -> c10::intrusive_ptr<Versioned> {
            return c10::make_intrusive<Versioned>(state);
          });

  m.class_<AnyBox>("AnyBox")
      .def(torch::init<int64_t>())
      .def("put", &AnyBox::put)
      .def("get", &AnyBox::get)
      .def("__obj_flatten__", &AnyBox::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<AnyBox>& self)
              -> std::tuple<int64_t, std::vector<at::Tensor>> {
            std::vector<at::Tensor> copies;
            for (const auto& t : self->items_) {
              copies.push_back(t.clone());
            }
            return std::make_tuple(self->tag_, copies);
          },
          [](std::tuple<int64_t, std::vector<at::Tensor>> state)
              -> c10::intrusive_ptr<AnyBox> {
            auto box = c10::make_intrusive<AnyBox>(std::get<0>(state));
            box->items_ = std::move(std::get<1>(state));
            return box;
          });

  m.class_<Bag>("Bag")
      .def(torch::init<std::vector<int64_t>>())
      .def("add", &Bag::add)
      .def("merge", &Bag::merge)
      .def("__len__", &Bag::__len__)
      .def("__contains__", &Bag::__contains__)
      .def("__getitem__", &Bag::__getitem__)
      .def("__eq__", &Bag::__eq__)
      .def("__str__", &Bag::__str__)
      .def("__obj_flatten__", &Bag::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Bag>& self) -> std::vector<int64_t> {
            return self->xs_;
          },
          [](std::vector<int64_t> state) -> c10::intrusive_ptr<Bag> {
            return c10::make_intrusive<Bag>(std::move(state));
          });

  m.class_<Holder>("Holder")
      .def(torch::init<at::Tensor>())
      .def("get", &Holder::get)
      .def("__obj_flatten__", &Holder::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Holder>& self) -> at::Tensor {
            return self->t_;
          },
          [](at::Tensor state) -> c10::intrusive_ptr<Holder> {
            return c10::make_intrusive<Holder>(std::move(state));
          });

  m.class_<CopyingHolder>("CopyingHolder")
      .def(torch::init<at::Tensor>())
      .def("get", &CopyingHolder::get)
      .def("__obj_flatten__", &CopyingHolder::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<CopyingHolder>& self) -> at::Tensor {
            return self->t_.clone();
          },
          [](at::Tensor state) -> c10::intrusive_ptr<CopyingHolder> {
            return c10::make_intrusive<CopyingHolder>(std::move(state));
          });
}
