#pragma once
// The one matrix-product routine of tapegrad. Every matmul, linear and recurrent projection goes
// through here, so tuning this file speeds up every model. Installed for ops written outside the
// repository (docs/extending.md, "Ops outside the repository").
#include <cstdint>

namespace tg::kernels {

/// Row-major C = alpha * op(A) * op(B) + beta * C, with op(A) of shape (M, K) and op(B) of (K, N).
/// trans_a: A is stored (K, M) with leading dimension lda (>= M); otherwise (M, K), lda >= K.
/// trans_b: B is stored (N, K) with leading dimension ldb (>= K); otherwise (K, N), ldb >= N.
/// beta == 0 overwrites C without reading it (C may hold garbage or NaN).
/// `bias` (length N, optional, only with beta == 0) is added to every row: C = alpha op(A) op(B) + bias,
/// with the bias applied in the kernel's store instead of a separate pass over C.
/// The result does not depend on the number of threads: K is never split across threads.
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const T* bias = nullptr);

/// gemm on the calling thread only, for kernels that already run one product per parallel task.
template <class T>
void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                 const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

/// `batch` independent products; matrix i uses A + i*stride_a, B + i*stride_b, C + i*stride_c.
/// A stride of 0 reuses one matrix for every batch entry; stride_c == 0 sums the entries into one C
/// (C = alpha sum_i op(A_i) op(B_i) + beta C, added in batch order).
template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, T alpha,
                  const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b,
                  T beta, T* C, int64_t ldc, int64_t stride_c);

/// Plain triple loop with the same contract; the reference the fast kernel is tested against.
template <class T>
void gemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                    int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

}  // namespace tg::kernels
