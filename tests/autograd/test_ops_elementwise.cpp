#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

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
        // Keep away from the kink at 0, where the derivative is not defined. Even entries are
        // positive, so the 0-d case (one entry) checks a nonzero slope rather than a flat 0.
        x = Tensor::from_vector(std::vector<double>(s.numel(), 0.0), s);
        for (std::int64_t i = 0; i < s.numel(); ++i) x.data<double>()[i] = (i % 2 ? -0.4 : 0.7) * (1 + 0.1 * i);
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
  // Mixed dtypes promote (test_type_promotion.cpp); their shape errors name the dtypes too.
  tg::testing::expect_error([] { mul(Tensor::zeros({2}), Tensor::zeros({3}, DType::f64)); },
                            {"mul: shapes float32 [2] and float64 [3] cannot be broadcast together"});
  tg::testing::expect_error([] { tanh(Tensor::zeros({2}, DType::i64)); },
                            {"tanh: expects a floating-point tensor", "int64 [2]"});
}

// ---- PyTorch's everyday elementwise ops: abs ... pow(Tensor, Tensor). Expected gradients at
// non-differentiable points were read from torch 1.13.1 (derivatives.yaml). Second derivatives
// (gradgradcheck) are in test_double_backward.cpp.
namespace {
using tg::testing::expect_error;

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  double (*ref)(double);  // independent reference in double (libm)
  double lo, hi;          // input range of the value test
  std::vector<double> kinks;  // points where the op is not differentiable (gradcheck avoids them)
};

constexpr double kSqrt1_2 = 0.70710678118654752440;

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"abs", [](const Tensor& x) { return abs(x); }, [](double v) { return std::fabs(v); }, -3, 3, {0}},
      {"sign", [](const Tensor& x) { return sign(x); }, [](double v) { return double((v > 0) - (v < 0)); }, -3, 3, {0}},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); },
       [](double v) { return std::min(std::max(v, -0.5), 0.7); }, -2, 2, {-0.5, 0.7}},
      {"clamp_max_only", [](const Tensor& x) { return clamp(x, std::nullopt, 0.3); },
       [](double v) { return std::min(v, 0.3); }, -2, 2, {0.3}},
      {"clamp_min_only", [](const Tensor& x) { return clamp(x, -0.2); }, [](double v) { return std::max(v, -0.2); },
       -2, 2, {-0.2}},
      {"clamp_min", [](const Tensor& x) { return clamp_min(x, 0.1); }, [](double v) { return std::max(v, 0.1); }, -2, 2, {0.1}},
      {"clamp_max", [](const Tensor& x) { return clamp_max(x, -0.1); }, [](double v) { return std::min(v, -0.1); }, -2, 2, {-0.1}},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double v) { return std::sin(v); }, -10, 10, {}},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double v) { return std::cos(v); }, -10, 10, {}},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double v) { return std::erf(v); }, -4, 4, {}},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double v) { return std::log1p(v); }, -0.9, 5, {}},
      {"expm1", [](const Tensor& x) { return expm1(x); }, [](double v) { return std::expm1(v); }, -5, 5, {}},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, 0.1, 5, {}},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double v) { return 1 / v; }, 0.2, 5, {}},
      {"reciprocal_neg", [](const Tensor& x) { return reciprocal(x); }, [](double v) { return 1 / v; }, -5, -0.2, {}},
      {"gelu", [](const Tensor& x) { return gelu(x); }, [](double v) { return 0.5 * v * (1 + std::erf(v * kSqrt1_2)); },
       -8, 8, {}},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApproximate::tanh); },
       [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }, -8, 8, {}},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double v) { return v / (1 + std::exp(-v)); }, -20, 20, {}},
      {"softplus", [](const Tensor& x) { return softplus(x); },
       [](double v) { return v > 20 ? v : std::log1p(std::exp(v)); }, -30, 30, {20}},
      {"softplus_beta", [](const Tensor& x) { return softplus(x, 2.0, 5.0); },
       [](double v) { return 2 * v > 5 ? v : std::log1p(std::exp(2 * v)) / 2; }, -6, 6, {2.5}},
      {"softplus_neg_beta", [](const Tensor& x) { return softplus(x, -1.5, 3.0); },
       [](double v) { return -1.5 * v > 3 ? v : std::log1p(std::exp(-1.5 * v)) / -1.5; }, -6, 6, {-2}},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }, [](double v) { return v > 0 ? v : 0.01 * v; }, -3, 3, {0}},
      {"leaky_relu_0.2", [](const Tensor& x) { return leaky_relu(x, 0.2); }, [](double v) { return v > 0 ? v : 0.2 * v; },
       -3, 3, {0}},
      {"elu", [](const Tensor& x) { return elu(x); }, [](double v) { return v > 0 ? v : std::exp(v) - 1; }, -5, 3, {}},
      {"elu_2", [](const Tensor& x) { return elu(x, 2.0); }, [](double v) { return v > 0 ? v : 2 * (std::exp(v) - 1); },
       -5, 3, {0}},
  };
  return cases;
}

