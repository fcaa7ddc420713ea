// BLIS-style GEMM (see gemm.h for the contract).
//
// Loop nest per task (a task owns a rectangle of C and all of K for it):
//   jc (NC columns) -> pc (kc depth, fixed by K alone) -> ic (MC rows: pack an A block)
//     -> jg (JB strips of NR columns: packed right before their first use, during the first ic
//            block; the source of the next group is prefetched while this one is multiplied)
//        -> jr (one NR-column strip) -> ir (one MR-row strip) -> micro-kernel
// The micro-kernel keeps an MR x NR tile of C in registers (float 6x16 = 12 batches of 8 lanes,
// double 6x8 = 12 batches of 4) and does one broadcast + NR/L FMAs per row per k step.
// trans_a / trans_b are absorbed by the packing routines (copy or 8x8 / 4x4 transposes).
//
// Parallelism: TBB tasks split C into column chunks and/or row ranges (the larger of M and N,
// since splitting N re-packs A and splitting M re-packs B). K is never split and kc depends on
// K alone, so every element of C goes through the same operations in the same order for any
// thread count: results are bitwise identical with 1 or n threads.
#include "autograd/kernels/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <stdexcept>
#include <vector>

#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>
#include <xsimd/xsimd.hpp>

#include "autograd/cpu.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/memory.h"
#include "autograd/parallel.h"

namespace tg::kernels {
namespace {

// ---------------------------------------------------------------------------------------------
// Block sizes, per instruction set of the micro-kernel (the rest of the code is the same for both).
enum class Path { avx2, avx512 };

template <class T, Path P = Path::avx2>
struct Blocking;
template <>
struct Blocking<float, Path::avx2> {
  static constexpr int MR = 6;       // rows of the register tile
  static constexpr int NR = 16;      // columns of the register tile (2 x 8 lanes)
  static constexpr int64_t KC = 320;   // max depth of one pass: A strip 7.5 KB + B strip 20 KB (L1)
  static constexpr int64_t MC = 144;   // rows of a packed A block (180 KB, L2)
  static constexpr int64_t NC = 3072;  // columns of a packed B slab when M needs several A blocks
  static constexpr int64_t JB = 8;     // B strips packed together before their first use (160 KB)
};
template <>
struct Blocking<double, Path::avx2> {
  static constexpr int MR = 6;
  static constexpr int NR = 8;  // 2 x 4 lanes
  static constexpr int64_t KC = 256;  // A strip 12 KB + B strip 16 KB
  static constexpr int64_t MC = 96;
  static constexpr int64_t NC = 2048;
  static constexpr int64_t JB = 8;
};
// AVX-512: twice the lanes per register and 32 registers: 12 x 32 tiles (24 accumulators).
// No KC of its own: choose_kc uses the AVX2 one, so kc depends on K alone whichever path runs and,
// as each element of C sees the same FMAs in the same order, both paths give the same bits.
template <>
struct Blocking<float, Path::avx512> {
  static constexpr int MR = 12;
  static constexpr int NR = 32;
  static constexpr int64_t MC = 144;
  static constexpr int64_t NC = 3072;
  static constexpr int64_t JB = 4;
};
template <>
struct Blocking<double, Path::avx512> {
  static constexpr int MR = 12;
  static constexpr int NR = 16;
  static constexpr int64_t MC = 96;
  static constexpr int64_t NC = 2048;
  static constexpr int64_t JB = 4;
};

/// Products below this many flops (2*M*N*K) run on the calling thread: a TBB task costs ~1-5 us.
constexpr double kParallelFlops = 2.0 * 96 * 96 * 96;
/// Aim for at least this many flops per task.
constexpr double kTaskFlops = 1.5e6;

// ---------------------------------------------------------------------------------------------
// Thread-local packing buffers: grown once, 64-byte aligned, reused.
struct AlignedBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  bool in_use = false;
  ~AlignedBuffer() { std::free(ptr); }
  void* get(size_t need) {
    if (need > bytes) {
      std::free(ptr);
      size_t cap = (std::max(need, bytes + bytes / 2) + 63) & ~size_t(63);
      ptr = std::aligned_alloc(64, cap);
      if (!ptr) throw OutOfMemoryError(cap, "the matrix product's packing buffer");
      bytes = cap;
    }
    return ptr;
  }
};

struct Workspace {
  AlignedBuffer a, b;
};
thread_local Workspace t_workspace;

/// Borrows the thread's workspace; if it is already borrowed (re-entrant call) uses a private one.
class WorkspaceLease {
 public:
  WorkspaceLease() : ws_(&t_workspace) {
    if (ws_->a.in_use) {
      own_ = new Workspace;
      ws_ = own_;
    }
    ws_->a.in_use = true;
  }
  ~WorkspaceLease() {
    ws_->a.in_use = false;
    delete own_;
  }
  WorkspaceLease(const WorkspaceLease&) = delete;
  WorkspaceLease& operator=(const WorkspaceLease&) = delete;
  Workspace& operator*() { return *ws_; }

