// Scores per source-length bucket: the buckets' boundaries, and per-bucket scores equal to the
// sacreBLEU-compatible scorer run on the bucket's lines alone.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../autograd/error_of.h"
#include "models/decoding/length_buckets.h"
#include "models/decoding/sacrebleu.h"

using namespace tg::models;
using tg::testing::error_of;

namespace {

const CorpusMetric kBleu = [](const std::vector<std::string>& h, const std::vector<std::string>& r) {
  return sacre_bleu(h, r).score;
};

std::vector<std::string> pick(const std::vector<std::string>& lines, const std::vector<std::size_t>& idx) {
  std::vector<std::string> out;
  for (std::size_t i : idx) out.push_back(lines[i]);
  return out;
}

std::string words(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " w" : "w") + std::to_string(i);
  return s;
}

}  // namespace

TEST(LengthBuckets, BoundariesAndLabels) {
  // Lengths 1, 2, 3, 4, 5, 14, 15, 40 with starts 1, 3, 5, 15: 1-2, 3-4, 5-14, 15+.
  std::vector<std::string> src;
  for (int n : {3, 1, 2, 4, 5, 14, 15, 40}) src.push_back(words(n));
  const auto b = length_buckets(src, {1, 3, 5, 15});
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].lines, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(b[1].lines, (std::vector<std::size_t>{0, 3}));
  EXPECT_EQ(b[2].lines, (std::vector<std::size_t>{4, 5}));
  EXPECT_EQ(b[3].lines, (std::vector<std::size_t>{6, 7}));
  EXPECT_EQ(b[0].label(), "1-2");
  EXPECT_EQ(b[2].label(), "5-14");
  EXPECT_EQ(b[3].label(), "15+");
  EXPECT_EQ(b[2].min_words, 5);
  EXPECT_EQ(b[2].max_words, 14);
  EXPECT_EQ(b[3].max_words, -1);
  EXPECT_DOUBLE_EQ(b[1].mean_words, 3.5);
  EXPECT_DOUBLE_EQ(b[3].mean_words, 27.5);
  EXPECT_EQ(length_buckets(src, {1, 2, 3})[1].label(), "2");  // one length
}

TEST(LengthBuckets, WordsAreWhitespaceFieldsAsPythonSplits) {
  // Runs of spaces, tabs and U+202F (fra.txt puts it before '?') separate words; punctuation is not split off.
  const std::vector<std::string> src = {"  Tu  vas\tbien\xe2\x80\xaf?  ", "Go.", "I'm OK, thanks."};
  const auto b = length_buckets(src, {1, 2, 3, 4, 5});
  EXPECT_EQ(b[0].lines, (std::vector<std::size_t>{1}));
  EXPECT_EQ(b[2].lines, (std::vector<std::size_t>{2}));
  EXPECT_EQ(b[3].lines, (std::vector<std::size_t>{0}));
  EXPECT_TRUE(b[1].lines.empty());
  EXPECT_TRUE(std::isnan(b[1].mean_words));
}

TEST(LengthBuckets, BadStartsAndShortLinesThrow) {
  const std::vector<std::string> src = {"a b", "", "c"};
  EXPECT_EQ(error_of<std::invalid_argument>([&] { length_buckets(src, {1, 3}); }),
            "length_buckets: line 2 has 0 words, fewer than the first bucket's 1");
  EXPECT_EQ(length_buckets(src, {0, 1})[0].lines, (std::vector<std::size_t>{1}));  // starts at 0: empty lines count
  EXPECT_THROW(length_buckets(src, {}), std::invalid_argument);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { length_buckets(src, {0, 3, 3}); }),
            "length_buckets: bucket starts must be non-negative and increasing, got 3 after 3");
  EXPECT_THROW(length_buckets(src, {-1, 2}), std::invalid_argument);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { length_buckets({"ok", "bad \xff"}, {1}); }),
            "length_buckets: line 2 is not valid UTF-8");
}

