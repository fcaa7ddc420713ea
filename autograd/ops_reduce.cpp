// Reductions over any set of axes with keepdim (sum, mean, amax/amin, var/std, logsumexp, norm),
// along one axis (max/min with indices, prod, cumsum/cumprod, topk/sort).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "autograd/creation.h"
#include "autograd/kernels/compare.h"
#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/reduce.h"
#include "autograd/kernels/view.h"
#include "autograd/ops_compare.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/tape.h"

namespace tg {

namespace {

kernels::Axes normalize_axes(const char* op, IntList axes, const Shape& shape) {
  kernels::Axes out;
  for (auto a : axes) {
    const int n = normalize_axis(op, a, shape.size());
    if (out.contains(n))
      throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(a) + " given twice for " + shape.str());
    out.push_back(n);
  }
  out.normalize();
  return out;
}

/// Normalised axes; empty means every axis (PyTorch's dim=None / dim=()).
kernels::Axes axes_or_all(const char* op, IntList dims, const Shape& shape) {
  kernels::Axes ax = normalize_axes(op, dims, shape);
  if (ax.empty())
    for (int i = 0; i < shape.size(); ++i) ax.push_back(i);
  return ax;
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
  auto ax = normalize_axes("sum", axes, x.shape());
  if (x.dtype() == DType::i64 || x.dtype() == DType::b8) return kernels::sum_integral(x, ax, keepdim);  // int64, as PyTorch
  return record("sum", kernels::sum(x, ax, keepdim), {x}, Saves::none(), [ax, shape = x.shape()](BackwardContext& ctx) {
    ctx.accumulate(0, expand_grad(ctx.grad_output(), shape, ax));
  }, [ax](GradGraphContext& ctx) {
    const Shape in = ctx.input_shape(0);
    ctx.accumulate(0, expand(reshape(ctx.grad_output(), kernels::reduced_shape(in, ax, true)), in));
  });
}

Tensor sum(const Tensor& x) { return sum(x, AllAxes(x), false); }

Tensor mean(const Tensor& x, IntList axes, bool keepdim) {
  auto ax = normalize_axes("mean", axes, x.shape());
  if (!is_floating(x.dtype()))  // sum would count a bool tensor, but a mean has no integer dtype (as PyTorch)
    throw std::invalid_argument("mean: needs a floating tensor, got " + std::string(dtype_name(x.dtype())) + " " +
                                x.shape().str());
  std::int64_t count = 1;
  for (int a : ax) count *= x.shape()[a];
  if (count == 0) throw std::invalid_argument("mean: reducing " + x.shape().str() + " over an empty axis");
  return mul(sum(x, axes, keepdim), 1.0 / static_cast<double>(count));
}

Tensor mean(const Tensor& x) { return mean(x, AllAxes(x), false); }

namespace {

/// x rearranged as rows: (M, R) with the axes `ax` last and flattened (differentiable: permute
/// and reshape, skipped when they would change nothing). `out` is the reduced shape.
struct Rows {
  Tensor x;  // (M, R)
  std::int64_t M = 1, R = 1;
  Shape out;
};

Rows to_rows(const Tensor& x, const kernels::Axes& ax, bool keepdim) {
  Rows r;
  std::int64_t order[Shape::kMaxDims];
  int n = 0;
  bool identity = true;
  for (int i = 0; i < x.dim(); ++i)
    if (!ax.contains(i)) order[n++] = i, r.M *= x.shape()[i];
  for (int a : ax) order[n++] = a, r.R *= x.shape()[a];
  for (int i = 0; i < n; ++i) identity = identity && order[i] == i;
  const Tensor moved = identity ? x : permute(x, IntList(order, static_cast<std::size_t>(n)));
  r.x = reshape(moved, Shape{r.M, r.R});
  r.out = kernels::reduced_shape(x.shape(), ax, keepdim);
  return r;
}

/// `x` with axis `a` moved last, viewed as rows (M, size), and the way back for a result of the
/// same shape.
struct AlongAxis {
  Tensor rows;
  Shape moved;  // x's shape with axis a last
  int a, last;
  Tensor back(const Tensor& y_rows) const {
    const Tensor y = reshape(y_rows, moved);
    return a == last ? y : transpose(y, a, last);
  }
};

AlongAxis along(const Tensor& x, int a) {
  const int last = x.dim() - 1;
  const Tensor moved = a == last ? x : transpose(x, a, last);
  const std::int64_t size = x.shape()[a];
  return {reshape(moved, Shape{size == 0 ? 0 : x.numel() / size, size}), moved.shape(), a, last};
}

std::int64_t rows_grain(std::int64_t R) { return std::max<std::int64_t>(1, kGrainCheap / std::max<std::int64_t>(R, 1)); }

/// Whether v is the extreme `best` a row reduced to: equal to it, or NaN when it is NaN (the
/// gradient is then shared among the NaNs, as torch.max()).
template <class T> bool attains(T v, T best) { return v == best || (v != v && best != best); }

/// Refuses a reduction of x over `ax` when one of them has size 0 (PyTorch: NaN or -inf), naming `op`.
void require_nonempty(const char* op, const Tensor& x, const kernels::Axes& ax) {
  for (int i = 0; i < ax.size(); ++i)
    if (x.shape()[ax[i]] == 0)
      throw std::invalid_argument(std::string(op) + ": cannot reduce " + x.shape().str() + " over an empty dimension");
}

/// amax / amin of each row of (M, R); the gradient is shared evenly among a row's tied extremes.
Tensor extreme_rows(const char* op, const Tensor& x, bool is_max) {
  const std::int64_t M = x.size(0), R = x.size(1);
  Tensor y = Tensor::empty({M}, x.dtype());
  dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(M, rows_grain(R), [&](std::int64_t m0, std::int64_t m1) {
      for (std::int64_t m = m0; m < m1; ++m) {
        const T* row = px + m * R;
        T best = row[0];
        for (std::int64_t j = 1; j < R && best == best; ++j)  // NaN wins, as in torch.amax
          if (row[j] != row[j] || (is_max ? row[j] > best : row[j] < best)) best = row[j];
        py[m] = best;
      }
    });
  });
  return record(op, y, {x}, Saves::inputs(0).and_output(), [x = x.detach(), y, M, R, op](BackwardContext& ctx) {
    Tensor gx = Tensor::empty({M, R}, x.dtype());
    dispatch_floating(op, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T *px = x.data<T>(), *py = y.data<T>(), *pg = ctx.grad_output().template data<T>();
      T* out = gx.data<T>();
      parallel_for(M, rows_grain(R), [&](std::int64_t m0, std::int64_t m1) {
        for (std::int64_t m = m0; m < m1; ++m) {
          const T* row = px + m * R;
          std::int64_t ties = 0;
          for (std::int64_t j = 0; j < R; ++j) ties += attains(row[j], py[m]);
          const T share = ties > 0 ? pg[m] / static_cast<T>(ties) : T(0);
          for (std::int64_t j = 0; j < R; ++j) out[m * R + j] = attains(row[j], py[m]) ? share : T(0);
        }
      });
    });
    ctx.accumulate(0, std::move(gx));
  }, [x, y, M, R](GradGraphContext& ctx) {  // g times each element's constant share (1/ties or 0)
    Tensor share = Tensor::empty({M, R}, x.dtype());
    dispatch_floating("amax", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T *px = x.data<T>(), *py = y.data<T>();
      T* out = share.data<T>();
      for (std::int64_t m = 0; m < M; ++m) {
        std::int64_t ties = 0;
        for (std::int64_t j = 0; j < R; ++j) ties += attains(px[m * R + j], py[m]);
        for (std::int64_t j = 0; j < R; ++j) out[m * R + j] = attains(px[m * R + j], py[m]) ? T(1) / static_cast<T>(ties) : T(0);
      }
    });
    ctx.accumulate(0, reshape(ctx.grad_output(), Shape{M, 1}) * share);
  });
}