 private:
  Workspace* ws_;
  Workspace* own_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Packing. A panel holds W lanes (rows of A or columns of B) for kc steps: dst[k*W + r].
// Element (k, r) of the source is at src[k*sk + r*sr]; exactly one of sk, sr is 1.

inline void transpose8x8(__m256& r0, __m256& r1, __m256& r2, __m256& r3, __m256& r4, __m256& r5,
                         __m256& r6, __m256& r7) {
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r0 = _mm256_permute2f128_ps(s0, s4, 0x20);
  r1 = _mm256_permute2f128_ps(s1, s5, 0x20);
  r2 = _mm256_permute2f128_ps(s2, s6, 0x20);
  r3 = _mm256_permute2f128_ps(s3, s7, 0x20);
  r4 = _mm256_permute2f128_ps(s0, s4, 0x31);
  r5 = _mm256_permute2f128_ps(s1, s5, 0x31);
  r6 = _mm256_permute2f128_ps(s2, s6, 0x31);
  r7 = _mm256_permute2f128_ps(s3, s7, 0x31);
}

inline void transpose4x4(__m256d& r0, __m256d& r1, __m256d& r2, __m256d& r3) {
  __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
  __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
  r0 = _mm256_permute2f128_pd(t0, t2, 0x20);
  r1 = _mm256_permute2f128_pd(t1, t3, 0x20);
  r2 = _mm256_permute2f128_pd(t0, t2, 0x31);
  r3 = _mm256_permute2f128_pd(t1, t3, 0x31);
}

/// Scalar packing of any panel (edges, tails).
template <class T, int W>
void pack_scalar(const T* src, int64_t sk, int64_t sr, int lanes, int64_t k0, int64_t k1, T* dst) {
  for (int64_t k = k0; k < k1; ++k) {
    T* d = dst + k * W;
    const T* s = src + k * sk;
    int r = 0;
    for (; r < lanes; ++r) d[r] = s[r * sr];
    for (; r < W; ++r) d[r] = T(0);
  }
}

/// Lanes contiguous in memory (sr == 1): copy rows of W values.
template <class T, int W>
void pack_copy(const T* src, int64_t sk, int lanes, int64_t kc, T* dst) {
  if (lanes == W) {
    for (int64_t k = 0; k < kc; ++k) {
      const T* s = src + k * sk;
      T* d = dst + k * W;
      // The next panel (lanes W..2W-1) is packed after this one has been used: fetch its line
      // now, as a strided row walk defeats the hardware prefetcher.
      __builtin_prefetch(s + 2 * W - 1, 0, 3);
      std::memcpy(d, s, W * sizeof(T));  // fixed size: a few vector moves
    }
  } else {
    for (int64_t k = 0; k < kc; ++k) {
      const T* s = src + k * sk;
      T* d = dst + k * W;
      int r = 0;
      for (; r < lanes; ++r) d[r] = s[r];
      for (; r < W; ++r) d[r] = T(0);
    }
  }
}

/// Lanes strided, k contiguous (sk == 1): transpose blocks of 8 (float) / 4 (double).
template <class T, int W>
void pack_transpose(const T* src, int64_t sr, int lanes, int64_t kc, T* dst);

template <>
void pack_transpose<float, 16>(const float* src, int64_t sr, int lanes, int64_t kc, float* dst) {
  if (lanes != 16) return pack_scalar<float, 16>(src, 1, sr, lanes, 0, kc, dst);
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    for (int g = 0; g < 2; ++g) {
      const float* s = src + g * 8 * sr + k;
      __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + sr), r2 = _mm256_loadu_ps(s + 2 * sr),
             r3 = _mm256_loadu_ps(s + 3 * sr), r4 = _mm256_loadu_ps(s + 4 * sr),
             r5 = _mm256_loadu_ps(s + 5 * sr), r6 = _mm256_loadu_ps(s + 6 * sr),
             r7 = _mm256_loadu_ps(s + 7 * sr);
      transpose8x8(r0, r1, r2, r3, r4, r5, r6, r7);
      float* d = dst + k * 16 + g * 8;
      _mm256_store_ps(d, r0);
      _mm256_store_ps(d + 16, r1);
      _mm256_store_ps(d + 32, r2);
      _mm256_store_ps(d + 48, r3);
      _mm256_store_ps(d + 64, r4);
      _mm256_store_ps(d + 80, r5);
      _mm256_store_ps(d + 96, r6);
      _mm256_store_ps(d + 112, r7);
    }
  }
  pack_scalar<float, 16>(src, 1, sr, 16, k, kc, dst);
}

template <>
void pack_transpose<float, 6>(const float* src, int64_t sr, int lanes, int64_t kc, float* dst) {
  if (lanes != 6) return pack_scalar<float, 6>(src, 1, sr, lanes, 0, kc, dst);
  int64_t k = 0;
  const __m256 z = _mm256_setzero_ps();
  for (; k + 8 <= kc; k += 8) {
    const float* s = src + k;
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + sr), r2 = _mm256_loadu_ps(s + 2 * sr),
           r3 = _mm256_loadu_ps(s + 3 * sr), r4 = _mm256_loadu_ps(s + 4 * sr),
           r5 = _mm256_loadu_ps(s + 5 * sr), r6 = z, r7 = z;
    transpose8x8(r0, r1, r2, r3, r4, r5, r6, r7);
    float* d = dst + k * 6;
    // Overlapping 8-wide stores: each one's two extra lanes are overwritten by the next.
    _mm256_storeu_ps(d, r0);
    _mm256_storeu_ps(d + 6, r1);
    _mm256_storeu_ps(d + 12, r2);
    _mm256_storeu_ps(d + 18, r3);
    _mm256_storeu_ps(d + 24, r4);
    _mm256_storeu_ps(d + 30, r5);
    _mm256_storeu_ps(d + 36, r6);
    _mm_storeu_ps(d + 42, _mm256_castps256_ps128(r7));
    _mm_storel_pi(reinterpret_cast<__m64*>(d + 46), _mm256_extractf128_ps(r7, 1));
  }
  pack_scalar<float, 6>(src, 1, sr, 6, k, kc, dst);
}

template <>
void pack_transpose<double, 8>(const double* src, int64_t sr, int lanes, int64_t kc, double* dst) {
  if (lanes != 8) return pack_scalar<double, 8>(src, 1, sr, lanes, 0, kc, dst);
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4) {
    for (int g = 0; g < 2; ++g) {
      const double* s = src + g * 4 * sr + k;
      __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + sr), r2 = _mm256_loadu_pd(s + 2 * sr),
              r3 = _mm256_loadu_pd(s + 3 * sr);
      transpose4x4(r0, r1, r2, r3);
      double* d = dst + k * 8 + g * 4;
      _mm256_store_pd(d, r0);
      _mm256_store_pd(d + 8, r1);
      _mm256_store_pd(d + 16, r2);
      _mm256_store_pd(d + 24, r3);
    }
  }
  pack_scalar<double, 8>(src, 1, sr, 8, k, kc, dst);
}

