#include <gtest/gtest.h>

#include "autograd/ops_elementwise.h"
#include "gradcheck_util.h"

using namespace tg;

namespace {
// An op whose backward is deliberately wrong (d sin-like: uses 2x instead of 3x^2 for x^3).
Tensor cube_with_wrong_backward(const Tensor& x) {
  Tensor y = x * x * x;
  return record("wrong_cube", y.detach(), {x}, [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, ctx.grad_output() * (x * 2.0));
  });
}
Tensor cube_with_right_backward(const Tensor& x) {
  Tensor y = x * x * x;
  return record("cube", y.detach(), {x}, [x = x.detach()](BackwardContext& ctx) {
    ctx.accumulate(0, ctx.grad_output() * (x * x * 3.0));
  });
}
}  // namespace

TEST(Gradcheck, CatchesAWrongBackward) {
  Generator gen(1);
  Tensor x = tg::testing::rand64({2, 3}, gen, 0.5, 1.5);
  const auto bad = gradcheck([](const std::vector<Tensor>& v) { return cube_with_wrong_backward(v[0]); }, {x});
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.input, 0);
  EXPECT_GE(bad.element, 0);
  EXPECT_NE(bad.message.find("analytic"), std::string::npos) << bad.message;
  EXPECT_NEAR(bad.numeric, 3 * x.to_vector<double>()[bad.element] * x.to_vector<double>()[bad.element], 1e-6);

  const auto good = gradcheck([](const std::vector<Tensor>& v) { return cube_with_right_backward(v[0]); }, {x});
  EXPECT_TRUE(good.ok) << good;
  EXPECT_EQ(good.checked, 36);  // 6 outputs x 6 inputs
}

TEST(Gradcheck, LeavesCallerTensorsUntouchedAndRejectsFloat32) {
  Generator gen(2);
  Tensor x = tg::testing::rand64({3}, gen);
  const auto before = x.to_vector<double>();
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return tanh(v[0]); }, {x}).ok);
  EXPECT_EQ(x.to_vector<double>(), before);
  EXPECT_FALSE(x.grad().defined());
  Tensor f = Tensor::zeros({3}).requires_grad_();
  tg::testing::expect_error([&] { gradcheck([](const std::vector<Tensor>& v) { return tanh(v[0]); }, {f}); },
                            {"gradcheck: input 0 requires grad but is float32; check in float64"});
}

TEST(Gradcheck, MultipleInputsSomeConstant) {
  Generator gen(3);
  Tensor a = tg::testing::rand64({2, 2}, gen);
  Tensor c = Tensor::uniform({2, 2}, -1, 1, gen, DType::f64);  // no grad: passed through
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return tanh(v[0]) * v[1]; }, {a, c});
}
