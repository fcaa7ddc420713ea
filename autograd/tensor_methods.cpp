// Tensor's methods (autograd/tensor.h): each forwards to its free function in autograd/ops_*.h, so
// a method and its free function give the same values, gradients and errors; and the in-place ops,
// with autograd's rules for them. Kept apart from tensor.cpp so that tensor.h need not include the
// op headers.
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/creation.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/reduce.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"

namespace tg {

// ---- arithmetic ------------------------------------------------------------------------------

Tensor Tensor::add(const Tensor& other, double alpha) const {
  return alpha == 1.0 ? tg::add(*this, other) : tg::add(*this, tg::mul(other, alpha));
}
Tensor Tensor::add(double other, double alpha) const { return tg::add(*this, other * alpha); }
Tensor Tensor::sub(const Tensor& other, double alpha) const {
  return alpha == 1.0 ? tg::sub(*this, other) : tg::sub(*this, tg::mul(other, alpha));
}
Tensor Tensor::sub(double other, double alpha) const { return tg::sub(*this, other * alpha); }
Tensor Tensor::mul(const Tensor& other) const { return tg::mul(*this, other); }
Tensor Tensor::mul(double other) const { return tg::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return tg::div(*this, other); }
Tensor Tensor::div(double other) const { return tg::div(*this, other); }
Tensor Tensor::pow(const Tensor& exponent) const { return tg::pow(*this, exponent); }
Tensor Tensor::pow(double exponent) const { return tg::pow(*this, exponent); }
Tensor Tensor::maximum(const Tensor& other) const { return tg::maximum(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return tg::minimum(*this, other); }
Tensor Tensor::neg() const { return tg::neg(*this); }
Tensor Tensor::exp() const { return tg::exp(*this); }
Tensor Tensor::log() const { return tg::log(*this); }
Tensor Tensor::sqrt() const { return tg::sqrt(*this); }
Tensor Tensor::rsqrt() const { return tg::rsqrt(*this); }
Tensor Tensor::tanh() const { return tg::tanh(*this); }
Tensor Tensor::sigmoid() const { return tg::sigmoid(*this); }
Tensor Tensor::relu() const { return tg::relu(*this); }
Tensor Tensor::abs() const { return tg::abs(*this); }
Tensor Tensor::sign() const { return tg::sign(*this); }
Tensor Tensor::square() const { return tg::square(*this); }
Tensor Tensor::sin() const { return tg::sin(*this); }
Tensor Tensor::cos() const { return tg::cos(*this); }
Tensor Tensor::erf() const { return tg::erf(*this); }
Tensor Tensor::log1p() const { return tg::log1p(*this); }
Tensor Tensor::expm1() const { return tg::expm1(*this); }
Tensor Tensor::reciprocal() const { return tg::reciprocal(*this); }
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const { return tg::clamp(*this, min, max); }
Tensor Tensor::clamp_min(double min) const { return tg::clamp_min(*this, min); }
Tensor Tensor::clamp_max(double max) const { return tg::clamp_max(*this, max); }
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const { return tg::where(condition, *this, other); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const { return tg::masked_fill(*this, mask, value); }

// ---- comparisons -----------------------------------------------------------------------------

Tensor Tensor::eq(const Tensor& other) const { return tg::eq(*this, other); }
Tensor Tensor::eq(double other) const { return tg::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return tg::ne(*this, other); }
Tensor Tensor::ne(double other) const { return tg::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return tg::lt(*this, other); }
Tensor Tensor::lt(double other) const { return tg::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return tg::le(*this, other); }
Tensor Tensor::le(double other) const { return tg::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return tg::gt(*this, other); }
Tensor Tensor::gt(double other) const { return tg::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return tg::ge(*this, other); }
Tensor Tensor::ge(double other) const { return tg::ge(*this, other); }
Tensor Tensor::logical_and(const Tensor& other) const { return tg::logical_and(*this, other); }
Tensor Tensor::logical_or(const Tensor& other) const { return tg::logical_or(*this, other); }
Tensor Tensor::logical_xor(const Tensor& other) const { return tg::logical_xor(*this, other); }
Tensor Tensor::logical_not() const { return tg::logical_not(*this); }
Tensor Tensor::isnan() const { return tg::isnan(*this); }
Tensor Tensor::isinf() const { return tg::isinf(*this); }
Tensor Tensor::isfinite() const { return tg::isfinite(*this); }
Tensor Tensor::any() const { return tg::any(*this); }
Tensor Tensor::any(std::int64_t d, bool keepdim) const { return tg::any(*this, d, keepdim); }
Tensor Tensor::all() const { return tg::all(*this); }
Tensor Tensor::all(std::int64_t d, bool keepdim) const { return tg::all(*this, d, keepdim); }
Tensor Tensor::count_nonzero(IntList d) const { return tg::count_nonzero(*this, d); }
Tensor Tensor::count_nonzero(std::int64_t d) const { return tg::count_nonzero(*this, {d}); }
Tensor Tensor::nonzero() const { return tg::nonzero(*this); }

// ---- reductions ------------------------------------------------------------------------------

Tensor Tensor::sum() const { return tg::sum(*this); }
Tensor Tensor::sum(std::int64_t d, bool keepdim) const { return tg::sum(*this, {d}, keepdim); }
Tensor Tensor::sum(IntList d, bool keepdim) const { return tg::sum(*this, d, keepdim); }
Tensor Tensor::mean() const { return tg::mean(*this); }
Tensor Tensor::mean(std::int64_t d, bool keepdim) const { return tg::mean(*this, {d}, keepdim); }
Tensor Tensor::mean(IntList d, bool keepdim) const { return tg::mean(*this, d, keepdim); }
Tensor Tensor::max() const { return tg::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(std::int64_t d, bool keepdim) const { return tg::max(*this, d, keepdim); }
Tensor Tensor::min() const { return tg::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(std::int64_t d, bool keepdim) const { return tg::min(*this, d, keepdim); }
Tensor Tensor::amax(IntList d, bool keepdim) const { return tg::amax(*this, d, keepdim); }
Tensor Tensor::amax(std::int64_t d, bool keepdim) const { return tg::amax(*this, {d}, keepdim); }
Tensor Tensor::amin(IntList d, bool keepdim) const { return tg::amin(*this, d, keepdim); }
Tensor Tensor::amin(std::int64_t d, bool keepdim) const { return tg::amin(*this, {d}, keepdim); }

namespace {
/// argmax / argmin without a dim: over the flattened tensor, as torch (keepdim: every dim kept as 1).
template <class F> Tensor arg_extreme_all(const Tensor& x, bool keepdim, F&& along) {
  const Tensor flat = along(reshape(x, Shape{x.numel()}));
  if (!keepdim) return flat;
  Shape ones;
  for (int i = 0; i < x.dim(); ++i) ones.push_back(1);
  return reshape(flat, ones);
}
}  // namespace

Tensor Tensor::argmax(std::optional<std::int64_t> d, bool keepdim) const {
  if (d) return tg::argmax(*this, *d, keepdim);
  return arg_extreme_all(*this, keepdim, [](const Tensor& flat) { return tg::argmax(flat, 0); });
}
Tensor Tensor::argmin(std::optional<std::int64_t> d, bool keepdim) const {
  if (d) return tg::argmin(*this, *d, keepdim);
  return arg_extreme_all(*this, keepdim, [](const Tensor& flat) { return tg::argmin(flat, 0); });
}
Tensor Tensor::var(IntList d, bool unbiased, bool keepdim) const { return tg::var(*this, d, unbiased, keepdim); }
Tensor Tensor::var(std::int64_t d, bool unbiased, bool keepdim) const { return tg::var(*this, {d}, unbiased, keepdim); }
Tensor Tensor::var(IntList d, Correction c, bool keepdim) const { return tg::var(*this, d, c, keepdim); }
Tensor Tensor::var(std::int64_t d, Correction c, bool keepdim) const { return tg::var(*this, {d}, c, keepdim); }
Tensor Tensor::std(IntList d, bool unbiased, bool keepdim) const { return tg::std(*this, d, unbiased, keepdim); }
Tensor Tensor::std(std::int64_t d, bool unbiased, bool keepdim) const { return tg::std(*this, {d}, unbiased, keepdim); }
Tensor Tensor::std(IntList d, Correction c, bool keepdim) const { return tg::std(*this, d, c, keepdim); }
Tensor Tensor::std(std::int64_t d, Correction c, bool keepdim) const { return tg::std(*this, {d}, c, keepdim); }
Tensor Tensor::logsumexp(IntList d, bool keepdim) const { return tg::logsumexp(*this, d, keepdim); }
Tensor Tensor::logsumexp(std::int64_t d, bool keepdim) const { return tg::logsumexp(*this, {d}, keepdim); }
Tensor Tensor::prod() const { return tg::prod(*this); }
Tensor Tensor::prod(std::int64_t d, bool keepdim) const { return tg::prod(*this, d, keepdim); }
Tensor Tensor::norm(double p, IntList d, bool keepdim) const { return tg::norm(*this, p, d, keepdim); }
Tensor Tensor::norm(double p, std::int64_t d, bool keepdim) const { return tg::norm(*this, p, {d}, keepdim); }
Tensor Tensor::cumsum(std::int64_t d) const { return tg::cumsum(*this, d); }
Tensor Tensor::cumprod(std::int64_t d) const { return tg::cumprod(*this, d); }
std::tuple<Tensor, Tensor> Tensor::topk(std::int64_t k, std::int64_t d, bool largest, bool sorted) const {
  return tg::topk(*this, k, d, largest, sorted);
}
std::tuple<Tensor, Tensor> Tensor::sort(std::int64_t d, bool descending) const { return tg::sort(*this, d, descending); }
Tensor Tensor::argsort(std::int64_t d, bool descending) const { return tg::argsort(*this, d, descending); }

// ---- shape -----------------------------------------------------------------------------------

Tensor Tensor::view(const Shape& size) const { return tg::view(*this, size); }
Tensor Tensor::reshape(const Shape& size) const { return tg::reshape(*this, size); }
Tensor Tensor::view_as(const Tensor& other) const { return tg::view(*this, other.shape()); }
Tensor Tensor::reshape_as(const Tensor& other) const { return tg::reshape(*this, other.shape()); }
Tensor Tensor::flatten(std::int64_t start_dim, std::int64_t end_dim) const { return tg::flatten(*this, start_dim, end_dim); }
Tensor Tensor::transpose(std::int64_t dim0, std::int64_t dim1) const { return tg::transpose(*this, dim0, dim1); }
Tensor Tensor::t() const {
  if (dim() > 2)
    throw std::invalid_argument("t: expects a tensor with <= 2 dimensions, got shape " + shape().str() +
                                " (use transpose(dim0, dim1))");
  return dim() == 2 ? tg::transpose(*this, 0, 1) : *this;
}
Tensor Tensor::permute(IntList dims) const { return tg::permute(*this, dims); }
Tensor Tensor::unsqueeze(std::int64_t d) const { return tg::unsqueeze(*this, d); }
Tensor Tensor::squeeze() const { return tg::squeeze(*this); }
Tensor Tensor::squeeze(std::int64_t d) const { return tg::squeeze(*this, d); }
Tensor Tensor::expand(const Shape& size) const { return tg::expand(*this, size); }
Tensor Tensor::expand_as(const Tensor& other) const { return tg::expand(*this, other.shape()); }
Tensor Tensor::broadcast_to(const Shape& size) const { return tg::broadcast_to(*this, size); }
Tensor Tensor::repeat(IntList repeats) const { return tg::repeat(*this, repeats); }
Tensor Tensor::flip(IntList dims) const { return tg::flip(*this, dims); }
Tensor Tensor::roll(IntList shifts, IntList dims) const { return tg::roll(*this, shifts, dims); }
Tensor Tensor::roll(std::int64_t shifts, std::int64_t dims) const { return tg::roll(*this, {shifts}, {dims}); }
Tensor Tensor::tril(std::int64_t diagonal) const { return tg::tril(*this, diagonal); }
Tensor Tensor::triu(std::int64_t diagonal) const { return tg::triu(*this, diagonal); }
Tensor Tensor::contiguous() const {
  check_defined("contiguous");
  return *this;
}
Tensor Tensor::narrow(std::int64_t d, std::int64_t start, std::int64_t length) const {
  return tg::narrow(*this, d, start, length);
}
Tensor Tensor::slice(std::int64_t d, std::optional<std::int64_t> start, std::optional<std::int64_t> end,
                     std::int64_t step) const {
  return tg::slice(*this, d, start.value_or(0), end.value_or(std::numeric_limits<std::int64_t>::max()), step);
}
Tensor Tensor::select(std::int64_t d, std::int64_t index) const { return tg::select(*this, d, index); }
PooledVector<Tensor> Tensor::split(std::int64_t split_size, std::int64_t d) const { return tg::split(*this, split_size, d); }
PooledVector<Tensor> Tensor::split(IntList split_sizes, std::int64_t d) const { return tg::split(*this, split_sizes, d); }
PooledVector<Tensor> Tensor::split_with_sizes(IntList split_sizes, std::int64_t d) const {
  return tg::split_with_sizes(*this, split_sizes, d);
}
PooledVector<Tensor> Tensor::chunk(std::int64_t chunks, std::int64_t d) const { return tg::chunk(*this, chunks, d); }
PooledVector<Tensor> Tensor::unbind(std::int64_t d) const { return tg::unbind(*this, d); }

// ---- indexing --------------------------------------------------------------------------------

Tensor Tensor::index(std::initializer_list<indexing::TensorIndex> indices) const { return tg::index(*this, indices); }
Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices) const { return tg::index(*this, indices); }
Tensor Tensor::index_put(std::initializer_list<indexing::TensorIndex> indices, const Tensor& values,
                         bool accumulate) const {
  return tg::index_put(*this, indices, values, accumulate);
}
Tensor Tensor::index_put(const std::vector<indexing::TensorIndex>& indices, const Tensor& values,
                         bool accumulate) const {
  return tg::index_put(*this, indices, values, accumulate);
}
Tensor Tensor::index_select(std::int64_t d, const Tensor& index) const { return tg::index_select(*this, d, index); }
Tensor Tensor::gather(std::int64_t d, const Tensor& index) const { return tg::gather(*this, d, index); }
Tensor Tensor::scatter_add(std::int64_t d, const Tensor& index, const Tensor& src) const {
  return tg::scatter_add(*this, d, index, src);
}
Tensor Tensor::index_add(std::int64_t d, const Tensor& index, const Tensor& source, double alpha) const {
  return tg::index_add(*this, d, index, source, alpha);
}
Tensor Tensor::take_along_dim(const Tensor& indices, std::int64_t d) const { return tg::take_along_dim(*this, indices, d); }
Tensor Tensor::masked_select(const Tensor& mask) const { return tg::masked_select(*this, mask); }

// ---- products and softmax --------------------------------------------------------------------

namespace {
[[noreturn]] void throw_product_dims(const char* op, const char* want, const Tensor& a, const Tensor& b) {
  throw std::invalid_argument(std::string(op) + ": expects " + want + ", got shapes " + a.shape().str() + " and " +
                              b.shape().str());
}
}  // namespace

Tensor Tensor::matmul(const Tensor& other) const { return tg::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& mat2) const {
  if (dim() != 2 || mat2.dim() != 2) throw_product_dims("mm", "two 2-D matrices", *this, mat2);
  return tg::matmul(*this, mat2);
}
Tensor Tensor::bmm(const Tensor& mat2) const {
  if (dim() != 3 || mat2.dim() != 3 || size(0) != mat2.size(0))
    throw_product_dims("bmm", "two 3-D tensors with the same batch size", *this, mat2);
  return tg::matmul(*this, mat2);
}
Tensor Tensor::mv(const Tensor& vec) const {
  if (dim() != 2 || vec.dim() != 1) throw_product_dims("mv", "a 2-D matrix and a 1-D vector", *this, vec);
  return tg::matmul(*this, vec);
}
Tensor Tensor::dot(const Tensor& other) const {
  if (dim() != 1 || other.dim() != 1) throw_product_dims("dot", "two 1-D tensors", *this, other);
  return tg::matmul(*this, other);
}
Tensor Tensor::softmax(std::int64_t d) const { return tg::softmax(*this, d); }
Tensor Tensor::log_softmax(std::int64_t d) const { return tg::log_softmax(*this, d); }

// ---- sampling, conversions, creation ---------------------------------------------------------

Tensor Tensor::multinomial(std::int64_t num_samples, bool replacement, Generator& generator) const {
  return tg::multinomial(*this, num_samples, replacement, generator);
}
Tensor Tensor::multinomial(std::int64_t num_samples, bool replacement) const {
  return tg::multinomial(*this, num_samples, replacement);
}
Tensor Tensor::bernoulli(Generator& generator) const { return tg::bernoulli(*this, generator); }
Tensor Tensor::bernoulli() const { return tg::bernoulli(*this); }
Tensor Tensor::bernoulli(double p, Generator& generator) const { return tg::bernoulli(*this, p, generator); }
Tensor Tensor::bernoulli(double p) const { return tg::bernoulli(*this, p); }

Tensor Tensor::to(const Tensor& other) const { return to(other.dtype()); }
Tensor Tensor::type_as(const Tensor& other) const { return to(other.dtype()); }
Tensor Tensor::new_zeros(const Shape& size) const { return tg::zeros(size, dtype()); }
Tensor Tensor::new_ones(const Shape& size) const { return tg::ones(size, dtype()); }
Tensor Tensor::new_full(const Shape& size, double value) const { return tg::full(size, value, dtype()); }
Tensor Tensor::new_empty(const Shape& size) const { return tg::empty(size, dtype()); }

// ---- in-place ops ----------------------------------------------------------------------------
//
// Every in-place op is the out-of-place op followed by a copy of its result into this tensor's
// buffer (no new kernels; a few plain cases below write in place directly). When autograd records
// it, the out-of-place op's node is the new node, and this tensor's handle takes its autograd
// state ("rebase"). The out-of-place op reads this tensor's old value through a copy when its
// backward would read that value (mul_ with an operand that requires grad, relu_, clamp_, ...):
// the write would otherwise change what the node saved, and the version check would throw.

namespace {

[[noreturn]] void throw_leaf(const char* op) {
  throw std::runtime_error(std::string(op) +
                           ": a leaf Variable that requires grad is being used in an in-place operation.");
}

/// Whether an in-place op on `self` with operand `other` (may be null) is recorded, after the leaf
/// check (which throws).
bool records(const char* op, const Tensor& self, const Tensor* other) {
  if (!self.defined()) throw std::logic_error(std::string(op) + ": the tensor is undefined");
  if (!GradMode::enabled()) return false;
  if (self.is_leaf() && self.requires_grad()) throw_leaf(op);
  return self.requires_grad() || (other && other->defined() && other->requires_grad());
}

/// torch.can_cast: whether a result of dtype `from` may be written into a tensor of dtype `to`
/// (a category never goes down: floating into integer or bool, integer into bool are refused).
bool can_cast(DType from, DType to) {
  if (is_floating(from)) return is_floating(to);
  if (from == DType::i64) return to != DType::b8;
  return true;
}

/// The op's result `r` made fit for self's buffer: its shape checked, its dtype converted.
Tensor fit(const char* op, const Tensor& self, Tensor r) {
  if (!(r.shape() == self.shape()))
    throw std::invalid_argument(std::string(op) + ": output with shape " + self.shape().str() +
                                " doesn't match the broadcast shape " + r.shape().str());
  if (r.dtype() != self.dtype()) {
    if (!can_cast(r.dtype(), self.dtype()))
      throw std::invalid_argument(std::string(op) + ": result type " + std::string(dtype_name(r.dtype())) +
                                  " can't be cast to the desired output type " + std::string(dtype_name(self.dtype())));
    r = r.to(self.dtype());
  }
  return r;
}

/// r's elements into self's buffer, as an in-place write.
void store(Tensor& self, const Tensor& r) {
  detail::copy_elements(self, r);
  autograd::increment_version(self);
}

/// self's handle takes r's autograd state: from now on self is the output of r's node (torch keeps
/// retain_grad across the change; hooks stay with the old history, as in torch).
void rebase(Tensor& self, const Tensor& r) {
  std::shared_ptr<AutogradMeta> fresh = r.impl()->meta;
  const std::shared_ptr<AutogradMeta>& old = self.impl()->meta;
  if (fresh && old && !old->is_leaf && old->retain_grad) fresh->retain_grad = true;
  self.impl()->meta = std::move(fresh);
}

/// A copy of self's elements with self's autograd identity (the same history): what an op whose
/// backward reads its input takes, so that the in-place write does not change what it saved.
Tensor copy_with_history(const Tensor& self) {
  Tensor copy = Tensor::empty(self.shape(), self.dtype());
  detail::copy_elements(copy, self);
  copy.impl()->meta = self.impl()->meta;
  return copy;
}

/// The in-place form of `compute` (the out-of-place op applied to this tensor's value).
/// `reads_self`: whether compute's backward reads its first input's value.
template <class Compute>
Tensor& in_place(Tensor& self, const char* op, const Tensor* other, bool reads_self, Compute&& compute) {
  if (!records(op, self, other)) {
    Tensor r;
    {
      NoGradGuard no_grad;
      r = fit(op, self, compute(self));
    }
    store(self, r);
    return self;
  }
  const Tensor r = fit(op, self, compute(reads_self ? copy_with_history(self) : self));
  store(self, r);
  rebase(self, r);
  return self;
}

/// Whether `other` can be added into self's buffer directly: nothing to record, one floating dtype,
/// self's shape.
bool plain_same(const Tensor& self, const Tensor& other) {
  return self.defined() && other.defined() && !(GradMode::enabled() && (self.requires_grad() || other.requires_grad())) &&
         self.shape() == other.shape() && self.dtype() == other.dtype() && is_floating(self.dtype());
}

/// fill_, zero_, copy_, uniform_, normal_ on an op's output in grad mode: self becomes the output
/// of a node whose value is `value` (self's shape and dtype). The old history gets a zero
/// gradient and `src` (copy_'s source, else undefined) the output's gradient summed to its shape,
/// in its dtype, as torch's FillBackward and CopyBackwards.
Tensor& overwrite_recorded(Tensor& self, const char* op, Tensor value, const Tensor& src) {
  const Shape shape = self.shape();
  const DType dtype = self.dtype();
  Tensor r;
  if (src.defined()) {
    r = record(
        op, std::move(value), {self, src}, Saves::none(),
        [shape, dtype, src_shape = src.shape(), src_dtype = src.dtype()](BackwardContext& ctx) {
          if (ctx.needs_grad(0)) ctx.accumulate(0, Tensor::zeros(shape, dtype));
          if (ctx.needs_grad(1)) ctx.accumulate(1, kernels::sum_to(ctx.grad_output(), src_shape).to(src_dtype));
        },
        [src_dtype = src.dtype()](GradGraphContext& ctx) {
          if (ctx.needs_grad(0)) ctx.accumulate(0, Tensor::zeros(ctx.input_shape(0), ctx.grad_output().dtype()));
          if (ctx.needs_grad(1)) ctx.accumulate_sum_to(1, ctx.grad_output().to(src_dtype));
        });
  } else {
    r = record(
        op, std::move(value), {self}, Saves::none(),
        [shape, dtype](BackwardContext& ctx) { ctx.accumulate(0, Tensor::zeros(shape, dtype)); },
        [](GradGraphContext& ctx) { ctx.accumulate(0, Tensor::zeros(ctx.input_shape(0), ctx.grad_output().dtype())); });
  }
  store(self, r);
  rebase(self, r);
  return self;
}

/// uniform_ and normal_: `value` written, with the leaf rule of the other in-place ops.
Tensor& overwrite(Tensor& self, const char* op, Tensor value) {
  if (records(op, self, nullptr)) return overwrite_recorded(self, op, std::move(value), Tensor());
  store(self, value);
  return self;
}

}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  if (plain_same(*this, other)) {
    kernels::add_inplace(*this, alpha == 1.0 ? other : kernels::unary(kernels::Unary::mul_scalar, other, alpha));
    autograd::increment_version(*this);
    return *this;
  }
  return in_place(*this, "add_", &other, false, [&](const Tensor& x) { return x.add(other, alpha); });
}
Tensor& Tensor::add_(double other, double alpha) {
  return in_place(*this, "add_", nullptr, false, [&](const Tensor& x) { return tg::add(x, other * alpha); });
}
Tensor& Tensor::sub_(const Tensor& other, double alpha) {
  if (plain_same(*this, other)) {
    kernels::add_inplace(*this, kernels::unary(kernels::Unary::mul_scalar, other, -alpha));
    autograd::increment_version(*this);
    return *this;
  }
  return in_place(*this, "sub_", &other, false, [&](const Tensor& x) { return x.sub(other, alpha); });
}
Tensor& Tensor::sub_(double other, double alpha) {
  return in_place(*this, "sub_", nullptr, false, [&](const Tensor& x) { return tg::sub(x, other * alpha); });
}
Tensor& Tensor::mul_(const Tensor& other) {
  // mul's backward reads x only for other's gradient.
  return in_place(*this, "mul_", &other, other.defined() && other.requires_grad(),
                  [&](const Tensor& x) { return tg::mul(x, other); });
}
Tensor& Tensor::mul_(double other) {
  if (defined() && is_floating(dtype()) && !(GradMode::enabled() && requires_grad())) {
    kernels::scale_inplace(*this, other);
    autograd::increment_version(*this);
    return *this;
  }
  return in_place(*this, "mul_", nullptr, false, [&](const Tensor& x) { return tg::mul(x, other); });
}
Tensor& Tensor::div_(const Tensor& other) {
  // div's backward reads x (in its differentiable form) only for other's gradient.
  return in_place(*this, "div_", &other, other.defined() && other.requires_grad(),
                  [&](const Tensor& x) { return tg::div(x, other); });
}
Tensor& Tensor::div_(double other) {
  if (defined() && is_floating(dtype()) && !(GradMode::enabled() && requires_grad())) {
    kernels::scale_inplace(*this, 1.0 / other);  // as div(x, s): x * (1 / s)
    autograd::increment_version(*this);
    return *this;
  }
  return in_place(*this, "div_", nullptr, false, [&](const Tensor& x) { return tg::div(x, other); });
}
Tensor& Tensor::pow_(const Tensor& exponent) {
  return in_place(*this, "pow_", &exponent, true, [&](const Tensor& x) { return tg::pow(x, exponent); });
}
Tensor& Tensor::pow_(double exponent) {
  return in_place(*this, "pow_", nullptr, true, [&](const Tensor& x) { return tg::pow(x, exponent); });
}
Tensor& Tensor::clamp_(std::optional<double> min, std::optional<double> max) {
  return in_place(*this, "clamp_", nullptr, true, [&](const Tensor& x) { return tg::clamp(x, min, max); });
}
Tensor& Tensor::clamp_min_(double min) {
  return in_place(*this, "clamp_min_", nullptr, true, [&](const Tensor& x) { return tg::clamp_min(x, min); });
}
Tensor& Tensor::clamp_max_(double max) {
  return in_place(*this, "clamp_max_", nullptr, true, [&](const Tensor& x) { return tg::clamp_max(x, max); });
}
Tensor& Tensor::neg_() { return in_place(*this, "neg_", nullptr, false, [](const Tensor& x) { return tg::neg(x); }); }
// exp, sqrt, rsqrt, tanh and sigmoid save their output: x's old value is not read.
Tensor& Tensor::exp_() { return in_place(*this, "exp_", nullptr, false, [](const Tensor& x) { return tg::exp(x); }); }
Tensor& Tensor::log_() { return in_place(*this, "log_", nullptr, true, [](const Tensor& x) { return tg::log(x); }); }
Tensor& Tensor::sqrt_() { return in_place(*this, "sqrt_", nullptr, false, [](const Tensor& x) { return tg::sqrt(x); }); }
Tensor& Tensor::rsqrt_() { return in_place(*this, "rsqrt_", nullptr, false, [](const Tensor& x) { return tg::rsqrt(x); }); }
Tensor& Tensor::tanh_() { return in_place(*this, "tanh_", nullptr, false, [](const Tensor& x) { return tg::tanh(x); }); }
Tensor& Tensor::sigmoid_() {
  return in_place(*this, "sigmoid_", nullptr, false, [](const Tensor& x) { return tg::sigmoid(x); });
}
Tensor& Tensor::relu_() { return in_place(*this, "relu_", nullptr, true, [](const Tensor& x) { return tg::relu(x); }); }
Tensor& Tensor::abs_() { return in_place(*this, "abs_", nullptr, true, [](const Tensor& x) { return tg::abs(x); }); }
Tensor& Tensor::masked_fill_(const Tensor& mask, double value) {
  return in_place(*this, "masked_fill_", nullptr, false, [&](const Tensor& x) { return tg::masked_fill(x, mask, value); });
}
Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& values, bool accumulate) {
  return in_place(*this, "index_put_", &values, false,
                  [&](const Tensor& x) { return tg::index_put(x, indices, values, accumulate); });
}
Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& values, bool accumulate) {
  return in_place(*this, "index_put_", &values, false,
                  [&](const Tensor& x) { return tg::index_put(x, indices, values, accumulate); });
}
Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices, double value) {
  return in_place(*this, "index_put_", nullptr, false, [&](const Tensor& x) { return tg::index_put(x, indices, value); });
}
Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, double value) {
  return in_place(*this, "index_put_", nullptr, false, [&](const Tensor& x) { return tg::index_put(x, indices, value); });
}

