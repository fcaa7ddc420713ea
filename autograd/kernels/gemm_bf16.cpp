// bf16 products with float32 accumulation: conversion, packing, the AVX2 + FMA fallback kernel and
// the driver. The AVX-512 BF16 kernel lives in gemm_bf16_avx512.cpp, the only file compiled with
// -mavx512bf16 (called only when the CPU has it).
#include "autograd/kernels/gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "autograd/cpu.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/memory.h"
#include "autograd/parallel.h"

namespace tg::kernels::bf16 {

namespace {

/// Per-thread scratch for the packed operands, kept between calls and grown as needed. Transient
/// blocks of megabytes taken from the caching allocator at every call went back to the system
/// whenever the cache was at its limit, and the kernel zeroed fresh pages for each (4x float32's
/// page faults in B's training step). Slots: 0 op(A) packed, 1 op(B) packed, 2 and 3 the widened
/// operands of the avx2 path.
class Scratch {
 public:
  Scratch(int slot, std::size_t n) : p_(get(slot, n)) {}
  template <class T> T* as() const { return static_cast<T*>(p_); }

  struct Slots {
    void* p[4] = {};
    std::size_t bytes[4] = {};
    Slots() = default;
    Slots(const Slots&) = delete;
    Slots& operator=(const Slots&) = delete;
    ~Slots() {
      for (int i = 0; i < 4; ++i)
        if (p[i]) memory::deallocate(p[i], bytes[i]);
    }
  };
  /// While alive, Scratch on this thread uses `slots` (a task's own, see for_each_entry) instead
  /// of the thread's.
  class Lease {
   public:
    explicit Lease(Slots& slots) : prev_(t_lease) { t_lease = &slots; }
    ~Lease() { t_lease = prev_; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    Slots* prev_;
  };

 private:
  static inline thread_local Slots* t_lease = nullptr;
  static void* get(int slot, std::size_t n) {
    thread_local Slots own;
    Slots& slots = t_lease ? *t_lease : own;
    if (slots.bytes[slot] < n) {
      if (slots.p[slot]) memory::deallocate(slots.p[slot], slots.bytes[slot]);
      slots.p[slot] = nullptr, slots.bytes[slot] = 0;
      slots.p[slot] = memory::allocate_at_least(n, &slots.bytes[slot]);
    }
    return slots.p[slot];
  }
  void* p_;
};

/// entry(i) for i < batch (serial products), in a fixed number of tasks of consecutive entries on
/// the threads. Each task's scratch belongs to the calling thread, not to the thread that happens to
/// run the task: with thread-local scratch, a worker that took no entry in the first steps (a
/// busy core) grew its own scratch in a later one, so a steady training step still allocated.
template <class F> void for_each_entry(std::int64_t batch, F&& entry) {
  thread_local std::vector<std::unique_ptr<Scratch::Slots>> sets;
  const std::int64_t tasks = std::min<std::int64_t>(batch, 4 * std::int64_t{tg::num_threads()});
  while (static_cast<std::int64_t>(sets.size()) < tasks) sets.push_back(std::make_unique<Scratch::Slots>());
  auto* mine = &sets;  // the caller's: a thread_local named in the tasks would be the worker's
  parallel_for(tasks, 1, [&, mine](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const Scratch::Lease lease(*(*mine)[static_cast<std::size_t>(t)]);
      for (std::int64_t i = batch * t / tasks; i < batch * (t + 1) / tasks; ++i) entry(i);
    }
  });
}

/// from_float on 8 floats (bit-identical), as 8 uint16 in the low 128 bits.
inline __m128i convert8(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

void convert_serial(const float* src, std::int64_t n, std::uint16_t* dst) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), convert8(_mm256_loadu_ps(src + i)));
  for (; i < n; ++i) dst[i] = from_float(src[i]);
}

constexpr int kPanel = 32;             // columns of a packed panel
constexpr std::int64_t kMC = 96;       // rows of C per task
constexpr std::int64_t kPanelsPerTask = 8;
constexpr double kParallelMacs = 1 << 20;  // products below this many multiply-adds run serially

