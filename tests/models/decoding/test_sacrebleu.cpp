// sacreBLEU-compatible BLEU and chrF. Every expected value is worked out by hand below from
// sacreBLEU 2.x's algorithm (tokenizer_13a.py + tokenizer_re.py, BLEU.compute_bleu with 'exp'
// smoothing, CHRF._compute_f_score); sacreBLEU is not installed here to produce fixtures.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/decoding/sacrebleu.h"

using namespace tg::models;

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

const std::string kNnbsp = "\xe2\x80\xaf";  // U+202F, as fra.txt puts it before ? and !

}  // namespace

TEST(SacreBleu, Tokenize13aPunctuation) {
  // Symbols are split off; ',' and '.' are split off unless a digit sits on both sides.
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(tokenize_13a("It's a test."), "It's a test .");  // the apostrophe is not in the symbol class
  EXPECT_EQ(tokenize_13a("a.b"), "a . b");
  EXPECT_EQ(tokenize_13a("x..."), "x . . .");
  EXPECT_EQ(tokenize_13a("(1+2)*3=9 @home /path"), "( 1 + 2 ) * 3 = 9 @ home / path");
  EXPECT_EQ(tokenize_13a("a[b]{c}~d^e_f`g|h\\i"), "a [ b ] { c } ~ d ^ e _ f ` g | h \\ i");
  EXPECT_EQ(tokenize_13a("#1 $2 %3 &4 :5 ;6 <7 >8 ?9"), "# 1 $ 2 % 3 & 4 : 5 ; 6 < 7 > 8 ? 9");
}

TEST(SacreBleu, Tokenize13aNumbersAndDashes) {
  EXPECT_EQ(tokenize_13a("1,000.5 dollars, 2-3 km."), "1,000.5 dollars , 2 - 3 km .");
  EXPECT_EQ(tokenize_13a("3.14-15"), "3.14 - 15");  // '-' after a digit is split off
  EXPECT_EQ(tokenize_13a("dit-il A-1"), "dit-il A-1");  // ... but not after a letter
  EXPECT_EQ(tokenize_13a("5.a a.5"), "5 . a a . 5");  // one digit side is not enough
  EXPECT_EQ(tokenize_13a("2- "), "2 -");
  EXPECT_EQ(tokenize_13a("pre-\nprocess<skipped> line\nbreak"), "preprocess line break");
}

TEST(SacreBleu, Tokenize13aEntitiesAndUnicode) {
  EXPECT_EQ(tokenize_13a("&quot;Oui&quot;, dit-il."), "\" Oui \" , dit-il .");
  EXPECT_EQ(tokenize_13a("a &amp; b &lt;c&gt;"), "a & b < c >");
  // Replaced in order quot, amp, lt, gt, each once over the line: "&amp;quot;" becomes "&quot;"
  // and stays so (the quot pass ran before the amp pass), then '&' and '"'... are not there.
  EXPECT_EQ(tokenize_13a("&amp;quot;"), "& quot ;");
  // Python's str.split() whitespace: U+202F and U+00A0 separate tokens.
  EXPECT_EQ(tokenize_13a("Tu vas bien" + kNnbsp + "?"), "Tu vas bien ?");
  EXPECT_EQ(tokenize_13a("Non\xc2\xa0!"), "Non !");
  EXPECT_EQ(tokenize_13a("Ça va, été."), "Ça va , été .");
  EXPECT_THROW(tokenize_13a("bad \xff byte"), std::invalid_argument);
}

