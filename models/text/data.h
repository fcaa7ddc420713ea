#pragma once
// Sentence-pair data for the translator, following d2l's `read_data_nmt`, `tokenize_nmt`,
// `truncate_pad`, `build_array_nmt` and `load_data_nmt`:
//
//   tg::Generator gen(0);
//   auto data = tg::models::load_translation_data("../shared/data/fra-eng/fra.txt",
//       tg::models::TranslationDataOptions().max_pairs(600).holdout(tg::models::Holdout::count(50)), gen);
//   for (const auto& b : data.train.batches(64, /*shuffle=*/true, gen)) { /* b.src: i64 (B, T) */ }
//
// Vocabularies are built from the training pairs only, so held-out sentences never leak into them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "models/text/text.h"

namespace tg::models {

/// One raw (not yet preprocessed) source/target sentence pair.
struct SentencePair {
  std::string src;
  std::string tgt;
  friend bool operator==(const SentencePair&, const SentencePair&) = default;
};

/// Reads a UTF-8 file of `source<TAB>target[<TAB>ignored]` lines (manythings.org/Tatoeba format:
/// fra.txt has 2 columns, vie.txt a third attribution column). A UTF-8 BOM at the start and a '\r'
/// at the end of a line are dropped. Returns the first `max_pairs` pairs (all if nullopt); lines
/// after those are not read. Throws std::runtime_error "FILE:LINE: reason" for a line with 1 or
/// more than 3 columns (an empty line included), an empty source or target, invalid UTF-8, a line
/// over nn::io::limits::kLineBytes (1 MiB) or a read error, and "FILE: ..."
/// if the file cannot be opened, is not a regular file (a directory, a FIFO) or is larger than
/// nn::io::limits::kTextData (4 GiB).
///
/// Note d2l's tokenize_nmt(text, num_examples) keeps lines while `i <= num_examples`, i.e. the
/// first num_examples + 1 pairs: d2l's num_examples=600 on fra.txt is max_pairs=601 here.
std::vector<SentencePair> read_sentence_pairs(const std::string& path,
                                              std::optional<std::size_t> max_pairs = std::nullopt);

/// Tokenised sentences, source and target side by side (src[i] translates to tgt[i]).
struct TokenizedPairs {
  std::vector<std::vector<std::string>> src;
  std::vector<std::vector<std::string>> tgt;
  std::size_t size() const { return src.size(); }
};

/// preprocess_nmt over "src\ttgt" as one line (so the target's first character sees the tab as
/// its predecessor, as in d2l), then tokenize_nmt of each side. Throws std::invalid_argument if a
/// sentence contains a tab or invalid UTF-8.
TokenizedPairs tokenize_pairs(const std::vector<SentencePair>& pairs);

/// d2l's truncate_pad: the first num_steps ids, or the ids followed by `pad` up to num_steps.
std::vector<std::int64_t> truncate_pad(std::vector<std::int64_t> ids, std::int64_t num_steps, std::int64_t pad);

/// One minibatch: ids (B, T) and valid lengths (B), all i64.
struct Seq2SeqBatch {
  Tensor src;            ///< (B, T) source ids
  Tensor src_valid_len;  ///< (B) number of non-pad source ids per row
  Tensor tgt;            ///< (B, T) target ids
  Tensor tgt_valid_len;  ///< (B) number of non-pad target ids per row
  /// Rows of the dataset this batch holds, in batch order.
  std::vector<std::int64_t> rows;
};

/// The batch cut to its longest valid source row and longest valid target row (at least one
/// column each): the columns dropped hold only `<pad>`. Pass an rvalue to move `rows` instead of
/// copying it (the training loop does: a step then allocates nothing for it).
Seq2SeqBatch trim_padding(Seq2SeqBatch b);

/// How many pairs to hold out for evaluation: a fraction in [0, 1) of the pairs (rounded to the
/// nearest integer) or an exact count.
class Holdout {
 public:
  /// Holds out nothing.
  Holdout() = default;
  /// round(f * N) pairs; f must be in [0, 1).
  static Holdout fraction(double f);
  /// Exactly n pairs; n must not exceed N when resolved.
  static Holdout count(std::size_t n);
  /// The number of held-out pairs out of n; throws std::invalid_argument if a count exceeds n.
  std::size_t resolve(std::size_t n) const;

 private:
  bool is_fraction_ = false;
  double fraction_ = 0.0;
  std::size_t count_ = 0;
};

/// A seeded random split of row indices 0..n-1 into (train, held-out), each in increasing order
/// so both parts keep the file order. The held-out rows are the first holdout.resolve(n) entries
/// of a Fisher-Yates permutation drawn from `gen`.
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> split_indices(std::size_t n, const Holdout& holdout,
                                                                              Generator& gen);

/// Encoded pairs as d2l's build_array_nmt: each sentence's ids get `<eos>` appended, then are
/// truncated or padded with `<pad>` to num_steps; valid length = count of non-pad ids in the row.
class Seq2SeqDataset {
 public:
  /// An empty dataset.
  Seq2SeqDataset() = default;
  /// Encodes `pairs` with the two vocabularies. num_steps must be >= 1.
  Seq2SeqDataset(const TokenizedPairs& pairs, const Vocab& src_vocab, const Vocab& tgt_vocab, std::int64_t num_steps);

  /// Number of pairs N.
  std::int64_t size() const { return static_cast<std::int64_t>(src_valid_len_.size()); }
  /// Sequence length T of every row.
  std::int64_t num_steps() const { return num_steps_; }
  /// (N, T) source ids.
  Tensor src() const;
  /// (N) source valid lengths.
  Tensor src_valid_len() const;
  /// (N, T) target ids.
  Tensor tgt() const;
  /// (N) target valid lengths.
  Tensor tgt_valid_len() const;
  /// Source ids of row i (length T).
  std::vector<std::int64_t> src_row(std::int64_t i) const;
  /// Target ids of row i (length T).
  std::vector<std::int64_t> tgt_row(std::int64_t i) const;

