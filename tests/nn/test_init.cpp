// Initialisers: shapes kept, bounds and moments, orthogonality, determinism per seed.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "../autograd/gradcheck_util.h"  // max_or_inf
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/random.h"
#include "nn/init.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Tensor;
namespace init = tg::nn::init;

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = tg::testing::max_or_inf(m, std::abs(v));
  return m;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

TEST(Init, Fans) {
  EXPECT_EQ(init::fans(Tensor::zeros({10, 32})), (std::pair<std::int64_t, std::int64_t>{32, 10}));
  EXPECT_EQ(init::fans(Tensor::zeros({8, 3, 5, 5})), (std::pair<std::int64_t, std::int64_t>{75, 200}));
  EXPECT_THROW(init::fans(Tensor::zeros({7})), std::invalid_argument);
}

TEST(Init, UniformAndNormal) {
  Generator gen(31);
  Tensor t = Tensor::empty({100, 50});
  Tensor same = init::uniform_(t, gen, -0.25, 0.5);
  EXPECT_TRUE(same.shares_storage(t));
  EXPECT_EQ(t.shape(), (tg::Shape{100, 50}));
  const auto v = t.to_vector<double>();
  for (double x : v) {
    ASSERT_GE(x, -0.25);
    ASSERT_LT(x, 0.5);
  }
  EXPECT_NEAR(mean_of(v), 0.125, 0.01);  // sd of the mean ~0.003

  Tensor n = init::normal_(Tensor::empty({200, 100}, DType::f64), gen, 2.0, 0.5);
  const auto w = n.to_vector<double>();
  EXPECT_NEAR(mean_of(w), 2.0, 0.015);  // sd of the mean 0.0035
  EXPECT_NEAR(std_of(w), 0.5, 0.01);
  EXPECT_THROW(init::uniform_(Tensor::zeros({2}, DType::i64), gen), std::invalid_argument);
}

TEST(Init, ConstantsAndZeros) {
  Tensor t = Tensor::empty({3, 2}, DType::f64);
  init::constant_(t, 1.25);
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 1.25));
  init::zeros_(t);
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 0.0));
  init::ones_(t);
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 1.0));
}

TEST(Init, XavierBoundsAndSpread) {
  Generator gen(32);
  Tensor w = init::xavier_uniform_(Tensor::empty({64, 192}), gen, 2.0);
  const double a = 2.0 * std::sqrt(6.0 / (64 + 192));
  EXPECT_LE(max_abs(w), a);
  EXPECT_GT(max_abs(w), 0.99 * a);  // the range is actually used
  EXPECT_NEAR(std_of(w.to_vector<double>()), a / std::sqrt(3.0), 0.02 * a);

  Tensor n = init::xavier_normal_(Tensor::empty({128, 128}, DType::f64), gen);
  EXPECT_NEAR(std_of(n.to_vector<double>()), std::sqrt(2.0 / 256), 0.003);
  EXPECT_THROW(init::xavier_uniform_(Tensor::empty({5}), gen), std::invalid_argument);
}

TEST(Init, KaimingAndLinearDefault) {
  Generator gen(33);
  Tensor w = Tensor::empty({10, 32}), b = Tensor::empty({10});
  init::linear_default_(w, b, gen);
  const double bound = 1.0 / std::sqrt(32.0);  // torch.nn.Linear: kaiming_uniform_(a=sqrt(5))
  EXPECT_LE(max_abs(w), bound);
  EXPECT_GT(max_abs(w), 0.9 * bound);
  EXPECT_LE(max_abs(b), bound);
  EXPECT_GT(max_abs(b), 0.3 * bound);

  Tensor k = init::kaiming_uniform_(Tensor::empty({50, 20}), gen, 0.0, init::FanMode::fan_out);
  const double kb = std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(50.0);
  EXPECT_LE(max_abs(k), kb);
  EXPECT_GT(max_abs(k), 0.95 * kb);
}

