#include "autograd/tensor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "autograd/compact_grad.h"
#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/memory.h"
#include "autograd/pending.h"
#include "autograd/random.h"
#include "autograd/tape.h"

namespace tg {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i64: return "int64";
    case DType::b8: return "bool";
  }
  return "?";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i64: return 8;
    case DType::b8: return 1;
  }
  return 0;
}

void throw_dtype_mismatch(DType have, DType want) {
  throw std::invalid_argument("tensor has dtype " + std::string(dtype_name(have)) + ", accessed as " +
                              std::string(dtype_name(want)));
}

namespace {
std::atomic<std::int64_t> g_live_bytes{0};
std::atomic<std::int64_t> g_live_buffers{0};
}  // namespace

struct Storage {
  std::size_t block_bytes = 0;  // the block's own size, set by allocate_at_least (so declared first)
  void* data;
  std::size_t bytes;
  std::atomic<std::uint32_t> version{0};  // in-place writes so far (Tensor::_version)
  std::atomic<bool> cacheable{false};     // autocast::mark_cacheable: bf16 copies may be cached

  explicit Storage(std::size_t n_bytes) : data(memory::allocate_at_least(n_bytes, &block_bytes)), bytes(n_bytes) {
    g_live_bytes.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
    g_live_buffers.fetch_add(1, std::memory_order_relaxed);
  }
  ~Storage() {
    memory::deallocate(data, block_bytes);
    g_live_bytes.fetch_sub(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
    g_live_buffers.fetch_sub(1, std::memory_order_relaxed);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

namespace memory {
std::int64_t live_bytes() { return g_live_bytes.load(); }
std::int64_t live_buffers() { return g_live_buffers.load(); }
}  // namespace memory

void write_pending(const TensorImpl& impl) { impl.pending->run(); }

std::uint32_t detail::storage_version(const Storage& storage) { return storage.version.load(std::memory_order_relaxed); }
namespace detail {
// The mark of autocast::mark_cacheable, kept by the buffer for its life (declared in autocast.cpp,
// its only reader): a new buffer, even at a freed one's address, starts unmarked.
void mark_storage_cacheable(Storage& storage) { storage.cacheable.store(true, std::memory_order_relaxed); }
bool storage_cacheable(const Storage& storage) { return storage.cacheable.load(std::memory_order_relaxed); }
}  // namespace detail

void autograd::increment_version(const Tensor& t) {
  if (t.defined() && t.impl()->storage) t.impl()->storage->version.fetch_add(1, std::memory_order_relaxed);
}

std::uint32_t Tensor::_version() const {
  check_defined("_version");
  return impl_->storage ? detail::storage_version(*impl_->storage) : 0;
}

namespace {
inline void write_pending_if(const TensorImpl& impl) {
  if (impl.pending) write_pending(impl);
}
}  // namespace

std::shared_ptr<TensorImpl> TensorImpl::make() { return std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>()); }
std::shared_ptr<TensorImpl> TensorImpl::make(const TensorImpl& other) {
  return std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), other);
}

// ---- factories ---------------------------------------------------------------------------

