#include <gtest/gtest.h>

#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../autograd/error_of.h"
#include "../test_dirs.h"
#include "../../nn/deadline.h"
#include "nn/file_io.h"
#include "autograd/ops_elementwise.h"
#include "autograd/random.h"
#include "models/text/data.h"

using namespace tg;
using namespace tg::models;
namespace fs = std::filesystem;

namespace {

using Tokens = std::vector<std::string>;
using Ids = std::vector<std::int64_t>;

fs::path temp_dir() { return tg::models::testing::per_test_dir("tg_data", false); }

std::string write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  return path.string();
}

// The message of the std::runtime_error read_sentence_pairs(path) throws.
std::string read_error(const std::string& path) {
  return tg::testing::error_of<std::runtime_error>([&] { read_sentence_pairs(path); });
}

std::string shared_data(const std::string& rel) { return std::string(TG_SOURCE_DIR) + "/../shared/data/" + rel; }

// A dataset of n pairs whose source row i starts with a token unique to i.
Seq2SeqDataset numbered_dataset(int n, std::int64_t num_steps, Vocab* vocab_out = nullptr) {
  TokenizedPairs pairs;
  for (int i = 0; i < n; ++i) {
    pairs.src.push_back({"w" + std::to_string(i), "x"});
    pairs.tgt.push_back({"y"});
  }
  Vocab src = Vocab::build(pairs.src, 1), tgt = Vocab::build(pairs.tgt, 1);
  if (vocab_out) *vocab_out = src;
  return Seq2SeqDataset(pairs, src, tgt, num_steps);
}

}  // namespace

TEST(Data, ReadsTwoAndThreeColumns) {
  // Fixture: 2 columns, 3 columns (attribution ignored), a CRLF line and a line starting "À".
  const auto pairs = read_sentence_pairs(std::string(TG_TEST_DATA_DIR) + "/pairs_small.tsv");
  ASSERT_EQ(pairs.size(), 4u);
  EXPECT_EQ(pairs[0], (SentencePair{"Go.", "Va !"}));
  EXPECT_EQ(pairs[1], (SentencePair{"Run!", "Cours\u202F!"}));
  EXPECT_EQ(pairs[2], (SentencePair{"I lost.", "J'ai perdu."}));  // the '\r' is dropped
  EXPECT_EQ(pairs[3], (SentencePair{"À bientôt.", "See you soon."}));
  EXPECT_EQ(read_sentence_pairs(std::string(TG_TEST_DATA_DIR) + "/pairs_small.tsv", 2).size(), 2u);
  EXPECT_TRUE(read_sentence_pairs(std::string(TG_TEST_DATA_DIR) + "/pairs_small.tsv", 0).empty());

  const TokenizedPairs tok = tokenize_pairs(pairs);
  EXPECT_EQ(tok.src[0], (Tokens{"go", "."}));
  EXPECT_EQ(tok.tgt[0], (Tokens{"va", "!"}));
  EXPECT_EQ(tok.tgt[1], (Tokens{"cours", "!"}));
  EXPECT_EQ(tok.tgt[2], (Tokens{"j'ai", "perdu", "."}));
  EXPECT_EQ(tok.src[3], (Tokens{"à", "bientôt", "."}));
}

