#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "gradcheck_util.h"

using namespace tg;
using tg::testing::rand64;

TEST(ReduceOps, SumMeanMaxValues) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 5, 3, 4, 2, 6}, {2, 3});
  EXPECT_EQ(sum(x).item(), 21.0);
  EXPECT_EQ(sum(x, {0}).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(sum(x, {-1}).to_vector<float>(), (std::vector<float>{9, 12}));
  EXPECT_EQ(mean(x, {1}).to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(max(x).item(), 6.0);
  EXPECT_EQ(amax(x, {1}).to_vector<float>(), (std::vector<float>{5, 6}));
  EXPECT_EQ(amax(x, {0}, true).to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(argmax(x, 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2}));
  Tensor y = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  EXPECT_EQ(sum(y, {0, 2}).to_vector<float>(), (std::vector<float>{14, 22}));
  EXPECT_EQ(amax(y, {0, 2}).to_vector<float>(), (std::vector<float>{6, 8}));
  EXPECT_EQ(sum(y, {0, 2}, true).shape(), (Shape{1, 2, 1}));
}

TEST(ReduceOps, LongSumIsAccurate) {
  const std::int64_t n = 1 << 20;
  Tensor x = Tensor::full({n}, 0.1, DType::f64);
  // The kernel sums blocks of 2^15 values with 4 SIMD accumulators of 4 lanes, then adds the 32
  // block sums: it is off by about 3.8e-9 here, where a left-to-right float64 sum is off by 1.6e-6.
  // (It is blocked, not pairwise: 1e-9 would be tighter than its actual error.)
  EXPECT_NEAR(sum(x).item(), 0.1 * n, 1e-8);
}

TEST(ReduceOps, Gradcheck) {
  Generator gen(11);
  using V = std::vector<std::int64_t>;
  const std::vector<std::pair<Shape, V>> cases = {
      {{4}, {0}}, {{3, 4}, {0}}, {{3, 4}, {1}}, {{2, 3, 4}, {1}}, {{2, 3, 4}, {0, 2}}, {{2, 3, 4}, {0, 1, 2}},
      {{2, 1, 3}, {1}}, {{3, 4}, {}},
  };
  for (const auto& [shape, axes] : cases)
    for (bool keep : {false, true}) {
      SCOPED_TRACE(shape.str() + (keep ? " keepdim" : ""));
      EXPECT_GRADCHECK([&, ax = axes, keep](const std::vector<Tensor>& v) { return sum(v[0], ax, keep); }, {rand64(shape, gen)});
      EXPECT_GRADCHECK([&, ax = axes, keep](const std::vector<Tensor>& v) { return mean(v[0], ax, keep); }, {rand64(shape, gen)});
      // max: distinct values so the maximum is unique and the function is differentiable.
      Tensor x = Tensor::arange(0, static_cast<double>(shape.numel()), 1, DType::f64);
      Generator perm(5);
      double* p = x.data<double>();
      for (std::int64_t i = shape.numel() - 1; i > 0; --i) std::swap(p[i], p[perm.below(i + 1)]);
      x = reshape(x * 0.1, shape).detach().requires_grad_();
      EXPECT_GRADCHECK([&, ax = axes, keep](const std::vector<Tensor>& v) { return amax(v[0], ax, keep); }, {x});
    }
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return sum(v[0]); }, {rand64({2, 3}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return mean(v[0] * v[0]); }, {rand64({2, 3}, gen)});
  // max / min over everything and along a dim (random values: no ties).
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return max(v[0] * v[0]); }, {rand64({2, 3}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return min(v[0] * v[0]); }, {rand64({2, 3}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return amin(v[0], {0, 2}); }, {rand64({2, 3, 2}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return std::get<0>(min(v[0], 1, true)); }, {rand64({2, 3}, gen)});
}

TEST(ReduceOps, TiesShareTheGradientOfAmaxButNotOfMaxAlongADim) {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 3, 3, 2}, {4}).requires_grad_();
  max(x).backward();  // torch.max(x): evenly among the tied maxima
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 0.5, 0}));
  x.zero_grad();
  amax(x).backward();  // torch.amax(x): evenly among the tied maxima
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 0.5, 0}));
  x.zero_grad();
  Tensor y = Tensor::from_vector(std::vector<double>{3, 1, 2, 1}, {4}).requires_grad_();
  amin(y).backward();  // torch.amin(y): evenly among the tied minima
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 0, 0.5}));
  // A NaN extreme: the gradient goes evenly to the NaNs, as torch.max(x) ([0, .5, 0, .5]).
  for (bool is_max : {true, false}) {
    Tensor n = Tensor::from_vector(std::vector<double>{3, NAN, 5, NAN}, {4}).requires_grad_();
    (is_max ? max(n) : min(n)).backward();
    EXPECT_EQ(n.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 0, 0.5}));
  }
  auto [value, index] = max(x, 0);  // torch.max(x, dim): to the returned (first) index
  EXPECT_EQ(index.item(), 1.0);
  value.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 0}));
}