namespace {
/// An OutOfMemoryError naming the tensor (`bytes` SIZE_MAX: its size overflows). Out of line:
/// Tensor::empty builds no string unless the allocation fails.
[[noreturn, gnu::cold, gnu::noinline]] void throw_tensor_out_of_memory(std::size_t bytes, const Shape& shape,
                                                                        DType dtype) {
  throw OutOfMemoryError(bytes, "a " + std::string(dtype_name(dtype)) + " tensor of shape " + shape.str());
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  std::size_t bytes = dtype_size(dtype);
  bool overflow = false, zero = false;  // a dimension of 0 makes the count 0 even after an overflow
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("Tensor: negative dimension in shape " + shape.str());
    overflow |= __builtin_mul_overflow(bytes, static_cast<std::size_t>(d), &bytes);
    zero |= d == 0;
  }
  if (zero) bytes = 0;
  else if (overflow) bytes = SIZE_MAX;
  // No allocation of 2^63 bytes or more can succeed (and a bool tensor's numel() would overflow).
  if (bytes > static_cast<std::size_t>(INT64_MAX)) throw_tensor_out_of_memory(bytes, shape, dtype);
  auto impl = TensorImpl::make();
  try {
    impl->storage = std::allocate_shared<Storage>(PoolAllocator<Storage>(), bytes);
  } catch (const OutOfMemoryError&) {
    throw_tensor_out_of_memory(bytes, shape, dtype);
  }
  impl->data = impl->storage->data;
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

void Tensor::set_data(const Tensor& src) {
  check_defined("set_data");
  if (!src.defined()) throw std::invalid_argument("set_data: the source tensor is undefined");
  if (!is_leaf()) throw std::invalid_argument("set_data: only for leaf tensors, not an op's output");
  zero_grad();
  impl_->storage = src.impl_->storage;
  impl_->data = src.impl_->data;
  impl_->pending = src.impl_->pending;
  impl_->shape = src.impl_->shape;
  impl_->dtype = src.impl_->dtype;
}

void detail::fill_elements(Tensor& t, double value) {
  kernels::dispatch_any(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    // On both threads when large: zero-filled buffers (gradient accumulators, embedding tables'
    // dense gradients) are megabytes per step.
    kernels::parallel_for(t.numel(), kernels::kGrainCheap, [&](std::int64_t begin, std::int64_t end) {
      std::fill(p + begin, p + end, static_cast<T>(value));
    });
  });
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  detail::fill_elements(t, value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full(Shape{}, value, dtype); }

Tensor Tensor::arange(double start, double end, double step, DType dtype) {
  if (step == 0) throw std::invalid_argument("arange: step must be non-zero");
  const auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((end - start) / step)));
  Tensor t = empty(Shape{n}, dtype);
  kernels::dispatch_any(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

namespace {
template <class T>
Tensor from_typed(const std::vector<T>& values, const Shape& shape) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel())
    throw std::invalid_argument("from_vector: " + std::to_string(values.size()) +
                                " values do not fill shape " + shape.str());
  Tensor t = Tensor::empty(shape, dtype_of_v<T>);
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}
}  // namespace

Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& s) { return from_typed(v, s); }
Tensor Tensor::from_vector(const std::vector<double>& v, const Shape& s) { return from_typed(v, s); }
Tensor Tensor::from_vector(const std::vector<std::int64_t>& v, const Shape& s) { return from_typed(v, s); }

Tensor Tensor::from_values(const std::vector<double>& values, const Shape& shape, DType dtype) {
  return from_typed(values, shape).to(dtype);
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
  Tensor t = empty(shape, dtype);
  kernels::dispatch_floating("uniform", dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(low + (high - low) * gen.uniform());
  });
  return t;
}

Tensor Tensor::normal(const Shape& shape, double mean, double stddev, Generator& gen, DType dtype) {
  Tensor t = empty(shape, dtype);
  kernels::dispatch_floating("normal", dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(mean + stddev * gen.normal());
  });
  return t;
}

// ---- metadata and elements ---------------------------------------------------------------

void Tensor::throw_undefined(const char* what) { throw std::logic_error(std::string(what) + ": the tensor is undefined"); }

namespace {
double element_as_double(const TensorImpl& impl, std::int64_t flat) {
  if (impl.pending) write_pending(impl);
  switch (impl.dtype) {
    case DType::f32: return static_cast<const float*>(impl.data)[flat];
    case DType::f64: return static_cast<const double*>(impl.data)[flat];
    case DType::i64: return static_cast<double>(static_cast<const std::int64_t*>(impl.data)[flat]);
    case DType::b8: return static_cast<const bool*>(impl.data)[flat] ? 1.0 : 0.0;
  }
  return 0;
}
}  // namespace