Tensor extreme(const char* op, const Tensor& x, IntList dims, bool keepdim, bool is_max) {
  const kernels::Axes ax = axes_or_all(op, dims, x.shape());
  require_nonempty(op, x, ax);
  const Rows r = to_rows(x, ax, keepdim);
  return reshape(extreme_rows(op, r.x, is_max), r.out);
}

/// Records y (M, k), the values of rows x (M, R) at `idx` (M, k): the gradient goes back to those places.
Tensor record_taken(const char* op, const Tensor& x, const Tensor& idx, Tensor y) {
  const std::int64_t M = x.size(0), R = x.size(1), K = idx.size(1);
  return record(op, std::move(y), {x}, Saves::none(), [idx, M, R, K, op](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    Tensor gx = Tensor::zeros({M, R}, g.dtype());
    dispatch_floating(op, g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* pg = g.template data<T>();
      const std::int64_t* pi = idx.data<std::int64_t>();
      T* out = gx.data<T>();
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t k = 0; k < K; ++k) out[m * R + pi[m * K + k]] += pg[m * K + k];
    });
    ctx.accumulate(0, std::move(gx));
  }, [idx, M, R](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    ctx.accumulate(0, scatter_add(Tensor::zeros({M, R}, g.dtype()), 1, idx, g));
  });
}

