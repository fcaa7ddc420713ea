#pragma once
// The decoding flags, shared by translate and eval.
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "models/decoding/decode.h"

namespace tg::cli {

/// Decoding flags shared by translate and eval.
struct DecodeArgs {
  std::int64_t beam = 1, max_steps = 0, max_len_b = 0;
  double alpha = 1.0, max_len_a = 0.0;
  std::string length_penalty = "steps";
  std::string precision = "fp32";

  /// Adds --beam, --alpha, --length-penalty, --max-steps, --max-len-a, --max-len-b and --precision.
  void add_options(CLI::App* app);
  models::DecodeOptions options() const;
};

}  // namespace tg::cli
