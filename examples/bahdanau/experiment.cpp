// bahdanau experiment: one of models/experiments' studies, a Markdown table on stdout and its
// files in --out-dir.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "models/decoding/decode.h"
#include "models/experiments/experiments.h"
#include "models/text/tasks.h"
#include "models/translators/limits.h"

#include "common.h"

namespace tg::cli {

using namespace tg::models;

namespace {

struct ExperimentArgs {
  std::string name;
  ExperimentOptions o;
  std::string max_lens;
  std::string precision = "fp32";
  bool quiet = false;
};

int run_experiment_cmd(ExperimentArgs& a) {
  set_threads(a.o.threads);
  if (!a.max_lens.empty()) {
    try {
      a.o.max_lens = parse_length_list(a.max_lens);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--max-lens: ") + e.what());
    }
  }
  if (!a.o.data_file.empty() && a.name != "length") throw UsageError("--data is only used by the length experiment");
  if (a.o.out_dir.empty()) a.o.out_dir = "out/experiments/" + a.name;
  require_distinct({{"--data", a.o.data_file}}, {{"--out-dir", a.o.out_dir}});
  {  // made now, not after the training it would otherwise throw away
    std::error_code ec;
    std::filesystem::create_directories(a.o.out_dir, ec);
    if (ec || !std::filesystem::is_directory(a.o.out_dir, ec))
      throw UsageError("--out-dir " + a.o.out_dir + ": cannot create the directory" + (ec ? " (" + ec.message() + ")" : ""));
  }
  a.o.verbose = !a.quiet;
  a.o.precision = parse_precision(a.precision, "--precision");
  note_precision(a.o.precision);
  try {
    a.o.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const ExperimentResult r = tg::models::run_experiment(a.name, a.o);
  std::fputs(r.markdown().c_str(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "bahdanau: experiment %s%s took %.1f s (training %.1f s); wrote", a.name.c_str(),
               a.o.quick ? " --quick" : "", r.seconds, r.train_seconds);
  for (const auto& f : r.files) std::fprintf(stderr, " %s", f.c_str());
  std::fprintf(stderr, "\n");
  return 0;
}

}  // namespace

Subcommand add_experiment(CLI::App& app) {
  auto args = std::make_shared<ExperimentArgs>();
  ExperimentArgs& xa = *args;
  CLI::App* exp_cmd = app.add_subcommand(
      "experiment", "Run an experiment (length, ablation, primes, scores): Markdown table on stdout, "
                    "NAME.md, CSV and SVG plot in --out-dir");
  exp_cmd->add_option("name", xa.name, "Experiment")->required()->check(CLI::IsMember(experiment_names()));
  exp_cmd->add_flag("--quick", xa.o.quick, "Small settings that finish in well under a minute");
  exp_cmd->add_option("--out-dir", xa.o.out_dir, "Output directory (default out/experiments/NAME)");
  exp_cmd->add_option("--threads", xa.o.threads, "Threads (0 = all cores)")->check(kNonNegative);
  exp_cmd->add_option("--seed", xa.o.seed, "Seed (rounds use seed + round - 1)")->capture_default_str();
  exp_cmd->add_option("--data", xa.o.data_file, "length: also study sentence pairs of this file (e.g. fra.txt)")
      ->check(CLI::ExistingFile);
  exp_cmd->add_option("--data-max-len", xa.o.data_max_len, "length: longest sentence taken from --data (tokens)")
      ->check(kPositive)->capture_default_str();
  exp_cmd->add_option("--task", xa.o.task, "ablation (default primes) / scores (default dates): task")
      ->check(CLI::IsMember(task_names()));
  exp_cmd->add_option("--max-lens", xa.max_lens, "ablation/primes: comma-separated maximum lengths, e.g. 10,60,110");
  exp_cmd->add_option("--max-len", xa.o.max_len, "length: longest reverse source; scores: task length")->check(kPositive);
  exp_cmd->add_option("--rounds", xa.o.rounds, "Fresh initialisations per setting")->check(kPositive);
  exp_cmd->add_option("--steps", xa.o.steps, "Optimizer steps per model")->check(kPositive);
  exp_cmd->add_option("--batch-size", xa.o.batch_size, "Minibatch size")->check(int_range(1, limits::kMaxBatchSize));
  exp_cmd->add_option("--lr", xa.o.lr, "Adam learning rate")->check(kPositive);
  exp_cmd->add_option("--embed-size", xa.o.embed_size, "Embedding size")->check(kWidth);
  exp_cmd->add_option("--num-hiddens", xa.o.num_hiddens, "Recurrent state size")->check(kWidth);
  exp_cmd->add_option("--train-pairs", xa.o.train_pairs, "Training pairs")->check(kPositive);
  exp_cmd->add_option("--test-pairs", xa.o.test_pairs, "Held-out pairs scored")->check(kPositive);
  exp_cmd->add_option("--precision", xa.precision, kPrecisionHelp)->check(CLI::IsMember(kPrecisions))->capture_default_str();
  exp_cmd->add_flag("--quiet", xa.quiet, "No per-model progress lines on stderr");
  return {exp_cmd, [args] { return run_experiment_cmd(*args); }};
}

}  // namespace tg::cli
