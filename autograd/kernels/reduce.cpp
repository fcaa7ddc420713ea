#include "autograd/kernels/reduce.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <xsimd/xsimd.hpp>

#include "autograd/kernels/dispatch.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/memory.h"

namespace tg::kernels {

namespace {

template <class T> using Batch = xsimd::batch<T>;

template <class T>
T sum_row(const T* x, std::int64_t n) {
  constexpr std::int64_t W = Batch<T>::size;
  Batch<T> a0(T(0)), a1(T(0)), a2(T(0)), a3(T(0));
  std::int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    a0 += Batch<T>::load_unaligned(x + i);
    a1 += Batch<T>::load_unaligned(x + i + W);
    a2 += Batch<T>::load_unaligned(x + i + 2 * W);
    a3 += Batch<T>::load_unaligned(x + i + 3 * W);
  }
  for (; i + W <= n; i += W) a0 += Batch<T>::load_unaligned(x + i);
  T s = xsimd::hadd((a0 + a1) + (a2 + a3));
  for (; i < n; ++i) s += x[i];
  return s;
}

// out[0:n] += x[0:n]
template <class T>
void add_row(T* out, const T* x, std::int64_t n) {
  constexpr std::int64_t W = Batch<T>::size;
  std::int64_t j = 0;
  for (; j + W <= n; j += W) (Batch<T>::load_unaligned(out + j) + Batch<T>::load_unaligned(x + j)).store_unaligned(out + j);
  for (; j < n; ++j) out[j] += x[j];
}

// Index of the first maximum of x[0:n] (the first NaN if there is one): a SIMD max, then a scan.
template <class T>
std::int64_t argmax_contiguous(const T* x, std::int64_t n) {
  constexpr std::int64_t W = Batch<T>::size;
  T best = x[0];
  std::int64_t j = 0;
  if (n >= W) {
    Batch<T> m = Batch<T>::load_unaligned(x);
    auto nan = m != m;
    for (j = W; j + W <= n; j += W) {
      const Batch<T> v = Batch<T>::load_unaligned(x + j);
      m = xsimd::max(m, v);
      nan = nan | (v != v);
    }
    if (xsimd::any(nan)) {
      for (std::int64_t i = 0; i < n; ++i)
        if (x[i] != x[i]) return i;
    }
    alignas(64) T lanes[W];
    m.store_aligned(lanes);
    for (std::int64_t l = 0; l < W; ++l) best = std::max(best, lanes[l]);
  }
  for (; j < n; ++j) {
    if (x[j] != x[j]) return j;
    best = std::max(best, x[j]);
  }
  for (std::int64_t i = 0; i < n; ++i)
    if (x[i] == best) return i;
  return 0;
}

// Fixed block size for splitting one long row: independent of the thread count.
constexpr std::int64_t kSumBlock = 1 << 15;
// Fewer (outer, column chunk) tasks than this and a reduction over rows splits its rows instead.
constexpr std::int64_t kMinRowSplitTasks = 4;

template <class T>
void sum_outer_r_inner(const T* x, T* y, std::int64_t outer, std::int64_t R, std::int64_t inner) {
  if (inner == 1) {
    if (outer == 1 && R > kSumBlock) {
      const std::int64_t blocks = (R + kSumBlock - 1) / kSumBlock;
      PooledVector<T> partial(static_cast<std::size_t>(blocks));
      parallel_for(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b)
          partial[b] = sum_row(x + b * kSumBlock, std::min(kSumBlock, R - b * kSumBlock));
      });
      T s = 0;
      for (T p : partial) s += p;
      y[0] = s;
      return;
    }
    parallel_for(outer, std::max<std::int64_t>(1, kGrainCheap / std::max<std::int64_t>(R, 1)),
                 [&](std::int64_t o0, std::int64_t o1) {
                   for (std::int64_t o = o0; o < o1; ++o) y[o] = sum_row(x + o * R, R);
                 });
    return;
  }
  // Rows of `inner` values added one after another (r outermost, so memory is read in order),
  // vectorised across `inner`; columns are split into L1-sized chunks that threads may share.
  constexpr std::int64_t kCols = 512;
  const std::int64_t col_chunks = (inner + kCols - 1) / kCols;
  const std::int64_t tasks = outer * col_chunks;
  const std::int64_t work_per_task = R * std::min(inner, kCols);
  // Too few column chunks to share (a bias gradient over 2048 rows of 256): the rows split into
  // blocks of about kSumBlock values, whose partial sums are then added in block order. The blocks
  // depend on the shape only, so the result does not change with the thread count.
  if (tasks < kMinRowSplitTasks && work_per_task >= 2 * kSumBlock) {
    const std::int64_t rows_per_block = std::max<std::int64_t>(1, kSumBlock / std::min(inner, kCols));
    const std::int64_t blocks = (R + rows_per_block - 1) / rows_per_block;
    PooledVector<T> partial(static_cast<std::size_t>(tasks * blocks * std::min(inner, kCols)));
    const std::int64_t stride = std::min(inner, kCols);  // one partial row per (task, block)
    parallel_for(tasks * blocks, 1, [&](std::int64_t u0, std::int64_t u1) {
      for (std::int64_t u = u0; u < u1; ++u) {
        const std::int64_t t = u / blocks, blk = u % blocks;
        const std::int64_t o = t / col_chunks, j0 = (t % col_chunks) * kCols;
        const std::int64_t n = std::min(inner, j0 + kCols) - j0;
        const std::int64_t r0 = blk * rows_per_block, r1 = std::min(R, r0 + rows_per_block);
        T* out = partial.data() + u * stride;
        const T* base = x + o * R * inner + j0;
        std::copy(base + r0 * inner, base + r0 * inner + n, out);
        for (std::int64_t r = r0 + 1; r < r1; ++r) add_row(out, base + r * inner, n);
      }
    });
    for (std::int64_t t = 0; t < tasks; ++t) {
      const std::int64_t o = t / col_chunks, j0 = (t % col_chunks) * kCols;
      const std::int64_t n = std::min(inner, j0 + kCols) - j0;
      T* out = y + o * inner + j0;
      const T* first = partial.data() + t * blocks * stride;
      std::copy(first, first + n, out);
      for (std::int64_t blk = 1; blk < blocks; ++blk) add_row(out, first + blk * stride, n);
    }
    return;
  }
  parallel_for(tasks, std::max<std::int64_t>(1, kGrainCheap / std::max<std::int64_t>(work_per_task, 1)),
               [&](std::int64_t t0, std::int64_t t1) {
                 for (std::int64_t t = t0; t < t1; ++t) {
                   const std::int64_t o = t / col_chunks, j0 = (t % col_chunks) * kCols;
                   const std::int64_t n = std::min(inner, j0 + kCols) - j0;
                   T* out = y + o * inner + j0;
                   const T* base = x + o * R * inner + j0;
                   std::copy(base, base + n, out);
                   for (std::int64_t r = 1; r < R; ++r) add_row(out, base + r * inner, n);
                 }
               });
}

