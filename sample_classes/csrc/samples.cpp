// Correct TorchBind sample classes for torchbind-conformance (namespace `samples`).
//
// Every class derives from torch::CustomClassHolder, exposes `__obj_flatten__`
// (a tuple of (name, value) tuples) and a def_pickle pair whose __setstate__
// rebuilds exactly the state that __getstate__ saved.  The Python fakes in
// sample_classes/fakes.py mirror these methods one for one, so keep the two in
// sync when changing anything here.

#include <torch/custom_class.h>
#include <torch/library.h>
#include <torch/types.h>

#include <deque>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace torchbind_samples {

// A copy that shares no memory with `t` and has exactly t's sizes and strides.
// Tensor::clone() (preserve_format) keeps the strides only of dense,
// non-overlapping tensors; a non-dense one (e.g. from expand() or a strided
// slice) comes back contiguous.  That would make the copy's metadata differ
// from the original's: in __obj_flatten__ (the fake would see different
// strides than C++ returns) and in __getstate__ (deepcopy would change
// strides).  So copy the whole storage and re-apply the same geometry.
static at::Tensor clone_preserving_strides(const at::Tensor& t) {
  if (!t.defined() || t.layout() != at::kStrided ||
      t.is_non_overlapping_and_dense()) {
    return t.defined() ? t.clone() : t;
  }
  const int64_t storage_numel =
      static_cast<int64_t>(t.storage().nbytes()) / t.element_size();
  at::Tensor flat = at::empty({0}, t.options())
                        .set_(t.storage(), 0, {storage_numel}, {1})
                        .clone();
  at::Tensor out = flat.as_strided(t.sizes(), t.strides(), t.storage_offset());
  if (t.requires_grad()) {
    out.requires_grad_(true);
  }
  return out;
}

static std::vector<at::Tensor> clone_all(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) {
    out.push_back(clone_preserving_strides(t));
  }
  return out;
}

// ---------------------------------------------------------------------------
// samples::TensorQueue -- the thread-safe tensor queue of the PT2 custom class
// tutorial.  Positional-only arguments (no torch::arg), so the schemas carry the
// auto-generated names _0, _1, ...
// ---------------------------------------------------------------------------
struct TensorQueue : torch::CustomClassHolder {
  explicit TensorQueue(at::Tensor init_tensor)
      : init_tensor_(std::move(init_tensor)) {}

  // Used by __setstate__.  Unlike the tutorial, this appends with push_back
  // instead of writing queue_[i] past the end of an empty deque.
  TensorQueue(std::vector<at::Tensor> queue, at::Tensor init_tensor)
      : queue_(queue.begin(), queue.end()),
        init_tensor_(std::move(init_tensor)) {}

  // Push the element to the rear of the queue.
  void push(at::Tensor x) {
    std::lock_guard<std::mutex> guard(mutex_);
    queue_.push_back(std::move(x));
  }

  // Pop the front element; when empty return init_tensor_.
  at::Tensor pop() {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!queue_.empty()) {
      auto val = queue_.front();
      queue_.pop_front();
      return val;
    }
    return init_tensor_;
  }

  // Front element without removing it; when empty return init_tensor_.
  at::Tensor top() {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!queue_.empty()) {
      return queue_.front();
    }
    return init_tensor_;
  }

  int64_t size() {
    std::lock_guard<std::mutex> guard(mutex_);
    return static_cast<int64_t>(queue_.size());
  }

  std::vector<at::Tensor> clone_queue() {
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<at::Tensor> ret;
    ret.reserve(queue_.size());
    for (const auto& t : queue_) {
      ret.push_back(t.clone());
    }
    return ret;
  }

  std::vector<at::Tensor> get_raw_queue() {
    std::lock_guard<std::mutex> guard(mutex_);
    return std::vector<at::Tensor>(queue_.begin(), queue_.end());
  }

  void for_each_add_(at::Tensor inc) {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto& t : queue_) {
      t.add_(inc);
    }
  }

  std::tuple<
      std::tuple<std::string, std::vector<at::Tensor>>,
      std::tuple<std::string, at::Tensor>>
  __obj_flatten__() {
    // Copies of the queue too, not the seed's get_raw_queue(): a pushed
    // tensor handed out as-is is the very tensor the caller still holds, and
    // dynamo refuses an object whose flattened tensor is also a program input
    // (UnsafeScriptObjectError: "... is aliasing ... Please do a clone").
    std::vector<at::Tensor> queue;
    for (const auto& t : this->get_raw_queue()) {
      queue.push_back(clone_preserving_strides(t));
    }
    return std::make_tuple(
        std::make_tuple(std::string("queue"), queue),
        std::make_tuple(
            std::string("init_tensor_"),
            clone_preserving_strides(init_tensor_)));
  }

  // The pickled state holds COPIES: TorchScript's deepcopy of a ScriptObject
  // with def_pickle just feeds __getstate__'s result to __setstate__ (it does
  // not copy the tensors), so without them copy.deepcopy would share tensors
  // with the original object.
  std::tuple<std::vector<at::Tensor>, at::Tensor> getstate() {
    return std::make_tuple(
        clone_all(this->get_raw_queue()), clone_preserving_strides(init_tensor_));
  }

 private:
  std::deque<at::Tensor> queue_;
  std::mutex mutex_;
  at::Tensor init_tensor_;
};

