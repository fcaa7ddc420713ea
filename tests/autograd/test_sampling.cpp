// Sampling ops (autograd/ops_sampling.h): shapes, dtypes, errors, determinism by seed, and the
// distributions. Every statistical check is a Pearson chi-square goodness-of-fit test against the
// exact distribution, with a fixed seed, compared with the chi-square distribution's upper 0.1%
// point for its degrees of freedom (the table below): a correct sampler fails one with
// probability 0.001 for a random seed (never, for these fixed ones), a wrong one with these sample
// sizes almost surely.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops_sampling.h"
#include "autograd/random.h"

using namespace tg;

namespace {

/// Upper 0.1% points of the chi-square distribution by degrees of freedom (standard tables).
double chi2_critical_0001(int df) {
  static const std::map<int, double> table = {{1, 10.828}, {2, 13.816}, {3, 16.266}, {4, 18.467},
                                              {5, 20.515}, {9, 27.877}, {23, 49.728}};
  return table.at(df);
}

/// Pearson's statistic of `counts` against probabilities `p` (summing to 1).
double chi_square(const std::vector<std::int64_t>& counts, const std::vector<double>& p) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}));
  double x2 = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double e = n * p[i];
    x2 += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return x2;
}

/// `row` repeated `times` times as a (times, row.size()) tensor.
Tensor repeated_rows(const std::vector<double>& row, std::int64_t times, DType dtype = DType::f32) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < times; ++i) v.insert(v.end(), row.begin(), row.end());
  return Tensor::from_values(v, {times, static_cast<std::int64_t>(row.size())}, dtype);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument)";
}

}  // namespace

TEST(Sampling, MultinomialShapesDtypeAndNoGradient) {
  Generator gen(1);
  const Tensor w = Tensor::from_values({1, 2, 3, 4}, {4}, DType::f64).requires_grad_();
  const Tensor a = multinomial(w, 3, false, gen);
  EXPECT_EQ(a.shape(), (Shape{3}));
  EXPECT_EQ(a.dtype(), DType::i64);
  EXPECT_FALSE(a.requires_grad());
  const Tensor b = multinomial(repeated_rows({1, 2, 3}, 5), 7, true, gen);
  EXPECT_EQ(b.shape(), (Shape{5, 7}));
  for (std::int64_t v : b.to_vector<std::int64_t>()) EXPECT_TRUE(v >= 0 && v < 3);
  // Same seed, same draws; another seed, other draws.
  Generator g1(42), g2(42), g3(43);
  const Tensor p = repeated_rows({0.5, 1, 2, 0.25, 3}, 8);
  EXPECT_EQ(multinomial(p, 4, false, g1).to_vector<std::int64_t>(), multinomial(p, 4, false, g2).to_vector<std::int64_t>());
  EXPECT_NE(multinomial(p, 4, false, g1).to_vector<std::int64_t>(), multinomial(p, 4, false, g3).to_vector<std::int64_t>());
}

TEST(Sampling, MultinomialWithReplacementFollowsTheWeights) {
  // Unnormalised weights; a zero weight is never drawn.
  Generator gen(2);
  const std::int64_t n = 50000;
  const Tensor w = Tensor::from_values({1, 0, 2, 3, 4, /**/ 0, 0, 5, 0, 5}, {2, 5}, DType::f32);
  const std::vector<std::int64_t> s = multinomial(w, n, true, gen).to_vector<std::int64_t>();
  std::vector<std::int64_t> c0(5, 0), c1(5, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    ++c0[static_cast<std::size_t>(s[static_cast<std::size_t>(i)])];
    ++c1[static_cast<std::size_t>(s[static_cast<std::size_t>(n + i)])];
  }
  EXPECT_EQ(c0[1], 0);
  EXPECT_EQ(c1[0] + c1[1] + c1[3], 0);
  const double x0 = chi_square({c0[0], c0[2], c0[3], c0[4]}, {0.1, 0.2, 0.3, 0.4});
  EXPECT_LT(x0, chi2_critical_0001(3)) << ::testing::PrintToString(c0);
  const double x1 = chi_square({c1[2], c1[4]}, {0.5, 0.5});
  EXPECT_LT(x1, chi2_critical_0001(1)) << ::testing::PrintToString(c1);
}