/// op(A) (M x K) as bf16 rows of `stride` pairs (K padded with a zero to even).
void pack_a(bool trans_a, std::int64_t M, std::int64_t K, const float* A, std::int64_t lda, std::uint16_t* dst,
            std::int64_t stride, bool parallel) {
  const std::int64_t width = stride * 2;
  if (!trans_a) {
    auto rows = [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) {
        convert_serial(A + i * lda, K, dst + i * width);
        for (std::int64_t k = K; k < width; ++k) dst[i * width + k] = 0;
      }
    };
    if (parallel) parallel_for(M, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(K, 1)), rows);
    else rows(0, M);
    return;
  }
  // A stored (K, M): blocks of 8 rows of op(A); two stored rows (k, k+1) give 8 pairs at once.
  auto rows = [&](std::int64_t b0, std::int64_t b1) {
    std::uint32_t* d32 = reinterpret_cast<std::uint32_t*>(dst);
    for (std::int64_t i0 = b0 * 8; i0 < std::min(b1 * 8, M); i0 += 8) {
      const std::int64_t n = std::min<std::int64_t>(8, M - i0);
      alignas(16) std::uint16_t lo[8] = {}, hi[8] = {};
      for (std::int64_t q = 0; q < stride; ++q) {
        const std::int64_t k = 2 * q;
        if (n == 8) {
          _mm_store_si128(reinterpret_cast<__m128i*>(lo), convert8(_mm256_loadu_ps(A + k * lda + i0)));
          if (k + 1 < K) _mm_store_si128(reinterpret_cast<__m128i*>(hi), convert8(_mm256_loadu_ps(A + (k + 1) * lda + i0)));
          else _mm_store_si128(reinterpret_cast<__m128i*>(hi), _mm_setzero_si128());
        } else {
          for (std::int64_t r = 0; r < n; ++r) {
            lo[r] = from_float(A[k * lda + i0 + r]);
            hi[r] = k + 1 < K ? from_float(A[(k + 1) * lda + i0 + r]) : 0;
          }
        }
        for (std::int64_t r = 0; r < n; ++r) d32[(i0 + r) * stride + q] = lo[r] | (std::uint32_t{hi[r]} << 16);
      }
    }
  };
  const std::int64_t blocks = (M + 7) / 8;
  if (parallel) parallel_for(blocks, std::max<std::int64_t>(1, 2048 / std::max<std::int64_t>(K, 1)), rows);
  else rows(0, blocks);
}

/// Transposes an 8 x 8 block of 32-bit values (rows `in[r]`) into `out` rows `out_stride` apart.
inline void transpose8x8(const std::uint32_t* in, std::int64_t in_stride, std::uint32_t* out, std::int64_t out_stride) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i * in_stride)));
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
  for (int i = 0; i < 8; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * out_stride), _mm256_castps_si256(t[i]));
}