  /// The given rows as one batch; throws std::out_of_range on a bad row.
  Seq2SeqBatch batch(const std::vector<std::int64_t>& rows) const;
  /// All rows in batches of batch_size (>= 1); the last batch may be smaller. With shuffle, the
  /// row order is a Fisher-Yates permutation drawn from `gen` (each call draws a new one, so
  /// successive epochs differ and the same seed repeats them); without, rows stay in file order
  /// and `gen` is not used.
  std::vector<Seq2SeqBatch> batches(std::int64_t batch_size, bool shuffle, Generator& gen) const;
  /// The rows of each batch of batches(batch_size, shuffle, gen), drawing the same numbers from `gen`.
  std::vector<std::vector<std::int64_t>> sentence_batch_rows(std::int64_t batch_size, bool shuffle, Generator& gen) const;
  /// All rows in file order, in batches of batch_size (for evaluation).
  std::vector<Seq2SeqBatch> batches(std::int64_t batch_size) const;
  /// Token-based batching over length buckets (as fairseq's --max-tokens). A row's length is
  /// max(source valid length, target valid length); a batch costs rows x its longest row's length
  /// (the padded size), and holds as many rows as keep that within max_tokens (a single row longer
  /// than max_tokens forms a batch of its own). Rows are sorted by length, ties broken by a
  /// Fisher-Yates permutation drawn from `gen` (shuffle) or by row number; consecutive rows are
  /// packed greedily; then, with shuffle, the batch order is a second permutation drawn from `gen`.
  /// Every row lands in exactly one batch. The batch boundaries depend only on the lengths, so
  /// every epoch has the same number of batches. Returns each batch's rows.
  std::vector<std::vector<std::int64_t>> token_batch_rows(std::int64_t max_tokens, bool shuffle, Generator& gen) const;
  /// token_batch_rows() built into batches.
  std::vector<Seq2SeqBatch> token_batches(std::int64_t max_tokens, bool shuffle, Generator& gen) const;
  /// The row length token_batch_rows() uses: max(source, target valid length) of row i.
  std::int64_t row_tokens(std::int64_t i) const;
  /// The given rows as a new dataset.
  Seq2SeqDataset subset(const std::vector<std::int64_t>& rows) const;
  /// (train, held-out) by split_indices. Both keep this dataset's encoding, so vocabularies built
  /// before the split have seen the held-out pairs; use make_translation_data to avoid that.
  std::pair<Seq2SeqDataset, Seq2SeqDataset> split(const Holdout& holdout, Generator& gen) const;

 private:
  void check_row(std::int64_t i) const;
  std::int64_t num_steps_ = 0;
  std::vector<std::int64_t> src_, tgt_;  // row-major (N, T)
  std::vector<std::int64_t> src_valid_len_, tgt_valid_len_;
};

/// Options of make_translation_data / load_translation_data. Chainable setters; validated when used.
class TranslationDataOptions {
 public:
  /// Sequence length T (d2l's num_steps; its Bahdanau chapter uses 10).
  TranslationDataOptions& num_steps(std::int64_t v) { num_steps_ = v; return *this; }
  /// Tokens seen fewer times in the training pairs map to `<unk>` (d2l: 2).
  TranslationDataOptions& min_freq(std::int64_t v) { min_freq_ = v; return *this; }
  /// Use only the first n pairs of the file (load_translation_data only).
  TranslationDataOptions& max_pairs(std::optional<std::size_t> v) { max_pairs_ = v; return *this; }
  /// Pairs held out for evaluation (default none).
  TranslationDataOptions& holdout(Holdout v) { holdout_ = v; return *this; }
  std::int64_t num_steps() const { return num_steps_; }
  std::int64_t min_freq() const { return min_freq_; }
  std::optional<std::size_t> max_pairs() const { return max_pairs_; }
  const Holdout& holdout() const { return holdout_; }
  /// Throws std::invalid_argument on num_steps < 1 or min_freq < 0.
  void validate() const;

 private:
  std::int64_t num_steps_ = 10;
  std::int64_t min_freq_ = 2;
  std::optional<std::size_t> max_pairs_;
  Holdout holdout_;
};

/// Everything the translator trains and evaluates on.
struct TranslationData {
  Vocab src_vocab;              ///< built from train_pairs.src
  Vocab tgt_vocab;              ///< built from train_pairs.tgt
  TokenizedPairs train_pairs;   ///< tokens of the training pairs, file order
  TokenizedPairs heldout_pairs; ///< tokens of the held-out pairs, file order (for BLEU etc.)
  Seq2SeqDataset train;         ///< train_pairs encoded
  Seq2SeqDataset heldout;       ///< heldout_pairs encoded with the training vocabularies
};

/// Tokenises `pairs`, splits them (split_indices with options.holdout()), builds both vocabularies
/// from the training part with options.min_freq(), and encodes both parts. options.max_pairs() is
/// not applied here (the caller chose the pairs).
TranslationData make_translation_data(const std::vector<SentencePair>& pairs, const TranslationDataOptions& options,
                                      Generator& gen);
/// The same from pairs already tokenised (e.g. into subword pieces): split, vocabularies and
/// encoding exactly as above, so the same `gen` state picks the same rows.
TranslationData make_translation_data(TokenizedPairs pairs, const TranslationDataOptions& options, Generator& gen);
/// read_sentence_pairs(path, options.max_pairs()) followed by make_translation_data.
TranslationData load_translation_data(const std::string& path, const TranslationDataOptions& options, Generator& gen);

}  // namespace tg::models
