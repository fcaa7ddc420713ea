// Linked into every Google Benchmark program of bench/: the context block of its output (and its
// JSON "context") names the CPU, its vector features and the kernel paths taken (TG_CPU caps them).
#include <benchmark/benchmark.h>

#include "autograd/cpu.h"

namespace {

const bool registered = [] {
  benchmark::AddCustomContext("cpu", tg::cpu::summary());
  benchmark::AddCustomContext("kernel_paths", tg::cpu::kernel_paths());
  return true;
}();

}  // namespace
