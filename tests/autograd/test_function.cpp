// tg::autograd::Function: custom ops with static forward/backward and a saved context.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "autograd/creation.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_reduce.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "error_of.h"
#include "gradcheck_util.h"

using namespace tg;
using tg::autograd::AutogradContext;
using tg::autograd::tensor_list;

namespace {

struct Cube : autograd::Function<Cube> {
  static Tensor forward(AutogradContext& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x * x;
  }
  static tensor_list backward(AutogradContext& ctx, tensor_list grad_outputs) {
    const Tensor x = ctx.get_saved_variables()[0];
    return {grad_outputs[0] * (x * x * 3.0)};
  }
};

// A clamp with a non-tensor argument in the middle, saved data, and LibTorch's pointer context.
struct MyClamp : autograd::Function<MyClamp> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double lo, const Tensor& scale) {
    ctx->saved_data["lo"] = lo;
    Tensor passes = Tensor::zeros(x.shape(), x.dtype());  // where the gradient passes: x > lo
    for (std::int64_t i = 0; i < x.numel(); ++i) passes.data<double>()[i] = x.data<double>()[i] > lo ? 1.0 : 0.0;
    ctx->save_for_backward({x, scale, passes});
    return clamp_min(x, lo) * scale;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const Tensor& scale = saved[1];
    const double lo = ctx->saved_data["lo"].toDouble();
    const Tensor& g = grad_outputs[0];
    Tensor gx, gs;
    if (ctx->needs_input_grad(0)) gx = g * scale * saved[2];
    if (ctx->needs_input_grad(2)) gs = g * clamp_min(x, lo);
    return {gx, Tensor(), gs};
  }
};

// Two outputs: backward receives both gradients (zeros for the one that got none).
struct SumAndProduct : autograd::Function<SumAndProduct> {
  static tensor_list forward(AutogradContext& ctx, const Tensor& a, const Tensor& b) {
    ctx.save_for_backward({a, b});
    return {a + b, a * b};
  }
  static tensor_list backward(AutogradContext& ctx, tensor_list g) {
    const auto s = ctx.get_saved_variables();
    return {g[0] + g[1] * s[1], g[0] + g[1] * s[0]};
  }
};

// Values and the argmax along the last axis; the index output is not differentiable.
struct MaxWithIndex : autograd::Function<MaxWithIndex> {
  static tensor_list forward(AutogradContext& ctx, const Tensor& x) {
    auto [values, index] = max(x, -1);
    ctx.mark_non_differentiable({index});
    ctx.save_for_backward({index});
    ctx.saved_data["shape"] = x.shape();
    return {values, index};
  }
  static tensor_list backward(AutogradContext& ctx, tensor_list g) {
    const Tensor index = ctx.get_saved_variables()[0];
    const Shape shape = ctx.saved_data["shape"].to<Shape>();
    Tensor gx = zeros(shape, g[0].dtype());
    return {scatter_add(gx, -1, unsqueeze(index, -1), unsqueeze(g[0], -1))};
  }
};

struct WrongCount : autograd::Function<WrongCount> {
  static Tensor forward(AutogradContext&, const Tensor& x) { return x * 2.0; }
  static tensor_list backward(AutogradContext&, tensor_list g) { return {g[0], g[0]}; }
};
struct WrongShape : autograd::Function<WrongShape> {
  static Tensor forward(AutogradContext&, const Tensor& x) { return sum(x); }
  static tensor_list backward(AutogradContext&, tensor_list g) { return {g[0]}; }
};
struct GradForDouble : autograd::Function<GradForDouble> {
  static Tensor forward(AutogradContext&, const Tensor& x, double) { return x * 2.0; }
  static tensor_list backward(AutogradContext&, tensor_list g) { return {g[0] * 2.0, g[0]}; }
};

}  // namespace

TEST(Function, CubeValueAndGradcheck) {
  Generator gen(3);
  Tensor x = tg::testing::rand64({3, 4}, gen);
  Tensor y = Cube::apply(x);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  for (std::int64_t i = 0; i < 12; ++i) {
    const double v = x.data<double>()[i];
    EXPECT_DOUBLE_EQ(y.data<double>()[i], v * v * v);
  }
  tape::reset();
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return Cube::apply(in[0]); }, {x});
  // Composed with ordinary ops on both sides, and used twice.
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return sum(Cube::apply(tanh(in[0])) * Cube::apply(in[0])); },
                   {x});
}

