#pragma once
// Internal: TBB loops with explicit grain sizes. Included by kernel sources only.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "autograd/parallel.h"

namespace tg::kernels {

using tg::kGrainCheap;  // grain sizes: autograd/parallel.h
using tg::kGrainTranscendental;

/// tbb::parallel_for for every TBB loop of the library. ThreadSanitizer cannot see how TBB
/// hands tasks to workers and waits for them (that happens inside libtbb, which Debian does not
/// build with TSan), so it would report the tasks' reads of what the caller wrote before the loop,
/// and the caller's reads of what the tasks wrote, as races. Under TSan the caller therefore
/// publishes a flag that every task acquires first, and every task ends with a release on a
/// counter the caller acquires after the loop, or before rethrowing a task's exception: the
/// happens-before edges TBB guarantees, made visible. (TBB's own internals still need
/// scripts/tsan.supp.) Other builds call TBB directly.
template <class Range, class Body, class... Partitioner>
void tbb_for(const Range& range, const Body& body, Partitioner&&... partitioner) {
#if defined(__SANITIZE_THREAD__)
  std::atomic<int> started{0}, done{0};
  started.store(1, std::memory_order_release);
  try {
    tbb::parallel_for(
        range,
        [&](const Range& r) {
          (void)started.load(std::memory_order_acquire);
          try {
            body(r);
          } catch (...) {  // the exception object travels to the caller through TBB too
            done.fetch_add(1, std::memory_order_release);
            throw;
          }
          done.fetch_add(1, std::memory_order_release);
        },
        partitioner...);
  } catch (...) {
    (void)done.load(std::memory_order_acquire);
    throw;
  }
  (void)done.load(std::memory_order_acquire);
#else
  tbb::parallel_for(range, body, partitioner...);
#endif
}

/// Calls fn(begin, end) over [0, n) in chunks of grain / 2 to grain elements; serially (without
/// entering TBB, which allocates a task tree per call) when n <= grain or tapegrad runs on one thread.
/// Callers must make each element's result independent of the chunking (it is, for elementwise
/// kernels) so that results do not depend on the thread count.
template <class Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n <= grain || tg::num_threads() <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  tbb_for(tbb::blocked_range<int64_t>(0, n, grain),
          [&](const tbb::blocked_range<int64_t>& r) { fn(r.begin(), r.end()); });
}

/// parallel_for that splits [0, n) only at multiples of `align` elements: a loop whose vectorised
/// body and scalar tail might round differently then computes every element the same way for
/// any thread count (the one tail stays at n). For optimizer updates and gradient clipping.
template <class Fn>
void parallel_for_aligned(int64_t n, int64_t grain, int64_t align, Fn&& fn) {
  const int64_t blocks = (n + align - 1) / align;
  parallel_for(blocks, std::max<int64_t>(1, grain / align),
               [&](int64_t b0, int64_t b1) { fn(b0 * align, std::min(b1 * align, n)); });
}

}  // namespace tg::kernels
