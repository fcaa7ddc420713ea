#include "models/decoding/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace tg::models {

namespace {

using Tokens = std::vector<std::string>;
// n-grams as token vectors (not joined strings), so tokens containing the separator cannot collide.
using NgramCounts = std::map<std::vector<std::string>, std::int64_t>;

NgramCounts count_ngrams(const Tokens& tokens, std::size_t n) {
  NgramCounts counts;
  for (std::size_t i = 0; i + n <= tokens.size(); ++i) ++counts[Tokens(tokens.begin() + i, tokens.begin() + i + n)];
  return counts;
}

// Clipped matches of the hypothesis n-grams against the reference n-grams (d2l's decrementing
// loop and Papineni's min(count, max_ref_count) give the same number).
std::int64_t clipped_matches(const Tokens& hyp, const Tokens& ref, std::size_t n) {
  NgramCounts ref_counts = count_ngrams(ref, n);
  std::int64_t matches = 0;
  for (std::size_t i = 0; i + n <= hyp.size(); ++i) {
    auto it = ref_counts.find(Tokens(hyp.begin() + i, hyp.begin() + i + n));
    if (it != ref_counts.end() && it->second > 0) {
      ++matches;
      --it->second;
    }
  }
  return matches;
}

template <class T>
std::vector<T> cut_at(const std::vector<T>& seq, const T& eos) {
  return {seq.begin(), std::find(seq.begin(), seq.end(), eos)};
}

struct Counts {
  std::int64_t positional = 0;  // PSA numerator
  std::int64_t lcs = 0;         // LCSR numerator
  std::int64_t length = 0;      // L
  bool pred_empty = false;
  bool exact = false;
};

template <class T>
std::int64_t lcs_length(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<std::int64_t> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = a[i - 1] == b[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

template <class T>
Counts count(const std::vector<T>& pred_in, const std::vector<T>& target_in, const T& eos) {
  const std::vector<T> target = cut_at(target_in, eos);
  std::vector<T> pred = cut_at(pred_in, eos);
  Counts c;
  c.length = static_cast<std::int64_t>(target.size());
  c.pred_empty = pred.empty();
  c.exact = pred == target;
  if (pred.size() > target.size()) pred.resize(target.size());  // padding to L never matches, so no need to pad
  for (std::size_t i = 0; i < pred.size(); ++i) c.positional += pred[i] == target[i];
  c.lcs = lcs_length(target, pred);
  return c;
}

SequenceScores scores_of(const Counts& c) {
  SequenceScores s;
  s.exact = c.exact;
  if (c.length == 0) {
    s.psa = s.lcsr = s.geomean = c.pred_empty ? 1.0 : 0.0;
    return s;
  }
  s.psa = static_cast<double>(c.positional) / static_cast<double>(c.length);
  s.lcsr = static_cast<double>(c.lcs) / static_cast<double>(c.length);
  s.geomean = std::sqrt(s.psa * s.lcsr);
  return s;
}

template <class T>
CorpusScores corpus_scores_impl(const std::vector<std::vector<T>>& preds, const std::vector<std::vector<T>>& targets,
                                const T& eos) {
  if (preds.size() != targets.size()) {
    throw std::invalid_argument("corpus_scores: " + std::to_string(preds.size()) + " predictions but " +
                                std::to_string(targets.size()) + " targets");
  }
  CorpusScores out;
  out.count = static_cast<std::int64_t>(preds.size());
  if (preds.empty()) return out;
  std::int64_t positional = 0, length = 0;
  bool all_preds_empty = true;
  for (std::size_t i = 0; i < preds.size(); ++i) {
    const Counts c = count(preds[i], targets[i], eos);
    const SequenceScores s = scores_of(c);
    positional += c.positional;
    length += c.length;
    all_preds_empty = all_preds_empty && c.pred_empty;
    out.exact_match += s.exact;
    out.psa += s.psa;
    out.lcsr += s.lcsr;
    out.geomean += s.geomean;
  }
  const double n = static_cast<double>(preds.size());
  out.exact_match /= n, out.psa /= n, out.lcsr /= n, out.geomean /= n;
  out.token_accuracy = length > 0 ? static_cast<double>(positional) / static_cast<double>(length)
                                  : (all_preds_empty ? 1.0 : 0.0);
  return out;
}

}  // namespace

// ---- BLEU ----------------------------------------------------------------------------------

double bleu_d2l(const std::vector<std::string>& pred, const std::vector<std::string>& label, int k) {
  if (k < 0) throw std::invalid_argument("bleu_d2l: k must be >= 0, got " + std::to_string(k));
  if (pred.empty()) return 0.0;
  const double len_pred = static_cast<double>(pred.size()), len_label = static_cast<double>(label.size());
  double score = std::exp(std::min(0.0, 1.0 - len_label / len_pred));
  for (int n = 1; n <= k; ++n) {
    const auto total = static_cast<std::int64_t>(pred.size()) - n + 1;
    if (total <= 0) return 0.0;
    const double p = static_cast<double>(clipped_matches(pred, label, static_cast<std::size_t>(n))) / static_cast<double>(total);
    score *= std::pow(p, std::pow(0.5, n));
  }
  return score;
}

double bleu_d2l(std::string_view pred_seq, std::string_view label_seq, int k) {
  return bleu_d2l(split_on_space(pred_seq), split_on_space(label_seq), k);
}

std::vector<std::string> split_whitespace(std::string_view text) {
  // Python's str.split() on ASCII: space, \t \n \v \f \r and the separators \x1c-\x1f.
  const auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); };
  std::vector<std::string> tokens;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) tokens.emplace_back(text.substr(start, i - start));
  }
  return tokens;
}

