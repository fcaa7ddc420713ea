#pragma once
// Subword vocabularies with SentencePiece (Kudo & Richardson 2018): one joint model for both
// languages, trained on the training sentences of both sides, so names, numbers and shared words
// split the same way on each side. Each side's Vocab then holds only the pieces that side uses.
//
//   auto sp = tg::models::SubwordModel::train(sentences, tg::models::SubwordOptions().vocab_size(8000));
//   std::vector<std::string> pieces = sp.encode("Hello world.");  // {"▁Hello", "▁world", "."}
//   std::string text = sp.decode(pieces);                           // "Hello world."
//
// The text is cased and not pre-tokenised: the user's sentence goes in as typed, and decode()
// gives a plain sentence back. SentencePiece's default normalisation (nmt_nfkc) applies, so e.g.
// U+202F before "?" in French comes back as a plain space. Checkpoints store the model file as
// `tokenizer.model` (models/training/checkpoint.h).
//
// SentencePiece is optional at build time: available() says whether this build has it; without
// it train/from_bytes/load throw std::runtime_error saying so.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/text/data.h"

namespace tg::models {

/// SentencePiece's two segmentation algorithms.
enum class SubwordType {
  kUnigram,  ///< unigram language model (SentencePiece's default)
  kBpe,      ///< byte-pair encoding
};

/// "unigram" / "bpe".
const char* to_string(SubwordType type);
/// Parses "unigram" / "bpe"; throws std::invalid_argument naming `what` otherwise.
SubwordType parse_subword_type(const std::string& name, const std::string& what = "subword type");

/// Options of SubwordModel::train. Chainable setters.
class SubwordOptions {
 public:
  /// Number of pieces (SentencePiece's vocab_size; a soft limit, so a small corpus gives fewer).
  SubwordOptions& vocab_size(std::int64_t v) { vocab_size_ = v; return *this; }
  SubwordOptions& type(SubwordType v) { type_ = v; return *this; }
  std::int64_t vocab_size() const { return vocab_size_; }
  SubwordType type() const { return type_; }

 private:
  std::int64_t vocab_size_ = 8000;
  SubwordType type_ = SubwordType::kUnigram;
};

/// A trained SentencePiece model (immutable; cheap to copy).
class SubwordModel {
 public:
  /// True if this build has SentencePiece.
  static bool available();
  /// Trains on `sentences` (one per element, e.g. both sides of the training pairs). Uses every
  /// sentence and one thread, so the same input gives the same model. Throws
  /// std::invalid_argument on a vocab_size < 8 or no sentence, std::runtime_error if
  /// SentencePiece fails.
  static SubwordModel train(const std::vector<std::string>& sentences, const SubwordOptions& options = {});
  /// Parses a serialized model (the bytes of a .model file); `source` names it in errors:
  /// "SOURCE: not a valid SentencePiece model (...)".
  static SubwordModel from_bytes(std::string bytes, const std::string& source);
  /// Reads a .model file: a regular file of at most nn::io::limits::kTokenizerModel (64 MiB);
  /// errors name the file.
  static SubwordModel load(const std::string& path);

  /// The serialized model (what a .model file holds).
  const std::string& bytes() const;
  /// Writes bytes() to `path` atomically (nn::io::write_file_atomic); throws std::runtime_error
  /// naming the file on failure, leaving any previous file whole.
  void save(const std::string& path) const;
  /// The pieces of a sentence; characters the model does not cover come out as "<unk>".
  std::vector<std::string> encode(const std::string& sentence) const;
  /// The sentence of a list of pieces (pieces the model does not know decode as its unknown mark).
  std::string decode(const std::vector<std::string>& pieces) const;
  /// True if `piece` is one of the model's pieces.
  bool has_piece(const std::string& piece) const;
  /// Number of pieces, SentencePiece's own <unk>, <s>, </s> included.
  std::int64_t size() const;

 private:
  SubwordModel() = default;  // only the factories make one, so impl_ is never null
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

/// Both sides of `pairs` as pieces of `model` (the subword counterpart of tokenize_pairs).
TokenizedPairs encode_pairs(const std::vector<SentencePair>& pairs, const SubwordModel& model);

}  // namespace tg::models
