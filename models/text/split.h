#pragma once
// A deterministic train/dev/test split of a sentence-pair corpus, written out as files so that
// any system can be trained and scored on the same sets:
//
//   auto pairs = tg::models::read_sentence_pairs("../shared/data/fra-eng/fra.txt");
//   auto split = tg::models::split_corpus(pairs, tg::models::CorpusSplitOptions().test(5000).dev(2000));
//   tg::models::write_corpus_split(split, "data/fra-eng-split");
//
// Leak-free by construction: pairs that share a source sentence or a target sentence are linked,
// and each linked group (a connected component) goes to one part as a whole. So no sentence, on
// either side, appears in two parts, and the reverse direction can use the very same split:
// split in the file's orientation, then reverse_pairs each part (what `bahdanau split --reverse`
// does). Groups are visited in the order of a stable 64-bit hash (FNV-1a of the sentence
// bytes, mixed with the seed) of their smallest-hash source sentence; each goes to test while it
// fits in the test size, else to dev while it fits, else to train. With enough single pairs the
// sizes are met exactly. Nothing depends on the file order, the platform or the library version:
// a pair keeps its part when unrelated pairs are added, unless they link to its group.
#include <cstdint>
#include <string>
#include <vector>

#include "models/text/data.h"

namespace tg::models {

/// Options of split_corpus. Chainable setters.
class CorpusSplitOptions {
 public:
  /// Pairs in the test part (default 5000).
  CorpusSplitOptions& test(std::int64_t v) { test_ = v; return *this; }
  /// Pairs in the dev part (default 2000).
  CorpusSplitOptions& dev(std::int64_t v) { dev_ = v; return *this; }
  /// Mixed into the hash: another seed gives another split (default 0).
  CorpusSplitOptions& seed(std::uint64_t v) { seed_ = v; return *this; }
  std::int64_t test() const { return test_; }
  std::int64_t dev() const { return dev_; }
  std::uint64_t seed() const { return seed_; }

 private:
  std::int64_t test_ = 5000;
  std::int64_t dev_ = 2000;
  std::uint64_t seed_ = 0;
};

/// The three parts, each in file order.
struct CorpusSplit {
  std::vector<SentencePair> train, dev, test;
};

/// 64-bit FNV-1a of the bytes of `text`, then mixed with `seed` by the splitmix64 finaliser.
std::uint64_t sentence_hash(const std::string& text, std::uint64_t seed = 0);

/// Splits `pairs` as the file comment describes. Throws std::invalid_argument if test or dev is
/// negative or together exceed the number of pairs.
CorpusSplit split_corpus(const std::vector<SentencePair>& pairs, const CorpusSplitOptions& options = {});

/// The pairs with source and target swapped.
std::vector<SentencePair> reverse_pairs(std::vector<SentencePair> pairs);

/// Writes DIR/{train,dev,test}.tsv (source<TAB>target per line, readable by read_sentence_pairs)
/// and DIR/{train,dev,test}.src.txt and .ref.txt (the source and target sentences alone, one per
/// line, for translate and for any scorer). DIR is created if needed; returns the file paths.
/// Each file is written atomically (nn::io::write_file_atomic), so none is ever left half
/// written. Throws std::runtime_error naming the file on a write error.
std::vector<std::string> write_corpus_split(const CorpusSplit& split, const std::string& dir);

}  // namespace tg::models
