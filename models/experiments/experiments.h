#pragma once
// The experiments behind `bahdanau experiment NAME`: each trains small translators with
// train() and scores them, and returns tables that are written as Markdown, CSV and an SVG plot.
//
//   tg::models::ExperimentOptions o;
//   o.quick = true;
//   o.out_dir = "out/experiments/length";
//   auto result = tg::models::run_experiment("length", o);
//   std::cout << result.markdown();
//
// Experiments (defaults in docs/experiments.md; every size can be overridden in the options):
// - length:   rnnsearch, rnnencdec and transformer trained with the same budget (steps, batch, sizes, seed) on
//             the same data, then held-out pairs scored per source-length bucket (corpus BLEU-4,
//             exact match, GeoMean). Data: the `reverse` task (lengths 1..max_len), and, when
//             data_file is set, pairs of that file (e.g. fra.txt) with at most data_max_len tokens
//             on each side.
// - ablation: rnnsearch and its decoder-path ablations (zero_init, state_only_output,
//             no_prev_token, recurrence_only) on a task (default `primes`) at each of max_lens,
//             over `rounds` rounds (round r = 1, 2, ... initialises and shuffles with seed + r - 1; the data of a
//             maximum length is the same in every round): mean PSA, LCSR, GeoMean, exact match and
//             the standard deviation of GeoMean over rounds.
// - primes:   ablation on `primes` at maximum lengths 10, 60, 110 with 3 rounds (quick: 5 and 10,
//             1 round).
// - scores:   rnnsearch with additive, scaled_dot and dot attention, otherwise identical, and the
//             transformer, on a task (default `dates`): exact match, GeoMean, BLEU-4, training tokens/s.
// All models use dropout 0 and min_freq 1 vocabularies for tasks (min_freq 2 for a file).
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/autocast.h"

#include "models/plots/plot.h"

namespace tg::models {

/// Settings of an experiment. Numeric fields at 0 (and empty lists/strings) mean "the
/// experiment's default for quick or full"; see docs/experiments.md for those defaults.
struct ExperimentOptions {
  bool quick = false;            ///< small, fast settings (each experiment well under a minute on 2 cores)
  std::string out_dir;           ///< write NAME.md, the CSVs and SVGs here (created); "" = write nothing
  int threads = 0;               ///< tg::set_num_threads (0 = leave alone)
  std::uint64_t seed = 1;        ///< data, split, initialisation and shuffling seed (rounds add r)
  bool verbose = false;          ///< one progress line per trained model on stderr

  std::int64_t steps = 0;        ///< optimizer steps per model
  std::int64_t batch_size = 0;
  double lr = 0;                 ///< Adam learning rate
  std::int64_t embed_size = 0;
  std::int64_t num_hiddens = 0;
  std::int64_t train_pairs = 0;  ///< training pairs generated (or sampled from data_file)
  std::int64_t test_pairs = 0;   ///< held-out pairs scored
  std::int64_t rounds = 0;       ///< ablation/primes/scores: fresh initialisations per setting
  std::int64_t max_len = 0;      ///< length: longest `reverse` source
  std::vector<std::int64_t> max_lens;  ///< ablation/primes: maximum source lengths
  std::string task;              ///< ablation (default primes) and scores (default dates)
  std::string data_file;         ///< length: tab-separated pairs (fra.txt); "" = skip that part
  std::int64_t data_max_len = 20;  ///< length: longest sentence (tokens, each side) taken from data_file
  /// Precision of every model's training and scoring (TrainOptions::precision, DecodeOptions::precision).
  autocast::Precision precision = autocast::Precision::f32;

  /// Throws std::invalid_argument naming the first bad field (negative sizes, max_lens < 1, an
  /// unknown task, a data_file that does not exist).
  void validate() const;
};

/// A table of formatted cells (numbers with 3 decimals); `slug` names its CSV/SVG files.
struct ExperimentTable {
  std::string slug;
  std::string title;
  std::string notes;  ///< settings line printed under the title
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;

  /// Index of column `name`; throws std::out_of_range if absent.
  std::size_t column(const std::string& name) const;
  /// GitHub-flavoured Markdown table (no title).
  std::string markdown() const;
  /// CSV with a header line (cells quoted when they contain a comma or quote).
  std::string csv() const;
};

/// What an experiment produced.
struct ExperimentResult {
  std::string name;
  std::vector<ExperimentTable> tables;
  std::vector<std::string> files;  ///< paths written (empty if out_dir was "")
  double seconds = 0.0;            ///< wall time of the whole experiment
  double train_seconds = 0.0;      ///< of which training
  /// "# Experiment NAME" + each table with its title, notes and plot link + the timing.
  std::string markdown() const;
};

/// {"ablation", "length", "primes", "scores"}.
std::vector<std::string> experiment_names();

/// Runs experiment `name` (throws std::invalid_argument listing the names for an unknown one),
/// writes its files into options.out_dir if set, and returns the tables.
ExperimentResult run_experiment(const std::string& name, const ExperimentOptions& options);

ExperimentResult length_experiment(const ExperimentOptions& options);
ExperimentResult ablation_experiment(const ExperimentOptions& options);
ExperimentResult primes_experiment(const ExperimentOptions& options);
ExperimentResult scores_experiment(const ExperimentOptions& options);

/// One group of bars (one x label) of a grouped bar chart: values[k] belongs to series k.
struct BarGroup {
  std::string label;
  std::vector<double> values;
};

/// A grouped bar chart as standalone SVG: for each group one bar per series (legend at the
/// right), y axis from 0 to max(1, largest value). Each bar is a <rect> with data-group,
/// data-series and data-value. Throws std::invalid_argument if a group's value count differs
/// from series.size() or there is nothing to plot.
std::string grouped_bar_chart_svg(const std::vector<std::string>& series, const std::vector<BarGroup>& groups,
                                  const PlotOptions& options = {});

/// Parses "10,60,110" into {10, 60, 110}; throws std::invalid_argument on anything else.
std::vector<std::int64_t> parse_length_list(const std::string& text);

}  // namespace tg::models
