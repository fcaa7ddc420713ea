#pragma once
// Thread-count control for every parallel kernel. Results never depend on the count: kernels
// split work in fixed-size blocks and combine partial results in a fixed order.
#include <functional>

namespace tg {

/// Limits tapegrad's kernels to `n` threads (0 = all hardware threads). Process-wide.
void set_num_threads(int n);

/// The number of threads kernels may use now: 1 inside a run_tasks() task, whose kernels run on
/// the task's own thread (the tasks already occupy the threads).
int num_threads();

/// Runs task(0), ..., task(n - 1) on the thread pool, concurrently as far as num_threads()
/// allows (serially, in order, on one thread), and returns when all have finished; the first
/// exception a task throws is rethrown. For coarse independent work, such as decoding slices of a
/// batch. Thread-local state does not follow a task to its thread: a task that needs NoGradGuard
/// sets it itself.
template <class Task> void run_tasks(int n, Task&& task);

namespace detail {
void run_tasks(int n, const std::function<void(int)>& task);
}  // namespace detail

template <class Task> void run_tasks(int n, Task&& task) {
  // Passed by reference: a std::function holding a reference_wrapper allocates nothing, however
  // much the task captures (a training step with compact gradients runs tasks and must not allocate).
  detail::run_tasks(n, std::function<void(int)>(std::ref(task)));
}

}  // namespace tg
