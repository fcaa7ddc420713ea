#pragma once
// Internal: the bf16 weight cache of autocast (autograd/autocast.cpp), for the matrix-product ops.
#include <cstdint>
#include <memory>
#include <mutex>

#include "autograd/kernels/gemm_bf16.h"
#include "autograd/tensor.h"

namespace tg::kernels::bf16 {

/// True when autocast is on on this thread and both operands are float32.
bool autocast_applies(const Tensor& a, const Tensor& b);

/// A weight's other orientation, packed on first use (by a backward) and shared by every product
/// recorded with the same cached weight (a GRU's W_hh at each time step packs it once).
struct LazyPacked {
  std::once_flag once;
  PackedB packed;
  const PackedB& get(bool trans_b, std::int64_t K, std::int64_t N, const float* B, std::int64_t ldb) {
    std::call_once(once, [&] { packed = pack_b(trans_b, K, N, B, ldb); });
    return packed;
  }
};

struct CachedWeight {
  std::shared_ptr<const PackedB> packed;  // op(B) as asked for
  std::shared_ptr<LazyPacked> other;      // the other orientation, for backward
};

/// op(w) (K x N; trans_b: w stored (N, K) with leading dimension ldb) packed, from this thread's
/// cache when autocast caching is on and w is a float32 leaf that requires grad (a parameter);
/// empty (packed == nullptr) otherwise, and the caller packs for this call only.
CachedWeight cached_weight(const Tensor& w, bool trans_b, std::int64_t K, std::int64_t N, std::int64_t ldb);

}  // namespace tg::kernels::bf16
