// Classes that meet torch's limits in the coverage matrix, for pinning what each cell reports against what plain
// torch does (tests/unit/matrix/test_matrix_evidence.py; correct fakes in sample_classes/fakes_limits.py):
//
// * Vocab: a vocabulary after a text library's (tokens by index; Python's `in`, `[]` and `len` bound as dunder
//   methods taking a str token). Dynamo cannot trace `token in vocab`, `vocab[token]` or `len(vocab)`, each in
//   its own way, none of them the explicit-dunder-call limitation's.
// * Stash: store(t) keeps the tensor it is given (no copy). Strict export traces the real object, so the real
//   object is left holding the FakeTensor it was handed while tracing.
// * stash_scale(Stash, Tensor): an op with a CUDA kernel only, as a library built for GPUs ships it: on a CPU
//   machine plain eager raises on every call, so its matrix row has no eager reference (n/a).
#include <torch/custom_class.h>
#include <torch/types.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace torchbind_samples_limits {

struct Vocab : torch::CustomClassHolder {
  explicit Vocab(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}

  bool __contains__(const std::string& token) {
    return std::find(tokens_.begin(), tokens_.end(), token) != tokens_.end();
  }

  int64_t __getitem__(const std::string& token) {
    auto it = std::find(tokens_.begin(), tokens_.end(), token);
    return it == tokens_.end() ? -1 : static_cast<int64_t>(it - tokens_.begin());
  }

  int64_t __len__() {
    return static_cast<int64_t>(tokens_.size());
  }

  void append_token(std::string token) {
    tokens_.push_back(std::move(token));
  }

  std::tuple<std::tuple<std::string, std::vector<std::string>>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("tokens"), tokens_));
  }

  std::vector<std::string> tokens_;
};

struct Stash : torch::CustomClassHolder {
  explicit Stash(at::Tensor t) : t_(t.clone()) {}

  void store(at::Tensor t) {
    t_ = t;  // kept as given: strict export hands it a FakeTensor while tracing the real object
  }

  at::Tensor get() {
    return t_.clone();
  }

  std::tuple<std::tuple<std::string, at::Tensor>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("t"), t_.clone()));
  }

  at::Tensor t_;
};

at::Tensor stash_scale(const c10::intrusive_ptr<Stash>& stash, at::Tensor x) {
  return x * stash->t_.sum();
}

} // namespace torchbind_samples_limits

using torchbind_samples_limits::Stash;
using torchbind_samples_limits::Vocab;

TORCH_LIBRARY(samples_limits, m) {
  m.class_<Vocab>("Vocab")
      .def(torch::init<std::vector<std::string>>())
      .def("__contains__", &Vocab::__contains__)
      .def("__getitem__", &Vocab::__getitem__)
      .def("__len__", &Vocab::__len__)
      .def("append_token", &Vocab::append_token)
      .def("__obj_flatten__", &Vocab::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Vocab>& self) -> std::vector<std::string> {
            return self->tokens_;
          },
          [](std::vector<std::string> state) -> c10::intrusive_ptr<Vocab> {
            return c10::make_intrusive<Vocab>(std::move(state));
          });

  m.class_<Stash>("Stash")
      .def(torch::init<at::Tensor>())
      .def("store", &Stash::store)
      .def("get", &Stash::get)
      .def("__obj_flatten__", &Stash::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Stash>& self) -> at::Tensor {
            return self->t_.clone();
          },
          [](at::Tensor state) -> c10::intrusive_ptr<Stash> {
            return c10::make_intrusive<Stash>(std::move(state));
          });

  m.def("stash_scale(__torch__.torch.classes.samples_limits.Stash stash, Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(samples_limits, CUDA, m) {
  m.impl("stash_scale", &torchbind_samples_limits::stash_scale);
}
