#pragma once
// Thread-count control for every parallel kernel, and the parallel loops layers and user code use.
// Results never depend on the count: kernels split work in fixed-size blocks and combine partial
// results in a fixed order.
#include <algorithm>
#include <cstdint>
#include <functional>

namespace tg {

/// Limits tapegrad's kernels to `n` threads (0 = all hardware threads). Process-wide.
void set_num_threads(int n);

/// The number of threads kernels may use now: 1 inside a task of a parallel run_tasks() call,
/// whose kernels run on the task's own thread (the tasks already occupy the threads); a run_tasks()
/// that runs its tasks one after the other (one task, or one thread) leaves this unchanged.
int num_threads();

/// Runs task(0), ..., task(n - 1) on the thread pool, concurrently as far as num_threads()
/// allows (serially, in order, on one thread), and returns when all have finished; the first
/// exception a task throws is rethrown. For coarse independent work, such as decoding slices of a
/// batch. Thread-local state does not follow a task to its thread: a task that needs NoGradGuard
/// sets it itself.
template <class Task> void run_tasks(int n, Task&& task);

/// Grain sizes for parallel_for: the fewest elements of transcendental (exp, tanh, ...) or cheap
/// (add, copy, ...) element-wise work worth a task of its own; set by hand, not from a recorded
/// measurement.
inline constexpr std::int64_t kGrainTranscendental = 4096;
inline constexpr std::int64_t kGrainCheap = 65536;

/// Calls fn(begin, end) over [0, n) in chunks of about `grain` elements (TBB halves ranges larger
/// than grain, so a chunk holds grain / 2 to grain) on the thread pool;
/// serially, as one fn(0, n), when n <= grain or tapegrad runs on one thread. Which chunks run where
/// varies: each element's result must not depend on the chunking (as in an elementwise loop) for
/// results to be independent of the thread count.
template <class Fn> void parallel_for(std::int64_t n, std::int64_t grain, Fn&& fn);

/// parallel_for whose chunks start at multiples of `align` elements: a loop with a vectorised body
/// and a scalar tail then computes every element the same way for any thread count (the only tail
/// stays at n). For optimizer updates and other loops that must be bitwise thread-independent.
template <class Fn> void parallel_for_aligned(std::int64_t n, std::int64_t grain, std::int64_t align, Fn&& fn);

namespace detail {
void run_tasks(int n, const std::function<void(int)>& task);
void parallel_for(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& fn);
}  // namespace detail

template <class Task> void run_tasks(int n, Task&& task) {
  // Passed by reference: a std::function holding a reference_wrapper allocates nothing, however
  // much the task captures (a training step with compact gradients runs tasks and must not allocate).
  detail::run_tasks(n, std::function<void(int)>(std::ref(task)));
}

template <class Fn> void parallel_for(std::int64_t n, std::int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n <= grain || num_threads() <= 1) {
    fn(std::int64_t{0}, n);
    return;
  }
  detail::parallel_for(n, grain, std::function<void(std::int64_t, std::int64_t)>(std::ref(fn)));
}

template <class Fn> void parallel_for_aligned(std::int64_t n, std::int64_t grain, std::int64_t align, Fn&& fn) {
  const std::int64_t blocks = (n + align - 1) / align;
  parallel_for(blocks, std::max<std::int64_t>(1, grain / align),
               [&](std::int64_t b0, std::int64_t b1) { fn(b0 * align, std::min(b1 * align, n)); });
}

}  // namespace tg
