#include "models/text/data.h"

#include "autograd/error_text.h"
#include "autograd/ops_shape.h"
#include "nn/file_io.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <stdexcept>

namespace tg::models {

namespace {

[[noreturn]] void line_error(const std::string& path, std::size_t line, const std::string& reason) {
  throw std::runtime_error(path + ":" + std::to_string(line) + ": " + reason);
}

// Fisher-Yates with the explicit generator, so the permutation depends only on the seed.
std::vector<std::int64_t> permutation(std::size_t n, Generator& gen) {
  std::vector<std::int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), std::int64_t{0});
  for (std::size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[gen.below(i)]);
  return perm;
}

Tensor to_tensor(const std::vector<std::int64_t>& values, std::initializer_list<std::int64_t> dims) {
  return Tensor::from_vector(values, Shape(dims));
}

}  // namespace

static_assert(nn::io::limits::kTextData >= std::uint64_t{100} << 20, "a corpus of 100 MB must be readable");

std::vector<SentencePair> read_sentence_pairs(const std::string& path, std::optional<std::size_t> max_pairs) {
  // Only a regular file within nn::io::limits::kTextData, each line within kLineBytes; a read
  // error is an error naming the line, never the end of the corpus.
  const auto in = nn::io::open_input(path, nn::io::limits::kTextData);
  nn::io::LineReader reader(*in, path);
  std::vector<SentencePair> pairs;
  std::string line;
  for (std::size_t lineno = 1; (!max_pairs || pairs.size() < *max_pairs) && reader.next(line); ++lineno) {
    std::string_view view(line);
    if (lineno == 1 && view.substr(0, 3) == "\xEF\xBB\xBF") view.remove_prefix(3);
    if (!view.empty() && view.back() == '\r') view.remove_suffix(1);
    if (const std::size_t bad = find_invalid_utf8(view); bad != std::string_view::npos) {
      line_error(path, lineno, "invalid UTF-8 at byte " + std::to_string(bad + 1) + " of the line");
    }
    const auto cols = split_views(view, '\t');
    if (cols.size() < 2 || cols.size() > 3) {
      line_error(path, lineno,
                 "expected 2 or 3 tab-separated columns (source, target[, ignored]), found " +
                     std::to_string(cols.size()) + (view.empty() ? " (empty line)" : ""));
    }
    if (cols[0].empty()) line_error(path, lineno, "empty source sentence");
    if (cols[1].empty()) line_error(path, lineno, "empty target sentence");
    pairs.push_back({std::string(cols[0]), std::string(cols[1])});
  }
  return pairs;
}

TokenizedPairs tokenize_pairs(const std::vector<SentencePair>& pairs) {
  TokenizedPairs out;
  out.src.reserve(pairs.size());
  out.tgt.reserve(pairs.size());
  for (const SentencePair& p : pairs) {
    if (p.src.find('\t') != std::string::npos || p.tgt.find('\t') != std::string::npos) {
      throw std::invalid_argument("tokenize_pairs: a sentence contains a tab: '" + elide(p.src) + "' / '" + elide(p.tgt) + "'");
    }
    // One line as d2l sees it: the tab is the target's first predecessor character.
    const std::string line = preprocess_nmt(p.src + '\t' + p.tgt);
    const std::size_t tab = line.find('\t');
    out.src.push_back(tokenize_nmt(std::string_view(line).substr(0, tab)));
    out.tgt.push_back(tokenize_nmt(std::string_view(line).substr(tab + 1)));
  }
  return out;
}

std::vector<std::int64_t> truncate_pad(std::vector<std::int64_t> ids, std::int64_t num_steps, std::int64_t pad) {
  if (num_steps < 0) throw std::invalid_argument("truncate_pad: num_steps must be >= 0, got " + std::to_string(num_steps));
  ids.resize(static_cast<std::size_t>(num_steps), pad);  // truncates or pads
  return ids;
}

// ---- Holdout and split_indices ------------------------------------------------------------

Holdout Holdout::fraction(double f) {
  if (!(f >= 0.0 && f < 1.0)) throw std::invalid_argument("Holdout::fraction: must be in [0, 1), got " + std::to_string(f));
  Holdout h;
  h.is_fraction_ = true;
  h.fraction_ = f;
  return h;
}