TEST(Sampling, MultinomialWithoutReplacementIsASequentialDraw) {
  // Drawing without replacement from p: the first pick is j with p_j, the second j with
  // sum_{i != j} p_i p_j / (1 - p_i).
  Generator gen(3);
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  const std::int64_t rows = 20000;
  const std::vector<std::int64_t> s = multinomial(repeated_rows({1, 2, 3, 4}, rows), 2, false, gen).to_vector<std::int64_t>();
  std::vector<std::int64_t> first(4, 0), second(4, 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t a = s[static_cast<std::size_t>(2 * r)], b = s[static_cast<std::size_t>(2 * r + 1)];
    ASSERT_NE(a, b) << "row " << r;
    ++first[static_cast<std::size_t>(a)];
    ++second[static_cast<std::size_t>(b)];
  }
  std::vector<double> q(4, 0.0);
  for (std::size_t j = 0; j < 4; ++j)
    for (std::size_t i = 0; i < 4; ++i)
      if (i != j) q[j] += p[i] * p[j] / (1 - p[i]);
  EXPECT_LT(chi_square(first, p), chi2_critical_0001(3)) << ::testing::PrintToString(first);
  EXPECT_LT(chi_square(second, q), chi2_critical_0001(3)) << ::testing::PrintToString(second);
  // Drawing every category gives a permutation of the row.
  for (int t = 0; t < 20; ++t) {
    std::vector<std::int64_t> perm = multinomial(Tensor::from_values({5, 1, 0.5, 2, 7}, {5}, DType::f64), 5, false, gen)
                                         .to_vector<std::int64_t>();
    std::sort(perm.begin(), perm.end());
    EXPECT_EQ(perm, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  }
}

TEST(Sampling, MultinomialZeroWeightsComeLastWithoutReplacement) {
  Generator gen(4);
  for (int t = 0; t < 50; ++t) {
    const std::vector<std::int64_t> s =
        multinomial(Tensor::from_values({0, 3, 0, 1}, {4}, DType::f32), 4, false, gen).to_vector<std::int64_t>();
    EXPECT_EQ(std::min(s[0], s[1]), 1);
    EXPECT_EQ(std::max(s[0], s[1]), 3);
    EXPECT_EQ(s[2], 0);
    EXPECT_EQ(s[3], 2);
  }
}

TEST(Sampling, MultinomialReadsWeightsUpToScale) {
  // Each row is divided by its maximum first: weights times a power of two (exact) and in another
  // floating dtype draw the same indices from the same seed; huge weights do not overflow.
  const Tensor w = repeated_rows({1, 2, 3, 0, 4}, 6, DType::f32);
  const Tensor w4 = repeated_rows({4, 8, 12, 0, 16}, 6, DType::f64);
  const Tensor huge = repeated_rows({1e307, 2e307, 3e307, 0, 4e307}, 6, DType::f64);
  for (bool replacement : {false, true}) {
    Generator g1(5), g2(5), g3(5);
    const auto a = multinomial(w, 3, replacement, g1).to_vector<std::int64_t>();
    EXPECT_EQ(a, multinomial(w4, 3, replacement, g2).to_vector<std::int64_t>());
    const auto h = multinomial(huge, 3, replacement, g3).to_vector<std::int64_t>();
    for (std::int64_t v : h) EXPECT_NE(v, 3);
  }
}

TEST(Sampling, MultinomialErrorsAsTorch) {
  Generator gen(6);
  auto draw = [&](std::vector<double> w, std::int64_t k, bool repl) {
    multinomial(Tensor::from_values(w, {1, static_cast<std::int64_t>(w.size())}, DType::f32), k, repl, gen);
  };
  EXPECT_NE(error_of([&] { draw({1, -1, 2}, 1, true); }).find("probability entry < 0"), std::string::npos);
  EXPECT_NE(error_of([&] { draw({1, INFINITY, 2}, 1, true); }).find("infinity or NaN"), std::string::npos);
  EXPECT_NE(error_of([&] { draw({1, NAN, 2}, 1, false); }).find("infinity or NaN"), std::string::npos);
  EXPECT_NE(error_of([&] { draw({0, 0, 0}, 1, false); }).find("sum of probabilities <= 0"), std::string::npos);
  EXPECT_NE(error_of([&] { draw({1, 2, 3}, 4, false); }).find("n_sample > prob_dist.size(-1)"), std::string::npos);
  EXPECT_NO_THROW(draw({1, 2, 3}, 4, true));
  EXPECT_NE(error_of([&] { draw({1, 2, 3}, 0, true); }).find("n_sample <= 0"), std::string::npos);
  // The row is named for a 2-D input.
  EXPECT_NE(error_of([&] { multinomial(Tensor::from_values({1, 1, 0, 0}, {2, 2}, DType::f64), 1, true, gen); })
                .find("row 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { multinomial(Tensor::ones({2, 2, 2}), 1, true, gen); }).find("1 or 2 dim"), std::string::npos);
  EXPECT_NE(error_of([&] { multinomial(Tensor::ones({3}, DType::i64), 1, true, gen); }).find("floating-point"),
            std::string::npos);
}

TEST(Sampling, DefaultGeneratorIsSeededByManualSeed) {
  const Tensor w = Tensor::from_values({1, 2, 3}, {3}, DType::f32);
  manual_seed(11);
  EXPECT_EQ(default_generator().initial_seed(), 11u);
  const auto a = multinomial(w, 6, true).to_vector<std::int64_t>();
  const auto b = randint(0, 100, {6}).to_vector<std::int64_t>();
  const auto c = normal(0.0, 1.0, {5}, DType::f64).to_vector<double>();
  manual_seed(11);
  EXPECT_EQ(a, multinomial(w, 6, true).to_vector<std::int64_t>());
  EXPECT_EQ(b, randint(0, 100, {6}).to_vector<std::int64_t>());
  EXPECT_EQ(c, normal(0.0, 1.0, {5}, DType::f64).to_vector<double>());
  // The same stream as an explicit generator with that seed.
  Generator gen(11);
  EXPECT_EQ(a, multinomial(w, 6, true, gen).to_vector<std::int64_t>());
  EXPECT_EQ(b, randint(0, 100, {6}, gen).to_vector<std::int64_t>());
  EXPECT_EQ(c, normal(0.0, 1.0, {5}, gen, DType::f64).to_vector<double>());
}

TEST(Sampling, GeneratorManualSeedRestartsTheStreamAndDropsTheCachedNormal) {
  Generator a(9), b(1);
  const double first = a.normal();  // caches the pair's second value
  b.manual_seed(9);
  EXPECT_EQ(b.normal(), first);
  a.manual_seed(9);
  EXPECT_EQ(a.normal(), first);  // not the cached second value
  EXPECT_EQ(a.initial_seed(), 9u);
}

TEST(Sampling, RandintIsUniformOnItsRange) {
  Generator gen(7);
  const Tensor t = randint(3, 13, {60000}, gen);
  EXPECT_EQ(t.dtype(), DType::i64);
  EXPECT_FALSE(t.requires_grad());
  std::vector<std::int64_t> counts(10, 0);
  for (std::int64_t v : t.to_vector<std::int64_t>()) {
    ASSERT_TRUE(v >= 3 && v < 13) << v;
    ++counts[static_cast<std::size_t>(v - 3)];
  }
  EXPECT_LT(chi_square(counts, std::vector<double>(10, 0.1)), chi2_critical_0001(9)) << ::testing::PrintToString(counts);
  // randint(high, size): from 0; other dtypes hold the same integers.
  const Tensor u = randint(4, {2, 3}, gen);
  EXPECT_EQ(u.shape(), (Shape{2, 3}));
  for (std::int64_t v : u.to_vector<std::int64_t>()) EXPECT_TRUE(v >= 0 && v < 4);
  Generator g1(8), g2(8);
  EXPECT_EQ(randint(-5, 5, {20}, g1, DType::f64).to_vector<double>(), randint(-5, 5, {20}, g2).to(DType::f64).to_vector<double>());
  EXPECT_NE(error_of([&] { randint(5, 5, {2}, gen); }).find("from=5 >= to=5"), std::string::npos);
  EXPECT_THROW(randint(0, 2, {2}, gen, DType::b8), std::invalid_argument);
}

TEST(Sampling, RandintHasNoModuloBiasOnHugeRanges) {
  // A range of 3 * 2^62: a modulo of 64-bit draws would put half the values in the lowest third.
  Generator gen(9);
  const std::int64_t third = std::int64_t{1} << 62;
  std::vector<std::int64_t> counts(3, 0);
  for (std::int64_t v : randint(std::numeric_limits<std::int64_t>::min(), third, {30000}, gen)  // -2^63 .. 2^62
                            .to_vector<std::int64_t>())
    ++counts[static_cast<std::size_t>((static_cast<std::uint64_t>(v) - static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::min())) /
                                      static_cast<std::uint64_t>(third))];
  EXPECT_LT(chi_square(counts, {1.0 / 3, 1.0 / 3, 1.0 / 3}), chi2_critical_0001(2)) << ::testing::PrintToString(counts);
}

TEST(Sampling, RandpermIsAUniformPermutation) {
  Generator gen(10);
  // Every ordering of 4 elements equally likely: 24 cells, 24000 permutations.
  std::map<std::vector<std::int64_t>, std::int64_t> seen;
  for (int t = 0; t < 24000; ++t) {
    const Tensor p = randperm(4, gen);
    ASSERT_EQ(p.dtype(), DType::i64);
    ++seen[p.to_vector<std::int64_t>()];
  }
  ASSERT_EQ(seen.size(), 24u);
  std::vector<std::int64_t> counts;
  for (const auto& [perm, c] : seen) {
    std::vector<std::int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<std::int64_t>{0, 1, 2, 3}));
    counts.push_back(c);
  }
  EXPECT_LT(chi_square(counts, std::vector<double>(24, 1.0 / 24)), chi2_critical_0001(23)) << ::testing::PrintToString(counts);
  EXPECT_EQ(randperm(0, gen).shape(), (Shape{0}));
  std::vector<double> f = randperm(6, gen, DType::f32).to_vector<double>();
  std::sort(f.begin(), f.end());
  EXPECT_EQ(f, (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_THROW(randperm(-1, gen), std::invalid_argument);
}

TEST(Sampling, BernoulliFromATensorOfProbabilities) {
  Generator gen(12);
  const std::int64_t n = 40000;
  const Tensor p = repeated_rows({0, 1, 0.3}, n, DType::f64).requires_grad_();
  const Tensor s = bernoulli(p, gen);
  EXPECT_EQ(s.dtype(), DType::f64);
  EXPECT_EQ(s.shape(), p.shape());
  EXPECT_FALSE(s.requires_grad());
  const std::vector<double> v = s.to_vector<double>();
  std::int64_t ones = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    ASSERT_EQ(v[static_cast<std::size_t>(3 * r)], 0.0);
    ASSERT_EQ(v[static_cast<std::size_t>(3 * r + 1)], 1.0);
    const double x = v[static_cast<std::size_t>(3 * r + 2)];
    ASSERT_TRUE(x == 0.0 || x == 1.0);
    ones += x == 1.0;
  }
  EXPECT_LT(chi_square({ones, n - ones}, {0.3, 0.7}), chi2_critical_0001(1)) << ones;
  EXPECT_NE(error_of([&] { bernoulli(Tensor::from_values({0.5, 1.5}, {2}, DType::f32), gen); }).find("0 <= p <= 1"),
            std::string::npos);
  EXPECT_THROW(bernoulli(Tensor::from_values({0.5, NAN}, {2}, DType::f32), gen), std::invalid_argument);
  EXPECT_THROW(bernoulli(Tensor::zeros({2}, DType::i64), gen), std::invalid_argument);
}

TEST(Sampling, BernoulliWithAScalarProbability) {
  Generator gen(13);
  const Tensor s = bernoulli(Tensor::zeros({200, 100}, DType::i64), 0.25, gen);
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.shape(), (Shape{200, 100}));
  std::int64_t ones = 0;
  for (std::int64_t x : s.to_vector<std::int64_t>()) {
    ASSERT_TRUE(x == 0 || x == 1);
    ones += x;
  }
  EXPECT_LT(chi_square({ones, 20000 - ones}, {0.25, 0.75}), chi2_critical_0001(1)) << ones;
  EXPECT_EQ(bernoulli(Tensor::zeros({4}, DType::b8), 1.0, gen).to_vector<bool>(), std::vector<bool>(4, true));
  EXPECT_NE(error_of([&] { bernoulli(Tensor::zeros({2}), -0.1, gen); }).find("expects p to be in [0, 1]"), std::string::npos);
}

