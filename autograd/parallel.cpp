#include "autograd/parallel.h"

#include <atomic>
#include <memory>
#include <mutex>

#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/partitioner.h>

#include "autograd/kernels/parallel_for.h"

namespace tg {

namespace {
std::mutex g_mutex;  // serialises set_num_threads (the global_control swap)
std::unique_ptr<tbb::global_control> g_control;
// The effective count, read by every kernel launch: an atomic so that the hot path takes no lock.
std::atomic<int> g_effective{0};
// Set while this thread runs a run_tasks() task: its kernels stay serial.
thread_local bool t_in_task = false;

// Marks the thread as inside a task for its lifetime, and restores the mark however it ends.
struct InTask {
  bool was = t_in_task;
  InTask() { t_in_task = true; }
  ~InTask() { t_in_task = was; }
  InTask(const InTask&) = delete;
  InTask& operator=(const InTask&) = delete;
};
}  // namespace

void set_num_threads(int n) {
  std::lock_guard lock(g_mutex);
  g_control.reset();
  if (n > 0) g_control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, n);
  g_effective.store(n > 0 ? n : tbb::info::default_concurrency(), std::memory_order_relaxed);
}

int num_threads() {
  if (t_in_task) return 1;
  int n = g_effective.load(std::memory_order_relaxed);
  if (n == 0) {  // first use without set_num_threads: all hardware threads
    n = tbb::info::default_concurrency();
    int expected = 0;
    g_effective.compare_exchange_strong(expected, n, std::memory_order_relaxed);
    n = g_effective.load(std::memory_order_relaxed);
  }
  return n;
}

void detail::parallel_for(std::int64_t n, std::int64_t grain,
                          const std::function<void(std::int64_t, std::int64_t)>& fn) {
  kernels::tbb_for(tbb::blocked_range<std::int64_t>(0, n, grain),
                   [&](const tbb::blocked_range<std::int64_t>& r) { fn(r.begin(), r.end()); });
}

void detail::run_tasks(int n, const std::function<void(int)>& task) {
  if (n <= 0) return;
  if (n == 1 || num_threads() <= 1) {
    for (int i = 0; i < n; ++i) task(i);
    return;
  }
  kernels::tbb_for(
      tbb::blocked_range<int>(0, n, 1),
      [&](const tbb::blocked_range<int>& r) {
        const InTask in_task;
        for (int i = r.begin(); i < r.end(); ++i) task(i);
      },
      tbb::simple_partitioner());
}

}  // namespace tg
