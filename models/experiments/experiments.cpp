#include "models/experiments/experiments.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "autograd/parallel.h"
#include "autograd/random.h"
#include "models/text/data.h"
#include "models/decoding/decode.h"
#include "models/plots/heatmap.h"
#include "models/decoding/metrics.h"
#include "models/translators/seq2seq.h"
#include "models/text/tasks.h"
#include "models/training/trainer.h"

namespace tg::models {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string num(double v, int decimals = 3) {
  if (!std::isfinite(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

/// The settings an experiment actually uses, after quick/full defaults and overrides.
struct Settings {
  std::int64_t steps, batch, embed, hiddens, train_pairs, test_pairs, rounds;
  double lr;
};

Settings resolve(const ExperimentOptions& o, Settings quick, Settings full) {
  Settings s = o.quick ? quick : full;
  if (o.steps > 0) s.steps = o.steps;
  if (o.batch_size > 0) s.batch = o.batch_size;
  if (o.embed_size > 0) s.embed = o.embed_size;
  if (o.num_hiddens > 0) s.hiddens = o.num_hiddens;
  if (o.train_pairs > 0) s.train_pairs = o.train_pairs;
  if (o.test_pairs > 0) s.test_pairs = o.test_pairs;
  if (o.rounds > 0) s.rounds = o.rounds;
  if (o.lr > 0) s.lr = o.lr;
  return s;
}

std::string describe(const Settings& s, bool with_rounds) {
  std::ostringstream os;
  os << s.steps << " steps × batch " << s.batch << ", lr " << s.lr << ", embed " << s.embed << ", hidden " << s.hiddens
     << ", " << s.train_pairs << " training / " << s.test_pairs << " held-out pairs";
  if (with_rounds) os << ", " << s.rounds << (s.rounds == 1 ? " round" : " rounds");
  return os.str();
}

ModelConfig base_config(const ModelKind& model, const Settings& s, const TranslationData& data, std::int64_t num_steps) {
  ModelConfig c;
  c.model = model;
  c.src_vocab = data.src_vocab.size();
  c.tgt_vocab = data.tgt_vocab.size();
  c.embed_size = s.embed;
  c.num_hiddens = s.hiddens;
  c.num_layers = 1;
  c.dropout = 0.0;
  c.num_steps = num_steps;
  c.readout = Readout::maxout;
  return c;
}

/// A trained and scored model.
struct Run {
  TrainResult train;
  EvalReport eval;
  double train_seconds = 0.0;
  double train_cpu_seconds = 0.0;  ///< process CPU time of train(): with 1 thread, the wall time an idle core would take
};

Run train_and_eval(const ModelConfig& config, const TranslationData& data, const Settings& s, std::uint64_t seed,
                   bool verbose, const std::string& what) {
  Generator gen(seed ^ 0x5eedULL);
  auto model = make_model(config, gen);
  TrainOptions to;
  to.steps(s.steps).batch_size(s.batch).lr(s.lr).seed(seed).progress(false).checkpoint_every(0);
  Run r;
  const auto t0 = Clock::now();
  const std::clock_t c0 = std::clock();
  r.train = train(*model, data, to);
  r.train_seconds = since(t0);
  r.train_cpu_seconds = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  r.eval = evaluate(*model, data.heldout_pairs, data.src_vocab, data.tgt_vocab);
  if (verbose)
    std::fprintf(stderr, "experiment: %s: %lld steps in %.1f s (%.0f tokens/s), last loss %.4f, held-out exact %.3f\n",
                 what.c_str(), static_cast<long long>(r.train.steps.size()), r.train_seconds,
                 r.train_seconds > 0 ? r.train.tokens / r.train_seconds : 0.0,
                 r.train.steps.empty() ? NAN : r.train.steps.back().loss, r.eval.exact_match);
  return r;
}

/// Scores of the held-out pairs `idx` of a run.
struct Scores {
  std::int64_t count = 0;
  bool has_4grams = false;  ///< some reference has >= 4 tokens (else BLEU-4 is 0 by definition)
  double bleu4 = 0, exact = 0, psa = 0, lcsr = 0, geomean = 0;
};

Scores score_subset(const Run& run, const TokenizedPairs& pairs, const std::vector<std::size_t>& idx) {
  std::vector<std::vector<std::string>> hyp, ref;
  for (auto i : idx) {
    hyp.push_back(run.eval.translations.at(i).tokens);
    ref.push_back(pairs.tgt.at(i));
  }
  bool has_4grams = false;
  for (const auto& r : ref) has_4grams = has_4grams || r.size() >= 4;
  Scores s;
  s.count = static_cast<std::int64_t>(idx.size());
  s.has_4grams = has_4grams;
  if (idx.empty()) return s;
  const CorpusScores c = corpus_scores(hyp, ref);
  s.exact = c.exact_match;
  s.psa = c.psa;
  s.lcsr = c.lcsr;
  s.geomean = c.geomean;
  s.bleu4 = corpus_bleu(hyp, ref, 4).score;
  return s;
}

std::vector<std::size_t> all_indices(std::size_t n) {
  std::vector<std::size_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

void write_text(const std::filesystem::path& path, const std::string& text, std::vector<std::string>& files) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path.string() + ": cannot open for writing");
  out << text;
  out.close();
  if (!out) throw std::runtime_error(path.string() + ": write failed");
  files.push_back(path.string());
}

/// Writes NAME.md, and SLUG.csv + SLUG.svg of every table (svgs[i] is table i's plot).
void write_outputs(ExperimentResult& result, const std::vector<std::string>& svgs, const std::string& out_dir,
                   const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  if (out_dir.empty()) return;
  std::filesystem::create_directories(out_dir);
  const std::filesystem::path dir(out_dir);
  for (std::size_t i = 0; i < result.tables.size(); ++i) {
    write_text(dir / (result.tables[i].slug + ".csv"), result.tables[i].csv(), result.files);
    write_text(dir / (result.tables[i].slug + ".svg"), svgs.at(i), result.files);
  }
  for (const auto& [name, text] : extra) write_text(dir / name, text, result.files);
  write_text(dir / (result.name + ".md"), result.markdown(), result.files);
}

std::vector<SentencePair> task_pairs(const std::string& task, std::int64_t count, std::int64_t max_len, std::uint64_t seed) {
  return make_task(task, {.count = count, .min_len = 1, .max_len = max_len, .seed = seed});
}

/// Longest token count of either side of the pairs, + 1 for <eos>.
std::int64_t needed_steps(const TranslationData& d) {
  std::size_t m = 1;
  for (const TokenizedPairs* p : {&d.train_pairs, &d.heldout_pairs})
    for (std::size_t i = 0; i < p->size(); ++i) m = std::max({m, p->src[i].size(), p->tgt[i].size()});
  return static_cast<std::int64_t>(m) + 1;
}

/// A task's pairs split into training and held-out parts (vocabularies from the training part,
/// min_freq 1), encoded with num_steps = the longest sentence + 1, so nothing is truncated.
TranslationData task_data(const std::string& task, const Settings& s, std::int64_t max_len, std::uint64_t seed) {
  Generator split(seed);
  TranslationData d = make_translation_data(
      task_pairs(task, s.train_pairs + s.test_pairs, max_len, seed),
      TranslationDataOptions().num_steps(1).min_freq(1).holdout(Holdout::count(s.test_pairs)), split);
  const std::int64_t num_steps = needed_steps(d);
  d.train = Seq2SeqDataset(d.train_pairs, d.src_vocab, d.tgt_vocab, num_steps);
  d.heldout = Seq2SeqDataset(d.heldout_pairs, d.src_vocab, d.tgt_vocab, num_steps);
  return d;
}

// ---- length ------------------------------------------------------------------------------------

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
  const std::vector<std::string> models = {"rnnsearch", "rnnencdec"};
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
    for (const char* metric : {"BLEU-4", "GeoMean"}) series.push_back({m + " " + metric, {}, {}});
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
  notes << "Same budget for both: " << describe(s, false) << ", num_steps " << num_steps << ", seed " << o.seed
        << ". Training time: rnnsearch " << num(runs[0].train_seconds, 1) << " s ("
        << num(runs[0].train.tokens / std::max(runs[0].train_seconds, 1e-9), 0) << " tokens/s), rnnencdec "
        << num(runs[1].train_seconds, 1) << " s (" << num(runs[1].train.tokens / std::max(runs[1].train_seconds, 1e-9), 0)
        << " tokens/s); last training loss " << num(runs[0].train.steps.back().loss, 4) << " / "
        << num(runs[1].train.steps.back().loss, 4)
        << ". BLEU-4 is corpus BLEU over the bucket (n/a where no reference has 4 tokens, so no 4-gram can match); "
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

// ---- ablation ----------------------------------------------------------------------------------

std::string variant_name(Ablation ablation) {
  return ablation == Ablation::none ? "base" : std::string(to_string(ablation));
}

double mean(const std::vector<double>& v) {
  return v.empty() ? NAN : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double stdev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double acc = 0;
  for (double x : v) acc += (x - m) * (x - m);
  return std::sqrt(acc / static_cast<double>(v.size() - 1));
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

// ---- options, tables ---------------------------------------------------------------------------

void ExperimentOptions::validate() const {
  auto fail = [](const std::string& what) { throw std::invalid_argument("experiment options: " + what); };
  if (threads < 0) fail("threads must be >= 0, got " + std::to_string(threads));
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"steps", steps},           {"batch_size", batch_size}, {"embed_size", embed_size},
      {"num_hiddens", num_hiddens}, {"train_pairs", train_pairs}, {"test_pairs", test_pairs},
      {"rounds", rounds},         {"max_len", max_len}};
  for (const auto& [field, v] : sizes)
    if (v < 0) fail(std::string(field) + " must be >= 0 (0 = default), got " + std::to_string(v));
  if (!(lr >= 0) || !std::isfinite(lr)) fail("lr must be a finite number >= 0 (0 = default)");
  for (auto l : max_lens)
    if (l < 1) fail("every maximum length must be >= 1, got " + std::to_string(l));
  if (data_max_len < 1) fail("data_max_len must be >= 1, got " + std::to_string(data_max_len));
  if (!task.empty()) {
    const auto names = task_names();
    if (std::find(names.begin(), names.end(), task) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      fail("unknown task '" + task + "' (known: " + list + ")");
    }
  }
  if (!data_file.empty() && !std::filesystem::is_regular_file(data_file))
    fail("data file '" + data_file + "' does not exist or is not a file");
}

std::size_t ExperimentTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return i;
  throw std::out_of_range("table " + slug + ": no column '" + name + "'");
}

std::string ExperimentTable::markdown() const {
  std::ostringstream os;
  os << '|';
  for (const auto& c : columns) os << ' ' << c << " |";
  os << "\n|";
  for (std::size_t i = 0; i < columns.size(); ++i) os << (i < 2 ? "---|" : "---:|");
  os << '\n';
  for (const auto& row : rows) {
    os << '|';
    for (const auto& cell : row) os << ' ' << cell << " |";
    os << '\n';
  }
  return os.str();
}

std::string ExperimentTable::csv() const {
  auto cell = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::ostringstream os;
  for (std::size_t i = 0; i < columns.size(); ++i) os << (i ? "," : "") << cell(columns[i]);
  os << '\n';
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) os << (i ? "," : "") << cell(row[i]);
    os << '\n';
  }
  return os.str();
}

