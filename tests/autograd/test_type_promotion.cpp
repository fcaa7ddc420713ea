// Type promotion of the binary elementwise ops as PyTorch 1.13's, and dtype errors that name the
// dtypes and shapes. Expected values marked "torch 1.13.1" were printed by /usr/bin/python3 with
// Debian's python3-torch 1.13.1 (the expression is beside each).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/ops_compare.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "gradcheck_util.h"

using namespace tg;
using tg::testing::expect_error;
using tg::testing::rand64;

TEST(DtypeErrors, MatmulAndLinearNameDtypesAndShapes) {
  expect_error([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 4}, DType::f64)); },
               {"matmul: dtypes differ: float32 [2, 3] and float64 [3, 4]"});
  expect_error([] { matmul(Tensor::zeros({2, 3}, DType::i64), Tensor::zeros({3, 4}, DType::i64)); },
               {"matmul: needs floating tensors: int64 [2, 3] and int64 [3, 4]"});
  expect_error([] { linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}, DType::f64), Tensor::zeros({4})); },
               {"linear: dtypes differ: input float32 [2, 3], weight float64 [4, 3], bias float32 [4]"});
  expect_error([] { linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}), Tensor::zeros({4}, DType::f64)); },
               {"linear: dtypes differ", "bias float64 [4]"});
  expect_error([] { linear(Tensor::zeros({2, 3}, DType::i64), Tensor::zeros({4, 3}, DType::i64), Tensor()); },
               {"linear: needs floating tensors: input int64 [2, 3], weight int64 [4, 3], bias none"});
}

namespace {
Tensor f32(std::vector<double> v) { const auto n = static_cast<std::int64_t>(v.size()); return Tensor::from_values(v, {n}, DType::f32); }
Tensor f64(std::vector<double> v) { const auto n = static_cast<std::int64_t>(v.size()); return Tensor::from_values(v, {n}, DType::f64); }
Tensor i64(std::vector<std::int64_t> v) { const auto n = static_cast<std::int64_t>(v.size()); return Tensor::from_vector(v, {n}); }
Tensor b8(std::vector<double> v) { const auto n = static_cast<std::int64_t>(v.size()); return Tensor::from_values(v, {n}, DType::b8); }

// dtype and values (as double; NaN equals NaN) of a result.
void expect_result(const Tensor& y, DType dtype, const std::vector<double>& want) {
  EXPECT_EQ(y.dtype(), dtype) << dtype_name(y.dtype());
  const std::vector<double> got = y.to(DType::f64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << i;
    else EXPECT_EQ(got[i], want[i]) << i;
  }
}
}  // namespace

// Each expected value and dtype is torch 1.13.1's for the expression in the comment, with
// f = tensor([1.5, -2.]), d = tensor([.25, 3.], float64), i = tensor([3, -7]),
// b = tensor([True, False]), bt = tensor([True, True]).
TEST(TypePromotion, TensorTensorAsTorch) {
  const Tensor f = f32({1.5, -2}), d = f64({0.25, 3}), i = i64({3, -7}), b = b8({1, 0}), bt = b8({1, 1});
  expect_result(f + d, DType::f64, {1.75, 1.0});                    // f + d
  expect_result(d - f, DType::f64, {-1.25, 5.0});                   // d - f
  expect_result(f * i, DType::f32, {4.5, 14.0});                    // f * i
  expect_result(i + b, DType::i64, {4, -7});                        // i + b
  expect_result(b * i, DType::i64, {3, 0});                         // b * i
  expect_result(i - i64({5, 5}), DType::i64, {-2, -12});            // i - tensor([5, 5])
  expect_result(i / i64({2, 2}), DType::f32, {1.5, -3.5});          // i / tensor([2, 2])
  expect_result(b + bt, DType::b8, {1, 1});                         // b + bt
  expect_result(b * bt, DType::b8, {1, 0});                         // b * bt
  expect_result(b / bt, DType::f32, {1, 0});                        // b / bt
  // tensor([7, 1, 10]) / tensor([3, 3, 3]): float32 division, not double rounded to float
  expect_result(i64({7, 1, 10}) / i64({3, 3, 3}), DType::f32, {2.3333332538604736, 0.3333333432674408, 3.3333332538604736});
  expect_result(i64({1, 0, -1}) / i64({0, 0, 0}), DType::f32, {INFINITY, NAN, -INFINITY});
  expect_result(i64({std::int64_t(1) << 62}) * i64({4}), DType::i64, {0});  // wraps, as torch
  // pow: integer power in int64 (a negative exponent gives 0 but for bases ±1), else promoted
  expect_result(pow(i, i64({2, 3})), DType::i64, {9, -343});
  expect_result(pow(i, i64({-1, 2})), DType::i64, {0, 49});
  expect_result(pow(i64({0, 2, -1, 1, -2}), i64({-1, -1, -1, -1, -1})), DType::i64, {0, 0, -1, 1, 0});
  expect_result(pow(i64({0, 2, -1, 1, -2}), i64({-2, -2, -2, -2, -2})), DType::i64, {0, 0, 1, 1, 0});
  expect_result(pow(f, i64({2, 3})), DType::f32, {2.25, -8.0});
  expect_result(pow(i, f), DType::f32, {5.196152210235596, 0.020408162847161293});
  expect_result(maximum(i, b), DType::i64, {3, 0});
  expect_result(maximum(b, bt), DType::b8, {1, 1});
  expect_result(minimum(b, bt), DType::b8, {1, 0});
  expect_result(maximum(f, i), DType::f32, {3, -2});
  expect_result(maximum(f, d), DType::f64, {1.5, 3.0});
  expect_result(minimum(i, d), DType::f64, {0.25, -7});
  // A 0-dim tensor promotes only across categories (torch.result_type).
  expect_result(f + Tensor::scalar(2.0, DType::f64), DType::f32, {3.5, 0.0});
  expect_result(i + Tensor::scalar(2.5, DType::f64), DType::f64, {5.5, -4.5});
  expect_result(i * Tensor::scalar(2.5, DType::f32), DType::f32, {7.5, -17.5});
  expect_result(f + Tensor::scalar(3, DType::i64), DType::f32, {4.5, 1.0});
  expect_result(b + Tensor::scalar(1, DType::b8), DType::b8, {1, 1});
}

