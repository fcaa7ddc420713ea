// softmax, log_softmax, masked_softmax and cross_entropy: values against an xtensor reference,
// float64 gradchecks, d2l masking semantics, PyTorch loss semantics, errors, thread independence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/kernels/reduce.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_softmax.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "gradcheck_util.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Shape;
using tg::Tensor;

using tg::testing::Contains;

// Naive softmax along `axis` of a row-major tensor, in xtensor: exp(x) / sum exp(x), no max subtraction.
std::vector<double> ref_softmax(const std::vector<double>& x, const Shape& s, int axis, bool log) {
  const auto xs = xt::adapt(x, std::vector<std::size_t>(s.begin(), s.end()));
  const xt::xarray<double> sum = xt::sum(xt::exp(xs), {static_cast<std::size_t>(axis)}, xt::keep_dims);
  const xt::xarray<double> y = log ? xt::xarray<double>(xs - xt::log(sum)) : xt::xarray<double>(xt::exp(xs) / sum);
  return {y.begin(), y.end()};
}

std::vector<double> random_values(std::int64_t n, double lo, double hi, Generator& gen) {
  std::vector<double> v(n);
  for (auto& x : v) x = lo + (hi - lo) * gen.uniform();
  return v;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
}

Tensor i64(const std::vector<std::int64_t>& v, const Shape& s) { return Tensor::from_vector(v, s); }

// ---- softmax / log_softmax values ------------------------------------------------------------

TEST(SoftmaxOps, MatchesReferenceOnEveryAxisOf3D) {
  Generator gen(1);
  const Shape s{3, 5, 7};
  const auto x = random_values(s.numel(), -3, 3, gen);
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-13 : 2e-6;
    const Tensor t = Tensor::from_values(x, s, dt);
    for (std::int64_t axis : {0, 1, 2, -1, -3}) {
      const int a = axis < 0 ? axis + 3 : axis;
      const std::string what = std::string(tg::dtype_name(dt)) + " axis " + std::to_string(axis);
      Tensor y = tg::softmax(t, axis), ly = tg::log_softmax(t, axis);
      EXPECT_EQ(y.shape(), s);
      EXPECT_EQ(y.dtype(), dt);
      expect_near_all(y.to_vector<double>(), ref_softmax(x, s, a, false), tol, "softmax " + what);
      expect_near_all(ly.to_vector<double>(), ref_softmax(x, s, a, true), tol, "log_softmax " + what);
    }
  }
}

TEST(SoftmaxOps, LongRowsExerciseSimdBodyAndTail) {
  Generator gen(2);
  for (std::int64_t K : {1, 3, 4, 8, 17, 33, 1000}) {
    const Shape s{4, K};
    const auto x = random_values(s.numel(), -5, 5, gen);
    for (DType dt : {DType::f64, DType::f32}) {
      const double tol = dt == DType::f64 ? 1e-13 : 2e-6;
      const Tensor t = Tensor::from_values(x, s, dt);
      expect_near_all(tg::softmax(t).to_vector<double>(), ref_softmax(x, s, 1, false), tol, "softmax K=" + std::to_string(K));
      expect_near_all(tg::log_softmax(t).to_vector<double>(), ref_softmax(x, s, 1, true), tol * 10,
                      "log_softmax K=" + std::to_string(K));
    }
  }
}