std::string ExperimentResult::markdown() const {
  std::ostringstream os;
  os << "# Experiment " << name << "\n\n";
  for (const auto& t : tables) {
    os << "## " << t.title << "\n\n";
    if (!t.notes.empty()) os << t.notes << "\n\n";
    os << t.markdown() << "\n![" << t.slug << "](" << t.slug << ".svg)\n\n";
  }
  os << "Wall time " << num(seconds, 1) << " s, of which training " << num(train_seconds, 1) << " s.\n";
  return os.str();
}

std::vector<std::string> experiment_names() { return {"ablation", "length", "primes", "scores"}; }

std::vector<std::int64_t> parse_length_list(const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1)
      throw std::invalid_argument("expected a comma-separated list of positive lengths, got '" + text + "'");
    out.push_back(v);
  }
  if (out.empty()) throw std::invalid_argument("expected a comma-separated list of positive lengths, got '" + text + "'");
  return out;
}

// ---- the experiments ---------------------------------------------------------------------------

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
                                o.task + "')");
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
  t.title = "Attention score functions of rnnsearch on `" + task + "`";
  t.columns = {"attention", "rounds", "exact", "GeoMean", "BLEU-4", "tokens/s", "tokens/CPU-s", "train s", "last loss"};
  const std::vector<AttentionScore> kinds = {AttentionScore::additive, AttentionScore::scaled_dot, AttentionScore::dot};
  std::vector<std::string> kind_names;
  for (const AttentionScore k : kinds) kind_names.emplace_back(to_string(k));
  std::vector<std::array<double, 3>> acc;
  std::vector<double> speeds;
  for (const AttentionScore kind : kinds) {
    const std::string kind_name(to_string(kind));
    std::vector<double> exact, geo, bleu, tps, cpu_tps, secs, loss;
    for (std::int64_t r = 0; r < s.rounds; ++r) {
      ModelConfig c = base_config("rnnsearch", s, fitted, num_steps);
      c.attention = kind;
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
  notes << "rnnsearch (bidirectional GRU encoder, maxout readout) with only the score function changed; task `" << task
        << "`" << (task == "dates" ? "" : " with source lengths 1–" + std::to_string(max_len)) << ", num_steps "
        << num_steps << "; " << describe(s, true) << ", seed " << o.seed
        << " (+ round − 1). tokens/s = target tokens trained per second of training wall time; tokens/CPU-s = per "
           "second of the process's CPU time, which with --threads 1 stays comparable when other jobs share the "
           "machine (the speed bars use it).";
  t.notes = notes.str();
  result.tables.push_back(t);
  const double fastest = *std::max_element(speeds.begin(), speeds.end());
  std::vector<BarGroup> groups = {{"exact match", {}}, {"GeoMean", {}}, {"BLEU-4", {}}, {"speed (fastest = 1)", {}}};
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    for (int m = 0; m < 3; ++m) groups[m].values.push_back(acc[k][m]);
    groups[3].values.push_back(fastest > 0 ? speeds[k] / fastest : 0.0);
  }
  PlotOptions po;
  po.title = "rnnsearch score functions on " + task;
  po.x_label = "";
  po.y_label = "score";
  const std::string svg = grouped_bar_chart_svg(kind_names, groups, po);
  result.seconds = since(t0);
  write_outputs(result, {svg}, o.out_dir);
  return result;
}

