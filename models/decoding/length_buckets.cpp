// Scores per source-length bucket; see length_buckets.h.
#include "models/decoding/length_buckets.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "models/decoding/sacrebleu.h"

namespace tg::models {

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string fixed(double v, int decimals) {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string LengthBucket::label() const {
  if (max_words < 0) return std::to_string(min_words) + "+";
  if (max_words == min_words) return std::to_string(min_words);
  return std::to_string(min_words) + "-" + std::to_string(max_words);
}

std::vector<LengthBucket> length_buckets(const std::vector<std::string>& sentences,
                                         const std::vector<std::int64_t>& starts) {
  if (starts.empty()) throw std::invalid_argument("length_buckets: no bucket starts given");
  for (std::size_t k = 0; k < starts.size(); ++k)
    if (starts[k] < 0 || (k > 0 && starts[k] <= starts[k - 1]))
      throw std::invalid_argument("length_buckets: bucket starts must be non-negative and increasing, got " +
                                  std::to_string(starts[k]) + (k > 0 ? " after " + std::to_string(starts[k - 1]) : ""));
  std::vector<LengthBucket> buckets(starts.size());
  for (std::size_t k = 0; k < starts.size(); ++k) {
    buckets[k].min_words = starts[k];
    buckets[k].max_words = k + 1 < starts.size() ? starts[k + 1] - 1 : -1;
  }
  std::vector<double> word_sum(starts.size(), 0.0);
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    std::int64_t words = 0;
    try {
      words = static_cast<std::int64_t>(split_python_whitespace(sentences[i]).size());
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument("length_buckets: line " + std::to_string(i + 1) + " is not valid UTF-8");
    }
    if (words < starts[0])
      throw std::invalid_argument("length_buckets: line " + std::to_string(i + 1) + " has " + std::to_string(words) +
                                  " words, fewer than the first bucket's " + std::to_string(starts[0]));
    std::size_t k = starts.size() - 1;
    while (words < starts[k]) --k;
    buckets[k].lines.push_back(i);
    word_sum[k] += static_cast<double>(words);
  }
  for (std::size_t k = 0; k < buckets.size(); ++k)
    buckets[k].mean_words = buckets[k].lines.empty() ? std::numeric_limits<double>::quiet_NaN()
                                                     : word_sum[k] / static_cast<double>(buckets[k].lines.size());
  return buckets;
}

LengthScores score_by_length(const std::vector<std::string>& sources, const std::vector<std::string>& references,
                             const std::vector<SystemOutput>& systems, const std::vector<std::int64_t>& starts,
                             const CorpusMetric& metric) {
  const std::string n = std::to_string(sources.size());
  if (references.size() != sources.size())
    throw std::invalid_argument("score_by_length: " + std::to_string(references.size()) + " references for " + n +
                                " sources");
  for (const SystemOutput& s : systems)
    if (s.hypotheses.size() != sources.size())
      throw std::invalid_argument("score_by_length: system '" + s.label + "' has " +
                                  std::to_string(s.hypotheses.size()) + " hypotheses for " + n + " sources");
  LengthScores out;
  out.buckets = length_buckets(sources, starts);
  for (const SystemOutput& s : systems) {
    out.labels.push_back(s.label);
    try {
      out.overall.push_back(metric(s.hypotheses, references));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("score_by_length: system '" + s.label + "': " + e.what());
    }
  }
  for (const LengthBucket& b : out.buckets) {
    std::vector<double>& row = out.scores.emplace_back();
    std::vector<std::string> refs;
    for (std::size_t i : b.lines) refs.push_back(references[i]);
    for (const SystemOutput& s : systems) {
      if (b.lines.empty()) {  // BLEU of no sentences is undefined, not 0
        row.push_back(std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      std::vector<std::string> hyps;
      for (std::size_t i : b.lines) hyps.push_back(s.hypotheses[i]);
      row.push_back(metric(hyps, refs));
    }
  }
  return out;
}

std::string length_scores_csv(const LengthScores& s) {
  std::string csv = "bucket,min_words,max_words,sentences,mean_words";
  for (const std::string& label : s.labels) csv += "," + csv_field(label);
  csv += "\n";
  for (std::size_t k = 0; k < s.buckets.size(); ++k) {
    const LengthBucket& b = s.buckets[k];
    csv += b.label() + "," + std::to_string(b.min_words) + "," + (b.max_words < 0 ? "" : std::to_string(b.max_words)) +
           "," + std::to_string(b.lines.size()) + "," + fixed(b.mean_words, 2);
    for (double v : s.scores[k]) csv += "," + fixed(v, 4);
    csv += "\n";
  }
  return csv;
}

}  // namespace tg::models