TEST(SoftmaxOps, LargeInputsDoNotOverflow) {
  // softmax(x + 1000) == softmax(x); exp(1000) overflows even in float64.
  Generator gen(3);
  const Shape s{2, 3, 9};
  const auto x = random_values(s.numel(), -2, 2, gen);
  std::vector<double> shifted = x;
  for (auto& v : shifted) v += 1000;
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-4;  // f32: 1000 + x keeps ~1e-4 of x
    const Tensor t = Tensor::from_values(shifted, s, dt);
    for (int axis : {0, 1, 2}) {
      const auto y = tg::softmax(t, axis).to_vector<double>();
      const auto ly = tg::log_softmax(t, axis).to_vector<double>();
      for (double v : y) ASSERT_TRUE(std::isfinite(v));
      expect_near_all(y, ref_softmax(x, s, axis, false), tol, "softmax large axis " + std::to_string(axis));
      expect_near_all(ly, ref_softmax(x, s, axis, true), tol, "log_softmax large axis " + std::to_string(axis));
    }
    // Very negative inputs as well: naive exp underflows to 0/0.
    const auto y = tg::softmax(Tensor::from_values({-1000, -1001, -1002}, {3}, dt)).to_vector<double>();
    const auto want = ref_softmax({0, -1, -2}, {3}, 0, false);
    // Shifted by the max these are exp(0), exp(-1), exp(-2) over their sum: a few roundings of
    // values below 1 in float64 (1e-15 is about 9 ulps of the largest, 0.665).
    expect_near_all(y, want, dt == DType::f64 ? 1e-15 : 1e-6, "softmax very negative");
  }
}

TEST(SoftmaxOps, SizeOneAxisAndScalar) {
  const Tensor t = Tensor::from_values({0.5, -2.0, 3.0}, {3, 1}, DType::f64);
  EXPECT_EQ(tg::softmax(t, 1).to_vector<double>(), std::vector<double>({1, 1, 1}));
  EXPECT_EQ(tg::log_softmax(t, 1).to_vector<double>(), std::vector<double>({0, 0, 0}));
  EXPECT_DOUBLE_EQ(tg::softmax(Tensor::scalar(4.0, DType::f64)).item(), 1.0);
}

TEST(SoftmaxOps, Errors) {
  const Tensor t = Tensor::zeros({2, 3}, DType::f32);
  try {
    tg::softmax(t, 2);
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "softmax"));
    EXPECT_TRUE(Contains(e.what(), "[2, 3]"));
  }
  EXPECT_THROW(tg::log_softmax(t, -3), std::invalid_argument);
  try {
    tg::softmax(i64({1, 2}, {2}));
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "softmax"));
    EXPECT_TRUE(Contains(e.what(), "[2]"));
  }
}

// ---- softmax / log_softmax gradients ---------------------------------------------------------

TEST(SoftmaxOps, GradcheckShapesAndAxes) {
  Generator gen(4);
  struct Case {
    Shape shape;
    std::int64_t axis;
  };
  const std::vector<Case> cases = {{{5}, 0},       {{3, 4}, -1},     {{3, 4}, 0},     {{2, 3, 4}, 1},
                                   {{2, 3, 4}, 0}, {{2, 1, 3}, 1},   {{1, 4, 1}, -2}, {{2, 3, 11}, -1},
                                   {{4, 1}, 1},    {{2, 70, 2}, 0}};
  for (const auto& c : cases)
    for (bool log : {false, true}) {
      Tensor x = Tensor::uniform(c.shape, -3, 2, gen, DType::f64).requires_grad_();
      const auto axis = c.axis;
      auto report = tg::gradcheck(
          [axis, log](const std::vector<Tensor>& in) { return log ? tg::log_softmax(in[0], axis) : tg::softmax(in[0], axis); },
          {x});
      EXPECT_TRUE(report) << (log ? "log_softmax " : "softmax ") << c.shape.str() << " axis " << axis << ": " << report;
    }
}

TEST(SoftmaxOps, GradcheckComposed) {
  // Weighted sum of softmax outputs chained with other ops: exercises accumulation into x.
  Generator gen(5);
  Tensor x = Tensor::uniform({3, 6}, -2, 2, gen, DType::f64).requires_grad_();
  Tensor w = Tensor::uniform({3, 6}, -1, 1, gen, DType::f64).requires_grad_();
  auto report = tg::gradcheck(
      [](const std::vector<Tensor>& in) {
        return tg::sum(tg::softmax(in[0], 0) * in[1] + tg::log_softmax(in[0] * 2.0, -1) * in[1]);
      },
      {x, w});
  EXPECT_TRUE(report) << report;
}

