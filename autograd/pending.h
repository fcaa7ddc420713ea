#pragma once
// Deferred elements (TensorImpl::pending): a tensor whose buffer is written on its first read, so
// that an op that can use the inputs directly (matmul of a transposed operand) never pays for it.
#include <atomic>
#include <mutex>

#include "autograd/tensor.h"

namespace tg {

struct PendingFill {
  virtual ~PendingFill() = default;
  /// Writes the elements once, whichever thread reads first; later calls return at once.
  void run() {
    if (done_.load(std::memory_order_acquire)) return;
    std::call_once(once_, [this] {
      fill();
      done_.store(true, std::memory_order_release);
    });
  }
  bool done() const { return done_.load(std::memory_order_acquire); }
  /// The tensor whose elements fill() reads, if there is one: until done(), a change to it in place
  /// shows in this tensor, so the tape checks its version for an op that saved this tensor.
  virtual const Tensor* source() const { return nullptr; }

 protected:
  virtual void fill() = 0;

 private:
  std::once_flag once_;
  std::atomic<bool> done_{false};
};

/// If x is a transpose of the last two dims of `source` whose copy has not been written yet,
/// returns `source` (detached); otherwise an undefined tensor.
Tensor deferred_transpose_source(const Tensor& x);

}  // namespace tg