TEST(ReduceOps, BadAxesNameTheOp) {
  try {
    sum(Tensor::zeros({2, 3}), {2});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sum"), std::string::npos) << e.what();
  }
  tg::testing::expect_error([] { amax(Tensor::zeros({2, 3}), {0, 0}); }, {"amax: axis 0 given twice for [2, 3]"});
  tg::testing::expect_error([] { amax(Tensor::zeros({0, 3}), {0}); },
                            {"amax: cannot reduce [0, 3] over an empty dimension"});
  // An empty axis is refused by the op the user called (PyTorch: NaN or -inf; docs/ops.md).
  const Tensor empty = Tensor::zeros({2, 0});
  tg::testing::expect_error([&] { mean(empty, {1}); }, {"mean", "[2, 0]"});
  tg::testing::expect_error([&] { var(empty, {1}); }, {"var: cannot reduce [2, 0] over an empty dimension"});
  tg::testing::expect_error([&] { tg::std(empty, {1}); }, {"std: cannot reduce [2, 0] over an empty dimension"});
  tg::testing::expect_error([&] { logsumexp(empty, {1}); }, {"logsumexp: cannot reduce [2, 0] over an empty dimension"});
  tg::testing::expect_error([&] { argmax(empty, 1); }, {"argmax: cannot reduce dim 1 of [2, 0]"});
  tg::testing::expect_error([&] { argmin(empty, -1); }, {"argmin: cannot reduce dim -1 of [2, 0]"});
  tg::testing::expect_error([] { sort(Tensor::zeros({3}, DType::i64)); }, {"sort: expects a floating-point tensor"});
  tg::testing::expect_error([] { mean(Tensor::zeros({2, 3}, DType::i64), {0}); },
                            {"mean: needs a floating tensor, got int64 [2, 3]"});
  tg::testing::expect_error([] { var(Tensor::zeros({2, 3}, DType::i64), {1}); },
                            {"var: needs a floating tensor, got int64 [2, 3]"});
}

// ---- amax/amin, max/min along a dim, var/std, logsumexp, prod, norm, cumsum/cumprod, topk/sort ----

namespace {

/// Distinct values in a random order, so every max/min/sort is unique (differentiable).
Tensor distinct64(const Shape& shape, std::uint64_t seed) {
  Tensor x = Tensor::arange(0, static_cast<double>(shape.numel()), 1, DType::f64);
  Generator perm(seed);
  double* p = x.data<double>();
  for (std::int64_t i = shape.numel() - 1; i > 0; --i) std::swap(p[i], p[perm.below(i + 1)]);
  return reshape(x * 0.37 - 1.0, shape).detach().requires_grad_();
}

std::vector<double> values(const Tensor& t) { return t.to(DType::f64).to_vector<double>(); }

}  // namespace

