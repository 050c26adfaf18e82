// A TorchBind class whose methods take tensors only as a list (namespace
// `samples_lists`), after the batched-input holders of serving runtimes:
// `store(xs)` keeps each tensor of the list as it is given (not a copy),
// `total()` sums what it holds, read when it is called, and `count()` says how
// many it holds.
//
// Kept without a copy, a tensor the program computed and handed over is read
// again by `total()`: a compiler that reuses that tensor's buffer for later
// computation of the same size makes `total()` read other numbers. The
// `computed` row of the matrix computes each element of the list in the
// program for this (the class has no method taking a single tensor).
//
// The correct fake is in sample_classes/fakes_lists.py.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/types.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace samples_lists {

struct Batch : torch::CustomClassHolder {
  explicit Batch(std::vector<at::Tensor> items) : items_(std::move(items)) {}

  void store(std::vector<at::Tensor> xs) {
    for (const auto& x : xs) {
      items_.push_back(x);
    }
  }

  at::Tensor total() {
    at::Tensor sum = at::zeros({});
    for (const auto& x : items_) {
      sum = sum + x.sum();
    }
    return sum;
  }

  int64_t count() {
    return static_cast<int64_t>(items_.size());
  }

  std::tuple<std::tuple<std::string, std::vector<at::Tensor>>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("items"), items_));
  }

  std::vector<at::Tensor> items_;
};

} // namespace samples_lists

TORCH_LIBRARY(samples_lists, m) {
  m.class_<samples_lists::Batch>("Batch")
      .def(torch::init<std::vector<at::Tensor>>())
      .def("store", &samples_lists::Batch::store)
      .def("total", &samples_lists::Batch::total)
      .def("count", &samples_lists::Batch::count)
      .def("__obj_flatten__", &samples_lists::Batch::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<samples_lists::Batch>& self) -> std::vector<at::Tensor> {
            return self->items_;
          },
          [](std::vector<at::Tensor> items) -> c10::intrusive_ptr<samples_lists::Batch> {
            return c10::make_intrusive<samples_lists::Batch>(std::move(items));
          });
}