// (outer, R, inner) for reducing the contiguous axis block [first, last].
void split_dims(const Shape& s, int first, int last, std::int64_t& outer, std::int64_t& R, std::int64_t& inner) {
  outer = R = inner = 1;
  for (int i = 0; i < s.size(); ++i) (i < first ? outer : i <= last ? R : inner) *= s[i];
}

template <class T>
T max_row(const T* x, std::int64_t n) {
  constexpr std::int64_t W = Batch<T>::size;
  T m = -std::numeric_limits<T>::infinity();
  std::int64_t i = 0;
  if (n >= W) {
    Batch<T> acc = Batch<T>::load_unaligned(x);
    for (i = W; i + W <= n; i += W) acc = xsimd::max(acc, Batch<T>::load_unaligned(x + i));
    alignas(64) T buf[W];
    acc.store_aligned(buf);
    for (std::int64_t k = 0; k < W; ++k) m = std::max(m, buf[k]);
  }
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

}  // namespace

float sum_contiguous(const float* x, std::int64_t n) { return sum_row(x, n); }
double sum_contiguous(const double* x, std::int64_t n) { return sum_row(x, n); }
float max_contiguous(const float* x, std::int64_t n) { return max_row(x, n); }
double max_contiguous(const double* x, std::int64_t n) { return max_row(x, n); }