template <>
void pack_transpose<double, 6>(const double* src, int64_t sr, int lanes, int64_t kc, double* dst) {
  if (lanes != 6) return pack_scalar<double, 6>(src, 1, sr, lanes, 0, kc, dst);
  int64_t k = 0;
  const __m256d z = _mm256_setzero_pd();
  for (; k + 4 <= kc; k += 4) {
    const double* s = src + k;
    __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + sr), r2 = _mm256_loadu_pd(s + 2 * sr),
            r3 = _mm256_loadu_pd(s + 3 * sr);
    transpose4x4(r0, r1, r2, r3);
    __m256d q0 = _mm256_loadu_pd(s + 4 * sr), q1 = _mm256_loadu_pd(s + 5 * sr), q2 = z, q3 = z;
    transpose4x4(q0, q1, q2, q3);
    double* d = dst + k * 6;
    _mm256_storeu_pd(d, r0);
    _mm_storeu_pd(d + 4, _mm256_castpd256_pd128(q0));
    _mm256_storeu_pd(d + 6, r1);
    _mm_storeu_pd(d + 10, _mm256_castpd256_pd128(q1));
    _mm256_storeu_pd(d + 12, r2);
    _mm_storeu_pd(d + 16, _mm256_castpd256_pd128(q2));
    _mm256_storeu_pd(d + 18, r3);
    _mm_storeu_pd(d + 22, _mm256_castpd256_pd128(q3));
  }
  pack_scalar<double, 6>(src, 1, sr, 6, k, kc, dst);
}

/// Any float width that is a multiple of 4 (the AVX-512 panels): 8x8 transposes, the last 4 lanes
/// through one with 4 zero rows.
template <int W>
void pack_transpose_f32(const float* src, int64_t sr, int lanes, int64_t kc, float* dst) {
  static_assert(W % 4 == 0);
  if (lanes != W) return pack_scalar<float, W>(src, 1, sr, lanes, 0, kc, dst);
  int64_t k = 0;
  const __m256 z = _mm256_setzero_ps();
  for (; k + 8 <= kc; k += 8) {
    float* d = dst + k * W;
    for (int g = 0; g + 8 <= W; g += 8) {
      const float* s = src + g * sr + k;
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * sr);
      transpose8x8(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(d + i * W + g, r[i]);
    }
    if constexpr (W % 8 == 4) {
      const float* s = src + (W - 4) * sr + k;
      __m256 r[8] = {_mm256_loadu_ps(s), _mm256_loadu_ps(s + sr), _mm256_loadu_ps(s + 2 * sr),
                     _mm256_loadu_ps(s + 3 * sr), z, z, z, z};
      transpose8x8(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
      for (int i = 0; i < 8; ++i) _mm_storeu_ps(d + i * W + W - 4, _mm256_castps256_ps128(r[i]));
    }
  }
  pack_scalar<float, W>(src, 1, sr, W, k, kc, dst);
}

/// Any double width that is a multiple of 4: 4x4 transposes.
template <int W>
void pack_transpose_f64(const double* src, int64_t sr, int lanes, int64_t kc, double* dst) {
  static_assert(W % 4 == 0);
  if (lanes != W) return pack_scalar<double, W>(src, 1, sr, lanes, 0, kc, dst);
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4) {
    double* d = dst + k * W;
    for (int g = 0; g < W; g += 4) {
      const double* s = src + g * sr + k;
      __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + sr), r2 = _mm256_loadu_pd(s + 2 * sr),
              r3 = _mm256_loadu_pd(s + 3 * sr);
      transpose4x4(r0, r1, r2, r3);
      _mm256_storeu_pd(d + g, r0);
      _mm256_storeu_pd(d + W + g, r1);
      _mm256_storeu_pd(d + 2 * W + g, r2);
      _mm256_storeu_pd(d + 3 * W + g, r3);
    }
  }
  pack_scalar<double, W>(src, 1, sr, W, k, kc, dst);
}

template <>
void pack_transpose<float, 32>(const float* src, int64_t sr, int lanes, int64_t kc, float* dst) {
  pack_transpose_f32<32>(src, sr, lanes, kc, dst);
}
template <>
void pack_transpose<float, 12>(const float* src, int64_t sr, int lanes, int64_t kc, float* dst) {
  pack_transpose_f32<12>(src, sr, lanes, kc, dst);
}
template <>
void pack_transpose<double, 16>(const double* src, int64_t sr, int lanes, int64_t kc, double* dst) {
  pack_transpose_f64<16>(src, sr, lanes, kc, dst);
}
template <>
void pack_transpose<double, 12>(const double* src, int64_t sr, int lanes, int64_t kc, double* dst) {
  pack_transpose_f64<12>(src, sr, lanes, kc, dst);
}

/// Packs `cols` lanes of a block whose lanes are contiguous (row k at src + k*ld: B, or A
/// transposed) into W-lane panels, walking the source row by row (contiguous reads for the
/// hardware prefetcher and the TLB). The last panel is zero-padded.
template <class T, int W>
void pack_rows(const T* src, int64_t ld, int64_t cols, int64_t kc, T* dst) {
  const int64_t full = cols / W, rest = cols - full * W;
  for (int64_t k = 0; k < kc; ++k) {
    const T* s = src + k * ld;
    T* d = dst + k * W;
    for (int64_t j = 0; j < full; ++j) std::memcpy(d + j * kc * W, s + j * W, W * sizeof(T));
    if (rest) {
      T* e = d + full * kc * W;
      const T* t = s + full * W;
      for (int64_t r = 0; r < rest; ++r) e[r] = t[r];
      for (int64_t r = rest; r < W; ++r) e[r] = T(0);
    }
  }
}

/// Packs one panel of W lanes x kc; `lanes` < W only at the matrix edge (zero-padded).
template <class T, int W>
inline void pack_panel(const T* src, int64_t sk, int64_t sr, int lanes, int64_t kc, T* dst) {
  if (sr == 1)
    pack_copy<T, W>(src, sk, lanes, kc, dst);
  else
    pack_transpose<T, W>(src, sr, lanes, kc, dst);
}