void pack_b_into(bool trans_b, std::int64_t K, std::int64_t N, const float* B, std::int64_t ldb, PackedB& P,
                 bool parallel) {
  const std::int64_t pairs = P.pairs;
  std::uint16_t* out = P.data;
  auto panels = [&](std::int64_t p0, std::int64_t p1) {
    if (trans_b) {
      // Column n of op(B) is row n of B: its pairs are consecutive. The panel's rows are converted
      // in blocks of kChunk pairs into `tmp`, then transposed into the panel 8 x 8 at a time.
      constexpr std::int64_t kChunk = 128;
      alignas(64) std::uint32_t tmp[kPanel][kChunk];
      for (std::int64_t p = p0; p < p1; ++p) {
        std::uint32_t* panel32 = reinterpret_cast<std::uint32_t*>(out + p * pairs * 64);
        const std::int64_t n0 = p * kPanel, cols = std::min<std::int64_t>(kPanel, N - n0);
        for (std::int64_t q0 = 0; q0 < pairs; q0 += kChunk) {
          const std::int64_t nq = std::min(kChunk, pairs - q0), k0 = 2 * q0, nk = std::min(2 * nq, K - k0);
          for (std::int64_t j = 0; j < kPanel; ++j) {
            std::uint16_t* t16 = reinterpret_cast<std::uint16_t*>(tmp[j]);
            if (j < cols) convert_serial(B + (n0 + j) * ldb + k0, nk, t16);
            for (std::int64_t k = (j < cols ? nk : 0); k < 2 * kChunk; ++k) t16[k] = 0;
          }
          std::int64_t q = 0;
          for (; q + 8 <= nq; q += 8)
            for (int j = 0; j < kPanel; j += 8) transpose8x8(&tmp[j][q], kChunk, panel32 + (q0 + q) * kPanel + j, kPanel);
          for (; q < nq; ++q)
            for (std::int64_t j = 0; j < kPanel; ++j) panel32[(q0 + q) * kPanel + j] = tmp[j][q];
        }
      }
      return;
    }
    // Rows k, k+1 of B hold a pair for every column: blocks of kRowPairs pairs, each read once
    // across the task's panels while the block stays in cache.
    constexpr std::int64_t kRowPairs = 32;
    std::uint16_t row[2][kPanel];
    for (std::int64_t q0 = 0; q0 < pairs; q0 += kRowPairs) {
      const std::int64_t q1 = std::min(pairs, q0 + kRowPairs);
      for (std::int64_t p = p0; p < p1; ++p) {
        std::uint16_t* panel = out + p * pairs * 64;
        const std::int64_t n0 = p * kPanel, cols = std::min<std::int64_t>(kPanel, N - n0);
        for (std::int64_t q = q0; q < q1; ++q) {
          std::uint16_t* d = panel + q * 64;
          if (cols == kPanel && 2 * q + 1 < K) {
            const float* r0 = B + 2 * q * ldb + n0;
            for (int j = 0; j < kPanel; j += 8) {
              const __m128i a = convert8(_mm256_loadu_ps(r0 + j)), b = convert8(_mm256_loadu_ps(r0 + ldb + j));
              _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * j), _mm_unpacklo_epi16(a, b));
              _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * j + 8), _mm_unpackhi_epi16(a, b));
            }
            continue;
          }
          for (int e = 0; e < 2; ++e) {
            const std::int64_t k = 2 * q + e;
            if (k < K) convert_serial(B + k * ldb + n0, cols, row[e]);
            for (std::int64_t j = (k < K ? cols : 0); j < kPanel; ++j) row[e][j] = 0;
          }
          for (int j = 0; j < kPanel; ++j) d[2 * j] = row[0][j], d[2 * j + 1] = row[1][j];
        }
      }
    }
  };
  if (parallel) parallel_for(P.panels, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(pairs, 1)), panels);
  else panels(0, P.panels);
}

PackedB make_packed(std::int64_t K, std::int64_t N, void* storage) {
  PackedB P;
  P.K = K, P.N = N, P.pairs = (K + 1) / 2, P.panels = (N + kPanel - 1) / kPanel;
  P.data = static_cast<std::uint16_t*>(storage);
  return P;
}

// ---- the AVX2 + FMA kernel: bf16 widened to float32 in registers --------------------------------

/// Rows [0, R) of C times 16 columns (half a panel) starting at column `h`.
template <int R>
void kernel_avx2_half(int h, int cols, std::int64_t pairs, const std::uint32_t* a, std::int64_t a_stride,
                      const std::uint16_t* panel, float beta, float* C, std::int64_t ldc, const float* bias) {
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const std::uint16_t* b = panel + 2 * h;
  for (std::int64_t q = 0; q < pairs; ++q, b += 64) {
    const __m256i v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 16));
    const __m256 b00 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16));
    const __m256 b01 = _mm256_castsi256_ps(_mm256_and_si256(v0, hi_mask));
    const __m256 b10 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16));
    const __m256 b11 = _mm256_castsi256_ps(_mm256_and_si256(v1, hi_mask));
    for (int r = 0; r < R; ++r) {
      const __m256i av = _mm256_set1_epi32(static_cast<int>(a[r * a_stride + q]));
      const __m256 a0 = _mm256_castsi256_ps(_mm256_slli_epi32(av, 16));
      const __m256 a1 = _mm256_castsi256_ps(_mm256_and_si256(av, hi_mask));
      acc[r][0] = _mm256_fmadd_ps(a1, b01, _mm256_fmadd_ps(a0, b00, acc[r][0]));
      acc[r][1] = _mm256_fmadd_ps(a1, b11, _mm256_fmadd_ps(a0, b10, acc[r][1]));
    }
  }
  const int n = std::min(16, cols - h);
  for (int r = 0; r < R; ++r) {
    float* c = C + r * ldc + h;
    alignas(32) float t[16];
    _mm256_store_ps(t, acc[r][0]);
    _mm256_store_ps(t + 8, acc[r][1]);
    for (int j = 0; j < n; ++j) {
      float v = beta != 0.0f ? std::fmaf(beta, c[j], t[j]) : t[j];
      if (bias) v += bias[h + j];
      c[j] = v;
    }
  }
}

