// The AVX-512 BF16 micro-kernel of the bf16 products (gemm_bf16.h). The only file compiled with
// -mavx512bf16 -mavx512f -mavx512bw -mavx512vl (autograd/CMakeLists.txt); gemm_bf16.cpp calls it
// only when the CPU reports avx512_bf16, so the rest of the library runs on any AVX2 CPU.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "autograd/kernels/gemm_bf16.h"

namespace tg::kernels::bf16::detail {

namespace {

/// Rows [0, R) of C times one 32-column panel: per pair (k, k+1), two panel loads and 2R vdpbf16ps,
/// each adding a[r][k] b[k][j] + a[r][k+1] b[k+1][j] into lane j of a float32 accumulator.
template <int R>
void tile(int cols, std::int64_t pairs, const std::uint32_t* a, std::int64_t a_stride, const std::uint16_t* panel,
          float beta, float* C, std::int64_t ldc, const float* bias) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const std::uint16_t* b = panel;
  for (std::int64_t q = 0; q < pairs; ++q, b += 64) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + 32);
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * a_stride + q]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  const __mmask16 m0 = static_cast<__mmask16>(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= 32 ? 0xffff : cols <= 16 ? 0 : (1u << (cols - 16)) - 1);
  const __m512 vbeta = _mm512_set1_ps(beta);
  const __m512 bias0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 bias1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
  for (int r = 0; r < R; ++r) {
    float* c = C + r * ldc;
    __m512 v0 = acc[r][0], v1 = acc[r][1];
    if (beta != 0.0f) {
      v0 = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m0, c), v0);
      v1 = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m1, c + 16), v1);
    }
    if (bias) v0 = _mm512_add_ps(v0, bias0), v1 = _mm512_add_ps(v1, bias1);
    _mm512_mask_storeu_ps(c, m0, v0);
    _mm512_mask_storeu_ps(c + 16, m1, v1);
  }
}

template <int... R>
void dispatch(int rows, int cols, std::int64_t pairs, const std::uint32_t* a, std::int64_t a_stride,
              const std::uint16_t* panel, float beta, float* C, std::int64_t ldc, const float* bias,
              std::integer_sequence<int, R...>) {
  ((rows == R + 1 ? tile<R + 1>(cols, pairs, a, a_stride, panel, beta, C, ldc, bias) : void()), ...);
}

}  // namespace

void kernel_avx512bf16(int rows, int cols, std::int64_t pairs, const std::uint32_t* a, std::int64_t a_stride,
                       const std::uint16_t* panel, float beta, float* C, std::int64_t ldc, const float* bias) {
  dispatch(rows, cols, pairs, a, a_stride, panel, beta, C, ldc, bias, std::make_integer_sequence<int, 12>{});
}

}  // namespace tg::kernels::bf16::detail