// ---------------------------------------------------------------------------------------------
// Micro-kernel: C[R x (NB*L)] (=|+=) alpha * A_strip * B_strip, R <= MR, from a packed B panel
// and A either packed (element (i, k) at a[k * MR + i]) or read in place (at a[i * a_rs + k * a_ks]).
// Both read the same values in the same order, so the results are bitwise the same.
// `beta` is the caller's beta on the first K pass (beta == 0: do not read C), 1 on later passes.
// A non-null `bias` (first pass of a product with a row bias, beta == 0) is added to every row
// instead: the arithmetic of beta == 1 with C holding the bias rows, without writing them first.
// Columns >= nr are computed and dropped.
template <class T, int R, int NB, bool kPackedA>
void micro_kernel(int64_t kc, const T* __restrict a, int64_t a_rs, int64_t a_ks, const T* __restrict b,
                  T* __restrict c, int64_t ldc, int nr, T alpha, T beta, const T* __restrict bias) {
  using batch = xsimd::batch<T>;
  constexpr int L = static_cast<int>(batch::size);
  constexpr int MR = Blocking<T>::MR;
  constexpr int NR = Blocking<T>::NR;
  static_assert(NB * L <= NR);

  for (int i = 0; i < R; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + NB * L - 1, 1, 3);
  }

  batch acc[R][NB];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NB; ++j) acc[i][j] = batch(T(0));

#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    batch bv[NB];
#pragma GCC unroll 2
    for (int j = 0; j < NB; ++j) bv[j] = batch::load_aligned(b + j * L);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      batch av(kPackedA ? a[i] : a[i * a_rs]);
#pragma GCC unroll 2
      for (int j = 0; j < NB; ++j) acc[i][j] = xsimd::fma(av, bv[j], acc[i][j]);
    }
    a += kPackedA ? MR : a_ks;
    b += NR;
  }

  const batch va(alpha);
  if (nr == NB * L) {
    if (bias) {
      batch bv[NB];
#pragma GCC unroll 2
      for (int j = 0; j < NB; ++j) bv[j] = batch::load_unaligned(bias + j * L);
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) xsimd::fma(va, acc[i][j], bv[j]).store_unaligned(c + i * ldc + j * L);
    } else if (beta == T(0)) {
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) (va * acc[i][j]).store_unaligned(c + i * ldc + j * L);
    } else if (beta == T(1)) {
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) {
          T* p = c + i * ldc + j * L;
          xsimd::fma(va, acc[i][j], batch::load_unaligned(p)).store_unaligned(p);
        }
    } else {
      const batch vb(beta);
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) {
          T* p = c + i * ldc + j * L;
          xsimd::fma(va, acc[i][j], vb * batch::load_unaligned(p)).store_unaligned(p);
        }
    }
  } else {
    // Partial tile (matrix edge): the same vector arithmetic as above on a copy of the C row,
    // so an element's bits do not depend on whether it sits in a full or an edge tile.
    alignas(64) T tmp[NB * L] = {};
    const batch vb(beta);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      T* p = c + i * ldc;
      if (bias)
        for (int j = 0; j < nr; ++j) tmp[j] = bias[j];
      else if (beta != T(0))
        for (int j = 0; j < nr; ++j) tmp[j] = p[j];
#pragma GCC unroll 2
      for (int j = 0; j < NB; ++j) {
        const batch cj = batch::load_aligned(tmp + j * L);
        const batch r = bias ? xsimd::fma(va, acc[i][j], cj)
                        : beta == T(0) ? va * acc[i][j]
                        : beta == T(1) ? xsimd::fma(va, acc[i][j], cj)
                                       : xsimd::fma(va, acc[i][j], vb * cj);
        r.store_aligned(tmp + j * L);
      }
      for (int j = 0; j < nr; ++j) p[j] = tmp[j];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The AVX-512 micro-kernel: the same contract and the same arithmetic per element as micro_kernel
// (one FMA chain per element in k order, then the same store formula), with 512-bit registers and
// masked loads/stores at the matrix edge. Only the code between push_options and pop_options is
// compiled for AVX-512, and all of it has internal linkage: no AVX-512 instruction can reach a
// function the linker might share with the AVX2 code, and none runs unless cpu::isa() says so.
// (Clang has no #pragma GCC target: the fuzz build compiles this file with clang.)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl")
#endif

template <class T>
struct Zmm;
template <>
struct Zmm<float> {
  using V = __m512;
  using M = __mmask16;
  static constexpr int L = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static V loadu(const float* p, M m) { return _mm512_maskz_loadu_ps(m, p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void storeu(float* p, V v, M m) { _mm512_mask_storeu_ps(p, m, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static M mask(int n) { return M((1u << n) - 1u); }  // the first n lanes, 0 <= n <= L
};
template <>
struct Zmm<double> {
  using V = __m512d;
  using M = __mmask8;
  static constexpr int L = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V set1(double x) { return _mm512_set1_pd(x); }
  static V load(const double* p) { return _mm512_load_pd(p); }
  static V loadu(const double* p) { return _mm512_loadu_pd(p); }
  static V loadu(const double* p, M m) { return _mm512_maskz_loadu_pd(m, p); }
  static void storeu(double* p, V v) { _mm512_storeu_pd(p, v); }
  static void storeu(double* p, V v, M m) { _mm512_mask_storeu_pd(p, m, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  static M mask(int n) { return M((1u << n) - 1u); }
};

template <class T, int R, int NB, bool kPackedA>
void micro_kernel_512(int64_t kc, const T* __restrict a, int64_t a_rs, int64_t a_ks, const T* __restrict b,
                      T* __restrict c, int64_t ldc, int nr, T alpha, T beta, const T* __restrict bias) {
  using Z = Zmm<T>;
  using V = typename Z::V;
  constexpr int L = Z::L;
  constexpr int MR = Blocking<T, Path::avx512>::MR;
  constexpr int NR = Blocking<T, Path::avx512>::NR;
  static_assert(NB * L <= NR);

  for (int i = 0; i < R; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + NB * L - 1, 1, 3);
  }

  V acc[R][NB];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NB; ++j) acc[i][j] = Z::zero();

#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NB];
#pragma GCC unroll 2
    for (int j = 0; j < NB; ++j) bv[j] = Z::load(b + j * L);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const V av = Z::set1(kPackedA ? a[i] : a[i * a_rs]);
#pragma GCC unroll 2
      for (int j = 0; j < NB; ++j) acc[i][j] = Z::fma(av, bv[j], acc[i][j]);
    }
    a += kPackedA ? MR : a_ks;
    b += NR;
  }

  const V va = Z::set1(alpha), vb = Z::set1(beta);
  if (nr == NB * L) {
    if (bias) {
      V bb[NB];
#pragma GCC unroll 2
      for (int j = 0; j < NB; ++j) bb[j] = Z::loadu(bias + j * L);
#pragma GCC unroll 12
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) Z::storeu(c + i * ldc + j * L, Z::fma(va, acc[i][j], bb[j]));
    } else if (beta == T(0)) {
#pragma GCC unroll 12
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) Z::storeu(c + i * ldc + j * L, Z::mul(va, acc[i][j]));
    } else if (beta == T(1)) {
#pragma GCC unroll 12
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) {
          T* p = c + i * ldc + j * L;
          Z::storeu(p, Z::fma(va, acc[i][j], Z::loadu(p)));
        }
    } else {
#pragma GCC unroll 12
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) {
          T* p = c + i * ldc + j * L;
          Z::storeu(p, Z::fma(va, acc[i][j], Z::mul(vb, Z::loadu(p))));
        }
    }
  } else {
    // Matrix edge: the same formulas on the first nr columns only.
    typename Z::M m[NB];
    for (int j = 0; j < NB; ++j) m[j] = Z::mask(std::clamp(nr - j * L, 0, L));
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < NB; ++j) {
        T* p = c + i * ldc + j * L;
        const V r = bias ? Z::fma(va, acc[i][j], Z::loadu(bias + j * L, m[j]))
                    : beta == T(0) ? Z::mul(va, acc[i][j])
                    : beta == T(1) ? Z::fma(va, acc[i][j], Z::loadu(p, m[j]))
                                   : Z::fma(va, acc[i][j], Z::mul(vb, Z::loadu(p, m[j])));
        Z::storeu(p, r, m[j]);
      }
  }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

