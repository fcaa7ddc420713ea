// Row kernels of layer_norm and rms_norm (contract in kernels/norm.h). Each row is read twice in
// the forward (sum, then the centred sum of squares: exact for rows far from zero, unlike
// E[x²] - E[x]²) and written once; the backward reads dy and x twice (two row sums, then dx).
#include "autograd/kernels/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "autograd/kernels/parallel_for.h"
#include "autograd/kernels/reduce.h"
#include "autograd/memory.h"

namespace tg::kernels {

namespace {

template <class T> using Batch = xsimd::batch<T>;

// Rows per parallel chunk and per weight-gradient block: a function of n only, so the blocks (and
// the order in which their partial sums are added) do not depend on the thread count. ~16K
// elements: a few microseconds of work, enough to pay for a task.
constexpr std::int64_t kGrainElems = 16384;
std::int64_t block_rows(std::int64_t n) { return std::max<std::int64_t>(1, kGrainElems / std::max<std::int64_t>(1, n)); }

// Σ (x - c)²
template <class T>
T row_centred_sq(const T* x, std::int64_t n, T c) {
  constexpr std::int64_t W = Batch<T>::size;
  const Batch<T> C(c);
  Batch<T> a0(T(0)), a1(T(0)), a2(T(0)), a3(T(0));
  std::int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    const Batch<T> d0 = Batch<T>::load_unaligned(x + i) - C, d1 = Batch<T>::load_unaligned(x + i + W) - C;
    const Batch<T> d2 = Batch<T>::load_unaligned(x + i + 2 * W) - C, d3 = Batch<T>::load_unaligned(x + i + 3 * W) - C;
    a0 = xsimd::fma(d0, d0, a0);
    a1 = xsimd::fma(d1, d1, a1);
    a2 = xsimd::fma(d2, d2, a2);
    a3 = xsimd::fma(d3, d3, a3);
  }
  for (; i + W <= n; i += W) {
    const Batch<T> d = Batch<T>::load_unaligned(x + i) - C;
    a0 = xsimd::fma(d, d, a0);
  }
  T s = xsimd::hadd((a0 + a1) + (a2 + a3));
  for (; i < n; ++i) s += (x[i] - c) * (x[i] - c);
  return s;
}

// One row of the forward.
template <class T>
void forward_row(bool rms, const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, std::int64_t n, double eps) {
  constexpr std::int64_t W = Batch<T>::size;
  const T m = rms ? T(0) : sum_contiguous(x, n) / static_cast<T>(n);
  const T var = row_centred_sq(x, n, m) / static_cast<T>(n);
  const T r = static_cast<T>(1.0 / std::sqrt(static_cast<double>(var) + eps));
  if (mean) *mean = m;
  *rstd = r;
  const Batch<T> M(m), R(r);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
    Batch<T> v = (Batch<T>::load_unaligned(x + i) - M) * R;
    if (w) v *= Batch<T>::load_unaligned(w + i);
    if (b) v += Batch<T>::load_unaligned(b + i);
    v.store_unaligned(y + i);
  }
  for (; i < n; ++i) {
    T v = (x[i] - m) * r;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

// One row of the backward; adds dy xhat into pdw and dy into pdb (when not null).
template <class T>
void backward_row(bool rms, const T* dy, const T* x, const T* w, T m, T r, T* dx, T* pdw, T* pdb, std::int64_t n) {
  constexpr std::int64_t W = Batch<T>::size;
  const Batch<T> M(m), R(r);
  // Σ g and Σ g xhat, g = dy w; two accumulators each (even and odd batches).
  Batch<T> sg[2] = {Batch<T>(T(0)), Batch<T>(T(0))}, sgx[2] = {Batch<T>(T(0)), Batch<T>(T(0))};
  std::int64_t i = 0;
  for (int a = 0; i + W <= n; i += W, a ^= 1) {
    Batch<T> g = Batch<T>::load_unaligned(dy + i);
    const Batch<T> xh = (Batch<T>::load_unaligned(x + i) - M) * R;
    if (pdw) xsimd::fma(g, xh, Batch<T>::load_unaligned(pdw + i)).store_unaligned(pdw + i);
    if (pdb) (Batch<T>::load_unaligned(pdb + i) + g).store_unaligned(pdb + i);
    if (w) g *= Batch<T>::load_unaligned(w + i);
    sg[a] += g;
    sgx[a] = xsimd::fma(g, xh, sgx[a]);
  }
  T s_g = xsimd::hadd(sg[0] + sg[1]), s_gx = xsimd::hadd(sgx[0] + sgx[1]);
  for (std::int64_t j = i; j < n; ++j) {
    T g = dy[j];
    const T xh = (x[j] - m) * r;
    if (pdw) pdw[j] += g * xh;
    if (pdb) pdb[j] += g;
    if (w) g *= w[j];
    s_g += g;
    s_gx += g * xh;
  }
  if (!dx) return;
  const T inv_n = T(1) / static_cast<T>(n);
  const T a = rms ? T(0) : s_g * inv_n, c = s_gx * inv_n;
  const Batch<T> A(a), C(c);
  for (i = 0; i + W <= n; i += W) {
    Batch<T> g = Batch<T>::load_unaligned(dy + i);
    if (w) g *= Batch<T>::load_unaligned(w + i);
    const Batch<T> xh = (Batch<T>::load_unaligned(x + i) - M) * R;
    (R * (g - A - xh * C)).store_unaligned(dx + i);
  }
  for (; i < n; ++i) {
    const T g = w ? dy[i] * w[i] : dy[i];
    dx[i] = r * (g - a - (x[i] - m) * r * c);
  }
}

}  // namespace

template <class T>
void norm_forward(bool rms, const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, std::int64_t rows,
                  std::int64_t n, double eps) {
  parallel_for(rows, block_rows(n), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r)
      forward_row(rms, x + r * n, w, b, y + r * n, mean ? mean + r : nullptr, rstd + r, n, eps);
  });
}