Shape reduced_shape(const Shape& shape, const Axes& axes, bool keepdim) {
  Shape out;
  for (int i = 0; i < shape.size(); ++i) {
    const bool reduced = axes.contains(i);
    if (!reduced) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Tensor sum(const Tensor& x, Axes axes, bool keepdim) {
  axes.normalize();
  const Shape out_shape = reduced_shape(x.shape(), axes, keepdim);
  if (axes.empty()) {
    Tensor y = Tensor::empty(out_shape, x.dtype());
    detail::copy_elements(y, x);
    return y;
  }
  const bool contiguous_block = axes.back() - axes.front() + 1 == static_cast<int>(axes.size());
  if (!contiguous_block) {
    // Reduce the last axis, then the rest: a fixed order, so still deterministic.
    Tensor partial = sum(x, {axes.back()}, true);
    axes.pop_back();
    Tensor rest = sum(partial, axes, true);
    Tensor y = Tensor::empty(out_shape, x.dtype());
    dispatch_floating("sum", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      std::copy(rest.data<T>(), rest.data<T>() + rest.numel(), y.data<T>());
    });
    return y;
  }
  Tensor y = Tensor::empty(out_shape, x.dtype());
  std::int64_t outer, R, inner;
  split_dims(x.shape(), axes.front(), axes.back(), outer, R, inner);
  dispatch_floating("sum", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (R == 0) std::fill(y.data<T>(), y.data<T>() + y.numel(), T(0));
    else sum_outer_r_inner(x.data<T>(), y.data<T>(), outer, R, inner);
  });
  return y;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int lead = g.dim() - shape.size();
  if (lead < 0) throw std::logic_error("sum_to: " + g.shape().str() + " cannot reduce to " + shape.str());
  Axes axes;
  for (int i = 0; i < g.dim(); ++i) {
    if (i < lead) axes.push_back(i);
    else if (shape[i - lead] == 1 && g.shape()[i] != 1) axes.push_back(i);
    else if (shape[i - lead] != g.shape()[i])
      throw std::logic_error("sum_to: " + g.shape().str() + " cannot reduce to " + shape.str());
  }
  Tensor reduced = sum(g, axes, true);
  // Same elements in the same order; only the shape changes (leading dims dropped).
  auto impl = TensorImpl::make(*reduced.impl());
  impl->shape = shape;
  impl->meta.reset();
  return Tensor(std::move(impl));
}

Tensor sum_to(Tensor&& g, const Shape& shape) {
  if (g.shape() == shape) return std::move(g);
  return sum_to(static_cast<const Tensor&>(g), shape);
}

Tensor max(const Tensor& x, int axis, bool keepdim, Tensor* argmax) {
  if (x.shape()[axis] == 0) throw std::invalid_argument("max: cannot reduce an axis of size 0");
  const Shape out_shape = reduced_shape(x.shape(), {axis}, keepdim);
  Tensor y = Tensor::empty(out_shape, x.dtype());
  Tensor idx = Tensor::empty(out_shape, DType::i64);
  std::int64_t outer, R, inner;
  split_dims(x.shape(), axis, axis, outer, R, inner);
  dispatch_floating("max", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::int64_t* pi = idx.data<std::int64_t>();
    parallel_for(outer, std::max<std::int64_t>(1, kGrainCheap / std::max<std::int64_t>(R * inner, 1)),
                 [&](std::int64_t o0, std::int64_t o1) {
                   for (std::int64_t o = o0; o < o1; ++o) {
                     const T* base = px + o * R * inner;
                     if (inner == 1) {
                       pi[o] = argmax_contiguous(base, R);
                       py[o] = base[pi[o]];
                       continue;
                     }
                     // r outermost: rows are read in memory order. NaN wins, as in torch.max.
                     T* best = py + o * inner;
                     std::int64_t* arg = pi + o * inner;
                     std::copy(base, base + inner, best);
                     std::fill(arg, arg + inner, 0);
                     for (std::int64_t r = 1; r < R; ++r) {
                       const T* row = base + r * inner;
                       for (std::int64_t j = 0; j < inner; ++j)
                         if (row[j] > best[j] || (row[j] != row[j] && best[j] == best[j])) {
                           best[j] = row[j];
                           arg[j] = r;
                         }
                     }
                   }
                 });
  });
  if (argmax) *argmax = idx;
  return y;
}

}  // namespace tg::kernels