TEST(Data, MalformedLinesReportFileAndLine) {
  const fs::path dir = temp_dir();
  const std::string one = write_file(dir / "one.tsv", "Go.\tVa !\nHi. Salut !\n");
  EXPECT_NE(read_error(one).find(one + ":2: expected 2 or 3 tab-separated columns"), std::string::npos) << read_error(one);
  EXPECT_NE(read_error(one).find("found 1"), std::string::npos);

  const std::string four = write_file(dir / "four.tsv", "a\tb\nc\td\ne\tf\tg\th\n");
  EXPECT_NE(read_error(four).find(four + ":3:"), std::string::npos) << read_error(four);
  EXPECT_NE(read_error(four).find("found 4"), std::string::npos);

  const std::string utf = write_file(dir / "utf.tsv", "Go.\tVa !\nHi.\tSal\xC3\x28t\n");
  EXPECT_NE(read_error(utf).find(utf + ":2: invalid UTF-8"), std::string::npos) << read_error(utf);

  const std::string blank = write_file(dir / "blank.tsv", "a\tb\n\nc\td\n");
  EXPECT_NE(read_error(blank).find(blank + ":2:"), std::string::npos) << read_error(blank);
  EXPECT_NE(read_error(blank).find("empty line"), std::string::npos);

  const std::string empty_tgt = write_file(dir / "empty_tgt.tsv", "a\t\n");
  EXPECT_NE(read_error(empty_tgt).find(empty_tgt + ":1: empty target"), std::string::npos) << read_error(empty_tgt);

  const std::string missing = (dir / "missing.tsv").string();
  EXPECT_NE(read_error(missing).find(missing + ": cannot open"), std::string::npos) << read_error(missing);

  // max_pairs stops before the bad line, so it is never read.
  EXPECT_EQ(read_sentence_pairs(one, 1).size(), 1u);
  // A UTF-8 byte order mark is dropped; a file without a final newline is fine.
  EXPECT_EQ(read_sentence_pairs(write_file(dir / "bom.tsv", "\xEF\xBB\xBF" "a\tb\n"))[0], (SentencePair{"a", "b"}));
  EXPECT_EQ(read_sentence_pairs(write_file(dir / "nonl.tsv", "a\tb\nc\td")).size(), 2u);
  fs::remove_all(dir);
}

TEST(Data, TruncatePadAsD2l) {
  // d2l: truncate_pad(src_vocab[source[0]], 10, src_vocab['<pad>']) == [47, 4, 1, 1, 1, 1, 1, 1, 1, 1]
  EXPECT_EQ(truncate_pad({47, 4}, 10, 1), (Ids{47, 4, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(truncate_pad({5, 6, 7, 8}, 3, 1), (Ids{5, 6, 7}));
  EXPECT_EQ(truncate_pad({5, 6, 7}, 3, 1), (Ids{5, 6, 7}));
  EXPECT_EQ(truncate_pad({}, 2, 1), (Ids{1, 1}));
}

TEST(Data, DatasetAppendsEosPadsAndCountsValidLength) {
  TokenizedPairs pairs;
  pairs.src = {{"a", "b"}, {"a", "b", "c", "a", "b"}, {"zz"}};
  pairs.tgt = {{"x"}, {"x", "x", "x", "x"}, {}};
  const Vocab src = Vocab::build(pairs.src, 2);  // a=4 b=5; c and zz are rare → <unk>
  const Vocab tgt = Vocab::build(pairs.tgt, 2);  // x=4
  const Seq2SeqDataset ds(pairs, src, tgt, 4);
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.src().shape(), (Shape{3, 4}));
  EXPECT_EQ(ds.src().dtype(), DType::i64);
  EXPECT_EQ(ds.src().to_vector<std::int64_t>(), (Ids{4, 5, 3, 1, /**/ 4, 5, 0, 4, /**/ 0, 3, 1, 1}));
  EXPECT_EQ(ds.src_valid_len().to_vector<std::int64_t>(), (Ids{3, 4, 2}));  // truncated row: no <eos>, length T
  EXPECT_EQ(ds.tgt().to_vector<std::int64_t>(), (Ids{4, 3, 1, 1, /**/ 4, 4, 4, 4, /**/ 3, 1, 1, 1}));
  EXPECT_EQ(ds.tgt_valid_len().to_vector<std::int64_t>(), (Ids{2, 4, 1}));
  EXPECT_EQ(ds.tgt_valid_len().dtype(), DType::i64);
  EXPECT_EQ(ds.tgt_row(2), (Ids{3, 1, 1, 1}));
  EXPECT_THROW(ds.src_row(3), std::out_of_range);
  EXPECT_THROW(Seq2SeqDataset(pairs, src, tgt, 0), std::invalid_argument);
}

TEST(Data, BatchesInFileOrderKeepTheLastPartialBatch) {
  const Seq2SeqDataset ds = numbered_dataset(7, 5);
  const auto batches = ds.batches(3);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].src.shape(), (Shape{3, 5}));
  EXPECT_EQ(batches[2].src.shape(), (Shape{1, 5}));
  EXPECT_EQ(batches[2].src_valid_len.shape(), (Shape{1}));
  Ids rows;
  for (const auto& b : batches) {
    rows.insert(rows.end(), b.rows.begin(), b.rows.end());
    for (std::size_t i = 0; i < b.rows.size(); ++i) {
      const auto r = static_cast<std::int64_t>(i);
      const Ids batch_src = b.src.to_vector<std::int64_t>();
      EXPECT_EQ(Ids(batch_src.begin() + r * 5, batch_src.begin() + (r + 1) * 5), ds.src_row(b.rows[i]));
      EXPECT_EQ(b.src_valid_len.at({r}), 3.0);
      EXPECT_EQ(b.tgt_valid_len.at({r}), 2.0);
    }
  }
  EXPECT_EQ(rows, (Ids{0, 1, 2, 3, 4, 5, 6}));
  Generator gen(1);
  const auto same = ds.batches(3, /*shuffle=*/false, gen);
  ASSERT_EQ(same.size(), 3u);
  EXPECT_EQ(same[1].rows, (Ids{3, 4, 5}));
  EXPECT_THROW(ds.batches(0), std::invalid_argument);
  EXPECT_TRUE(Seq2SeqDataset().batches(4).empty());
}

