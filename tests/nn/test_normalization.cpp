// LayerNorm and RMSNorm: PyTorch names, shapes and initialisation; values against mean and variance
// computed by hand in double; float64 gradchecks w.r.t. input and parameters; errors; .npz round trip.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tensor.h"
#include "layer_test_util.h"
#include "nn/container.h"
#include "nn/init.h"
#include "nn/normalization.h"

namespace {

namespace fs = std::filesystem;
using tg::DType;
using tg::Generator;
using tg::Shape;
using tg::Tensor;
using tg::nn::LayerNorm;
using tg::nn::RMSNorm;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::max_abs_diff;
using tg::nn::testing::parameter_inputs;

// Reference over rows of length `n` (the flattened normalized dims) of x, in double.
std::vector<double> layer_norm_ref(const std::vector<double>& x, std::size_t n, double eps, const std::vector<double>& w,
                                   const std::vector<double>& b) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, var = 0;
    for (std::size_t i = 0; i < n; ++i) mean += x[r * n + i];
    mean /= n;
    for (std::size_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
    var /= n;  // biased
    for (std::size_t i = 0; i < n; ++i) y[r * n + i] = (x[r * n + i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
  }
  return y;
}

std::vector<double> rms_norm_ref(const std::vector<double>& x, std::size_t n, double eps, const std::vector<double>& w) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / n; ++r) {
    double ms = 0;
    for (std::size_t i = 0; i < n; ++i) ms += x[r * n + i] * x[r * n + i];
    ms /= n;
    for (std::size_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] / std::sqrt(ms + eps) * w[i];
  }
  return y;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  return tg::testing::max_abs_diff(a, b);
}

std::vector<std::string> names_and_shapes(const tg::nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, p] : m.named_parameters()) out.push_back(n + " " + p.shape().str());
  return out;
}

TEST(LayerNorm, NamesShapesInitAndPrinting) {
  LayerNorm ln(Shape{2, 3});
  EXPECT_EQ(names_and_shapes(*ln), (std::vector<std::string>{"weight [2, 3]", "bias [2, 3]"}));
  EXPECT_EQ(ln->weight.to_vector<double>(), std::vector<double>(6, 1.0));
  EXPECT_EQ(ln->bias.to_vector<double>(), std::vector<double>(6, 0.0));
  EXPECT_EQ(ln->weight.dtype(), DType::f32);
  EXPECT_EQ(ln->str(), "LayerNorm((2, 3), eps=1e-05, elementwise_affine=true)");
  LayerNorm plain(8, 1e-6, false);
  EXPECT_TRUE(plain->named_parameters().empty());
  EXPECT_EQ(plain->str(), "LayerNorm((8,), eps=1e-06, elementwise_affine=false)");
  EXPECT_THROW(LayerNorm(0), std::invalid_argument);
  EXPECT_THROW(LayerNorm(Shape{}), std::invalid_argument);
}

TEST(LayerNorm, WrongInputShapeNamesLayerAndShapes) {
  LayerNorm ln(Shape{3, 4});
  try {
    ln->forward(Tensor::zeros({2, 4, 3}));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "LayerNorm: input of shape [2, 4, 3] does not end in normalized_shape [3, 4]");
  }
  EXPECT_THROW(ln->forward(Tensor::zeros({4})), std::invalid_argument);
  EXPECT_NO_THROW(ln->forward(Tensor::zeros({3, 4})));
  RMSNorm rms(5);
  try {
    rms->forward(Tensor::zeros({2, 4}));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "RMSNorm: input of shape [2, 4] does not end in normalized_shape [5]");
  }
}

TEST(LayerNorm, ValuesMatchHandComputedMeanAndVariance) {
  Generator gen(0);
  for (const Shape& ns : {Shape{5}, Shape{3, 5}}) {
    LayerNorm ln(ns, 1e-3);
    tg::nn::init::uniform_(ln->weight, gen, 0.5, 1.5);
    tg::nn::init::uniform_(ln->bias, gen, -0.5, 0.5);
    // Rows with an offset and spread, so mean and variance both matter.
    const Tensor x = Tensor::uniform({2, 3, 5}, -2.0, 3.0, gen, DType::f64);
    const auto w = ln->weight.to_vector<double>(), b = ln->bias.to_vector<double>();
    const auto ref = layer_norm_ref(x.to_vector<double>(), ns.numel(), 1e-3, w, b);
    // float32 layer on float32 input: single-precision rounding only.
    const double err32 = max_diff(ln->forward(x.to(DType::f32)).to_vector<double>(), ref);
    EXPECT_LT(err32, 1e-5) << ns.str();
    ln->to(DType::f64);
    EXPECT_LT(max_diff(ln->forward(x).to_vector<double>(), ref), 1e-12) << ns.str();
  }
}