TEST(ReduceOps, MinMaxAlongADimReturnValuesAndIndices) {
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 5, 3, 4, 2, 6}, {2, 3});
  auto [mx, imx] = max(x, 1);
  EXPECT_EQ(values(mx), (std::vector<double>{5, 6}));
  EXPECT_EQ(imx.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2}));
  auto [mn, imn] = min(x, 0, /*keepdim=*/true);
  EXPECT_EQ(mn.shape(), (Shape{1, 3}));
  EXPECT_EQ(values(mn), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(imn.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 0}));
  EXPECT_EQ(argmin(x, -1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(values(amin(x)), (std::vector<double>{1}));
  EXPECT_EQ(values(min(x)), (std::vector<double>{1}));
  const double nan = std::nan("");
  const Tensor with_nan = Tensor::from_vector(std::vector<double>{1, nan, 3}, {3});
  EXPECT_TRUE(std::isnan(amax(with_nan).item()));
  EXPECT_EQ(std::get<1>(max(with_nan, 0)).item(), 1.0);
  Generator gen(2);
  for (int dim : {0, 1, 2}) {
    SCOPED_TRACE(dim);
    const Tensor d = distinct64({2, 3, 4}, 7 + dim);
    EXPECT_GRADCHECK([dim](const std::vector<Tensor>& v) { return std::get<0>(max(v[0], dim)); }, {d});
    EXPECT_GRADCHECK([dim](const std::vector<Tensor>& v) { return std::get<0>(min(v[0], dim, true)); }, {d});
    EXPECT_GRADCHECK([dim](const std::vector<Tensor>& v) { return amin(v[0], {dim, (dim + 2) % 3}); }, {d});
  }
}

TEST(ReduceOps, VarStdMatchTheTwoPassFormulaAndGradcheck) {
  Generator gen(3);
  const Tensor x = rand64({3, 5}, gen);
  const std::vector<double> v = x.to_vector<double>();
  for (int row = 0; row < 3; ++row) {
    double m = 0, ss = 0;
    for (int j = 0; j < 5; ++j) m += v[row * 5 + j] / 5;
    for (int j = 0; j < 5; ++j) ss += (v[row * 5 + j] - m) * (v[row * 5 + j] - m);
    EXPECT_NEAR(values(var(x, {1}))[row], ss / 4, 1e-12);
    EXPECT_NEAR(values(var(x, {1}, false))[row], ss / 5, 1e-12);
    EXPECT_NEAR(values(var(x, {1}, Correction{2}))[row], ss / 3, 1e-12);
    EXPECT_NEAR(values(tg::std(x, {-1}))[row], std::sqrt(ss / 4), 1e-12);
  }
  EXPECT_EQ(var(x).shape(), Shape{});
  EXPECT_EQ(var(x, {0}, true, true).shape(), (Shape{1, 5}));
  // One element, divisor N - 1 = 0: 0 * (1 / 0) is NaN, as torch.var(torch.ones(1)).
  EXPECT_TRUE(std::isnan(var(Tensor::ones({1}, DType::f64)).item()));
  for (bool keep : {false, true}) {
    EXPECT_GRADCHECK([keep](const std::vector<Tensor>& in) { return var(in[0], {0}, true, keep); }, {rand64({4, 3}, gen)});
    EXPECT_GRADCHECK([keep](const std::vector<Tensor>& in) { return tg::std(in[0], {1, 2}, Correction{0}, keep); },
                     {rand64({2, 3, 4}, gen)});
  }
  EXPECT_THROW(var(Tensor::zeros({3}, DType::i64)), std::invalid_argument);
}

TEST(ReduceOps, LogsumexpIsStableAndGradchecks) {
  const Tensor big = Tensor::from_vector(std::vector<double>{1000, 1000, -1000}, {3});
  // 1000 + log(1 + 1 + 0): exp and log are exact or ~1 ulp here, and adding 1000 rounds to a
  // multiple of 2^-43 (1.1e-13), so the result is within about one ulp of 1000.
  EXPECT_NEAR(logsumexp(big, {0}).item(), 1000 + std::log(2.0), 1e-12);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(logsumexp(Tensor::from_vector(std::vector<double>{-inf, -inf}, {2}), {0}).item(), -inf);
  EXPECT_EQ(logsumexp(Tensor::from_vector(std::vector<double>{1, inf}, {2}), {0}).item(), inf);
  const Tensor f = Tensor::from_vector(std::vector<float>{0.5f, -1.0f, 2.0f, 0.0f}, {2, 2});
  const std::vector<double> got = values(logsumexp(f, {1}, true));
  EXPECT_NEAR(got[0], std::log(std::exp(0.5) + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(got[1], std::log(std::exp(2.0) + 1.0), 1e-6);
  Generator gen(4);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return logsumexp(in[0], {1}); }, {rand64({3, 4}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return logsumexp(in[0], {0, 2}, true); }, {rand64({2, 3, 2}, gen)});
}

TEST(ReduceOps, ProdGradientIsExactWithZeros) {
  const Tensor x = Tensor::from_vector(std::vector<double>{2, 3, 0, 4, 0, 0, 5, 1, 2}, {3, 3}).requires_grad_();
  EXPECT_EQ(values(prod(x, 1)), (std::vector<double>{0, 0, 10}));
  prod(x, 1).backward(Tensor::ones({3}, DType::f64));
  // Row 0 (one zero): only the zero gets the product of the others; row 1 (two zeros): the
  // non-zero element gets 0 and each zero gets 0 too; row 2: prod / x.
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 6, 0, 0, 0, 2, 10, 5}));
  EXPECT_EQ(prod(Tensor::from_vector(std::vector<double>{2, 3, 4}, {3})).item(), 24.0);
  Generator gen(5);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return prod(in[0], 0, true); }, {rand64({3, 4}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return prod(in[0]); }, {rand64({2, 3}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return prod(in[0], -1); }, {x.detach().requires_grad_()});
}

