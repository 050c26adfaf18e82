// TorchBind classes whose C++ code crashes, hangs or leaks (namespace `samples_unsafe`).
//
// They exist to prove that a conformance run survives user C++ code that takes
// the process down: each bug below is a classic one, made deterministic so the
// tests can rely on it.  Never select `samples_unsafe::*` without the plugin's
// process isolation (the default on Linux).  The fakes in
// sample_classes/fakes_unsafe.py are correct; only the C++ side is broken.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/types.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
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

// A cache that never frees what it allocates: grow(n) allocates n blocks of
// block_mb MiB, writes every page (so the memory is resident), and keeps them
// forever -- BROKEN ON PURPOSE: the memory is leaked (held by a process-wide
// list, not by the object), so it outlives the object and piles up call after
// call.  It writes one MiB per millisecond, as a leak that builds up over a
// call does, so a supervisor polling the process's memory meets it inside the
// call.  held() is the MiB leaked through this object.
struct Leaky : torch::CustomClassHolder {
  explicit Leaky(int64_t block_mb) : block_mb_(block_mb < 0 ? 0 : block_mb) {}
  Leaky(int64_t block_mb, int64_t held_mb)
      : block_mb_(block_mb), held_mb_(held_mb) {}

  int64_t grow(int64_t n) {
    constexpr size_t kMiB = size_t(1) << 20;
    static std::vector<void*> leaked; // BROKEN ON PURPOSE: never freed
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t mb = 0; mb < block_mb_; ++mb) {
        void* chunk = std::malloc(kMiB);
        TORCH_CHECK(chunk != nullptr, "Leaky.grow: out of memory");
        std::memset(chunk, 1, kMiB);
        leaked.push_back(chunk);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      held_mb_ += block_mb_;
    }
    return held_mb_;
  }

  int64_t held() {
    return held_mb_;
  }

  std::tuple<
      std::tuple<std::string, int64_t>,
      std::tuple<std::string, int64_t>>
  __obj_flatten__() {
    return std::make_tuple(
        std::make_tuple(std::string("block_mb"), block_mb_),
        std::make_tuple(std::string("held_mb"), held_mb_));
  }

  int64_t block_mb_;
  int64_t held_mb_ = 0;
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

  m.class_<Leaky>("Leaky")
      .def(torch::init<int64_t>())
      .def("grow", &Leaky::grow)
      .def("held", &Leaky::held)
      .def("__obj_flatten__", &Leaky::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Leaky>& self) -> std::vector<int64_t> {
            return {self->block_mb_, self->held_mb_};
          },
          [](std::vector<int64_t> state) -> c10::intrusive_ptr<Leaky> {
            TORCH_CHECK(state.size() == 2, "Leaky: bad state");
            return c10::make_intrusive<Leaky>(state[0], state[1]);
          });
}
