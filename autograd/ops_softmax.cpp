// Softmax family and cross-entropy. Forward and backward are fused row kernels over an
// (outer, R, inner) view of the input: numerically stable (the row max is subtracted), xsimd over
// contiguous rows (inner == 1), TBB across rows only. A row is never split between threads and
// its arithmetic does not depend on where chunks start, so results are bitwise independent of
// the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/kernels/reduce.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
#include "autograd/tape.h"

namespace tg {

namespace {

template <class T> using Batch = xsimd::batch<T>;

// ---- argument checks -------------------------------------------------------------------------

void check_input(const char* op, const char* what, const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument(std::string(op) + ": " + what + " is undefined");
  if (!is_floating(x.dtype()))
    throw std::invalid_argument(std::string(op) + ": expects a floating-point " + what + ", got " +
                                std::string(dtype_name(x.dtype())) + " of shape " + x.shape().str());
}

// Wraps `axis`; a 0-dim tensor is treated as one element along axis 0 / -1 (as torch).
int softmax_axis(const char* op, std::int64_t axis, const Tensor& x) {
  const int ndim = std::max(x.dim(), 1);
  const std::int64_t wrapped = axis < 0 ? axis + ndim : axis;
  if (wrapped < 0 || wrapped >= ndim)
    throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(axis) +
                                " is out of range for input of shape " + x.shape().str());
  return static_cast<int>(wrapped);
}

struct RowView {
  std::int64_t outer = 1, R = 1, inner = 1;
};

RowView row_view(const Shape& s, int axis) {
  RowView v;
  for (int i = 0; i < s.size(); ++i) (i < axis ? v.outer : i == axis ? v.R : v.inner) *= s[i];
  return v;
}

// Rows per TBB chunk so that a chunk holds about `grain_elems` elements (tiny tensors stay serial).
std::int64_t row_grain(std::int64_t grain_elems, std::int64_t row_elems) {
  return std::max<std::int64_t>(1, grain_elems / std::max<std::int64_t>(1, row_elems));
}

// ---- contiguous row primitives (inner == 1) --------------------------------------------------
// The tail of a row goes through the same SIMD code via a padded buffer, so every element of a
// row is computed the same way.

// Returns sum_i exp(x[i] - m); with Store, also writes the terms to y (y may alias x).
template <bool Store, class T>
T exp_shift_sum(const T* x, T* y, std::int64_t n, T m) {
  constexpr std::int64_t W = Batch<T>::size;
  const Batch<T> M(m);
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
    const Batch<T> e = xsimd::exp(Batch<T>::load_unaligned(x + i) - M);
    if constexpr (Store) e.store_unaligned(y + i);
    acc += e;
  }
  T s = xsimd::hadd(acc);
  if (i < n) {
    alignas(64) T buf[W];
    std::fill(buf, buf + W, m);
    std::copy(x + i, x + n, buf);
    xsimd::exp(Batch<T>::load_aligned(buf) - M).store_aligned(buf);
    for (std::int64_t k = 0; k < n - i; ++k) {
      if constexpr (Store) y[i + k] = buf[k];
      s += buf[k];
    }
  }
  return s;
}

template <class T>
T row_sum(const T* x, std::int64_t n) {
  constexpr std::int64_t W = Batch<T>::size;
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + W <= n; i += W) acc += Batch<T>::load_unaligned(x + i);
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += x[i];
  return s;
}

template <class T>
T row_dot(const T* a, const T* b, std::int64_t n) {
  constexpr std::int64_t W = Batch<T>::size;
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + W <= n; i += W) acc += Batch<T>::load_unaligned(a + i) * Batch<T>::load_unaligned(b + i);
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y[i] = f(a[i], b[i]) with f on batches; the tail through a zero-padded batch.
template <class T, class F>
void row_map2(const T* a, const T* b, T* y, std::int64_t n, const F& f) {
  constexpr std::int64_t W = Batch<T>::size;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) f(Batch<T>::load_unaligned(a + i), Batch<T>::load_unaligned(b + i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) T ba[W] = {}, bb[W] = {};
    std::copy(a + i, a + n, ba);
    std::copy(b + i, b + n, bb);
    f(Batch<T>::load_aligned(ba), Batch<T>::load_aligned(bb)).store_aligned(ba);
    std::copy(ba, ba + (n - i), y + i);
  }
}