TEST(Data, ShuffledBatchesAreASeededPermutation) {
  const Seq2SeqDataset ds = numbered_dataset(50, 4);
  Generator g1(42), g2(42);
  const auto a = ds.batches(8, /*shuffle=*/true, g1);
  const auto b = ds.batches(8, /*shuffle=*/true, g2);
  ASSERT_EQ(a.size(), 7u);  // 6 full batches + 2 rows
  EXPECT_EQ(a.back().rows.size(), 2u);
  Ids order_a, order_b;
  for (const auto& x : a) order_a.insert(order_a.end(), x.rows.begin(), x.rows.end());
  for (const auto& x : b) order_b.insert(order_b.end(), x.rows.begin(), x.rows.end());
  EXPECT_EQ(order_a, order_b);  // same seed, same order
  Ids sorted = order_a;
  std::sort(sorted.begin(), sorted.end());
  Ids identity(50);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);     // every row exactly once
  EXPECT_NE(order_a, identity);    // actually shuffled
  // The batch content follows the rows.
  EXPECT_EQ(a[0].src.to_vector<std::int64_t>()[0], ds.src_row(a[0].rows[0])[0]);
  // The next epoch from the same generator is a different permutation.
  const auto next = ds.batches(8, /*shuffle=*/true, g1);
  Ids order_next;
  for (const auto& x : next) order_next.insert(order_next.end(), x.rows.begin(), x.rows.end());
  EXPECT_NE(order_next, order_a);
}

namespace {

// Pairs of varied lengths: source i has 1 + (i * 7) % 11 tokens, target 1 + (i * 5) % 9 (plus <eos>).
Seq2SeqDataset varied_dataset(int n, std::int64_t num_steps) {
  TokenizedPairs pairs;
  for (int i = 0; i < n; ++i) {
    pairs.src.push_back(Tokens(static_cast<std::size_t>(1 + (i * 7) % 11), "a"));
    pairs.tgt.push_back(Tokens(static_cast<std::size_t>(1 + (i * 5) % 9), "b"));
  }
  const Vocab src = Vocab::build(pairs.src, 1), tgt = Vocab::build(pairs.tgt, 1);
  return Seq2SeqDataset(pairs, src, tgt, num_steps);
}

}  // namespace

