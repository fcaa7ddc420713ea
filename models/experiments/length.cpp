// The `length` experiment: rnnsearch, rnnencdec and transformer with the same budget, scored per source-length
// bucket on `reverse` and, if data_file is set, on sentence pairs of that file.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "autograd/parallel.h"
#include "autograd/random.h"
#include "models/experiments/experiments.h"
#include "models/experiments/support.h"

namespace tg::models {

using namespace experiment_support;

namespace {

/// Buckets of source length: nb buckets of equal width covering 1..max_len.
std::vector<std::pair<std::int64_t, std::int64_t>> length_buckets(std::int64_t max_len) {
  const std::int64_t nb = std::min<std::int64_t>(5, max_len);
  const std::int64_t width = (max_len + nb - 1) / nb;
  std::vector<std::pair<std::int64_t, std::int64_t>> b;
  for (std::int64_t lo = 1; lo <= max_len; lo += width) b.emplace_back(lo, std::min(max_len, lo + width - 1));
  return b;
}

/// Trains both models on `data` and returns the bucketed table and its plot.
std::pair<ExperimentTable, std::string> length_study(const TranslationData& data, std::int64_t max_len,
                                                     std::int64_t num_steps, const Settings& s,
                                                     const ExperimentOptions& o, const std::string& slug,
                                                     const std::string& title, double& train_seconds) {
  const std::vector<std::string> models = {"rnnsearch", "rnnencdec", "transformer"};
  std::vector<Run> runs;
  for (const auto& m : models) {
    runs.push_back(train_and_eval(base_config(m, s, data, num_steps), data, s, o.seed, o.verbose, slug + " " + m));
    train_seconds += runs.back().train_seconds;
  }
  const auto buckets = length_buckets(max_len);
  ExperimentTable t;
  t.slug = slug;
  t.title = title;
  t.columns = {"source length", "pairs"};
  for (const char* metric : {"BLEU-4", "exact", "GeoMean"})
    for (const auto& m : models) t.columns.push_back(m + " " + metric);
  std::vector<Series> series;
  for (const auto& m : models)
    for (const char* metric : {"BLEU-4", "GeoMean"}) series.push_back({.label = m + " " + metric, .x = {}, .y = {}});
  auto add_row = [&](const std::string& label, const std::vector<std::size_t>& idx, double x) {
    std::vector<Scores> sc;
    for (const auto& r : runs) sc.push_back(score_subset(r, data.heldout_pairs, idx));
    std::vector<std::string> row = {label, std::to_string(idx.size())};
    for (int metric = 0; metric < 3; ++metric)
      for (const auto& x_ : sc)
        row.push_back(idx.empty()                          ? ""
                      : metric == 0 && !x_.has_4grams     ? "n/a"
                      : num(metric == 0 ? x_.bleu4 : metric == 1 ? x_.exact : x_.geomean));
    t.rows.push_back(row);
    if (!std::isnan(x) && !idx.empty())
      for (std::size_t k = 0; k < runs.size(); ++k) {
        if (sc[k].has_4grams) {
          series[2 * k].x.push_back(x);
          series[2 * k].y.push_back(sc[k].bleu4);
        }
        series[2 * k + 1].x.push_back(x);
        series[2 * k + 1].y.push_back(sc[k].geomean);
      }
  };
  for (const auto& [lo, hi] : buckets) {
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < data.heldout_pairs.size(); ++i) {
      const auto n = static_cast<std::int64_t>(data.heldout_pairs.src[i].size());
      if (n >= lo && n <= hi) idx.push_back(i);
    }
    add_row(lo == hi ? std::to_string(lo) : std::to_string(lo) + "–" + std::to_string(hi), idx, 0.5 * (lo + hi));
  }
  add_row("all", all_indices(data.heldout_pairs.size()), NAN);
  std::ostringstream notes;
  notes << "Same budget for every model: " << describe(s, false) << ", num_steps " << num_steps << ", seed " << o.seed
        << "; the transformer has 2 + 2 layers, " << transformer_heads(s) << " heads, feed-forward width " << s.hiddens << " and "
        << transformer_warmup(s) << " warmup steps. Training time:";
  for (std::size_t k = 0; k < models.size(); ++k)
    notes << (k ? "," : "") << " " << models[k] << " " << num(runs[k].train_seconds, 1) << " s ("
          << num(runs[k].train.tokens / std::max(runs[k].train_seconds, 1e-9), 0) << " tokens/s)";
  notes << "; last training loss";
  for (std::size_t k = 0; k < models.size(); ++k) notes << (k ? " /" : "") << " " << num(runs[k].train.steps.back().loss, 4);
  notes        << ". BLEU-4 is corpus BLEU over the bucket (n/a where no reference has 4 tokens, so no 4-gram can match); "
           "exact = exact-match rate; GeoMean = mean sqrt(PSA·LCSR).";
  t.notes = notes.str();
  PlotOptions po;
  po.title = title;
  po.title.erase(std::remove(po.title.begin(), po.title.end(), '`'), po.title.end());  // Markdown only
  po.x_label = "source length (bucket centre)";
  po.y_label = "score on held-out pairs";
  // A series needs points to be drawn; drop empty ones (all buckets empty cannot happen with pairs).
  std::vector<Series> drawn;
  for (auto& se : series)
    if (!se.x.empty()) drawn.push_back(std::move(se));
  const std::string svg = drawn.empty() ? grouped_bar_chart_svg({"none"}, {{"no held-out pairs", {0.0}}}, po)
                                        : line_plot_svg(drawn, po);
  return {t, svg};
}

}  // namespace