// One contiguous row: y = softmax(x) or log_softmax(x). y may alias x (softmax only).
template <class T>
void softmax_row(const T* x, T* y, std::int64_t n, bool log) {
  const T m = kernels::max_contiguous(x, n);
  if (log) {
    const T lse = m + std::log(exp_shift_sum<false>(x, y, n, m));
    for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] - lse;
  } else {
    const T inv = T(1) / exp_shift_sum<true>(x, y, n, m);
    for (std::int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// One contiguous row of the backward, given the output y:
//   softmax:     gx = y * (g - sum(g * y))
//   log_softmax: gx = g - exp(y) * sum(g)
template <class T>
void softmax_backward_row(const T* g, const T* y, T* gx, std::int64_t n, bool log) {
  if (log) {
    const Batch<T> S(row_sum(g, n));
    row_map2(g, y, gx, n, [S](Batch<T> gv, Batch<T> yv) { return gv - xsimd::exp(yv) * S; });
  } else {
    const T dot = row_dot(g, y, n);
    for (std::int64_t i = 0; i < n; ++i) gx[i] = y[i] * (g[i] - dot);
  }
}

// ---- strided rows (inner > 1): columns of a (R, inner) block, in fixed blocks of kCols ------

constexpr std::int64_t kCols = 64;

template <class T>
void softmax_forward(const T* x, T* y, const RowView& v, bool log) {
  const std::int64_t R = v.R, inner = v.inner;
  if (inner == 1) {
    kernels::parallel_for(v.outer, row_grain(kernels::kGrainTranscendental, R), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o) softmax_row(x + o * R, y + o * R, R, log);
    });
    return;
  }
  const std::int64_t blocks = (inner + kCols - 1) / kCols;
  kernels::parallel_for(v.outer * blocks, row_grain(kernels::kGrainTranscendental, R * kCols),
                        [&](std::int64_t b, std::int64_t e) {
    T m[kCols], s[kCols];
    for (std::int64_t u = b; u < e; ++u) {
      const std::int64_t o = u / blocks, j0 = (u % blocks) * kCols, nj = std::min(kCols, inner - j0);
      const T* xb = x + o * R * inner + j0;
      T* yb = y + o * R * inner + j0;
      std::fill(m, m + nj, -std::numeric_limits<T>::infinity());
      std::fill(s, s + nj, T(0));
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t j = 0; j < nj; ++j) m[j] = std::max(m[j], xb[r * inner + j]);
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t j = 0; j < nj; ++j) {
          const T ev = std::exp(xb[r * inner + j] - m[j]);
          if (!log) yb[r * inner + j] = ev;
          s[j] += ev;
        }
      if (log) {
        for (std::int64_t j = 0; j < nj; ++j) m[j] += std::log(s[j]);
        for (std::int64_t r = 0; r < R; ++r)
          for (std::int64_t j = 0; j < nj; ++j) yb[r * inner + j] = xb[r * inner + j] - m[j];
      } else {
        for (std::int64_t j = 0; j < nj; ++j) s[j] = T(1) / s[j];
        for (std::int64_t r = 0; r < R; ++r)
          for (std::int64_t j = 0; j < nj; ++j) yb[r * inner + j] *= s[j];
      }
    }
  });
}

