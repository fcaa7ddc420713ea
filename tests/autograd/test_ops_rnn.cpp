// gru_cell_fused: values against the scalar formula (extreme inputs included), float64 gradchecks,
// equality with the composite it replaces (values and every gradient), skipped gradients, thread
// independence, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_rnn.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
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

// (B, H) with B * H above both parallel grains of the op (forward 8192, backward 32768), so
// rows are split between tasks; H leaves a SIMD tail in f32 and f64. kLarge is a real layer's
// size, kTall has few columns for the gradcheck.
const Shape kLarge{64, 517};
const Shape kTall{500, 67};

// What the fused op replaces: nn/rnn.cpp's GRU step as sigmoid/tanh/narrow ops.
Tensor composite(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  const std::int64_t H = h.size(1);
  const Tensor rz = tg::sigmoid(tg::narrow(gi, 1, 0, 2 * H) + tg::narrow(gh, 1, 0, 2 * H));
  const Tensor r = tg::narrow(rz, 1, 0, H), z = tg::narrow(rz, 1, H, H);
  const Tensor n = tg::tanh(tg::narrow(gi, 1, 2 * H, H) + r * tg::narrow(gh, 1, 2 * H, H));
  return n + z * (h - n);
}

using tg::testing::Contains;

struct Inputs {
  Tensor gi, gh, h;
};

// Pre-activations in [-3, 3]: past the linear region of sigmoid and tanh.
Inputs random_inputs(std::int64_t B, std::int64_t H, DType dt, Generator& gen) {
  return {.gi = Tensor::uniform({B, 3 * H}, -3, 3, gen, dt).requires_grad_(),
          .gh = Tensor::uniform({B, 3 * H}, -3, 3, gen, dt).requires_grad_(),
          .h = Tensor::uniform({B, H}, -1, 1, gen, dt).requires_grad_()};
}

using Cell = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);

// The output and the gradients of sum(output * seed) w.r.t. gi, gh and h.
std::vector<Tensor> value_and_grads(Cell cell, const Inputs& in, const Tensor& seed) {
  for (Tensor t : {in.gi, in.gh, in.h}) t.zero_grad();  // handles: clears the shared tensor's gradient
  const Tensor out = cell(in.gi, in.gh, in.h);
  out.backward(seed);
  return {out.detach(), in.gi.grad(), in.gh.grad(), in.h.grad()};
}

std::vector<char> bytes(const Tensor& t) {
  const char* p = t.dtype() == DType::f64 ? reinterpret_cast<const char*>(t.data<double>())
                                          : reinterpret_cast<const char*>(t.data<float>());
  return std::vector<char>(p, p + t.numel() * static_cast<std::int64_t>(tg::dtype_size(t.dtype())));
}

TEST(GruCellFused, ValuesMatchTheScalarFormula) {
  // Extremes saturate the gates (exp overflows in f32) without producing NaN.
  const std::vector<double> pre = {-100, -8, -1.5, -0.25, 0, 0.3, 2, 9, 100};
  const std::int64_t B = 3, H = 9;
  for (DType dt : {DType::f32, DType::f64}) {
    std::vector<double> gi(B * 3 * H), gh(B * 3 * H), h(B * H);
    for (std::size_t i = 0; i < gi.size(); ++i) {
      gi[i] = pre[i % pre.size()];
      gh[i] = pre[(i * 5 + 2) % pre.size()] * 0.5;
    }
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = std::sin(static_cast<double>(i));
    const Tensor out = tg::gru_cell_fused(Tensor::from_values(gi, {B, 3 * H}, dt), Tensor::from_values(gh, {B, 3 * H}, dt),
                                          Tensor::from_values(h, {B, H}, dt));
    ASSERT_EQ(out.shape(), (Shape{B, H}));
    ASSERT_EQ(out.dtype(), dt);
    const std::vector<double> y = out.to_vector<double>();
    auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < H; ++j) {
        auto g = [&](const std::vector<double>& v, int gate) { return v[b * 3 * H + gate * H + j]; };
        const double r = sigmoid(g(gi, 0) + g(gh, 0)), z = sigmoid(g(gi, 1) + g(gh, 1));
        const double n = std::tanh(g(gi, 2) + r * g(gh, 2));
        const double want = (1 - z) * n + z * h[b * H + j];
        EXPECT_NEAR(y[b * H + j], want, dt == DType::f32 ? 1e-6 : 1e-14) << tg::dtype_name(dt) << " " << b << "," << j;
      }
  }
}

TEST(GruCellFused, GradcheckWrtAllInputs) {
  Generator gen(0);
  for (auto [B, H] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {1, 5}, {3, 4}, {2, 9}}) {
    SCOPED_TRACE("B=" + std::to_string(B) + " H=" + std::to_string(H));
    EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::gru_cell_fused(in[0] * 3.0, in[1] * 3.0, in[2]); },
                     {rand64({B, 3 * H}, gen), rand64({B, 3 * H}, gen), rand64({B, H}, gen)});
  }
  // h used twice (as in a GRU: gh = h W_hhᵀ): both paths accumulate into its gradient.
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        return tg::gru_cell_fused(in[0], tg::linear(in[2], in[1]), in[2]);
      },
      {rand64({2, 9}, gen), rand64({9, 3}, gen), rand64({2, 3}, gen)});
}