// Scalars are Python numbers: an integral double is an int (see ops_elementwise.h).
TEST(TypePromotion, TensorScalarAsTorch) {
  const Tensor i = i64({3, -7}), b = b8({1, 0});
  expect_result(i * 2.5, DType::f32, {7.5, -17.5});   // i * 2.5
  expect_result(i + 1.0, DType::i64, {4, -6});        // i + 1
  expect_result(b + 1.0, DType::i64, {2, 1});         // b + 1
  expect_result(b * 2.5, DType::f32, {2.5, 0});       // b * 2.5
  expect_result(i / 2.0, DType::f32, {1.5, -3.5});    // i / 2
  expect_result(2.0 / i, DType::f32, {0.6666666865348816, -0.2857142984867096});  // 2 / i
  expect_result(1.0 - i, DType::i64, {-2, 8});        // 1 - i
  expect_result(i - 1.5, DType::f32, {1.5, -8.5});    // i - 1.5
  expect_result(-i, DType::i64, {-3, 7});             // -i
  expect_result(i64({7, 1, 10}) / 3.0, DType::f32, {2.3333332538604736, 0.3333333432674408, 3.3333332538604736});
  expect_result(pow(i, 2.0), DType::i64, {9, 49});    // i ** 2
  expect_result(pow(i, 0.5), DType::f32, {1.7320507764816284, NAN});  // i ** 0.5
  expect_result(pow(b, 2.0), DType::i64, {1, 0});     // b ** 2
  expect_result(pow(b, 0.5), DType::f32, {1, 0});     // b ** 0.5
  // A floating tensor keeps its dtype, as before.
  expect_result(f64({0.25}) * 2.5, DType::f64, {0.625});
  expect_result(f32({0.25}) + 1.0, DType::f32, {1.25});
}

TEST(TypePromotion, RefusalsAsTorch) {
  const Tensor b = b8({1, 0}), i = i64({3, -7});
  expect_error([&] { b - b; }, {"sub", "two bool tensors"});
  expect_error([&] { f32({1, 2}) - b; }, {"sub", "a bool tensor"});
  expect_error([&] { b - f32({1, 2}); }, {"sub", "a bool tensor"});
  expect_error([&] { 1.0 - b; }, {"sub", "a bool tensor"});
  expect_error([&] { b - 1.0; }, {"sub", "a bool tensor"});
  expect_error([&] { -b; }, {"neg", "bool"});
  expect_error([&] { pow(b, b); }, {"pow", "bool"});
  expect_error([&] { pow(i, -1.0); }, {"pow", "negative integer powers"});
  // A shape error of mixed operands names both dtypes and shapes.
  expect_error([&] { i + f32({1, 2, 3}); }, {"add: shapes int64 [2] and float32 [3] cannot be broadcast together"});
  expect_error([&] { div(b, Tensor::zeros({3, 4}, DType::f64)); }, {"div: shapes bool [2] and float64 [3, 4]"});
  // Unary ops stay floating-only (their promotion to float32 is not done).
  expect_error([&] { exp(i); }, {"exp", "int64 [2]"});
}