Holdout Holdout::count(std::size_t n) {
  Holdout h;
  h.count_ = n;
  return h;
}

std::size_t Holdout::resolve(std::size_t n) const {
  if (is_fraction_) return static_cast<std::size_t>(std::llround(fraction_ * static_cast<double>(n)));
  if (count_ > n) {
    throw std::invalid_argument("Holdout::count: cannot hold out " + std::to_string(count_) + " of " +
                                std::to_string(n) + " pairs");
  }
  return count_;
}

std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> split_indices(std::size_t n, const Holdout& holdout,
                                                                              Generator& gen) {
  const std::size_t k = holdout.resolve(n);
  std::vector<std::int64_t> perm = permutation(n, gen);
  std::vector<std::int64_t> heldout(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(k));
  std::vector<std::int64_t> train(perm.begin() + static_cast<std::ptrdiff_t>(k), perm.end());
  std::sort(heldout.begin(), heldout.end());
  std::sort(train.begin(), train.end());
  return {std::move(train), std::move(heldout)};
}

// ---- Seq2SeqDataset -----------------------------------------------------------------------

Seq2SeqDataset::Seq2SeqDataset(const TokenizedPairs& pairs, const Vocab& src_vocab, const Vocab& tgt_vocab,
                               std::int64_t num_steps)
    : num_steps_(num_steps) {
  if (num_steps < 1) throw std::invalid_argument("Seq2SeqDataset: num_steps must be >= 1, got " + std::to_string(num_steps));
  if (pairs.src.size() != pairs.tgt.size()) throw std::invalid_argument("Seq2SeqDataset: src and tgt sizes differ");
  const auto encode = [num_steps](const std::vector<std::string>& tokens, const Vocab& vocab,
                                  std::vector<std::int64_t>& rows, std::vector<std::int64_t>& lens) {
    std::vector<std::int64_t> ids = vocab.ids(tokens);
    ids.push_back(Vocab::kEos);
    ids = truncate_pad(std::move(ids), num_steps, Vocab::kPad);
    // d2l: valid_len = (array != pad).sum(1).
    lens.push_back(std::count_if(ids.begin(), ids.end(), [](std::int64_t v) { return v != Vocab::kPad; }));
    rows.insert(rows.end(), ids.begin(), ids.end());
  };
  const std::size_t n = pairs.size();
  src_.reserve(n * num_steps), tgt_.reserve(n * num_steps);
  src_valid_len_.reserve(n), tgt_valid_len_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    encode(pairs.src[i], src_vocab, src_, src_valid_len_);
    encode(pairs.tgt[i], tgt_vocab, tgt_, tgt_valid_len_);
  }
}

Tensor Seq2SeqDataset::src() const { return to_tensor(src_, {size(), num_steps_}); }
Tensor Seq2SeqDataset::src_valid_len() const { return to_tensor(src_valid_len_, {size()}); }
Tensor Seq2SeqDataset::tgt() const { return to_tensor(tgt_, {size(), num_steps_}); }
Tensor Seq2SeqDataset::tgt_valid_len() const { return to_tensor(tgt_valid_len_, {size()}); }

void Seq2SeqDataset::check_row(std::int64_t i) const {
  if (i < 0 || i >= size()) {
    throw std::out_of_range("Seq2SeqDataset: row " + std::to_string(i) + " outside [0, " + std::to_string(size()) + ")");
  }
}

std::vector<std::int64_t> Seq2SeqDataset::src_row(std::int64_t i) const {
  check_row(i);
  return {src_.begin() + i * num_steps_, src_.begin() + (i + 1) * num_steps_};
}

std::vector<std::int64_t> Seq2SeqDataset::tgt_row(std::int64_t i) const {
  check_row(i);
  return {tgt_.begin() + i * num_steps_, tgt_.begin() + (i + 1) * num_steps_};
}