// Uniform in [lo, hi] (n = 37 crosses SIMD tails), plus the kinks themselves and 0 where in range.
std::vector<double> value_inputs(const UnaryCase& c, Generator& gen) {
  std::vector<double> v = Tensor::uniform({37}, c.lo, c.hi, gen, DType::f64).to_vector<double>();
  for (double k : c.kinks) v.push_back(k);
  if (c.lo <= 0 && 0 <= c.hi) v.push_back(0.0);
  return v;
}

// Float64 inputs that require grad, at least 0.1 away from every kink.
Tensor kink_free(const Shape& s, Generator& gen, const UnaryCase& c) {
  Tensor x = Tensor::uniform(s, std::max(c.lo, -3.0), std::min(c.hi, 3.0), gen, DType::f64);
  for (std::int64_t i = 0; i < x.numel(); ++i)
    for (double k : c.kinks)
      if (std::abs(x.data<double>()[i] - k) < 0.1) x.data<double>()[i] = k + (x.data<double>()[i] < k ? -0.2 : 0.2);
  return x.requires_grad_();
}

// Values and gradient of fn at the given points (float64, gradient of sum(fn(x))).
std::pair<std::vector<double>, std::vector<double>> value_and_grad(const std::function<Tensor(const Tensor&)>& fn,
                                                                   const std::vector<double>& points) {
  Tensor x = Tensor::from_vector(points, {static_cast<std::int64_t>(points.size())}).requires_grad_();
  Tensor y = fn(x);
  y.backward(Tensor::ones(y.shape(), DType::f64));
  return {y.to_vector<double>(), x.grad().to_vector<double>()};
}

// Expects equal doubles, NaN equal to NaN and infinities of the same sign.
void expect_same(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "] = " << got[i];
    else if (std::isinf(want[i]))
      EXPECT_EQ(got[i], want[i]) << what << " [" << i << "]";
    else
      EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << what << " [" << i << "]";
  }
}

// NumPy broadcast of a (sa) and b (sb) through f, in double: the reference for the binary ops.
std::vector<double> broadcast_ref(const Shape& sa, const std::vector<double>& a, const Shape& sb,
                                  const std::vector<double>& b, double (*f)(double, double)) {
  const int n = std::max(sa.size(), sb.size());
  std::vector<std::int64_t> out(n);
  for (int i = 0; i < n; ++i) {
    const int ia = i - (n - sa.size()), ib = i - (n - sb.size());
    out[i] = std::max(ia >= 0 ? sa[ia] : 1, ib >= 0 ? sb[ib] : 1);
  }
  std::int64_t total = 1;
  for (auto d : out) total *= d;
  std::vector<double> y(total);
  for (std::int64_t k = 0; k < total; ++k) {
    std::int64_t rem = k, ka = 0, kb = 0, stride_a = 1, stride_b = 1;
    for (int i = n - 1; i >= 0; --i) {
      const std::int64_t idx = rem % out[i];
      rem /= out[i];
      const int ia = i - (n - sa.size()), ib = i - (n - sb.size());
      if (ia >= 0) {
        ka += (sa[ia] == 1 ? 0 : idx) * stride_a;
        stride_a *= sa[ia];
      }
      if (ib >= 0) {
        kb += (sb[ib] == 1 ? 0 : idx) * stride_b;
        stride_b *= sb[ib];
      }
    }
    y[k] = f(a[ka], b[kb]);
  }
  return y;
}

double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double nan_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
double libm_pow(double a, double b) { return std::pow(a, b); }
}  // namespace

