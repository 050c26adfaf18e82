// TorchBind classes whose C++ code crashes or hangs (namespace `samples_unsafe`).
//
// They exist to prove that a conformance run survives user C++ code that takes
// the process down: each bug below is a classic one, made deterministic so the
// tests can rely on it.  Never select `samples_unsafe::*` without the plugin's
// process isolation (the default on Linux).  The fakes in
// sample_classes/fakes_unsafe.py are correct; only the C++ side is broken.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/script.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace torchbind_samples_unsafe {

// A stack of tensors kept as a singly linked list.
//  * pop() forgets the empty check and dereferences the null head: SIGSEGV on
//    an empty stack (as torch's own _TorchScriptTesting::_StackString does).
//  * wait_for(n) busy-waits until the stack holds n tensors, for a producer
//    that never comes: it hangs whenever n > size().
struct CrashyStack : torch::CustomClassHolder {
  struct Node {
    at::Tensor value;
    std::unique_ptr<Node> next;
  };

  CrashyStack() = default;
  explicit CrashyStack(std::vector<at::Tensor> items) {
    for (auto& t : items) {
      push(t);
    }
  }

  void push(at::Tensor t) {
    head_ = std::unique_ptr<Node>(new Node{std::move(t), std::move(head_)});
    size_ += 1;
  }

  at::Tensor pop() {
    // BROKEN ON PURPOSE: no `if (!head_)` check.
    Node* volatile head = head_.get();
    at::Tensor top = head->value;
    head_ = std::move(head_->next);
    size_ -= 1;
    return top;
  }

  int64_t size() {
    return size_;
  }

  int64_t wait_for(int64_t n) {
    // BROKEN ON PURPOSE: nothing else can push while we spin.
    while (size_ < n) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return size_;
  }

  std::vector<at::Tensor> items() const {
    std::vector<at::Tensor> out;
    for (Node* n = head_.get(); n != nullptr; n = n->next.get()) {
      out.insert(out.begin(), n->value); // bottom first
    }
    return out;
  }

  std::tuple<std::tuple<std::string, std::vector<at::Tensor>>>
  __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("items"), items()));
  }

  std::unique_ptr<Node> head_;
  int64_t size_ = 0;
};

// A queue of tensors whose __setstate__ forgets to size its vector before
// writing into it: writing element i of an empty std::vector writes through
// its null data pointer, so the process dies (SIGSEGV) as soon as torch
// deep-copies a non-empty object -- which it does whenever it fakifies one.
struct OverflowPickle : torch::CustomClassHolder {
  OverflowPickle() = default;
  explicit OverflowPickle(std::vector<at::Tensor> items)
      : items_(std::move(items)) {}

  void push(at::Tensor t) {
    items_.push_back(std::move(t));
  }

  int64_t size() {
    return static_cast<int64_t>(items_.size());
  }

  std::tuple<std::tuple<std::string, std::vector<at::Tensor>>>
  __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("items"), items_));
  }

  std::vector<at::Tensor> items_;
};

} // namespace torchbind_samples_unsafe

using namespace torchbind_samples_unsafe;

TORCH_LIBRARY(samples_unsafe, m) {
  m.class_<CrashyStack>("CrashyStack")
      .def(torch::init<>())
      .def("push", &CrashyStack::push)
      .def("pop", &CrashyStack::pop)
      .def("size", &CrashyStack::size)
      .def("wait_for", &CrashyStack::wait_for)
      .def("__obj_flatten__", &CrashyStack::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<CrashyStack>& self)
              -> std::vector<at::Tensor> { return self->items(); },
          [](std::vector<at::Tensor> state) -> c10::intrusive_ptr<CrashyStack> {
            return c10::make_intrusive<CrashyStack>(std::move(state));
          });

  m.class_<OverflowPickle>("OverflowPickle")
      .def(torch::init<>())
      .def("push", &OverflowPickle::push)
      .def("size", &OverflowPickle::size)
      .def("__obj_flatten__", &OverflowPickle::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<OverflowPickle>& self)
              -> std::vector<at::Tensor> { return self->items_; },
          [](std::vector<at::Tensor> state)
              -> c10::intrusive_ptr<OverflowPickle> {
            auto obj = c10::make_intrusive<OverflowPickle>();
            // BROKEN ON PURPOSE: no obj->items_.resize(state.size()).
            at::Tensor* volatile slots = obj->items_.data();
            for (size_t i = 0; i < state.size(); ++i) {
              slots[i] = state[i];
            }
            return obj;
          });
}
