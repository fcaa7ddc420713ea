// bahdanau average: the mean of checkpoints' weights as a new checkpoint.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/training/checkpoint.h"

#include "common.h"

namespace tg::cli {

using namespace tg::models;

namespace {

struct AverageArgs {
  std::vector<std::string> models;
  std::string out;
};

int run_average(const AverageArgs& a) {
  require_distinct(named("--models", a.models), {{"--out", a.out}});
  require_writable_output({"--out", a.out});
  for (std::size_t i = 0; i < a.models.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) {
      std::error_code ec;
      if (a.models[i] == a.models[j] || std::filesystem::equivalent(a.models[i], a.models[j], ec))
        throw UsageError("--models names " + a.models[i] + " twice; each checkpoint counts once in the mean");
    }
  const Checkpoint avg = average_checkpoints(a.models);
  save_checkpoint(a.out, *avg.model, avg.src_vocab, avg.tgt_vocab, nullptr, nullptr,
                  avg.subword ? &*avg.subword : nullptr);
  std::fprintf(stderr, "bahdanau: the mean of %zu checkpoints' weights is in %s\n", a.models.size(), a.out.c_str());
  return 0;
}

}  // namespace

Subcommand add_average(CLI::App& app) {
  auto args = std::make_shared<AverageArgs>();
  AverageArgs& aa = *args;
  CLI::App* avg_cmd = app.add_subcommand(
      "average", "Average the weights of checkpoints of one model (e.g. a run's last few) into a new checkpoint "
                 "for translate/eval (no training state: it does not resume)");
  avg_cmd->add_option("--models", aa.models, "Checkpoint directories (same architecture, vocabularies, tokenizer)")
      ->required()->expected(1, -1);
  avg_cmd->add_option("--out", aa.out, "Where the averaged checkpoint is written (atomically)")->required();
  return {avg_cmd, [args] { return run_average(*args); }};
}

}  // namespace tg::cli
