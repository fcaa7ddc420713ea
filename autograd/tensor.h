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
#include <tuple>
#include <vector>

#include "autograd/array_ref.h"
#include "autograd/dtype.h"
#include "autograd/memory.h"
#include "autograd/shape.h"

namespace tg {

class CompactGrad;
class Generator;
class Tensor;
/// Owns the buffer (64-byte aligned, from the caching allocator) and its version counter, shared by
/// every tensor that views the buffer; defined in tensor.cpp.
struct Storage;
namespace indexing {
class TensorIndex;  // autograd/ops_indexing.h: what x.index({...}) takes
}  // namespace indexing

/// A variance's divisor is (N - correction), N the number of elements reduced (torch.var's
/// keyword `correction`): 1 is Bessel's unbiased estimate, 0 the population variance.
struct Correction {
  std::int64_t value = 1;
};

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

  // ---- methods (LibTorch's at::Tensor methods) ---------------------------------------------
  // The free functions of autograd/ops_*.h under PyTorch 1.13's method names, argument order and
  // defaults: x.sum(-1) is sum(x, {-1}), x.transpose(1, 2) is transpose(x, 1, 2). Each forwards to
  // its free function (the same values, gradients and errors; docs/ops.md describes them) and is
  // defined in autograd/tensor_methods.cpp. `dim` arguments may be negative. Ops that take a list of
  // dims also take one dim, as torch's IntArrayRef does.

