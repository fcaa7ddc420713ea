#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

#include "models/text/data.h"
#include "models/text/split.h"
#include "../test_dirs.h"
#include "../../autograd/error_of.h"

using namespace tg::models;

namespace {

// The first 80 lines of fra.txt: "No way!" has 9 French translations, "Salut !" and "Merci !"
// each translate two English sentences.
std::vector<SentencePair> head80() { return read_sentence_pairs(TG_TEST_DATA_DIR "/fra_head80.tsv"); }

std::set<std::string> sources(const std::vector<SentencePair>& part) {
  std::set<std::string> s;
  for (const auto& p : part) s.insert(p.src);
  return s;
}
std::set<std::string> targets(const std::vector<SentencePair>& part) {
  std::set<std::string> s;
  for (const auto& p : part) s.insert(p.tgt);
  return s;
}
bool disjoint(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::none_of(a.begin(), a.end(), [&](const std::string& x) { return b.count(x) > 0; });
}

}  // namespace

TEST(CorpusSplit, SizesAreExactAndPartsCoverTheCorpus) {
  const auto pairs = head80();
  ASSERT_EQ(pairs.size(), 80u);
  const auto s = split_corpus(pairs, CorpusSplitOptions().test(10).dev(5));
  EXPECT_EQ(s.test.size(), 10u);
  EXPECT_EQ(s.dev.size(), 5u);
  EXPECT_EQ(s.train.size(), 65u);
  // Every pair is in exactly one part, each part in file order.
  std::vector<SentencePair> all = s.train;
  all.insert(all.end(), s.dev.begin(), s.dev.end());
  all.insert(all.end(), s.test.begin(), s.test.end());
  auto less = [](const SentencePair& a, const SentencePair& b) { return std::tie(a.src, a.tgt) < std::tie(b.src, b.tgt); };
  auto sorted = pairs;
  std::sort(sorted.begin(), sorted.end(), less);
  std::sort(all.begin(), all.end(), less);
  EXPECT_EQ(all, sorted);
  for (const auto* part : {&s.train, &s.dev, &s.test}) {
    std::vector<std::size_t> pos;
    for (const auto& p : *part) pos.push_back(std::find(pairs.begin(), pairs.end(), p) - pairs.begin());
    EXPECT_TRUE(std::is_sorted(pos.begin(), pos.end()));
  }
}

TEST(CorpusSplit, NoSentenceOnEitherSideIsInTwoParts) {
  for (std::uint64_t seed : {0, 1, 2, 3, 4, 5}) {
    const auto s = split_corpus(head80(), CorpusSplitOptions().test(20).dev(10).seed(seed));
    EXPECT_TRUE(disjoint(sources(s.train), sources(s.test))) << seed;
    EXPECT_TRUE(disjoint(sources(s.train), sources(s.dev))) << seed;
    EXPECT_TRUE(disjoint(sources(s.dev), sources(s.test))) << seed;
    EXPECT_TRUE(disjoint(targets(s.train), targets(s.test))) << seed;
    EXPECT_TRUE(disjoint(targets(s.train), targets(s.dev))) << seed;
    EXPECT_TRUE(disjoint(targets(s.dev), targets(s.test))) << seed;
    // The 9 pairs of "No way!" stay together.
    const auto count = [](const std::vector<SentencePair>& part) {
      return std::count_if(part.begin(), part.end(), [](const SentencePair& p) { return p.src == "No way!"; });
    };
    EXPECT_TRUE(count(s.train) == 9 || count(s.dev) == 9 || count(s.test) == 9) << seed;
  }
}