// Each input's gradient comes back in its own dtype; values are torch 1.13.1's for
// a = tensor([1.5, -2., .75], requires_grad=True), b = tensor([.25, 3., -1.25], float64,
// requires_grad=True), y = op(a, b), y.backward(tensor([1., -.5, 2.], float64)).
TEST(TypePromotion, GradientsInEachInputsDtype) {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> op;
    std::vector<double> a, y, ga, gb;
  };
  const std::vector<Case> cases = {
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, {1.5, -2, 0.75}, {0.375, -6.0, -0.9375},
       {0.25, -1.5, -2.5}, {1.5, 1.0, 1.5}},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, {1.5, -2, 0.75}, {6.0, -0.6666666666666666, -0.6},
       {4.0, -0.1666666716337204, -1.600000023841858}, {-24.0, -0.1111111111111111, -0.96}},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, {1.5, -2, 0.75}, {1.25, -5.0, 2.0},
       {1.0, -0.5, 2.0}, {-1.0, 0.5, -2.0}},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, {1.5, -2, 0.75}, {1.5, 3.0, 0.75},
       {1.0, 0.0, 2.0}, {0.0, -0.5, 0.0}},
      // a = tensor([1.5, 2., .75]) for pow
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, {1.5, 2, 0.75},
       {1.1066819197003215, 8.0, 1.4327599090980558}, {0.18444699048995972, -6.0, -4.775866508483887},
       {0.44872089107313, -2.7725887298583984, -0.8243587194301316}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (bool swap : {false, true}) {  // f32 on the left and on the right
      Tensor a = f32(c.a).requires_grad_(), b = f64({0.25, 3, -1.25}).requires_grad_();
      if (swap && std::string(c.name) != "sub" && std::string(c.name) != "div" && std::string(c.name) != "pow") {
        const Tensor y = c.op(b, a);  // commutative: the same values and gradients
        y.backward(f64({1, -0.5, 2}));
        expect_result(y, DType::f64, c.y);
      } else if (!swap) {
        const Tensor y = c.op(a, b);
        y.backward(f64({1, -0.5, 2}));
        expect_result(y, DType::f64, c.y);
      } else {
        continue;
      }
      ASSERT_TRUE(a.grad().defined());
      EXPECT_EQ(a.grad().dtype(), DType::f32);
      EXPECT_EQ(b.grad().dtype(), DType::f64);
      const std::vector<double> ga = a.grad().to_vector<double>(), gb = b.grad().to_vector<double>();
      for (std::size_t k = 0; k < 3; ++k) {
        EXPECT_EQ(static_cast<float>(ga[k]), static_cast<float>(c.ga[k])) << k;
        // pow: torch takes log(a) in a's float32 for b's gradient, tapegrad in the promoted float64.
        const double tol = std::string(c.name) == "pow" ? 1e-7 : 1e-15;
        EXPECT_NEAR(gb[k], c.gb[k], tol * (1 + std::abs(c.gb[k]))) << k;
      }
    }
  }
  // a * tensor(2.5, float64, requires_grad=True): the result is float32, the 0-dim input's
  // gradient float64 (torch: y [3.75, -5., 1.875] float32, a.grad [2.5] * 3, s.grad 0.25).
  Tensor a = f32({1.5, -2, 0.75}).requires_grad_(), s = Tensor::scalar(2.5, DType::f64).requires_grad_();
  const Tensor y = a * s;
  sum(y).backward();
  expect_result(y, DType::f32, {3.75, -5.0, 1.875});
  expect_result(a.grad(), DType::f32, {2.5, 2.5, 2.5});
  EXPECT_EQ(s.grad().dtype(), DType::f64);
  EXPECT_EQ(s.grad().dim(), 0);
  EXPECT_EQ(s.grad().to_vector<double>()[0], 0.25);
  // An int64 operand gets no gradient; the floating one gets it in its dtype.
  Tensor c = f32({1.5, -2, 0.75}).requires_grad_();
  sum(c * i64({3, -7, 2})).backward();
  expect_result(c.grad(), DType::f32, {3, -7, 2});
}

// Float64 gradchecks of the promoted ops: the float64 input against float32, int64 and bool
// operands (constants), on either side, with broadcasting.
TEST(TypePromotion, GradcheckMixedDtypes) {
  using Op = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, Op>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
  };
  Generator gen(7);
  // Constants away from 0 (div, pow's base) and from the float64 input's values (max/min ties).
  const std::vector<Tensor> others = {
      Tensor::from_values({1.25, 2.5, 0.75, 1.75}, {4}, DType::f32),
      Tensor::from_values({2, 1, 3, 2, 1, 3}, {2, 3, 1}, DType::i64),
      Tensor::from_values({1, 1, 1}, {3, 1}, DType::b8),
      Tensor::scalar(1.5, DType::f32),
  };
  for (const auto& [name, op] : ops) {
    for (const Tensor& other : others) {
      if (std::string(name) == "sub" && other.dtype() == DType::b8) continue;  // refused, as torch
      SCOPED_TRACE(std::string(name) + " with " + std::string(dtype_name(other.dtype())) + " " + other.shape().str());
      const Tensor x = rand64({3, 4}, gen, 0.3, 0.9);  // positive: a base of pow; never equal to a constant
      EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return op(in[0] * 2.0, in[1]); }, {x, other});
      EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return op(in[1], in[0] * 2.0); }, {x, other});
    }
  }
  // Second order through the conversion: pow(float64, float32 exponent).
  const Tensor x = rand64({3, 4}, gen, 0.5, 1.5);
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& in) { return pow(in[0], in[1]) * in[0]; },
                            {x, Tensor::from_values({1.5, 2.5, 0.5, 3.0}, {4}, DType::f32)}));
}