/// Rows [0, R) (R <= 2: decoding) times the whole 32-column panel in one pass: four accumulators a
/// row, so four independent FMA chains even for one row; the panel's bf16 pairs widened one
/// vector at a time. Same order of additions per column as kernel_avx2_half.
template <int R>
void kernel_avx2_full(int cols, std::int64_t pairs, const std::uint32_t* a, std::int64_t a_stride,
                      const std::uint16_t* panel, float beta, float* C, std::int64_t ldc, const float* bias) {
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  __m256 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_setzero_ps();
  const std::uint16_t* b = panel;
  for (std::int64_t q = 0; q < pairs; ++q, b += 64) {
    __m256 a0[R], a1[R];
    for (int r = 0; r < R; ++r) {
      const __m256i av = _mm256_set1_epi32(static_cast<int>(a[r * a_stride + q]));
      a0[r] = _mm256_castsi256_ps(_mm256_slli_epi32(av, 16));
      a1[r] = _mm256_castsi256_ps(_mm256_and_si256(av, hi_mask));
    }
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 16 * c));
      const __m256 lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
      const __m256 hi = _mm256_castsi256_ps(_mm256_and_si256(v, hi_mask));
      for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(a1[r], hi, _mm256_fmadd_ps(a0[r], lo, acc[r][c]));
    }
  }
  for (int r = 0; r < R; ++r) {
    float* c = C + r * ldc;
    alignas(32) float t[32];
    for (int v = 0; v < 4; ++v) _mm256_store_ps(t + 8 * v, acc[r][v]);
    for (int j = 0; j < cols; ++j) {
      float x = beta != 0.0f ? std::fmaf(beta, c[j], t[j]) : t[j];
      if (bias) x += bias[j];
      c[j] = x;
    }
  }
}

template <int R>
void kernel_avx2(int cols, std::int64_t pairs, const std::uint32_t* a, std::int64_t a_stride, const std::uint16_t* panel,
                 float beta, float* C, std::int64_t ldc, const float* bias) {
  kernel_avx2_half<R>(0, cols, pairs, a, a_stride, panel, beta, C, ldc, bias);
  if (cols > 16) kernel_avx2_half<R>(16, cols, pairs, a, a_stride, panel, beta, C, ldc, bias);
}

constexpr int kRowsAvx2 = 4;
constexpr int kRowsAvx512 = 12;

void kernel(Path path, int rows, int cols, std::int64_t pairs, const std::uint32_t* a, std::int64_t a_stride,
            const std::uint16_t* panel, float beta, float* C, std::int64_t ldc, const float* bias) {
  if (path == Path::avx512bf16) {
    detail::kernel_avx512bf16(rows, cols, pairs, a, a_stride, panel, beta, C, ldc, bias);
    return;
  }
  switch (rows) {
    case 1: return kernel_avx2_full<1>(cols, pairs, a, a_stride, panel, beta, C, ldc, bias);
    case 2: return kernel_avx2_full<2>(cols, pairs, a, a_stride, panel, beta, C, ldc, bias);
    case 3: return kernel_avx2<3>(cols, pairs, a, a_stride, panel, beta, C, ldc, bias);
    default: return kernel_avx2<4>(cols, pairs, a, a_stride, panel, beta, C, ldc, bias);
  }
}

