#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops_elementwise.h"
#include "models/decoding/metrics.h"

using namespace tg::models;

namespace {
using Ids = std::vector<std::int64_t>;
using Tokens = std::vector<std::string>;
}  // namespace

TEST(Metrics, D2lSentenceBleu) {
  // d2l's Bahdanau chapter: "go . => va !, bleu 1.000".
  EXPECT_DOUBLE_EQ(bleu_d2l("va !", "va !", 2), 1.0);
  // "il est bon ." vs "il est calme .": p1 = 3/4, p2 = 1/3, equal lengths →
  // (3/4)^(1/2) * (1/3)^(1/4) = 0.6580370064762462 (d2l prints 0.658 for "il est mouillé .").
  EXPECT_NEAR(bleu_d2l("il est bon .", "il est calme .", 2), std::sqrt(0.75) * std::pow(1.0 / 3.0, 0.25), 1e-15);
  EXPECT_NEAR(bleu_d2l("il est bon .", "il est calme .", 2), 0.6580370064762462, 1e-12);
  // Short prediction: p1 = p2 = 1, penalty exp(1 - 4/2) = e^-1.
  EXPECT_NEAR(bleu_d2l("il est", "il est calme .", 2), std::exp(-1.0), 1e-15);
  // A shorter prediction is penalised: "a b a b" vs "a b a b a", k = 3, every n-gram matches →
  // exp(1 - 5/4) (Python d2l bleu gives 0.7788007830714049).
  EXPECT_NEAR(bleu_d2l("a b a b", "a b a b a", 3), 0.7788007830714049, 1e-15);
  // A longer one is not, and repeated n-grams are clipped: "a b a b a" vs "a b a b", k = 2 →
  // p1 = 4/5 (the third "a" finds no label "a" left), p2 = 3/4 (the second "b a" none), BP 1.
  EXPECT_NEAR(bleu_d2l("a b a b a", "a b a b", 2), std::sqrt(0.8) * std::pow(0.75, 0.25), 1e-15);
  // Clipping: "je je je" vs "je suis ici": p1 = 1/3, p2 = 0 → 0.
  EXPECT_EQ(bleu_d2l("je je je", "je suis ici", 2), 0.0);
  EXPECT_NEAR(bleu_d2l("je je je", "je suis ici", 1), std::pow(1.0 / 3.0, 0.5), 1e-15);
  // No 4-gram in the label → p4 = 0 (d2l: 0.0).
  EXPECT_EQ(bleu_d2l("a b c d", "a b c", 4), 0.0);
  // A 1-token prediction with k = 2: d2l's loop over n = 1..k (the form this follows; later d2l
  // stops at min(k, len_pred)) divides by zero at n = 2; we return 0.
  EXPECT_EQ(bleu_d2l("va", "va !", 2), 0.0);
  EXPECT_EQ(bleu_d2l(Tokens{}, Tokens{"a"}, 1), 0.0);
  EXPECT_THROW(bleu_d2l("a", "a", -1), std::invalid_argument);
}

