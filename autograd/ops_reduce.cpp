// Reductions: sum, mean, max over any set of axes, with keepdim.
#include <algorithm>
#include <stdexcept>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/reduce.h"
#include "autograd/kernels/view.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/tape.h"

namespace tg {

namespace {

kernels::Axes normalize_axes(const char* op, IntList axes, int ndim) {
  kernels::Axes out;
  for (auto a : axes) {
    const int n = normalize_axis(op, a, ndim);
    if (out.contains(n)) throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(a) + " given twice");
    out.push_back(n);
  }
  out.normalize();
  return out;
}

/// Every axis of x, as an inline list.
struct AllAxes {
  std::int64_t v[Shape::kMaxDims];
  int n;
  explicit AllAxes(const Tensor& x) : n(x.dim()) {
    for (int i = 0; i < n; ++i) v[i] = i;
  }
  operator IntList() const { return {v, static_cast<std::size_t>(n)}; }
};

// g (reduced shape) broadcast back to the input's shape.
Tensor expand_grad(const Tensor& g, const Shape& input, const kernels::Axes& axes) {
  const Tensor g_keep = kernels::view_as(g, kernels::reduced_shape(input, axes, true));
  return kernels::add(Tensor::zeros(input, g.dtype()), g_keep);
}

}  // namespace

Tensor sum(const Tensor& x, IntList axes, bool keepdim) {
  auto ax = normalize_axes("sum", axes, x.dim());
  return record("sum", kernels::sum(x, ax, keepdim), {x}, [ax, shape = x.shape()](BackwardContext& ctx) {
    ctx.accumulate(0, expand_grad(ctx.grad_output(), shape, ax));
  });
}

Tensor sum(const Tensor& x) { return sum(x, AllAxes(x), false); }

Tensor mean(const Tensor& x, IntList axes, bool keepdim) {
  auto ax = normalize_axes("mean", axes, x.dim());
  std::int64_t count = 1;
  for (int a : ax) count *= x.shape()[a];
  if (count == 0) throw std::invalid_argument("mean: reducing " + x.shape().str() + " over an empty axis");
  return mul(sum(x, axes, keepdim), 1.0 / static_cast<double>(count));
}

Tensor mean(const Tensor& x) { return mean(x, AllAxes(x), false); }

Tensor max(const Tensor& x, IntList axes, bool keepdim) {
  auto ax = normalize_axes("max", axes, x.dim());
  if (ax.empty()) return x;
  for (int a : ax)
    if (x.shape()[a] == 0) throw std::invalid_argument("max: cannot reduce axis " + std::to_string(a) + " of " + x.shape().str());
  if (ax.back() - ax.front() + 1 != static_cast<int>(ax.size())) {
    // Not one block of axes: reduce the last one, then the rest (gradients chain correctly).
    Tensor partial = max(x, {ax.back()}, true);
    std::int64_t rest[Shape::kMaxDims];
    std::copy(ax.begin(), ax.end() - 1, rest);
    Tensor y = max(partial, IntList(rest, static_cast<std::size_t>(ax.size() - 1)), true);
    return keepdim ? y : reshape(y, kernels::reduced_shape(x.shape(), ax, false));
  }
  std::int64_t outer = 1, R = 1, inner = 1;
  for (int i = 0; i < x.dim(); ++i) (i < ax.front() ? outer : i <= ax.back() ? R : inner) *= x.shape()[i];
  Tensor idx;
  Tensor y3 = kernels::max(kernels::view_as(x, Shape{outer, R, inner}), 1, false, &idx);
  Tensor y = kernels::view_as(y3, kernels::reduced_shape(x.shape(), ax, keepdim));
  return record("max", y, {x}, [idx, shape = x.shape(), outer, R, inner](BackwardContext& ctx) {
    Tensor gx = Tensor::zeros(shape, ctx.grad_output().dtype());
    kernels::dispatch_floating("max", gx.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* g = ctx.grad_output().template data<T>();
      const std::int64_t* id = idx.data<std::int64_t>();
      T* out = gx.template data<T>();
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < inner; ++j) out[(o * R + id[o * inner + j]) * inner + j] += g[o * inner + j];
    });
    ctx.accumulate(0, std::move(gx));
  });
}

Tensor max(const Tensor& x) { return max(x, AllAxes(x), false); }

Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdim) {
  const int a = normalize_axis("argmax", axis, x.dim());
  Tensor idx;
  kernels::max(x, a, keepdim, &idx);
  return idx;
}

}  // namespace tg
