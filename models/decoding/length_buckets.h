#pragma once
// Scores by source-sentence length, for figures like Figure 2 of Bahdanau et al. (2014): BLEU
// against source length, one curve per system.
//
//   CorpusMetric bleu = [](const auto& hyp, const auto& ref) { return sacre_bleu(hyp, ref).score; };
//   LengthScores s = score_by_length(sources, references, {{"rnnsearch", hyps}}, {1, 3, 5, 15}, bleu);
//   // buckets 1-2, 3-4, 5-14, 15+; s.scores[bucket][system]; length_scores_csv(s) for a table
//
// A sentence's length is its number of words: whitespace-separated fields as Python's str.split()
// finds them (split_python_whitespace). A bucket's score is the metric computed on that bucket's
// lines alone (corpus BLEU inside the bucket, not a mean of sentence scores).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tg::models {

/// The sentences whose word count lies in [min_words, max_words].
struct LengthBucket {
  std::int64_t min_words = 0;
  std::int64_t max_words = -1;     ///< -1: no upper bound (the last bucket)
  std::vector<std::size_t> lines;  ///< 0-based line indices, ascending
  double mean_words = 0.0;         ///< mean word count of its sentences (NaN when empty)

  /// "3-4", "7" (one length) or "15+" (no upper bound).
  std::string label() const;
};

/// Splits sentences into buckets by word count: bucket k holds the lengths from starts[k] to
/// starts[k+1] - 1, the last one every length from starts.back() up. Empty buckets are kept.
/// Throws std::invalid_argument if starts is empty, negative or not strictly increasing, or a
/// sentence has fewer words than starts[0] (naming its line, 1-based), or is not UTF-8.
std::vector<LengthBucket> length_buckets(const std::vector<std::string>& sentences,
                                         const std::vector<std::int64_t>& starts);

/// A corpus-level score of aligned hypothesis and reference lines, e.g. sacre_bleu(h, r).score.
using CorpusMetric =
    std::function<double(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references)>;

/// One system's output, one line per source sentence.
struct SystemOutput {
  std::string label;
  std::vector<std::string> hypotheses;
};

/// Scores of several systems on the same length buckets.
struct LengthScores {
  std::vector<LengthBucket> buckets;
  std::vector<std::string> labels;          ///< one per system
  std::vector<std::vector<double>> scores;  ///< [bucket][system]; NaN for an empty bucket
  std::vector<double> overall;              ///< [system]: the metric on all lines
};

/// Buckets `sources` as length_buckets does and computes `metric` on each bucket's hypotheses and
/// references alone, for every system, and on all lines (`overall`, computed first so that the
/// metric's own errors, such as an empty reference, name lines of the whole corpus). Throws
/// std::invalid_argument if `references` or a system's hypotheses do not have one line per source
/// (naming the system and both counts), passes on the errors of length_buckets, and those of
/// `metric` (std::invalid_argument) after the system's label.
LengthScores score_by_length(const std::vector<std::string>& sources, const std::vector<std::string>& references,
                             const std::vector<SystemOutput>& systems, const std::vector<std::int64_t>& starts,
                             const CorpusMetric& metric);

/// The scores as CSV: a header "bucket,min_words,max_words,sentences,mean_words,LABEL..." and one
/// row per bucket (max_words empty for the open last bucket; scores with 4 decimals, empty for an
/// empty bucket). Labels with a comma, quote or line break are quoted as RFC 4180 says.
std::string length_scores_csv(const LengthScores& scores);

}  // namespace tg::models