// ---------------------------------------------------------------------------
// samples::Counter -- an integer counter (positional-only arguments).
// ---------------------------------------------------------------------------
struct Counter : torch::CustomClassHolder {
  explicit Counter(int64_t start) : count_(start) {}

  // Raises on int64 overflow (instead of undefined behaviour) so the fake,
  // which computes with unbounded Python ints, can mirror it exactly.
  int64_t increment(int64_t step) {
    int64_t result = 0;
    TORCH_CHECK(
        !__builtin_add_overflow(count_, step, &result),
        "Counter.increment: int64 overflow");
    count_ = result;
    return count_;
  }

  int64_t value() {
    return count_;
  }

  void reset() {
    count_ = 0;
  }

  // x * value: the same expression as the fake (`x * self.count`), so type
  // promotion (bool -> int64, integer stays integer, float stays float) agrees.
  at::Tensor scale(at::Tensor x) {
    return x * count_;
  }

  std::tuple<std::tuple<std::string, int64_t>> __obj_flatten__() {
    return std::make_tuple(std::make_tuple(std::string("count"), count_));
  }

 private:
  int64_t count_;
};

// ---------------------------------------------------------------------------
// samples::Config -- named / default / Optional / list arguments (torch::arg).
// ---------------------------------------------------------------------------
struct Config : torch::CustomClassHolder {
  Config(int64_t capacity, double scale) : capacity_(capacity), scale_(scale) {
    TORCH_CHECK(capacity >= 0, "Config: capacity must be >= 0, got ", capacity);
  }

  Config(
      std::vector<at::Tensor> items,
      int64_t capacity,
      double scale,
      std::vector<std::string> tags)
      : items_(items.begin(), items.end()),
        capacity_(capacity),
        scale_(scale),
        tags_(std::move(tags)) {}

  // Stores x * (alpha * scale); evicts the oldest items beyond capacity.
  void add(at::Tensor x, double alpha) {
    items_.push_back(x * (alpha * scale_));
    while (static_cast<int64_t>(items_.size()) > capacity_) {
      items_.pop_front();
    }
  }

  // 0-dim float32: sum of every element of every held tensor.  When nothing
  // is held, `fallback` if given, otherwise a 0-dim float32 zero.
  at::Tensor total(std::optional<at::Tensor> fallback) {
    if (items_.empty() && fallback.has_value()) {
      return *fallback;
    }
    at::Tensor acc = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
    for (const auto& t : items_) {
      acc = acc + t.to(at::kFloat).sum();
    }
    return acc;
  }

  // add(x, 1.0) for each x; returns the number of items held afterwards.
  int64_t extend(std::vector<at::Tensor> xs) {
    for (auto& x : xs) {
      add(x, 1.0);
    }
    return static_cast<int64_t>(items_.size());
  }

  std::vector<std::string> tags() {
    return tags_;
  }

  std::string tag(std::string name, std::string prefix) {
    std::string full = prefix + ":" + name;
    tags_.push_back(full);
    return full;
  }

  std::tuple<int64_t, double> stats() {
    return std::make_tuple(static_cast<int64_t>(items_.size()), scale_);
  }

  std::vector<at::Tensor> items() const {
    return std::vector<at::Tensor>(items_.begin(), items_.end());
  }

  std::tuple<
      std::tuple<std::string, std::vector<at::Tensor>>,
      std::tuple<std::string, int64_t>,
      std::tuple<std::string, double>,
      std::tuple<std::string, std::vector<std::string>>>
  __obj_flatten__() {
    return std::make_tuple(
        std::make_tuple(std::string("items"), items()),
        std::make_tuple(std::string("capacity"), capacity_),
        std::make_tuple(std::string("scale"), scale_),
        std::make_tuple(std::string("tags"), tags_));
  }

  // Copies for the same reason as TensorQueue::getstate.
  std::tuple<std::vector<at::Tensor>, int64_t, double, std::vector<std::string>>
  getstate() const {
    return std::make_tuple(clone_all(items()), capacity_, scale_, tags_);
  }

 private:
  std::deque<at::Tensor> items_;
  int64_t capacity_;
  double scale_;
  std::vector<std::string> tags_;
};