template <class T>
void softmax_backward(const T* g, const T* y, T* gx, const RowView& v, bool log) {
  const std::int64_t R = v.R, inner = v.inner;
  // Softmax's backward is cheap arithmetic; log_softmax's has an exp per element.
  const std::int64_t grain = log ? kernels::kGrainTranscendental : kernels::kGrainCheap;
  if (inner == 1) {
    kernels::parallel_for(v.outer, row_grain(grain, R), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o) softmax_backward_row(g + o * R, y + o * R, gx + o * R, R, log);
    });
    return;
  }
  const std::int64_t blocks = (inner + kCols - 1) / kCols;
  kernels::parallel_for(v.outer * blocks, row_grain(grain, R * kCols), [&](std::int64_t b, std::int64_t e) {
    T s[kCols];
    for (std::int64_t u = b; u < e; ++u) {
      const std::int64_t o = u / blocks, j0 = (u % blocks) * kCols, nj = std::min(kCols, inner - j0);
      const std::int64_t off = o * R * inner + j0;
      const T *gb = g + off, *yb = y + off;
      T* gxb = gx + off;
      std::fill(s, s + nj, T(0));
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t j = 0; j < nj; ++j) s[j] += log ? gb[r * inner + j] : gb[r * inner + j] * yb[r * inner + j];
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t j = 0; j < nj; ++j) {
          const std::int64_t k = r * inner + j;
          gxb[k] = log ? gb[k] - std::exp(yb[k]) * s[j] : yb[k] * (gb[k] - s[j]);
        }
    }
  });
}

Tensor softmax_impl(const char* op, const Tensor& x, std::int64_t axis, bool log) {
  check_input(op, "input", x);
  const RowView v = row_view(x.shape(), softmax_axis(op, axis, x));
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  kernels::dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    softmax_forward(x.data<T>(), y.data<T>(), v, log);
  });
  return record(op, y, {x}, Saves::output(), [y = y.detach(), v, log, op](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    Tensor gx = Tensor::empty(y.shape(), y.dtype());
    kernels::dispatch_floating(op, y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      softmax_backward(g.data<T>(), y.data<T>(), gx.data<T>(), v, log);
    });
    ctx.accumulate(0, std::move(gx));
  }, [y, log, a = softmax_axis(op, axis, x)](GradGraphContext& ctx) {  // in terms of the output: x is not kept
    const Tensor yo = ctx.output(y);
    const Tensor& g = ctx.grad_output();
    const std::int64_t dims[1] = {a};
    if (log) ctx.accumulate(0, g - exp(yo) * sum(g, IntList(dims, 1), true));
    else ctx.accumulate(0, yo * (g - sum(g * yo, IntList(dims, 1), true)));
  });
}

// ---- masked softmax --------------------------------------------------------------------------

constexpr double kMaskValue = -1e6;  // d2l's finite fill value: a fully masked row is uniform

