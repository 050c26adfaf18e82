// TorchBind classes whose methods and ops have preconditions, as real libraries
// write them (namespace `samples_inputs`): the plugin must compare only the
// calls C++ accepts, take the adopter's arguments everywhere, and never call
// what the adopter excluded.
//
// * PagedCache: a paged KV-cache-like store of fixed-size blocks.
//   - append(Tensor block) accepts only a 1-d float32 block of block_size
//     elements (shape precondition); the oldest block is evicted past capacity;
//   - get(int i) accepts only 0 <= i < size() (index precondition);
//   - evict_oldest() raises on an empty cache; block_numel() is the block size
//     (op fakes read it through this method: a fake op receives a
//     FakeScriptObject while tracing and, under strict export, the real object);
//   - scratch(int n) returns torch::empty(...): uninitialised values;
//   - exec_rawptr(int ptr, int n) dereferences its int as a pointer (a raw-
//     pointer API): any made-up int crashes the process;
//   - __eq__ is bound with an untyped self (schema `__eq__(Any _0, Any _1)`);
//   - op gather(Tensor idx, PagedCache c) accepts only a 1-d int64 idx of
//     valid block indices and returns the blocks, contiguous; its backward op
//     gather_backward(Tensor grad, Tensor idx, PagedCache c) accepts only a
//     grad of shape [len(idx), block_size] (a precondition over two arguments).
// * RealEngine: tracing_mode() returns "real", so torch traces with the real
//   object and never uses a fake.
//
// Correct fakes, broken fakes and an adopter module (examples and strategies
// through the public API) live in sample_classes/fakes_inputs.py and
// sample_classes/adopter_inputs.py.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/types.h>

#include <deque>
#include <string>
#include <tuple>
#include <vector>

namespace torchbind_samples_inputs {

struct PagedCache : torch::CustomClassHolder {
  PagedCache(int64_t block_size, int64_t capacity)
      : block_size_(block_size), capacity_(capacity) {
    TORCH_CHECK(block_size > 0, "PagedCache: block_size must be positive, got ", block_size);
    TORCH_CHECK(capacity > 0, "PagedCache: capacity must be positive, got ", capacity);
  }

  void append(at::Tensor block) {
    TORCH_CHECK(
        block.dim() == 1 && block.size(0) == block_size_ &&
            block.scalar_type() == at::kFloat,
        "PagedCache.append: expected a float32 block of shape [", block_size_,
        "], got ", block.scalar_type(), " of shape ", block.sizes());
    blocks_.push_back(block.clone());
    if (static_cast<int64_t>(blocks_.size()) > capacity_) {
      blocks_.pop_front();  // evict the oldest
    }
  }

  at::Tensor get(int64_t i) {
    TORCH_CHECK(
        i >= 0 && i < static_cast<int64_t>(blocks_.size()),
        "PagedCache.get: index ", i, " out of range for ", blocks_.size(), " blocks");
    return blocks_[i].clone();
  }

  at::Tensor evict_oldest() {
    TORCH_CHECK(!blocks_.empty(), "PagedCache.evict_oldest: the cache is empty");
    at::Tensor front = blocks_.front();
    blocks_.pop_front();
    return front;
  }

  int64_t size() {
    return static_cast<int64_t>(blocks_.size());
  }

  int64_t block_numel() {
    return block_size_;
  }

  at::Tensor scratch(int64_t n) {
    TORCH_CHECK(n >= 0, "PagedCache.scratch: n must be >= 0");
    return torch::empty({n, block_size_});  // uninitialised on purpose
  }

  int64_t exec_rawptr(int64_t ptr, int64_t n) {
    // A raw-pointer API: `ptr` is the address of n int64 values.
    const int64_t* p = reinterpret_cast<const int64_t*>(ptr);
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) {
      total += p[i];
    }
    return total;
  }

  std::tuple<
      std::tuple<std::string, int64_t>,
      std::tuple<std::string, int64_t>,
      std::tuple<std::string, std::vector<at::Tensor>>>
  __obj_flatten__() {
    std::vector<at::Tensor> copies;
    for (const auto& b : blocks_) {
      copies.push_back(b.clone());
    }
    return std::make_tuple(
        std::make_tuple(std::string("block_size"), block_size_),
        std::make_tuple(std::string("capacity"), capacity_),
        std::make_tuple(std::string("blocks"), copies));
  }

  int64_t block_size_;
  int64_t capacity_;
  std::deque<at::Tensor> blocks_;
};

at::Tensor gather_op(at::Tensor idx, c10::intrusive_ptr<PagedCache> cache) {
  TORCH_CHECK(
      idx.dim() == 1 && idx.scalar_type() == at::kLong,
      "gather: expected a 1-d int64 index, got ", idx.scalar_type(), " of shape ", idx.sizes());
  std::vector<at::Tensor> picked;
  auto accessor = idx.accessor<int64_t, 1>();
  for (int64_t k = 0; k < idx.size(0); ++k) {
    picked.push_back(cache->get(accessor[k]));
  }
  if (picked.empty()) {
    return torch::zeros({0, cache->block_size_});
  }
  return torch::stack(picked).contiguous();
}

