// The `ablation` and `primes` experiments: rnnsearch and its decoder-path ablations at several
// maximum source lengths, over rounds of fresh initialisations.
#include <sstream>
#include <stdexcept>

#include "autograd/error_text.h"
#include "autograd/parallel.h"
#include "models/experiments/experiments.h"
#include "models/experiments/support.h"

namespace tg::models {

using namespace experiment_support;

namespace {

std::string variant_name(Ablation ablation) {
  return ablation == Ablation::none ? "base" : std::string(to_string(ablation));
}

ExperimentResult ablation_impl(const std::string& name, const ExperimentOptions& o, const std::string& task,
                               const std::vector<std::int64_t>& max_lens, const Settings& s) {
  const auto t0 = Clock::now();
  ExperimentResult result;
  result.name = name;
  ExperimentTable t;
  t.slug = name;
  t.title = "Decoder-path ablations of rnnsearch on `" + task + "`";
  t.columns = {"max length", "variant", "rounds", "PSA", "LCSR", "GeoMean", "GeoMean sd", "exact"};
  std::string rounds_csv = "max_len,variant,round,seed,psa,lcsr,geomean,exact,train_seconds,last_loss\n";
  std::vector<BarGroup> groups;
  for (const std::int64_t max_len : max_lens) {
    const TranslationData data = task_data(task, s, max_len, o.seed);
    const std::int64_t num_steps = data.train.num_steps();
    BarGroup g{"max length " + std::to_string(max_len), {}};
    for (const Ablation ab : option_values<Ablation>()) {
      std::vector<double> psa, lcsr, geo, exact;
      for (std::int64_t r = 0; r < s.rounds; ++r) {
        ModelConfig c = base_config("rnnsearch", s, data, num_steps);
        c.ablation = ab;
        const std::uint64_t seed = o.seed + static_cast<std::uint64_t>(r);
        const Run run = train_and_eval(c, data, s, seed, o.verbose,
                                       name + " L=" + std::to_string(max_len) + " " + variant_name(ab) + " round " +
                                           std::to_string(r + 1));
        result.train_seconds += run.train_seconds;
        const Scores sc = score_subset(run, data.heldout_pairs, all_indices(data.heldout_pairs.size()));
        psa.push_back(sc.psa);
        lcsr.push_back(sc.lcsr);
        geo.push_back(sc.geomean);
        exact.push_back(sc.exact);
        rounds_csv += std::to_string(max_len) + "," + variant_name(ab) + "," + std::to_string(r + 1) + "," +
                      std::to_string(seed) + "," + num(sc.psa, 4) + "," + num(sc.lcsr, 4) + "," + num(sc.geomean, 4) +
                      "," + num(sc.exact, 4) + "," + num(run.train_seconds, 2) + "," +
                      num(run.train.steps.back().loss, 4) + "\n";
      }
      t.rows.push_back({std::to_string(max_len), variant_name(ab), std::to_string(s.rounds), num(mean(psa)),
                        num(mean(lcsr)), num(mean(geo)), num(stdev(geo)), num(mean(exact))});
      g.values.push_back(mean(geo));
    }
    groups.push_back(std::move(g));
  }
  std::ostringstream notes;
  notes << "Task `" << task << "` with source lengths 1..max length; " << describe(s, true)
        << ". Round r (1-based) initialises and shuffles with seed " << o.seed << " + r − 1; the data of a maximum "
        << "length is the same in every round. Scores are means over rounds on the held-out pairs (greedy decoding); "
        << "\"GeoMean sd\" is the standard deviation over rounds (0 with one round).";
  t.notes = notes.str();
  result.tables.push_back(t);
  PlotOptions po;
  po.title = "GeoMean of rnnsearch variants on " + task + " (mean over rounds)";
  po.x_label = "maximum source length";
  po.y_label = "GeoMean";
  std::vector<std::string> names;
  for (const Ablation ab : option_values<Ablation>()) names.push_back(variant_name(ab));
  const std::string svg = grouped_bar_chart_svg(names, groups, po);
  result.seconds = since(t0);
  write_outputs(result, {svg}, o.out_dir, {{name + "_rounds.csv", rounds_csv}});
  return result;
}

}  // namespace

ExperimentResult ablation_experiment(const ExperimentOptions& o) {
  o.validate();
  if (o.threads > 0) set_num_threads(o.threads);
  const Settings s = resolve(o, {.steps = 200, .batch = 32, .embed = 16, .hiddens = 32, .train_pairs = 1000,
                                 .test_pairs = 100, .rounds = 2, .lr = 0.01},
                             {.steps = 1500, .batch = 64, .embed = 32, .hiddens = 64, .train_pairs = 10000,
                              .test_pairs = 300, .rounds = 3, .lr = 0.005});
  const auto lens = !o.max_lens.empty() ? o.max_lens
                    : o.max_len > 0     ? std::vector<std::int64_t>{o.max_len}
                    : o.quick           ? std::vector<std::int64_t>{6}
                                        : std::vector<std::int64_t>{10, 20};
  return ablation_impl("ablation", o, o.task.empty() ? "primes" : o.task, lens, s);
}

ExperimentResult primes_experiment(const ExperimentOptions& o) {
  o.validate();
  if (!o.task.empty() && o.task != "primes")
    throw std::invalid_argument("experiment options: the primes experiment runs on the primes task (use 'ablation' for '" +
                                elide(o.task) + "')");
  if (o.threads > 0) set_num_threads(o.threads);
  const Settings s = resolve(o, {.steps = 150, .batch = 32, .embed = 16, .hiddens = 32, .train_pairs = 800,
                                 .test_pairs = 100, .rounds = 1, .lr = 0.01},
                             {.steps = 1500, .batch = 64, .embed = 32, .hiddens = 64, .train_pairs = 10000,
                              .test_pairs = 300, .rounds = 3, .lr = 0.005});
  const auto lens = !o.max_lens.empty() ? o.max_lens
                    : o.quick           ? std::vector<std::int64_t>{5, 10}
                                        : std::vector<std::int64_t>{10, 60, 110};
  return ablation_impl("primes", o, "primes", lens, s);
}

}  // namespace tg::models