BleuResult corpus_bleu(const std::vector<std::vector<std::string>>& hypotheses,
                       const std::vector<std::vector<std::string>>& references, int max_n) {
  if (hypotheses.size() != references.size()) {
    throw std::invalid_argument("corpus_bleu: " + std::to_string(hypotheses.size()) + " hypotheses but " +
                                std::to_string(references.size()) + " references");
  }
  if (max_n < 1) throw std::invalid_argument("corpus_bleu: max_n must be >= 1, got " + std::to_string(max_n));
  BleuResult r;
  r.matches.assign(max_n, 0);
  r.totals.assign(max_n, 0);
  r.precisions.assign(max_n, 0.0);
  for (std::size_t s = 0; s < hypotheses.size(); ++s) {
    const auto& hyp = hypotheses[s];
    const auto& ref = references[s];
    r.hyp_len += static_cast<std::int64_t>(hyp.size());
    r.ref_len += static_cast<std::int64_t>(ref.size());
    for (int n = 1; n <= max_n; ++n) {
      r.matches[n - 1] += clipped_matches(hyp, ref, static_cast<std::size_t>(n));
      r.totals[n - 1] += std::max<std::int64_t>(0, static_cast<std::int64_t>(hyp.size()) - n + 1);
    }
  }
  double log_sum = 0.0;
  bool any_zero = false;
  for (int n = 0; n < max_n; ++n) {
    if (r.totals[n] > 0) r.precisions[n] = static_cast<double>(r.matches[n]) / static_cast<double>(r.totals[n]);
    if (r.matches[n] == 0) {
      any_zero = true;
    } else {
      log_sum += std::log(r.precisions[n]);
    }
  }
  if (r.hyp_len == 0) {
    r.brevity_penalty = 0.0;
  } else {
    r.brevity_penalty = r.hyp_len < r.ref_len
                            ? std::exp(1.0 - static_cast<double>(r.ref_len) / static_cast<double>(r.hyp_len))
                            : 1.0;
  }
  r.score = any_zero ? 0.0 : r.brevity_penalty * std::exp(log_sum / max_n);
  return r;
}

BleuResult corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                       int max_n) {
  std::vector<Tokens> hyps, refs;
  hyps.reserve(hypotheses.size());
  refs.reserve(references.size());
  for (const auto& h : hypotheses) hyps.push_back(split_whitespace(h));
  for (const auto& r : references) refs.push_back(split_whitespace(r));
  return corpus_bleu(hyps, refs, max_n);
}

// ---- sequence scores -----------------------------------------------------------------------

SequenceScores sequence_scores(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& target,
                               std::int64_t eos) {
  return scores_of(count(pred, target, eos));
}

SequenceScores sequence_scores(const std::vector<std::string>& pred, const std::vector<std::string>& target,
                               const std::string& eos) {
  return scores_of(count(pred, target, eos));
}

CorpusScores corpus_scores(const std::vector<std::vector<std::int64_t>>& preds,
                           const std::vector<std::vector<std::int64_t>>& targets, std::int64_t eos) {
  return corpus_scores_impl(preds, targets, eos);
}

CorpusScores corpus_scores(const std::vector<std::vector<std::string>>& preds,
                           const std::vector<std::vector<std::string>>& targets, const std::string& eos) {
  return corpus_scores_impl(preds, targets, eos);
}

double exact_match(const std::vector<std::vector<std::int64_t>>& preds,
                   const std::vector<std::vector<std::int64_t>>& targets, std::int64_t eos) {
  return corpus_scores_impl(preds, targets, eos).exact_match;
}

double token_accuracy(const std::vector<std::vector<std::int64_t>>& preds,
                      const std::vector<std::vector<std::int64_t>>& targets, std::int64_t eos) {
  return corpus_scores_impl(preds, targets, eos).token_accuracy;
}

}  // namespace tg::models
