// SentencePiece subword models, alone and inside a checkpoint (tokenizer.model).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../autograd/error_of.h"
#include "../test_dirs.h"
#include "autograd/random.h"
#include "models/text/data.h"
#include "models/text/subword.h"
#include "models/training/checkpoint.h"
#include "models/translators/seq2seq.h"

using namespace tg;
using namespace tg::models;
namespace fs = std::filesystem;

namespace {

// Both sides of the first 80 pairs of fra.txt.
std::vector<std::string> corpus() {
  std::vector<std::string> out;
  for (const auto& p : read_sentence_pairs(TG_TEST_DATA_DIR "/fra_head80.tsv")) {
    out.push_back(p.src);
    out.push_back(p.tgt);
  }
  return out;
}

const SubwordModel& tiny_model() {
  static const SubwordModel m = SubwordModel::train(corpus(), SubwordOptions().vocab_size(120));
  return m;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A small model over the pieces of the corpus, saved with the subword model as a checkpoint.
struct SubwordCheckpoint {
  TokenizedPairs pairs = encode_pairs(read_sentence_pairs(TG_TEST_DATA_DIR "/fra_head80.tsv"), tiny_model());
  Vocab src = Vocab::build(pairs.src, 1), tgt = Vocab::build(pairs.tgt, 1);
  std::shared_ptr<Seq2Seq> model;
  SubwordCheckpoint() {
    ModelConfig c;
    c.model = "rnnsearch";
    c.src_vocab = src.size();
    c.tgt_vocab = tgt.size();
    c.embed_size = 6;
    c.num_hiddens = 5;
    c.num_layers = 1;
    c.num_steps = 8;
    Generator gen(3);
    model = make_model(c, gen);
  }
  void save(const fs::path& dir) const { save_checkpoint(dir.string(), *model, src, tgt, nullptr, nullptr, &tiny_model()); }
};

std::string load_error(const fs::path& dir) {
  return tg::testing::error_of<std::runtime_error>([&] { load_checkpoint(dir.string()); });
}

}  // namespace

// SentencePiece is optional (CMake warns when it is missing; scripts/setup.sh installs it): without
// it these tests skip, and the library's stand-ins must say why they cannot work.
#define TG_NEEDS_SENTENCEPIECE() \
  if (!SubwordModel::available()) GTEST_SKIP() << "built without SentencePiece (libsentencepiece-dev)"

TEST(Subword, UnavailableBuildExplainsItself) {
  if (SubwordModel::available()) GTEST_SKIP() << "this build has SentencePiece";
  try {
    SubwordModel::train({"a b"}, SubwordOptions().vocab_size(8));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no SentencePiece"), std::string::npos) << e.what();
  }
}

TEST(Subword, RoundTripsPlainSentences) {
  TG_NEEDS_SENTENCEPIECE();
  const SubwordModel& m = tiny_model();
  EXPECT_LE(m.size(), 120);
  for (const std::string s : {"Go.", "I won!", "No way!", "Wait!", "Hello!", "Stop!"}) {
    const auto pieces = m.encode(s);
    EXPECT_GE(pieces.size(), 1u);
    EXPECT_EQ(m.decode(pieces), s) << s;
    for (const auto& p : pieces) EXPECT_TRUE(m.has_piece(p)) << p;
  }
  // Cased and untokenised: "Go." and "go." are different pieces sequences.
  EXPECT_NE(m.encode("Go."), m.encode("go."));
  // A character never seen in training becomes <unk>, not a piece the vocabularies never saw.
  const auto pieces = m.encode("Go \xe2\x9c\x93");  // U+2713
  EXPECT_EQ(pieces.back(), "<unk>");
  EXPECT_FALSE(m.has_piece("\xe2\x9c\x93"));
}

TEST(Subword, TrainingIsDeterministicAndBpeWorks) {
  TG_NEEDS_SENTENCEPIECE();
  const auto again = SubwordModel::train(corpus(), SubwordOptions().vocab_size(120));
  EXPECT_EQ(again.bytes(), tiny_model().bytes());
  const auto bpe = SubwordModel::train(corpus(), SubwordOptions().vocab_size(120).type(SubwordType::kBpe));
  EXPECT_NE(bpe.bytes(), tiny_model().bytes());
  EXPECT_EQ(bpe.decode(bpe.encode("No way!")), "No way!");
  EXPECT_THROW(SubwordModel::train(corpus(), SubwordOptions().vocab_size(4)), std::invalid_argument);
  EXPECT_THROW(SubwordModel::train({}, SubwordOptions()), std::invalid_argument);
  EXPECT_EQ(parse_subword_type("bpe"), SubwordType::kBpe);
  EXPECT_THROW(parse_subword_type("wordpiece"), std::invalid_argument);
}

TEST(Subword, TrainingWritesNothingOnStderr) {
  TG_NEEDS_SENTENCEPIECE();
  ::testing::internal::CaptureStderr();
  const auto m = SubwordModel::train(corpus(), SubwordOptions().vocab_size(120));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_GE(m.size(), 8);
  EXPECT_EQ(err, "");
}

TEST(Subword, BadBytesNameTheirSource) {
  TG_NEEDS_SENTENCEPIECE();
  try {
    SubwordModel::from_bytes("not a model", "somewhere/tokenizer.model");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("somewhere/tokenizer.model: not a valid SentencePiece model", 0), 0u)
        << e.what();
  }
}