// gather's backward: the gradient of gather's output, scattered back onto the
// blocks it read (shape [size(), block_size]). Its precondition spans two
// arguments: grad must be [len(idx), block_size] for a valid idx.
at::Tensor gather_backward_op(at::Tensor grad, at::Tensor idx, c10::intrusive_ptr<PagedCache> cache) {
  TORCH_CHECK(
      idx.dim() == 1 && idx.scalar_type() == at::kLong,
      "gather_backward: expected a 1-d int64 index, got ", idx.scalar_type(), " of shape ", idx.sizes());
  TORCH_CHECK(
      grad.dim() == 2 && grad.size(0) == idx.size(0) && grad.size(1) == cache->block_size_ &&
          grad.scalar_type() == at::kFloat,
      "gather_backward: expected a float32 grad of shape [", idx.size(0), ", ", cache->block_size_,
      "], got ", grad.scalar_type(), " of shape ", grad.sizes());
  auto out = torch::zeros({cache->size(), cache->block_size_});
  auto accessor = idx.accessor<int64_t, 1>();
  for (int64_t k = 0; k < idx.size(0); ++k) {
    TORCH_CHECK(accessor[k] >= 0 && accessor[k] < cache->size(), "gather_backward: index out of range");
    out[accessor[k]] += grad[k];
  }
  return out;
}

struct RealEngine : torch::CustomClassHolder {
  explicit RealEngine(int64_t scale) : scale_(scale) {}

  at::Tensor run(at::Tensor x) {
    return x * scale_;
  }

  int64_t scale() {
    return scale_;
  }

  std::string tracing_mode() {
    return "real";
  }

  std::tuple<std::tuple<std::string, int64_t>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("scale"), scale_));
  }

  int64_t scale_;
};

} // namespace torchbind_samples_inputs

using torchbind_samples_inputs::PagedCache;
using torchbind_samples_inputs::RealEngine;

TORCH_LIBRARY(samples_inputs, m) {
  m.class_<PagedCache>("PagedCache")
      .def(torch::init<int64_t, int64_t>(), "", {torch::arg("block_size"), torch::arg("capacity") = 4})
      .def("append", &PagedCache::append)
      .def("get", &PagedCache::get)
      .def("evict_oldest", &PagedCache::evict_oldest)
      .def("size", &PagedCache::size)
      .def("block_numel", &PagedCache::block_numel)
      .def("scratch", &PagedCache::scratch)
      .def("exec_rawptr", &PagedCache::exec_rawptr)
      .def("__eq__",
           [](const c10::IValue& self, const c10::IValue& other) -> bool {
             if (!other.isCustomClass()) {
               return false;
             }
             auto a = self.toCustomClass<PagedCache>();
             auto b = other.toCustomClass<PagedCache>();
             return a->block_size_ == b->block_size_ && a->capacity_ == b->capacity_ &&
                 a->blocks_.size() == b->blocks_.size();
           })
      .def("__obj_flatten__", &PagedCache::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<PagedCache>& self)
              -> std::tuple<int64_t, int64_t, std::vector<at::Tensor>> {
            std::vector<at::Tensor> copies;
            for (const auto& b : self->blocks_) {
              copies.push_back(b.clone());
            }
            return std::make_tuple(self->block_size_, self->capacity_, copies);
          },
          [](std::tuple<int64_t, int64_t, std::vector<at::Tensor>> state)
              -> c10::intrusive_ptr<PagedCache> {
            auto cache = c10::make_intrusive<PagedCache>(std::get<0>(state), std::get<1>(state));
            for (auto& b : std::get<2>(state)) {
              cache->blocks_.push_back(b);
            }
            return cache;
          });

  m.class_<RealEngine>("RealEngine")
      .def(torch::init<int64_t>())
      .def("run", &RealEngine::run)
      .def("scale", &RealEngine::scale)
      .def("tracing_mode", &RealEngine::tracing_mode)
      .def("__obj_flatten__", &RealEngine::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<RealEngine>& self) -> int64_t {
            return self->scale_;
          },
          [](int64_t state) -> c10::intrusive_ptr<RealEngine> {
            return c10::make_intrusive<RealEngine>(state);
          });

  m.def("gather(Tensor idx, __torch__.torch.classes.samples_inputs.PagedCache cache) -> Tensor");
  m.def(
      "gather_backward(Tensor grad, Tensor idx, __torch__.torch.classes.samples_inputs.PagedCache cache) "
      "-> Tensor");
}

TORCH_LIBRARY_IMPL(samples_inputs, CPU, m) {
  m.impl("gather", torchbind_samples_inputs::gather_op);
  m.impl("gather_backward", torchbind_samples_inputs::gather_backward_op);
}