template <class T>
using KernelFn = void (*)(int64_t, const T*, int64_t, int64_t, const T*, T*, int64_t, int, T, T, const T*);

template <class T, Path P, int R, int NB, bool kPackedA>
constexpr KernelFn<T> kernel_ptr() {
  if constexpr (P == Path::avx512)
    return &micro_kernel_512<T, R, NB, kPackedA>;
  else
    return &micro_kernel<T, R, NB, kPackedA>;
}

template <class T, Path P, int NB, bool kPackedA, int... I>
KernelFn<T> kernel_for_rows(int rows, std::integer_sequence<int, I...>) {
  static constexpr KernelFn<T> table[] = {kernel_ptr<T, P, I + 1, NB, kPackedA>()...};
  return table[rows - 1];
}

/// The micro-kernel for a tile of `rows` x `cols` (1 <= rows <= MR, 1 <= cols <= NR).
template <class T, Path P>
KernelFn<T> kernel_for(int rows, int cols, bool packed_a) {
  constexpr int NR = Blocking<T, P>::NR;
  using Rows = std::make_integer_sequence<int, Blocking<T, P>::MR>;
  if (cols > NR / 2)
    return packed_a ? kernel_for_rows<T, P, 2, true>(rows, Rows{}) : kernel_for_rows<T, P, 2, false>(rows, Rows{});
  return packed_a ? kernel_for_rows<T, P, 1, true>(rows, Rows{}) : kernel_for_rows<T, P, 1, false>(rows, Rows{});
}

/// One-pass products (K <= kc) with at most this many rows read A in place instead of packing
/// it: packing a small A block costs about as much as it saves. Taller ones keep packing, since
/// a strided A read again for every B strip would fall out of L1/L2.
constexpr int64_t kDirectAMaxRows = 640;

// ---------------------------------------------------------------------------------------------
template <class T>
struct Problem {
  bool trans_a, trans_b;
  int64_t M, N, K;
  T alpha;
  const T* A;
  int64_t lda;
  const T* B;
  int64_t ldb;
  T beta;
  T* C;
  int64_t ldc;
  int64_t kc;  // depth of one pass; depends on K only (determinism)
  const T* bias = nullptr;  // (N), added to every row of C (beta == 0)
  const T* next_b = nullptr;  // B of the next product of a batch (same layout), prefetched at the end
};

template <class T>
int64_t choose_kc(int64_t K) {
  constexpr int64_t KC = Blocking<T>::KC;
  int64_t passes = (K + KC - 1) / KC;
  int64_t kc = (K + passes - 1) / passes;
  return (kc + 7) & ~int64_t(7);  // multiple of 8: whole transpose blocks
}

template <class T, Path P>
size_t a_buffer_elems(int64_t kc) {
  return size_t(Blocking<T, P>::MC) * kc + 64;
}
template <class T, Path P>
size_t b_buffer_elems(int64_t kc, int64_t nc) {
  constexpr int NR = Blocking<T, P>::NR;
  return size_t((nc + NR - 1) / NR) * NR * kc + 64;
}

/// Spreads software prefetches of a strided region (rows of `row_bytes` bytes, `stride` apart)
/// over the micro-kernel calls that run before the region is packed: the source of a B group is
/// fetched into L2 while the previous group is being multiplied, hiding the DRAM latency of the
/// packing's strided walk.
struct RegionPrefetcher {
  const char* base = nullptr;
  int64_t stride = 0, rows = 0, row_bytes = 0, lines = 0;  // lines: prefetches per row
  int64_t row = 0, line = 0, per_call = 0;

  void reset(const void* p, int64_t stride_bytes, int64_t nrows, int64_t bytes, int64_t calls) {
    base = static_cast<const char*>(p);
    stride = stride_bytes;
    rows = nrows;
    row_bytes = bytes;
    // Offsets 0, 64, ... and the row's last byte: every line the row touches, whatever its
    // alignment.
    lines = bytes / 64 + 1;
    row = line = 0;
    per_call = calls > 0 ? (rows * lines + calls - 1) / calls : 0;
  }
  void clear() { rows = 0; per_call = 0; }
  inline void step() {
    for (int64_t n = per_call; n > 0 && row < rows; --n) {
      const int64_t off = line + 1 < lines ? line * 64 : row_bytes - 1;
      __builtin_prefetch(base + row * stride + off, 0, 2);
      if (++line == lines) {
        line = 0;
        ++row;
      }
    }
  }
};