// ---- masked_softmax --------------------------------------------------------------------------

// Reference: softmax of each row over its first L positions, zeros after (exact for L > 0);
// uniform for L == 0.
std::vector<double> ref_masked(const std::vector<double>& x, std::int64_t rows, std::int64_t K,
                               const std::vector<std::int64_t>& row_lens) {
  std::vector<double> y(x.size(), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t L = std::min(row_lens[r], K);
    if (L == 0) {
      for (std::int64_t k = 0; k < K; ++k) y[r * K + k] = 1.0 / K;
      continue;
    }
    double sum = 0;
    for (std::int64_t k = 0; k < L; ++k) sum += std::exp(x[r * K + k]);
    for (std::int64_t k = 0; k < L; ++k) y[r * K + k] = std::exp(x[r * K + k]) / sum;
  }
  return y;
}

TEST(MaskedSoftmax, D2lExampleBatchLengths) {
  // d2l: masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3]))
  Generator gen(6);
  const auto x = random_values(16, 0, 1, gen);
  for (DType dt : {DType::f64, DType::f32}) {
    const auto y = tg::masked_softmax(Tensor::from_values(x, {2, 2, 4}, dt), i64({2, 3}, {2})).to_vector<double>();
    expect_near_all(y, ref_masked(x, 4, 4, {2, 2, 3, 3}), dt == DType::f64 ? 1e-14 : 1e-6, "d2l 1-D");
    for (int r = 0; r < 4; ++r) {
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += y[r * 4 + k];
      EXPECT_NEAR(sum, 1.0, dt == DType::f64 ? 1e-14 : 1e-6);
    }
    // Masked positions: batch 0 keeps 2 of 4, batch 1 keeps 3 of 4.
    for (int q = 0; q < 2; ++q) {
      EXPECT_NEAR(y[(0 * 2 + q) * 4 + 2], 0.0, 1e-12);
      EXPECT_NEAR(y[(0 * 2 + q) * 4 + 3], 0.0, 1e-12);
      EXPECT_NEAR(y[(1 * 2 + q) * 4 + 3], 0.0, 1e-12);
      EXPECT_GT(y[(1 * 2 + q) * 4 + 2], 0.1);
    }
  }
}

TEST(MaskedSoftmax, D2lExamplePerRowLengthsWithZeroAndClamp) {
  // d2l: masked_softmax(torch.rand(2, 2, 4), torch.tensor([[1, 3], [2, 4]])), plus 0 and > K.
  Generator gen(7);
  const auto x = random_values(24, -1, 1, gen);
  const std::vector<std::int64_t> lens = {1, 3, 0, 4, 9, 2};
  for (DType dt : {DType::f64, DType::f32}) {
    const auto y = tg::masked_softmax(Tensor::from_values(x, {2, 3, 4}, dt), i64(lens, {2, 3})).to_vector<double>();
    expect_near_all(y, ref_masked(x, 6, 4, lens), dt == DType::f64 ? 1e-14 : 1e-6, "per-row");
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(y[2 * 4 + k], 0.25, 1e-7) << "length 0 row is uniform";
    for (double v : y) EXPECT_TRUE(std::isfinite(v));
  }
  // d2l's literal example: the first row keeps only its first element.
  const auto y = tg::masked_softmax(Tensor::from_values(std::vector<double>(x.begin(), x.begin() + 16), {2, 2, 4}, DType::f32),
                                    i64({1, 3, 2, 4}, {2, 2}))
                     .to_vector<double>();
  EXPECT_NEAR(y[0], 1.0, 1e-6);
  EXPECT_NEAR(y[1] + y[2] + y[3], 0.0, 1e-12);
}

