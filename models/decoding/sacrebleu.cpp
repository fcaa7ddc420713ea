// sacreBLEU 2.x's corpus BLEU (13a tokenizer, 'exp' smoothing) and chrF2; see sacrebleu.h.
#include "models/decoding/sacrebleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "models/text/text.h"

namespace tg::models {

namespace {

// Python's str.isspace() (the separators of str.split()).
bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::u32string decode_line(std::string_view text, const char* who, std::size_t line) {
  if (const std::size_t bad = find_invalid_utf8(text); bad != std::string_view::npos)
    throw std::invalid_argument(std::string(who) + ": line " + std::to_string(line) + ": invalid UTF-8 at byte " +
                                std::to_string(bad));
  return utf8_decode(text);
}

std::vector<std::string> split_u32(const std::u32string& s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_py_space(s[i])) ++i;
    const std::size_t start = i;
    while (i < s.size() && !is_py_space(s[i])) ++i;
    if (i > start) out.push_back(utf8_encode(std::u32string_view(s).substr(start, i - start)));
  }
  return out;
}

// Python's str.replace(from, to): every non-overlapping occurrence, left to right.
void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The character class of TokenizerRegexp's first expression: { | } ~ [ \ ] ^ _ ` space ! " # $
// % & ( ) * + : ; < = > ? @ /  (ASCII ranges {-~, [-`, space-&, (-+, :-@, and '/'). Not the
// apostrophe, '-', '.', ',' or digits and letters.
bool is_13a_symbol(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= '{' && u <= '~') || (u >= '[' && u <= '`') || (u >= ' ' && u <= '&') || (u >= '(' && u <= '+') ||
         (u >= ':' && u <= '@') || u == '/';
}

// One pass of re.sub for a two-character pattern (first, second) -> prefix first mid second suffix:
// matches are scanned left to right and never overlap, as Python's re.sub does. Working on UTF-8
// bytes gives the same result as on code points: the patterns' literal sides are ASCII, and a
// multi-byte character's bytes are all "not a digit" and never '.', ',' or '-'.
template <class First, class Second>
std::string sub_pairs(const std::string& s, First first, Second second, const char* before, const char* mid,
                      const char* after) {
  std::string out;
  out.reserve(s.size() + 16);
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out += before;
      out += s[i];
      out += mid;
      out += s[i + 1];
      out += after;
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& tokens, char sep) {
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i) out += sep;
    out += tokens[i];
  }
  return out;
}

void check_corpus(const std::vector<std::string>& hyps, const std::vector<std::string>& refs, const char* who) {
  if (hyps.size() != refs.size())
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(hyps.size()) + " hypotheses but " +
                                std::to_string(refs.size()) + " references");
  for (std::size_t i = 0; i < refs.size(); ++i)
    if (refs[i].empty())
      throw std::invalid_argument(std::string(who) + ": reference line " + std::to_string(i + 1) +
                                  " is empty (sacreBLEU refuses empty references)");
}

// Line → BLEU tokens: rstrip, tokenizer, split.
std::vector<std::string> bleu_tokens(const std::string& line, SacreTokenizer tok, std::size_t line_no) {
  std::u32string s = decode_line(line, "sacre_bleu", line_no);
  while (!s.empty() && is_py_space(s.back())) s.pop_back();
  if (tok == SacreTokenizer::kNone) return split_u32(s);
  return split_python_whitespace(tokenize_13a(utf8_encode(s)));
}

using NgramCounts = std::unordered_map<std::string, std::int64_t>;