// Found by tests/fuzz/fuzz_tokenizer: a model whose normalization table was changed loaded, and
// SentencePiece 0.1.97 then read past the table's end while encoding (a crash under ASan).
TEST(Subword, ChangedNormalizationTableIsRefused) {
  TG_NEEDS_SENTENCEPIECE();
  const std::string path = TG_SOURCE_DIR "/tests/fuzz/regressions/tokenizer/changed_normalization_table";
  try {
    SubwordModel::load(path);
    FAIL() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": not a valid SentencePiece model (its normalization table is not the one "
                                            "tapegrad trains with: a changed or corrupt file)");
  }
}

// Found by tests/fuzz/fuzz_tokenizer: a model with an empty piece made SentencePiece's trie builder
// throw its own exception type out of LoadFromSerializedProto (not std::runtime_error).
TEST(Subword, EmptyPieceIsRefusedAsAnInvalidModel) {
  TG_NEEDS_SENTENCEPIECE();
  const std::string path = TG_SOURCE_DIR "/tests/fuzz/regressions/tokenizer/empty_piece";
  try {
    SubwordModel::load(path);
    FAIL() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": not a valid SentencePiece model (", 0), 0u) << e.what();
  }
}

// Found by tests/fuzz/fuzz_tokenizer: a model whose pieces do not map back to their ids loaded, and
// encode() returned pieces that has_piece() (and so the vocabularies) did not know.
TEST(Subword, PieceThatDoesNotMapBackIsRefused) {
  TG_NEEDS_SENTENCEPIECE();
  const std::string path = TG_SOURCE_DIR "/tests/fuzz/regressions/tokenizer/piece_not_mapping_back";
  try {
    SubwordModel::load(path);
    FAIL() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(": not a valid SentencePiece model (piece "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("does not map back to its id"), std::string::npos) << e.what();
  }
}

TEST(Subword, CheckpointRoundTrip) {
  TG_NEEDS_SENTENCEPIECE();
  const fs::path dir = tg::models::testing::per_test_dir("tg_subword", true) / "ck";
  SubwordCheckpoint f;
  f.save(dir);
  ASSERT_TRUE(fs::exists(dir / "tokenizer.model"));
  EXPECT_NE(read_bytes(dir / "manifest.json").find("\"tokenizer.model\""), std::string::npos);
  const Checkpoint ck = load_checkpoint(dir.string());
  ASSERT_TRUE(ck.subword.has_value());
  EXPECT_EQ(ck.subword->bytes(), tiny_model().bytes());
  EXPECT_EQ(ck.src_vocab, f.src);
  // Encoding through the loaded model gives ids the model knows, and decoding returns the text.
  const auto pieces = ck.subword->encode("No way!");
  for (const auto& p : pieces) EXPECT_TRUE(ck.src_vocab.contains(p)) << p;
  EXPECT_EQ(ck.subword->decode(pieces), "No way!");
  // A checkpoint without tokenizer.model loads without a subword model.
  const fs::path plain = dir.parent_path() / "plain";
  save_checkpoint(plain.string(), *f.model, f.src, f.tgt);
  EXPECT_FALSE(load_checkpoint(plain.string()).subword.has_value());
  fs::remove_all(dir.parent_path());
}

TEST(Subword, CorruptTokenizerModelIsNamed) {
  TG_NEEDS_SENTENCEPIECE();
  const fs::path root = tg::models::testing::per_test_dir("tg_subword", true);
  SubwordCheckpoint f;
  f.save(root / "ck");
  std::string bytes = read_bytes(root / "ck" / "tokenizer.model");
  bytes.resize(bytes.size() / 2);
  std::ofstream(root / "ck" / "tokenizer.model", std::ios::binary | std::ios::trunc) << bytes;
  // With the manifest: its SHA-256 no longer matches.
  std::string err = load_error(root / "ck");
  EXPECT_NE(err.find("tokenizer.model does not match its SHA-256 in manifest.json"), std::string::npos) << err;
  // Without (older format, or a manifest rewritten to match): the model does not parse.
  fs::remove(root / "ck" / "manifest.json");
  err = load_error(root / "ck");
  EXPECT_NE(err.find((root / "ck" / "tokenizer.model").string() + ": not a valid SentencePiece model"),
            std::string::npos) << err;
  fs::remove_all(root);
}

TEST(Subword, MismatchedTokenizerModelIsNamed) {
  TG_NEEDS_SENTENCEPIECE();
  const fs::path root = tg::models::testing::per_test_dir("tg_subword", true);
  SubwordCheckpoint f;
  f.save(root / "ck");
  // Another corpus' model: the vocabularies hold pieces it does not have.
  const auto other = SubwordModel::train({"abc abd abe", "xyz xyw", "abc xyz"}, SubwordOptions().vocab_size(20));
  other.save((root / "ck" / "tokenizer.model").string());
  fs::remove(root / "ck" / "manifest.json");
  const std::string err = load_error(root / "ck");
  EXPECT_EQ(err.rfind((root / "ck" / "tokenizer.model").string() + " does not match " +
                      (root / "ck" / "src_vocab.txt").string() + ": token '", 0), 0u) << err;
  fs::remove_all(root);
}

TEST(Subword, MissingTokenizerModelRecordedInTrainingJsonIsRefused) {
  TG_NEEDS_SENTENCEPIECE();
  const fs::path root = tg::models::testing::per_test_dir("tg_subword", true);
  SubwordCheckpoint f;
  TrainingState st;
  st.run.subword = 120;
  save_checkpoint((root / "ck").string(), *f.model, f.src, f.tgt, nullptr, &st);  // no tokenizer.model
  const std::string err = load_error(root / "ck");
  EXPECT_NE(err.find((root / "ck" / "tokenizer.model").string() + ": missing"), std::string::npos) << err;
  fs::remove_all(root);
}