TEST(MaskedSoftmax, UndefinedLensIsPlainSoftmax) {
  Generator gen(8);
  Tensor x = Tensor::uniform({2, 5}, -1, 1, gen, DType::f64);
  EXPECT_EQ(tg::masked_softmax(x, Tensor()).to_vector<double>(), tg::softmax(x, -1).to_vector<double>());
  // 2-D scores: (B) lengths are per row, and a length of K means no mask.
  EXPECT_EQ(tg::masked_softmax(x, i64({5, 5}, {2})).to_vector<double>(), tg::softmax(x, -1).to_vector<double>());
}

TEST(MaskedSoftmax, Gradcheck) {
  Generator gen(9);
  Tensor x = Tensor::uniform({3, 2, 5}, -2, 2, gen, DType::f64).requires_grad_();
  const Tensor batch_lens = i64({2, 0, 5}, {3});
  const Tensor row_lens = i64({1, 5, 0, 3, 4, 2}, {3, 2});
  for (const Tensor& lens : {batch_lens, row_lens}) {
    auto report = tg::gradcheck([lens](const std::vector<Tensor>& in) { return tg::masked_softmax(in[0], lens); }, {x});
    EXPECT_TRUE(report) << "valid_lens " << lens.shape().str() << ": " << report;
  }
  // Composed with a random weighting, and masked positions get exactly zero gradient.
  Tensor w = Tensor::uniform({3, 2, 5}, -1, 1, gen, DType::f64);
  auto report = tg::gradcheck([w, row_lens](const std::vector<Tensor>& in) { return tg::sum(tg::masked_softmax(in[0], row_lens) * w); },
                              {x});
  EXPECT_TRUE(report) << report;
  Tensor xg = x.detach().clone().requires_grad_();
  tg::sum(tg::masked_softmax(xg, row_lens) * w).backward();
  const auto g = xg.grad().to_vector<double>();
  const std::vector<std::int64_t> L = {1, 5, 0, 3, 4, 2};
  for (int r = 0; r < 6; ++r)
    for (int k = 0; k < 5; ++k) {
      if (k >= L[r]) {
        EXPECT_EQ(g[r * 5 + k], 0.0) << "row " << r << " pos " << k;
      } else if (L[r] > 1) {
        EXPECT_NE(g[r * 5 + k], 0.0) << "row " << r << " pos " << k;
      }
    }
}

TEST(MaskedSoftmax, Errors) {
  const Tensor s = Tensor::zeros({2, 3, 4}, DType::f32);
  try {
    tg::masked_softmax(s, i64({1, 2, 3}, {3}));
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "masked_softmax"));
    EXPECT_TRUE(Contains(e.what(), "[3]"));
    EXPECT_TRUE(Contains(e.what(), "[2, 3, 4]"));
  }
  EXPECT_THROW(tg::masked_softmax(s, i64({1, 2, 3, 4, 5, 6}, {3, 2})), std::invalid_argument);
  try {
    tg::masked_softmax(s, i64({1, -1}, {2}));
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "masked_softmax"));
    EXPECT_TRUE(Contains(e.what(), "-1"));
  }
  EXPECT_THROW(tg::masked_softmax(s, Tensor::from_values({1, 2}, {2}, DType::f32)), std::invalid_argument);
}

// ---- cross_entropy ---------------------------------------------------------------------------

double ref_cross_entropy(const std::vector<double>& x, std::int64_t C, const std::vector<std::int64_t>& t,
                         std::int64_t ignore) {
  double total = 0;
  int count = 0;
  for (std::size_t n = 0; n < t.size(); ++n) {
    if (t[n] == ignore) continue;
    double sum = 0;
    for (std::int64_t c = 0; c < C; ++c) sum += std::exp(x[n * C + c]);
    total += -std::log(std::exp(x[n * C + t[n]]) / sum);
    ++count;
  }
  return total / count;
}

