// Smoke test of build/bin/bench_encoder (workload G, issue 20): a tiny run must exit 0 and print one
// JSON line with the keys bench/compare reads, positive timings and a finite loss. No timing assertions.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <string>

#include "child_process.h"

namespace fs = std::filesystem;

namespace {

double number(const std::string& json, const std::string& key) {
  const std::regex re("\"" + key + "\":\\s*(-?[0-9][0-9.eE+-]*)");
  std::smatch m;
  if (!std::regex_search(json, m, re)) return std::nan("");
  return std::stod(m[1].str());
}

}  // namespace

TEST(BenchSmoke, EncoderWorkloadGPrintsJson) {
  const fs::path bin = fs::path(TG_BINARY_DIR) / "bin" / "bench_encoder";
  if (!fs::exists(bin)) GTEST_SKIP() << bin << " not built (TG_BUILD_BENCH=OFF?)";
  const fs::path dir = tg::testing::scratch_dir("tg_bench_encoder_smoke");
  const tg::testing::ProgramRun r = tg::testing::run_command(bin.string() + " --steps 1 --warmup 1 --threads 1", dir);
  fs::remove_all(dir);
  ASSERT_EQ(r.status, 0) << "stderr:\n" << r.err;
  std::string line = r.out;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  ASSERT_EQ(line.find('\n'), std::string::npos) << r.out;
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.front(), '{');
  EXPECT_EQ(line.back(), '}');
  EXPECT_NE(line.find("\"config\":\"G\""), std::string::npos) << line;
  EXPECT_EQ(number(line, "threads"), 1.0);
  EXPECT_EQ(number(line, "steps"), 1.0);
  EXPECT_EQ(number(line, "tokens"), 32.0 * 64.0);  // B * T positions per step
  // 16 tensors: 4 attention and 2 feed-forward linear layers (weight + bias), 2 layer norms.
  EXPECT_EQ(number(line, "parameters"), 4.0 * (256 * 256 + 256) + (256 * 1024 + 1024) + (1024 * 256 + 256) + 4.0 * 256);
  for (const char* key : {"tokens_per_sec", "sec_per_step", "cpu_sec_per_step", "peak_rss_mib"}) {
    const double v = number(line, key);
    EXPECT_TRUE(v > 0) << key << " = " << v << " in " << line;
  }
  // Regression onto uniform(-1, 1) targets from a near-identity residual layer: a finite loss of order 1.
  const double loss = number(line, "loss_last");
  EXPECT_TRUE(std::isfinite(loss) && loss > 0.1 && loss < 10.0) << line;
}