TEST(Metrics, CorpusBleu4) {
  // Hand count (and a Python implementation of the formula, run once):
  //   "the cat is on the mat" / "the cat sat on the mat":           1g 5/6, 2g 3/5, 3g 1/4, 4g 0/3
  //   "a dog runs in the park today" / "the dog runs in the park":   1g 5/7, 2g 4/6, 3g 3/5, 4g 2/4
  //   corpus: 10/13, 7/11, 4/9, 2/7; c = 13 >= r = 12 → BP = 1;
  //   BLEU = (10/13 * 7/11 * 4/9 * 2/7)^(1/4) = 0.499318733211151
  const BleuResult r = corpus_bleu(std::vector<std::string>{"the cat is on the mat", "a dog runs in the park today"},
                                   std::vector<std::string>{"the cat sat on the mat", "the dog runs in the park"});
  EXPECT_EQ(r.matches, (Ids{10, 7, 4, 2}));
  EXPECT_EQ(r.totals, (Ids{13, 11, 9, 7}));
  EXPECT_EQ(r.hyp_len, 13);
  EXPECT_EQ(r.ref_len, 12);
  EXPECT_EQ(r.brevity_penalty, 1.0);
  EXPECT_NEAR(r.precisions[1], 7.0 / 11.0, 1e-15);
  EXPECT_NEAR(r.score, std::pow(10.0 / 13 * 7.0 / 11 * 4.0 / 9 * 2.0 / 7, 0.25), 1e-14);
  EXPECT_NEAR(r.score, 0.499318733211151, 1e-12);

  // Brevity penalty: all n-grams right but c = 8 < r = 12 → exp(1 - 12/8) = 0.6065306597126334.
  const BleuResult short_hyp = corpus_bleu(std::vector<std::string>{"the cat sat on the mat", "the  dog\n"},
                                           std::vector<std::string>{"the cat sat on the mat", "the dog runs in the park"});
  EXPECT_EQ(short_hyp.hyp_len, 8);  // whitespace runs split as one
  EXPECT_NEAR(short_hyp.brevity_penalty, std::exp(-0.5), 1e-15);
  EXPECT_NEAR(short_hyp.score, std::exp(-0.5), 1e-15);

  // A precision with no match makes the (unsmoothed) score 0.
  const BleuResult zero = corpus_bleu(std::vector<std::string>{"the the the the the the the"},
                                      std::vector<std::string>{"the cat is on the mat"}, 2);
  EXPECT_EQ(zero.matches, (Ids{2, 0}));  // clipped to the 2 "the" of the reference
  EXPECT_EQ(zero.score, 0.0);
  EXPECT_EQ(corpus_bleu(std::vector<std::string>{"a b c"}, std::vector<std::string>{"a b c"}).score, 0.0);  // no 4-grams
  EXPECT_NEAR(corpus_bleu(std::vector<std::string>{"a b c d"}, std::vector<std::string>{"a b c d"}).score, 1.0, 1e-15);
  EXPECT_EQ(corpus_bleu(std::vector<std::string>{""}, std::vector<std::string>{"a"}).score, 0.0);
  EXPECT_THROW(corpus_bleu(std::vector<std::string>{"a"}, std::vector<std::string>{}), std::invalid_argument);
  EXPECT_EQ(split_whitespace("  a\tb \n c "), (Tokens{"a", "b", "c"}));
  EXPECT_EQ(split_whitespace("a\x1c" "b\x1f" "c\v\fd"), (Tokens{"a", "b", "c", "d"}));  // as Python's 'a\x1cb\x1fc\x0b\x0cd'.split()
}

