// A TorchBind class whose lookups read a default that a traced program can
// bake in (namespace `samples_stale`), after the vocabulary classes of text
// libraries: a token list and a default index returned for unknown tokens.
//
// `vocab["unknown"]` and `get_default_index()` return an int that depends on
// the object's state; torch.export burns such results into the program as
// constants, so a program exported with one vocabulary returns that
// vocabulary's default for every other. `lookup(ids)` returns a tensor
// computed in C++ at run time, which no backend bakes in.
//
// `Toggle` counts ticks (flattened) and keeps a switch that __obj_flatten__
// and the pickle OMIT, after the pre-allocated-outputs switch of inference
// runtimes (Torch-TensorRT's Engine): `is_enabled()` reads it, `enable()`
// turns it on. A fake made from a Toggle always starts disabled, so a program
// that reads the switch and then turns it on, compiled again for the same
// object (its flattened count changed), returns the new fake's False where the
// object answers True: the class's flatten is wrong, not the fake, not torch.
//
// The correct fakes and broken ones (returning a constant) are in
// sample_classes/fakes_stale.py.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/types.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace samples_stale {

struct Vocab : torch::CustomClassHolder {
  Vocab(std::vector<std::string> tokens, int64_t default_index)
      : tokens_(std::move(tokens)), default_index_(default_index) {}

  // The token's position, or the default index for a token not in the list.
  int64_t __getitem__(const std::string& token) {
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (tokens_[i] == token) {
        return static_cast<int64_t>(i);
      }
    }
    return default_index_;
  }

  int64_t __len__() {
    return static_cast<int64_t>(tokens_.size());
  }

  int64_t get_default_index() {
    return default_index_;
  }

  void set_default_index(int64_t index) {
    default_index_ = index;
  }

  // Each id below the vocabulary's length as is, every other id replaced by
  // the default index: a tensor result, computed at run time.
  at::Tensor lookup(const at::Tensor& ids) {
    auto n = static_cast<int64_t>(tokens_.size());
    return at::where(ids.lt(n), ids, at::full_like(ids, default_index_));
  }

  std::tuple<
      std::tuple<std::string, std::vector<std::string>>,
      std::tuple<std::string, int64_t>>
  __obj_flatten__() {
    return std::make_tuple(
        std::make_tuple(std::string("tokens"), tokens_),
        std::make_tuple(std::string("default_index"), default_index_));
  }

  std::vector<std::string> tokens_;
  int64_t default_index_;
};

struct Toggle : torch::CustomClassHolder {
  explicit Toggle(int64_t ticks) : ticks_(ticks) {}

  void tick() {
    ticks_ += 1;
  }

  bool is_enabled() {
    return enabled_;
  }

  void enable() {
    enabled_ = true;
  }

  int64_t count() {
    return ticks_;
  }

  // The switch is left out, as a process-local setting would be.
  std::tuple<std::tuple<std::string, int64_t>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("ticks"), ticks_));
  }

  int64_t ticks_;
  bool enabled_ = false;
};

} // namespace samples_stale

TORCH_LIBRARY(samples_stale, m) {
  m.class_<samples_stale::Vocab>("Vocab")
      .def(torch::init<std::vector<std::string>, int64_t>())
      .def("__getitem__", &samples_stale::Vocab::__getitem__)
      .def("__len__", &samples_stale::Vocab::__len__)
      .def("get_default_index", &samples_stale::Vocab::get_default_index)
      .def("set_default_index", &samples_stale::Vocab::set_default_index)
      .def("lookup", &samples_stale::Vocab::lookup)
      .def("__obj_flatten__", &samples_stale::Vocab::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<samples_stale::Vocab>& self)
              -> std::tuple<std::vector<std::string>, int64_t> {
            return std::make_tuple(self->tokens_, self->default_index_);
          },
          [](std::tuple<std::vector<std::string>, int64_t> state)
              -> c10::intrusive_ptr<samples_stale::Vocab> {
            return c10::make_intrusive<samples_stale::Vocab>(
                std::get<0>(state), std::get<1>(state));
          });
  m.class_<samples_stale::Toggle>("Toggle")
      .def(torch::init<int64_t>())
      .def("tick", &samples_stale::Toggle::tick)
      .def("is_enabled", &samples_stale::Toggle::is_enabled)
      .def("enable", &samples_stale::Toggle::enable)
      .def("count", &samples_stale::Toggle::count)
      .def("__obj_flatten__", &samples_stale::Toggle::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<samples_stale::Toggle>& self) -> int64_t { return self->ticks_; },
          [](int64_t ticks) -> c10::intrusive_ptr<samples_stale::Toggle> {
            return c10::make_intrusive<samples_stale::Toggle>(ticks);
          });
}