/// C = A_packed B_packed (+ beta C, + bias): tasks of kMC rows x kPanelsPerTask panels; inside a
/// task, each strip of register rows runs over the task's panels (the strip's pairs stay in L1).
void run(Path path, std::int64_t M, const std::uint32_t* a, std::int64_t a_stride, const PackedB& B, float beta,
         float* C, std::int64_t ldc, const float* bias, bool parallel) {
  if (M <= 0 || B.N <= 0) return;
  const int mr = path == Path::avx512bf16 ? kRowsAvx512 : kRowsAvx2;
  const std::int64_t mblocks = (M + kMC - 1) / kMC;
  const std::int64_t per_task = M <= 4 ? 2 : kPanelsPerTask;  // few rows: thin tasks, the product streams B
  const std::int64_t nblocks = (B.panels + per_task - 1) / per_task;
  auto tasks = [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t nb = t / mblocks, mb = t % mblocks;
      const std::int64_t m0 = mb * kMC, m1 = std::min(M, m0 + kMC);
      const std::int64_t p0 = nb * per_task, p1 = std::min(B.panels, p0 + per_task);
      for (std::int64_t r0 = m0; r0 < m1; r0 += mr) {
        const int rows = static_cast<int>(std::min<std::int64_t>(mr, m1 - r0));
        for (std::int64_t p = p0; p < p1; ++p) {
          const int cols = static_cast<int>(std::min<std::int64_t>(kPanel, B.N - p * kPanel));
          kernel(path, rows, cols, B.pairs, a + r0 * a_stride, a_stride, B.data + p * B.pairs * 64, beta,
                 C + r0 * ldc + p * kPanel, ldc, bias ? bias + p * kPanel : nullptr);
        }
      }
    }
  };
  const std::int64_t n_tasks = mblocks * nblocks;
  if (parallel && n_tasks > 1) parallel_for(n_tasks, 1, tasks);
  else tasks(0, n_tasks);
}

bool is_parallel(std::int64_t M, std::int64_t N, std::int64_t K) {
  return tg::num_threads() > 1 && static_cast<double>(M) * N * K >= kParallelMacs;
}

/// The avx2 path from kAvx2WidenRows rows: op(B) widened back to float32 (bf16 values) and A
/// rounded to bf16 values, then the float32 GEMM. Without bf16 arithmetic the FMA peak is the
/// limit; the in-register widening of the small-M kernel would cost more than it saves here.
void gemm_widened(bool trans_a, std::int64_t M, std::int64_t K, const float* A, std::int64_t lda, const PackedB& B,
                  float beta, float* C, std::int64_t ldc, const float* bias, bool parallel) {
  const std::int64_t N = B.N, rows = trans_a ? K : M, cols = trans_a ? M : K;
  Scratch af(2, static_cast<std::size_t>(rows * cols) * 4), bfl(3, static_cast<std::size_t>(K * N) * 4);
  float* a = af.as<float>();
  float* b = bfl.as<float>();
  auto round_rows = [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* src = A + r * lda;
      float* d = a + r * cols;
      std::int64_t j = 0;
      for (; j + 8 <= cols; j += 8) {
        const __m256i h = _mm256_cvtepu16_epi32(convert8(_mm256_loadu_ps(src + j)));
        _mm256_storeu_ps(d + j, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
      }
      for (; j < cols; ++j) d[j] = round(src[j]);
    }
  };
  auto unpack = [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t n0 = p * kPanel, nc = std::min<std::int64_t>(kPanel, N - n0);
      const std::uint16_t* panel = B.data + p * B.pairs * 64;
      for (std::int64_t k = 0; k < K; ++k) {
        const std::uint16_t* src = panel + (k / 2) * 64 + (k & 1);
        float* d = b + k * N + n0;
        for (std::int64_t j = 0; j < nc; ++j) d[j] = to_float(src[2 * j]);
      }
    }
  };
  // kernels::gemm takes a bias only with beta == 0; otherwise it is added after.
  const float* fused_bias = beta == 0.0f ? bias : nullptr;
  if (parallel) {
    parallel_for(rows, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(cols, 1)), round_rows);
    parallel_for(B.panels, std::max<std::int64_t>(1, 2048 / std::max<std::int64_t>(K, 1)), unpack);
    kernels::gemm<float>(trans_a, false, M, N, K, 1.0f, a, cols, b, N, beta, C, ldc, fused_bias);
  } else {
    round_rows(0, rows);
    unpack(0, B.panels);
    if (fused_bias) kernels::gemm<float>(trans_a, false, M, N, K, 1.0f, a, cols, b, N, beta, C, ldc, fused_bias);
    else kernels::gemm_serial<float>(trans_a, false, M, N, K, 1.0f, a, cols, b, N, beta, C, ldc);
  }
  if (bias && !fused_bias)
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) C[i * ldc + j] += bias[j];
}