void expect_orthonormal_rows_or_cols(const Tensor& t, double gain) {
  const std::int64_t rows = t.size(0), cols = t.numel() / rows;
  const auto v = t.to_vector<double>();
  // Rows orthonormal if rows <= cols, else columns: check the smaller Gram matrix against gain² I.
  const bool by_rows = rows <= cols;
  const std::int64_t k = by_rows ? rows : cols, len = by_rows ? cols : rows;
  auto at = [&](std::int64_t vec, std::int64_t i) { return by_rows ? v[vec * cols + i] : v[i * cols + vec]; };
  double worst = 0;
  for (std::int64_t a = 0; a < k; ++a)
    for (std::int64_t b = 0; b < k; ++b) {
      double dot = 0;
      for (std::int64_t i = 0; i < len; ++i) dot += at(a, i) * at(b, i);
      worst = tg::testing::max_or_inf(worst, std::abs(dot - (a == b ? gain * gain : 0.0)));
    }
  EXPECT_LT(worst, 1e-5) << "shape " << t.shape().str();
  EXPECT_LT(worst, 1e-12) << "float64 Householder QR should be orthogonal to rounding";
}

TEST(Init, OrthogonalRowsOrColumns) {
  Generator gen(34);
  expect_orthonormal_rows_or_cols(init::orthogonal_(Tensor::empty({16, 16}, DType::f64), gen), 1.0);
  expect_orthonormal_rows_or_cols(init::orthogonal_(Tensor::empty({24, 8}, DType::f64), gen), 1.0);   // WᵀW = I
  expect_orthonormal_rows_or_cols(init::orthogonal_(Tensor::empty({6, 30}, DType::f64), gen), 1.0);   // WWᵀ = I
  expect_orthonormal_rows_or_cols(init::orthogonal_(Tensor::empty({4, 3, 2}, DType::f64), gen, 2.0), 2.0);  // (4, 6)
  // float32: orthogonal up to the rounding of the stored values (each off by at most 2^-24 relative,
  // so every dot product by at most about 1.2e-7): the whole Gram matrix, diagonal and off it.
  Tensor f = init::orthogonal_(Tensor::empty({12, 12}), gen);
  ASSERT_EQ(f.dtype(), DType::f32);
  const auto v = f.to_vector<double>();
  for (int a = 0; a < 12; ++a)
    for (int b = 0; b < 12; ++b) {
      double dot = 0;
      for (int i = 0; i < 12; ++i) dot += v[a * 12 + i] * v[b * 12 + i];
      EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-6) << "rows " << a << ", " << b;
    }
  EXPECT_THROW(init::orthogonal_(Tensor::empty({5}), gen), std::invalid_argument);
}

TEST(Init, OrthogonalIsTheSignCorrectedQOfANormalMatrix) {
  // With the same draws, orthogonal_ returns Q of the QR with a positive R diagonal: Qᵀ G is
  // upper triangular with a positive diagonal, where G is the (transposed-if-wide) normal matrix.
  Generator g1(35), g2(35);
  Tensor q = init::orthogonal_(Tensor::empty({5, 3}, DType::f64), g1);
  Tensor gm = init::normal_(Tensor::empty({5, 3}, DType::f64), g2);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      double r = 0;
      for (int k = 0; k < 5; ++k) r += q.at({k, i}) * gm.at({k, j});
      if (i > j) {
        EXPECT_NEAR(r, 0.0, 1e-12) << i << "," << j;
      } else if (i == j) {
        EXPECT_GT(r, 0.0);
      }
    }
}

TEST(Init, SameSeedSameValues) {
  auto draw = [](std::uint64_t seed) {
    Generator gen(seed);
    Tensor a = init::xavier_uniform_(Tensor::empty({7, 5}), gen);
    Tensor b = init::orthogonal_(Tensor::empty({5, 7}), gen);
    Tensor c = init::normal_(Tensor::empty({9}), gen);
    std::vector<float> all = a.to_vector<float>();
    for (float x : b.to_vector<float>()) all.push_back(x);
    for (float x : c.to_vector<float>()) all.push_back(x);
    return all;
  };
  EXPECT_EQ(draw(36), draw(36));
  EXPECT_NE(draw(36), draw(37));
}

}  // namespace