TEST(ReduceOps, NormValuesGradientsAndZero) {
  const Tensor x = Tensor::from_vector(std::vector<double>{3, -4, 0, 0, 0, 0}, {2, 3});
  EXPECT_EQ(values(norm(x, 2, {1})), (std::vector<double>{5, 0}));
  EXPECT_EQ(values(norm(x, 1, {1})), (std::vector<double>{7, 0}));
  EXPECT_EQ(values(norm(x, kInf, {1})), (std::vector<double>{4, 0}));
  EXPECT_NEAR(norm(x, 3).item(), std::cbrt(27.0 + 64.0), 1e-12);
  Tensor z = Tensor::zeros({3}, DType::f64).requires_grad_();
  norm(z).backward();  // 0 at a zero norm, as PyTorch
  EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));
  // p < 1: a zero element's |x|^(p-1) is inf; it still gets 0, as torch.linalg.vector_norm.
  Tensor h = Tensor::from_vector(std::vector<double>{0, 0, 1, 0, 4, -1}, {3, 2}).requires_grad_();
  const Tensor nh = norm(h, 0.5, {1});
  EXPECT_EQ(values(nh), (std::vector<double>{0, 1, 9}));
  sum(nh).backward();
  EXPECT_EQ(h.grad().to_vector<double>(), (std::vector<double>{0, 0, 1, 0, 1.5, -3}));
  Generator gen(6);
  for (double p : {1.0, 2.0, 3.0, 0.5}) {
    SCOPED_TRACE(p);
    EXPECT_GRADCHECK([p](const std::vector<Tensor>& in) { return norm(in[0], p, {1}); }, {rand64({2, 4}, gen)});
  }
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return norm(in[0], kInf, {0, 2}, true); }, {distinct64({2, 3, 2}, 9)});
  EXPECT_THROW(norm(x, 0.0), std::invalid_argument);
}

TEST(ReduceOps, CumsumCumprodValuesAndGradients) {
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(values(cumsum(x, 1)), (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(values(cumsum(x, 0)), (std::vector<double>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(values(cumprod(x, -1)), (std::vector<double>{1, 2, 6, 4, 20, 120}));
  EXPECT_EQ(cumsum(Tensor::scalar(3.0, DType::f64), 0).item(), 3.0);
  // float32 rows accumulate in double, as torch's CPU kernel: these are torch 1.13's values.
  const Tensor tenths = Tensor::full({1 << 20}, 0.1, DType::f32);
  EXPECT_EQ(cumsum(tenths, 0).to_vector<float>().back(), 104857.6015625f);
  EXPECT_EQ(cumprod(Tensor::from_values({1e-30, 1e-30, 1e30, 1e30}, {4}, DType::f32), 0).to_vector<float>(),
            (std::vector<float>{1e-30f, 0.0f, 1e-30f, 1.0f}));
  Generator gen(7);
  for (int dim : {0, 1, 2}) {
    SCOPED_TRACE(dim);
    EXPECT_GRADCHECK([dim](const std::vector<Tensor>& in) { return cumsum(in[0], dim); }, {rand64({2, 3, 4}, gen)});
    EXPECT_GRADCHECK([dim](const std::vector<Tensor>& in) { return cumprod(in[0], dim); }, {rand64({2, 3, 4}, gen)});
  }
  // Zeros: the formula that divides by x would give NaN; the exact one does not.
  const Tensor zeros = Tensor::from_vector(std::vector<double>{2, 0, 3, 0, 4}, {5}).requires_grad_();
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return cumprod(in[0], 0); }, {zeros});
}

TEST(ReduceOps, TopkSortArgsort) {
  const Tensor x = Tensor::from_vector(std::vector<double>{3, 1, 2, 1, 5, 0}, {2, 3});
  auto [v, i] = topk(x, 2);
  EXPECT_EQ(values(v), (std::vector<double>{3, 2, 5, 1}));
  EXPECT_EQ(i.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 2, 1, 0}));
  auto [vs, is] = topk(x, 1, 0, /*largest=*/false);
  EXPECT_EQ(values(vs), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(is.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 0, 1}));
  auto [sorted, order] = sort(Tensor::from_vector(std::vector<double>{2, 1, 2, std::nan(""), 0}, {5}));
  const std::vector<double> s = values(sorted);
  EXPECT_EQ(std::vector<double>(s.begin(), s.begin() + 4), (std::vector<double>{0, 1, 2, 2}));
  EXPECT_TRUE(std::isnan(s[4]));  // NaN sorts as the largest
  EXPECT_EQ(order.to_vector<std::int64_t>(), (std::vector<std::int64_t>{4, 1, 0, 2, 3}));  // stable
  EXPECT_EQ(argsort(x, 1, /*descending=*/true).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 2, 1, 1, 0, 2}));
  for (int dim : {0, 1, 2}) {
    SCOPED_TRACE(dim);
    const Tensor d = distinct64({3, 4, 2}, 11 + dim);
    EXPECT_GRADCHECK([dim](const std::vector<Tensor>& in) { return std::get<0>(topk(in[0], 2, dim)); }, {d});
    EXPECT_GRADCHECK([dim](const std::vector<Tensor>& in) { return std::get<0>(sort(in[0], dim, true)); }, {d});
  }
  EXPECT_THROW(topk(x, 4), std::invalid_argument);
  EXPECT_THROW(topk(x, -1), std::invalid_argument);
}