void gemm_impl(bool trans_a, std::int64_t M, std::int64_t K, const float* A, std::int64_t lda, const PackedB& B,
               float beta, float* C, std::int64_t ldc, const float* bias, Path path, bool parallel) {
  if (M <= 0 || B.N <= 0) return;
  if (path == Path::avx2 && M >= kAvx2WidenRows) {
    gemm_widened(trans_a, M, K, A, lda, B, beta, C, ldc, bias, parallel);
    return;
  }
  const std::int64_t stride = (K + 1) / 2;
  Scratch pa(0, static_cast<std::size_t>(M * stride) * 4);
  pack_a(trans_a, M, K, A, lda, pa.as<std::uint16_t>(), stride, parallel);
  run(path, M, pa.as<std::uint32_t>(), stride, B, beta, C, ldc, bias, parallel);
}

/// At most kDirectRows rows with op(B) not packed (not a cached weight): the float32 GEMM on the
/// float32 operands. Rounding B to bf16 costs more than this product (about 14 vector operations
/// per 8 values against one FMA), and packing it far more; see gemm_bf16.h.
void gemm_float(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
                std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
                const float* bias, bool parallel) {
  const float* fused_bias = beta == 0.0f ? bias : nullptr;  // kernels::gemm: a bias only with beta == 0
  if (parallel || fused_bias) kernels::gemm<float>(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, fused_bias);
  else kernels::gemm_serial<float>(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  if (bias && !fused_bias)
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) C[i * ldc + j] += bias[j];
}

void gemm_any(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
              std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
              const float* bias, Path path, bool parallel) {
  if (M <= 0 || N <= 0) return;
  if (!available(path)) path = Path::avx2;
  if (M <= kDirectRows) {
    gemm_float(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, parallel);
    return;
  }
  PackedB P = make_packed(K, N, nullptr);
  Scratch pb(1, P.bytes());
  P.data = pb.as<std::uint16_t>();
  pack_b_into(trans_b, K, N, B, ldb, P, parallel);
  gemm_impl(trans_a, M, K, A, lda, P, beta, C, ldc, bias, path, parallel);
}

}  // namespace

void convert(const float* src, std::int64_t n, std::uint16_t* dst) {
  parallel_for(n, kGrainCheap, [&](std::int64_t i0, std::int64_t i1) {
    // Chunks may start anywhere: each element's result is the same either way.
    convert_serial(src + i0, i1 - i0, dst + i0);
  });
}

bool hardware() {
  const cpu::Features& f = cpu::features();  // counts a feature only when the OS saves its registers
  return f.avx512_bf16 && f.avx512f && f.avx512bw && f.avx512vl;
}

bool available(Path path) { return path == Path::avx2 || hardware(); }

Path default_path() {
  // TG_CPU=avx2 (cpu::isa()) caps the bf16 kernels as it caps the others; TG_BF16_PATH=avx2 only these.
  static const bool forced_avx2 = [] {
    const char* env = std::getenv("TG_BF16_PATH");
    return env && std::string_view(env) == "avx2";
  }();
  return !forced_avx2 && hardware() && cpu::isa() == cpu::Isa::avx512 ? Path::avx512bf16 : Path::avx2;
}

const char* path_name(Path path) {
  return path == Path::avx512bf16 ? "avx512_bf16 (vdpbf16ps)" : "avx2 fallback (bf16 operands widened to fp32, FMA)";
}