/// Computes the C rectangle [m0, m1) x [n0, n1) for all of K.
template <class T, Path P>
void run_tile(const Problem<T>& p, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  constexpr int MR = Blocking<T, P>::MR;
  constexpr int NR = Blocking<T, P>::NR;
  constexpr int64_t MC = Blocking<T, P>::MC;
  constexpr int64_t NC = Blocking<T, P>::NC;
  constexpr int64_t JB = Blocking<T, P>::JB;

  WorkspaceLease lease;
  const int64_t kc_max = std::min(p.kc, p.K);
  // A in place when the whole product is one K pass over a few rows (see kDirectAMaxRows).
  const bool direct_a = p.K <= p.kc && p.M <= kDirectAMaxRows;
  T* abuf = direct_a ? nullptr : static_cast<T*>((*lease).a.get(a_buffer_elems<T, P>(kc_max) * sizeof(T)));
  const bool single_ic = m1 - m0 <= MC;
  T* bbuf = static_cast<T*>((*lease).b.get(
      b_buffer_elems<T, P>(kc_max, single_ic ? std::min(JB * NR, n1 - n0) : std::min(NC, n1 - n0)) * sizeof(T)));

  // Strides of op(A)(i, k) and op(B)(k, j) in memory.
  const int64_t a_si = p.trans_a ? 1 : p.lda, a_sk = p.trans_a ? p.lda : 1;
  const int64_t b_sk = p.trans_b ? 1 : p.ldb, b_sj = p.trans_b ? p.ldb : 1;

  RegionPrefetcher pf;
  for (int64_t jc = n0; jc < n1; jc += NC) {
    const int64_t nc = std::min(NC, n1 - jc);
    for (int64_t pc = 0; pc < p.K; pc += p.kc) {
      const int64_t kc = std::min(p.kc, p.K - pc);
      const T beta = pc == 0 ? p.beta : T(1);
      for (int64_t ic = m0; ic < m1; ic += MC) {
        const int64_t mc = std::min(MC, m1 - ic);
        // Pack the A block: MR-row strips.
        if (direct_a) {
          // read in place by the micro-kernel
        } else if (a_si == 1) {
          pack_rows<T, MR>(p.A + ic + pc * a_sk, a_sk, mc, kc, abuf);
        } else {
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int rows = static_cast<int>(std::min<int64_t>(MR, mc - ir));
            pack_panel<T, MR>(p.A + (ic + ir) * a_si + pc * a_sk, a_sk, a_si, rows, kc, abuf + ir * kc);
          }
        }
        for (int64_t jg = 0; jg < nc; jg += JB * NR) {
          const int64_t ng = std::min<int64_t>(JB * NR, nc - jg);
          // B is packed a group of strips at a time right before its first use (still in L1/L2
          // for the ir loop), and reused by the later ic blocks. With a single ic block there is
          // no later use: every group reuses the start of the buffer, which stays in cache.
          T* gbuf = single_ic ? bbuf : bbuf + jg * kc;
          if (ic == m0) {
            if (b_sj == 1) {
              pack_rows<T, NR>(p.B + pc * b_sk + jc + jg, b_sk, ng, kc, gbuf);
            } else {
              for (int64_t jr = jg; jr < jg + ng; jr += NR) {
                const int cols = static_cast<int>(std::min<int64_t>(NR, nc - jr));
                pack_panel<T, NR>(p.B + pc * b_sk + (jc + jr) * b_sj, b_sk, b_sj, cols, kc, gbuf + (jr - jg) * kc);
              }
            }
            // Prefetch the source of the next group to be packed during this group's products.
            int64_t npc = pc, njc = jc, njg = jg + JB * NR;
            const T* src_b = p.B;
            bool has_next = true;
            if (njg >= nc) {
              njg = 0;
              if (single_ic && pc + p.kc < p.K) {
                npc = pc + p.kc;
              } else if (single_ic && jc + NC < n1) {
                npc = 0;
                njc = jc + NC;
              } else if (single_ic && p.next_b && pc + p.kc >= p.K && jc + NC >= n1) {
                // The last group of this product: fetch the first one of the batch's next product.
                npc = 0;
                njc = n0;
                src_b = p.next_b;
              } else {
                has_next = false;
              }
            }
            if (has_next) {
              const int64_t nkc = std::min(p.kc, p.K - npc);
              const int64_t nng = std::min<int64_t>(JB * NR, std::min(NC, n1 - njc) - njg);
              const int64_t calls = ((ng + NR - 1) / NR) * ((mc + MR - 1) / MR);
              const T* src = src_b + npc * b_sk + (njc + njg) * b_sj;
              if (b_sj == 1)
                pf.reset(src, b_sk * int64_t(sizeof(T)), nkc, nng * int64_t(sizeof(T)), calls);
              else
                pf.reset(src, b_sj * int64_t(sizeof(T)), nng, nkc * int64_t(sizeof(T)), calls);
            } else {
              pf.clear();
            }
          } else {
            pf.clear();
          }
          for (int64_t jr = jg; jr < jg + ng; jr += NR) {
            const int cols = static_cast<int>(std::min<int64_t>(NR, nc - jr));
            const T* bstrip = gbuf + (jr - jg) * kc;
            T* cblock = p.C + ic * p.ldc + jc + jr;
            for (int64_t ir = 0; ir < mc; ir += MR) {
              const int rows = static_cast<int>(std::min<int64_t>(MR, mc - ir));
              pf.step();
              const T* a = direct_a ? p.A + (ic + ir) * a_si + pc * a_sk : abuf + ir * kc;
              const T* bias = pc == 0 && p.bias ? p.bias + jc + jr : nullptr;
              kernel_for<T, P>(rows, cols, !direct_a)(kc, a, a_si, a_sk, bstrip, cblock + ir * p.ldc, p.ldc, cols,
                                                      p.alpha, beta, bias);
            }
          }
        }
      }
    }
  }
}

template <class T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0))
      std::fill(c, c + N, T(0));
    else
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
  }
}

// ---------------------------------------------------------------------------------------------
// Few rows (M <= kSkinnyRows: batch-1 decoding, one sentence's readout). Packing would copy all of
// B to use it once, and B is the big operand (e.g. an 8000 x 1024 vocabulary projection), so
// these products stream B straight from memory instead. Each element of C is computed by one
// task in a fixed order, so results do not depend on the thread count either.
// The same path serves a tiny inner dimension (K <= kThinDepth: the outer products of attention's
// backward, (S, 1) x (1, H) per sentence), where packing both operands costs more than the
// K multiply-adds per element of C.
constexpr int64_t kSkinnyRows = 4;
constexpr int64_t kThinDepth = 4;
/// A skinny product runs in parallel from this many bytes of B, in tasks of at least kSkinnyTaskBytes.
constexpr double kSkinnyParallelBytes = 256 * 1024;
constexpr double kSkinnyTaskBytes = 64 * 1024;