// Free functions backing the custom ops.
void for_each_add_op(c10::intrusive_ptr<TensorQueue> tq, at::Tensor inc) {
  tq->for_each_add_(std::move(inc));
}

at::Tensor queue_size_like_op(
    c10::intrusive_ptr<TensorQueue> tq,
    at::Tensor x) {
  return x * tq->size();
}

at::Tensor counter_scale_op(c10::intrusive_ptr<Counter> c, at::Tensor x) {
  return c->scale(std::move(x));
}

// The object is the op's third argument, not its first: callers (and the
// plugin) must put it where the schema says.
void push_scaled_op(
    at::Tensor x,
    double alpha,
    c10::intrusive_ptr<TensorQueue> tq) {
  tq->push(x * alpha);
}

} // namespace torchbind_samples

using torchbind_samples::Config;
using torchbind_samples::Counter;
using torchbind_samples::TensorQueue;

TORCH_LIBRARY(samples, m) {
  m.class_<TensorQueue>("TensorQueue")
      .def(torch::init<at::Tensor>())
      .def("push", &TensorQueue::push)
      .def("pop", &TensorQueue::pop)
      .def("top", &TensorQueue::top)
      .def("size", &TensorQueue::size)
      .def("clone_queue", &TensorQueue::clone_queue)
      .def("get_raw_queue", &TensorQueue::get_raw_queue)
      .def("for_each_add_", &TensorQueue::for_each_add_)
      .def("__obj_flatten__", &TensorQueue::__obj_flatten__)
      .def_pickle(
          // __getstate__
          [](const c10::intrusive_ptr<TensorQueue>& self)
              -> std::tuple<std::vector<at::Tensor>, at::Tensor> {
            return self->getstate();
          },
          // __setstate__
          [](std::tuple<std::vector<at::Tensor>, at::Tensor> state)
              -> c10::intrusive_ptr<TensorQueue> {
            return c10::make_intrusive<TensorQueue>(
                std::move(std::get<0>(state)), std::move(std::get<1>(state)));
          });

  m.class_<Counter>("Counter")
      .def(torch::init<int64_t>())
      .def("increment", &Counter::increment)
      .def("value", &Counter::value)
      .def("reset", &Counter::reset)
      .def("scale", &Counter::scale)
      .def("__obj_flatten__", &Counter::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Counter>& self) -> int64_t {
            return self->value();
          },
          [](int64_t state) -> c10::intrusive_ptr<Counter> {
            return c10::make_intrusive<Counter>(state);
          });

  m.class_<Config>("Config")
      .def(
          torch::init<int64_t, double>(),
          "",
          {torch::arg("capacity") = 4, torch::arg("scale") = 1.0})
      .def(
          "add",
          &Config::add,
          "",
          {torch::arg("x"), torch::arg("alpha") = 1.0})
      .def(
          "total",
          &Config::total,
          "",
          {torch::arg("fallback") = torch::arg::none()})
      .def("extend", &Config::extend, "", {torch::arg("xs")})
      .def("tags", &Config::tags)
      .def(
          "tag",
          &Config::tag,
          "",
          {torch::arg("name"), torch::arg("prefix") = std::string("cfg")})
      .def("stats", &Config::stats)
      .def("__obj_flatten__", &Config::__obj_flatten__)
      .def_pickle(
          [](const c10::intrusive_ptr<Config>& self)
              -> std::tuple<
                  std::vector<at::Tensor>,
                  int64_t,
                  double,
                  std::vector<std::string>> { return self->getstate(); },
          [](std::tuple<
              std::vector<at::Tensor>,
              int64_t,
              double,
              std::vector<std::string>> state) -> c10::intrusive_ptr<Config> {
            return c10::make_intrusive<Config>(
                std::move(std::get<0>(state)),
                std::get<1>(state),
                std::get<2>(state),
                std::move(std::get<3>(state)));
          });

  m.def(
      "for_each_add_(__torch__.torch.classes.samples.TensorQueue foo, Tensor inc) -> ()");
  m.def(
      "queue_size_like(__torch__.torch.classes.samples.TensorQueue foo, Tensor x) -> Tensor");
  m.def(
      "counter_scale(__torch__.torch.classes.samples.Counter c, Tensor x) -> Tensor");
  m.def(
      "push_scaled(Tensor x, float alpha, __torch__.torch.classes.samples.TensorQueue foo) -> ()");
}

TORCH_LIBRARY_IMPL(samples, CPU, m) {
  m.impl("for_each_add_", torchbind_samples::for_each_add_op);
  m.impl("queue_size_like", torchbind_samples::queue_size_like_op);
  m.impl("counter_scale", torchbind_samples::counter_scale_op);
  m.impl("push_scaled", torchbind_samples::push_scaled_op);
}