PackedB pack_b(bool trans_b, std::int64_t K, std::int64_t N, const float* B, std::int64_t ldb) {
  PackedB P;
  pack_b(trans_b, K, N, B, ldb, P);
  return P;
}

void pack_b(bool trans_b, std::int64_t K, std::int64_t N, const float* B, std::int64_t ldb, PackedB& P) {
  if (!(P.owner && P.K == K && P.N == N)) {
    P = make_packed(K, N, nullptr);
    std::size_t bytes = 0;
    void* block = memory::allocate_at_least(std::max<std::size_t>(P.bytes(), 64), &bytes);
    P.owner = std::shared_ptr<void>(block, [bytes](void* p) { memory::deallocate(p, bytes); });
    P.data = static_cast<std::uint16_t*>(block);
  }
  pack_b_into(trans_b, K, N, B, ldb, P, is_parallel(1, N, K * 64));
}

void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
          std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
          const float* bias, Path path) {
  gemm_any(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, path, is_parallel(M, N, K));
}

void gemm_serial(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
                 std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
                 Path path) {
  gemm_any(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, nullptr, path, false);
}

void gemm_packed(bool trans_a, std::int64_t M, const float* A, std::int64_t lda, const PackedB& B, float beta,
                 float* C, std::int64_t ldc, const float* bias, Path path) {
  if (!available(path)) path = Path::avx2;
  gemm_impl(trans_a, M, B.K, A, lda, B, beta, C, ldc, bias, path, is_parallel(M, B.N, B.K));
}

void gemm_batched(bool trans_a, bool trans_b, std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K,
                  const float* A, std::int64_t lda, std::int64_t stride_a, const float* B, std::int64_t ldb,
                  std::int64_t stride_b, float beta, float* C, std::int64_t ldc, std::int64_t stride_c, Path path) {
  if (batch <= 0 || M <= 0 || N <= 0) return;
  if (!available(path)) path = Path::avx2;
  const bool big = is_parallel(M, N, K);
  if (stride_b == 0) {  // one B for every entry: packed once
    PackedB P = make_packed(K, N, nullptr);
    Scratch pb(1, P.bytes());
    P.data = pb.as<std::uint16_t>();
    pack_b_into(trans_b, K, N, B, ldb, P, big);
    auto entry = [&](std::int64_t i, bool parallel) {
      gemm_impl(trans_a, M, K, A + i * stride_a, lda, P, stride_c == 0 && i > 0 ? 1.0f : beta, C + i * stride_c, ldc,
                nullptr, path, parallel);
    };
    if (stride_c == 0 || big || tg::num_threads() <= 1)
      for (std::int64_t i = 0; i < batch; ++i) entry(i, big);
    else
      for_each_entry(batch, [&](std::int64_t i) { entry(i, false); });
    return;
  }
  auto entry = [&](std::int64_t i, bool parallel) {
    gemm_any(trans_a, trans_b, M, N, K, A + i * stride_a, lda, B + i * stride_b, ldb,
             stride_c == 0 && i > 0 ? 1.0f : beta, C + i * stride_c, ldc, nullptr, path, parallel);
  };
  // Each entry's result is the same computed alone or beside others: entries in parallel when
  // each is small, one after the other (each in parallel) when large; sums in batch order.
  if (stride_c == 0 || big || tg::num_threads() <= 1 || batch == 1)
    for (std::int64_t i = 0; i < batch; ++i) entry(i, big);
  else
    for_each_entry(batch, [&](std::int64_t i) { entry(i, false); });
}

void gemm_reference(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
                    std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
                    const float* bias) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) {
        const float a = round(trans_a ? A[k * lda + i] : A[i * lda + k]);
        const float b = round(trans_b ? B[j * ldb + k] : B[k * ldb + j]);
        acc = std::fmaf(a, b, acc);
      }
      float v = beta != 0.0f ? std::fmaf(beta, C[i * ldc + j], acc) : acc;
      if (bias) v += bias[j];
      C[i * ldc + j] = v;
    }
}

}  // namespace tg::kernels::bf16