/// C[m, n] for n in [n0, n1) when B is stored (N, K): dot products of A's rows with B's rows.
template <class T>
void skinny_dot(int64_t M, int64_t K, T alpha, const T* a, int64_t lda, const T* B, int64_t ldb, T beta, T* C,
                int64_t ldc, int64_t n0, int64_t n1, const T* bias) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = V::size;
  for (int64_t n = n0; n < n1; ++n) {
    const T* b = B + n * ldb;
    for (int64_t m = 0; m < M; ++m) {
      const T* am = a + m * lda;
      V acc0(T(0)), acc1(T(0));
      int64_t k = 0;
      for (; k + 2 * L <= K; k += 2 * L) {
        acc0 = xsimd::fma(V::load_unaligned(am + k), V::load_unaligned(b + k), acc0);
        acc1 = xsimd::fma(V::load_unaligned(am + k + L), V::load_unaligned(b + k + L), acc1);
      }
      T dot = xsimd::hadd(acc0 + acc1);
      for (; k < K; ++k) dot += am[k] * b[k];
      T& c = C[m * ldc + n];
      c = alpha * dot + (bias ? bias[n] : beta == T(0) ? T(0) : beta * c);
    }
  }
}

/// C[m, n0:n1] when B is stored (K, N): rows of B scaled by A's entries and summed over k.
/// A's element (m, k) is at a[m * a_rs + k * a_ks] (a transposed A needs no copy here).
template <class T>
void skinny_axpy(int64_t M, int64_t K, T alpha, const T* a, int64_t a_rs, int64_t a_ks, const T* B, int64_t ldb,
                 T beta, T* C, int64_t ldc, int64_t n0, int64_t n1, const T* bias) {
  using V = xsimd::batch<T>;
  constexpr int64_t L = V::size;
  for (int64_t m = 0; m < M; ++m) {
    T* c = C + m * ldc;
    for (int64_t n = n0; n < n1; ++n) c[n] = bias ? bias[n] : beta == T(0) ? T(0) : beta * c[n];
    for (int64_t k = 0; k < K; ++k) {
      const T s = alpha * a[m * a_rs + k * a_ks];
      const T* b = B + k * ldb;
      const V sv(s);
      int64_t n = n0;
      for (; n + L <= n1; n += L) xsimd::fma(sv, V::load_unaligned(b + n), V::load_unaligned(c + n)).store_unaligned(c + n);
      for (; n < n1; ++n) c[n] += s * b[n];
    }
  }
}

/// Columns [n0, n1) of C = alpha op(A) op(B) + beta C for a skinny product, on the calling thread.
/// A transposed with B transposed: A's M rows are first copied to be contiguous (the dot products
/// load them as vectors); `rows` holds that copy.
template <class T>
void skinny_serial(bool trans_a, bool trans_b, int64_t M, int64_t K, T alpha, const T* A, int64_t lda,
                   const T* B, int64_t ldb, T beta, T* C, int64_t ldc, int64_t n0, int64_t n1, const T* rows,
                   const T* bias) {
  if (!trans_b) {
    skinny_axpy(M, K, alpha, A, trans_a ? 1 : lda, trans_a ? lda : 1, B, ldb, beta, C, ldc, n0, n1, bias);
  } else if (trans_a) {
    skinny_dot(M, K, alpha, rows, K, B, ldb, beta, C, ldc, n0, n1, bias);
  } else {
    skinny_dot(M, K, alpha, A, lda, B, ldb, beta, C, ldc, n0, n1, bias);
  }
}

template <class T>
void gemm_skinny(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                 const T* B, int64_t ldb, T beta, T* C, int64_t ldc, bool allow_parallel, const T* bias) {
  thread_local std::vector<T> rows;
  if (trans_a && trans_b) {
    rows.resize(size_t(M * K));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) rows[size_t(m * K + k)] = A[k * lda + m];
  }
  const T* copied = rows.data();  // this thread's copy: TBB workers must not look up their own
  auto run = [&](int64_t n0, int64_t n1) {
    skinny_serial(trans_a, trans_b, M, K, alpha, A, lda, B, ldb, beta, C, ldc, n0, n1, copied, bias);
  };
  // Few rows: bound by reading B more than by flops, so a share of B worth streaming from memory on
  // a core of its own is a task too.
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const double b_bytes = double(N) * double(K) * double(sizeof(T));
  if (!allow_parallel || tg::num_threads() <= 1 || (flops < kParallelFlops && b_bytes < kSkinnyParallelBytes)) {
    run(0, N);
    return;
  }
  const double columns = std::min(kTaskFlops / (2.0 * double(M) * double(K)), kSkinnyTaskBytes / (double(K) * double(sizeof(T))));
  const int64_t grain = std::max<int64_t>(16, int64_t(columns));
  tbb_for(tbb::blocked_range<int64_t>(0, N, grain),
          [&](const tbb::blocked_range<int64_t>& r) { run(r.begin(), r.end()); });
}

