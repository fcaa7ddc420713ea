// layer_norm and rms_norm: the fused ops against their composites (values and every gradient,
// float32 and float64, with and without weight and bias, rows split in several blocks), float64
// gradchecks (weight and bias broadcast over several leading dims), thread independence, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/ops_norm.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tensor.h"
#include "error_of.h"
#include "gradcheck_util.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Shape;
using tg::Tensor;
using tg::testing::max_abs_diff;
using tg::testing::rand64;

struct Case {
  Shape x, ns;
  bool weight, bias;
};

// Values and gradients of sum(y * r) w.r.t. x, weight, bias (the undefined ones skipped).
template <class Fn>
std::vector<Tensor> value_and_grads(Fn fn, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r) {
  for (Tensor t : {x, w, b})
    if (t.defined()) t.zero_grad();
  const Tensor y = fn(x, w, b);
  tg::sum(y * r).backward();
  std::vector<Tensor> out = {y.detach(), x.grad()};
  if (w.defined()) out.push_back(w.grad());
  if (b.defined()) out.push_back(b.grad());
  return out;
}

}  // namespace

TEST(LayerNormOp, EqualsTheCompositeInValueAndGradient) {
  // n = 1, a scalar tail (13), whole SIMD batches (16), two normalized dims; many rows so that the
  // backward sums the weight gradient over several blocks, in parallel.
  const std::vector<Case> cases = {{{3, 1}, {1}, true, true},       {{4, 13}, {13}, true, false},
                                   {{2, 3, 16}, {16}, false, true}, {{2, 3, 5}, {3, 5}, true, true},
                                   {{7, 4}, {4}, false, false},     {{64, 30, 67}, {67}, true, true}};
  for (const DType dtype : {DType::f64, DType::f32}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(tg::dtype_name(dtype)) + " x " + c.x.str() + " ns " + c.ns.str());
      const double tol = dtype == DType::f64 ? 1e-11 : 2e-5;
      Generator gen(21);
      const Tensor x = Tensor::normal(c.x, 0.5, 2, gen, dtype).requires_grad_();
      const Tensor w = c.weight ? Tensor::normal(c.ns, 1, 0.5, gen, dtype).requires_grad_() : Tensor();
      const Tensor b = c.bias ? Tensor::normal(c.ns, 0, 0.5, gen, dtype).requires_grad_() : Tensor();
      const Tensor r = Tensor::normal(c.x, 0, 1, gen, dtype);
      const Shape ns = c.ns;
      const auto a = value_and_grads(
          [&](const Tensor& x, const Tensor& w, const Tensor& b) { return tg::layer_norm(x, ns, w, b, 1e-3); }, x, w, b, r);
      const auto e = value_and_grads(
          [&](const Tensor& x, const Tensor& w, const Tensor& b) { return tg::layer_norm_composed(x, ns, w, b, 1e-3); },
          x, w, b, r);
      ASSERT_EQ(a.size(), e.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        // weight and bias gradients are sums over rows: their rounding grows with sqrt(rows)
        const double scale = std::max(1.0, std::sqrt(static_cast<double>(c.x.numel()) / c.ns.numel()) * (i >= 2));
        EXPECT_LT(max_abs_diff(a[i], e[i]), tol * scale) << "tensor " << i;
      }
    }
  }
}