// One clamped length per row of `scores` viewed as (rows, K).
PooledVector<std::int64_t> row_lengths(const Tensor& scores, const Tensor& valid_lens) {
  const char* op = "masked_softmax";
  const Shape& s = scores.shape();
  const std::int64_t K = s.back();
  const std::int64_t rows = K == 0 ? 0 : scores.numel() / K;
  Shape per_row = s;
  per_row.erase(s.size() - 1);
  const bool row_wise = valid_lens.shape() == per_row;
  const bool batch_wise = !row_wise && s.size() >= 2 && valid_lens.dim() == 1 && valid_lens.shape()[0] == s[0];
  if (!row_wise && !batch_wise) {
    std::string expected = per_row.str();
    if (s.size() >= 2 && !(Shape{s[0]} == per_row)) expected = Shape{s[0]}.str() + " or " + expected;
    throw std::invalid_argument(std::string(op) + ": valid_lens of shape " + valid_lens.shape().str() +
                                " does not match scores of shape " + s.str() + " (expected " + expected + ")");
  }
  const std::int64_t* lens = valid_lens.data<std::int64_t>();
  const std::int64_t per_len = row_wise ? 1 : (s[0] == 0 ? 1 : rows / s[0]);  // rows sharing a length
  PooledVector<std::int64_t> out(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t L = lens[r / per_len];
    if (L < 0)
      throw std::invalid_argument(std::string(op) + ": valid length " + std::to_string(L) +
                                  " is negative (valid_lens of shape " + valid_lens.shape().str() +
                                  ", scores of shape " + s.str() + ")");
    out[r] = std::min(L, K);
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t axis) { return softmax_impl("softmax", x, axis, false); }

Tensor log_softmax(const Tensor& x, std::int64_t axis) { return softmax_impl("log_softmax", x, axis, true); }

Tensor masked_softmax(const Tensor& scores, const Tensor& valid_lens) {
  const char* op = "masked_softmax";
  if (!valid_lens.defined()) return softmax(scores, -1);
  check_input(op, "scores", scores);
  if (scores.dim() < 1)
    throw std::invalid_argument(std::string(op) + ": scores must have at least one dimension, got shape " +
                                scores.shape().str());
  if (valid_lens.dtype() != DType::i64)
    throw std::invalid_argument(std::string(op) + ": valid_lens must be i64, got " +
                                std::string(dtype_name(valid_lens.dtype())) + " of shape " +
                                valid_lens.shape().str() + " (scores of shape " + scores.shape().str() + ")");
  PooledVector<std::int64_t> lens = row_lengths(scores, valid_lens);
  const std::int64_t K = scores.shape().back();
  const auto rows = static_cast<std::int64_t>(lens.size());
  Tensor y = Tensor::empty(scores.shape(), scores.dtype());
  kernels::dispatch_floating(op, scores.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = scores.data<T>();
    T* py = y.data<T>();
    kernels::parallel_for(rows, row_grain(kernels::kGrainTranscendental, K), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const std::int64_t L = lens[r];
        T* yr = py + r * K;
        std::copy(x + r * K, x + r * K + L, yr);
        std::fill(yr + L, yr + K, static_cast<T>(kMaskValue));
        softmax_row(yr, yr, K, false);
      }
    });
  });
  return record(op, y, {scores}, Saves::output(), [y = y.detach(), lens = std::move(lens), K, op](BackwardContext& ctx) {
    const Tensor& g = ctx.grad_output();
    Tensor gx = Tensor::empty(y.shape(), y.dtype());
    kernels::dispatch_floating(op, y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T *pg = g.data<T>(), *py = y.data<T>();
      T* pgx = gx.data<T>();
      kernels::parallel_for(static_cast<std::int64_t>(lens.size()), row_grain(kernels::kGrainCheap, K),
                            [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t r = b; r < e; ++r) {
          softmax_backward_row(pg + r * K, py + r * K, pgx + r * K, K, false);
          std::fill(pgx + r * K + lens[r], pgx + (r + 1) * K, T(0));  // masked: replaced by a constant
        }
      });
    });
    ctx.accumulate(0, std::move(gx));
  }, [y, valid_lens, K](GradGraphContext& ctx) {  // softmax's, then zero where masked
    const PooledVector<std::int64_t> lens = row_lengths(y, valid_lens);
    Tensor keep = Tensor::zeros(y.shape(), y.dtype());
    kernels::dispatch_floating("masked_softmax", y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* pk = keep.data<T>();
      for (std::size_t r = 0; r < lens.size(); ++r) std::fill(pk + r * K, pk + r * K + lens[r], T(1));
    });
    const Tensor yo = ctx.output(y);
    const Tensor& g = ctx.grad_output();
    ctx.accumulate(0, yo * (g - sum(g * yo, {-1}, true)) * keep);
  });
}

/// cross_entropy's backwards. One object for both, so the graph one reads the saved logits without
/// a second handle on them (the kernel one overwrites them in place when it holds the only one).
struct CrossEntropyBackward {
  Tensor x, targets, lse;
  std::int64_t count, ignore_index, N, C;
  const char* op;