TEST(PyTorchElementwise, UnaryValuesAgainstLibmInBothDtypes) {
  Generator gen(21);
  for (const UnaryCase& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<double> in = value_inputs(c, gen);
    const Shape s{static_cast<std::int64_t>(in.size())};
    // float64 against libm.
    const std::vector<double> y64 = c.op(Tensor::from_values(in, s, DType::f64)).to_vector<double>();
    for (std::size_t i = 0; i < in.size(); ++i)
      EXPECT_NEAR(y64[i], c.ref(in[i]), 1e-13 * (1 + std::abs(c.ref(in[i])))) << "x = " << in[i];
    // float32 against libm on the float-rounded inputs, and against the float64 op on the same inputs.
    const Tensor x32 = Tensor::from_values(in, s, DType::f32);
    const std::vector<double> in32 = x32.to_vector<double>();
    const std::vector<double> y32 = c.op(x32).to_vector<double>();
    const std::vector<double> y64_same = c.op(x32.to(DType::f64)).to_vector<double>();
    for (std::size_t i = 0; i < in.size(); ++i) {
      EXPECT_NEAR(y32[i], c.ref(in32[i]), 2e-6 * (1 + std::abs(c.ref(in32[i])))) << "x = " << in32[i];
      EXPECT_NEAR(y32[i], y64_same[i], 2e-6 * (1 + std::abs(y64_same[i]))) << "x = " << in32[i];
    }
  }
}

TEST(PyTorchElementwise, UnaryGradcheckAwayFromKinks) {
  Generator gen(22);
  for (const UnaryCase& c : unary_cases())
    for (const Shape& s : {Shape{5}, Shape{2, 1, 3}, Shape{}}) {
      SCOPED_TRACE(std::string(c.name) + " " + s.str());
      EXPECT_GRADCHECK([&c](const std::vector<Tensor>& v) { return c.op(v[0]); }, {kink_free(s, gen, c)});
    }
}

TEST(PyTorchElementwise, BinaryValuesWithBroadcasting) {
  Generator gen(23);
  for (const auto& [sa, sb] : kBroadcastPairs)
    for (DType dt : {DType::f32, DType::f64}) {
      SCOPED_TRACE(sa.str() + " " + sb.str() + " " + std::string(dtype_name(dt)));
      const Tensor a = Tensor::uniform(sa, 0.1, 3.0, gen, dt), b = Tensor::uniform(sb, -2.0, 2.0, gen, dt);
      const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
      const double tol = dt == DType::f32 ? 2e-6 : 1e-14;
      const std::pair<Tensor, double (*)(double, double)> ops[] = {
          {maximum(a, b), nan_max}, {minimum(a, b), nan_min}, {pow(a, b), libm_pow}};
      for (const auto& [y, f] : ops) {
        const std::vector<double> want = broadcast_ref(sa, av, sb, bv, f), got = y.to_vector<double>();
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i])));
      }
    }
  // pow's edge values are libm's: negative bases with integral exponents, 0^0 = 1, 0^-1 = inf.
  const std::vector<double> x = {-2, -8, -2, 0, 0, -0.0, 2, 4}, y = {3, 1.0 / 3, 2, 0, -1, -1, -1, 0.5};
  for (DType dt : {DType::f32, DType::f64}) {
    const std::vector<double> got = pow(Tensor::from_values(x, {8}, dt), Tensor::from_values(y, {8}, dt)).to_vector<double>();
    expect_same(got, {-8, NAN, 4, 1, INFINITY, -INFINITY, 0.5, 2}, "pow edges");
  }
  // NaN propagates through maximum and minimum from either side, as torch.maximum.
  const Tensor p = Tensor::from_values({NAN, 1, 2}, {3}, DType::f32), q = Tensor::from_values({1, NAN, 1}, {3}, DType::f32);
  expect_same(maximum(p, q).to_vector<double>(), {NAN, NAN, 2}, "maximum NaN");
  expect_same(minimum(p, q).to_vector<double>(), {NAN, NAN, 1}, "minimum NaN");
}

TEST(PyTorchElementwise, BinaryGradcheckWithBroadcasting) {
  Generator gen(24);
  for (const auto& [sa, sb] : kBroadcastPairs) {
    SCOPED_TRACE(sa.str() + " " + sb.str());
    // Continuous random inputs: ties between a and b (the kink) have probability 0.
    EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return maximum(v[0], v[1]) * 2.0; }, {rand64(sa, gen), rand64(sb, gen)});
    EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return minimum(v[0] * 3.0, v[1]); }, {rand64(sa, gen), rand64(sb, gen)});
    EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return pow(v[0], v[1]); }, {rand64(sa, gen, 0.3, 2.0), rand64(sb, gen, -2.0, 2.0)});
  }
  // Only one side requires grad.
  const Tensor base = Tensor::uniform({3, 4}, 0.5, 2.0, gen, DType::f64), expo = Tensor::uniform({4}, -1.5, 1.5, gen, DType::f64);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return pow(v[0], v[1]); }, {rand64({3, 4}, gen, 0.3, 2.0), expo});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return pow(v[1], v[0]); }, {rand64({4}, gen), base});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return maximum(v[0], v[1]); }, {rand64({3, 4}, gen), expo});
  // A negative base with integral exponents (the gradient w.r.t. the base only: log(x) is NaN there).
  const Tensor ints = Tensor::from_values({2, 3, -1, 0}, {4}, DType::f64);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return pow(v[0], v[1]); }, {rand64({3, 4}, gen, -2.0, -0.3), ints});
}