TEST(LengthBuckets, HandCheckedBucketBleu) {
  // Bucket 1-4: one pair, worked out by hand. Hypothesis "the cat sat on the mat" against "the cat
  // sat on a mat": clipped matches 5/6, 3/5, 2/4, 1/3 for n = 1..4, equal lengths (BP 1), so
  // BLEU = 100 * (5/6 * 3/5 * 2/4 * 1/3)^(1/4) = 100 * 12^(-1/4) = 53.73.
  // Bucket 5+: the other two lines, identical to their references: 100.
  const std::vector<std::string> src = {"a b c", "one two three four five", "a b c d e f"};
  const std::vector<std::string> ref = {"the cat sat on a mat", "le chat est sur le tapis", "il y a un chat ici"};
  const std::vector<std::string> hyp = {"the cat sat on the mat", ref[1], ref[2]};
  const LengthScores s = score_by_length(src, ref, {{"A", hyp}}, {1, 5}, kBleu);
  ASSERT_EQ(s.scores.size(), 2u);
  EXPECT_NEAR(s.scores[0][0], 100 * std::pow(12.0, -0.25), 1e-9);
  EXPECT_NEAR(s.scores[0][0], 53.73, 0.005);
  EXPECT_DOUBLE_EQ(s.scores[1][0], 100.0);
  EXPECT_DOUBLE_EQ(s.overall[0], sacre_bleu(hyp, ref).score);
}

TEST(LengthBuckets, EachBucketScoresAsTheScorerOnItsLinesAlone) {
  // The committed sacreBLEU corpus (tests/models/decoding/test_sacrebleu.cpp) repeated with
  // variations, sources of 1..6 words; two systems; BLEU (both tokenizers) and chrF.
  std::vector<std::string> ref, hyp_a, hyp_b, src;
  for (const char* pair : {"The cat sat on the mat.|The cat sat on a mat.", "&quot;Oui&quot;, dit-il.|\"Oui\", dit-il !",
                           "Tu vas bien ?|Vas-tu bien ?", "Il pleut.|Il pleut.", "Je suis là.|Je suis ici."}) {
    const std::string p(pair);
    for (int v = 0; v < 3; ++v) {
      const std::string h = p.substr(0, p.find('|')), r = p.substr(p.find('|') + 1);
      hyp_a.push_back(v == 1 ? r : h);
      hyp_b.push_back(v == 2 ? h + " encore" : r.substr(0, r.size() / 2 + 1));
      ref.push_back(r);
      src.push_back(words(static_cast<int>(src.size() % 6) + 1));
    }
  }
  const std::vector<std::int64_t> starts = {1, 3, 5};
  const CorpusMetric bleu_none = [](const auto& h, const auto& r) { return sacre_bleu(h, r, SacreTokenizer::kNone).score; };
  const CorpusMetric chrf = [](const auto& h, const auto& r) { return sacre_chrf(h, r).score; };
  for (const CorpusMetric* m : {&kBleu, &bleu_none, &chrf}) {
    const LengthScores s = score_by_length(src, ref, {{"a", hyp_a}, {"b", hyp_b}}, starts, *m);
    ASSERT_EQ(s.buckets.size(), 3u);
    EXPECT_EQ(s.labels, (std::vector<std::string>{"a", "b"}));
    std::size_t total = 0;
    for (std::size_t k = 0; k < s.buckets.size(); ++k) {
      const auto& idx = s.buckets[k].lines;
      total += idx.size();
      EXPECT_EQ(s.scores[k][0], (*m)(pick(hyp_a, idx), pick(ref, idx))) << k;
      EXPECT_EQ(s.scores[k][1], (*m)(pick(hyp_b, idx), pick(ref, idx))) << k;
    }
    EXPECT_EQ(total, src.size());
    EXPECT_EQ(s.overall[1], (*m)(hyp_b, ref));
    // Corpus BLEU is not the mean of the buckets' BLEU: the buckets differ from the whole.
    EXPECT_NE(s.scores[0][0], s.overall[0]);
  }
}

