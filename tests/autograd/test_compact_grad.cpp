// Compact gradients (autograd/compact_grad.h): the low-rank and sparse-rows forms give the dense
// gradient's bits, row block by row block; their norms agree with the dense sum of squares; ops
// produce them only for leaves that allow them and fall back to dense gradients otherwise; and
// gradcheck (float64) proves linear and embedding through the compact path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/compact_grad.h"
#include "autograd/kernels/gemm.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "gradcheck_util.h"

namespace tg {
namespace {

using testing::max_abs_diff;

/// Sum of squares of every element, in double, the plain way.
double sum_squares(const Tensor& t) {
  double s = 0;
  for (double v : t.to_vector<double>()) s += v * v;
  return s;
}

/// Exact element-wise equality (same bits for finite values).
void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(max_abs_diff(a, b), 0.0);
}

/// The dense weight gradient of linear(x, w): Gᵀ X, as linear's backward computes it.
Tensor dense_weight_grad(const Tensor& g, const Tensor& x) {
  const Tensor w = Tensor::zeros({g.size(1), x.size(1)}, g.dtype()).requires_grad_();
  Tensor xd = x.detach();
  linear(xd, w).backward(g);
  return w.grad();
}

TEST(CompactGrad, LowRankRowsAreTheDenseGradientsBits) {
  Generator gen(1);
  for (DType dt : {DType::f32, DType::f64}) {
    // 300 rows: more than two of the norm's 128-row blocks, the last one partial.
    const Tensor g = Tensor::uniform({300, 37}, -1, 1, gen, dt), x = Tensor::uniform({300, 53}, -1, 1, gen, dt);
    const auto c = low_rank_grad(g, x);
    EXPECT_STREQ(c->kind(), "low_rank");
    EXPECT_EQ(c->shape(), (Shape{37, 53}));
    const Tensor dense = dense_weight_grad(g, x);
    expect_same(c->dense(), dense);
    // A block of rows in the middle.
    Tensor rows = Tensor::empty({10, 53}, dt);
    if (dt == DType::f32) c->read_rows(20, 30, rows.data<float>());
    else c->read_rows(20, 30, rows.data<double>());
    expect_same(rows, slice(dense, 0, 20, 30));
    // The Gram-matrix norm against the dense sum of squares.
    const double want = sum_squares(dense);
    EXPECT_NEAR(c->squared_norm(), want, want * (dt == DType::f32 ? 1e-5 : 1e-12));
    // Scaling: the dense gradient multiplied once in its dtype (what clip_grad_norm does).
    c->scale(0.3);
    const Tensor scaled = dense.detach() * Tensor::scalar(0.3, dt);
    expect_same(c->dense(), scaled);
    EXPECT_NEAR(c->squared_norm(), 0.09 * want, 0.09 * want * (dt == DType::f32 ? 1e-5 : 1e-12));
  }
}

TEST(CompactGrad, SparseRowsSumRepeatsInOrderAndZeroTheRest) {
  Generator gen(2);
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{7, 2, 7, 11, 2, 7}, {6});
  const Tensor g = Tensor::uniform({6, 5}, -1, 1, gen, DType::f32);
  const auto c = sparse_rows_grad(g, ids, Shape{20, 5});
  ASSERT_NE(c, nullptr);
  EXPECT_STREQ(c->kind(), "sparse_rows");
  EXPECT_LT(c->bytes(), 20 * 5 * 4);
  // The dense gradient from embedding's own backward.
  const Tensor table = Tensor::zeros({20, 5}).requires_grad_();
  embedding(table, ids).backward(g);
  expect_same(c->dense(), table.grad());
  EXPECT_NEAR(c->squared_norm(), sum_squares(table.grad()), 1e-9);
  // Rows [5, 9) hold id 7 only.
  Tensor rows = Tensor::empty({4, 5});
  c->read_rows(5, 9, rows.data<float>());
  expect_same(rows, slice(table.grad(), 0, 5, 9));
  EXPECT_THROW(c->read_rows(5, 21, rows.data<float>()), std::out_of_range);
  // Most rows touched: the sparse form would not be smaller.
  const Tensor many = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}, {6});
  EXPECT_EQ(sparse_rows_grad(g, many, Shape{6, 5}), nullptr);
}