  // Arithmetic. alpha scales `other` (torch's keyword alpha).
  Tensor add(const Tensor& other, double alpha = 1.0) const;
  Tensor add(double other, double alpha = 1.0) const;
  Tensor sub(const Tensor& other, double alpha = 1.0) const;
  Tensor sub(double other, double alpha = 1.0) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(double other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(double other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(double exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor square() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor erf() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor reciprocal() const;
  Tensor clamp(std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt) const;
  Tensor clamp_min(double min) const;
  Tensor clamp_max(double max) const;
  /// condition ? *this : other (torch.Tensor.where: where(condition, self, other)).
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor masked_fill(const Tensor& mask, double value) const;

  // Comparisons, logical ops and tests: bool results, never requiring grad.
  Tensor eq(const Tensor& other) const;
  Tensor eq(double other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(double other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(double other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(double other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(double other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(double other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_xor(const Tensor& other) const;
  Tensor logical_not() const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor any() const;
  Tensor any(std::int64_t dim, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(std::int64_t dim, bool keepdim = false) const;
  /// int64: over every dim when `dim` is empty.
  Tensor count_nonzero(IntList dim = {}) const;
  Tensor count_nonzero(std::int64_t dim) const;
  /// (n, dim()) int64 indices of the nonzero elements.
  Tensor nonzero() const;

  // Reductions. sum() and mean() reduce everything (an empty dim list reduces nothing, as the
  // free functions: docs/ops.md). max(dim) / min(dim) return (values, int64 indices).
  Tensor sum() const;
  Tensor sum(std::int64_t dim, bool keepdim = false) const;
  Tensor sum(IntList dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(std::int64_t dim, bool keepdim = false) const;
  Tensor mean(IntList dim, bool keepdim = false) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(std::int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(std::int64_t dim, bool keepdim = false) const;
  Tensor amax(IntList dim = {}, bool keepdim = false) const;
  Tensor amax(std::int64_t dim, bool keepdim = false) const;
  Tensor amin(IntList dim = {}, bool keepdim = false) const;
  Tensor amin(std::int64_t dim, bool keepdim = false) const;
  /// Index of the first maximum along `dim`; without dim, in the flattened tensor (0-dim result).
  Tensor argmax(std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(IntList dim = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor var(std::int64_t dim, bool unbiased = true, bool keepdim = false) const;
  Tensor var(IntList dim, Correction correction, bool keepdim = false) const;
  Tensor var(std::int64_t dim, Correction correction, bool keepdim = false) const;
  Tensor std(IntList dim = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor std(std::int64_t dim, bool unbiased = true, bool keepdim = false) const;
  Tensor std(IntList dim, Correction correction, bool keepdim = false) const;
  Tensor std(std::int64_t dim, Correction correction, bool keepdim = false) const;
  Tensor logsumexp(IntList dim, bool keepdim = false) const;
  Tensor logsumexp(std::int64_t dim, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(std::int64_t dim, bool keepdim = false) const;
  /// The p-norm over `dim` (every dim when empty); p = kInf (ops_reduce.h) for the max norm.
  Tensor norm(double p = 2.0, IntList dim = {}, bool keepdim = false) const;
  Tensor norm(double p, std::int64_t dim, bool keepdim = false) const;
  Tensor cumsum(std::int64_t dim) const;
  Tensor cumprod(std::int64_t dim) const;
  std::tuple<Tensor, Tensor> topk(std::int64_t k, std::int64_t dim = -1, bool largest = true, bool sorted = true) const;
  std::tuple<Tensor, Tensor> sort(std::int64_t dim = -1, bool descending = false) const;
  Tensor argsort(std::int64_t dim = -1, bool descending = false) const;

  // Shape. view and reshape share the buffer; the others are new contiguous tensors (docs/ops.md).
  Tensor view(const Shape& size) const;
  Tensor reshape(const Shape& shape) const;
  Tensor view_as(const Tensor& other) const;
  Tensor reshape_as(const Tensor& other) const;
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  /// transpose(0, 1) of a 2-D tensor; a 0-D or 1-D tensor itself (torch.Tensor.t).
  Tensor t() const;
  Tensor permute(IntList dims) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(std::int64_t dim) const;
  /// Broadcast to `size` (-1 keeps a dim); a copy (torch: a stride-0 view).
  Tensor expand(const Shape& size) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor broadcast_to(const Shape& size) const;
  Tensor repeat(IntList repeats) const;
  Tensor flip(IntList dims) const;
  Tensor roll(IntList shifts, IntList dims = {}) const;
  Tensor roll(std::int64_t shifts, std::int64_t dims) const;
  Tensor tril(std::int64_t diagonal = 0) const;
  Tensor triu(std::int64_t diagonal = 0) const;
  /// *this: tapegrad's tensors are always contiguous.
  Tensor contiguous() const;
  bool is_contiguous() const { return true; }
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  /// Elements start, start + step, ... below end along `dim`; absent bounds are the ends
  /// (LibTorch's x.slice(dim, start, end, step), Python's x[..., start:end:step]).
  Tensor slice(std::int64_t dim = 0, std::optional<std::int64_t> start = std::nullopt,
               std::optional<std::int64_t> end = std::nullopt, std::int64_t step = 1) const;
  /// The slice `index` along `dim`, without that dim (a copy; torch: a view).
  Tensor select(std::int64_t dim, std::int64_t index) const;
  PooledVector<Tensor> split(std::int64_t split_size, std::int64_t dim = 0) const;
  PooledVector<Tensor> split(IntList split_sizes, std::int64_t dim = 0) const;
  PooledVector<Tensor> split_with_sizes(IntList split_sizes, std::int64_t dim = 0) const;
  PooledVector<Tensor> chunk(std::int64_t chunks, std::int64_t dim = 0) const;
  PooledVector<Tensor> unbind(std::int64_t dim = 0) const;

  // Indexing (torch::indexing: include autograd/ops_indexing.h for Slice, None, Ellipsis).
  /// x[...]: x.index({Slice(), -1}) is Python's x[:, -1]. A new tensor, not a view.
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  /// A copy of *this with `values` written (added, with accumulate) at the indexed positions.
  Tensor index_put(std::initializer_list<indexing::TensorIndex> indices, const Tensor& values,
                   bool accumulate = false) const;
  Tensor index_put(const std::vector<indexing::TensorIndex>& indices, const Tensor& values,
                   bool accumulate = false) const;
  Tensor index_select(std::int64_t dim, const Tensor& index) const;
  Tensor gather(std::int64_t dim, const Tensor& index) const;
  Tensor scatter_add(std::int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor index_add(std::int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0) const;
  Tensor take_along_dim(const Tensor& indices, std::int64_t dim) const;
  Tensor masked_select(const Tensor& mask) const;

  // Products: matmul broadcasts; mm (2-D x 2-D), bmm (3-D x 3-D, equal batches), mv (2-D x 1-D)
  // and dot (1-D x 1-D) check their operands' dims, as torch's.
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& mat2) const;
  Tensor bmm(const Tensor& mat2) const;
  Tensor mv(const Tensor& vec) const;
  Tensor dot(const Tensor& other) const;
  Tensor softmax(std::int64_t dim) const;
  Tensor log_softmax(std::int64_t dim) const;

  // Sampling (autograd/ops_sampling.h); without a generator, from tg::default_generator().
  Tensor multinomial(std::int64_t num_samples, bool replacement, Generator& generator) const;
  Tensor multinomial(std::int64_t num_samples, bool replacement = false) const;
  /// 1 with probability *this (elementwise), else 0.
  Tensor bernoulli(Generator& generator) const;
  Tensor bernoulli() const;
  /// 1 with probability p, else 0, in this tensor's shape and dtype.
  Tensor bernoulli(double p, Generator& generator) const;
  Tensor bernoulli(double p) const;

  // Conversions and creation in this tensor's dtype.
  /// to(other.dtype()) (torch's x.to(other) and x.type_as(other)).
  Tensor to(const Tensor& other) const;
  Tensor type_as(const Tensor& other) const;
  bool is_floating_point() const { return is_floating(dtype()); }
  const Shape& sizes() const { return shape(); }
  Tensor new_zeros(const Shape& size) const;
  Tensor new_ones(const Shape& size) const;
  Tensor new_full(const Shape& size, double value) const;
  Tensor new_empty(const Shape& size) const;

  // ---- in-place ops ------------------------------------------------------------------------
  // Each writes its result into this tensor's buffer (every handle and view of it sees the new
  // values), bumps the buffer's version counter and returns *this. The result must have this
  // tensor's shape (other operands broadcast to it) and a dtype it can take (a floating result into
  // an integer tensor is an error, as torch). Autograd's rules, as PyTorch's:
  // - on a leaf that requires grad, while grad mode is on: std::runtime_error ("a leaf Variable
  //   that requires grad is being used in an in-place operation.");
  // - on a tensor outside the graph (or under NoGradGuard), with operands that do not require
  //   grad: a plain in-place write, nothing recorded;
  // - on an op's output, or with an operand that requires grad: recorded, and this tensor's
  //   history moves to the new node, so later uses and backward() see the in-place result
  //   (y = x * 2; y.add_(z); y.sum().backward() gives x and z their gradients). Other tensors
  //   that view the buffer keep their own history (docs/ops.md: a difference from torch).
  // A tensor an op saved for its backward, changed in place before that backward runs, makes
  // backward throw std::runtime_error naming the op (see _version()).
  // fill_, zero_ and copy_ are the exceptions, as before these methods existed: on a leaf they
  // write outside autograd (no error, nothing recorded, whatever src), for initialisers,
  // optimizers and checkpoint loading; on an op's output in grad mode they are recorded.
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& add_(double other, double alpha = 1.0);
  Tensor& sub_(const Tensor& other, double alpha = 1.0);
  Tensor& sub_(double other, double alpha = 1.0);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(double other);
  Tensor& pow_(const Tensor& exponent);
  Tensor& pow_(double exponent);
  Tensor& clamp_(std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt);
  Tensor& clamp_min_(double min);
  Tensor& clamp_max_(double max);
  Tensor& neg_();
  Tensor& exp_();
  Tensor& log_();
  Tensor& sqrt_();
  Tensor& rsqrt_();
  Tensor& tanh_();
  Tensor& sigmoid_();
  Tensor& relu_();
  Tensor& abs_();
  Tensor& masked_fill_(const Tensor& mask, double value);
  /// x[indices] = values (Python's indexed assignment; accumulate adds instead).
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& values,
                     bool accumulate = false);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& values,
                     bool accumulate = false);
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, double value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, double value);
  /// Uniform in [from, to) / Normal(mean, stddev), drawn as Tensor::uniform / Tensor::normal do.
  Tensor& uniform_(double from, double to, Generator& generator);
  Tensor& uniform_(double from = 0.0, double to = 1.0);
  Tensor& normal_(double mean, double stddev, Generator& generator);
  Tensor& normal_(double mean = 0.0, double stddev = 1.0);
  /// Every element `value` (see above for leaves).
  Tensor& fill_(double value);
  Tensor& zero_();
  /// Copies `src`, broadcast to this tensor's shape and converted to its dtype (see above for
  /// leaves: copying parameters, EMA weights or a checkpoint needs no NoGradGuard).
  Tensor& copy_(const Tensor& src);
  /// The number of in-place writes to this tensor's buffer so far (torch's x._version): every
  /// in-place op above bumps it, for every tensor viewing the buffer. An op remembers the version
  /// of each tensor its backward reads (docs/extending.md), and backward throws if it changed.
  /// Code that writes elements through data<T>() in place can announce it with
  /// tg::autograd::increment_version.
  std::uint32_t _version() const;

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

namespace autograd {
/// Bumps the version counter of t's buffer (torch.autograd.graph.increment_version), as an
/// in-place op does: for code that changes elements through data<T>(), so that a backward that
/// saved t throws instead of using the changed values.
void increment_version(const Tensor& t);
}  // namespace autograd

namespace detail {
/// The version counter of a buffer (Tensor::_version), read by the tape's check of saved tensors.
std::uint32_t storage_version(const Storage& storage);
/// Every element of t set to `value` / dst's elements set to src's (same shape and dtype): the
/// kernels of fill_ and copy_, outside autograd and leaving the version alone, for tensors an op
/// is still making.
void fill_elements(Tensor& t, double value);
void copy_elements(Tensor& dst, const Tensor& src);
}  // namespace detail

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
