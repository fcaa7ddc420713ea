// bahdanau bleu: corpus BLEU-4, sacreBLEU-compatible BLEU or chrF2 of system outputs against
// references; d2l's sentence-level BLEU-k; --by-length, a table by source-length bucket.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/error_text.h"
#include "models/decoding/length_buckets.h"
#include "models/decoding/metrics.h"
#include "models/decoding/sacrebleu.h"
#include "models/plots/heatmap.h"
#include "models/plots/plot.h"

#include "common.h"

namespace tg::cli {

using namespace tg::models;

namespace {

struct BleuArgs {
  std::vector<std::string> hyp, label;
  std::string ref, src, buckets = "1,3,5,7,9,11,13,15", csv, svg;
  bool by_length = false;
  int d2l_k = 0;
  std::string metric = "bleu4", tokenize = "13a";
  CLI::Option* tokenize_opt = nullptr;
  CLI::Option* buckets_opt = nullptr;
};

/// The lines of a text file the CLI reads itself (hypotheses, references, sources), without a
/// final '\r': through io::read_lines, so only a regular file of at most kTextData bytes with
/// lines of at most kLineBytes is read, and a read error is an error naming it.
std::vector<std::string> read_text_lines(const std::string& path, std::string_view flag) {
  std::vector<std::string> lines = io::read_lines(path, io::limits::kTextData, flag);
  for (std::string& line : lines)
    if (!line.empty() && line.back() == '\r') line.pop_back();
  return lines;
}

/// "1,3,5,15" -> {1, 3, 5, 15}.
std::vector<std::int64_t> parse_bucket_starts(const std::string& text) {
  std::vector<std::int64_t> starts;
  std::istringstream in(text);
  for (std::string field; std::getline(in, field, ',');) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
    if (ec != std::errc() || end != field.data() + field.size() || field.empty())
      throw UsageError("--buckets: '" + elide(field) + "' is not a whole number (expected e.g. 1,3,5,15)");
    starts.push_back(v);
  }
  return starts;
}

// bleu --by-length: a table of one row per source-length bucket, a column per system.
int run_bleu_by_length(const BleuArgs& a, const std::vector<std::vector<std::string>>& hyps,
                       const std::vector<std::string>& ref) {
  const auto src = read_text_lines(a.src, "--src");
  if (src.size() != ref.size())
    throw UsageError(a.src + " has " + std::to_string(src.size()) + " lines but " + a.ref + " has " +
                     std::to_string(ref.size()));
  std::vector<SystemOutput> systems;
  for (std::size_t k = 0; k < hyps.size(); ++k) systems.push_back({a.label.empty() ? a.hyp[k] : a.label[k], hyps[k]});
  const bool chrf = a.metric == "chrf";
  const auto tok = a.tokenize == "13a" ? SacreTokenizer::k13a : SacreTokenizer::kNone;
  const CorpusMetric metric = [&](const std::vector<std::string>& h, const std::vector<std::string>& r) {
    return chrf ? sacre_chrf(h, r).score : sacre_bleu(h, r, tok).score;
  };
  LengthScores s;
  try {
    s = score_by_length(src, ref, systems, parse_bucket_starts(a.buckets), metric);
  } catch (const std::invalid_argument& e) {
    throw UsageError(a.src + ", " + a.ref + ": " + e.what());
  }
  // The signature of the metric (scores inside a bucket have the same one).
  SacreBleuScore bleu_signature;
  bleu_signature.tokenizer = tok;
  std::printf("%s by source length in words (%s)\n",
              (chrf ? ChrfScore().signature() : bleu_signature.signature()).c_str(), a.src.c_str());
  std::vector<int> width;
  std::printf("%-8s %9s", "words", "sentences");
  for (const std::string& label : s.labels) {
    width.push_back(std::max<int>(8, static_cast<int>(display_width(label))));
    std::printf("  %*s", width.back(), label.c_str());
  }
  auto row = [&](const std::string& name, std::size_t n, const std::vector<double>& v) {
    std::printf("\n%-8s %9zu", name.c_str(), n);
    for (std::size_t k = 0; k < v.size(); ++k)
      if (std::isnan(v[k])) std::printf("  %*s", width[k], "-");
      else std::printf("  %*.2f", width[k], v[k]);
  };
  for (std::size_t b = 0; b < s.buckets.size(); ++b) row(s.buckets[b].label(), s.buckets[b].lines.size(), s.scores[b]);
  row("all", src.size(), s.overall);
  std::printf("\n");
  if (!a.csv.empty()) io::write_file_atomic(a.csv, length_scores_csv(s));
  if (!a.svg.empty()) {
    // x: the mean source length of each bucket's sentences, so the open last bucket has a place too.
    std::vector<Series> series;
    for (std::size_t k = 0; k < s.labels.size(); ++k) {
      Series& se = series.emplace_back();
      se.label = s.labels[k];
      for (std::size_t b = 0; b < s.buckets.size(); ++b)
        if (!s.buckets[b].lines.empty()) {
          se.x.push_back(s.buckets[b].mean_words);
          se.y.push_back(s.scores[b][k]);
        }
    }
    PlotOptions po;
    po.title = std::string(chrf ? "chrF2" : "BLEU") + " by source sentence length";
    po.x_label = "source sentence length in words (mean of each bucket)";
    po.y_label = chrf ? "chrF2" : "BLEU (sacreBLEU-compatible)";
    io::write_file_atomic(a.svg, line_plot_svg(series, po));
  }
  return 0;
}

int run_bleu(const BleuArgs& a) {
  require_distinct(concat(named("--hyp", a.hyp), {{"--ref", a.ref}, {"--src", a.src}}),
                   {{"--csv", a.csv}, {"--svg", a.svg}});
  if (!a.label.empty() && a.label.size() != a.hyp.size())
    throw UsageError(std::to_string(a.label.size()) + " --label for " + std::to_string(a.hyp.size()) +
                     " --hyp: give one label per --hyp, in the same order");
  if (a.tokenize_opt->count() > 0 && a.metric != "sacrebleu")
    throw UsageError("--tokenize applies to --metric sacrebleu only");
  if (a.by_length) {
    if (a.src.empty()) throw UsageError("--by-length needs --src (the source sentences, one per line)");
    if (a.metric == "bleu4") throw UsageError("--by-length needs --metric sacrebleu or chrf");
    if (a.d2l_k > 0) throw UsageError("--d2l-k cannot be combined with --by-length");
  } else {
    for (const auto& [flag, given] : {std::pair{"--src", !a.src.empty()}, {"--csv", !a.csv.empty()},
                                      {"--svg", !a.svg.empty()}, {"--buckets", a.buckets_opt->count() > 0}})
      if (given) throw UsageError(std::string(flag) + " applies to --by-length only");
  }
  const auto ref = read_text_lines(a.ref, "--ref");
  std::vector<std::vector<std::string>> hyps;
  for (const std::string& path : a.hyp) {
    hyps.push_back(read_text_lines(path, "--hyp"));
    if (hyps.back().size() != ref.size())
      throw UsageError(path + " has " + std::to_string(hyps.back().size()) + " lines but " + a.ref + " has " +
                       std::to_string(ref.size()));
  }
  if (a.by_length) return run_bleu_by_length(a, hyps, ref);
  if (a.d2l_k > 0) {  // d2l's sentence-level BLEU-k, one score per line
    if (a.metric != "bleu4") throw UsageError("--d2l-k cannot be combined with --metric " + a.metric);
    if (hyps.size() != 1) throw UsageError("--d2l-k scores one --hyp at a time");
    for (std::size_t i = 0; i < ref.size(); ++i) std::printf("%.3f\n", bleu_d2l(hyps[0][i], ref[i], a.d2l_k));
    return 0;
  }
  for (std::size_t k = 0; k < hyps.size(); ++k) {
    // One system: the score line alone, as before; several: each line after its label and a tab.
    if (hyps.size() > 1) std::printf("%s\t", a.label.empty() ? a.hyp[k].c_str() : a.label[k].c_str());
    const auto& hyp = hyps[k];
    try {
      if (a.metric == "sacrebleu") {
        const auto tok = a.tokenize == "13a" ? SacreTokenizer::k13a : SacreTokenizer::kNone;
        std::printf("%s\n", sacre_bleu(hyp, ref, tok).format().c_str());
        continue;
      }
      if (a.metric == "chrf") {
        std::printf("%s\n", sacre_chrf(hyp, ref).format().c_str());
        continue;
      }
    } catch (const std::invalid_argument& e) {
      throw UsageError(a.hyp[k] + ", " + a.ref + ": " + e.what());
    }
    const BleuResult b = corpus_bleu(hyp, ref, 4);
    std::printf("BLEU-4 %.4f (p1 %.4f p2 %.4f p3 %.4f p4 %.4f, BP %.4f, hyp_len %lld, ref_len %lld)\n", b.score,
                b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.brevity_penalty,
                static_cast<long long>(b.hyp_len), static_cast<long long>(b.ref_len));
  }
  return 0;
}

}  // namespace