/// Values (M, k) picked from rows (M, R) at `idx` (M, k), differentiable in x.
Tensor take_rows(const char* op, const Tensor& x, const Tensor& idx) {
  const std::int64_t M = x.size(0), R = x.size(1), K = idx.size(1);
  Tensor y = Tensor::empty({M, K}, x.dtype());
  dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const std::int64_t* pi = idx.data<std::int64_t>();
    T* py = y.data<T>();
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t k = 0; k < K; ++k) py[m * K + k] = px[m * R + pi[m * K + k]];
  });
  return record_taken(op, x, idx, std::move(y));
}

/// Indices (M, k) ordering each row of (M, R): ascending or descending, stable, NaN largest.
Tensor order_rows(const char* op, const Tensor& x, std::int64_t k, bool descending) {
  const std::int64_t M = x.size(0), R = x.size(1);
  Tensor idx = Tensor::empty({M, k}, DType::i64);
  dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    std::int64_t* out = idx.data<std::int64_t>();
    parallel_for(M, rows_grain(R * 8), [&](std::int64_t m0, std::int64_t m1) {
      std::vector<std::int64_t> order(static_cast<std::size_t>(R));
      for (std::int64_t m = m0; m < m1; ++m) {
        const T* row = px + m * R;
        // a before b: NaN is the largest value; equal values keep their order (stable).
        auto less = [row](std::int64_t a, std::int64_t b) {
          const T u = row[a], v = row[b];
          if (v != v) return u == u;
          return u < v;
        };
        auto greater = [&less](std::int64_t a, std::int64_t b) { return less(b, a); };
        std::iota(order.begin(), order.end(), std::int64_t{0});
        if (descending) std::stable_sort(order.begin(), order.end(), greater);
        else std::stable_sort(order.begin(), order.end(), less);
        std::copy(order.begin(), order.begin() + k, out + m * k);
      }
    });
  });
  return idx;
}

}  // namespace

Tensor max(const Tensor& x) { return extreme("max", x, {}, false, true); }
Tensor min(const Tensor& x) { return extreme("min", x, {}, false, false); }
Tensor amax(const Tensor& x, IntList dims, bool keepdim) { return extreme("amax", x, dims, keepdim, true); }
Tensor amin(const Tensor& x, IntList dims, bool keepdim) { return extreme("amin", x, dims, keepdim, false); }

namespace {

/// x for a max, -x for a min: the max kernel finds both (its first index; NaN first).
Tensor signed_for(const Tensor& x, bool is_max) { return is_max ? x.detach() : kernels::unary(kernels::Unary::neg, x.detach()); }

/// dim of x as an axis, refused when out of range or of size 0, naming `op`.
int nonempty_axis(const char* op, const Tensor& x, std::int64_t dim) {
  const int a = normalize_axis(op, dim, x.dim());
  if (x.shape()[a] == 0)
    throw std::invalid_argument(std::string(op) + ": cannot reduce dim " + std::to_string(dim) + " of " + x.shape().str());
  return a;
}

std::tuple<Tensor, Tensor> extreme_along(const char* op, const Tensor& x, std::int64_t dim, bool keepdim, bool is_max) {
  const int a = nonempty_axis(op, x, dim);
  const AlongAxis r = along(x, a);
  Tensor idx;
  Tensor y = kernels::max(signed_for(r.rows, is_max), 1, true, &idx);  // (M, 1)
  if (!is_max) y = kernels::unary(kernels::Unary::neg, y);              // negation is exact
  // The rows are in the order of transpose(x, a, last), not of x's other dims: back through it.
  Shape kept = r.moved;
  kept[r.last] = 1;
  const AlongAxis one{Tensor(), kept, r.a, r.last};
  auto out = [&](const Tensor& t) { return keepdim ? one.back(t) : squeeze(one.back(t), a); };
  return {out(record_taken(op, r.rows, idx, std::move(y))), out(idx)};
}

Tensor arg_extreme(const char* op, const Tensor& x, std::int64_t dim, bool keepdim, bool is_max) {
  const int a = nonempty_axis(op, x, dim);
  Tensor idx;
  kernels::max(signed_for(x, is_max), a, keepdim, &idx);
  return idx;
}

}  // namespace