Seq2SeqBatch Seq2SeqDataset::batch(const std::vector<std::int64_t>& rows) const {
  const auto b = static_cast<std::int64_t>(rows.size());
  std::vector<std::int64_t> src, tgt, src_len, tgt_len;
  src.reserve(b * num_steps_), tgt.reserve(b * num_steps_), src_len.reserve(b), tgt_len.reserve(b);
  for (std::int64_t r : rows) {
    check_row(r);
    src.insert(src.end(), src_.begin() + r * num_steps_, src_.begin() + (r + 1) * num_steps_);
    tgt.insert(tgt.end(), tgt_.begin() + r * num_steps_, tgt_.begin() + (r + 1) * num_steps_);
    src_len.push_back(src_valid_len_[r]);
    tgt_len.push_back(tgt_valid_len_[r]);
  }
  return {.src = to_tensor(src, {b, num_steps_}),
          .src_valid_len = to_tensor(src_len, {b}),
          .tgt = to_tensor(tgt, {b, num_steps_}),
          .tgt_valid_len = to_tensor(tgt_len, {b}),
          .rows = rows};
}

Seq2SeqBatch trim_padding(Seq2SeqBatch b) {
  auto longest = [](const Tensor& lens) {
    std::int64_t m = 1;
    const std::int64_t* p = lens.data<std::int64_t>();
    for (std::int64_t i = 0; i < lens.numel(); ++i) m = std::max(m, p[i]);
    return m;
  };
  auto cut = [](const Tensor& ids, std::int64_t width) {
    return width >= ids.shape()[1] ? ids : narrow(ids, 1, 0, width);
  };
  b.src = cut(b.src, longest(b.src_valid_len));
  b.tgt = cut(b.tgt, longest(b.tgt_valid_len));
  return b;
}

std::vector<std::vector<std::int64_t>> Seq2SeqDataset::sentence_batch_rows(std::int64_t batch_size, bool shuffle,
                                                                           Generator& gen) const {
  if (batch_size < 1) throw std::invalid_argument("Seq2SeqDataset::batches: batch_size must be >= 1, got " + std::to_string(batch_size));
  std::vector<std::int64_t> order;
  if (shuffle) {
    order = permutation(static_cast<std::size_t>(size()), gen);
  } else {
    order.resize(static_cast<std::size_t>(size()));
    std::iota(order.begin(), order.end(), std::int64_t{0});
  }
  std::vector<std::vector<std::int64_t>> out;
  for (std::int64_t start = 0; start < size(); start += batch_size) {
    const std::int64_t end = std::min(size(), start + batch_size);
    out.emplace_back(order.begin() + start, order.begin() + end);
  }
  return out;
}

std::vector<Seq2SeqBatch> Seq2SeqDataset::batches(std::int64_t batch_size, bool shuffle, Generator& gen) const {
  std::vector<Seq2SeqBatch> out;
  for (const auto& rows : sentence_batch_rows(batch_size, shuffle, gen)) out.push_back(batch(rows));
  return out;
}

std::vector<Seq2SeqBatch> Seq2SeqDataset::batches(std::int64_t batch_size) const {
  Generator unused(0);
  return batches(batch_size, /*shuffle=*/false, unused);
}

std::int64_t Seq2SeqDataset::row_tokens(std::int64_t i) const {
  check_row(i);
  return std::max(src_valid_len_[static_cast<std::size_t>(i)], tgt_valid_len_[static_cast<std::size_t>(i)]);
}

std::vector<std::vector<std::int64_t>> Seq2SeqDataset::token_batch_rows(std::int64_t max_tokens, bool shuffle,
                                                                        Generator& gen) const {
  if (max_tokens < 1)
    throw std::invalid_argument("Seq2SeqDataset::token_batches: max_tokens must be >= 1, got " + std::to_string(max_tokens));
  const auto n = static_cast<std::size_t>(size());
  // rank[r]: the tie-break of row r among rows of equal length.
  std::vector<std::int64_t> rank(n);
  if (shuffle) {
    const auto perm = permutation(n, gen);
    for (std::size_t k = 0; k < n; ++k) rank[static_cast<std::size_t>(perm[k])] = static_cast<std::int64_t>(k);
  } else {
    std::iota(rank.begin(), rank.end(), std::int64_t{0});
  }
  std::vector<std::int64_t> order(n);
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    const std::int64_t la = row_tokens(a), lb = row_tokens(b);
    return la != lb ? la < lb : rank[static_cast<std::size_t>(a)] < rank[static_cast<std::size_t>(b)];
  });
  std::vector<std::vector<std::int64_t>> out;
  std::vector<std::int64_t> current;
  std::int64_t longest = 0;
  for (std::int64_t r : order) {
    // Rows come in increasing length: the newcomer is the batch's longest row.
    const std::int64_t len = std::max<std::int64_t>(1, row_tokens(r));
    if (!current.empty() && (static_cast<std::int64_t>(current.size()) + 1) * std::max(longest, len) > max_tokens) {
      out.push_back(std::move(current));
      current.clear();
      longest = 0;
    }
    current.push_back(r);
    longest = std::max(longest, len);
  }
  if (!current.empty()) out.push_back(std::move(current));
  if (shuffle) {
    const auto perm = permutation(out.size(), gen);
    std::vector<std::vector<std::int64_t>> shuffled;
    shuffled.reserve(out.size());
    for (auto k : perm) shuffled.push_back(std::move(out[static_cast<std::size_t>(k)]));
    out = std::move(shuffled);
  }
  return out;
}

