#include <gtest/gtest.h>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/pending.h"
#include "autograd/random.h"
#include "gradcheck_util.h"

using namespace tg;
using tg::testing::rand64;

TEST(MatmulOps, Values) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector(std::vector<float>{1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_EQ(matmul(a, b).to_vector<float>(), (std::vector<float>{4, 5, 10, 11}));
  // linear = x Wᵀ + b
  Tensor w = Tensor::from_vector(std::vector<float>{1, 0, 0, 0, 1, 0}, {2, 3});
  Tensor bias = Tensor::from_vector(std::vector<float>{10, 20}, {2});
  EXPECT_EQ(linear(a, w, bias).to_vector<float>(), (std::vector<float>{11, 22, 14, 25}));
  EXPECT_EQ(linear(a, w).to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
}

// An empty inner dimension (K = 0) gives zeros, or the bias, as torch; the memory must be written.
TEST(MatmulOps, EmptyInnerDimensionGivesZerosOrTheBias) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 0}, {0, 3}}, {{2, 2, 0}, {0, 3}}, {{3, 0}, {0}}, {{0}, {0, 3}}, {{2, 2, 0}, {2, 0, 3}}};
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(sa.str() + " x " + sb.str());
    for (int round = 0; round < 2; ++round) {  // the second round's output may reuse a freed block
      const Tensor a = Tensor::zeros(sa, DType::f64).requires_grad_(), b = Tensor::zeros(sb, DType::f64).requires_grad_();
      const Tensor y = matmul(a, b);
      for (double v : y.to_vector<double>()) EXPECT_EQ(v, 0.0);
      sum(y * 2.0).backward();
      EXPECT_EQ(b.grad().shape(), sb);
      for (double v : b.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
    }
  }
  const Tensor x = Tensor::zeros({2, 0}, DType::f64).requires_grad_(), w = Tensor::zeros({3, 0}, DType::f64).requires_grad_();
  const Tensor bias = Tensor::from_values({1, 2, 3}, {3}, DType::f64).requires_grad_();
  EXPECT_EQ(linear(x, w).to_vector<double>(), (std::vector<double>(6, 0.0)));
  const Tensor y = linear(x, w, bias);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  sum(y).backward();
  EXPECT_EQ(bias.grad().to_vector<double>(), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(w.grad().shape(), Shape({3, 0}));
}

TEST(MatmulOps, Gradcheck) {
  Generator gen(21);
  auto mm = [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); };
  EXPECT_GRADCHECK(mm, {rand64({3, 4}, gen), rand64({4, 5}, gen)});
  EXPECT_GRADCHECK(mm, {rand64({1, 4}, gen), rand64({4, 1}, gen)});
  EXPECT_GRADCHECK(mm, {rand64({2, 3, 4}, gen), rand64({2, 4, 2}, gen)});
  EXPECT_GRADCHECK(mm, {rand64({2, 3, 4}, gen), rand64({4, 2}, gen)});  // folded leading dims
  auto lin = [](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); };
  EXPECT_GRADCHECK(lin, {rand64({5, 3}, gen), rand64({4, 3}, gen), rand64({4}, gen)});
  EXPECT_GRADCHECK(lin, {rand64({2, 2, 3}, gen), rand64({4, 3}, gen), rand64({4}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return linear(v[0], v[1]); }, {rand64({3}, gen), rand64({2, 3}, gen)});
}

TEST(MatmulOps, ShapeErrorsNameBothShapes) {
  try {
    matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("matmul"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4, 5]"), std::string::npos) << m;
  }
  // Batch dims [2] and [3] do not broadcast.
  tg::testing::expect_error([] { matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5})); },
                            {"matmul: batch dimensions do not broadcast: got [2, 3, 4] and [3, 4, 5]"});
  tg::testing::expect_error([] { linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); },
                            {"linear: input features differ from weight's in_features", "input [2, 3]",
                             "weight [4, 5]", "bias none"});
}

namespace {
/// Reference (..., M, K) x (..., K, N) with numpy broadcasting of the batch dims, in double loops.
std::vector<double> ref_matmul(const Tensor& a, const Tensor& b, const Shape& out) {
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  const std::int64_t M = out[out.size() - 2], N = out[out.size() - 1], K = a.size(-1);
  const int nb = out.size() - 2;
  std::vector<double> y(static_cast<std::size_t>(out.numel()));
  for (std::int64_t flat = 0; flat < out.numel() / (M * N); ++flat) {
    std::int64_t rest = flat, off_a = 0, off_b = 0, sa = M * K, sb = K * N;
    for (int d = nb - 1; d >= 0; --d) {
      const std::int64_t c = rest % out[d];
      rest /= out[d];
      const int da = d - (nb - (a.dim() - 2)), db = d - (nb - (b.dim() - 2));
      if (da >= 0) off_a += (a.shape()[da] == 1 ? 0 : c) * sa, sa *= a.shape()[da];
      if (db >= 0) off_b += (b.shape()[db] == 1 ? 0 : c) * sb, sb *= b.shape()[db];
    }
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (std::int64_t k = 0; k < K; ++k) acc += va[off_a + i * K + k] * vb[off_b + k * N + j];
        y[static_cast<std::size_t>(flat * M * N + i * N + j)] = acc;
      }
  }
  return y;
}
}  // namespace