std::tuple<Tensor, Tensor> max(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extreme_along("max", x, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extreme_along("min", x, dim, keepdim, false);
}
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) { return arg_extreme("argmax", x, dim, keepdim, true); }
Tensor argmin(const Tensor& x, std::int64_t dim, bool keepdim) { return arg_extreme("argmin", x, dim, keepdim, false); }

namespace {
/// var over `dims`, its errors naming `op` (var, or std which is built on it).
Tensor variance(const char* op, const Tensor& x, IntList dims, Correction correction, bool keepdim) {
  const kernels::Axes ax = axes_or_all(op, dims, x.shape());
  require_nonempty(op, x, ax);
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string(op) + ": needs a floating tensor, got " + std::string(dtype_name(x.dtype())) +
                                " " + x.shape().str());
  std::int64_t all[Shape::kMaxDims];
  std::int64_t n = 1;
  for (int i = 0; i < ax.size(); ++i) all[i] = ax[i], n *= x.shape()[ax[i]];
  const IntList axes(all, static_cast<std::size_t>(ax.size()));
  const double divisor = static_cast<double>(std::max<std::int64_t>(0, n - correction.value));
  const Tensor centred = x - mean(x, axes, true);
  return mul(sum(centred * centred, axes, keepdim), 1.0 / divisor);
}

/// sqrt(v) with torch.std's gradient where v == 0: 0, not 0.5 / 0 = inf (times 0: NaN). The 1 put under
/// the root there keeps both branches of where finite, and the result stays composed of primitives.
Tensor std_of_var(const Tensor& v) {
  const Tensor zero = v == 0.0;
  return where(zero, Tensor::scalar(0.0, v.dtype()), sqrt(where(zero, Tensor::scalar(1.0, v.dtype()), v)));
}
}  // namespace

Tensor var(const Tensor& x, IntList dims, Correction correction, bool keepdim) {
  return variance("var", x, dims, correction, keepdim);
}
Tensor var(const Tensor& x, IntList dims, bool unbiased, bool keepdim) {
  return var(x, dims, Correction{unbiased ? 1 : 0}, keepdim);
}

Tensor std(const Tensor& x, IntList dims, Correction correction, bool keepdim) {
  return std_of_var(variance("std", x, dims, correction, keepdim));
}
Tensor std(const Tensor& x, IntList dims, bool unbiased, bool keepdim) {
  return std(x, dims, Correction{unbiased ? 1 : 0}, keepdim);
}

Tensor logsumexp(const Tensor& x, IntList dims, bool keepdim) {
  const kernels::Axes ax = axes_or_all("logsumexp", dims, x.shape());
  require_nonempty("logsumexp", x, ax);
  std::int64_t all[Shape::kMaxDims];
  for (int i = 0; i < ax.size(); ++i) all[i] = ax[i];
  const IntList axes(all, static_cast<std::size_t>(ax.size()));
  // Shifted by the (constant) max, with an infinite max replaced by 0 so that a row of -inf gives
  // -inf and one holding +inf gives +inf, as torch.logsumexp.
  Tensor m = amax(x.detach(), axes, true);
  dispatch_floating("logsumexp", m.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = m.data<T>();
    for (std::int64_t i = 0; i < m.numel(); ++i)
      if (!std::isfinite(p[i])) p[i] = T(0);
  });
  Tensor y = log(sum(exp(x - m), axes, true)) + m;
  return keepdim ? y : reshape(y, kernels::reduced_shape(x.shape(), ax, false));
}

