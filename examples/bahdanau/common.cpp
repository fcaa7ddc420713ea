// The helpers of examples/bahdanau/common.h: checks of the subcommands' files, validators,
// --precision and --threads.
#include "common.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/dist.h"
#include "autograd/parallel.h"
#include "models/translators/limits.h"
#include "models/translators/registry.h"

namespace tg::cli {

using namespace tg::models;

void require_distinct(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs) {
  io::require_distinct_outputs(inputs, outputs);
  for (std::size_t i = 1; i < outputs.size(); ++i)
    io::require_distinct_outputs(std::vector<NamedPath>(outputs.begin(), outputs.begin() + static_cast<std::ptrdiff_t>(i)),
                                 {outputs[i]});
}

std::vector<NamedPath> named(const std::string& flag, const std::vector<std::string>& paths) {
  std::vector<NamedPath> out;
  for (const std::string& p : paths) out.push_back({flag, p});
  return out;
}

std::vector<NamedPath> concat(std::vector<NamedPath> a, const std::vector<NamedPath>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void require_writable_output(const NamedPath& p) {
  if (p.path.empty()) return;
  std::error_code ec;
  std::filesystem::path where = std::filesystem::absolute(p.path, ec).lexically_normal();
  if (!where.has_filename()) where = where.parent_path();  // "ck/"
  // An existing directory is replaced, not written into: probe beside it.
  if (std::filesystem::is_directory(where, ec)) where = where.parent_path() / (where.filename().string() + ".tmp");
  try {
    io::require_writable_location(where);
  } catch (const std::runtime_error& e) {
    throw UsageError(p.name + ": " + e.what());
  }
}

namespace {

CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        double v = 0;
        std::size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        const bool ok = used == text.size() && used > 0 && std::isfinite(v) && (allow_zero ? v >= 0 : v > 0);
        return ok ? std::string() : std::string("expected a ") + (allow_zero ? "non-negative" : "positive") +
                                        " number, got '" + text + "'";
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}

}  // namespace

const CLI::Validator kPositive = number_check(false);
const CLI::Validator kNonNegative = number_check(true);

CLI::Validator int_range(std::int64_t lo, std::int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        std::size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used > 0 && used == text.size() && v >= lo && v <= hi) return std::string();
        return text.size() > 40 ? "a long value is out of range " + range : text + " is out of range " + range;
      },
      "INT in " + range);
}
const CLI::Validator kWidth = int_range(1, limits::kMaxWidth);
const CLI::Validator kMaxSteps = int_range(0, limits::kMaxSteps);

const std::vector<std::string> kPrecisions = {"fp32", "bf16"};
const char* const kPrecisionHelp =
    "Precision of the matrix products: fp32, or bf16 (autocast: operands rounded to bfloat16, sums in float32; "
    "weights, losses and the optimizer stay float32)";

void note_precision(autocast::Precision p) {
  if (p != autocast::Precision::bf16 || dist::rank() != 0) return;
  const std::string path = autocast::bf16_path();
  if (!autocast::bf16_hardware() || path.rfind("avx512_bf16", 0) == 0) return;
  std::fprintf(stderr, "bahdanau: --precision bf16: TG_BF16_PATH forces the %s on this avx512_bf16 CPU; products "
                       "read bf16 and compute in float32\n", path.c_str());
}

void set_threads(int threads) {
  if (threads < 0) throw UsageError("--threads must be >= 0");
  if (threads > 0) set_num_threads(threads);
}

std::string model_help() {
  std::string help = "Architecture:";
  for (const ModelSpec* spec : model_registry())
    help += "\n  " + std::string(spec->name) + ": " + std::string(spec->description);
  return help;
}

}  // namespace tg::cli
