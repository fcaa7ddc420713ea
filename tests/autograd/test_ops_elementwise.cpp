#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "autograd/ops_elementwise.h"
#include "gradcheck_util.h"

using namespace tg;
using tg::testing::rand64;

namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Shape pairs covering equal shapes, broadcasting on either side, size-1 dims and scalars.
const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {
    {{3, 4}, {3, 4}}, {{3, 4}, {4}},       {{4}, {3, 4}},       {{3, 1}, {1, 4}},
    {{2, 3, 4}, {3, 1}}, {{1}, {2, 3}},    {{2, 1, 4}, {2, 3, 1}}, {{}, {3}},
};
}  // namespace

TEST(ElementwiseOps, Values) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector(std::vector<float>{10, 20}, {2});
  EXPECT_EQ((a + b).to_vector<float>(), (std::vector<float>{11, 22, 13, 24}));
  EXPECT_EQ((a - b).to_vector<float>(), (std::vector<float>{-9, -18, -7, -16}));
  EXPECT_EQ((a * b).to_vector<float>(), (std::vector<float>{10, 40, 30, 80}));
  EXPECT_EQ((b / a).to_vector<float>(), (std::vector<float>{10, 10, 10.0f / 3, 5}));
  EXPECT_EQ((2.0 - a).to_vector<float>(), (std::vector<float>{1, 0, -1, -2}));
  EXPECT_EQ((12.0 / a).to_vector<float>(), (std::vector<float>{12, 6, 4, 3}));
  EXPECT_EQ((-a).to_vector<float>(), (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(relu(a - 2.5).to_vector<float>(), (std::vector<float>{0, 0, 0.5, 1.5}));
  EXPECT_EQ(square(a).to_vector<float>(), (std::vector<float>{1, 4, 9, 16}));
  // Transcendentals against libm, in both dtypes, across SIMD tails (n = 37).
  Generator gen(3);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = Tensor::uniform({37}, 0.1, 3.0, gen, dt);
    const auto xv = x.to_vector<double>();
    const double tol = dt == DType::f32 ? 2e-6 : 1e-13;
    auto check = [&](const Tensor& y, double (*ref)(double)) {
      const auto yv = y.to_vector<double>();
      for (std::size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(yv[i], ref(xv[i]), tol * (1 + std::abs(ref(xv[i]))));
    };
    check(exp(x), [](double v) { return std::exp(v); });
    check(log(x), [](double v) { return std::log(v); });
    check(sqrt(x), [](double v) { return std::sqrt(v); });
    check(tanh(x - 1.5), [](double v) { return std::tanh(v - 1.5); });
    check(sigmoid(x - 1.5), [](double v) { return 1.0 / (1.0 + std::exp(-(v - 1.5))); });
    check(pow(x, 1.5), [](double v) { return std::pow(v, 1.5); });
  }
}

TEST(ElementwiseOps, SigmoidIsStableForLargeInputs) {
  Tensor x = Tensor::from_vector(std::vector<float>{-1000, 1000}, {2});
  EXPECT_EQ(sigmoid(x).to_vector<float>(), (std::vector<float>{0, 1}));
}

TEST(ElementwiseOps, BinaryGradcheckWithBroadcasting) {
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"add", [](const std::vector<Tensor>& v) { return v[0] + v[1]; }},
      {"sub", [](const std::vector<Tensor>& v) { return v[0] - v[1]; }},
      {"mul", [](const std::vector<Tensor>& v) { return v[0] * v[1]; }},
      {"div", [](const std::vector<Tensor>& v) { return v[0] / v[1]; }},
  };
  Generator gen(7);
  for (const auto& [name, fn] : ops)
    for (const auto& [sa, sb] : kBroadcastPairs) {
      SCOPED_TRACE(std::string(name) + " " + sa.str() + " " + sb.str());
      Tensor a = rand64(sa, gen);
      Tensor b = rand64(sb, gen, 0.5, 2.0);  // keep divisors away from 0
      if (std::string(name) != "div") b = rand64(sb, gen, -2.0, 2.0);
      EXPECT_GRADCHECK(fn, {a, b});
    }
}

TEST(ElementwiseOps, GradcheckWhenOnlyOneSideRequiresGrad) {
  Generator gen(8);
  Tensor a = rand64({3, 4}, gen);
  Tensor b = Tensor::uniform({4}, 0.5, 1.5, gen, DType::f64);  // constant
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return v[0] / v[1]; }, {a, b});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return v[1] / v[0]; }, {rand64({3, 4}, gen, 0.5, 2.0), b});
}

TEST(ElementwiseOps, UnaryGradcheck) {
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"neg", [](const std::vector<Tensor>& v) { return -v[0]; }},
      {"exp", [](const std::vector<Tensor>& v) { return exp(v[0]); }},
      {"log", [](const std::vector<Tensor>& v) { return log(v[0] + 2.0); }},
      {"sqrt", [](const std::vector<Tensor>& v) { return sqrt(v[0] + 2.0); }},
      {"tanh", [](const std::vector<Tensor>& v) { return tanh(v[0] * 2.0); }},
      {"sigmoid", [](const std::vector<Tensor>& v) { return sigmoid(v[0] * 3.0); }},
      {"relu", [](const std::vector<Tensor>& v) { return relu(v[0]); }},
      {"square", [](const std::vector<Tensor>& v) { return square(v[0]); }},
      {"pow", [](const std::vector<Tensor>& v) { return pow(v[0] + 2.0, 2.5); }},
      {"pow_neg", [](const std::vector<Tensor>& v) { return pow(v[0] + 2.0, -1.5); }},
      {"scalars", [](const std::vector<Tensor>& v) { return (3.0 - v[0] * 2.0) / 4.0 + 1.0; }},
      {"rdiv", [](const std::vector<Tensor>& v) { return 2.0 / (v[0] + 2.0); }},
  };
  Generator gen(9);
  for (const auto& [name, fn] : ops)
    for (const Shape& s : {Shape{5}, Shape{2, 1, 3}, Shape{}}) {
      SCOPED_TRACE(std::string(name) + " " + s.str());
      Tensor x = rand64(s, gen);
      if (std::string(name) == "relu") {
        // Keep away from the kink at 0, where the derivative is not defined.
        x = Tensor::from_vector(std::vector<double>(s.numel(), 0.0), s);
        for (std::int64_t i = 0; i < s.numel(); ++i) x.data<double>()[i] = (i % 2 ? 0.7 : -0.4) * (1 + 0.1 * i);
        x.requires_grad_();
      }
      EXPECT_GRADCHECK(fn, {x});
    }
}

TEST(ElementwiseOps, ShapeAndDtypeErrorsNameTheOpAndShapes) {
  try {
    add(Tensor::zeros({2, 3}), Tensor::zeros({4}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  }
  EXPECT_THROW(mul(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)), std::invalid_argument);
  EXPECT_THROW(tanh(Tensor::zeros({2}, DType::i64)), std::invalid_argument);
}
