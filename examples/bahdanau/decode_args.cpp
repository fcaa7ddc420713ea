// DecodeArgs (decode_args.h): the decoding flags of translate and eval.
#include "decode_args.h"

#include "models/translators/limits.h"

#include "common.h"

namespace tg::cli {

using namespace tg::models;

void DecodeArgs::add_options(CLI::App* app) {
  app->add_option("--beam", beam, "Beam size (1 = greedy)")->check(int_range(1, limits::kMaxBeam))->capture_default_str();
  app->add_option("--alpha", alpha, "Beam length normalisation exponent (GNMT uses 0.6 with --length-penalty gnmt)")
      ->check(kNonNegative)->capture_default_str();
  app->add_option("--length-penalty", length_penalty,
                  "Beam score: steps = log P / steps^alpha, gnmt = log P / ((5 + steps) / 6)^alpha")
      ->check(CLI::IsMember({"steps", "gnmt"}))->capture_default_str();
  app->add_option("--max-steps", max_steps,
                  "Longest output (0 = the model's num_steps, or no cap below the limit when --max-len-a/b are set)")
      ->check(kMaxSteps);
  app->add_option("--max-len-a", max_len_a,
                  "Per-sentence limit relative to the source, as fairseq: floor(a * source_len + b) steps, "
                  "source_len = tokens + <eos> as the model sees them")
      ->check(CLI::Range(0.0, static_cast<double>(limits::kMaxSteps)));
  app->add_option("--max-len-b", max_len_b, "See --max-len-a")->check(kMaxSteps);
  app->add_option("--precision", precision, kPrecisionHelp)->check(CLI::IsMember(kPrecisions))->capture_default_str();
}

DecodeOptions DecodeArgs::options() const {
  return DecodeOptions().beam_size(beam).length_alpha(alpha).max_steps(max_steps).max_len_a(max_len_a)
      .max_len_b(max_len_b).length_penalty(parse_length_penalty(length_penalty, "--length-penalty"))
      .precision(parse_precision(precision, "--precision"));
}

}  // namespace tg::cli