// On the parallel path a full Jacobian would need ~235K perturbations, so each input is a fixed
// random tensor plus a perturbed (1, cols) row broadcast over the batch, and the output is reduced
// with fixed random weights: every element of all three gradients still enters a checked sum,
// and every gate column is checked separately.
TEST(GruCellFused, GradcheckOnTheParallelPath) {
  Generator gen(1);
  const std::int64_t B = kTall[0], H = kTall[1];
  const Tensor gi0 = Tensor::uniform({B, 3 * H}, -2, 2, gen, DType::f64);
  const Tensor gh0 = Tensor::uniform({B, 3 * H}, -2, 2, gen, DType::f64);
  const Tensor h0 = Tensor::uniform({B, H}, -1, 1, gen, DType::f64);
  const Tensor weights = Tensor::uniform({B, H}, -1, 1, gen, DType::f64);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        return tg::sum(tg::gru_cell_fused(gi0 + in[0], gh0 + in[1], h0 + in[2]) * weights);
      },
      {rand64({1, 3 * H}, gen), rand64({1, 3 * H}, gen), rand64({1, H}, gen)});
}

TEST(GruCellFused, MatchesTheCompositeOp) {
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    for (auto [B, H] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {4, 7}, {64, 32}, {kTall[0], kTall[1]}, {kLarge[0], kLarge[1]}}) {
      SCOPED_TRACE(std::string(tg::dtype_name(dt)) + " B=" + std::to_string(B) + " H=" + std::to_string(H));
      Generator gen(2);
      const Inputs in = random_inputs(B, H, dt, gen);
      const Tensor seed = Tensor::uniform({B, H}, -1, 1, gen, dt);
      const auto fused = value_and_grads(tg::gru_cell_fused, in, seed);
      const auto reference = value_and_grads(composite, in, seed);
      const char* names[] = {"output", "d gi", "d gh", "d h"};
      for (int i = 0; i < 4; ++i) {
        ASSERT_TRUE(fused[i].defined()) << names[i];
        EXPECT_EQ(fused[i].dtype(), dt) << names[i];
        EXPECT_LE(max_abs_diff(fused[i], reference[i]), tol) << names[i];
      }
    }
  }
}

TEST(GruCellFused, ComputesOnlyTheGradientsThatAreNeeded) {
  Generator gen(3);
  const Tensor gi = Tensor::uniform({3, 12}, -2, 2, gen, DType::f64);
  Tensor gh = Tensor::uniform({3, 12}, -2, 2, gen, DType::f64).requires_grad_();
  const Tensor h = Tensor::uniform({3, 4}, -1, 1, gen, DType::f64);
  tg::sum(tg::gru_cell_fused(gi, gh, h)).backward();
  const Tensor fused = gh.grad();
  gh.zero_grad();
  tg::sum(composite(gi, gh, h)).backward();
  EXPECT_LE(max_abs_diff(fused, gh.grad()), 1e-12);
  EXPECT_FALSE(gi.grad().defined());
  EXPECT_FALSE(h.grad().defined());
  // Nothing requires grad, or recording is off: a plain result, nothing on the tape.
  const std::size_t nodes = tg::tape::size();
  EXPECT_FALSE(tg::gru_cell_fused(gi, gi, h).requires_grad());
  {
    tg::NoGradGuard no_grad;
    const Tensor y = tg::gru_cell_fused(gi, gh, h);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_LE(max_abs_diff(y, composite(gi, gh, h)), 1e-12);
  }
  EXPECT_EQ(tg::tape::size(), nodes);
}

TEST(GruCellFused, OneAndTwoThreadsGiveBitwiseEqualResults) {
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(tg::dtype_name(dt));
    std::vector<std::vector<char>> runs[2];
    for (int threads : {1, 2}) {
      tg::set_num_threads(threads);
      Generator gen(4);
      const Inputs in = random_inputs(kLarge[0], kLarge[1], dt, gen);
      const Tensor seed = Tensor::uniform(kLarge, -1, 1, gen, dt);
      for (const Tensor& t : value_and_grads(tg::gru_cell_fused, in, seed)) runs[threads - 1].push_back(bytes(t));
    }
    tg::set_num_threads(0);
    ASSERT_EQ(runs[0].size(), 4u);
    for (std::size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(runs[0][i] == runs[1][i]) << "tensor " << i;
  }
}

TEST(GruCellFused, ErrorsNameTheOpAndTheShapes) {
  auto message = [](const Tensor& gi, const Tensor& gh, const Tensor& h) {
    return tg::testing::error_of<std::invalid_argument>([&] { tg::gru_cell_fused(gi, gh, h); });
  };
  const Tensor h = Tensor::zeros({4, 3});
  std::string m = message(Tensor::zeros({4, 9}), Tensor::zeros({4, 6}), h);
  for (const char* part : {"gru_cell_fused", "[4, 9]", "[4, 6]", "[4, 3]", "(B, 3H)"}) EXPECT_TRUE(Contains(m, part));
  m = message(Tensor::zeros({4, 9}), Tensor::zeros({5, 9}), h);
  for (const char* part : {"gru_cell_fused", "[5, 9]", "[4, 3]"}) EXPECT_TRUE(Contains(m, part));
  m = message(Tensor::zeros({4, 9}), Tensor::zeros({4, 9}), Tensor::zeros({3}));
  for (const char* part : {"gru_cell_fused", "h must be (B, H)", "[3]"}) EXPECT_TRUE(Contains(m, part));
  m = message(Tensor::zeros({4, 9}), Tensor(), h);
  for (const char* part : {"gru_cell_fused", "undefined"}) EXPECT_TRUE(Contains(m, part));
  m = message(Tensor::zeros({4, 9}, DType::f64), Tensor::zeros({4, 9}), h);
  for (const char* part : {"gru_cell_fused", "float64", "float32", "[4, 9]", "[4, 3]"}) EXPECT_TRUE(Contains(m, part));
  m = message(Tensor::zeros({4, 9}, DType::i64), Tensor::zeros({4, 9}, DType::i64), Tensor::zeros({4, 3}, DType::i64));
  for (const char* part : {"gru_cell_fused", "int64"}) EXPECT_TRUE(Contains(m, part));
}

}  // namespace
