#include "autograd/parallel.h"

#include <memory>
#include <mutex>

#include <tbb/global_control.h>
#include <tbb/info.h>

namespace tg {
namespace {
std::mutex g_mutex;
std::unique_ptr<tbb::global_control> g_control;
int g_threads = 0;
}  // namespace

void set_num_threads(int n) {
  std::lock_guard lock(g_mutex);
  g_control.reset();
  if (n > 0) g_control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, n);
  g_threads = n;
}

int num_threads() {
  std::lock_guard lock(g_mutex);
  return g_threads > 0 ? g_threads : tbb::info::default_concurrency();
}

}  // namespace tg
