#pragma once
// Corpus BLEU and chrF computed the way sacreBLEU 2.x computes them, so that scores of tapegrad
// translations can be compared with the numbers papers report:
//
//   auto bleu = tg::models::sacre_bleu(hypotheses, references);  // 13a tokenizer, 'exp' smoothing
//   std::puts(bleu.format().c_str());   // BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x-tapegrad = 35.21 ...
//   auto chrf = tg::models::sacre_chrf(hypotheses, references);  // chrF2, 6 character orders
//
// What is reproduced (read from sacreBLEU 2.x's metrics/bleu.py, metrics/chrf.py,
// tokenizers/tokenizer_13a.py and tokenizer_re.py; sacreBLEU itself is not run here):
//   - BLEU: each line is stripped of trailing whitespace, tokenized (13a or none), split on
//     whitespace; clipped n-gram matches (n = 1..4) and totals are summed over the corpus; the
//     brevity penalty is exp(1 - r/c) when c < r (0 when c = 0); with no match at any order the
//     score is 0; 'exp' smoothing: the k-th order with zero matches gets precision
//     100 / (2^k * total); an order with no hypothesis n-gram at all makes the score 0.
//   - chrF: all whitespace is removed, character n-grams (n = 1..6, Unicode code points) are
//     counted; per-order hypothesis, reference and matched counts are summed over the corpus;
//     precision and recall are averaged over the orders where both sides have n-grams; the
//     score is the F-beta (beta 2) of the two averages.
//   - "Whitespace" is Python's str.split() set (ASCII whitespace, U+001C..U+001F, U+0085, U+00A0,
//     U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000): French text from fra.txt
//     has U+202F and U+00A0 before punctuation, and sacreBLEU splits there.
//   - One reference per hypothesis; sacreBLEU refuses an empty reference line, and so do these.
// Not reproduced: lowercasing (Python's str.lower differs from ours in special cases), multiple
// references, the other tokenizers, chrF++ word n-grams.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tg::models {

/// The tokenizers of sacre_bleu.
enum class SacreTokenizer {
  k13a,  ///< mteval-v13a as sacreBLEU's Tokenizer13a (its default)
  kNone, ///< whitespace split only (sacreBLEU's --tokenize none)
};

/// The value of the `version:` field of our signatures: the sacreBLEU major version whose
/// behaviour is reproduced, marked as tapegrad's reimplementation (not sacreBLEU's own output).
inline constexpr const char* kSacreVersion = "2.x-tapegrad";

/// Python's str.split() on UTF-8 text: fields separated by runs of Unicode whitespace (the set in
/// the file comment). Throws std::invalid_argument on invalid UTF-8.
std::vector<std::string> split_python_whitespace(std::string_view text);

/// sacreBLEU's Tokenizer13a on one line: "<skipped>" and "-\n" removed, '\n' to ' ', the entities
/// &quot; &amp; &lt; &gt; decoded (in that order), then the four regular expressions of
/// TokenizerRegexp (symbols split off; '.' and ',' split off unless between digits; '-' split off
/// after a digit), then whitespace runs collapsed to one ' ' with no leading or trailing space.
/// "Hello, world!" -> "Hello , world !"; "3.14-15" -> "3.14 - 15". Throws on invalid UTF-8.
std::string tokenize_13a(std::string_view line);

/// A corpus BLEU score as sacreBLEU reports it.
struct SacreBleuScore {
  double score = 0.0;                  ///< in [0, 100]
  std::vector<double> precisions;      ///< per order, in percent, smoothed as sacreBLEU does
  std::vector<std::int64_t> matches;   ///< clipped n-gram matches per order
  std::vector<std::int64_t> totals;    ///< hypothesis n-grams per order
  double brevity_penalty = 0.0;
  std::int64_t hyp_len = 0;
  std::int64_t ref_len = 0;
  SacreTokenizer tokenizer = SacreTokenizer::k13a;

  /// "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x-tapegrad" (tok:none with
  /// SacreTokenizer::kNone).
  std::string signature() const;
  /// sacreBLEU's text line: "SIGNATURE = 35.21 67.1/41.2/27.3/18.0 (BP = 1.000 ratio = 1.012
  /// hyp_len = 41234 ref_len = 40750)", the score with `width` decimals.
  std::string format(int width = 2) const;
};

/// Corpus BLEU-4 of detokenised lines as sacreBLEU 2.x computes it (file comment). Throws
/// std::invalid_argument if the counts differ, a reference is empty, or a line is not UTF-8
/// (naming the line, 1-based).
SacreBleuScore sacre_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                          SacreTokenizer tokenizer = SacreTokenizer::k13a);

/// A corpus chrF score as sacreBLEU reports it.
struct ChrfScore {
  double score = 0.0;  ///< in [0, 100]
  /// Per character order n = 1..6: hypothesis n-grams, reference n-grams, matched n-grams
  /// (sacreBLEU's statistics layout, 3 per order).
  std::vector<std::int64_t> stats;

  /// "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.x-tapegrad".
  std::string signature() const;
  /// "SIGNATURE = 58.31" (the score with `width` decimals).
  std::string format(int width = 2) const;
};

/// Corpus chrF2 (character order 6, beta 2, whitespace removed) as sacreBLEU 2.x computes it.
/// Errors as sacre_bleu.
ChrfScore sacre_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

}  // namespace tg::models
