// Smoke test of build/bin/bench_seq2seq (issue 6): a tiny run of workload A must exit 0 and print
// one JSON line with every documented key and positive numbers. No timing assertions.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <string>

#include "child_process.h"

namespace fs = std::filesystem;

namespace {

// The value of a numeric "key": in a flat JSON line, or NaN if absent.
double number(const std::string& json, const std::string& key) {
  const std::regex re("\"" + key + "\":\\s*(-?[0-9][0-9.eE+-]*)");
  std::smatch m;
  if (!std::regex_search(json, m, re)) return std::nan("");
  return std::stod(m[1].str());
}

std::string string_value(const std::string& json, const std::string& key) {
  const std::regex re("\"" + key + "\":\\s*\"([^\"]*)\"");
  std::smatch m;
  return std::regex_search(json, m, re) ? m[1].str() : std::string("<missing>");
}

}  // namespace

TEST(BenchSmoke, Seq2SeqConfigAPrintsJson) {
  const fs::path bin = fs::path(TG_BINARY_DIR) / "bin" / "bench_seq2seq";
  if (!fs::exists(bin)) GTEST_SKIP() << bin << " not built (TG_BUILD_BENCH=OFF?)";
  const fs::path dir = tg::testing::scratch_dir("tg_bench_smoke");
  const tg::testing::ProgramRun r =
      tg::testing::run_command(bin.string() + " --config A --steps 2 --warmup 1 --threads 1", dir);
  fs::remove_all(dir);
  const std::string& stdout_text = r.out;
  ASSERT_EQ(r.status, 0) << "stderr:\n" << r.err;

  // Exactly one line, a JSON object.
  std::string line = stdout_text;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  ASSERT_EQ(line.find('\n'), std::string::npos) << stdout_text;
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.front(), '{');
  EXPECT_EQ(line.back(), '}');

  EXPECT_EQ(string_value(line, "config"), "A");
  EXPECT_EQ(string_value(line, "readout"), "linear");
  EXPECT_EQ(number(line, "threads"), 1.0);
  EXPECT_EQ(number(line, "steps"), 2.0);
  for (const char* key : {"tokens_per_sec", "sec_per_step", "decode_batch1_sents_per_sec",
                          "decode_batch64_sents_per_sec", "decode_batch1_avg_steps",
                          "decode_batch64_avg_steps", "cpu_sec_per_step", "peak_rss_mib", "tokens"}) {
    const double v = number(line, key);
    EXPECT_TRUE(v > 0) << key << " = " << v << " in " << line;
  }
  // 2 steps of batch 64 with target lengths in [3, 10].
  EXPECT_GE(number(line, "tokens"), 2 * 64 * 3);
  EXPECT_LE(number(line, "tokens"), 2 * 64 * 10);
}