double Tensor::item() const {
  if (numel() != 1)
    throw std::invalid_argument("item: tensor of shape " + shape().str() + " has " +
                                std::to_string(numel()) + " elements, not 1");
  return element_as_double(*impl_, 0);
}

double Tensor::at(std::initializer_list<std::int64_t> index) const {
  const Shape& s = shape();
  if (static_cast<int>(index.size()) != s.size())
    throw std::invalid_argument("at: " + std::to_string(index.size()) + " indices for shape " + s.str());
  std::int64_t flat = 0;
  int axis = 0;
  for (auto i : index) {
    if (i < 0 || i >= s[axis])
      throw std::out_of_range("at: index " + std::to_string(i) + " out of range for axis " +
                              std::to_string(axis) + " of shape " + s.str());
    flat = flat * s[axis] + i;
    ++axis;
  }
  return element_as_double(*impl_, flat);
}

template <class T> std::vector<T> Tensor::to_vector() const {
  check_defined("to_vector");
  std::vector<T> out(static_cast<std::size_t>(numel()));
  for (std::int64_t i = 0; i < numel(); ++i) {
    if constexpr (std::is_same_v<T, std::int64_t>)
      out[i] = dtype() == DType::i64 ? (write_pending_if(*impl_), static_cast<const std::int64_t*>(impl_->data)[i])
                                     : static_cast<std::int64_t>(element_as_double(*impl_, i));
    else
      out[i] = static_cast<T>(element_as_double(*impl_, i));
  }
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

bool Tensor::shares_storage(const Tensor& other) const {
  return impl_ && other.impl_ && impl_->storage == other.impl_->storage;
}

void detail::copy_elements(Tensor& dst, const Tensor& src) {
  if (!(src.shape() == dst.shape()) || src.dtype() != dst.dtype())
    throw std::logic_error("copy_elements: source " + src.shape().str() + " " + std::string(dtype_name(src.dtype())) +
                           " does not match destination " + dst.shape().str() + " " +
                           std::string(dtype_name(dst.dtype())));
  const void* from = src.data_ptr();  // each writes its deferred elements first
  void* to = dst.data_ptr();
  if (from != to) std::memcpy(to, from, static_cast<std::size_t>(dst.numel()) * dtype_size(dst.dtype()));
}

// ---- conversions and copies --------------------------------------------------------------

namespace {
Tensor convert(const Tensor& x, DType to) {
  Tensor y = Tensor::empty(x.shape(), to);
  kernels::dispatch_any(x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    kernels::dispatch_any(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      const From* src = x.data<From>();
      To* dst = y.data<To>();
      for (std::int64_t i = 0; i < x.numel(); ++i) dst[i] = static_cast<To>(src[i]);
    });
  });
  return y;
}
}  // namespace

Tensor Tensor::to(DType target) const {
  check_defined("to");
  if (target == dtype()) return *this;
  if (!is_floating(target)) return convert(*this, target);  // int64 / bool results have no gradient, as PyTorch
  const DType source = dtype();
  return record(
      "to", convert(*this, target), {*this}, Saves::none(),
      [source](BackwardContext& ctx) { ctx.accumulate(0, convert(ctx.grad_output(), source)); },
      [source](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output().to(source)); });
}

Tensor Tensor::clone() const {
  check_defined("clone");
  Tensor y = Tensor::empty(shape(), dtype());
  detail::copy_elements(y, *this);
  return record(
      "clone", y, {*this}, Saves::none(), [](BackwardContext& ctx) { ctx.accumulate(0, ctx.grad_output()); },
      [](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output()); });
}

Tensor Tensor::detach() const {
  check_defined("detach");
  auto impl = TensorImpl::make(*impl_);
  impl->meta.reset();
  return Tensor(std::move(impl));
}

// ---- autograd ----------------------------------------------------------------------------

bool Tensor::requires_grad() const { return impl_ && impl_->meta && impl_->meta->requires_grad; }