template <class T>
void norm_backward(bool rms, const T* dy, const T* x, const T* w, const T* mean, const T* rstd, T* dx, T* dw,
                   T* db, std::int64_t rows, std::int64_t n) {
  const std::int64_t per = block_rows(n), blocks = (rows + per - 1) / per;
  // Per block partial sums of dw and db, added in block order below.
  PooledVector<T> part_w(dw ? static_cast<std::size_t>(blocks * n) : 0), part_b(db ? static_cast<std::size_t>(blocks * n) : 0);
  parallel_for(blocks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t k = begin; k < end; ++k)
      for (std::int64_t r = k * per; r < std::min(rows, (k + 1) * per); ++r)
        backward_row(rms, dy + r * n, x + r * n, w, mean ? mean[r] : T(0), rstd[r], dx ? dx + r * n : nullptr,
                     dw ? part_w.data() + k * n : nullptr, db ? part_b.data() + k * n : nullptr, n);
  });
  for (auto [out, part] : {std::pair<T*, const PooledVector<T>*>{dw, &part_w}, {db, &part_b}}) {
    if (!out) continue;
    std::fill(out, out + n, T(0));
    for (std::int64_t k = 0; k < blocks; ++k)
      for (std::int64_t j = 0; j < n; ++j) out[j] += (*part)[k * n + j];
  }
}

template void norm_forward<float>(bool, const float*, const float*, const float*, float*, float*, float*, std::int64_t,
                                  std::int64_t, double);
template void norm_forward<double>(bool, const double*, const double*, const double*, double*, double*, double*,
                                   std::int64_t, std::int64_t, double);
template void norm_backward<float>(bool, const float*, const float*, const float*, const float*, const float*, float*,
                                   float*, float*, std::int64_t, std::int64_t);
template void norm_backward<double>(bool, const double*, const double*, const double*, const double*, const double*,
                                    double*, double*, double*, std::int64_t, std::int64_t);

}  // namespace tg::kernels