ExperimentResult run_experiment(const std::string& name, const ExperimentOptions& options) {
  if (name == "length") return length_experiment(options);
  if (name == "ablation") return ablation_experiment(options);
  if (name == "primes") return primes_experiment(options);
  if (name == "scores") return scores_experiment(options);
  throw std::invalid_argument("unknown experiment '" + name + "' (known: ablation, length, primes, scores)");
}

// ---- grouped bar chart -------------------------------------------------------------------------

std::string grouped_bar_chart_svg(const std::vector<std::string>& series, const std::vector<BarGroup>& groups,
                                  const PlotOptions& options) {
  if (series.empty() || groups.empty()) throw std::invalid_argument("grouped bar chart: nothing to plot");
  for (const auto& g : groups)
    if (g.values.size() != series.size())
      throw std::invalid_argument("grouped bar chart: group '" + g.label + "' has " + std::to_string(g.values.size()) +
                                  " values for " + std::to_string(series.size()) + " series");
  static const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  double ymax = 1.0;
  for (const auto& g : groups)
    for (double v : g.values)
      if (std::isfinite(v)) ymax = std::max(ymax, v);
  auto f = [](double v) { return num(v, 2); };
  std::size_t legend_chars = 4;
  for (const auto& s : series) legend_chars = std::max(legend_chars, s.size());
  std::size_t group_chars = 0;
  for (const auto& g : groups) group_chars = std::max(group_chars, display_width(g.label));
  const double bar_w = 16;
  // Wide enough for the bars and for the group's label under them (~7 px per character).
  const double group_w = std::max(bar_w * static_cast<double>(series.size()) + 22, 7.0 * static_cast<double>(group_chars) + 12);
  const double gap = group_w - bar_w * static_cast<double>(series.size());
  const double left = 56, top = options.title.empty() ? 16 : 40, plot_h = 220;
  const double plot_w = std::max(200.0, group_w * static_cast<double>(groups.size()));
  const double legend_x = left + plot_w + 20;
  const double width = legend_x + 24 + 7.0 * static_cast<double>(legend_chars) + 10;
  const double height = top + plot_h + 64;
  const double base = top + plot_h;
  std::ostringstream os;
  os << svg_begin(width, height, 12);
  if (!options.title.empty())
    os << "<text x=\"" << f(width / 2) << "\" y=\"24\" text-anchor=\"middle\" font-weight=\"bold\">"
       << xml_escape(options.title) << "</text>\n";
  for (int k = 0; k <= 5; ++k) {
    const double v = ymax * k / 5.0, y = base - plot_h * k / 5.0;
    os << "<line x1=\"" << f(left) << "\" y1=\"" << f(y) << "\" x2=\"" << f(left + plot_w) << "\" y2=\"" << f(y)
       << "\" stroke=\"" << (k == 0 ? "#444" : "#e5e5e5") << "\"/>\n"
       << "<text x=\"" << f(left - 6) << "\" y=\"" << f(y + 4) << "\" text-anchor=\"end\">" << num(v, 1) << "</text>\n";
  }
  os << "<text x=\"14\" y=\"" << f(top + plot_h / 2) << "\" transform=\"rotate(-90 14 " << f(top + plot_h / 2)
     << ")\" text-anchor=\"middle\">" << xml_escape(options.y_label) << "</text>\n";
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const double gx = left + gap / 2 + group_w * static_cast<double>(gi);
    for (std::size_t si = 0; si < series.size(); ++si) {
      const double v = groups[gi].values[si];
      const double h = std::isfinite(v) ? std::max(0.0, v) / ymax * plot_h : 0.0;
      os << "<rect x=\"" << f(gx + bar_w * static_cast<double>(si)) << "\" y=\"" << num(base - h, 4) << "\" width=\""
         << bar_w - 2 << "\" height=\"" << num(h, 4) << "\" fill=\"" << kPalette[si % 10] << "\" data-group=\"" << gi
         << "\" data-series=\"" << si << "\" data-value=\"" << num(v, 6) << "\"><title>" << xml_escape(groups[gi].label)
         << ", " << xml_escape(series[si]) << ": " << num(v, 3) << "</title></rect>\n";
    }
    os << "<text x=\"" << f(gx + bar_w * static_cast<double>(series.size()) / 2) << "\" y=\"" << f(base + 18)
       << "\" text-anchor=\"middle\">" << xml_escape(groups[gi].label) << "</text>\n";
  }
  if (!options.x_label.empty())
    os << "<text x=\"" << f(left + plot_w / 2) << "\" y=\"" << f(base + 44) << "\" text-anchor=\"middle\">"
       << xml_escape(options.x_label) << "</text>\n";
  for (std::size_t si = 0; si < series.size(); ++si) {
    const double y = top + 8 + 20.0 * static_cast<double>(si);
    os << "<rect x=\"" << f(legend_x) << "\" y=\"" << f(y - 10) << "\" width=\"14\" height=\"14\" fill=\""
       << kPalette[si % 10] << "\"/>\n<text x=\"" << f(legend_x + 20) << "\" y=\"" << f(y + 2) << "\">"
       << xml_escape(series[si]) << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace tg::models