std::vector<Seq2SeqBatch> Seq2SeqDataset::token_batches(std::int64_t max_tokens, bool shuffle, Generator& gen) const {
  std::vector<Seq2SeqBatch> out;
  for (const auto& rows : token_batch_rows(max_tokens, shuffle, gen)) out.push_back(batch(rows));
  return out;
}

Seq2SeqDataset Seq2SeqDataset::subset(const std::vector<std::int64_t>& rows) const {
  Seq2SeqDataset out;
  out.num_steps_ = num_steps_;
  for (std::int64_t r : rows) {
    check_row(r);
    out.src_.insert(out.src_.end(), src_.begin() + r * num_steps_, src_.begin() + (r + 1) * num_steps_);
    out.tgt_.insert(out.tgt_.end(), tgt_.begin() + r * num_steps_, tgt_.begin() + (r + 1) * num_steps_);
    out.src_valid_len_.push_back(src_valid_len_[r]);
    out.tgt_valid_len_.push_back(tgt_valid_len_[r]);
  }
  return out;
}

std::pair<Seq2SeqDataset, Seq2SeqDataset> Seq2SeqDataset::split(const Holdout& holdout, Generator& gen) const {
  auto [train, heldout] = split_indices(static_cast<std::size_t>(size()), holdout, gen);
  return {subset(train), subset(heldout)};
}

// ---- TranslationData -----------------------------------------------------------------------

void TranslationDataOptions::validate() const {
  if (num_steps_ < 1) throw std::invalid_argument("TranslationDataOptions: num_steps must be >= 1, got " + std::to_string(num_steps_));
  if (min_freq_ < 0) throw std::invalid_argument("TranslationDataOptions: min_freq must be >= 0, got " + std::to_string(min_freq_));
}

TranslationData make_translation_data(const std::vector<SentencePair>& pairs, const TranslationDataOptions& options,
                                      Generator& gen) {
  options.validate();
  return make_translation_data(tokenize_pairs(pairs), options, gen);
}

TranslationData make_translation_data(TokenizedPairs all, const TranslationDataOptions& options, Generator& gen) {
  options.validate();
  auto [train_rows, heldout_rows] = split_indices(all.size(), options.holdout(), gen);
  const auto pick = [&all](const std::vector<std::int64_t>& rows) {
    TokenizedPairs out;
    for (std::int64_t r : rows) {
      out.src.push_back(std::move(all.src[r]));
      out.tgt.push_back(std::move(all.tgt[r]));
    }
    return out;
  };
  TranslationData data;
  data.train_pairs = pick(train_rows);
  data.heldout_pairs = pick(heldout_rows);
  data.src_vocab = Vocab::build(data.train_pairs.src, options.min_freq());
  data.tgt_vocab = Vocab::build(data.train_pairs.tgt, options.min_freq());
  data.train = Seq2SeqDataset(data.train_pairs, data.src_vocab, data.tgt_vocab, options.num_steps());
  data.heldout = Seq2SeqDataset(data.heldout_pairs, data.src_vocab, data.tgt_vocab, options.num_steps());
  return data;
}

TranslationData load_translation_data(const std::string& path, const TranslationDataOptions& options, Generator& gen) {
  options.validate();
  return make_translation_data(read_sentence_pairs(path, options.max_pairs()), options, gen);
}

}  // namespace tg::models
