// ReLU, GELU, Tanh, Sigmoid, SiLU modules: values against the formulas in double, float64
// gradchecks; tanh GELU against torch to the second derivative.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/ops_reduce.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "layer_test_util.h"
#include "nn/activation.h"

namespace {

using tg::DType;
using tg::GeluApproximate;
using tg::Tensor;

// Points away from ReLU's kink at 0, so central differences are exact there too.
Tensor sample_input() {
  return Tensor::from_vector(std::vector<double>{-3.0, -1.2, -0.4, -0.05, 0.07, 0.3, 1.1, 2.5, 4.0, -0.9, 0.6, 1.7},
                             {3, 4})
      .requires_grad_();
}

template <class M>
void check_module(const M& m, const std::function<double(double)>& ref, const char* what) {
  const Tensor x = sample_input();
  const Tensor y = m->forward(x);
  ASSERT_EQ(y.shape(), x.shape()) << what;
  const auto xs = x.to_vector<double>(), ys = y.to_vector<double>();
  for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(ys[i], ref(xs[i]), 1e-12) << what << " at x=" << xs[i];
  EXPECT_TRUE(m->named_parameters().empty()) << what;
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return m->forward(in[0]); }, std::vector<Tensor>{x});
}

TEST(Activation, ValuesAndGradchecks) {
  check_module(tg::nn::ReLU(), [](double x) { return x > 0 ? x : 0.0; }, "ReLU");
  check_module(tg::nn::Tanh(), [](double x) { return std::tanh(x); }, "Tanh");
  check_module(tg::nn::Sigmoid(), [](double x) { return 1 / (1 + std::exp(-x)); }, "Sigmoid");
  check_module(tg::nn::SiLU(), [](double x) { return x / (1 + std::exp(-x)); }, "SiLU");
  check_module(tg::nn::GELU(), [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, "GELU");
  const double k = std::sqrt(2.0 / M_PI);
  check_module(tg::nn::GELU(GeluApproximate::tanh),
               [k](double x) { return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))); }, "GELU(tanh)");
}

TEST(Activation, Printing) {
  EXPECT_EQ(tg::nn::ReLU()->str(), "ReLU()");
  EXPECT_EQ(tg::nn::GELU()->str(), "GELU(approximate='none')");
  EXPECT_EQ(tg::nn::GELU(GeluApproximate::tanh)->str(), "GELU(approximate='tanh')");
  EXPECT_EQ(tg::nn::SiLU()->str(), "SiLU()");
}

TEST(Activation, Float32InputStaysFloat32) {
  const Tensor x = Tensor::from_vector(std::vector<float>{-1.0f, 2.0f}, {2});
  EXPECT_EQ(tg::nn::GELU()->forward(x).dtype(), DType::f32);
  EXPECT_EQ(tg::nn::ReLU()->forward(x).to_vector<double>(), (std::vector<double>{0.0, 2.0}));
}

}  // namespace

namespace {
// F.gelu(x, approximate="tanh"), its derivative and its second derivative at these points, from
// torch 1.13.1 (/usr/bin/python3, python3-torch) in float64 with torch.autograd.grad(create_graph=True).
TEST(Activation, TanhGeluMatchesTorchToSecondOrder) {
  const std::vector<double> xs = {-3, -1, -0.5, 0, 0.5, 1, 3};
  const std::vector<double> y = {-0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
                                 0.34571400982514394,    0.8411919906082768,   2.996362607918227};
  const std::vector<double> dy = {-0.011584166630969648, -0.08296408384578252, 0.13263009646535764, 0.5,
                                  0.8673699035346424,    1.0829640838457826,   1.0115841666309695};
  const std::vector<double> d2y = {-0.03176765888607492, 0.24214819798377296, 0.615506895115985, 0.7978845608028654,
                                   0.615506895115985,    0.24214819798377296, -0.03176765888607492};
  const tg::nn::GELU gelu(GeluApproximate::tanh);
  const Tensor x = Tensor::from_vector(xs, {7}).requires_grad_();
  const Tensor out = gelu->forward(x);
  const Tensor g = tg::grad({tg::sum(out)}, {x}, {}, {.create_graph = true})[0];
  const Tensor gg = tg::grad({tg::sum(g)}, {x})[0];
  const auto yo = out.to_vector<double>(), go = g.to_vector<double>(), ggo = gg.to_vector<double>();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(yo[i], y[i], 1e-15) << xs[i];
    EXPECT_NEAR(go[i], dy[i], 1e-15) << xs[i];
    EXPECT_NEAR(ggo[i], d2y[i], 1e-14) << xs[i];
  }
  EXPECT_TRUE(tg::gradgradcheck([&](const std::vector<Tensor>& in) { return gelu->forward(in[0] * 2.0); },
                                {sample_input()}));
}
}  // namespace
