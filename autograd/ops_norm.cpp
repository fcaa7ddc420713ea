// layer_norm and rms_norm: one tape node each. The forward saves x (for xhat), the per-row mean
// and 1/std, and the weight; not y. The backward is one kernel pass per row that also sums the
// weight and bias gradients (kernels/norm.cpp).
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/norm.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_norm.h"
#include "autograd/ops_reduce.h"
#include "autograd/tape.h"

namespace tg {

namespace {

// Validates the arguments; returns the row length (numel of normalized_shape).
std::int64_t check_norm(const char* op, const Tensor& x, const Shape& ns, const Tensor& weight, const Tensor& bias) {
  if (!x.defined()) throw std::invalid_argument(std::string(op) + ": input is undefined");
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string(op) + ": expects a floating-point input, got " +
                                std::string(dtype_name(x.dtype())) + " of shape " + x.shape().str());
  if (ns.empty()) throw std::invalid_argument(std::string(op) + ": normalized_shape must not be empty (input of shape " +
                                              x.shape().str() + ")");
  for (std::int64_t d : ns)
    if (d <= 0)
      throw std::invalid_argument(std::string(op) + ": normalized_shape " + ns.str() + " must have positive dimensions");
  const int k = ns.size(), nd = x.dim();
  bool ok = nd >= k;
  for (int i = 0; ok && i < k; ++i) ok = x.shape()[nd - k + i] == ns[i];
  if (!ok)
    throw std::invalid_argument(std::string(op) + ": input of shape " + x.shape().str() +
                                " does not end in normalized_shape " + ns.str());
  for (const auto& [what, t] : {std::pair<const char*, const Tensor*>{"weight", &weight}, {"bias", &bias}}) {
    if (!t->defined()) continue;
    if (!(t->shape() == ns))
      throw std::invalid_argument(std::string(op) + ": " + what + " of shape " + t->shape().str() +
                                  " does not match normalized_shape " + ns.str() + " (input of shape " +
                                  x.shape().str() + ")");
  }
  // One dtype for input, weight and bias, no promotion (torch refuses a float64 weight with a
  // float32 input too); the message names each one given, as linear's.
  if ((weight.defined() && weight.dtype() != x.dtype()) || (bias.defined() && bias.dtype() != x.dtype())) {
    auto described = [](const char* what, const Tensor& t) {
      return t.defined() ? std::string(what) + std::string(dtype_name(t.dtype())) + " " + t.shape().str() : std::string();
    };
    throw std::invalid_argument(std::string(op) + ": dtypes differ: " + described("input ", x) +
                                described(", weight ", weight) + described(", bias ", bias));
  }
  return ns.numel();
}

// The last k dims of s (normalized_shape, as the backward recovers it from x).
Shape trailing_shape(const Shape& s, int k) { return Shape(s.end() - k, s.end()); }

double rms_eps(const Tensor& x, std::optional<double> eps) {
  return eps.value_or(x.dtype() == DType::f64 ? std::numeric_limits<double>::epsilon()
                                              : std::numeric_limits<float>::epsilon());
}

Tensor norm_impl(const char* op, bool rms, const Tensor& x, const Shape& ns, const Tensor& weight, const Tensor& bias,
                 double eps) {
  const std::int64_t n = check_norm(op, x, ns, weight, bias);
  const std::int64_t rows = x.numel() / n;
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = rms ? Tensor() : Tensor::empty(Shape{rows}, x.dtype());
  Tensor rstd = Tensor::empty(Shape{rows}, x.dtype());
  kernels::dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::norm_forward<T>(rms, x.data<T>(), weight.defined() ? weight.data<T>() : nullptr,
                             bias.defined() ? bias.data<T>() : nullptr, y.data<T>(), rms ? nullptr : mean.data<T>(),
                             rstd.data<T>(), rows, n, eps);
  });
  // Inputs in order x, weight (if any), bias (if any).
  Tensor inputs[3] = {x};
  int count = 1;
  const int iw = weight.defined() ? count++ : -1;
  if (iw > 0) inputs[iw] = weight;
  const int ib = bias.defined() ? count++ : -1;
  if (ib > 0) inputs[ib] = bias;
  return record(op, y, inputs, static_cast<std::size_t>(count), Saves::inputs(0).and_input(iw, iw > 0),
                [x = x.detach(), w = weight.defined() ? weight.detach() : Tensor(), mean, rstd, rms, iw, ib, k = ns.size(), rows, n,
                 op](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    Tensor dx = ctx.needs_grad(0) ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
    Tensor dw = iw > 0 && ctx.needs_grad(iw) ? Tensor::empty(w.shape(), x.dtype()) : Tensor();
    Tensor db = ib > 0 && ctx.needs_grad(ib) ? Tensor::empty(trailing_shape(x.shape(), k), x.dtype()) : Tensor();
    kernels::dispatch_floating(op, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      auto ptr = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
      kernels::norm_backward<T>(rms, g.data<T>(), x.data<T>(), w.defined() ? w.data<T>() : nullptr,
                                rms ? nullptr : mean.data<T>(), rstd.data<T>(), ptr(dx), ptr(dw), ptr(db), rows, n);
    });
    if (dx.defined()) ctx.accumulate(0, std::move(dx));
    if (dw.defined()) ctx.accumulate(iw, std::move(dw));
    if (db.defined()) ctx.accumulate(ib, std::move(db));
  }, [x, weight, bias, ns, eps, rms](GradGraphContext& ctx) {  // the composed form, differentiated
    ctx.backward_through(rms ? rms_norm_composed(x, ns, weight, eps) : layer_norm_composed(x, ns, weight, bias, eps));
  });
}

std::vector<std::int64_t> trailing(const Shape& ns) {
  std::vector<std::int64_t> dims;
  for (int i = -ns.size(); i < 0; ++i) dims.push_back(i);
  return dims;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
  return norm_impl("layer_norm", false, x, normalized_shape, weight, bias, eps);
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  check_norm("rms_norm", x, normalized_shape, weight, Tensor());  // before reading x's dtype for eps
  return norm_impl("rms_norm", true, x, normalized_shape, weight, Tensor(), rms_eps(x, eps));
}

Tensor layer_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                           double eps) {
  check_norm("layer_norm", x, normalized_shape, weight, bias);
  const auto dims = trailing(normalized_shape);
  const Tensor centred = x - mean(x, dims, /*keepdim=*/true);
  Tensor y = centred * rsqrt(var(x, dims, Correction{0}, /*keepdim=*/true) + eps);  // biased, as PyTorch
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

Tensor rms_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                         std::optional<double> eps) {
  check_norm("rms_norm", x, normalized_shape, weight, Tensor());
  Tensor y = x * rsqrt(mean(square(x), trailing(normalized_shape), /*keepdim=*/true) + rms_eps(x, eps));
  if (weight.defined()) y = y * weight;
  return y;
}

}  // namespace tg