TEST(Data, TokenBatchesRespectTheBudgetAndCoverEveryRowOnce) {
  const Seq2SeqDataset ds = varied_dataset(203, 16);
  for (const bool shuffle : {false, true}) {
    for (const std::int64_t budget : {1, 7, 40, 100, 5000}) {
      Generator gen(11);
      const auto batches = ds.token_batch_rows(budget, shuffle, gen);
      Ids all;
      for (const auto& rows : batches) {
        ASSERT_FALSE(rows.empty());
        std::int64_t longest = 0;
        for (auto r : rows) longest = std::max(longest, ds.row_tokens(r));
        // rows x the longest row's length stays within the budget; only a lone row may exceed it.
        if (rows.size() > 1) {
          EXPECT_LE(static_cast<std::int64_t>(rows.size()) * longest, budget) << budget;
        }
        all.insert(all.end(), rows.begin(), rows.end());
      }
      std::sort(all.begin(), all.end());
      Ids identity(203);
      std::iota(identity.begin(), identity.end(), 0);
      EXPECT_EQ(all, identity) << "budget " << budget << (shuffle ? " shuffled" : "");  // every row exactly once
      if (budget == 1) {
        EXPECT_EQ(batches.size(), 203u);
      }
      if (budget == 5000) {
        EXPECT_EQ(batches.size(), 1u);  // 203 x 12 tokens fit
      }
    }
  }
  EXPECT_THROW(ds.token_batch_rows(0, false, *std::make_unique<Generator>(0)), std::invalid_argument);
}