TEST(MatmulOps, VectorsAndBroadcastBatchesAsTorchMatmul) {
  Generator gen(8);
  const Tensor u = rand64({3}, gen), v = rand64({3}, gen), m = rand64({3, 4}, gen), n = rand64({2, 3}, gen);
  const std::vector<double> uu = u.to_vector<double>(), vv = v.to_vector<double>();
  EXPECT_EQ(matmul(u, v).shape(), Shape{});
  EXPECT_NEAR(matmul(u, v).item(), uu[0] * vv[0] + uu[1] * vv[1] + uu[2] * vv[2], 1e-15);
  EXPECT_EQ(matmul(u, m).shape(), (Shape{4}));  // vector x matrix
  EXPECT_EQ(matmul(n, u).shape(), (Shape{2}));  // matrix x vector
  EXPECT_EQ(matmul(rand64({5, 2, 3}, gen), u).shape(), (Shape{5, 2}));
  EXPECT_EQ(matmul(u, rand64({5, 3, 4}, gen)).shape(), (Shape{5, 4}));
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 1, 2, 3}, {4, 3, 5}},  // both broadcast
      {{4, 2, 3}, {1, 3, 5}},     // right operand: one matrix (folds)
      {{2, 3}, {4, 3, 5}},        // left operand broadcast
      {{1, 2, 3}, {2, 4, 3, 2}},  // more batch dims on the right
  };
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(sa.str() + " x " + sb.str());
    const Tensor a = rand64(sa, gen), b = rand64(sb, gen);
    const Tensor y = matmul(a, b);
    const std::vector<double> got = y.to_vector<double>(), want = ref_matmul(a, b, y.shape());
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12);
    EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {a, b});
  }
  EXPECT_EQ(matmul(rand64({2, 1, 2, 3}, gen), rand64({4, 3, 5}, gen)).shape(), (Shape{2, 4, 2, 5}));
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {u, v});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {u, rand64({2, 3, 4}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {rand64({2, 2, 3}, gen), v});
  EXPECT_THROW(matmul(u, rand64({4}, gen)), std::invalid_argument);
  EXPECT_THROW(matmul(Tensor::scalar(1.0, DType::f64), u), std::invalid_argument);
  EXPECT_THROW(matmul(Tensor::zeros({2, 2}, DType::i64), Tensor::zeros({2, 2}, DType::i64)), std::invalid_argument);
}

// x.transpose(-2, -1) as an operand reaches the GEMM as a transpose flag: its copy is never
// written by the matmul (forward or backward), and is written correctly if read later.
TEST(MatmulOps, TransposedOperandsAsGemmFlags) {
  Generator gen(9);
  struct Case {
    Shape a, b;
    bool ta, tb;  // operand given as transpose(x, -2, -1) of x with the last two dims swapped
  };
  const std::vector<Case> cases = {
      {{2, 3, 5, 4}, {2, 3, 6, 4}, false, true},  // q kᵀ, batched
      {{2, 3, 4, 5}, {2, 3, 4, 6}, true, false},  // transposed left operand
      {{2, 3, 4, 5}, {2, 3, 6, 4}, true, true},   // both
      {{5, 4}, {3, 6, 4}, false, true},           // shared left, transposed right
      {{4, 5}, {3, 4, 6}, true, false},           // shared transposed left
      {{3, 5, 4}, {6, 4}, false, true},           // folded, right operand transposed
      {{5, 4}, {6, 4}, false, true},              // 2-D
      {{3, 5, 4}, {1, 6, 4}, false, true},        // right operand with one matrix (folds)
  };
  auto op = [](const Tensor& x, bool t) { return t ? transpose(x, -2, -1) : x; };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.a.str() + " x " + c.b.str());
    const Tensor a = rand64(c.a, gen), b = rand64(c.b, gen);
    const Tensor at = op(a, c.ta), bt = op(b, c.tb);
    const Tensor y = matmul(at, bt);
    EXPECT_EQ(deferred_transpose_source(at).defined(), c.ta);
    EXPECT_EQ(deferred_transpose_source(bt).defined(), c.tb);
    const std::vector<double> got = y.to_vector<double>(), want = ref_matmul(op(a, c.ta), op(b, c.tb), y.shape());
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12);
    // Read after the matmul, the deferred copies hold the transposes.
    if (c.tb) {
      const std::vector<double> kt = bt.to_vector<double>(), kb = b.to_vector<double>();
      const std::int64_t R = b.size(-2), C = b.size(-1);
      for (std::int64_t m = 0; m < b.numel() / (R * C); ++m)
        for (std::int64_t i = 0; i < R; ++i)
          for (std::int64_t j = 0; j < C; ++j) ASSERT_EQ(kt[m * R * C + j * R + i], kb[m * R * C + i * C + j]);
      EXPECT_FALSE(deferred_transpose_source(bt).defined());  // written now: later matmuls read it
    }
    // A byte-level reader (data_ptr, as communication uses) also sees the transposed copy.
    if (c.ta) {
      const auto* ta_bytes = static_cast<const double*>(at.data_ptr());  // its first read
      const std::vector<double> ka = a.to_vector<double>();
      const std::int64_t R = a.size(-2), C = a.size(-1);
      for (std::int64_t m = 0; m < a.numel() / (R * C); ++m)
        for (std::int64_t i = 0; i < R; ++i)
          for (std::int64_t j = 0; j < C; ++j) ASSERT_EQ(ta_bytes[m * R * C + j * R + i], ka[m * R * C + i * C + j]);
      EXPECT_FALSE(deferred_transpose_source(at).defined());
    }
    const bool ta = c.ta, tb = c.tb;
    EXPECT_GRADCHECK([ta, tb, op](const std::vector<Tensor>& in) { return matmul(op(in[0], ta), op(in[1], tb)); }, {a, b});
  }
}