namespace {

using tg::Generator;
using tg::Tensor;
using tg::DType;
namespace init2 = tg::nn::init;

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace

// torch's argument order (generator last, optional) draws what the older order draws from the
// same generator state; without a generator, default_generator() after tg::manual_seed.
TEST(Init, TorchArgumentOrderDrawsAsTheOlderOrder) {
  auto fresh = [] { return Tensor::empty({6, 5}, DType::f64); };
  auto same = [&](auto torch_order, auto older_order) {
    Generator g1(77), g2(77);
    EXPECT_EQ(values(torch_order(fresh(), g1)), values(older_order(fresh(), g2)));
  };
  same([](Tensor t, Generator& g) { return init2::uniform_(t, -0.5, 2.0, g); },
       [](Tensor t, Generator& g) { return init2::uniform_(t, g, -0.5, 2.0); });
  same([](Tensor t, Generator& g) { return init2::normal_(t, 1.0, 0.25, g); },
       [](Tensor t, Generator& g) { return init2::normal_(t, g, 1.0, 0.25); });
  same([](Tensor t, Generator& g) { return init2::xavier_uniform_(t, 2.0, g); },
       [](Tensor t, Generator& g) { return init2::xavier_uniform_(t, g, 2.0); });
  same([](Tensor t, Generator& g) { return init2::xavier_normal_(t, 0.5, g); },
       [](Tensor t, Generator& g) { return init2::xavier_normal_(t, g, 0.5); });
  same([](Tensor t, Generator& g) { return init2::kaiming_uniform_(t, 0.1, init2::FanMode::fan_out, g); },
       [](Tensor t, Generator& g) { return init2::kaiming_uniform_(t, g, 0.1, init2::FanMode::fan_out); });
  same([](Tensor t, Generator& g) { return init2::orthogonal_(t, 1.5, g); },
       [](Tensor t, Generator& g) { return init2::orthogonal_(t, g, 1.5); });
  // Without a generator: default_generator(), seeded by manual_seed.
  tg::manual_seed(5);
  const auto u = values(init2::uniform_(fresh(), -1.0, 1.0));
  const auto n = values(init2::normal_(fresh()));
  const auto x = values(init2::xavier_uniform_(fresh()));
  const auto o = values(init2::orthogonal_(fresh()));
  Generator g(5);
  EXPECT_EQ(u, values(init2::uniform_(fresh(), g, -1.0, 1.0)));
  EXPECT_EQ(n, values(init2::normal_(fresh(), g)));
  EXPECT_EQ(x, values(init2::xavier_uniform_(fresh(), g)));
  EXPECT_EQ(o, values(init2::orthogonal_(fresh(), g)));
}

TEST(Init, KaimingNormalSpread) {
  // std = sqrt(2 / (1 + a^2)) / sqrt(fan_in) = sqrt(2 / 400) for a = 0, fan_in 400; 40000 draws:
  // the sample sd is within 2% of it but with probability ~1e-8 (5.7 times its relative sd 1/sqrt(2n)).
  Generator gen(40);
  const Tensor w = init2::kaiming_normal_(Tensor::empty({100, 400}, DType::f64), 0.0, init2::FanMode::fan_in, gen);
  const std::vector<double> v = w.to_vector<double>();
  double s = 0, ss = 0;
  for (double x : v) s += x, ss += x * x;
  const double mean = s / static_cast<double>(v.size());
  const double sd = std::sqrt(ss / static_cast<double>(v.size()) - mean * mean);
  EXPECT_NEAR(sd, std::sqrt(2.0 / 400), 0.02 * std::sqrt(2.0 / 400));
  EXPECT_NEAR(mean, 0.0, 5 * std::sqrt(2.0 / 400) / std::sqrt(static_cast<double>(v.size())));
  EXPECT_THROW(init2::kaiming_normal_(Tensor::zeros({3}), 0.0), std::invalid_argument);
}
