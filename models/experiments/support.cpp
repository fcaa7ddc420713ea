#include "models/experiments/support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "autograd/random.h"
#include "models/decoding/metrics.h"
#include "models/text/tasks.h"
#include "nn/file_io.h"

namespace tg::models::experiment_support {

namespace {

void write_text(const std::filesystem::path& path, const std::string& text, std::vector<std::string>& files) {
  nn::io::write_file_atomic(path, text);  // whole or not at all: a table is never half written
  files.push_back(path.string());
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

}  // namespace

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string num(double v, int decimals) {
  if (!std::isfinite(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

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
  s.precision = o.precision;
  return s;
}

std::string describe(const Settings& s, bool with_rounds) {
  std::ostringstream os;
  os << s.steps << " steps × batch " << s.batch << ", lr " << s.lr << ", embed " << s.embed << ", hidden " << s.hiddens
     << ", " << s.train_pairs << " training / " << s.test_pairs << " held-out pairs";
  if (with_rounds) os << ", " << s.rounds << (s.rounds == 1 ? " round" : " rounds");
  if (s.precision == autocast::Precision::bf16) os << ", bf16 mixed precision";
  return os.str();
}

std::int64_t transformer_warmup(const Settings& s) { return std::max<std::int64_t>(1, s.steps / 8); }
std::int64_t transformer_heads(const Settings& s) { return s.embed % 4 == 0 ? 4 : s.embed % 2 == 0 ? 2 : 1; }

ModelConfig base_config(const ModelKind& model, const Settings& s, const TranslationData& data, std::int64_t num_steps) {
  ModelConfig c;
  c.model = model;
  c.src_vocab = data.src_vocab.size();
  c.tgt_vocab = data.tgt_vocab.size();
  c.embed_size = s.embed;
  c.num_hiddens = s.hiddens;
  c.num_layers = model.name() == "transformer" ? 2 : 1;  // two encoder and two decoder layers
  c.num_heads = transformer_heads(s);
  c.dropout = 0.0;
  c.num_steps = num_steps;
  c.readout = Readout::maxout;
  return c;
}

Run train_and_eval(const ModelConfig& config, const TranslationData& data, const Settings& s, std::uint64_t seed,
                   bool verbose, const std::string& what) {
  Generator gen(seed ^ 0x5eedULL);
  auto model = make_model(config, gen);
  TrainOptions to;
  to.steps(s.steps).batch_size(s.batch).lr(s.lr).seed(seed).progress(false).checkpoint_every(0).precision(s.precision);
  if (config.model.name() == "transformer") to.warmup_steps(transformer_warmup(s));
  Run r;
  const auto t0 = Clock::now();
  const std::clock_t c0 = std::clock();
  r.train = train(*model, data, to);
  r.train_seconds = since(t0);
  r.train_cpu_seconds = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  EvalOptions eo;
  eo.decode.precision(s.precision);
  r.eval = evaluate(*model, data.heldout_pairs, data.src_vocab, data.tgt_vocab, eo);
  if (verbose)
    std::fprintf(stderr, "experiment: %s: %lld steps in %.1f s (%.0f tokens/s), last loss %.4f, held-out exact %.3f\n",
                 what.c_str(), static_cast<long long>(r.train.steps_run), r.train_seconds,
                 r.train_seconds > 0 ? r.train.tokens / r.train_seconds : 0.0,
                 r.train.steps.empty() ? NAN : r.train.steps.back().loss, r.eval.exact_match);
  return r;
}

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

void write_outputs(ExperimentResult& result, const std::vector<std::string>& svgs, const std::string& out_dir,
                   const std::vector<std::pair<std::string, std::string>>& extra) {
  if (out_dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw std::runtime_error(out_dir + ": cannot create directory (" + ec.message() + ")");
  const std::filesystem::path dir(out_dir);
  for (std::size_t i = 0; i < result.tables.size(); ++i) {
    write_text(dir / (result.tables[i].slug + ".csv"), result.tables[i].csv(), result.files);
    write_text(dir / (result.tables[i].slug + ".svg"), svgs.at(i), result.files);
  }
  for (const auto& [name, text] : extra) write_text(dir / name, text, result.files);
  write_text(dir / (result.name + ".md"), result.markdown(), result.files);
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

}  // namespace tg::models::experiment_support