TEST(LayerNorm, GradcheckWrtInputAndParameters) {
  Generator gen(1);
  for (const Shape& ns : {Shape{4}, Shape{2, 4}}) {
    LayerNorm ln(ns);
    tg::nn::init::uniform_(ln->weight, gen, 0.5, 1.5);
    tg::nn::init::uniform_(ln->bias, gen, -0.5, 0.5);
    ln->to(DType::f64);
    std::vector<Tensor> inputs{tg::testing::rand64({3, 2, 4}, gen)};
    for (const Tensor& p : parameter_inputs(ln)) inputs.push_back(p);
    ASSERT_EQ(inputs.size(), 3u);
    EXPECT_GRADCHECK(
        [&](const std::vector<Tensor>& xs) {
          bind_parameters(ln, xs, 1);
          return ln->forward(xs[0]);
        },
        inputs);
  }
  LayerNorm plain(4, 1e-5, false);
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& xs) { return plain->forward(xs[0]); },
                   std::vector<Tensor>{tg::testing::rand64({2, 4}, gen)});
}

TEST(RMSNorm, NamesShapesInitAndPrinting) {
  RMSNorm rms(Shape{2, 3}, 1e-6);
  EXPECT_EQ(names_and_shapes(*rms), (std::vector<std::string>{"weight [2, 3]"}));
  EXPECT_EQ(rms->weight.to_vector<double>(), std::vector<double>(6, 1.0));
  EXPECT_EQ(rms->str(), "RMSNorm((2, 3), eps=1e-06, elementwise_affine=true)");
  RMSNorm plain(8, std::nullopt, false);
  EXPECT_TRUE(plain->named_parameters().empty());
  EXPECT_EQ(plain->str(), "RMSNorm((8,), eps=None, elementwise_affine=false)");
  EXPECT_THROW(RMSNorm(-1), std::invalid_argument);
}

TEST(RMSNorm, ValuesMatchHandComputedMeanSquare) {
  Generator gen(2);
  RMSNorm rms(Shape{3, 5}, 1e-4);
  tg::nn::init::uniform_(rms->weight, gen, 0.5, 1.5);
  const Tensor x = Tensor::uniform({2, 3, 5}, -2.0, 3.0, gen, DType::f64);
  const auto ref = rms_norm_ref(x.to_vector<double>(), 15, 1e-4, rms->weight.to_vector<double>());
  EXPECT_LT(max_diff(rms->forward(x.to(DType::f32)).to_vector<double>(), ref), 1e-5);
  rms->to(DType::f64);
  EXPECT_LT(max_diff(rms->forward(x).to_vector<double>(), ref), 1e-12);
}

TEST(RMSNorm, DefaultEpsIsTheInputDtypesMachineEpsilon) {
  // Inputs so small that mean(x²) is below eps, so the result depends on eps.
  RMSNorm rms(2);
  rms->to(DType::f64);
  const std::vector<double> tiny64{1e-9, -3e-9};
  const auto y64 = rms->forward(Tensor::from_vector(tiny64, {1, 2})).to_vector<double>();
  EXPECT_LT(max_diff(y64, rms_norm_ref(tiny64, 2, std::numeric_limits<double>::epsilon(), {1, 1})), 1e-15);
  EXPECT_GT(max_diff(y64, rms_norm_ref(tiny64, 2, std::numeric_limits<float>::epsilon(), {1, 1})), 1e-6);
  RMSNorm rms32(2);
  const std::vector<double> tiny32{1e-4, -3e-4};
  const auto y32 = rms32->forward(Tensor::from_vector(tiny32, {1, 2}).to(DType::f32)).to_vector<double>();
  const auto ref32 = rms_norm_ref(tiny32, 2, std::numeric_limits<float>::epsilon(), {1, 1});
  EXPECT_LT(max_diff(y32, ref32), 1e-6);
  EXPECT_GT(max_diff(y32, rms_norm_ref(tiny32, 2, 1e-6, {1, 1})), 1e-2);
}

TEST(RMSNorm, GradcheckWrtInputAndParameters) {
  Generator gen(3);
  RMSNorm rms(Shape{2, 4}, 1e-5);
  tg::nn::init::uniform_(rms->weight, gen, 0.5, 1.5);
  rms->to(DType::f64);
  std::vector<Tensor> inputs{tg::testing::rand64({3, 2, 4}, gen)};
  for (const Tensor& p : parameter_inputs(rms)) inputs.push_back(p);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(rms, xs, 1);
        return rms->forward(xs[0]);
      },
      inputs);
  RMSNorm plain(4, std::nullopt, false);
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& xs) { return plain->forward(xs[0]); },
                   std::vector<Tensor>{tg::testing::rand64({2, 4}, gen)});
}

TEST(LayerNorm, StateDictRoundTripThroughNpz) {
  Generator gen(4);
  auto make = [] { return tg::nn::Sequential(LayerNorm(4), RMSNorm(4, 1e-6)); };
  tg::nn::Sequential a = make(), b = make();
  EXPECT_EQ(names_and_shapes(*a), (std::vector<std::string>{"0.weight [4]", "0.bias [4]", "1.weight [4]"}));
  for (const Tensor& p : a->parameters()) tg::nn::init::uniform_(p, gen, -1, 1);
  const fs::path path = fs::temp_directory_path() / ("tg_nn_norm_" + std::to_string(::getpid()) + ".npz");
  a->save(path.string());
  b->load(path.string());
  fs::remove(path);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(max_abs_diff(a->parameters()[i], b->parameters()[i]), 0.0);
  const Tensor x = Tensor::uniform({2, 4}, -1, 1, gen);
  EXPECT_EQ(max_abs_diff(a->forward(x), b->forward(x)), 0.0);
}

}  // namespace