TEST(PyTorchElementwise, GradientsAtNonDifferentiablePointsAsPyTorch) {
  // Every expected gradient below is what torch 1.13.1 returns for sum(op(x)).backward().
  auto check = [](const char* what, const std::function<Tensor(const Tensor&)>& fn, const std::vector<double>& x,
                  const std::vector<double>& y, const std::vector<double>& g) {
    const auto [got_y, got_g] = value_and_grad(fn, x);
    expect_same(got_y, y, what);
    expect_same(got_g, g, what);
  };
  check("abs", [](const Tensor& x) { return abs(x); }, {-1, 0, -0.0, 2, NAN}, {1, 0, 0, 2, NAN}, {-1, 0, 0, 1, 0});
  check("sign", [](const Tensor& x) { return sign(x); }, {-1, 0, -0.0, 2, NAN, -INFINITY}, {-1, 0, 0, 1, 0, -1}, {0, 0, 0, 0, 0, 0});
  check("clamp", [](const Tensor& x) { return clamp(x, -1.0, 1.0); }, {-2, -1, 0, 1, 2, NAN}, {-1, -1, 0, 1, 1, NAN},
        {0, 1, 1, 1, 0, 0});
  check("clamp min > max", [](const Tensor& x) { return clamp(x, 1.0, -1.0); }, {-2, 0, 1, 2}, {-1, -1, -1, -1}, {0, 0, 0, 0});
  check("clamp_min", [](const Tensor& x) { return clamp_min(x, 0.0); }, {-1, 0, 1, NAN}, {0, 0, 1, NAN}, {0, 1, 1, 0});
  check("clamp_max", [](const Tensor& x) { return clamp_max(x, 0.0); }, {-1, 0, 1, NAN}, {-1, 0, 0, NAN}, {1, 1, 0, 0});
  check("clamp NaN bound", [](const Tensor& x) { return clamp(x, NAN, 1.0); }, {-2, 0, 2}, {NAN, NAN, NAN}, {0, 0, 0});
  // relu keeps NaN (and -0) and passes the gradient at NaN, as torch (threshold_backward: x <= 0 -> 0).
  check("relu", [](const Tensor& x) { return relu(x); }, {0, -0.0, NAN, -INFINITY, 1}, {0, 0, NAN, 0, 1}, {0, 0, 1, 0, 1});
  check("leaky_relu", [](const Tensor& x) { return leaky_relu(x); }, {-1, 0, 1}, {-0.01, 0, 1}, {0.01, 0.01, 1});
  check("elu", [](const Tensor& x) { return elu(x, 2.0); }, {-1, 0, 1}, {2 * (std::exp(-1.0) - 1), 0, 1},
        {2 * std::exp(-1.0), 2, 1});
  // softplus: the linear region starts strictly above the threshold (beta x > threshold).
  check("softplus", [](const Tensor& x) { return softplus(x, 2.0, 20.0); }, {10, 10.5, 1000, -1000},
        {std::log1p(std::exp(20.0)) / 2, 10.5, 1000, 0}, {1 / (1 + std::exp(-20.0)), 1, 1, 0});
  check("gelu at 0", [](const Tensor& x) { return gelu(x); }, {0}, {0}, {0.5});
  check("gelu_tanh at 0", [](const Tensor& x) { return gelu(x, GeluApproximate::tanh); }, {0}, {0}, {0.5});
  check("silu", [](const Tensor& x) { return silu(x); }, {-800, 0, 800}, {0, 0, 800}, {0, 0.5, 1});
  check("rsqrt at 0", [](const Tensor& x) { return rsqrt(x); }, {0, -1}, {INFINITY, NAN}, {-INFINITY, NAN});
  // pow with a scalar exponent at 0, -0 and a negative base: 0^0 = 1 with a zero gradient, 0^-1 = inf,
  // and the signed zeros and infinities of PyTorch's sqrt / reciprocal forms of 0.5 and -1.
  const std::vector<double> bases = {0, -0.0, -2, 2};
  auto pow_by = [](double p) { return [p](const Tensor& x) { return pow(x, p); }; };
  check("pow 0", pow_by(0), bases, {1, 1, 1, 1}, {0, 0, 0, 0});
  check("pow 1", pow_by(1), bases, {0, 0, -2, 2}, {1, 1, 1, 1});
  check("pow 0.5", pow_by(0.5), bases, {0, 0, NAN, std::sqrt(2.0)}, {INFINITY, -INFINITY, NAN, 0.5 / std::sqrt(2.0)});
  check("pow -1", pow_by(-1), bases, {INFINITY, -INFINITY, -0.5, 0.5}, {-INFINITY, -INFINITY, -0.25, -0.25});
  check("pow 3", pow_by(3), bases, {0, 0, -8, 8}, {0, 0, 12, 12});
  check("pow -2", pow_by(-2), bases, {INFINITY, INFINITY, 0.25, 0.25}, {-INFINITY, INFINITY, 0.25, -0.25});
  check("pow 1.5", pow_by(1.5), bases, {0, 0, NAN, std::pow(2.0, 1.5)}, {0, 0, NAN, 1.5 * std::sqrt(2.0)});
  // Division by a scalar 0 is IEEE's, as torch.div.
  check("div by 0", [](const Tensor& x) { return x / 0.0; }, {1, -1, 0}, {INFINITY, -INFINITY, NAN}, {INFINITY, INFINITY, INFINITY});
  check("div by -0", [](const Tensor& x) { return div(x, -0.0); }, {1, -1, 0}, {-INFINITY, INFINITY, NAN},
        {-INFINITY, -INFINITY, -INFINITY});
  check("reciprocal at 0", [](const Tensor& x) { return reciprocal(x); }, {0, -0.0}, {INFINITY, -INFINITY}, {-INFINITY, -INFINITY});
  check("log1p at -1", [](const Tensor& x) { return log1p(x); }, {-1, -2}, {-INFINITY, NAN}, {INFINITY, -1});
  check("erf at +-inf", [](const Tensor& x) { return erf(x); }, {-INFINITY, 0, INFINITY}, {-1, 0, 1}, {0, 2 / std::sqrt(M_PI), 0});

  // maximum / minimum: ties split the gradient evenly; a NaN gives both inputs all of it.
  auto check2 = [](const char* what, Tensor (*op)(const Tensor&, const Tensor&), const std::vector<double>& a,
                   const std::vector<double>& b, const std::vector<double>& ga, const std::vector<double>& gb) {
    Tensor ta = Tensor::from_vector(a, {static_cast<std::int64_t>(a.size())}).requires_grad_();
    Tensor tb = Tensor::from_vector(b, {static_cast<std::int64_t>(b.size())}).requires_grad_();
    Tensor y = op(ta, tb);
    y.backward(Tensor::ones(y.shape(), DType::f64));
    expect_same(ta.grad().to_vector<double>(), ga, what);
    expect_same(tb.grad().to_vector<double>(), gb, what);
  };
  check2("maximum", maximum, {1, 2, 3, NAN, 1}, {2, 2, 1, 1, NAN}, {0, 0.5, 1, 1, 1}, {1, 0.5, 0, 1, 1});
  check2("minimum", minimum, {1, 2, 3, NAN, 1}, {2, 2, 1, 1, NAN}, {1, 0.5, 0, 1, 1}, {0, 0.5, 1, 1, 1});
  // pow at x == 0: d/dx is 0 where y == 0; d/dy is 0 where y >= 0 and -inf where y < 0; NaN for x < 0.
  check2("pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, {0, 0, 0, -2, 2, 0}, {0, 2, -1, 2, 0, 0.5},
         {0, 0, -INFINITY, -4, 0, INFINITY}, {0, 0, -INFINITY, NAN, std::log(2.0), 0});
  // A tie through broadcasting: a (1) against b (3) = [2, 2, 1] collects 0.5 + 0.5 + 1.
  Tensor a = Tensor::from_vector(std::vector<double>{2}, {1}).requires_grad_();
  Tensor b = Tensor::from_vector(std::vector<double>{2, 2, 1}, {3}).requires_grad_();
  maximum(a, b).backward(Tensor::ones({3}, DType::f64));
  expect_same(a.grad().to_vector<double>(), {2}, "maximum broadcast a");
  expect_same(b.grad().to_vector<double>(), {0.5, 0.5, 0}, "maximum broadcast b");
}