Tensor& Tensor::uniform_(double from, double to, Generator& generator) {
  records("uniform_", *this, nullptr);  // the leaf check before drawing
  return overwrite(*this, "uniform_", Tensor::uniform(shape(), from, to, generator, dtype()));
}
Tensor& Tensor::uniform_(double from, double to) {
  records("uniform_", *this, nullptr);
  Tensor value;
  {
    std::lock_guard<std::mutex> lock(default_generator_mutex());
    value = Tensor::uniform(shape(), from, to, default_generator(), dtype());
  }
  return overwrite(*this, "uniform_", std::move(value));
}
Tensor& Tensor::normal_(double mean, double stddev, Generator& generator) {
  records("normal_", *this, nullptr);
  return overwrite(*this, "normal_", Tensor::normal(shape(), mean, stddev, generator, dtype()));
}
Tensor& Tensor::normal_(double mean, double stddev) {
  records("normal_", *this, nullptr);
  Tensor value;
  {
    std::lock_guard<std::mutex> lock(default_generator_mutex());
    value = Tensor::normal(shape(), mean, stddev, default_generator(), dtype());
  }
  return overwrite(*this, "normal_", std::move(value));
}

// fill_, zero_ and copy_ write a leaf's buffer outside autograd (initialisers, optimizers and
// checkpoint loading call them on parameters); an op's output in grad mode is recorded.