TEST(Function, NonTensorArgumentSavedDataAndNeedsInputGrad) {
  Generator gen(4);
  Tensor x = tg::testing::rand64({5}, gen);
  Tensor scale = tg::testing::rand64({5}, gen, 0.5, 2.0);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return MyClamp::apply(in[0], -0.2, in[1]); }, {x, scale});
  // Only x requires grad: scale's gradient is not wanted, and backward is told so.
  Tensor s = scale.detach();
  Tensor y = MyClamp::apply(x, -0.2, s);
  sum(y).backward();
  ASSERT_TRUE(x.grad().defined());
  for (std::int64_t i = 0; i < 5; ++i) {
    const double xi = x.data<double>()[i];
    EXPECT_DOUBLE_EQ(x.grad().data<double>()[i], xi > -0.2 ? s.data<double>()[i] : 0.0);
  }
}

TEST(Function, NotRecordedWithoutGradOrUnderNoGrad) {
  Tensor x = Tensor::from_values({1, 2}, {2}, DType::f64);
  EXPECT_FALSE(Cube::apply(x).requires_grad());
  x.requires_grad_();
  NoGradGuard guard;
  const std::size_t before = tape::size();
  EXPECT_FALSE(Cube::apply(x).requires_grad());
  EXPECT_EQ(tape::size(), before);
}

TEST(Function, MultipleOutputsGradcheck) {
  Generator gen(5);
  Tensor a = tg::testing::rand64({2, 3}, gen);
  Tensor b = tg::testing::rand64({2, 3}, gen);
  // Each output alone (the other receives no gradient), and both mixed.
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return SumAndProduct::apply(in[0], in[1])[0]; }, {a, b});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return SumAndProduct::apply(in[0], in[1])[1]; }, {a, b});
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        auto out = SumAndProduct::apply(in[0], in[1]);
        return tanh(out[0]) * out[1];
      },
      {a, b});
}

TEST(Function, MarkNonDifferentiable) {
  Generator gen(6);
  Tensor x = tg::testing::rand64({3, 4}, gen);
  auto out = MaxWithIndex::apply(x);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  EXPECT_EQ(out[1].dtype(), DType::i64);
  tape::reset();
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return MaxWithIndex::apply(in[0])[0]; }, {x});
}

TEST(Function, BadBackwardResultsThrowNamingTheFunction) {
  Tensor x = Tensor::from_values({1, 2}, {2}, DType::f64).requires_grad_();
  auto message = [](auto&& fn) {
    const std::string m = tg::testing::error_of<std::invalid_argument>(fn);
    tape::reset();
    return m;
  };
  std::string m = message([&] { sum(WrongCount::apply(x)).backward(); });
  EXPECT_NE(m.find("WrongCount"), std::string::npos) << m;
  EXPECT_NE(m.find("returned 2 gradients, expected 1"), std::string::npos) << m;
  m = message([&] { WrongShape::apply(x).backward(); });
  EXPECT_NE(m.find("WrongShape"), std::string::npos) << m;
  EXPECT_NE(m.find("has shape []"), std::string::npos) << m;
  m = message([&] { sum(GradForDouble::apply(x, 1.0)).backward(); });
  EXPECT_NE(m.find("argument 1, which is not a Tensor"), std::string::npos) << m;
}

TEST(Function, SavedValueTypes) {
  autograd::SavedValue v = 3;
  EXPECT_EQ(v.toInt(), 3);
  EXPECT_EQ(v.toDouble(), 3.0);
  EXPECT_THROW(v.toBool(), std::invalid_argument);
  autograd::SavedValue s = std::string("x");
  EXPECT_EQ(s.to<std::string>(), "x");
  try {
    s.to<double>();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("read as double"), std::string::npos) << e.what();
  }
}

TEST(Function, RetainGraphRunsBackwardTwice) {
  Tensor x = Tensor::from_values({1, 2}, {2}, DType::f64).requires_grad_();
  Tensor y = sum(Cube::apply(x));
  y.backward(Tensor(), true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 24}));
}
