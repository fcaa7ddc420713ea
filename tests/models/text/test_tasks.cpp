#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../autograd/error_of.h"
#include "autograd/ops_elementwise.h"
#include "models/text/data.h"
#include "models/text/tasks.h"

using namespace tg::models;

namespace {

using Tokens = std::vector<std::string>;

std::string without_spaces(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

}  // namespace

TEST(Tasks, RegistryListsNamesAndRejectsUnknown) {
  EXPECT_EQ(task_names(), (std::vector<std::string>{"copy", "dates", "primes", "reverse"}));
  try {
    make_task("sort");
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown task 'sort'; known tasks: copy, dates, primes, reverse"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_task("copy", {.count = 5, .min_len = 0}), std::invalid_argument);
  EXPECT_THROW(make_task("copy", {.count = 5, .min_len = 4, .max_len = 3}), std::invalid_argument);
  EXPECT_THROW(make_task("copy", {.count = -1}), std::invalid_argument);
  EXPECT_TRUE(make_task("reverse", {.count = 0}).empty());
}

TEST(Tasks, DeterministicForASeed) {
  for (const std::string& name : task_names()) {
    const auto a = make_task(name, {.count = 50, .min_len = 2, .max_len = 6, .seed = 11});
    const auto b = make_task(name, {.count = 50, .min_len = 2, .max_len = 6, .seed = 11});
    const auto c = make_task(name, {.count = 50, .min_len = 2, .max_len = 6, .seed = 12});
    ASSERT_EQ(a.size(), 50u) << name;
    EXPECT_EQ(a, b) << name;
    EXPECT_NE(a, c) << name;
  }
}

TEST(Tasks, DateFormatsOfAKnownDate) {
  // 1997-03-04 was a tuesday (Python: datetime.date(1997, 3, 4).weekday() == 1).
  EXPECT_EQ(weekday(1997, 3, 4), 1);
  EXPECT_EQ(weekday(2000, 2, 29), 1);
  EXPECT_EQ(weekday(1950, 1, 1), 6);
  const std::vector<std::string> expected{
      "the 4 th of march 1 9 9 7",      "3 / 4 / 9 7",
      "march 4 , 1 9 9 7",              "tuesday , march 4 , 1 9 9 7",
      "0 4 . 0 3 . 1 9 9 7",            "1 9 9 7 march 4",
      "4 mar 1 9 9 7",                  "march 4 th , 1 9 9 7",
      "0 4 - 0 3 - 9 7",                "tuesday 4 march 1 9 9 7"};
  ASSERT_EQ(static_cast<int>(expected.size()), kDateFormats);
  for (int f = 0; f < kDateFormats; ++f) EXPECT_EQ(format_date(1997, 3, 4, f), expected[f]) << f;
  EXPECT_EQ(format_date(2021, 11, 22, 0), "the 2 2 nd of november 2 0 2 1");
  EXPECT_EQ(format_date(2021, 11, 11, 7), "november 1 1 th , 2 0 2 1");
  EXPECT_EQ(format_date(2003, 1, 31, 1), "1 / 3 1 / 0 3");
  EXPECT_EQ(iso_date_target(1997, 3, 4), "1 9 9 7 - 0 3 - 0 4");
  EXPECT_THROW(format_date(1997, 2, 29, 0), std::invalid_argument);
  EXPECT_THROW(format_date(1997, 3, 4, kDateFormats), std::invalid_argument);
  EXPECT_TRUE(is_valid_date(2000, 2, 29));
  EXPECT_FALSE(is_valid_date(1900, 2, 29));
  EXPECT_FALSE(is_valid_date(1999, 4, 31));
}

TEST(Tasks, DatesTargetsAreValidIsoDatesOfTheSource) {
  const auto pairs = make_task("dates", {.count = 400, .seed = 7});
  std::set<int> formats_seen;
  for (const SentencePair& p : pairs) {
    const std::string iso = without_spaces(p.tgt);
    ASSERT_EQ(iso.size(), 10u) << p.tgt;
    ASSERT_EQ(iso[4], '-');
    ASSERT_EQ(iso[7], '-');
    const int y = std::stoi(iso.substr(0, 4)), m = std::stoi(iso.substr(5, 2)), d = std::stoi(iso.substr(8, 2));
    EXPECT_TRUE(is_valid_date(y, m, d)) << iso;
    EXPECT_GE(y, 1950);
    EXPECT_LE(y, 2049);
    // The source is exactly one of the formats of the target's date.
    int format = -1;
    for (int f = 0; f < kDateFormats; ++f) {
      if (format_date(y, m, d, f) == p.src) format = f;
    }
    EXPECT_GE(format, 0) << p.src << " is not a rendering of " << iso;
    formats_seen.insert(format);
    // Every source/target token is a single digit, a word or a punctuation mark: the tokenizer
    // (preprocess_nmt + split) leaves the generated strings unchanged.
    const TokenizedPairs tok = tokenize_pairs({p});
    EXPECT_EQ(tok.src[0], split_on_space(p.src));
    EXPECT_EQ(tok.tgt[0], split_on_space(p.tgt));
    EXPECT_EQ(tok.tgt[0].size(), 10u);
  }
  EXPECT_EQ(static_cast<int>(formats_seen.size()), kDateFormats);
}

TEST(Tasks, ReverseAndCopy) {
  const auto rev = make_task("reverse", {.count = 200, .min_len = 3, .max_len = 7, .seed = 1});
  const auto cpy = make_task("copy", {.count = 200, .min_len = 3, .max_len = 7, .seed = 1});
  std::set<std::size_t> lengths;
  for (std::size_t i = 0; i < rev.size(); ++i) {
    const Tokens src = split_on_space(rev[i].src);
    Tokens reversed(src.rbegin(), src.rend());
    EXPECT_EQ(split_on_space(rev[i].tgt), reversed);
    EXPECT_GE(src.size(), 3u);
    EXPECT_LE(src.size(), 7u);
    lengths.insert(src.size());
    for (const auto& t : src) EXPECT_TRUE(t.size() == 1 && t[0] >= 'a' && t[0] <= 'j') << t;
    EXPECT_EQ(cpy[i].src, cpy[i].tgt);
  }
  EXPECT_EQ(lengths.size(), 5u);  // every length in [3, 7] occurs
}

TEST(Tasks, PrimesTargetIsExactlyThePrimes) {
  // The 25 primes below 100, written out independently of is_prime.
  const std::set<int> primes{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97};
  for (int n = -1; n < 100; ++n) EXPECT_EQ(is_prime(n), primes.count(n) == 1) << n;
  const auto pairs = make_task("primes", {.count = 300, .min_len = 1, .max_len = 6, .seed = 2});
  int empty_targets = 0;
  for (const SentencePair& p : pairs) {
    Tokens expected;
    const Tokens src = split_on_space(p.src);
    EXPECT_GE(src.size(), 1u);
    EXPECT_LE(src.size(), 6u);
    for (const std::string& t : src) {
      const int n = std::stoi(t);
      EXPECT_GE(n, 1);
      EXPECT_LE(n, 99);
      if (primes.count(n)) expected.push_back(t);
    }
    EXPECT_EQ(tokenize_pairs({p}).tgt[0], expected) << p.src << " → " << p.tgt;
    empty_targets += p.tgt.empty();
  }
  // Some sequences have no primes; their target encodes as just <eos>.
  EXPECT_GT(empty_targets, 0);
  const TokenizedPairs tok = tokenize_pairs(pairs);
  const Seq2SeqDataset ds(tok, Vocab::build(tok.src), Vocab::build(tok.tgt), 4);
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (pairs[i].tgt.empty()) {
      EXPECT_EQ(ds.tgt_row(static_cast<std::int64_t>(i)), (std::vector<std::int64_t>{3, 1, 1, 1}));
      break;
    }
  }
}

TEST(Tasks, TaskInputUsesTheTaskTokenisation) {
  using tg::models::task_input;
  EXPECT_EQ(task_input("dates", "The 3rd of March, 1997"), "the 3 rd of march , 1 9 9 7");
  EXPECT_EQ(task_input("dates", "3/3/97"), "3 / 3 / 9 7");
  EXPECT_EQ(task_input("dates", "03.03.1997"), "0 3 . 0 3 . 1 9 9 7");
  EXPECT_EQ(task_input("reverse", "abc"), "a b c");
  EXPECT_EQ(task_input("reverse", "a b c"), "a b c");
  EXPECT_EQ(task_input("primes", "4, 7,11"), "4 7 11");
  EXPECT_THROW(task_input("nope", "x"), std::invalid_argument);
}

// A crafted training.json note or command line asked for 2^62 pairs or sources of a billion
// tokens: refused before anything is generated, naming the option.
TEST(Tasks, SizesAreBoundedBeforeGenerating) {
  auto error = [](const tg::models::TaskOptions& o) {
    return tg::testing::error_of<std::invalid_argument>([&] { tg::models::make_task("reverse", o); });
  };
  using namespace tg::models;
  EXPECT_EQ(error({.count = std::int64_t{1} << 62}),
            "make_task: count = 4611686018427387904 is out of range [0, " + std::to_string(kMaxTaskPairs) + "]");
  EXPECT_EQ(error({.count = 10, .min_len = 1, .max_len = 1000000000}),
            "make_task: need 1 <= min_len <= max_len <= 4096, got min_len=1, max_len=1000000000");
  EXPECT_EQ(error({.count = kMaxTaskPairs, .min_len = 1, .max_len = kMaxTaskLen}).rfind("make_task: count * max_len = ", 0), 0u);
  EXPECT_EQ(error({.count = 3, .min_len = 2, .max_len = kMaxTaskLen}), "(no exception)");
}
