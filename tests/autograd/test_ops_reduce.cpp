#include <gtest/gtest.h>

#include <cmath>

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
  EXPECT_EQ(max(x, {1}).to_vector<float>(), (std::vector<float>{5, 6}));
  EXPECT_EQ(max(x, {0}, true).to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(argmax(x, 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2}));
  Tensor y = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  EXPECT_EQ(sum(y, {0, 2}).to_vector<float>(), (std::vector<float>{14, 22}));
  EXPECT_EQ(max(y, {0, 2}).to_vector<float>(), (std::vector<float>{6, 8}));
  EXPECT_EQ(sum(y, {0, 2}, true).shape(), (Shape{1, 2, 1}));
}

TEST(ReduceOps, LongSumIsAccurate) {
  const std::int64_t n = 1 << 20;
  Tensor x = Tensor::full({n}, 0.1, DType::f64);
  EXPECT_NEAR(sum(x).item(), 0.1 * n, 1e-6);
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
      EXPECT_GRADCHECK([&, ax = axes, keep](const std::vector<Tensor>& v) { return max(v[0], ax, keep); }, {x});
    }
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return sum(v[0]); }, {rand64({2, 3}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return mean(v[0] * v[0]); }, {rand64({2, 3}, gen)});
}

TEST(ReduceOps, MaxGradientGoesToFirstMaximum) {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 3, 3, 2}, {4}).requires_grad_();
  max(x).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 0}));
}

TEST(ReduceOps, BadAxesNameTheOp) {
  try {
    sum(Tensor::zeros({2, 3}), {2});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sum"), std::string::npos) << e.what();
  }
  EXPECT_THROW(max(Tensor::zeros({2, 3}), {0, 0}), std::invalid_argument);
  EXPECT_THROW(max(Tensor::zeros({0, 3}), {0}), std::invalid_argument);
}