Tensor& Tensor::requires_grad_(bool on) {
  check_defined("requires_grad_");
  if (!is_leaf()) {
    if (on) return *this;  // an op's output already requires grad: nothing to change, as torch
    throw std::logic_error("requires_grad_: only leaf tensors can change requires_grad; use detach() first");
  }
  if (on && !is_floating(dtype()))
    throw std::invalid_argument("requires_grad_: only floating-point tensors can require grad, got " +
                                std::string(dtype_name(dtype())));
  if (!impl_->meta) impl_->meta = std::allocate_shared<AutogradMeta>(PoolAllocator<AutogradMeta>());
  impl_->meta->requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { return !impl_ || !impl_->meta || impl_->meta->is_leaf; }

Tensor Tensor::grad() const {
  check_defined("grad");
  if (!impl_->meta) return Tensor();
  AutogradMeta& meta = *impl_->meta;
  if (!meta.is_leaf) return meta.retained_grad;
  if (meta.compact) {
    meta.grad = meta.compact->dense();
    meta.compact.reset();
  }
  return meta.grad;
}

Tensor& Tensor::allow_compact_grad(bool on) {
  check_defined("allow_compact_grad");
  if (!impl_->meta) impl_->meta = std::allocate_shared<AutogradMeta>(PoolAllocator<AutogradMeta>());
  impl_->meta->allow_compact = on;
  return *this;
}

bool Tensor::allows_compact_grad() const { return impl_ && impl_->meta && impl_->meta->allow_compact; }

std::shared_ptr<CompactGrad> Tensor::compact_grad() const {
  return impl_ && impl_->meta ? impl_->meta->compact : nullptr;
}

void Tensor::set_grad(const Tensor& grad) {
  check_defined("set_grad");
  if (grad.defined() && (!(grad.shape() == shape()) || grad.dtype() != dtype()))
    throw std::invalid_argument("set_grad: gradient " + grad.shape().str() + " does not match tensor " +
                                shape().str());
  if (!impl_->meta) impl_->meta = std::allocate_shared<AutogradMeta>(PoolAllocator<AutogradMeta>());
  if (!impl_->meta->is_leaf) {  // an op's output: its grad() is the retained gradient (meta->grad is backward's)
    impl_->meta->retained_grad = grad;
    return;
  }
  impl_->meta->grad = grad;
  impl_->meta->compact.reset();
}

void Tensor::zero_grad() {
  if (impl_ && impl_->meta) {
    if (!impl_->meta->is_leaf) {
      impl_->meta->retained_grad = Tensor();
      return;
    }
    impl_->meta->grad = Tensor();
    impl_->meta->compact.reset();
  }
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain, bool create_graph) const {
  check_defined("backward");
  const bool retain_graph = retain.value_or(create_graph);
  if (!gradient.defined()) {
    if (numel() != 1)
      throw std::invalid_argument("backward: a gradient can be created implicitly only for a one-element "
                                  "output, got shape " + shape().str() + "; pass a seed gradient");
    detail::run_backward(*this, Tensor::ones(shape(), dtype()), retain_graph, create_graph);
    return;
  }
  detail::run_backward(*this, gradient, retain_graph, create_graph);  // checks the gradient's shape and dtype
}

namespace {
std::uint64_t next_hook_id() {
  static std::atomic<std::uint64_t> next_id{1};
  return next_id.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

HookHandle Tensor::register_hook(GradHook hook) {
  check_defined("register_hook");
  if (!requires_grad())
    throw std::invalid_argument("register_hook: the tensor does not require grad, so no gradient would reach the hook");
  if (!hook) throw std::invalid_argument("register_hook: empty hook");
  const std::uint64_t id = next_hook_id();
  impl_->meta->hooks.emplace_back(id, std::move(hook));
  return HookHandle(impl_->meta, id);
}

HookHandle Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) {
  check_defined("register_post_accumulate_grad_hook");
  if (!requires_grad() || !is_leaf())
    throw std::invalid_argument(std::string("register_post_accumulate_grad_hook: ") +
                                (requires_grad() ? "only for leaf tensors, not an op's output"
                                                 : "the tensor does not require grad, so no gradient would be accumulated"));
  if (!hook) throw std::invalid_argument("register_post_accumulate_grad_hook: empty hook");
  const std::uint64_t id = next_hook_id();
  auto& post = impl_->meta->post_accumulate;
  if (!post) post = std::make_unique<PostAccumulateHooks>();
  post->hooks.emplace_back(id, std::move(hook));
  post->tensor = impl_;
  detail::enable_post_accumulate_hooks();
  return HookHandle(impl_->meta, id);
}

void HookHandle::remove() {
  if (auto meta = meta_.lock()) {
    std::erase_if(meta->hooks, [&](const auto& entry) { return entry.first == id_; });
    if (meta->post_accumulate)
      std::erase_if(meta->post_accumulate->hooks, [&](const auto& entry) { return entry.first == id_; });
  }
  meta_.reset();
}

void Tensor::retain_grad() {
  check_defined("retain_grad");
  if (!requires_grad()) throw std::invalid_argument("retain_grad: the tensor does not require grad");
  if (!impl_->meta->is_leaf) impl_->meta->retain_grad = true;
}

bool Tensor::retains_grad() const { return impl_ && impl_->meta && !impl_->meta->is_leaf && impl_->meta->retain_grad; }

// ---- printing ----------------------------------------------------------------------------

namespace {
// Bool elements print as PyTorch's: " True" / "False" (padded to one width inside a list).
void print_bool(std::ostream& os, const TensorImpl& t, std::int64_t flat, bool pad) {
  if (element_as_double(t, flat) != 0) os << (pad ? " True" : "True");
  else os << "False";
}

void print_rec(std::ostream& os, const TensorImpl& t, int axis, std::int64_t& flat, int indent, bool pad_bools) {
  const Shape& s = t.shape;
  if (s.size() == 0) {
    if (t.dtype == DType::i64) os << static_cast<std::int64_t>(element_as_double(t, flat++));
    else if (t.dtype == DType::b8) print_bool(os, t, flat++, false);
    else os << element_as_double(t, flat++);
    return;
  }
  os << '[';
  const std::int64_t n = s[axis];
  const bool summarize = n > 12;
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarize && i == 6) {
      os << "..., ";
      std::int64_t skip = (n - 12);
      for (int a = axis + 1; a < s.size(); ++a) skip *= s[a];
      flat += skip;
      i = n - 6;
    }
    if (axis + 1 == s.size()) {
      if (t.dtype == DType::i64) os << static_cast<std::int64_t>(element_as_double(t, flat++));
      else if (t.dtype == DType::b8) print_bool(os, t, flat++, pad_bools);
      else os << std::setw(9) << element_as_double(t, flat++);
    } else {
      print_rec(os, t, axis + 1, flat, indent + 1, pad_bools);
    }
    if (i + 1 < n) os << (axis + 1 == s.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << ']';
}
}  // namespace

std::string Tensor::str() const {
  if (!impl_) return "tensor(undefined)";
  std::ostringstream os;
  os << std::fixed << std::setprecision(4) << "tensor(";
  std::int64_t flat = 0;
  if (numel() == 0) os << "[], shape=" << shape().str();
  else {
    bool any_false = false;  // PyTorch pads " True" to the width of "False" only when one is shown
    if (dtype() == DType::b8)
      for (std::int64_t i = 0; i < numel() && !any_false; ++i) any_false = element_as_double(*impl_, i) == 0;
    print_rec(os, *impl_, 0, flat, 7, any_false);
  }
  os << ", dtype=" << dtype_name(dtype());
  if (requires_grad()) os << ", requires_grad=true";
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace tg