ExperimentResult length_experiment(const ExperimentOptions& o) {
  o.validate();
  if (o.threads > 0) set_num_threads(o.threads);
  const auto t0 = Clock::now();
  ExperimentResult result;
  result.name = "length";
  std::vector<std::string> svgs;
  {
    const std::int64_t max_len = o.max_len > 0 ? o.max_len : (o.quick ? 12 : 50);
    const Settings s = resolve(o, {.steps = 250, .batch = 32, .embed = 16, .hiddens = 32, .train_pairs = 1000,
                                   .test_pairs = 200, .rounds = 1, .lr = 0.01},
                               {.steps = 3000, .batch = 64, .embed = 32, .hiddens = 64, .train_pairs = 20000,
                                .test_pairs = 500, .rounds = 1, .lr = 0.005});
    const TranslationData data = task_data("reverse", s, max_len, o.seed);
    auto [table, svg] = length_study(data, max_len, data.train.num_steps(), s, o, "length_reverse",
                                     "`reverse`, source lengths 1–" + std::to_string(max_len), result.train_seconds);
    result.tables.push_back(std::move(table));
    svgs.push_back(std::move(svg));
  }
  if (!o.data_file.empty()) {
    const std::int64_t L = o.data_max_len;
    const Settings s = resolve(o, {.steps = 100, .batch = 32, .embed = 32, .hiddens = 32, .train_pairs = 1000,
                                   .test_pairs = 200, .rounds = 1, .lr = 0.01},
                               {.steps = 3000, .batch = 64, .embed = 64, .hiddens = 64, .train_pairs = 20000,
                                .test_pairs = 500, .rounds = 1, .lr = 0.005});
    // fra.txt is ordered by length, so sample uniformly from every pair short enough.
    const auto all = read_sentence_pairs(o.data_file);
    const TokenizedPairs tok = tokenize_pairs(all);
    std::vector<std::size_t> ok;
    for (std::size_t i = 0; i < tok.size(); ++i)
      if (static_cast<std::int64_t>(tok.src[i].size()) <= L && static_cast<std::int64_t>(tok.tgt[i].size()) <= L)
        ok.push_back(i);
    Generator pick(o.seed ^ 0xf2aULL);
    for (std::size_t i = ok.size(); i > 1; --i) std::swap(ok[i - 1], ok[pick.below(i)]);
    const std::size_t want = static_cast<std::size_t>(s.train_pairs + s.test_pairs);
    if (ok.size() < want)
      throw std::invalid_argument(o.data_file + ": only " + std::to_string(ok.size()) + " pairs with at most " +
                                  std::to_string(L) + " tokens, " + std::to_string(want) + " wanted");
    ok.resize(want);
    std::sort(ok.begin(), ok.end());
    std::vector<SentencePair> chosen;
    for (auto i : ok) chosen.push_back(all[i]);
    Generator split(o.seed);
    const TranslationData data = make_translation_data(
        chosen, TranslationDataOptions().num_steps(L + 1).min_freq(2).holdout(Holdout::count(s.test_pairs)), split);
    auto [table, svg] = length_study(data, L, L + 1, s, o, "length_data",
                                     "`" + std::filesystem::path(o.data_file).filename().string() + "`, sentences of 1–" +
                                         std::to_string(L) + " tokens (vocab " + std::to_string(data.src_vocab.size()) +
                                         " / " + std::to_string(data.tgt_vocab.size()) + ")",
                                     result.train_seconds);
    result.tables.push_back(std::move(table));
    svgs.push_back(std::move(svg));
  }
  result.seconds = since(t0);
  write_outputs(result, svgs, o.out_dir);
  return result;
}

}  // namespace tg::models