namespace {

/// Product of each row of (M, R); the gradient of element j is g times the product of the others
/// (computed without dividing, so zeros are exact).
Tensor prod_rows(const Tensor& x) {
  const std::int64_t M = x.size(0), R = x.size(1);
  Tensor y = Tensor::empty({M}, x.dtype());
  dispatch_floating("prod", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (std::int64_t m = 0; m < M; ++m) {
      T p = T(1);
      for (std::int64_t j = 0; j < R; ++j) p *= px[m * R + j];
      py[m] = p;
    }
  });
  return record("prod", y, {x}, Saves::inputs(0), [x = x.detach(), M, R](BackwardContext& ctx) {
    Tensor gx = Tensor::empty({M, R}, x.dtype());
    dispatch_floating("prod", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T *px = x.data<T>(), *pg = ctx.grad_output().template data<T>();
      T* out = gx.data<T>();
      std::vector<T> suffix(static_cast<std::size_t>(R) + 1);
      for (std::int64_t m = 0; m < M; ++m) {
        const T* row = px + m * R;
        suffix[R] = T(1);
        for (std::int64_t j = R; j-- > 0;) suffix[j] = suffix[j + 1] * row[j];
        T prefix = T(1);
        for (std::int64_t j = 0; j < R; ++j) {
          out[m * R + j] = pg[m] * prefix * suffix[j + 1];
          prefix *= row[j];
        }
      }
    });
    ctx.accumulate(0, std::move(gx));
  }, [x](GradGraphContext& ctx) {  // g times the running products before and after each element: exact with zeros
    const std::int64_t R = x.size(1);
    if (R == 0) return ctx.accumulate(0, Tensor::zeros(x.shape(), x.dtype()));
    const Tensor before = cumprod(pad(narrow(x, 1, 0, R - 1), {1, 0}, 1.0), 1);
    const Tensor after = flip(cumprod(pad(flip(narrow(x, 1, 1, R - 1), {1}), {1, 0}, 1.0), 1), {1});
    ctx.accumulate(0, unsqueeze(ctx.grad_output(), 1) * (before * after));
  });
}

}  // namespace

Tensor prod(const Tensor& x) { return reshape(prod_rows(reshape(x, Shape{1, x.numel()})), Shape{}); }

Tensor prod(const Tensor& x, std::int64_t dim, bool keepdim) {
  const Rows r = to_rows(x, normalize_axes("prod", {dim}, x.shape()), keepdim);
  return reshape(prod_rows(r.x), r.out);
}

Tensor norm(const Tensor& x, double p, IntList dims, bool keepdim) {
  if (!(p > 0)) throw std::invalid_argument("norm: p must be > 0 or inf, got " + std::to_string(p));
  const Rows r = to_rows(x, axes_or_all("norm", dims, x.shape()), keepdim);
  const std::int64_t M = r.M, R = r.R;
  const bool inf = p == kInf;
  Tensor y = Tensor::empty({M}, x.dtype());
  dispatch_floating("norm", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = r.x.template data<T>();
    T* py = y.data<T>();
    parallel_for(M, rows_grain(R), [&](std::int64_t m0, std::int64_t m1) {
      for (std::int64_t m = m0; m < m1; ++m) {
        double acc = 0;
        for (std::int64_t j = 0; j < R; ++j) {
          const double v = std::abs(static_cast<double>(px[m * R + j]));
          acc = inf ? (v > acc || v != v ? v : acc) : acc + (p == 2.0 ? v * v : p == 1.0 ? v : std::pow(v, p));
        }
        py[m] = static_cast<T>(inf || p == 1.0 ? acc : p == 2.0 ? std::sqrt(acc) : std::pow(acc, 1.0 / p));
      }
    });
  });
  Tensor out = record("norm", y, {r.x}, Saves::inputs(0).and_output(), [x = r.x.detach(), y, p, inf, M, R](BackwardContext& ctx) {
    // d|x|_p / dx = sign(x) |x|^(p-1) / |x|_p^(p-1); 0 where the norm or x is 0. For p = inf, sign(x)
    // shared evenly among the elements whose |x| is the max, as torch.norm.
    Tensor gx = Tensor::empty({M, R}, x.dtype());
    dispatch_floating("norm", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T *px = x.data<T>(), *py = y.data<T>(), *pg = ctx.grad_output().template data<T>();
      T* out = gx.data<T>();
      for (std::int64_t m = 0; m < M; ++m) {
        const double n = py[m], scale = n == 0 ? 0.0 : pg[m] / std::pow(n, p - 1);
        if (inf) {
          std::int64_t ties = 0;
          for (std::int64_t j = 0; j < R; ++j) ties += std::abs(static_cast<double>(px[m * R + j])) == n;
          for (std::int64_t j = 0; j < R; ++j) {
            const double v = px[m * R + j], s = (v > 0) - (v < 0);
            out[m * R + j] = static_cast<T>(n != 0 && std::abs(v) == n ? pg[m] * s / static_cast<double>(ties) : 0.0);
          }
          continue;
        }
        for (std::int64_t j = 0; j < R; ++j) {
          const double v = px[m * R + j], s = (v > 0) - (v < 0);
          // A zero element adds 0 (for p < 1 its |x|^(p-1) is inf), as PyTorch's norm_backward.
          out[m * R + j] = static_cast<T>(p == 1.0 ? pg[m] * s : v == 0 ? 0.0 : scale * s * std::pow(std::abs(v), p - 1));
        }
      }
    });
    ctx.accumulate(0, std::move(gx));
  }, [x = r.x, p, inf](GradGraphContext& ctx) {  // the composed norm, differentiated
    const Tensor a = abs(x);
    Tensor composed;
    if (inf) composed = amax(a, {1});
    else if (p == 1.0) composed = sum(a, {1});
    else if (p == 2.0) composed = sqrt(sum(x * x, {1}));
    else composed = pow(sum(pow(a, p), {1}), 1.0 / p);
    ctx.backward_through(composed);
  });
  return reshape(out, r.out);
}