TEST(CrossEntropy, MatchesManualMean) {
  Generator gen(10);
  const std::int64_t N = 6, C = 5;
  const auto x = random_values(N * C, -3, 3, gen);
  const std::vector<std::int64_t> t = {0, 4, 2, -100, 1, 3};
  const std::vector<std::int64_t> t_ign = {0, 7, 7, 3, 7, 1};
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-13 : 1e-6;
    const Tensor logits = Tensor::from_values(x, {N, C}, dt);
    Tensor loss = tg::cross_entropy(logits, i64(t, {N}));
    EXPECT_EQ(loss.dim(), 0);
    EXPECT_EQ(loss.dtype(), dt);
    EXPECT_NEAR(loss.item(), ref_cross_entropy(x, C, t, -100), tol);
    EXPECT_NEAR(tg::cross_entropy(logits, i64(t_ign, {N}), 7).item(), ref_cross_entropy(x, C, t_ign, 7), tol);
    // (..., C) logits with targets of the leading shape.
    EXPECT_NEAR(tg::cross_entropy(Tensor::from_values(x, {2, 3, C}, dt), i64(t, {2, 3})).item(),
                ref_cross_entropy(x, C, t, -100), tol);
  }
  // Large logits stay finite (log-sum-exp).
  std::vector<double> big = x;
  for (auto& v : big) v += 1000;
  // x + 1000 rounds each logit by up to half an ulp of 1000 (5.7e-14), and the log-sum-exp near
  // 1000 rounds once more: a few 1e-13 at most.
  EXPECT_NEAR(tg::cross_entropy(Tensor::from_values(big, {N, C}, DType::f64), i64(t, {N})).item(),
              ref_cross_entropy(x, C, t, -100), 1e-12);
}

TEST(CrossEntropy, AllIgnoredIsNaNWithZeroGradient) {
  Tensor logits = Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64).requires_grad_();
  Tensor loss = tg::cross_entropy(logits, i64({-100, -100}, {2}));
  EXPECT_TRUE(std::isnan(loss.item()));
  loss.backward();
  for (double g : logits.grad().to_vector<double>()) EXPECT_EQ(g, 0.0);
}

TEST(CrossEntropy, BackwardIsSoftmaxMinusOneHot) {
  Tensor logits = Tensor::from_values({0.1, -0.4, 2.0, 1.0, 1.0, 1.0, 3.0, 0.0, -1.0}, {3, 3}, DType::f64).requires_grad_();
  tg::cross_entropy(logits, i64({2, -100, 0}, {3})).backward();
  const auto g = logits.grad().to_vector<double>();
  const auto p = tg::softmax(logits.detach()).to_vector<double>();
  const std::vector<double> want = {p[0] / 2, p[1] / 2, (p[2] - 1) / 2, 0, 0, 0, (p[6] - 1) / 2, p[7] / 2, p[8] / 2};
  expect_near_all(g, want, 1e-14, "cross_entropy grad");
}

TEST(CrossEntropy, Gradcheck) {
  Generator gen(11);
  Tensor logits = Tensor::uniform({5, 4}, -2, 2, gen, DType::f64).requires_grad_();
  Tensor w = Tensor::uniform({5, 4}, 0.5, 2, gen, DType::f64).requires_grad_();
  const Tensor t = i64({3, 0, 1, 2, 3}, {5});
  const Tensor t_ign = i64({3, -1, 1, -1, 0}, {5});
  auto plain = tg::gradcheck([t](const std::vector<Tensor>& in) { return tg::cross_entropy(in[0], t); }, {logits});
  EXPECT_TRUE(plain) << plain;
  auto ignored = tg::gradcheck([t_ign](const std::vector<Tensor>& in) { return tg::cross_entropy(in[0], t_ign, -1); },
                               {logits});
  EXPECT_TRUE(ignored) << ignored;
  // Composed with a random weighting and a scale on the loss: a non-unit grad_output.
  auto composed = tg::gradcheck(
      [t_ign](const std::vector<Tensor>& in) { return tg::cross_entropy(in[0] * in[1], t_ign, -1) * 3.0; },
      {logits, w});
  EXPECT_TRUE(composed) << composed;
  Tensor logits3 = Tensor::uniform({2, 3, 4}, -2, 2, gen, DType::f64).requires_grad_();
  const Tensor t3 = i64({1, 2, -100, 0, 3, 3}, {2, 3});
  auto batched = tg::gradcheck([t3](const std::vector<Tensor>& in) { return tg::cross_entropy(in[0], t3); }, {logits3});
  EXPECT_TRUE(batched) << batched;
}

