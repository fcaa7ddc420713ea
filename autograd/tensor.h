#pragma once
// Tensor: a handle (shared, like torch.Tensor) to row-major contiguous data of a run-time dtype,
// plus the autograd state that links it to the tape. Copying a Tensor copies the handle.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/shape.h"

namespace tg {

class CompactGrad;
class Generator;
class Tensor;
struct Storage;  // owns the buffer (64-byte aligned, from the caching allocator); defined in tensor.cpp

/// Autograd state of one tensor. Leaves (user-created tensors, parameters) keep their
/// accumulated gradient here; an op's output also records which tape node produced it.
struct AutogradMeta;

[[noreturn]] void throw_dtype_mismatch(DType have, DType want);

/// A gradient hook (Tensor::register_hook): called with a gradient during backward; a defined
/// return value replaces it, an undefined one keeps it.
using GradHook = std::function<Tensor(const Tensor& grad)>;
/// A hook on a leaf's gradient accumulation (Tensor::register_post_accumulate_grad_hook): called
/// with the leaf itself once its grad() is final for the current backward.
using PostAccumulateGradHook = std::function<void(Tensor& tensor)>;

/// Removes the hook it was returned for (torch.utils.hooks.RemovableHandle). Removing twice, or
/// after the tensor is gone, does nothing.
class HookHandle {
 public:
  HookHandle() = default;
  void remove();

 private:
  friend class Tensor;
  HookHandle(std::weak_ptr<AutogradMeta> meta, std::uint64_t id) : meta_(std::move(meta)), id_(id) {}
  std::weak_ptr<AutogradMeta> meta_;
  std::uint64_t id_ = 0;
};

/// Elements whose writing is deferred to their first read (autograd/pending.h).
struct PendingFill;
struct TensorImpl;
/// Writes a tensor's deferred elements (impl.pending) if that has not happened yet.
void write_pending(const TensorImpl& impl);

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  void* data = nullptr;  // start of this tensor's elements inside storage; read through Tensor::data<T>(), which writes `pending` first
  Shape shape;
  DType dtype = DType::f32;
  std::shared_ptr<AutogradMeta> meta;  // null until the tensor takes part in autograd
  /// Set when the elements are written on first read (a deferred transpose, which a matmul can
  /// take as a GEMM transpose flag instead); shared by views of the same buffer.
  std::shared_ptr<PendingFill> pending;

