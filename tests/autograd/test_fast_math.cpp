// The float32 tanh and sigmoid of the fused kernels and the float32 GELU kernel
// (autograd/kernels/fast_math.h) against the exact values, on a dense grid and at the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "gradcheck_util.h"  // max_or_inf
#include "autograd/kernels/fast_math.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"

namespace {

using tg::kernels::gate_sigmoid;
using tg::kernels::gate_tanh;
using FloatBatch = xsimd::batch<float>;
constexpr int kLanes = static_cast<int>(FloatBatch::size);

// Lanes x0, x0 + step, ... (computed once: the same floats for the SIMD and the scalar form).
void fill_lanes(float x0, float step, float* lanes) {
  for (int k = 0; k < kLanes; ++k) lanes[k] = x0 + static_cast<float>(k) * step;
}

TEST(FastMath, TanhIsWithinThreeFloatEpsilonsOfTheExactValue) {
  // Relative error over [-12, 12] (beyond the ±9 clamp too), every 1/8192, and near zero.
  double worst = 0.0;
  for (int i = -12 * 8192; i <= 12 * 8192; i += kLanes) {
    alignas(64) float in[kLanes], out[kLanes];
    fill_lanes(static_cast<float>(i) / 8192.0f, 1.0f / 8192.0f, in);
    gate_tanh(FloatBatch::load_aligned(in)).store_aligned(out);
    for (int k = 0; k < kLanes; ++k) {
      const float x = in[k];
      if (x == 0.0f) continue;
      const double exact = std::tanh(static_cast<double>(x));
      worst = tg::testing::max_or_inf(worst, std::abs((out[k] - exact) / exact));
    }
  }
  for (float x = 1e-30f; x < 1e-2f; x *= 1.37f) {
    const double exact = std::tanh(static_cast<double>(x));
    worst = tg::testing::max_or_inf(worst, std::abs((gate_tanh(x) - exact) / exact));
  }
  EXPECT_LT(worst, 3.0 * std::numeric_limits<float>::epsilon());
  EXPECT_GT(worst, 0.0);  // it is an approximation: if this fails, the test is not testing it
}

TEST(FastMath, ScalarTanhRoundsExactlyLikeTheSimdForm) {
  for (int i = -20000; i <= 20000; i += kLanes) {
    alignas(64) float in[kLanes], out[kLanes];
    fill_lanes(static_cast<float>(i) * 7.3e-4f, 7.3e-4f, in);
    gate_tanh(FloatBatch::load_aligned(in)).store_aligned(out);
    for (int k = 0; k < kLanes; ++k) {
      const float x = in[k];
      ASSERT_EQ(out[k], gate_tanh(x)) << "x = " << x;
    }
  }
}

TEST(FastMath, TanhSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(gate_tanh(0.0f), 0.0f);
  EXPECT_EQ(gate_tanh(inf), 1.0f);
  EXPECT_EQ(gate_tanh(-inf), -1.0f);
  EXPECT_EQ(gate_tanh(9.0f), 1.0f);
  EXPECT_EQ(gate_tanh(1e30f), 1.0f);
  EXPECT_TRUE(std::isnan(gate_tanh(std::numeric_limits<float>::quiet_NaN())));
  alignas(64) float in[kLanes], out[kLanes];
  for (int k = 0; k < kLanes; ++k) in[k] = k % 2 ? std::numeric_limits<float>::quiet_NaN() : inf;
  gate_tanh(FloatBatch::load_aligned(in)).store_aligned(out);
  for (int k = 0; k < kLanes; ++k) {
    if (k % 2) EXPECT_TRUE(std::isnan(out[k])) << "lane " << k;
    else EXPECT_EQ(out[k], 1.0f) << "lane " << k;
  }
  // Odd: tanh(-x) = -tanh(x) bit for bit.
  for (float x = 1e-6f; x < 10.0f; x *= 1.01f) ASSERT_EQ(gate_tanh(-x), -gate_tanh(x)) << x;
}

TEST(FastMath, SigmoidIsWithinTwoTenMillionthsAbsolute) {
  double worst = 0.0;
  for (int i = -30 * 1024; i <= 30 * 1024; i += kLanes) {
    alignas(64) float in[kLanes], out[kLanes];
    for (int k = 0; k < kLanes; ++k) in[k] = static_cast<float>(i + k) / 1024.0f;
    gate_sigmoid(FloatBatch::load_aligned(in)).store_aligned(out);
    for (int k = 0; k < kLanes; ++k) {
      const double exact = 1.0 / (1.0 + std::exp(-static_cast<double>(in[k])));
      worst = tg::testing::max_or_inf(worst, std::abs(out[k] - exact));
      ASSERT_GE(out[k], 0.0f);
      ASSERT_LE(out[k], 1.0f);
    }
  }
  EXPECT_LT(worst, 2e-7);
}

TEST(FastMath, DoubleKeepsTheLibraryFunctions) {
  for (double x = -20.0; x <= 20.0; x += 0.37) {
    EXPECT_NEAR(gate_tanh(x), std::tanh(x), 1e-15) << x;
    alignas(64) double in[xsimd::batch<double>::size], out[xsimd::batch<double>::size];
    for (std::size_t k = 0; k < xsimd::batch<double>::size; ++k) in[k] = x + 0.01 * static_cast<double>(k);
    gate_sigmoid(xsimd::batch<double>::load_aligned(in)).store_aligned(out);
    for (std::size_t k = 0; k < xsimd::batch<double>::size; ++k)
      EXPECT_NEAR(out[k], 1.0 / (1.0 + std::exp(-in[k])), 1e-15) << in[k];
  }
}

// 0.5 x erfc(-x / sqrt(2)) in long double: the exact GELU to far beyond float32.
double exact_gelu(float x) {
  const long double v = x;
  return static_cast<double>(0.5L * v * std::erfc(-v / std::sqrt(2.0L)));
}

float gelu_one(float x) {
  alignas(64) float in[kLanes], out[kLanes];
  for (float& v : in) v = x;
  tg::kernels::gelu_float<1>(in, out);
  return out[0];
}

// The error budget: Numerical Recipes' erfc is within 1.2e-7 relative; the rest is float32
// rounding, chiefly of the exponent -z^2 + P(t): an error d in it is a relative error d in the
// result, and d grows with z^2 (up to ~80 before the result underflows).
TEST(FastMath, GeluIsRelativelyAccurateIncludingTheLowerTail) {
  double worst_central = 0.0, worst_tail = 0.0;
  for (int i = -13 * 4096; i <= 8 * 4096; ++i) {
    const float x = static_cast<float>(i) / 4096.0f;
    const double exact = exact_gelu(x);
    if (x == 0.0f || std::abs(exact) < std::numeric_limits<float>::min()) continue;
    const double rel = std::abs((gelu_one(x) - exact) / exact);
    double& worst = x >= -5.0f ? worst_central : worst_tail;
    worst = tg::testing::max_or_inf(worst, rel);
  }
  EXPECT_LT(worst_central, 4e-6);  // ~30 float32 ulp
  EXPECT_LT(worst_tail, 4e-5);
  EXPECT_GT(worst_central, 0.0);  // an approximation: if this fails, the test is not testing it
}

// d/dx gelu = Phi(x) + x phi(x); the error is measured against Phi(x) + |x| phi(x), the size of
// the two terms (their sum crosses zero near x = -0.75, where a relative error means nothing).
TEST(FastMath, GeluGradientIsAccurate) {
  double worst_central = 0.0, worst_tail = 0.0;
  for (int i = -13 * 4096; i <= 8 * 4096; ++i) {
    const float x = static_cast<float>(i) / 4096.0f;
    const long double v = x;
    const long double cdf = 0.5L * std::erfc(-v / std::sqrt(2.0L));
    const long double density = std::exp(-0.5L * v * v) / std::sqrt(2.0L * 3.14159265358979323846L);
    const double exact = static_cast<double>(cdf + v * density);
    const double scale = static_cast<double>(cdf + std::abs(v) * density);
    if (scale < std::numeric_limits<float>::min()) continue;
    alignas(64) float g[kLanes], in[kLanes], out[kLanes];
    for (int k = 0; k < kLanes; ++k) g[k] = 1.0f, in[k] = x;
    tg::kernels::gelu_grad_float<1>(g, in, out);
    const double rel = std::abs(out[0] - exact) / scale;
    double& worst = x >= -5.0f ? worst_central : worst_tail;
    worst = tg::testing::max_or_inf(worst, rel);
  }
  EXPECT_LT(worst_central, 4e-6);
  EXPECT_LT(worst_tail, 4e-5);
  EXPECT_GT(worst_central, 0.0);
}

TEST(FastMath, GeluInterleavedBatchesRoundExactlyLikeOne) {
  constexpr int n = 4 * kLanes;
  for (int i = -6000; i <= 6000; i += n) {
    alignas(64) float in[n], four[n], one[n];
    for (int k = 0; k < n; ++k) in[k] = static_cast<float>(i + k) * 1.3e-3f;
    tg::kernels::gelu_float<4>(in, four);
    for (int b = 0; b < 4; ++b)
      tg::kernels::gelu_float(FloatBatch::load_aligned(in + b * kLanes)).store_aligned(one + b * kLanes);
    for (int k = 0; k < n; ++k) ASSERT_EQ(four[k], one[k]) << "x = " << in[k];
    alignas(64) float grad[n];
    for (int k = 0; k < n; ++k) grad[k] = 1.0f + static_cast<float>(k) * 0.01f;
    tg::kernels::gelu_grad_float<4>(grad, in, four);
    for (int b = 0; b < 4; ++b)
      tg::kernels::gelu_grad_float(FloatBatch::load_aligned(grad + b * kLanes), FloatBatch::load_aligned(in + b * kLanes))
          .store_aligned(one + b * kLanes);
    for (int k = 0; k < n; ++k) ASSERT_EQ(four[k], one[k]) << "gradient, x = " << in[k];
  }
}

// The polynomial covers x >= -9.5; a batch group holding a lane below takes the erfc form there,
// chosen lane by lane: every lane's result is the one it gets among copies of itself.
TEST(FastMath, GeluLaneDoesNotDependOnItsNeighbours) {
  constexpr int n = 4 * kLanes;
  const float mixed[] = {-30.0f, -9.6f, -9.5f, -9.4f, -3.0f, -0.5f, 0.0f, 0.7f, 9.6f, 40.0f, -12.0f};
  alignas(64) float in[n], out[n], grad[n], grad_out[n];
  for (int k = 0; k < n; ++k) in[k] = mixed[k % std::size(mixed)], grad[k] = 1.0f;
  tg::kernels::gelu_float<4>(in, out);
  tg::kernels::gelu_grad_float<4>(grad, in, grad_out);
  for (int k = 0; k < n; ++k) {
    alignas(64) float alone[kLanes], ones[kLanes], alone_out[kLanes];
    for (int j = 0; j < kLanes; ++j) alone[j] = in[k], ones[j] = 1.0f;
    EXPECT_EQ(out[k], gelu_one(in[k])) << "x = " << in[k];
    tg::kernels::gelu_grad_float<1>(ones, alone, alone_out);
    EXPECT_EQ(grad_out[k], alone_out[0]) << "gradient, x = " << in[k];
  }
  EXPECT_NEAR(out[1] / exact_gelu(-9.6f), 1.0, 4e-5);  // a tail lane (in[1] = -9.6), accurate
}

TEST(FastMath, GeluSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(gelu_one(0.0f), 0.0f);
  EXPECT_EQ(gelu_one(inf), inf);
  EXPECT_EQ(gelu_one(1e30f), 1e30f);
  EXPECT_TRUE(std::isnan(gelu_one(-inf)));  // -inf * Phi(-inf) = -inf * 0, as x * 0.5 * (1 + erf)
  EXPECT_TRUE(std::isnan(gelu_one(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(gelu_one(-std::numeric_limits<float>::quiet_NaN())));  // sign bit set
  EXPECT_TRUE(std::signbit(gelu_one(-0.0f)));  // -0 * Phi(0), as PyTorch
  EXPECT_EQ(gelu_one(9.6f), 9.6f);            // above the polynomial's range, 1 - Phi(-x) rounds to 1
  const float tiny = gelu_one(-12.0f);  // exact: -2.13e-32, not a cancelled 0
  EXPECT_LT(tiny, 0.0f);
  EXPECT_NEAR(tiny / exact_gelu(-12.0f), 1.0, 4e-5);
  EXPECT_EQ(gelu_one(-1e30f), -0.0f);
  alignas(64) float g[kLanes], in[kLanes], out[kLanes];
  const float cases[] = {inf, -inf, 1e30f, -1e30f};
  const float expected[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN(), 1.0f,
                            0.0f};
  for (int c = 0; c < 4; ++c) {
    for (int k = 0; k < kLanes; ++k) g[k] = 1.0f, in[k] = cases[c];
    tg::kernels::gelu_grad_float<1>(g, in, out);
    if (std::isnan(expected[c])) EXPECT_TRUE(std::isnan(out[0])) << cases[c];  // inf * 0, as PyTorch
    else EXPECT_EQ(out[0], expected[c]) << cases[c];
  }
  // Phi(0) = g(-1)^16 is within one float32 ulp of 0.5 (scripts/fit_gelu.py reports it): no float32
  // value squared four times rounds to exactly 0.5.
  for (const float zero : {0.0f, -0.0f}) {
    for (int k = 0; k < kLanes; ++k) g[k] = 1.0f, in[k] = zero;
    tg::kernels::gelu_grad_float<1>(g, in, out);
    EXPECT_NEAR(out[0], 0.5f, 6e-8f) << zero;
  }
}

}  // namespace
