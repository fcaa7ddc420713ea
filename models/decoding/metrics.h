#pragma once
// Evaluation metrics for sequence-to-sequence models: BLEU (d2l's sentence-level variant and
// corpus BLEU-4 of Papineni et al. 2002), exact match, token accuracy, and the sequence scores
// PSA / LCSR / GeoMean.
//
// Sequence scores compare a target T with a prediction P, both cut at their first end token
// (`<eos>` for tokens, Vocab::kEos for ids; a sequence without one is used whole). With L = |T|:
//   PSA     = #{i < L : i < |P| and P[i] == T[i]} / L   (P truncated or padded to L; padding never matches)
//   LCSR    = LCS(T, P[:L]) / L                         (longest common subsequence)
//   GeoMean = sqrt(PSA * LCSR)
// Empty target (L = 0): all three are 1.0 if P is empty too, else 0.0 (predicting nothing is
// right exactly when nothing was to be predicted).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/text/text.h"

namespace tg::models {

// ---- BLEU ----------------------------------------------------------------------------------

/// d2l's bleu(pred_seq, label_seq, k): both strings split on ' ' (split_on_space), then
/// exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..k} p_n^(1/2^n), with p_n the clipped n-gram
/// matches over the len_pred - n + 1 predicted n-grams. Where d2l divides by zero (a prediction
/// with exactly n - 1 tokens) p_n is taken as 0, which is also d2l's value for shorter ones.
/// k must be >= 0.
double bleu_d2l(std::string_view pred_seq, std::string_view label_seq, int k);
/// bleu_d2l on token lists; an empty prediction scores 0.
double bleu_d2l(const std::vector<std::string>& pred, const std::vector<std::string>& label, int k);

/// Corpus BLEU with its parts.
struct BleuResult {
  double score = 0.0;                  ///< BP * exp(mean_n log p_n), in [0, 1]
  std::vector<double> precisions;      ///< p_n = matches[n-1] / totals[n-1], n = 1..max_n (0 if totals is 0)
  std::vector<std::int64_t> matches;   ///< clipped n-gram matches summed over the corpus
  std::vector<std::int64_t> totals;    ///< hypothesis n-grams summed over the corpus
  double brevity_penalty = 0.0;        ///< exp(1 - r/c) if c < r, else 1 (0 if c = 0)
  std::int64_t hyp_len = 0;            ///< c: total hypothesis tokens
  std::int64_t ref_len = 0;            ///< r: total reference tokens
};

/// Corpus BLEU (Papineni et al. 2002) with one reference per hypothesis: clipped n-gram counts
/// for n = 1..max_n are summed over the corpus before dividing, the precisions are combined by
/// a geometric mean with uniform weights, and the brevity penalty uses the corpus lengths. No
/// smoothing: the score is 0 if any n-gram order has no match (e.g. a corpus of 3-token
/// sentences has no 4-grams). Throws std::invalid_argument if the list sizes differ or max_n < 1.
BleuResult corpus_bleu(const std::vector<std::vector<std::string>>& hypotheses,
                       const std::vector<std::vector<std::string>>& references, int max_n = 4);
/// corpus_bleu on strings tokenised by split_whitespace.
BleuResult corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                       int max_n = 4);
/// Tokens separated by runs of ASCII whitespace (Python's str.split() on ASCII text).
std::vector<std::string> split_whitespace(std::string_view text);

// ---- sequence scores -----------------------------------------------------------------------

/// PSA, LCSR and GeoMean of one prediction (see the file comment), plus exact match.
struct SequenceScores {
  double psa = 0.0;
  double lcsr = 0.0;
  double geomean = 0.0;
  bool exact = false;  ///< P == T after cutting both at the end token (lengths equal too)
};

/// Scores of id sequences; `eos` marks the end (default Vocab::kEos).
SequenceScores sequence_scores(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& target,
                               std::int64_t eos = Vocab::kEos);
/// Scores of token sequences; `eos` marks the end.
SequenceScores sequence_scores(const std::vector<std::string>& pred, const std::vector<std::string>& target,
                               const std::string& eos = "<eos>");

/// Averages of a corpus of predictions.
struct CorpusScores {
  std::int64_t count = 0;      ///< number of pairs
  double exact_match = 0.0;    ///< fraction of exact predictions
  double token_accuracy = 0.0; ///< sum of positional matches / sum of L (micro average; see below)
  double psa = 0.0;            ///< mean PSA
  double lcsr = 0.0;           ///< mean LCSR
  double geomean = 0.0;        ///< mean GeoMean
};

/// Corpus averages of id sequences. Token accuracy pools positions over the corpus (PSA's
/// numerators summed over PSA's denominators); if every target is empty it is 1.0 when every
/// prediction is empty, else 0.0. An empty corpus gives all zeros. Throws
/// std::invalid_argument if the list sizes differ.
CorpusScores corpus_scores(const std::vector<std::vector<std::int64_t>>& preds,
                           const std::vector<std::vector<std::int64_t>>& targets, std::int64_t eos = Vocab::kEos);
/// Corpus averages of token sequences.
CorpusScores corpus_scores(const std::vector<std::vector<std::string>>& preds,
                           const std::vector<std::vector<std::string>>& targets, const std::string& eos = "<eos>");

/// Fraction of pairs whose prediction equals the target after cutting both at `eos`.
double exact_match(const std::vector<std::vector<std::int64_t>>& preds,
                   const std::vector<std::vector<std::int64_t>>& targets, std::int64_t eos = Vocab::kEos);
/// Pooled token accuracy, as CorpusScores::token_accuracy.
double token_accuracy(const std::vector<std::vector<std::int64_t>>& preds,
                      const std::vector<std::vector<std::int64_t>>& targets, std::int64_t eos = Vocab::kEos);

}  // namespace tg::models