namespace {

/// Whether any element of the floating tensor x is zero.
bool any_zero(const Tensor& x) {
  bool found = false;
  dispatch_floating("cumprod", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    found = std::any_of(p, p + x.numel(), [](T v) { return v == T(0); });
  });
  return found;
}

/// Running sums / products along each row of (M, R).
Tensor cumulative_rows(const char* op, const Tensor& x, bool product) {
  const std::int64_t M = x.size(0), R = x.size(1);
  Tensor y = Tensor::empty({M, R}, x.dtype());
  dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(M, rows_grain(R), [&](std::int64_t m0, std::int64_t m1) {
      for (std::int64_t m = m0; m < m1; ++m) {
        // Accumulated in double, as torch's CPU kernel for float: a float running sum drifts on long rows.
        double acc = product ? 1.0 : 0.0;
        for (std::int64_t j = 0; j < R; ++j) {
          acc = product ? acc * px[m * R + j] : acc + px[m * R + j];
          py[m * R + j] = static_cast<T>(acc);
        }
      }
    });
  });
  // A running sum's backward needs only the shape; a product's reads x.
  return record(op, y, {x}, product ? Saves::inputs(0) : Saves::none(), [x = x.detach(), M, R, op, product](BackwardContext& ctx) {
    Tensor gx = Tensor::empty({M, R}, x.dtype());
    dispatch_floating(op, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T *px = x.data<T>(), *pg = ctx.grad_output().template data<T>();
      T* out = gx.data<T>();
      for (std::int64_t m = 0; m < M; ++m) {
        const T *g = pg + m * R, *row = px + m * R;
        T* o = out + m * R;
        if (!product) {  // dx_i = sum_{j >= i} g_j, accumulated in double as the forward
          double acc = 0.0;
          for (std::int64_t j = R; j-- > 0;) o[j] = static_cast<T>(acc += g[j]);
          continue;
        }
        // dx_i = sum_{j >= i} g_j prod_{k <= j, k != i} x_k. Without zeros that is
        // (sum_{j >= i} g_j y_j) / x_i; with one, each i walks j upwards keeping
        // prod_{k < i} x_k times prod_{i < k <= j} x_k, which never divides.
        if (std::none_of(row, row + R, [](T v) { return v == T(0); })) {
          T acc = T(0), y = T(1);
          std::vector<T> ys(static_cast<std::size_t>(R));
          for (std::int64_t j = 0; j < R; ++j) ys[j] = y *= row[j];
          for (std::int64_t j = R; j-- > 0;) {
            acc += g[j] * ys[j];
            o[j] = acc / row[j];
          }
          continue;
        }
        T prefix = T(1);
        for (std::int64_t i = 0; i < R; ++i) {
          T term = prefix, acc = T(0);
          for (std::int64_t j = i; j < R; ++j) {
            if (j > i) term *= row[j];
            acc += g[j] * term;
          }
          o[i] = acc;
          prefix *= row[i];
        }
      }
    });
    ctx.accumulate(0, std::move(gx));
  }, [x, product](GradGraphContext& ctx) {
    const Tensor& g = ctx.grad_output();
    if (!product) return ctx.accumulate(0, flip(cumsum(flip(g, {1}), 1), {1}));  // sums from the end
    const std::int64_t R = x.size(1);
    if (!any_zero(x)) {  // (sum_{j >= i} g_j y_j) / x_i with y recomputed: exact while no element is 0
      ctx.accumulate(0, flip(cumsum(flip(g * cumprod(x, 1), {1}), 1), {1}) / x);
      return;
    }
    // With zeros, no division: row i of c holds the running products of x with x_i set to 1,
    // c[m, i, j] = prod_{k <= j, k != i} x[m, k], so dx_i = sum_{j >= i} g_j c[m, i, j]. A polynomial
    // in x (its derivatives are exact too), at R times the memory of x.
    const Tensor I = eye(R, R, x.dtype());
    const Tensor c = cumprod(unsqueeze(x, 1) * (1.0 - I) + I, 2);
    ctx.accumulate(0, sum(c * unsqueeze(g, 1) * triu(ones({R, R}, x.dtype())), {2}));
  });
}

}  // namespace