TEST(LengthBuckets, EmptyBucketsAreNaNAndTheMetricIsNotAskedAboutThem) {
  const std::vector<std::string> src = {"a", "a b c d e f g h i j"}, ref = {"x y", "z w"};
  int calls = 0;
  const CorpusMetric counting = [&](const auto& h, const auto& r) {
    ++calls;
    EXPECT_FALSE(h.empty());
    return kBleu(h, r);
  };
  const LengthScores s = score_by_length(src, ref, {{"A", {"x y", "z w"}}}, {1, 2, 5, 10, 20}, counting);
  ASSERT_EQ(s.buckets.size(), 5u);
  EXPECT_EQ(calls, 3);  // overall, 1, 10-19
  for (std::size_t k : {1u, 2u, 4u}) {
    EXPECT_TRUE(s.buckets[k].lines.empty());
    EXPECT_TRUE(std::isnan(s.scores[k][0])) << k;
  }
  EXPECT_FALSE(std::isnan(s.scores[3][0]));
  EXPECT_EQ(length_scores_csv(s),
            "bucket,min_words,max_words,sentences,mean_words,A\n"
            "1,1,1,1,1.00,0.0000\n"
            "2-4,2,4,0,,\n"
            "5-9,5,9,0,,\n"
            "10-19,10,19,1,10.00,0.0000\n"
            "20+,20,,0,,\n");
}

TEST(LengthBuckets, CountMismatchesNameTheSystemAndCounts) {
  const std::vector<std::string> src = {"a", "b", "c"}, ref = {"x", "y", "z"};
  EXPECT_EQ(error_of<std::invalid_argument>([&] { score_by_length(src, {"x", "y"}, {{"A", ref}}, {1}, kBleu); }),
            "score_by_length: 2 references for 3 sources");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { score_by_length(src, ref, {{"A", ref}, {"B", {"x"}}}, {1}, kBleu); }),
            "score_by_length: system 'B' has 1 hypotheses for 3 sources");
  // The metric's errors name lines of the whole corpus: the overall score is computed first.
  const std::string empty_ref =
      error_of<std::invalid_argument>([&] { score_by_length(src, {"x", "y", ""}, {{"A", ref}}, {1, 2}, kBleu); });
  EXPECT_EQ(empty_ref.rfind("score_by_length: system 'A': ", 0), 0u) << empty_ref;
  EXPECT_NE(empty_ref.find("reference line 3 is empty"), std::string::npos) << empty_ref;
}

TEST(LengthBuckets, CsvHasOneColumnPerSystem) {
  const std::vector<std::string> src = {"a b", "a b c", "a", "a b c d"};
  const std::vector<std::string> ref = {"the cat sat on a mat", "p q r s", "one two three four", "u v w x y"};
  const std::vector<std::string> same = ref, hand = {"the cat sat on the mat", "p q r s", "nothing here", "u v w x y"};
  const LengthScores s = score_by_length(src, ref, {{"ref copy", same}, {"hand, \"checked\"", hand}}, {1, 3}, kBleu);
  // Bucket 1-2: lines 0 and 2. Copy: 100. Hand: line 0 as HandCheckedBucketBleu plus a line with no
  // match ("nothing here": 2 unigrams, 1 bigram): matches 5/8, 3/6, 2/4, 1/3, hyp_len 8 < ref_len 10,
  // BP exp(1 - 10/8): 100 * 0.7788 * (5/96)^(1/4) = 37.20.
  const double hand_12 = 100 * std::exp(1 - 10.0 / 8) * std::pow(5.0 / 8 * 3.0 / 6 * 2.0 / 4 * 1.0 / 3, 0.25);
  EXPECT_NEAR(hand_12, 37.20, 0.005);
  EXPECT_NEAR(s.scores[0][1], hand_12, 1e-9);
  char expect_12[32];
  std::snprintf(expect_12, sizeof expect_12, "%.4f", hand_12);
  EXPECT_EQ(length_scores_csv(s), std::string("bucket,min_words,max_words,sentences,mean_words,ref copy,\"hand, \"\"checked\"\"\"\n"
                                              "1-2,1,2,2,1.50,100.0000,") + expect_12 + "\n"
                                              "3+,3,,2,3.50,100.0000,100.0000\n");
}
