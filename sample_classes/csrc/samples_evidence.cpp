// A TorchBind class for the evidence rule's tests (namespace `samples_evidence`).
//
// Span: an integer interval [lo, hi]. Its __obj_flatten__ keys "lo" and "hi" are also the names of its getters
// lo() and hi(), so a fake keeps the values under other names (_lo, _hi) and serves them through those getters:
// only calling the getters shows whether __obj_unflatten__ kept each value under its own key. __len__ raises on
// every object by design (a span has a width, not a length), like a library's "not implemented" dunder.
//
// Its correct fake is sample_classes/fakes_evidence.py; the fake that swaps lo and hi is in the same module.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/types.h>

#include <string>
#include <tuple>

namespace torchbind_samples_evidence {

struct Span : torch::CustomClassHolder {
  Span(int64_t lo, int64_t hi) : lo_(lo), hi_(hi) {}

  int64_t lo() {
    return lo_;
  }

  int64_t hi() {
    return hi_;
  }

  int64_t width() {
    return hi_ - lo_;
  }

  // x clamped to [lo, hi] elementwise: what a traced program computes with the object's state.
  at::Tensor clamp(at::Tensor x) {
    return x.clamp(static_cast<double>(lo_), static_cast<double>(hi_));
  }

  int64_t __len__() {
    TORCH_CHECK(false, "Span has no length; use width()");
    return 0;
  }

  std::tuple<std::tuple<std::string, int64_t>, std::tuple<std::string, int64_t>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("lo"), lo_), std::make_tuple(std::string("hi"), hi_));
  }

  int64_t lo_;
  int64_t hi_;
};

// Ticketer: next() hands out tickets from a counter shared by every object of the process (a static, as a
// library's global handle or registry would be), so what it returns depends on how many calls the process made
// before, not on the object. Its fake returns the first ticket, as a fresh process would: a disagreement the plugin
// sees after earlier calls, which the reproducer does not show in a fresh interpreter.
int64_t g_next_ticket = 0;

struct Ticketer : torch::CustomClassHolder {
  explicit Ticketer(int64_t base) : base_(base) {}

  int64_t next() {
    return base_ + ++g_next_ticket;
  }

  std::tuple<std::tuple<std::string, int64_t>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("base"), base_));
  }

  int64_t base_;
};

// Ledger: spend(x) books one entry, then reads x's first value from its storage. Strict export calls the real
// object's spend with the FakeTensor it traces with: the booking happens on the real object, then reading the
// data fails ("Cannot access data pointer of Tensor that doesn't have storage"): tracing changed the object, and
// that change, not the error text, is what the cell's verdict rests on.
struct Ledger : torch::CustomClassHolder {
  explicit Ledger(int64_t entries) : entries_(entries) {}

  at::Tensor spend(at::Tensor x) {
    entries_ += 1;
    float first = x.contiguous().to(at::kFloat).data_ptr<float>()[0];
    return x + first;
  }

  int64_t entries() {
    return entries_;
  }

  std::tuple<std::tuple<std::string, int64_t>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("entries"), entries_));
  }

  int64_t entries_;
};

} // namespace torchbind_samples_evidence

using namespace torchbind_samples_evidence;

TORCH_LIBRARY(samples_evidence, m) {
  m.class_<Span>("Span")
      .def(torch::init<int64_t, int64_t>())
      .def("lo", &Span::lo)
      .def("hi", &Span::hi)
      .def("width", &Span::width)
      .def("clamp", &Span::clamp)
      .def("__len__", &Span::__len__)
      .def("__obj_flatten__", &Span::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Span>& self) -> std::tuple<int64_t, int64_t> {
            return std::make_tuple(self->lo_, self->hi_);
          },
          [](std::tuple<int64_t, int64_t> state) -> c10::intrusive_ptr<Span> {
            return c10::make_intrusive<Span>(std::get<0>(state), std::get<1>(state));
          });
  m.class_<Ledger>("Ledger")
      .def(torch::init<int64_t>())
      .def("spend", &Ledger::spend)
      .def("entries", &Ledger::entries)
      .def("__obj_flatten__", &Ledger::__obj_flatten__);
  m.class_<Ticketer>("Ticketer")
      .def(torch::init<int64_t>())
      .def("next", &Ticketer::next)
      .def("__obj_flatten__", &Ticketer::__obj_flatten__);
}