TEST(Metrics, PsaLcsrGeoMean) {
  // T = [5 6 7] (cut at <eos> = 3, pads after it ignored), P = [5 7 6]:
  // PSA = 1/3, LCS = 2 ([5 7]) → LCSR = 2/3, GeoMean = sqrt(2/9).
  SequenceScores s = sequence_scores(Ids{5, 7, 6, 3, 9}, Ids{5, 6, 7, 3, 1, 1});
  EXPECT_NEAR(s.psa, 1.0 / 3.0, 1e-15);
  EXPECT_NEAR(s.lcsr, 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(s.geomean, std::sqrt(2.0 / 9.0), 1e-15);
  EXPECT_FALSE(s.exact);

  s = sequence_scores(Ids{5, 6, 7, 3, 8}, Ids{5, 6, 7, 3, 1});
  EXPECT_EQ(s.psa, 1.0);
  EXPECT_EQ(s.lcsr, 1.0);
  EXPECT_EQ(s.geomean, 1.0);
  EXPECT_TRUE(s.exact);

  // Longer prediction: truncated to L, so PSA = LCSR = 1 but not exact.
  s = sequence_scores(Ids{5, 6, 7}, Ids{5, 6, 3});
  EXPECT_EQ(s.psa, 1.0);
  EXPECT_EQ(s.lcsr, 1.0);
  EXPECT_FALSE(s.exact);

  // Shifted prediction: no position matches, LCS of T = [4 5 6 7] with P[:4] = [9 4 5 6] is 3.
  s = sequence_scores(Ids{9, 4, 5, 6, 7, 3}, Ids{4, 5, 6, 7, 3});
  EXPECT_EQ(s.psa, 0.0);
  EXPECT_NEAR(s.lcsr, 0.75, 1e-15);
  EXPECT_EQ(s.geomean, 0.0);

  // Shorter prediction (padding never matches): T = [5 6 7 8], P = [6 7].
  s = sequence_scores(Ids{6, 7, 3}, Ids{5, 6, 7, 8, 3});
  EXPECT_EQ(s.psa, 0.0);
  EXPECT_NEAR(s.lcsr, 0.5, 1e-15);

  // Truncation happens before the LCS: T = [4 5], P[:2] = [9 4] → LCS 1.
  EXPECT_NEAR(sequence_scores(Ids{9, 4, 5}, Ids{4, 5}).lcsr, 0.5, 1e-15);

  // A target without <eos> (truncated row) is used whole.
  EXPECT_NEAR(sequence_scores(Ids{4, 5, 3}, Ids{4, 5, 6, 7}).psa, 0.5, 1e-15);
}

TEST(Metrics, EmptyTargetConvention) {
  // L = 0: 1.0 if the prediction is empty too, else 0.0.
  SequenceScores s = sequence_scores(Ids{3, 5}, Ids{3, 1, 1});
  EXPECT_EQ(s.psa, 1.0);
  EXPECT_EQ(s.lcsr, 1.0);
  EXPECT_EQ(s.geomean, 1.0);
  EXPECT_TRUE(s.exact);
  s = sequence_scores(Ids{8, 3}, Ids{3});
  EXPECT_EQ(s.psa, 0.0);
  EXPECT_EQ(s.lcsr, 0.0);
  EXPECT_EQ(s.geomean, 0.0);
  EXPECT_FALSE(s.exact);
  EXPECT_EQ(sequence_scores(Ids{}, Ids{}).psa, 1.0);
  EXPECT_EQ(token_accuracy({Ids{3}}, {Ids{3}}), 1.0);
  EXPECT_EQ(token_accuracy({Ids{4}}, {Ids{3}}), 0.0);
}

TEST(Metrics, TokenVersionsAndCorpusAverages) {
  const SequenceScores s = sequence_scores(Tokens{"il", "est", "bon", "<eos>", "x"}, Tokens{"il", "est", "calme", "<eos>"});
  EXPECT_NEAR(s.psa, 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(s.lcsr, 2.0 / 3.0, 1e-15);

  // Pair 1: L = 1, one match. Pair 2: L = 3, no match (LCS 1). Pair 3: L = 2, exact.
  const std::vector<Ids> preds{{4, 3}, {7, 5, 3}, {8, 9, 3, 1}};
  const std::vector<Ids> targets{{4, 3, 1}, {5, 6, 7, 3}, {8, 9, 3}};
  const CorpusScores c = corpus_scores(preds, targets);
  EXPECT_EQ(c.count, 3);
  EXPECT_NEAR(c.exact_match, 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(c.token_accuracy, 3.0 / 6.0, 1e-15);        // pooled: (1 + 0 + 2) / (1 + 3 + 2)
  EXPECT_NEAR(c.psa, (1.0 + 0.0 + 1.0) / 3.0, 1e-15);      // mean of per-pair PSA
  EXPECT_NEAR(c.lcsr, (1.0 + 1.0 / 3.0 + 1.0) / 3.0, 1e-15);
  EXPECT_NEAR(c.geomean, (1.0 + 0.0 + 1.0) / 3.0, 1e-15);
  EXPECT_NEAR(exact_match(preds, targets), 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(token_accuracy(preds, targets), 0.5, 1e-15);
  EXPECT_EQ(corpus_scores(std::vector<Ids>{}, std::vector<Ids>{}).count, 0);
  EXPECT_THROW(corpus_scores(preds, std::vector<Ids>{}), std::invalid_argument);
}
