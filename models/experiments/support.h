#pragma once
// What the experiments in models/experiments/*.cpp share: their resolved settings, training and
// scoring one model, task data, formatting and writing the output files. Internal to
// models/experiments (not part of the public API; experiments.h is).
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/decoding/decode.h"
#include "models/experiments/experiments.h"
#include "models/text/data.h"
#include "models/training/trainer.h"
#include "models/translators/seq2seq.h"

namespace tg::models::experiment_support {

using Clock = std::chrono::steady_clock;

/// Seconds elapsed since t0.
double since(Clock::time_point t0);

/// `v` with `decimals` decimals, "nan" if not finite.
std::string num(double v, int decimals = 3);

/// The settings an experiment actually uses, after quick/full defaults and overrides.
struct Settings {
  std::int64_t steps, batch, embed, hiddens, train_pairs, test_pairs, rounds;
  double lr;
  autocast::Precision precision = autocast::Precision::f32;  ///< training and scoring
};

/// `quick` or `full` (as o.quick says), with every field o sets (> 0) overriding it.
Settings resolve(const ExperimentOptions& o, Settings quick, Settings full);

/// "S steps × batch B, lr ..., N training / M held-out pairs[, R rounds]" for table notes.
std::string describe(const Settings& s, bool with_rounds);

/// One-layer `model` with maxout readout, dropout 0, sized by `s` and the vocabularies of `data`;
/// the transformer: d_model s.embed, feed-forward s.hiddens, 2 + 2 layers, transformer_heads(s) heads.
ModelConfig base_config(const ModelKind& model, const Settings& s, const TranslationData& data, std::int64_t num_steps);

/// The transformer's warmup in train_and_eval: s.steps / 8 (at least 1), then 1/sqrt(step) decay
/// from s.lr (the RNNs train at constant s.lr).
std::int64_t transformer_warmup(const Settings& s);
/// The transformer's heads: 4, or 2 or 1 when s.embed is not a multiple of 4 (of 2).
std::int64_t transformer_heads(const Settings& s);

/// A trained and scored model.
struct Run {
  TrainResult train;
  EvalReport eval;
  double train_seconds = 0.0;
  double train_cpu_seconds = 0.0;  ///< process CPU time of train(): with 1 thread, the wall time an idle core would take
};

/// Builds `config` (initialised from `seed`), trains it on `data` with `s`, and evaluates it on the
/// held-out pairs; `verbose` prints one progress line on stderr labelled `what`.
Run train_and_eval(const ModelConfig& config, const TranslationData& data, const Settings& s, std::uint64_t seed,
                   bool verbose, const std::string& what);

/// Scores of the held-out pairs `idx` of a run.
struct Scores {
  std::int64_t count = 0;
  bool has_4grams = false;  ///< some reference has >= 4 tokens (else BLEU-4 is 0 by definition)
  double bleu4 = 0, exact = 0, psa = 0, lcsr = 0, geomean = 0;
};

Scores score_subset(const Run& run, const TokenizedPairs& pairs, const std::vector<std::size_t>& idx);

/// {0, 1, ..., n - 1}.
std::vector<std::size_t> all_indices(std::size_t n);

/// A task's pairs split into training and held-out parts (vocabularies from the training part,
/// min_freq 1), encoded with num_steps = the longest sentence + 1, so nothing is truncated.
TranslationData task_data(const std::string& task, const Settings& s, std::int64_t max_len, std::uint64_t seed);

/// Writes NAME.md, and SLUG.csv + SLUG.svg of every table (svgs[i] is table i's plot), plus the
/// `extra` (file name, text) pairs, into out_dir; nothing if out_dir is "". Each file is written
/// atomically (nn::io::write_file_atomic); a failure throws std::runtime_error naming it.
void write_outputs(ExperimentResult& result, const std::vector<std::string>& svgs, const std::string& out_dir,
                   const std::vector<std::pair<std::string, std::string>>& extra = {});

/// Mean (NaN if empty) and sample standard deviation (0 below two values).
double mean(const std::vector<double>& v);
double stdev(const std::vector<double>& v);

}  // namespace tg::models::experiment_support