TEST(PyTorchElementwise, ExtremeInputsStayFinite) {
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = Tensor::from_values({-1000, -100, 100, 1000}, {4}, dt);
    expect_same(softplus(x).to_vector<double>(), {0, std::log1p(std::exp(-100.0)), 100, 1000}, "softplus");
    // Above float32's exp overflow with a large threshold: PyTorch's log1p(exp(x)) gives inf here.
    expect_same(softplus(x, 1.0, 1e4).to_vector<double>(), {0, std::log1p(std::exp(-100.0)), 100, 1000}, "softplus threshold");
    const std::vector<double> s = silu(x).to_vector<double>(), e = elu(x).to_vector<double>();
    EXPECT_EQ(s[0], 0.0);
    EXPECT_EQ(s[3], 1000.0);
    EXPECT_EQ(e[0], -1.0);
    // gelu(-10) is tiny and negative (x Phi(x)), not a cancelled 1 + erf.
    const double g = gelu(Tensor::from_values({-10}, {1}, dt)).item();
    EXPECT_LT(g, 0.0);
    EXPECT_GT(g, -1e-20);
  }
}

TEST(PyTorchElementwise, SameResultForAnyThreadCount) {
  Generator gen(25);
  const Tensor x = Tensor::uniform({70001}, -4, 4, gen, DType::f32), y = Tensor::uniform({70001}, 0.5, 2, gen, DType::f32);
  auto run = [&](int threads) {
    set_num_threads(threads);
    std::vector<std::vector<float>> out;
    for (const UnaryCase& c : unary_cases()) out.push_back(c.op(x).to_vector<float>());
    out.push_back(pow(y, x).to_vector<float>());
    out.push_back(maximum(x, y).to_vector<float>());
    return out;
  };
  const auto one = run(1), two = run(2);
  set_num_threads(0);
  for (std::size_t i = 0; i < one.size(); ++i)  // bitwise, NaNs included
    EXPECT_EQ(std::memcmp(one[i].data(), two[i].data(), one[i].size() * sizeof(float)), 0) << "op " << i;
}