Tensor& Tensor::fill_(double value) {
  check_defined("fill_");
  if (GradMode::enabled() && !is_leaf()) return overwrite_recorded(*this, "fill_", Tensor::full(shape(), value, dtype()), Tensor());
  detail::fill_elements(*this, value);
  autograd::increment_version(*this);
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0.0); }

Tensor& Tensor::copy_(const Tensor& src) {
  check_defined("copy_");
  if (!src.defined()) throw std::invalid_argument("copy_: the source tensor is undefined");
  if (!(src.shape() == shape())) {
    bool broadcasts = src.dim() <= dim();
    for (int i = 1; broadcasts && i <= src.dim(); ++i) {
      const std::int64_t s = src.shape()[src.dim() - i];
      broadcasts = s == 1 || s == shape()[dim() - i];
    }
    if (!broadcasts)
      throw std::invalid_argument("copy_: source " + src.shape().str() + " " + std::string(dtype_name(src.dtype())) +
                                  " does not broadcast to destination " + shape().str() + " " +
                                  std::string(dtype_name(dtype())));
  }
  const bool recorded = GradMode::enabled() && !is_leaf();
  if (!recorded && src.shape() == shape() && src.dtype() == dtype()) {
    detail::copy_elements(*this, src);
    autograd::increment_version(*this);
    return *this;
  }
  Tensor value;
  {
    NoGradGuard no_grad;
    value = src.detach();
    if (!(value.shape() == shape())) value = tg::expand(value, shape());
    value = value.to(dtype());
  }
  if (recorded) return overwrite_recorded(*this, "copy_", std::move(value), src);
  store(*this, value);
  return *this;
}

}  // namespace tg