TEST(CompactGrad, LinearKeepsALowRankGradientOnlyWhenAllowedAndSmaller) {
  Generator gen(3);
  const Tensor x = Tensor::uniform({2, 3, 8}, -1, 1, gen);  // 6 rows x (8 + 40) < 8 x 40
  const Tensor w0 = Tensor::uniform({40, 8}, -1, 1, gen), b0 = Tensor::uniform({40}, -1, 1, gen);
  const Tensor seed = Tensor::uniform({2, 3, 40}, -1, 1, gen);

  Tensor w_dense = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
  linear(x, w_dense, b).backward(seed);
  EXPECT_EQ(w_dense.compact_grad(), nullptr);

  Tensor w = w0.clone().requires_grad_();
  w.allow_compact_grad();
  linear(x, w, b).backward(seed);
  ASSERT_NE(w.compact_grad(), nullptr);
  EXPECT_STREQ(w.compact_grad()->kind(), "low_rank");
  expect_same(w.grad(), w_dense.grad());   // converted once, on access
  EXPECT_EQ(w.compact_grad(), nullptr);
  w.zero_grad();

  // Too many rows for the pair to be smaller than the dense (40, 8) gradient: dense directly.
  const Tensor tall = Tensor::uniform({50, 8}, -1, 1, gen);
  linear(tall, w).backward(Tensor::uniform({50, 40}, -1, 1, gen));
  EXPECT_EQ(w.compact_grad(), nullptr);
  EXPECT_TRUE(w.grad().defined());
  w.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(CompactGrad, ASecondGradientForTheLeafContinuesDensely) {
  // The weight used twice in one graph, and across two backward passes without zero_grad: the
  // gradient must be the dense sum in both cases.
  Generator gen(4);
  const Tensor x1 = Tensor::uniform({3, 6}, -1, 1, gen), x2 = Tensor::uniform({2, 6}, -1, 1, gen);
  const Tensor w0 = Tensor::uniform({30, 6}, -1, 1, gen);
  auto run = [&](bool compact) {
    Tensor w = w0.clone().requires_grad_();
    w.allow_compact_grad(compact);
    (sum(linear(x1, w)) + sum(linear(x2, w) * linear(x2, w))).backward();
    sum(linear(x1, w)).backward();
    EXPECT_EQ(w.compact_grad(), nullptr);
    return w.grad();
  };
  EXPECT_LT(max_abs_diff(run(true), run(false)), 1e-5);
}

TEST(CompactGrad, EmbeddingKeepsTheRowsUsed) {
  Generator gen(5);
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{3, 9, 3, 0}, {2, 2});
  const Tensor seed = Tensor::uniform({2, 2, 4}, -1, 1, gen);
  const Tensor t0 = Tensor::uniform({50, 4}, -1, 1, gen);
  Tensor dense = t0.clone().requires_grad_(), table = t0.clone().requires_grad_();
  table.allow_compact_grad();
  embedding(dense, ids).backward(seed);
  embedding(table, ids).backward(seed);
  ASSERT_NE(table.compact_grad(), nullptr);
  EXPECT_STREQ(table.compact_grad()->kind(), "sparse_rows");
  expect_same(table.grad(), dense.grad());
}

TEST(CompactGrad, GradcheckLinearAndEmbeddingThroughTheCompactPath) {
  Generator gen(6);
  // linear over a broadcast batch (2, 3) with the weight's gradient kept low rank: 6 rows x (12 + 40) < 12 x 40.
  Tensor x = testing::rand64({2, 3, 12}, gen), w = testing::rand64({40, 12}, gen), b = testing::rand64({40}, gen);
  w.allow_compact_grad();
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tanh(linear(in[0], in[1], in[2])); }, {x, w, b});
  // The check itself must have gone through the compact form.
  linear(x, w, b).backward(Tensor::ones({2, 3, 40}, DType::f64));
  EXPECT_NE(w.compact_grad(), nullptr);
  w.zero_grad();

  // embedding with repeated ids (the repeats' gradients add up in one row).
  Tensor table = testing::rand64({30, 3}, gen);
  table.allow_compact_grad();
  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{4, 1, 4, 29, 4}, {5});
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return tanh(embedding(in[0], ids)); }, {table});
  embedding(table, ids).backward(Tensor::ones({5, 3}, DType::f64));
  EXPECT_NE(table.compact_grad(), nullptr);
}

TEST(CompactGrad, RejectsMismatchedFactors) {
  EXPECT_THROW(low_rank_grad(Tensor::zeros({3, 4}), Tensor::zeros({2, 5})), std::invalid_argument);
  EXPECT_THROW(low_rank_grad(Tensor::zeros({3, 4}), Tensor::zeros({3, 5}, DType::f64)), std::invalid_argument);
  EXPECT_THROW(sparse_rows_grad(Tensor::zeros({2, 4}), Tensor::from_vector(std::vector<std::int64_t>{0, 1}, {2}),
                                Shape{10, 5}),
               std::invalid_argument);
  EXPECT_THROW(sparse_rows_grad(Tensor::zeros({1, 4}), Tensor::from_vector(std::vector<std::int64_t>{10}, {1}),
                                Shape{10, 4}),
               std::out_of_range);
}

}  // namespace
}  // namespace tg