namespace {

Tensor cumulative(const char* op, const Tensor& x, std::int64_t dim, bool product) {
  if (x.dim() == 0) {  // a 0-dim tensor is its own running sum, as in PyTorch (dim 0 or -1)
    normalize_axis(op, dim, 1);
    return reshape(cumulative(op, reshape(x, Shape{1}), 0, product), Shape{});
  }
  const AlongAxis r = along(x, normalize_axis(op, dim, x.dim()));
  return r.back(cumulative_rows(op, r.rows, product));
}

}  // namespace

Tensor cumsum(const Tensor& x, std::int64_t dim) { return cumulative("cumsum", x, dim, false); }
Tensor cumprod(const Tensor& x, std::int64_t dim) { return cumulative("cumprod", x, dim, true); }

namespace {
/// topk for `op` (topk, or sort taking every element), whose name its errors carry.
std::tuple<Tensor, Tensor> top_k(const char* op, const Tensor& x, std::int64_t k, std::int64_t dim, bool largest) {
  const int a = normalize_axis(op, dim, std::max(x.dim(), 1));
  const Tensor x1 = x.dim() == 0 ? reshape(x, Shape{1}) : x;
  if (k < 0 || k > x1.shape()[a])
    throw std::invalid_argument(std::string(op) + ": k = " + std::to_string(k) + " is outside [0, " +
                                std::to_string(x1.shape()[a]) + "] for dim " + std::to_string(dim) + " of " + x.shape().str());
  const AlongAxis r = along(x1, a);
  const Tensor idx = order_rows(op, r.rows.detach(), k, largest);
  Shape moved = r.moved;
  moved[moved.size() - 1] = k;
  const AlongAxis shape_k{Tensor(), moved, r.a, r.last};
  Tensor values = shape_k.back(take_rows(op, r.rows, idx));
  Tensor indices = shape_k.back(idx);
  if (x.dim() == 0) return {reshape(values, Shape{}), reshape(indices, Shape{})};
  return {values, indices};
}
}  // namespace

std::tuple<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, std::int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // the k are always returned in order, which `sorted = false` allows too
  return top_k("topk", x, k, dim, largest);
}

std::tuple<Tensor, Tensor> sort(const Tensor& x, std::int64_t dim, bool descending) {
  const int a = normalize_axis("sort", dim, std::max(x.dim(), 1));
  return top_k("sort", x, x.dim() == 0 ? 1 : x.shape()[a], dim, descending);
}

Tensor argsort(const Tensor& x, std::int64_t dim, bool descending) { return std::get<1>(sort(x.detach(), dim, descending)); }

}  // namespace tg