TEST(RmsNormOp, EqualsTheCompositeInValueAndGradient) {
  const std::vector<Case> cases = {{{3, 1}, {1}, true, false},
                                   {{4, 13}, {13}, true, false},
                                   {{2, 3, 16}, {16}, false, false},
                                   {{2, 3, 5}, {3, 5}, true, false},
                                   {{64, 30, 67}, {67}, true, false}};
  for (const DType dtype : {DType::f64, DType::f32}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(tg::dtype_name(dtype)) + " x " + c.x.str() + " ns " + c.ns.str());
      const double tol = dtype == DType::f64 ? 1e-11 : 2e-5;
      Generator gen(22);
      const Tensor x = Tensor::normal(c.x, 0.5, 2, gen, dtype).requires_grad_();
      const Tensor w = c.weight ? Tensor::normal(c.ns, 1, 0.5, gen, dtype).requires_grad_() : Tensor();
      const Tensor r = Tensor::normal(c.x, 0, 1, gen, dtype);
      const Shape ns = c.ns;
      for (const std::optional<double> eps : {std::optional<double>(), std::optional<double>(1e-2)}) {
        const auto a = value_and_grads(
            [&](const Tensor& x, const Tensor& w, const Tensor&) { return tg::rms_norm(x, ns, w, eps); }, x, w, Tensor(), r);
        const auto e = value_and_grads(
            [&](const Tensor& x, const Tensor& w, const Tensor&) { return tg::rms_norm_composed(x, ns, w, eps); }, x, w,
            Tensor(), r);
        ASSERT_EQ(a.size(), e.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
          // weight and bias gradients are sums over rows: their rounding grows with sqrt(rows)
        const double scale = std::max(1.0, std::sqrt(static_cast<double>(c.x.numel()) / c.ns.numel()) * (i >= 2));
          EXPECT_LT(max_abs_diff(a[i], e[i]), tol * scale) << "tensor " << i;
        }
      }
    }
  }
}

TEST(LayerNormOp, Gradcheck) {
  Generator gen(23);
  // weight and bias broadcast over two leading dims (their gradients sum over 6 rows).
  const Tensor x = rand64({2, 3, 5}, gen), w = rand64({5}, gen, 0.5, 1.5), b = rand64({5}, gen);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::layer_norm(in[0], {5}, in[1], in[2], 1e-5); },
                   {x, w, b});
  const Tensor w2 = rand64({3, 5}, gen, 0.5, 1.5), b2 = rand64({3, 5}, gen);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::layer_norm(in[0], Shape{3, 5}, in[1], in[2]); },
                   {x, w2, b2});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::layer_norm(in[0], {5}); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::layer_norm(in[0], {5}, Tensor(), in[1]); }, {x, b});
  const Tensor x13 = rand64({3, 13}, gen), w13 = rand64({13}, gen);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::layer_norm(in[0], {13}, in[1]); }, {x13, w13});
}

TEST(RmsNormOp, Gradcheck) {
  Generator gen(24);
  const Tensor x = rand64({2, 3, 5}, gen), w = rand64({5}, gen, 0.5, 1.5);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::rms_norm(in[0], {5}, in[1], 1e-5); }, {x, w});
  const Tensor w2 = rand64({3, 5}, gen, 0.5, 1.5);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::rms_norm(in[0], Shape{3, 5}, in[1]); }, {x, w2});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::rms_norm(in[0], {5}); }, {x});
  const Tensor x13 = rand64({3, 13}, gen), w13 = rand64({13}, gen);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::rms_norm(in[0], {13}, in[1]); }, {x13, w13});
}

// The composites the fused ops are compared with are public ops too.
TEST(NormComposites, Gradcheck) {
  Generator gen(26);
  const Tensor x = rand64({2, 3, 5}, gen), w = rand64({3, 5}, gen, 0.5, 1.5), b = rand64({3, 5}, gen);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::layer_norm_composed(in[0], Shape{3, 5}, in[1], in[2]); },
                   {x, w, b});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::rms_norm_composed(in[0], {5}, in[1], 1e-5); },
                   {x, rand64({5}, gen, 0.5, 1.5)});
}