TEST(CorpusSplit, DeterministicIndependentOfFileOrderAndLeakFreeReversed) {
  const auto pairs = head80();
  const auto opts = CorpusSplitOptions().test(12).dev(6);
  const auto a = split_corpus(pairs, opts);
  const auto b = split_corpus(pairs, opts);
  EXPECT_EQ(a.test, b.test);
  EXPECT_EQ(a.dev, b.dev);
  EXPECT_EQ(a.train, b.train);
  // Reversed file order: the same sets.
  auto reversed_order = pairs;
  std::reverse(reversed_order.begin(), reversed_order.end());
  const auto c = split_corpus(reversed_order, opts);
  EXPECT_EQ(sources(c.test), sources(a.test));
  EXPECT_EQ(targets(c.dev), targets(a.dev));
  // Another seed gives another test set.
  EXPECT_NE(sources(split_corpus(pairs, CorpusSplitOptions(opts).seed(7)).test), sources(a.test));
  // Reverse direction (split_corpus on swapped pairs): the groups are the same, but they are
  // ordered by the hashes of the other side's sentences, so the parts differ; still leak-free.
  const auto r = split_corpus(reverse_pairs(pairs), opts);
  EXPECT_EQ(r.test.size(), 12u);
  EXPECT_TRUE(disjoint(sources(r.train), sources(r.test)));
  EXPECT_TRUE(disjoint(targets(r.train), targets(r.test)));
}

TEST(CorpusSplit, HashIsPinned) {
  // The split of a corpus must not change between versions: the hash is part of the format. Values
  // from an independent few-line Python evaluation of the same formula (FNV-1a 64, seed * golden
  // ratio xor-ed in, splitmix64 finaliser).
  EXPECT_EQ(sentence_hash("Go."), 0x0d398667f76b9398ULL);
  EXPECT_EQ(sentence_hash("Go.", 1), 0x4a7de8b98950dae6ULL);
  EXPECT_EQ(sentence_hash(""), 0xf52a15e9a9b5e89bULL);
}

TEST(CorpusSplit, Errors) {
  EXPECT_THROW(split_corpus(head80(), CorpusSplitOptions().test(70).dev(11)), std::invalid_argument);
  EXPECT_THROW(split_corpus(head80(), CorpusSplitOptions().test(-1)), std::invalid_argument);
}

TEST(CorpusSplit, WritesFilesReadableAsPairs) {
  const auto dir = tg::models::testing::per_test_dir("tg_split", true);
  const auto s = split_corpus(head80(), CorpusSplitOptions().test(10).dev(5));
  const auto files = write_corpus_split(s, (dir / "out").string());
  EXPECT_EQ(files.size(), 9u);
  EXPECT_EQ(read_sentence_pairs((dir / "out" / "test.tsv").string()), s.test);
  EXPECT_EQ(read_sentence_pairs((dir / "out" / "train.tsv").string()), s.train);
  std::ifstream src(dir / "out" / "dev.src.txt"), ref(dir / "out" / "dev.ref.txt");
  for (const auto& p : s.dev) {
    std::string a, b;
    ASSERT_TRUE(std::getline(src, a) && std::getline(ref, b));
    EXPECT_EQ(a, p.src);
    EXPECT_EQ(b, p.tgt);
  }
  std::string extra;
  EXPECT_FALSE(std::getline(src, extra));
  std::filesystem::remove_all(dir);
}

// Each split file is replaced whole or not at all: a write that fails (here the file-size limit,
// EFBIG) leaves the earlier split's file as it was and no temporary beside it.
TEST(CorpusSplit, AFailedWriteLeavesTheEarlierFiles) {
  const auto dir = tg::models::testing::per_test_dir("tg_split", true);
  const std::string out = (dir / "out").string();
  CorpusSplit small;
  small.train = {{"a", "b"}};
  write_corpus_split(small, out);
  CorpusSplit big;
  big.train.assign(1000, SentencePair{"a longer source sentence", "a longer target sentence"});
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit limit = saved;
  limit.rlim_cur = 4096;  // train.tsv needs about 50 KB
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  const std::string error = tg::testing::error_of([&] { write_corpus_split(big, out); });
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  const std::string train = (dir / "out" / "train.tsv").string();
  EXPECT_EQ(error.rfind(train + ": write error", 0), 0u) << error;
  EXPECT_EQ(read_sentence_pairs(train), small.train);
  for (const auto& e : std::filesystem::directory_iterator(dir / "out"))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  std::filesystem::remove_all(dir);
}
