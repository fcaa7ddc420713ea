#pragma once
// Wall-clock, CPU-time and memory readings of the benchmark process, shared by the programs that
// print bench/compare's JSON (bench_seq2seq, bench_encoder, bench_conv_step, and the LibTorch
// references through bench/libtorch/common.h). Header-only and C++17, as those need.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace tg::bench {

using Clock = std::chrono::steady_clock;

/// Seconds since t0.
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// User + system CPU seconds of the process so far (all threads).
inline double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/// Peak resident set size of the process, MiB.
inline double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

/// A number for JSON, 6 significant digits.
inline std::string json_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace tg::bench
