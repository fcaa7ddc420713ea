#pragma once
// Internal: row kernels of layer_norm and rms_norm over `rows` contiguous rows of length n.
// Parallel over blocks of ~16K elements, each row computed the same way whatever the thread
// count; the weight and bias gradients are summed per fixed block of rows, then over blocks in
// order, so they too are independent of the thread count.
#include <cstdint>

namespace tg::kernels {

/// y = (x - mean) * rstd * w + b (rms: mean = 0 and rstd from the mean square). w, b may be null.
/// Writes mean (unless rms) and rstd per row.
template <class T>
void norm_forward(bool rms, const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, std::int64_t rows,
                  std::int64_t n, double eps);

/// Given dy: dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w and xhat = (x - mean) rstd
/// (rms: without the mean(g) term). Sets dx (if not null), dw = Σ_rows dy xhat and db = Σ_rows dy
/// (each if not null, overwritten).
template <class T>
void norm_backward(bool rms, const T* dy, const T* x, const T* w, const T* mean, const T* rstd, T* dx, T* dw,
                   T* db, std::int64_t rows, std::int64_t n);

}  // namespace tg::kernels
