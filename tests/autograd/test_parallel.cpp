// run_tasks (autograd/parallel.h): every task runs once, kernels inside a task stay serial, the
// first exception comes back to the caller; and a fill large enough to split across threads.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "autograd/ops_elementwise.h"
#include "autograd/parallel.h"
#include "autograd/tensor.h"
#include "error_of.h"

using namespace tg;

namespace {

/// Sets the thread count for one test and restores the default afterwards, even on failure.
struct ThreadCount {
  explicit ThreadCount(int n) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(0); }
};

}  // namespace

TEST(RunTasks, EveryTaskRunsOnceWithSerialKernelsInside) {
  for (int threads : {1, 2}) {
    ThreadCount guard(threads);
    std::vector<std::atomic<int>> runs(7);
    std::vector<int> seen_threads(7, -1);
    run_tasks(7, [&](int i) {
      runs[static_cast<std::size_t>(i)].fetch_add(1);
      seen_threads[static_cast<std::size_t>(i)] = num_threads();
    });
    for (int i = 0; i < 7; ++i) {
      EXPECT_EQ(runs[static_cast<std::size_t>(i)].load(), 1) << "task " << i << ", " << threads << " threads";
      EXPECT_EQ(seen_threads[static_cast<std::size_t>(i)], 1) << "task " << i << ", " << threads << " threads";
    }
    EXPECT_EQ(num_threads(), threads);  // back outside the tasks
  }
}

TEST(RunTasks, OneThreadRunsInOrderAndZeroTasksIsANoOp) {
  ThreadCount guard(1);
  std::vector<int> order;
  run_tasks(4, [&](int i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  run_tasks(0, [&](int) { FAIL() << "no task expected"; });
}

TEST(RunTasks, ExceptionsReachTheCaller) {
  for (int threads : {1, 2}) {
    ThreadCount guard(threads);
    // The task's own exception, type and message, not a wrapper.
    EXPECT_EQ(tg::testing::error_of<std::runtime_error>([] {
                run_tasks(3, [](int i) {
                  if (i == 1) throw std::runtime_error("task 1 failed");
                });
              }),
              "task 1 failed");
    EXPECT_EQ(num_threads(), threads);  // the thread is not left marked as inside a task
  }
}

TEST(Fill, LargeFillsSplitAcrossThreadsFillEveryElement) {
  ThreadCount guard(2);
  const std::int64_t n = (1 << 20) + 3;  // above the parallel grain, with a ragged end
  Tensor t = Tensor::empty({n});
  t.fill_(2.5);
  const std::vector<float> v = t.to_vector<float>();
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(v[static_cast<std::size_t>(i)], 2.5f) << i;
  const std::vector<double> z = Tensor::zeros({n}, DType::f64).to_vector<double>();
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(z[static_cast<std::size_t>(i)], 0.0) << i;
}

TEST(Parallel, PublicParallelForCoversEveryIndexOnceOnAnyThreadCount) {
  for (int threads : {1, 2}) {
    tg::set_num_threads(threads);
    for (std::int64_t n : {0, 1, 1000, 300000}) {
      std::vector<int> hits(static_cast<std::size_t>(n), 0);
      tg::parallel_for(n, 4096, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
      });
      for (int h : hits) ASSERT_EQ(h, 1) << "n " << n << " threads " << threads;
    }
    // Aligned chunks start at multiples of the alignment.
    std::atomic<int> misaligned{0};
    tg::parallel_for_aligned(300001, 65536, 64, [&](std::int64_t b, std::int64_t e) {
      if (b % 64 != 0 || (e % 64 != 0 && e != 300001)) ++misaligned;
    });
    EXPECT_EQ(misaligned.load(), 0);
  }
  tg::set_num_threads(0);
}