TEST(CrossEntropy, Errors) {
  const Tensor logits = Tensor::zeros({4, 3}, DType::f32);
  try {
    tg::cross_entropy(logits, i64({0, 1, 3, 2}, {4}));
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "cross_entropy"));
    EXPECT_TRUE(Contains(e.what(), "target 3"));
    EXPECT_TRUE(Contains(e.what(), "[0, 3)"));
  }
  EXPECT_THROW(tg::cross_entropy(logits, i64({0, -1, 1, 2}, {4})), std::invalid_argument);
  EXPECT_NO_THROW(tg::cross_entropy(logits, i64({0, -1, 1, 2}, {4}), -1));
  try {
    tg::cross_entropy(logits, i64({0, 1, 2}, {3}));
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "cross_entropy"));
    EXPECT_TRUE(Contains(e.what(), "[3]"));
    EXPECT_TRUE(Contains(e.what(), "[4, 3]"));
  }
  EXPECT_THROW(tg::cross_entropy(logits, Tensor::zeros({4}, DType::f32)), std::invalid_argument);
}

// ---- thread-count independence ---------------------------------------------------------------

struct Results {
  std::vector<float> y, gx;
};

Results run_large(std::int64_t axis, bool log, const Tensor& x0, const Tensor& seed) {
  Tensor x = x0.detach().clone().requires_grad_();
  Tensor y = log ? tg::log_softmax(x, axis) : tg::softmax(x, axis);
  y.backward(seed);
  return {y.to_vector<float>(), x.grad().to_vector<float>()};
}

TEST(SoftmaxOps, BitwiseIndependentOfThreadCount) {
  Generator gen(12);
  const Tensor x = Tensor::uniform({512, 4096}, -8, 8, gen);
  const Tensor seed = Tensor::uniform({512, 4096}, -1, 1, gen);
  for (std::int64_t axis : {-1, 0})
    for (bool log : {false, true}) {
      tg::set_num_threads(1);
      const Results one = run_large(axis, log, x, seed);
      tg::set_num_threads(2);
      const Results two = run_large(axis, log, x, seed);
      tg::set_num_threads(0);
      const std::string what = std::string(log ? "log_softmax" : "softmax") + " axis " + std::to_string(axis);
      ASSERT_EQ(one.y.size(), two.y.size());
      EXPECT_EQ(std::memcmp(one.y.data(), two.y.data(), one.y.size() * sizeof(float)), 0) << what << " forward";
      EXPECT_EQ(std::memcmp(one.gx.data(), two.gx.data(), one.gx.size() * sizeof(float)), 0) << what << " backward";
    }
}

TEST(CrossEntropy, BitwiseIndependentOfThreadCount) {
  Generator gen(13);
  const Tensor x = Tensor::uniform({2048, 1000}, -4, 4, gen);
  std::vector<std::int64_t> t(2048);
  for (auto& v : t) v = static_cast<std::int64_t>(gen.below(1000));
  const Tensor targets = i64(t, {2048});
  std::vector<float> loss(2);
  std::vector<std::vector<float>> grads(2);
  for (int threads : {1, 2}) {
    tg::set_num_threads(threads);
    Tensor xl = x.detach().clone().requires_grad_();
    Tensor l = tg::cross_entropy(xl, targets);
    l.backward();
    loss[threads - 1] = static_cast<float>(l.item());
    grads[threads - 1] = xl.grad().to_vector<float>();
  }
  tg::set_num_threads(0);
  EXPECT_EQ(std::memcmp(&loss[0], &loss[1], sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * sizeof(float)), 0);
}

}  // namespace