TEST(LayerNormOp, SameBitsWithOneAndTwoThreads) {
  Generator gen(25);
  const Tensor x = Tensor::normal({256, 512}, 0, 1, gen).requires_grad_();
  const Tensor w = Tensor::normal({512}, 1, 0.1, gen).requires_grad_(), b = Tensor::normal({512}, 0, 0.1, gen).requires_grad_();
  const Tensor r = Tensor::normal({256, 512}, 0, 1, gen);
  auto run = [&](int threads) {
    tg::set_num_threads(threads);
    auto out = value_and_grads(
        [](const Tensor& x, const Tensor& w, const Tensor& b) { return tg::layer_norm(x, {512}, w, b); }, x, w, b, r);
    tg::set_num_threads(0);
    return out;
  };
  const auto one = run(1), two = run(2);
  for (std::size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(one[i].to_vector<float>(), two[i].to_vector<float>()) << "tensor " << i;
}

TEST(LayerNormOp, ErrorsNameTheOpAndTheShapes) {
  using tg::testing::expect_error;
  const Tensor x = Tensor::zeros({2, 3, 4});
  expect_error([&] { tg::layer_norm(x, {3}); }, {"layer_norm", "[2, 3, 4]", "[3]"});
  expect_error([&] { tg::layer_norm(x, {4}, Tensor::ones({3})); }, {"layer_norm", "weight", "[3]", "[4]"});
  expect_error([&] { tg::layer_norm(x, {4}, Tensor(), Tensor::ones({1, 4})); }, {"layer_norm", "bias", "[1, 4]"});
  // Dtypes: one for input, weight and bias, no promotion (torch refuses a float64 weight with a
  // float32 input too); the message names each given operand's dtype and shape, as linear's.
  using tg::testing::error_of;
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::layer_norm(x, {4}, Tensor::ones({4}, DType::f64)); }),
            "layer_norm: dtypes differ: input float32 [2, 3, 4], weight float64 [4]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::layer_norm(x, {4}, Tensor::ones({4}), Tensor::zeros({4}, DType::f64)); }),
            "layer_norm: dtypes differ: input float32 [2, 3, 4], weight float32 [4], bias float64 [4]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::layer_norm(x, {4}, Tensor(), Tensor::zeros({4}, DType::i64)); }),
            "layer_norm: dtypes differ: input float32 [2, 3, 4], bias int64 [4]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::rms_norm(x.to(DType::f64), {4}, Tensor::ones({4})); }),
            "rms_norm: dtypes differ: input float64 [2, 3, 4], weight float32 [4]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::layer_norm_composed(x, {4}, Tensor::ones({4}, DType::f64)); }),
            "layer_norm: dtypes differ: input float32 [2, 3, 4], weight float64 [4]");
  expect_error([&] { tg::layer_norm(Tensor::zeros({2, 4}, DType::i64), {4}); }, {"layer_norm", "int64", "[2, 4]"});
  expect_error([&] { tg::layer_norm(x, Shape{}); }, {"layer_norm", "normalized_shape"});
  expect_error([&] { tg::rms_norm(x, Shape{5, 4}); }, {"rms_norm", "[2, 3, 4]", "[5, 4]"});
  expect_error([&] { tg::rms_norm_composed(x, {4}, Tensor::ones({2})); }, {"rms_norm", "weight", "[2]"});
}

TEST(LayerNormOp, GradientsOfTheParametersAloneAndOfXAlone) {
  Generator gen(26);
  for (const bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "rms_norm" : "layer_norm");
    const Tensor x = Tensor::normal({6, 9}, 0, 1, gen, DType::f64);  // no gradient
    const Tensor w = Tensor::normal({9}, 1, 0.3, gen, DType::f64).requires_grad_();
    const Tensor r = Tensor::normal({6, 9}, 0, 1, gen, DType::f64);
    auto grad_w = [&](bool fused) {
      Tensor(w).zero_grad();
      const Tensor y = rms ? (fused ? tg::rms_norm(x, {9}, w) : tg::rms_norm_composed(x, {9}, w))
                           : (fused ? tg::layer_norm(x, {9}, w) : tg::layer_norm_composed(x, {9}, w));
      tg::sum(y * r).backward();
      return w.grad();
    };
    EXPECT_LT(max_abs_diff(grad_w(true), grad_w(false)), 1e-12);
    const Tensor xg = x.detach().clone().requires_grad_(), wc = w.detach();  // weight without gradient
    auto grad_x = [&](bool fused) {
      Tensor(xg).zero_grad();
      const Tensor y = rms ? (fused ? tg::rms_norm(xg, {9}, wc) : tg::rms_norm_composed(xg, {9}, wc))
                           : (fused ? tg::layer_norm(xg, {9}, wc) : tg::layer_norm_composed(xg, {9}, wc));
      tg::sum(y * r).backward();
      return xg.grad();
    };
    EXPECT_LT(max_abs_diff(grad_x(true), grad_x(false)), 1e-12);
  }
}