TEST(PyTorchElementwise, ErrorsNameTheOpDtypesAndShapes) {
  const Tensor f32 = Tensor::zeros({2}), f64 = Tensor::zeros({3}, DType::f64), i64 = Tensor::zeros({2, 2}, DType::i64);
  expect_error([&] { maximum(f32, f64); }, {"maximum: shapes float32 [2] and float64 [3]"});
  expect_error([&] { pow(f32, f64); }, {"pow: shapes float32 [2] and float64 [3]"});
  expect_error([&] { minimum(Tensor::zeros({2, 3}), Tensor::zeros({4})); }, {"minimum", "[2, 3]", "[4]"});
  expect_error([&] { pow(Tensor::zeros({2, 3}), Tensor::zeros({4})); }, {"pow", "[2, 3]", "[4]"});
  expect_error([&] { clamp(f32); }, {"clamp", "min", "max"});
  expect_error([&] { softplus(f32, 0.0); }, {"softplus", "beta"});
  const std::vector<std::pair<const char*, std::function<void()>>> int_ops = {
      {"abs", [&] { abs(i64); }},          {"sign", [&] { sign(i64); }},      {"clamp", [&] { clamp(i64, 0.0, 1.0); }},
      {"clamp_min", [&] { clamp_min(i64, 0.0); }}, {"clamp_max", [&] { clamp_max(i64, 0.0); }},
      {"sin", [&] { sin(i64); }},          {"cos", [&] { cos(i64); }},        {"erf", [&] { erf(i64); }},
      {"log1p", [&] { log1p(i64); }},      {"expm1", [&] { expm1(i64); }},    {"rsqrt", [&] { rsqrt(i64); }},
      {"reciprocal", [&] { reciprocal(i64); }}, {"gelu", [&] { gelu(i64); }}, {"silu", [&] { silu(i64); }},
      {"softplus", [&] { softplus(i64); }}, {"leaky_relu", [&] { leaky_relu(i64); }}, {"elu", [&] { elu(i64); }},
  };
  for (const auto& [name, fn] : int_ops) {
    SCOPED_TRACE(name);
    expect_error(fn, {name, "int64", "[2, 2]"});
  }
}