TEST(Data, TokenBatchesAreSortedByLengthAndShuffledBySeed) {
  const Seq2SeqDataset ds = varied_dataset(120, 16);
  Generator plain(0);
  const auto sorted = ds.token_batch_rows(60, /*shuffle=*/false, plain);
  // Without shuffle: batches in increasing length, ties in row order.
  Ids flat;
  for (const auto& rows : sorted) flat.insert(flat.end(), rows.begin(), rows.end());
  for (std::size_t k = 1; k < flat.size(); ++k) {
    const auto a = flat[k - 1], b = flat[k];
    EXPECT_TRUE(ds.row_tokens(a) < ds.row_tokens(b) || (ds.row_tokens(a) == ds.row_tokens(b) && a < b)) << k;
  }
  // With shuffle: the same seed gives the same batches, another seed other ones, and every epoch
  // (successive draws) has the same number of batches of the same lengths.
  Generator g1(5), g2(5), g3(6);
  const auto a = ds.token_batch_rows(60, true, g1);
  const auto b = ds.token_batch_rows(60, true, g2);
  const auto c = ds.token_batch_rows(60, true, g3);
  const auto next = ds.token_batch_rows(60, true, g1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, next);
  ASSERT_EQ(a.size(), sorted.size());
  ASSERT_EQ(next.size(), sorted.size());
  auto length_profile = [&](const std::vector<Ids>& batches) {
    std::vector<std::pair<std::int64_t, std::size_t>> out;  // (longest row, rows), sorted
    for (const auto& rows : batches) {
      std::int64_t longest = 0;
      for (auto r : rows) longest = std::max(longest, ds.row_tokens(r));
      out.emplace_back(longest, rows.size());
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(length_profile(a), length_profile(sorted));
  EXPECT_EQ(length_profile(next), length_profile(sorted));
  // The batch order is shuffled, not left in length order.
  std::vector<std::int64_t> firsts;
  for (const auto& rows : a) firsts.push_back(ds.row_tokens(rows.front()));
  EXPECT_FALSE(std::is_sorted(firsts.begin(), firsts.end()));
  // token_batches builds those rows.
  Generator g4(5);
  const auto built = ds.token_batches(60, true, g4);
  ASSERT_EQ(built.size(), a.size());
  for (std::size_t k = 0; k < a.size(); ++k) EXPECT_EQ(built[k].rows, a[k]);
}

TEST(Data, SplitHoldsOutDisjointSeededRows) {
  Generator g1(3), g2(3);
  const auto [train, held] = split_indices(20, Holdout::count(5), g1);
  EXPECT_EQ(held.size(), 5u);
  EXPECT_EQ(train.size(), 15u);
  EXPECT_TRUE(std::is_sorted(train.begin(), train.end()));
  EXPECT_TRUE(std::is_sorted(held.begin(), held.end()));
  std::set<std::int64_t> all(train.begin(), train.end());
  all.insert(held.begin(), held.end());
  EXPECT_EQ(all.size(), 20u);
  EXPECT_EQ(split_indices(20, Holdout::count(5), g2).second, held);
  EXPECT_EQ(Holdout::fraction(0.1).resolve(600), 60u);
  EXPECT_EQ(Holdout::fraction(0.25).resolve(10), 3u);  // round(2.5) = 3
  EXPECT_EQ(Holdout().resolve(10), 0u);
  EXPECT_THROW(Holdout::fraction(1.0), std::invalid_argument);
  EXPECT_THROW(Holdout::count(21).resolve(20), std::invalid_argument);

  const Seq2SeqDataset ds = numbered_dataset(10, 4);
  Generator g3(9);
  const auto [tr, ho] = ds.split(Holdout::fraction(0.3), g3);
  EXPECT_EQ(tr.size(), 7);
  EXPECT_EQ(ho.size(), 3);
  EXPECT_EQ(ho.num_steps(), 4);
  Generator g4(9);
  const auto rows = split_indices(10, Holdout::fraction(0.3), g4).second;
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(ho.src_row(static_cast<std::int64_t>(i)), ds.src_row(rows[i]));
}

TEST(Data, VocabsComeFromTrainingPairsOnly) {
  // Pair i repeats the token "w<i>" so it passes min_freq = 2 only through its own pair.
  std::vector<SentencePair> pairs;
  for (int i = 0; i < 20; ++i) {
    const std::string n = std::to_string(i);
    // Built with append: GCC 12 gives a false -Wrestrict on `"w" + std::to_string(i) + ...`.
    std::string src = "w", tgt = "t";
    src.append(n).append(" w").append(n).append(" .");
    tgt.append(n).append(" t").append(n);
    pairs.push_back({src, tgt});
  }
  Generator gen(5);
  const TranslationData data =
      make_translation_data(pairs, TranslationDataOptions().num_steps(6).holdout(Holdout::count(6)), gen);
  ASSERT_EQ(data.train.size(), 14);
  ASSERT_EQ(data.heldout.size(), 6);
  ASSERT_EQ(data.heldout_pairs.size(), 6u);
  for (std::size_t i = 0; i < data.train_pairs.size(); ++i) {
    EXPECT_TRUE(data.src_vocab.contains(data.train_pairs.src[i][0]));
    EXPECT_TRUE(data.tgt_vocab.contains(data.train_pairs.tgt[i][0]));
  }
  for (std::size_t i = 0; i < data.heldout_pairs.size(); ++i) {
    EXPECT_FALSE(data.src_vocab.contains(data.heldout_pairs.src[i][0]));
    EXPECT_FALSE(data.tgt_vocab.contains(data.heldout_pairs.tgt[i][0]));
    // Held-out rows are encoded with <unk> for the unseen word and the shared "." token.
    EXPECT_EQ(data.heldout.src_row(static_cast<std::int64_t>(i)), (Ids{0, 0, data.src_vocab["."], 3, 1, 1}));
  }
  EXPECT_EQ(data.src_vocab.size(), 4 + 14 + 1);
  EXPECT_THROW(make_translation_data(pairs, TranslationDataOptions().num_steps(0), gen), std::invalid_argument);
}

TEST(Data, FraFirst601PairsMatchD2l) {
  // d2l's load_data_nmt(num_examples=600) reads 601 lines of fra.txt (`if i > num_examples: break`).
  // Its vocabularies (184 and 201 tokens), saved from d2l's Python code, are the fixtures.
  const std::string path = shared_data("fra-eng/fra.txt");
  if (!fs::exists(path)) GTEST_SKIP() << path << " not found";
  Generator gen(0);
  const TranslationData data = load_translation_data(path, TranslationDataOptions().max_pairs(601).num_steps(8), gen);
  const Vocab src = Vocab::load(std::string(TG_TEST_DATA_DIR) + "/d2l_fra601_src_vocab.txt");
  const Vocab tgt = Vocab::load(std::string(TG_TEST_DATA_DIR) + "/d2l_fra601_tgt_vocab.txt");
  EXPECT_EQ(src.size(), 184);
  EXPECT_EQ(tgt.size(), 201);
  EXPECT_EQ(data.src_vocab, src);
  EXPECT_EQ(data.tgt_vocab, tgt);
  ASSERT_EQ(data.train.size(), 601);
  EXPECT_EQ(data.heldout.size(), 0);
  // Rows printed by d2l's build_array_nmt with num_steps = 8.
  EXPECT_EQ(data.train.src_row(0), (Ids{9, 4, 3, 1, 1, 1, 1, 1}));      // go .
  EXPECT_EQ(data.train.tgt_row(0), (Ids{16, 5, 3, 1, 1, 1, 1, 1}));     // va !
  EXPECT_EQ(data.train.tgt_row(2), (Ids{66, 5, 3, 1, 1, 1, 1, 1}));     // cours ! (U+202F)
  EXPECT_EQ(data.train.src_row(100), (Ids{16, 55, 4, 3, 1, 1, 1, 1}));  // come in .
  EXPECT_EQ(data.train.tgt_row(600), (Ids{21, 0, 4, 3, 1, 1, 1, 1}));   // j’ai expiré .
  EXPECT_EQ(data.train_pairs.tgt[600], (Tokens{"j’ai", "expiré", "."}));
}

TEST(Data, VietnameseFileHasThreeColumns) {
  const std::string path = shared_data("vie-eng/vie.txt");
  if (!fs::exists(path)) GTEST_SKIP() << path << " not found";
  const auto pairs = read_sentence_pairs(path);
  EXPECT_EQ(pairs.size(), 8050u);
  EXPECT_EQ(pairs[0], (SentencePair{"Run!", "Chạy!"}));
  EXPECT_EQ(tokenize_pairs({pairs[1]}).tgt[0], (Tokens{"giúp", "tôi", "với", "!"}));
}

// A corpus is read only if it is a regular file within nn::io::limits::kTextData; each line within
// kLineBytes; a read error names the line. Before: a directory read as an empty corpus, a read
// error at the start as no pairs at all, and a FIFO blocked forever.
TEST(Data, SentencePairsRefuseDirectoriesFifosLongLinesAndReadErrors) {
  using tg::testing::error_of;
  const fs::path dir = temp_dir();
  EXPECT_EQ(error_of([&] { read_sentence_pairs(dir.string()); }), dir.string() + ": is a directory, not a regular file");
  const std::string fifo = (dir / "pairs_fifo.tsv").string();
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(tg::testing::error_within(10, "read_sentence_pairs of a FIFO", [&] { read_sentence_pairs(fifo); },
                                      [&] { tg::testing::unblock_fifo_reader(fifo); }),
            fifo + ": is a FIFO, not a regular file");
  EXPECT_EQ(error_of([&] { read_sentence_pairs("/proc/self/mem"); }), "/proc/self/mem:1: read error (Input/output error)");
  const std::string long_line =
      write_file(dir / "long.tsv", "a\tb\n" + std::string(tg::nn::io::limits::kLineBytes, 'x') + "\ty\n");
  EXPECT_EQ(error_of([&] { read_sentence_pairs(long_line); }), long_line + ":2: line longer than the limit of 1048576 bytes");
  EXPECT_EQ(read_sentence_pairs(long_line, 1).size(), 1u);  // lines after max_pairs are not read
  fs::remove(fifo);
}
