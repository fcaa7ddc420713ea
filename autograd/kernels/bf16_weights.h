#pragma once
// Internal: the bf16 weight cache of autocast (autograd/autocast.cpp), for the matrix-product ops.
#include <atomic>
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
class LazyPacked {
 public:
  const PackedB& get(bool trans_b, std::int64_t K, std::int64_t N, const float* B, std::int64_t ldb) {
    if (!ready_.load(std::memory_order_acquire)) {
      std::lock_guard lock(mutex_);  // backward tasks on other threads may ask at once
      if (!ready_.load(std::memory_order_relaxed)) {
        pack_b(trans_b, K, N, B, ldb, packed_);  // into the buffer of the packing before a reset()
        ready_.store(true, std::memory_order_release);
      }
    }
    return packed_;
  }
  /// Forgets the packing (the weight changed) but keeps its buffer for the next get(). Only while
  /// nobody else holds this object.
  void reset() { ready_.store(false, std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::atomic<bool> ready_{false};
  PackedB packed_;
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