  /// A new impl, empty or a copy of `other` (views, detach). Allocated from the caching allocator:
  /// use these rather than std::make_shared.
  static std::shared_ptr<TensorImpl> make();
  static std::shared_ptr<TensorImpl> make(const TensorImpl& other);
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories -------------------------------------------------------------------------
  /// Uninitialised elements: for kernels that overwrite every element. Every tensor's buffer is
  /// made here: when it cannot be allocated, throws tg::OutOfMemoryError (autograd/memory.h, a
  /// std::bad_alloc) naming the bytes, the dtype and the shape.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  /// A 0-dimensional tensor holding `value`.
  static Tensor scalar(double value, DType dtype = DType::f32);
  /// [start, start + step, ...) up to but excluding `end`, as torch.arange.
  static Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32);
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape);
  static Tensor from_vector(const std::vector<std::int64_t>& values, const Shape& shape);
  /// Values converted to `dtype` (handy in tests: the same literals in f32 and f64).
  static Tensor from_values(const std::vector<double>& values, const Shape& shape, DType dtype);
  static Tensor uniform(const Shape& shape, double low, double high, Generator& gen,
                        DType dtype = DType::f32);
  static Tensor normal(const Shape& shape, double mean, double stddev, Generator& gen,
                       DType dtype = DType::f32);

  // ---- metadata and elements -------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const {
    check_defined("shape");
    return impl_->shape;
  }
  int dim() const { return shape().size(); }
  /// Size of one axis; negative axes count from the end.
  std::int64_t size(std::int64_t axis) const { return shape()[normalize_axis("size", axis, dim())]; }
  std::int64_t numel() const { return shape().numel(); }
  DType dtype() const {
    check_defined("dtype");
    return impl_->dtype;
  }

  /// The only element of a one-element tensor, as double.
  double item() const;
  /// One element, as double, by full index (for tests and debugging, not for hot loops).
  double at(std::initializer_list<std::int64_t> index) const;
  /// Typed pointer to the elements; throws if T does not match dtype().
  template <class T> T* data();
  template <class T> const T* data() const;
  /// Untyped pointer to the numel() * dtype_size(dtype()) bytes of the elements (torch's
  /// data_ptr()), for byte-level transfers and comparisons; like data<T>(), writes deferred
  /// elements first.
  void* data_ptr();
  const void* data_ptr() const { return const_cast<Tensor*>(this)->data_ptr(); }
  /// Copy of the elements converted to T (float, double, std::int64_t or bool).
  template <class T> std::vector<T> to_vector() const;

  /// Converted copy (differentiable to a floating dtype; an int64 or bool result does not require
  /// grad); returns *this when the dtype already matches. To bool: nonzero (and NaN) is true.
  Tensor to(DType dtype) const;
  /// Deep copy (differentiable).
  Tensor clone() const;
  /// Same data, cut from the graph: no grad, never recorded.
  Tensor detach() const;
  /// Copies `src` (same shape and dtype) into this tensor's buffer, outside autograd. For
  /// optimizers, initialisers and checkpoint loading.
  void copy_(const Tensor& src);
  /// Sets every element to `value`, outside autograd.
  void fill_(double value);
  /// Makes this tensor use `src`'s data (shared, not copied), shape and dtype, keeping its own
  /// autograd identity (requires_grad, hooks on this handle): every handle to this tensor sees the
  /// new data. PyTorch's `x.data = src` / Tensor::set_data, for converting parameters in place
  /// (Module::to). Drops any accumulated gradient, which would no longer match. Outside autograd;
  /// only for leaves (throws std::invalid_argument for an op's output).
  void set_data(const Tensor& src);

  // ---- autograd --------------------------------------------------------------------------
  bool requires_grad() const;
  /// Marks a leaf as a variable whose gradient backward() accumulates (like requires_grad_).
  Tensor& requires_grad_(bool on = true);
  /// True for tensors not produced by a recorded op.
  bool is_leaf() const;
  /// Accumulated gradient of a leaf; undefined (defined() == false) until a backward reaches it.
  /// A compact gradient (below) is converted to a dense one here, once. An op's output has one
  /// only after retain_grad().
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  /// Drops the accumulated gradient (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();
  /// Lets backward keep this leaf's gradient in a compact form (autograd/compact_grad.h: a linear
  /// weight's as a low-rank product, an embedding table's as the rows used) when that is smaller.
  /// For memory: clip_grad_norm and the optimizers consume it without building the dense tensor.
  Tensor& allow_compact_grad(bool on = true);
  bool allows_compact_grad() const;
  /// The gradient in compact form, or null (no gradient, or a dense one). Does not convert.
  std::shared_ptr<CompactGrad> compact_grad() const;
  /// Reverse-mode pass seeded with d(objective)/d(this) = `gradient` (same shape; may be omitted
  /// for a one-element tensor: ones). Gradients accumulate into leaves' grad(). The graph is freed
  /// as it is walked unless `retain_graph`, which lets another backward (or tg::grad) run through
  /// it again (torch.Tensor.backward). With `create_graph` the backward is recorded too: the
  /// gradients accumulated into leaves are graph tensors, so a second backward through them gives
  /// second derivatives. `retain_graph` unset means the value of create_graph, as in PyTorch.
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  /// Registers `hook`, called with this tensor's gradient in every backward that reaches it: for a
  /// leaf, with each gradient before it is added to grad(); for an op's output, once with its whole
  /// gradient before it flows on to the op's inputs. Hooks run in registration order, each seeing
  /// the previous one's result (torch.Tensor.register_hook). Needs requires_grad.
  HookHandle register_hook(GradHook hook);
  /// Registers `hook`, called with this leaf once per backward that adds to its gradient, after
  /// the last addition of that backward: grad() is then final for the pass and may be read,
  /// scaled in place or handed to communication (gradient bucketing in data-parallel training;
  /// torch.Tensor.register_post_accumulate_grad_hook). It runs during backward, as soon as no
  /// remaining node can reach the leaf, so hooks of different leaves fire in the reverse order of
  /// their first use in the forward (the earliest op that reads them). Not run by tg::grad(),
  /// which does not touch grad(). Hooks run in registration order. Only for leaves that require
  /// grad (std::invalid_argument otherwise).
  HookHandle register_post_accumulate_grad_hook(PostAccumulateGradHook hook);
  /// Makes an op's output keep its gradient, readable with grad() after backward
  /// (torch.Tensor.retain_grad). A leaf keeps its gradient anyway.
  void retain_grad();
  bool retains_grad() const;

  /// "tensor([[   1.0000,    2.0000]], dtype=float32, requires_grad=true)".
  std::string str() const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// True if both handles share one buffer.
  bool shares_storage(const Tensor& other) const;

 private:
  void check_defined(const char* what) const {
    if (!impl_) throw_undefined(what);
  }
  [[noreturn]] static void throw_undefined(const char* what);
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

template <class T> T* Tensor::data() {
  check_defined("data");
  if (impl_->dtype != dtype_of_v<T>) throw_dtype_mismatch(impl_->dtype, dtype_of_v<T>);
  if (impl_->pending) [[unlikely]] write_pending(*impl_);
  return static_cast<T*>(impl_->data);
}
template <class T> const T* Tensor::data() const {
  return const_cast<Tensor*>(this)->data<T>();
}
inline void* Tensor::data_ptr() {
  check_defined("data_ptr");
  if (impl_->pending) [[unlikely]] write_pending(*impl_);
  return impl_->data;
}

}  // namespace tg