// kernels::log_sum_exp, the decoders' normaliser: against a plain double loop for row lengths
// around the SIMD width, its argmax against std::max_element (first maximum on ties), and the
// edge rows (large values, -inf entries, empty).
TEST(LogSumExpKernel, MatchesPlainLoopAndFirstArgmax) {
  Generator gen(17);
  for (std::int64_t n : {1, 3, 7, 8, 9, 16, 201, 1000}) {
    std::vector<float> xf(static_cast<std::size_t>(n));
    std::vector<double> xd(xf.size());
    for (std::size_t i = 0; i < xf.size(); ++i) xd[i] = xf[i] = static_cast<float>(8.0 * gen.uniform() - 4.0);
    if (n > 4) {  // large values (no overflow), a tie below the max, the max twice: the first wins
      xf[2] = xf[n - 1] = 50.0f, xf[1] = xf[3] = 60.0f;
      for (std::size_t i = 0; i < xf.size(); ++i) xd[i] = xf[i];
    }
    const double m = *std::max_element(xd.begin(), xd.end());
    double ref = 0.0;
    for (double v : xd) ref += std::exp(v - m);
    ref = m + std::log(ref);
    std::int64_t arg = -1;
    EXPECT_NEAR(tg::kernels::log_sum_exp(xf.data(), n, &arg), ref, 1e-6 * std::max(1.0, std::abs(ref))) << n;
    EXPECT_EQ(arg, std::max_element(xf.begin(), xf.end()) - xf.begin()) << n;
    EXPECT_NEAR(tg::kernels::log_sum_exp(xd.data(), n), ref, 1e-12 * std::max(1.0, std::abs(ref))) << n;
  }
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> some_masked{-inf, 2.0f, -inf, 2.0f, -inf, -inf, -inf, -inf, -inf, 1.0f};
  std::int64_t arg = -1;
  EXPECT_NEAR(tg::kernels::log_sum_exp(some_masked.data(), 10, &arg), std::log(2 * std::exp(2.0) + std::exp(1.0)), 1e-6);
  EXPECT_EQ(arg, 1);
  const std::vector<float> all_masked(9, -inf);
  EXPECT_EQ(tg::kernels::log_sum_exp(all_masked.data(), 9), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(tg::kernels::log_sum_exp(all_masked.data(), 0, &arg), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(arg, 0);
}

// cross_entropy's backward writes the gradient over the logits when nothing else holds them:
// same gradient as when the caller keeps the logits (which must then stay untouched).
TEST(CrossEntropy, GradientInPlaceOverDroppedLogitsMatchesKeptLogits) {
  Generator gen(23);
  Tensor w = Tensor::uniform({6, 9}, -1, 1, gen).requires_grad_();
  const Tensor x = Tensor::uniform({5, 6}, -1, 1, gen);
  const Tensor targets = Tensor::from_vector(std::vector<std::int64_t>{0, 8, -100, 3, 3}, {5});
  cross_entropy(tg::matmul(x, w), targets).backward();  // logits dropped at once: in place
  const Tensor in_place = w.grad().clone();
  w.zero_grad();
  const Tensor logits = tg::matmul(x, w);
  const std::vector<double> before = logits.to_vector<double>();
  cross_entropy(logits, targets).backward();  // logits kept by the caller
  EXPECT_EQ(logits.to_vector<double>(), before);
  EXPECT_EQ(w.grad().to_vector<double>(), in_place.to_vector<double>());
}