// n-grams of orders 1..4 keyed "order|tokens joined by ' '" (tokens hold no whitespace, so the
// key is unique, as sacreBLEU's ' '.join keys are within one order).
NgramCounts word_ngrams(const std::vector<std::string>& tokens, int max_order) {
  NgramCounts counts;
  for (int n = 1; n <= max_order; ++n)
    for (std::size_t i = 0; i + n <= tokens.size(); ++i) {
      std::string key = std::to_string(n) + "|" + tokens[i];
      for (int k = 1; k < n; ++k) key += ' ' + tokens[i + k];
      ++counts[key];
    }
  return counts;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::vector<std::string> split_python_whitespace(std::string_view text) {
  return split_u32(decode_line(text, "split_python_whitespace", 1));
}

std::string tokenize_13a(std::string_view line) {
  decode_line(line, "tokenize_13a", 1);  // validates
  std::string s(line);
  replace_all(s, "<skipped>", "");
  replace_all(s, "-\n", "");
  replace_all(s, "\n", " ");
  replace_all(s, "&quot;", "\"");
  replace_all(s, "&amp;", "&");
  replace_all(s, "&lt;", "<");
  replace_all(s, "&gt;", ">");
  s = " " + s + " ";
  std::string t;
  t.reserve(s.size() * 2);
  for (char c : s) {
    if (is_13a_symbol(c)) {
      t += ' ';
      t += c;
      t += ' ';
    } else {
      t += c;
    }
  }
  const auto not_digit = [](char c) { return !is_digit(c); };
  const auto dot_comma = [](char c) { return c == '.' || c == ','; };
  t = sub_pairs(t, not_digit, dot_comma, "", " ", " ");   // ([^0-9])([\.,]) -> \1 \2 
  t = sub_pairs(t, dot_comma, not_digit, " ", " ", "");   // ([\.,])([^0-9]) ->  \1 \2
  t = sub_pairs(t, is_digit, [](char c) { return c == '-'; }, "", " ", " ");  // ([0-9])(-) -> \1 \2 
  return join(split_python_whitespace(t), ' ');
}

std::string SacreBleuScore::signature() const {
  return std::string("BLEU|nrefs:1|case:mixed|eff:no|tok:") + (tokenizer == SacreTokenizer::k13a ? "13a" : "none") +
         "|smooth:exp|version:" + kSacreVersion;
}

std::string SacreBleuScore::format(int width) const {
  std::string prec;
  for (std::size_t i = 0; i < precisions.size(); ++i) {
    if (i) prec += '/';
    prec += fixed(precisions[i], 1);
  }
  const double ratio = ref_len ? static_cast<double>(hyp_len) / static_cast<double>(ref_len) : 0.0;
  return signature() + " = " + fixed(score, width) + " " + prec + " (BP = " + fixed(brevity_penalty, 3) +
         " ratio = " + fixed(ratio, 3) + " hyp_len = " + std::to_string(hyp_len) +
         " ref_len = " + std::to_string(ref_len) + ")";
}

SacreBleuScore sacre_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                          SacreTokenizer tokenizer) {
  check_corpus(hypotheses, references, "sacre_bleu");
  constexpr int kOrder = 4;
  SacreBleuScore r;
  r.tokenizer = tokenizer;
  r.matches.assign(kOrder, 0);
  r.totals.assign(kOrder, 0);
  r.precisions.assign(kOrder, 0.0);
  for (std::size_t s = 0; s < hypotheses.size(); ++s) {
    const auto hyp = bleu_tokens(hypotheses[s], tokenizer, s + 1);
    const auto ref = bleu_tokens(references[s], tokenizer, s + 1);
    r.hyp_len += static_cast<std::int64_t>(hyp.size());
    r.ref_len += static_cast<std::int64_t>(ref.size());
    const NgramCounts ref_counts = word_ngrams(ref, kOrder);
    for (const auto& [key, count] : word_ngrams(hyp, kOrder)) {
      const int n = key[0] - '0';
      r.totals[n - 1] += count;
      if (auto it = ref_counts.find(key); it != ref_counts.end()) r.matches[n - 1] += std::min(count, it->second);
    }
  }
  // BLEU.compute_bleu with smooth_method 'exp', effective_order False.
  const double c = static_cast<double>(r.hyp_len), ref = static_cast<double>(r.ref_len);
  r.brevity_penalty = r.hyp_len < r.ref_len ? (r.hyp_len > 0 ? std::exp(1.0 - ref / c) : 0.0) : 1.0;
  if (std::all_of(r.matches.begin(), r.matches.end(), [](std::int64_t m) { return m == 0; })) return r;
  double smooth = 1.0;
  for (int n = 0; n < kOrder; ++n) {
    if (r.totals[n] == 0) break;  // this order and the ones above stay 0: log(0) makes the score 0
    if (r.matches[n] == 0) {
      smooth *= 2;
      r.precisions[n] = 100.0 / (smooth * static_cast<double>(r.totals[n]));
    } else {
      r.precisions[n] = 100.0 * static_cast<double>(r.matches[n]) / static_cast<double>(r.totals[n]);
    }
  }
  double log_sum = 0.0;
  for (double p : r.precisions) log_sum += p == 0.0 ? -9999999999.0 : std::log(p);  // sacreBLEU's my_log
  r.score = r.brevity_penalty * std::exp(log_sum / kOrder);
  return r;
}

std::string ChrfScore::signature() const {
  return std::string("chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:") + kSacreVersion;
}

std::string ChrfScore::format(int width) const { return signature() + " = " + fixed(score, width); }

ChrfScore sacre_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  check_corpus(hypotheses, references, "sacre_chrf");
  constexpr int kOrder = 6;
  constexpr double kBeta = 2.0;
  ChrfScore out;
  out.stats.assign(3 * kOrder, 0);
  const auto squeeze = [](const std::string& line, std::size_t no) {
    std::u32string s = decode_line(line, "sacre_chrf", no);
    s.erase(std::remove_if(s.begin(), s.end(), is_py_space), s.end());
    return s;
  };
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    const std::u32string hyp = squeeze(hypotheses[i], i + 1), ref = squeeze(references[i], i + 1);
    for (int n = 1; n <= kOrder; ++n) {
      std::unordered_map<std::u32string, std::int64_t> ref_counts;
      for (std::size_t k = 0; k + n <= ref.size(); ++k) ++ref_counts[ref.substr(k, n)];
      std::int64_t hyp_total = 0, matched = 0;
      for (std::size_t k = 0; k + n <= hyp.size(); ++k) {
        ++hyp_total;
        // Counter & Counter = sum of min counts: take from the reference's remaining count.
        if (auto it = ref_counts.find(hyp.substr(k, n)); it != ref_counts.end() && it->second > 0) {
          --it->second;
          ++matched;
        }
      }
      out.stats[3 * (n - 1)] += hyp_total;
      out.stats[3 * (n - 1) + 1] += ref.size() >= static_cast<std::size_t>(n) ? static_cast<std::int64_t>(ref.size()) - n + 1 : 0;
      out.stats[3 * (n - 1) + 2] += matched;
    }
  }
  // CHRF._compute_f_score with eps_smoothing False.
  double avg_prec = 0.0, avg_rec = 0.0;
  int effective = 0;
  for (int n = 0; n < kOrder; ++n) {
    const auto n_hyp = out.stats[3 * n], n_ref = out.stats[3 * n + 1], n_match = out.stats[3 * n + 2];
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += static_cast<double>(n_match) / static_cast<double>(n_hyp);
      avg_rec += static_cast<double>(n_match) / static_cast<double>(n_ref);
      ++effective;
    }
  }
  if (effective == 0) return out;
  avg_prec /= effective;
  avg_rec /= effective;
  if (avg_prec + avg_rec == 0.0) return out;
  const double factor = kBeta * kBeta;
  double score = (1 + factor) * avg_prec * avg_rec;
  score /= factor * avg_prec + avg_rec;
  out.score = 100 * score;
  return out;
}

}  // namespace tg::models