TEST(SacreBleu, SplitPythonWhitespace) {
  EXPECT_EQ(split_python_whitespace(" a\tb\u3000c\x1f" "d  "), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_TRUE(split_python_whitespace(" \n ").empty());
}

TEST(SacreBleu, IdenticalSentenceScores100) {
  const auto s = sacre_bleu({"The cat sat on the mat."}, {"The cat sat on the mat."});
  EXPECT_DOUBLE_EQ(s.score, 100.0);
  EXPECT_EQ(s.hyp_len, 7);
  EXPECT_EQ(s.ref_len, 7);
}

TEST(SacreBleu, CorpusFromCommittedFiles) {
  // tests/data/sacrebleu_{hyp,ref}.txt, tokenized by 13a:
  //   1. The cat sat on the mat .        | The cat sat on a mat .
  //   2. " Oui " , dit-il .              | " Oui " , dit-il !
  //   3. Tu vas bien ?  (U+202F before ?)| Vas-tu bien ?
  // Clipped matches / totals per order, summed over the lines:
  //   1-grams: 6/7 + 5/6 + 2/4 = 13/17     2-grams: 4/6 + 4/5 + 1/3 = 9/14
  //   3-grams: 2/5 + 3/4 + 0/2 = 5/11      4-grams: 1/4 + 2/3 + 0/1 = 3/8
  // c = 17 >= r = 16, so BP = 1 and BLEU = 100 * (13/17 * 9/14 * 5/11 * 3/8)^(1/4).
  const auto hyp = lines_of(TG_TEST_DATA_DIR "/sacrebleu_hyp.txt");
  const auto ref = lines_of(TG_TEST_DATA_DIR "/sacrebleu_ref.txt");
  ASSERT_EQ(hyp.size(), 3u);
  const auto s = sacre_bleu(hyp, ref);
  EXPECT_EQ(s.matches, (std::vector<std::int64_t>{13, 9, 5, 3}));
  EXPECT_EQ(s.totals, (std::vector<std::int64_t>{17, 14, 11, 8}));
  EXPECT_EQ(s.hyp_len, 17);
  EXPECT_EQ(s.ref_len, 16);
  EXPECT_DOUBLE_EQ(s.brevity_penalty, 1.0);
  const double expected = 100.0 * std::pow(13.0 / 17 * 9.0 / 14 * 5.0 / 11 * 3.0 / 8, 0.25);
  EXPECT_NEAR(s.score, expected, 1e-10);
  EXPECT_NEAR(s.precisions[0], 1300.0 / 17, 1e-12);
  EXPECT_EQ(s.format(), "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x-tapegrad = 53.80 "
                        "76.5/64.3/45.5/37.5 (BP = 1.000 ratio = 1.062 hyp_len = 17 ref_len = 16)");
  EXPECT_NEAR(expected, 53.8027, 1e-4);

  // Without tokenization the punctuation stays glued ("mat." matches "mat."); line 3's U+202F
  // still separates "bien" and "?", as Python's str.split() does.
  const auto none = sacre_bleu(hyp, ref, SacreTokenizer::kNone);
  EXPECT_EQ(none.signature(), "BLEU|nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:2.x-tapegrad");
  // Tokens: [The cat sat on the mat.] [&quot;Oui&quot;, dit-il.] [Tu vas bien ?]
  //         [The cat sat on a mat.]   ["Oui", dit-il !]          [Vas-tu bien ?]
  // 1-grams 5/6 + 0/2 + 2/4 = 7/12; 2-grams 3/5 + 0/1 + 1/3 = 4/9; 3-grams 2/4 + 0/0 + 0/2 = 2/6;
  // 4-grams 1/3 + 0/0 + 0/1 = 1/4. c = 12, r = 12.
  EXPECT_EQ(none.matches, (std::vector<std::int64_t>{7, 4, 2, 1}));
  EXPECT_EQ(none.totals, (std::vector<std::int64_t>{12, 9, 6, 4}));
  EXPECT_NEAR(none.score, 100.0 * std::pow(7.0 / 12 * 4.0 / 9 * 2.0 / 6 * 1.0 / 4, 0.25), 1e-10);
}

TEST(SacreBleu, BrevityPenalty) {
  // Every precision is 1; c = 4 < r = 8: BP = exp(1 - 8/4) = e^-1.
  const auto s = sacre_bleu({"a b c d"}, {"a b c d e f g h"});
  EXPECT_NEAR(s.brevity_penalty, std::exp(-1.0), 1e-15);
  EXPECT_NEAR(s.score, 100.0 * std::exp(-1.0), 1e-10);
  // A longer hypothesis is not penalised.
  EXPECT_DOUBLE_EQ(sacre_bleu({"a b c d e"}, {"a b c d"}).brevity_penalty, 1.0);
}

TEST(SacreBleu, ZeroMatchesAndEmptyHypothesis) {
  const auto s = sacre_bleu({"x y z w"}, {"a b c d"});
  EXPECT_EQ(s.score, 0.0);  // no match at any order: sacreBLEU stops early with 0
  EXPECT_EQ(s.precisions, (std::vector<double>{0, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(s.brevity_penalty, 1.0);
  const auto e = sacre_bleu({""}, {"a b"});
  EXPECT_EQ(e.score, 0.0);
  EXPECT_EQ(e.brevity_penalty, 0.0);  // c = 0
  EXPECT_EQ(e.hyp_len, 0);
}

TEST(SacreBleu, ExpSmoothing) {
  // "a b c d" vs "a b x d": 1-grams 3/4, 2-grams 1/3, 3-grams 0/2 -> 100 / (2 * 2) = 25,
  // 4-grams 0/1 -> 100 / (4 * 1) = 25. BLEU = (75 * 100/3 * 25 * 25)^(1/4) = 1562500^(1/4) = 25 sqrt 2.
  const auto s = sacre_bleu({"a b c d"}, {"a b x d"});
  EXPECT_NEAR(s.precisions[0], 75.0, 1e-12);
  EXPECT_NEAR(s.precisions[1], 100.0 / 3, 1e-12);
  EXPECT_NEAR(s.precisions[2], 25.0, 1e-12);
  EXPECT_NEAR(s.precisions[3], 25.0, 1e-12);
  EXPECT_NEAR(s.score, 25.0 * std::sqrt(2.0), 1e-10);
}

TEST(SacreBleu, OrderWithoutHypothesisNgramsGivesZero) {
  // "a b" has no 3-gram: sacreBLEU breaks out of its loop, precisions 3 and 4 stay 0, log(0) is
  // taken as -9999999999, so the score is 0 even though every n-gram it has matches.
  const auto s = sacre_bleu({"a b"}, {"a b c"});
  EXPECT_EQ(s.precisions, (std::vector<double>{100, 100, 0, 0}));
  EXPECT_EQ(s.score, 0.0);
  EXPECT_NEAR(s.brevity_penalty, std::exp(1.0 - 3.0 / 2.0), 1e-15);
}

TEST(SacreBleu, ClippingAndTrailingWhitespace) {
  // "the the the the" vs "the cat": 1-grams clipped to 1/4; trailing spaces and U+202F are stripped.
  const auto s = sacre_bleu({"the the the the  " + kNnbsp}, {"the cat"});
  EXPECT_EQ(s.matches[0], 1);
  EXPECT_EQ(s.totals[0], 4);
  EXPECT_EQ(s.hyp_len, 4);
}

TEST(SacreBleu, Errors) {
  EXPECT_THROW(sacre_bleu({"a"}, {"a", "b"}), std::invalid_argument);
  try {
    sacre_bleu({"a", "b"}, {"a", ""});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("reference line 2 is empty"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sacre_chrf({"a"}, {""}), std::invalid_argument);
  EXPECT_THROW(sacre_bleu({"\xc3"}, {"a"}), std::invalid_argument);
}

TEST(SacreChrf, SmallCases) {
  EXPECT_NEAR(sacre_chrf({"ab"}, {"ab"}).score, 100.0, 1e-12);
  // "a b c" vs "abd" (whitespace removed: "abc" vs "abd"): orders 1-3 have n-grams on both sides.
  //   precision = recall = (2/3 + 1/2 + 0/1) / 3 = 7/18, and F2 of equal P and R is P.
  const auto b = sacre_chrf({"a b c"}, {"abd"});
  EXPECT_EQ(b.stats, (std::vector<std::int64_t>{3, 3, 2, 2, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_NEAR(b.score, 700.0 / 18, 1e-10);
  // "ab" vs "abc": P = (2/2 + 1/1) / 2 = 1, R = (2/3 + 1/2) / 2 = 7/12 (order 3: no hypothesis
  // n-gram, not counted). F2 = 5 P R / (4 P + R) = 7/11.
  EXPECT_NEAR(sacre_chrf({"ab"}, {"abc"}).score, 700.0 / 11, 1e-10);
  // Beta 2 weights recall: swapping the sides gives P = 7/12, R = 1, F2 = 5 R P / (4 P + R) = 35/38.
  EXPECT_NEAR(sacre_chrf({"abc"}, {"ab"}).score, 100.0 * (5.0 * 7 / 12) / (4.0 * 7 / 12 + 1), 1e-10);
}

TEST(SacreChrf, CorpusStatisticsAreSummedBeforeAveraging) {
  // The two cases above as one corpus: per order (hyp, ref, match) = (5, 6, 4), (3, 4, 2), (1, 2, 0).
  // P = (4/5 + 2/3 + 0) / 3 = 22/45, R = (4/6 + 2/4 + 0) / 3 = 7/18.
  const auto c = sacre_chrf({"a b c", "ab"}, {"abd", "abc"});
  const double p = 22.0 / 45, r = 7.0 / 18;
  EXPECT_NEAR(c.score, 100.0 * 5 * p * r / (4 * p + r), 1e-10);
  EXPECT_EQ(c.format(), "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.x-tapegrad = 40.55");
}

TEST(SacreChrf, CodePointsAndUnicodeWhitespace) {
  // "été" vs "étés" in code points: P = 1 (orders 1-3), R = (3/4 + 2/3 + 1/2) / 3 = 23/36,
  // F2 = 5 R / (4 + R) = 115/167. (On bytes the counts would differ.)
  EXPECT_NEAR(sacre_chrf({"été"}, {"étés"}).score, 100.0 * 115 / 167, 1e-10);
  // U+202F and U+00A0 are whitespace and removed, like ' '.
  EXPECT_NEAR(sacre_chrf({"bien" + kNnbsp + "?"}, {"bien ?"}).score, 100.0, 1e-12);
  EXPECT_NEAR(sacre_chrf({"Non\xc2\xa0!"}, {"Non!"}).score, 100.0, 1e-12);
  // Nothing left to compare: 0, not an error.
  EXPECT_EQ(sacre_chrf({" "}, {"a"}).score, 0.0);
}
