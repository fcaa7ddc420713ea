// The `scores` experiment: rnnsearch with additive, scaled_dot and dot attention, otherwise
// identical, and the transformer with the same budget: accuracy scores and training speed.
#include <algorithm>
#include <array>
#include <sstream>

#include "autograd/parallel.h"
#include "models/experiments/experiments.h"
#include "models/experiments/support.h"

namespace tg::models {

using namespace experiment_support;

ExperimentResult scores_experiment(const ExperimentOptions& o) {
  o.validate();
  if (o.threads > 0) set_num_threads(o.threads);
  const auto t0 = Clock::now();
  const std::string task = o.task.empty() ? "dates" : o.task;
  const Settings s = resolve(o, {.steps = 250, .batch = 32, .embed = 16, .hiddens = 32, .train_pairs = 2000,
                                 .test_pairs = 200, .rounds = 1, .lr = 0.01},
                             {.steps = 2000, .batch = 64, .embed = 32, .hiddens = 64, .train_pairs = 10000,
                              .test_pairs = 500, .rounds = 3, .lr = 0.005});
  const std::int64_t max_len = o.max_len > 0 ? o.max_len : 10;  // reverse/copy/primes only
  const TranslationData fitted = task_data(task, s, max_len, o.seed);
  const std::int64_t num_steps = fitted.train.num_steps();

  ExperimentResult result;
  result.name = "scores";
  ExperimentTable t;
  t.slug = "scores";
  t.title = "Attention score functions of rnnsearch, and the transformer, on `" + task + "`";
  t.columns = {"attention", "rounds", "exact", "GeoMean", "BLEU-4", "tokens/s", "tokens/CPU-s", "train s", "last loss"};
  const std::vector<AttentionScore> kinds = {AttentionScore::additive, AttentionScore::scaled_dot, AttentionScore::dot};
  std::vector<std::string> kind_names;
  for (const AttentionScore k : kinds) kind_names.emplace_back(to_string(k));
  kind_names.emplace_back("transformer");  // the last row: the transformer model (multi-head scaled dot)
  std::vector<std::array<double, 3>> acc;
  std::vector<double> speeds;
  for (std::size_t k = 0; k < kind_names.size(); ++k) {
    const std::string& kind_name = kind_names[k];
    const bool transformer = k == kinds.size();
    std::vector<double> exact, geo, bleu, tps, cpu_tps, secs, loss;
    for (std::int64_t r = 0; r < s.rounds; ++r) {
      ModelConfig c = base_config(transformer ? "transformer" : "rnnsearch", s, fitted, num_steps);
      if (!transformer) c.attention = kinds[k];
      const Run run = train_and_eval(c, fitted, s, o.seed + static_cast<std::uint64_t>(r), o.verbose,
                                     "scores " + kind_name + " round " + std::to_string(r + 1));
      result.train_seconds += run.train_seconds;
      const Scores sc = score_subset(run, fitted.heldout_pairs, all_indices(fitted.heldout_pairs.size()));
      exact.push_back(sc.exact);
      geo.push_back(sc.geomean);
      bleu.push_back(sc.bleu4);
      tps.push_back(run.train.tokens / std::max(run.train_seconds, 1e-9));
      cpu_tps.push_back(run.train.tokens / std::max(run.train_cpu_seconds, 1e-9));
      secs.push_back(run.train_seconds);
      loss.push_back(run.train.steps.back().loss);
    }
    t.rows.push_back({kind_name, std::to_string(s.rounds), num(mean(exact)), num(mean(geo)), num(mean(bleu)),
                      num(mean(tps), 0), num(mean(cpu_tps), 0), num(mean(secs), 1), num(mean(loss), 4)});
    acc.push_back({mean(exact), mean(geo), mean(bleu)});
    speeds.push_back(mean(cpu_tps));
  }
  std::ostringstream notes;
  notes << "rnnsearch (bidirectional GRU encoder, maxout readout) with only the score function changed, and the "
           "transformer (2 + 2 layers, " << transformer_heads(s) << " heads, d_model " << s.embed << ", feed-forward " << s.hiddens << ", "
        << transformer_warmup(s) << " warmup steps); task `" << task
        << "`" << (task == "dates" ? "" : " with source lengths 1–" + std::to_string(max_len)) << ", num_steps "
        << num_steps << "; " << describe(s, true) << ", seed " << o.seed
        << " (+ round − 1). tokens/s = target tokens trained per second of training wall time; tokens/CPU-s = per "
           "second of the process's CPU time, which with --threads 1 stays comparable when other jobs share the "
           "machine (the speed bars use it).";
  t.notes = notes.str();
  result.tables.push_back(t);
  const double fastest = *std::max_element(speeds.begin(), speeds.end());
  std::vector<BarGroup> groups = {{"exact match", {}}, {"GeoMean", {}}, {"BLEU-4", {}}, {"speed (fastest = 1)", {}}};
  for (std::size_t k = 0; k < kind_names.size(); ++k) {
    for (int m = 0; m < 3; ++m) groups[m].values.push_back(acc[k][m]);
    groups[3].values.push_back(fastest > 0 ? speeds[k] / fastest : 0.0);
  }
  PlotOptions po;
  po.title = "rnnsearch score functions and the transformer on " + task;
  po.x_label = "";
  po.y_label = "score";
  const std::string svg = grouped_bar_chart_svg(kind_names, groups, po);
  result.seconds = since(t0);
  write_outputs(result, {svg}, o.out_dir);
  return result;
}

}  // namespace tg::models