  void operator()(BackwardContext& ctx) {
    // The logits are read only here. When this closure holds the last reference to them (the
    // usual case: a loss over freshly computed logits), the gradient overwrites them in place,
    // so the backward needs no second (N, C) buffer (151 MiB for workload C's 30000 words).
    const bool in_place = !ctx.retain_graph() && x.impl_ptr().use_count() == 1 && x.impl()->storage.use_count() == 1;
    const Shape shape = x.shape();
    const DType dtype = x.dtype();
    Tensor gx = in_place ? x : Tensor::empty(shape, dtype);
    kernels::dispatch_floating(op, dtype, [&](auto tag) {
      using T = decltype(tag);
      const T scale = count > 0 ? static_cast<T>(ctx.grad_output().item() / static_cast<double>(count)) : T(0);
      const T *px = x.data<T>(), *plse = lse.data<T>();
      const std::int64_t* t = targets.data<std::int64_t>();
      T* pgx = gx.data<T>();
      kernels::parallel_for(N, row_grain(kernels::kGrainTranscendental, C), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t n = b; n < e; ++n) {
          T* gr = pgx + n * C;
          if (t[n] == ignore_index) {
            std::fill(gr, gr + C, T(0));
            continue;
          }
          // (softmax - onehot) * g / count, softmax = exp(x - lse); gr may be x's own row
          const Batch<T> L(plse[n]), S(scale);
          row_map2(px + n * C, px + n * C, gr, C, [L, S](Batch<T> xv, Batch<T>) { return xsimd::exp(xv - L) * S; });
          gr[t[n]] -= scale;
        }
      });
    });
    if (in_place) x = Tensor();  // gx is now the only handle on the buffer
    ctx.accumulate(0, std::move(gx));
  }

  /// (softmax(x) - onehot(target)) g / count on the kept rows, in differentiable ops.
  void graph(GradGraphContext& ctx) {
    const Tensor xg = reshape(ctx.input(0, x), Shape{N, C});
    Tensor onehot = Tensor::zeros(Shape{N, C}, x.dtype());
    Tensor keep = Tensor::zeros(Shape{N, 1}, x.dtype());
    const std::int64_t* t = targets.data<std::int64_t>();
    kernels::dispatch_floating(op, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T *po = onehot.data<T>(), *pk = keep.data<T>();
      for (std::int64_t n = 0; n < N; ++n)
        if (t[n] != ignore_index) po[n * C + t[n]] = T(1), pk[n] = T(1);
    });
    const double inv = count > 0 ? 1.0 / static_cast<double>(count) : 0.0;
    const Tensor gx = (softmax(xg, -1) - onehot) * keep * (ctx.grad_output() * inv);
    ctx.accumulate(0, reshape(gx, x.shape()));
  }
};

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index) {
  const char* op = "cross_entropy";
  check_input(op, "logits", logits);
  if (!targets.defined()) throw std::invalid_argument(std::string(op) + ": targets are undefined");
  if (logits.dim() < 1)
    throw std::invalid_argument(std::string(op) + ": logits must have a class axis, got shape " + logits.shape().str());
  Shape expected = logits.shape();
  expected.erase(expected.size() - 1);
  if (targets.dtype() != DType::i64 || !(targets.shape() == expected))
    throw std::invalid_argument(std::string(op) + ": targets (" + std::string(dtype_name(targets.dtype())) +
                                ", shape " + targets.shape().str() + ") do not match logits of shape " +
                                logits.shape().str() + " (expected i64 of shape " + expected.str() + ")");
  const std::int64_t C = logits.shape().back();
  const std::int64_t N = targets.numel();
  const std::int64_t* t = targets.data<std::int64_t>();
  std::int64_t count = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    if (t[n] == ignore_index) continue;
    if (t[n] < 0 || t[n] >= C)
      throw std::invalid_argument(std::string(op) + ": target " + std::to_string(t[n]) + " at position " +
                                  std::to_string(n) + " is outside [0, " + std::to_string(C) + ") for logits of shape " +
                                  logits.shape().str() + " (ignore_index " + std::to_string(ignore_index) + ")");
    ++count;
  }

  // Per row: log-sum-exp (kept for the backward) and the row's loss; summed in row order.
  Tensor lse = Tensor::empty(Shape{N}, logits.dtype());
  double total = 0;
  kernels::dispatch_floating(op, logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    T* plse = lse.data<T>();
    PooledVector<T> row_loss(static_cast<std::size_t>(N));
    kernels::parallel_for(N, row_grain(kernels::kGrainTranscendental, C), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t n = b; n < e; ++n) {
        if (t[n] == ignore_index) {
          plse[n] = T(0);
          row_loss[n] = T(0);
          continue;
        }
        const T* xr = x + n * C;
        const T m = kernels::max_contiguous(xr, C);
        plse[n] = m + std::log(exp_shift_sum<false>(xr, static_cast<T*>(nullptr), C, m));
        row_loss[n] = plse[n] - xr[t[n]];
      }
    });
    for (std::int64_t n = 0; n < N; ++n) total += row_loss[n];
  });
  const double loss = count > 0 ? total / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();

  return record(op, Tensor::scalar(loss, logits.dtype()), {logits}, Saves::inputs(0),
                CrossEntropyBackward{logits.detach(), targets.detach(), lse, count, ignore_index, N, C, op});
}