TEST(Sampling, NormalMatchesTheDistribution) {
  // Ten equiprobable cells of the standard normal (its deciles), after standardising.
  Generator gen(14);
  const double mean = 2.0, std = 0.5;
  const Tensor x = normal(mean, std, {100000}, gen, DType::f64);
  EXPECT_EQ(x.dtype(), DType::f64);
  const std::vector<double> edges = {-1.2815515655446004, -0.8416212335729143, -0.5244005127080407,
                                     -0.2533471031357997, 0.0, 0.2533471031357997, 0.5244005127080407,
                                     0.8416212335729143, 1.2815515655446004};
  std::vector<std::int64_t> counts(10, 0);
  for (double v : x.to_vector<double>())
    ++counts[static_cast<std::size_t>(std::upper_bound(edges.begin(), edges.end(), (v - mean) / std) - edges.begin())];
  EXPECT_LT(chi_square(counts, std::vector<double>(10, 0.1)), chi2_critical_0001(9)) << ::testing::PrintToString(counts);
  EXPECT_EQ(normal(0.0, 1.0, {2, 3}, gen).dtype(), DType::f32);
  EXPECT_NE(error_of([&] { normal(0.0, -1.0, {2}, gen); }).find("std >= 0.0"), std::string::npos);
}

TEST(Sampling, NormalWithTensorMeanAndStd) {
  Generator gen(15);
  const Tensor mean = Tensor::from_values({1, 2, 3}, {3, 1}, DType::f64).requires_grad_();
  const Tensor std = Tensor::from_values({0, 1, 0, 2}, {4}, DType::f64);
  const Tensor y = normal(mean, std, gen);
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_FALSE(y.requires_grad());
  for (std::int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(y.at({r, 0}), static_cast<double>(r + 1));  // std 0: exactly the mean
    EXPECT_EQ(y.at({r, 2}), static_cast<double>(r + 1));
    EXPECT_NE(y.at({r, 1}), static_cast<double>(r + 1));
  }
  // Row-major standard normals, scaled: the same as the scalar form from the same seed.
  Generator g1(16), g2(16);
  const std::vector<double> z = normal(0.0, 1.0, {3, 4}, g2, DType::f64).to_vector<double>();
  const std::vector<double> w = normal(mean, std, g1).to_vector<double>();
  const std::vector<double> sd = {0, 1, 0, 2};
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(w[i], static_cast<double>(i / 4 + 1) + sd[i % 4] * z[i]);
  EXPECT_EQ(normal(mean, 0.0, gen).to_vector<double>(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(normal(5.0, Tensor::zeros({2}, DType::f32), gen).to_vector<double>(), (std::vector<double>{5, 5}));
  EXPECT_NE(error_of([&] { normal(mean, Tensor::from_values({1, -1}, {2}, DType::f64), gen); }).find("std >= 0.0"),
            std::string::npos);
  EXPECT_THROW(normal(mean, Tensor::ones({2, 4}, DType::f64), gen), std::invalid_argument);  // (3, 1) vs (2, 4)
}

// As torch 1.13's normal(mean, std): the output has mean's dtype (at::empty(shape, mean.options()),
// then output.mul_(std).add_(mean)), so std of another dtype is converted, and a mean that is not
// floating is refused; with a double on one side the tensor gives the dtype (torch's empty_like).
TEST(Sampling, NormalTakesMeansDtype) {
  const Tensor mean64 = Tensor::from_values({1, 2, 3}, {3, 1}, DType::f64);
  const Tensor mean32 = mean64.to(DType::f32);
  const Tensor sd = Tensor::from_values({0, 1, 0, 2}, {4}, DType::f64);
  // The same draws as with std converted first: the same seed, the same values, in mean's dtype.
  for (const auto& [m, s] : {std::pair{mean64, sd.to(DType::f32)}, std::pair{mean32, sd},
                             std::pair{mean64, sd.to(DType::i64)}, std::pair{mean32, sd.to(DType::i64)}}) {
    SCOPED_TRACE(std::string(dtype_name(m.dtype())) + " mean, " + std::string(dtype_name(s.dtype())) + " std");
    Generator g1(17), g2(17);
    const Tensor y = normal(m, s, g1);
    EXPECT_EQ(y.dtype(), m.dtype());
    EXPECT_EQ(y.shape(), (Shape{3, 4}));
    EXPECT_EQ(y.to_vector<double>(), normal(m, s.to(m.dtype()), g2).to_vector<double>());
    for (std::int64_t r = 0; r < 3; ++r) EXPECT_EQ(y.at({r, 2}), static_cast<double>(r + 1));  // std 0: the mean
  }
  Generator gen(18);
  EXPECT_EQ(error_of([&] { normal(Tensor::ones({2}, DType::i64), 1.0, gen); }),
            "normal: expects a floating-point mean (the output's dtype), got int64 [2]");
  EXPECT_EQ(error_of([&] { normal(Tensor::ones({2}, DType::i64), Tensor::ones({2}, DType::f64), gen); }),
            "normal: expects a floating-point mean (the output's dtype), got int64 [2]");
  // Here std is the tensor that decides the dtype, and the message names it.
  EXPECT_EQ(error_of([&] { normal(5.0, Tensor::ones({2, 2}, DType::i64), gen); }),
            "normal: expects a floating-point std (the output's dtype), got int64 [2, 2]");
  EXPECT_EQ(error_of([&] { normal(mean32, Tensor::from_values({1, -1}, {2}, DType::i64), gen); }),
            "normal expects all elements of std >= 0.0, found -1");
}