Subcommand add_bleu(CLI::App& app) {
  auto args = std::make_shared<BleuArgs>();
  BleuArgs& ba = *args;
  CLI::App* bleu_cmd = app.add_subcommand(
      "bleu", "Score a system output against references: corpus BLEU-4 of whitespace tokens (default), "
              "sacreBLEU-compatible BLEU, or chrF2");
  bleu_cmd->add_option("--hyp", ba.hyp, "System output, one sentence per line; repeat to score several systems")
      ->required()->take_all();
  bleu_cmd->add_option("--ref", ba.ref, "References, one per line")->required();
  bleu_cmd->add_option("--label", ba.label, "Name of each --hyp (repeat, in the same order; default: the file name)")
      ->take_all();
  bleu_cmd->add_option("--metric", ba.metric,
                       "bleu4: BLEU-4 in [0, 1] of whitespace-split lines (Papineni, no smoothing); "
                       "sacrebleu: BLEU in [0, 100] as sacreBLEU 2.x computes it on detokenised text (13a, exp "
                       "smoothing), with its signature; chrf: chrF2 as sacreBLEU 2.x")
      ->check(CLI::IsMember({"bleu4", "sacrebleu", "chrf"}))->capture_default_str();
  ba.tokenize_opt = bleu_cmd->add_option("--tokenize", ba.tokenize, "sacrebleu: 13a (sacreBLEU's default) or none")
                        ->check(CLI::IsMember({"13a", "none"}))->capture_default_str();
  bleu_cmd->add_flag("--by-length", ba.by_length,
                     "Score each source-length bucket on its own (sacrebleu or chrf; needs --src): one row per "
                     "bucket with its range in source words (whitespace-separated), its sentence count and each "
                     "system's corpus score over that bucket's lines, then 'all'");
  bleu_cmd->add_option("--src", ba.src, "Source sentences, one per line, aligned with --ref (for --by-length)");
  ba.buckets_opt = bleu_cmd->add_option("--buckets", ba.buckets,
                                        "--by-length buckets: the first length of each, comma-separated; the last "
                                        "bucket has no upper bound (the default suits fra.txt: 1-2, 3-4, ..., 13-14, 15+)")
                       ->capture_default_str();
  bleu_cmd->add_option("--csv", ba.csv, "--by-length: also write the table as CSV (bucket,min_words,max_words,sentences,"
                                        "mean_words, then one column per system)");
  bleu_cmd->add_option("--svg", ba.svg, "--by-length: also plot it as SVG (one line per system; x = mean source "
                                        "length of each bucket)");
  bleu_cmd->add_option("--d2l-k", ba.d2l_k, "Print d2l's sentence-level BLEU-k of each line instead")->check(CLI::Range(1, 8));
  return {bleu_cmd, [args] { return run_bleu(*args); }};
}

}  // namespace tg::cli