namespace kernels {

namespace {

// The row's maximum from kernels::max_contiguous (as softmax), exp in T's own precision (8 float lanes: float32
// logits need no more, and double exp cost a quarter of a batch-64 decoding step), the lane sums
// added in double. With `argmax`, also the first index of the maximum (greedy decoding wants both
// from one read of the row).
template <class T>
double log_sum_exp_row(const T* x, std::int64_t n, std::int64_t* argmax) {
  if (argmax) *argmax = 0;
  if (n <= 0) return -std::numeric_limits<double>::infinity();
  constexpr std::int64_t W = Batch<T>::size;
  T m = kernels::max_contiguous(x, n);
  if (argmax) *argmax = std::find(x, x + n, m) - x;
  if (argmax && *argmax == n) *argmax = 0;
  if (!std::isfinite(m)) m = T(0);  // all -inf gives -inf; +inf or nan propagate through the sum
  const Batch<T> M(m);
  Batch<T> acc(T(0));
  std::int64_t i = 0;
  for (; i + W <= n; i += W) acc += xsimd::exp(Batch<T>::load_unaligned(x + i) - M);
  alignas(64) T lanes[W];
  acc.store_aligned(lanes);
  double s = 0.0;
  for (std::int64_t k = 0; k < W; ++k) s += static_cast<double>(lanes[k]);
  for (; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - static_cast<double>(m));
  return static_cast<double>(m) + std::log(s);
}

}  // namespace

double log_sum_exp(const float* x, std::int64_t n, std::int64_t* argmax) { return log_sum_exp_row(x, n, argmax); }
double log_sum_exp(const double* x, std::int64_t n, std::int64_t* argmax) { return log_sum_exp_row(x, n, argmax); }

float exp_shift_sum(const float* x, float* y, std::int64_t n, float m) {
  return y ? tg::exp_shift_sum<true>(x, y, n, m) : tg::exp_shift_sum<false>(x, y, n, m);
}
double exp_shift_sum(const double* x, double* y, std::int64_t n, double m) {
  return y ? tg::exp_shift_sum<true>(x, y, n, m) : tg::exp_shift_sum<false>(x, y, n, m);
}

}  // namespace kernels

double log_sum_exp_row(const float* x, std::int64_t n, std::int64_t* argmax) {
  return kernels::log_sum_exp(x, n, argmax);
}
double log_sum_exp_row(const double* x, std::int64_t n, std::int64_t* argmax) {
  return kernels::log_sum_exp(x, n, argmax);
}

}  // namespace tg