/// A packed product on the path P: the task grid over C, each task a run_tile.
template <class T, Path P>
void gemm_tiled(const Problem<T>& p, bool allow_parallel) {
  constexpr int MR = Blocking<T, P>::MR;
  constexpr int NR = Blocking<T, P>::NR;
  const int64_t M = p.M, N = p.N;
  const double flops = 2.0 * double(M) * double(N) * double(p.K);
  const int threads = allow_parallel ? tg::num_threads() : 1;
  if (threads <= 1 || flops < kParallelFlops) {
    run_tile<T, P>(p, 0, M, 0, N);
    return;
  }
  // Task grid: aim for 2 tasks per thread when the work allows (load balance on a busy machine).
  const int64_t n_strips = (N + NR - 1) / NR;
  const int64_t m_strips = (M + MR - 1) / MR;
  int64_t want = std::min<int64_t>(int64_t(threads) * 2, std::max<int64_t>(threads, int64_t(flops / kTaskFlops)));
  // Splitting N re-packs A in every part, splitting M re-packs B: split the larger of M and N.
  int64_t n_parts, m_parts;
  if (M > N) {
    m_parts = std::min(want, m_strips);
    n_parts = std::min((want + m_parts - 1) / m_parts, n_strips);
  } else {
    n_parts = std::min(want, n_strips);
    m_parts = std::min((want + n_parts - 1) / n_parts, m_strips);
  }
  const int64_t n_per = (n_strips + n_parts - 1) / n_parts;  // strips per column chunk
  const int64_t m_per = (m_strips + m_parts - 1) / m_parts;  // strips per row range
  n_parts = (n_strips + n_per - 1) / n_per;
  m_parts = (m_strips + m_per - 1) / m_per;

  tbb_for(
      tbb::blocked_range2d<int64_t>(0, m_parts, 1, 0, n_parts, 1),
      [&](const tbb::blocked_range2d<int64_t>& r) {
        for (int64_t mi = r.rows().begin(); mi < r.rows().end(); ++mi)
          for (int64_t ni = r.cols().begin(); ni < r.cols().end(); ++ni) {
            const int64_t m0 = mi * m_per * MR, m1 = std::min(M, (mi + 1) * m_per * MR);
            const int64_t n0 = ni * n_per * NR, n1 = std::min(N, (ni + 1) * n_per * NR);
            run_tile<T, P>(p, m0, m1, n0, n1);
          }
      },
      tbb::simple_partitioner());
}

template <class T>
void gemm_impl(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
               int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc, bool allow_parallel,
               const T* bias = nullptr, const T* next_b = nullptr) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (bias) {
      for (int64_t i = 0; i < M; ++i) std::copy(bias, bias + N, C + i * ldc);
    } else if (beta != T(1)) {
      scale_c(M, N, beta, C, ldc);
    }
    return;
  }
  if (M <= kSkinnyRows || K <= kThinDepth) {
    gemm_skinny(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, allow_parallel, bias);
    return;
  }
  const Problem<T> p{trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, choose_kc<T>(K), bias, next_b};
  if (tg::cpu::isa() == tg::cpu::Isa::avx512)
    gemm_tiled<T, Path::avx512>(p, allow_parallel);
  else
    gemm_tiled<T, Path::avx2>(p, allow_parallel);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
template <class T>
void gemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                    int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      T acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        T a = trans_a ? A[k * lda + i] : A[i * lda + k];
        T b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      C[i * ldc + j] = alpha * acc + (beta == T(0) ? T(0) : beta * C[i * ldc + j]);
    }
}

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const T* bias) {
  if (bias && beta != T(0)) throw std::invalid_argument("gemm: a row bias needs beta == 0");
  gemm_impl(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, true, bias);
}

template <class T>
void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                 const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  gemm_impl(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, false);
}

template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha,
                  const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b,
                  T beta, T* C, int64_t ldc, int64_t stride_c) {
  if (batch <= 0 || M <= 0 || N <= 0) return;
  // Shared B with A and C stacked row after row: one tall product (same per-element arithmetic).
  if (batch > 1 && stride_b == 0 && !trans_a && stride_a == M * lda && stride_c == M * ldc) {
    gemm_impl(false, trans_b, batch * M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, true);
    return;
  }
  // Entries writing the same C are summed into it, in batch order (the same for any thread count).
  if (stride_c == 0) {
    for (int64_t i = 0; i < batch; ++i)
      gemm_impl(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, i == 0 ? beta : T(1),
                C, ldc, true);
    return;
  }
  const double flops = 2.0 * double(M) * double(N) * double(K);
  // Tiny skinny entries (attention's context per sentence, (1, S) x (S, H), and its backward):
  // straight to the serial kernel, without the per-call setup of gemm_impl.
  if ((M <= kSkinnyRows || K <= kThinDepth) && !(trans_a && trans_b) && flops * double(batch) < kParallelFlops) {
    for (int64_t i = 0; i < batch; ++i)
      skinny_serial(trans_a, trans_b, M, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                    C + i * stride_c, ldc, int64_t{0}, N, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr));
    return;
  }
  // The next entry's B (when it differs), for its first panels to be prefetched during this one.
  auto next_b = [&](int64_t i, int64_t end) { return stride_b != 0 && i + 1 < end ? B + (i + 1) * stride_b : nullptr; };
  const int threads = tg::num_threads();
  // A single entry, or large entries too few to give every thread two: one (parallel) product at a
  // time. Otherwise whole entries per task: splitting one product re-packs its operands per part.
  if (batch == 1 || threads <= 1 || flops * double(batch) < kParallelFlops ||
      (flops >= 8.0 * kParallelFlops && batch < 2 * int64_t(threads))) {
    for (int64_t i = 0; i < batch; ++i)
      gemm_impl(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                C + i * stride_c, ldc, true, static_cast<const T*>(nullptr), next_b(i, batch));
    return;
  }
  // Many entries: serial products, whole entries per task.
  // Runs of consecutive entries (about 4 per thread), so each entry's product can prefetch the next
  // one's B on the same thread.
  const int64_t grain = std::max<int64_t>({1, int64_t(kTaskFlops / std::max(flops, 1.0)), batch / (4 * int64_t(threads))});
  tbb_for(tbb::blocked_range<int64_t>(0, batch, grain), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t i = r.begin(); i < r.end(); ++i)
      gemm_impl(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                C + i * stride_c, ldc, false, static_cast<const T*>(nullptr), next_b(i, r.end()));
  });
}

#define TG_INSTANTIATE_GEMM(T)                                                                     \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*,   \
                        int64_t, T, T*, int64_t, const T*);                                       \
  template void gemm_serial<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T,  \
                               T*, int64_t);                                                      \
  template void gemm_reference<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t,   \
                                  const T*, int64_t, T, T*, int64_t);                             \
  template void gemm_batched<T>(bool, bool, int64_t, int64_t, int64_t, int64_t, T, const T*,     \
                                int64_t, int64_t, const T*, int64_t, int64_t, T, T*, int64_t,     \
                                int64_t);
TG_INSTANTIATE_GEMM(float)
TG_INSTANTIATE_GEMM(double)

}  // namespace tg::kernels
