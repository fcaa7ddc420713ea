// AdditiveAttention and DotProductAttention: names, hand-computed values with d2l's masking,
// weights that sum to 1 and vanish where masked, float64 gradchecks with 1-D and 2-D valid lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "layer_test_util.h"
#include "nn/attention.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Shape;
using tg::Tensor;
using tg::nn::AdditiveAttention;
using tg::nn::AdditiveAttentionOptions;
using tg::nn::DotProductAttention;
using tg::nn::DotProductAttentionOptions;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::max_abs_diff;
using tg::nn::testing::parameter_inputs;

constexpr std::int64_t B = 2, Q = 3, K = 4;

Tensor lens1() { return Tensor::from_vector(std::vector<std::int64_t>{2, 4}, {B}); }
Tensor lens2() { return Tensor::from_vector(std::vector<std::int64_t>{1, 3, 4, 2, 0, 4}, {B, Q}); }

/// Valid length of row (b, q) for undefined, 1-D or 2-D lens.
std::int64_t len_at(const Tensor& lens, std::int64_t b, std::int64_t q) {
  if (!lens.defined()) return K;
  return lens.dim() == 1 ? static_cast<std::int64_t>(lens.at({b})) : static_cast<std::int64_t>(lens.at({b, q}));
}

/// d2l's masked softmax of raw scores [b][q][k] and weights @ values, by hand.
Tensor reference_attention(const std::vector<double>& scores, const Tensor& values, const Tensor& lens,
                           Tensor* weights_out = nullptr) {
  const std::int64_t V = values.size(2);
  std::vector<double> out(static_cast<std::size_t>(B * Q * V)), weights(scores.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t q = 0; q < Q; ++q) {
      const std::int64_t len = len_at(lens, b, q);
      double w[K], mx = -1e300, sum = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        w[k] = k < len ? scores[(b * Q + q) * K + k] : -1e6;
        mx = std::max(mx, w[k]);
      }
      for (double& v : w) sum += (v = std::exp(v - mx));
      for (std::int64_t k = 0; k < K; ++k) weights[(b * Q + q) * K + k] = w[k] / sum;
      for (std::int64_t j = 0; j < V; ++j) {
        double acc = 0;
        for (std::int64_t k = 0; k < K; ++k) acc += w[k] / sum * values.at({b, k, j});
        out[(b * Q + q) * V + j] = acc;
      }
    }
  if (weights_out) *weights_out = Tensor::from_vector(weights, {B, Q, K});
  return Tensor::from_vector(out, {B, Q, V});
}

/// Masked weights are ~0 and every row sums to 1.
void expect_valid_weights(const Tensor& w, const Tensor& lens) {
  ASSERT_EQ(w.shape(), (Shape{B, Q, K}));
  EXPECT_FALSE(w.requires_grad());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t q = 0; q < Q; ++q) {
      const std::int64_t len = len_at(lens, b, q);
      double sum = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        sum += w.at({b, q, k});
        if (k >= len && len > 0) {
          EXPECT_LT(w.at({b, q, k}), 1e-12) << b << "," << q << "," << k;
        }
      }
      EXPECT_NEAR(sum, 1.0, 1e-12);
      if (len == 0) {  // fully masked row: uniform (finite mask value), never NaN
        for (std::int64_t k = 0; k < K; ++k) EXPECT_NEAR(w.at({b, q, k}), 1.0 / K, 1e-12);
      }
    }
}

TEST(Attention, AdditiveNamesAndShapes) {
  Generator gen(1);
  AdditiveAttention attn(3, 5, 6, 0.1, gen);
  const auto named = attn->named_parameters();
  ASSERT_EQ(named.size(), 3u);
  EXPECT_EQ(named[0].first, "W_k.weight");
  EXPECT_EQ(named[0].second.shape(), (Shape{6, 3}));
  EXPECT_EQ(named[1].first, "W_q.weight");
  EXPECT_EQ(named[1].second.shape(), (Shape{6, 5}));
  EXPECT_EQ(named[2].first, "w_v.weight");
  EXPECT_EQ(named[2].second.shape(), (Shape{1, 6}));
  for (double v : named[2].second.to_vector<double>()) EXPECT_LT(std::abs(v), 1.0 / std::sqrt(6.0));
  EXPECT_EQ(attn->dropout->p(), 0.1);
  EXPECT_THROW(AdditiveAttention(AdditiveAttentionOptions(3, 5, 0), gen), std::invalid_argument);
  EXPECT_THROW(AdditiveAttention(3, 5, 6, 1.5, gen), std::invalid_argument);
  EXPECT_THROW(attn->forward(Tensor::zeros({2, 1, 4}), Tensor::zeros({2, 4, 3}), Tensor::zeros({2, 4, 2})),
               std::invalid_argument);  // query size 4 != 5
  EXPECT_THROW(attn->forward(Tensor::zeros({2, 1, 5}), Tensor::zeros({2, 4, 3}), Tensor::zeros({2, 3, 2})),
               std::invalid_argument);  // keys and values disagree on K
}

TEST(Attention, AdditiveMatchesHandComputationAndMasks) {
  Generator gen(2);
  AdditiveAttention attn(3, 2, 5, 0.0, gen);
  attn->to(DType::f64);
  const Tensor q = Tensor::uniform({B, Q, 2}, -1, 1, gen, DType::f64);
  const Tensor k = Tensor::uniform({B, K, 3}, -1, 1, gen, DType::f64);
  const Tensor v = Tensor::uniform({B, K, 2}, -1, 1, gen, DType::f64);
  const Tensor Wq = attn->W_q->weight, Wk = attn->W_k->weight, wv = attn->w_v->weight;
  std::vector<double> scores;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Q; ++i)
      for (std::int64_t j = 0; j < K; ++j) {
        double s = 0;
        for (std::int64_t h = 0; h < 5; ++h) {
          double f = 0;
          for (std::int64_t c = 0; c < 2; ++c) f += Wq.at({h, c}) * q.at({b, i, c});
          for (std::int64_t c = 0; c < 3; ++c) f += Wk.at({h, c}) * k.at({b, j, c});
          s += wv.at({0, h}) * std::tanh(f);
        }
        scores.push_back(s);
      }
  for (const Tensor& lens : {Tensor(), lens1(), lens2()}) {
    Tensor want_w;
    const Tensor want = reference_attention(scores, v, lens, &want_w);
    const Tensor got = attn->forward(q, k, v, lens);
    EXPECT_LT(max_abs_diff(got, want), 1e-13);
    EXPECT_LT(max_abs_diff(attn->attention_weights(), want_w), 1e-13);
    expect_valid_weights(attn->attention_weights(), lens);
    // The hoisted-key entry point gives the same result.
    const Tensor kp = attn->project_keys(k);
    EXPECT_EQ(max_abs_diff(attn->forward_projected(attn->project_queries(q), kp, v, lens), got), 0.0);
  }
}

TEST(Attention, DotProductMatchesHandComputationAndMasks) {
  Generator gen(3);
  const Tensor q = Tensor::uniform({B, Q, 3}, -1, 1, gen, DType::f64);
  const Tensor k = Tensor::uniform({B, K, 3}, -1, 1, gen, DType::f64);
  const Tensor v = Tensor::uniform({B, K, 2}, -1, 1, gen, DType::f64);
  for (bool scaled : {true, false}) {
    DotProductAttention attn(0.0, scaled);
    std::vector<double> scores;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < Q; ++i)
        for (std::int64_t j = 0; j < K; ++j) {
          double s = 0;
          for (std::int64_t c = 0; c < 3; ++c) s += q.at({b, i, c}) * k.at({b, j, c});
          scores.push_back(scaled ? s / std::sqrt(3.0) : s);
        }
    for (const Tensor& lens : {Tensor(), lens1(), lens2()}) {
      Tensor want_w;
      const Tensor want = reference_attention(scores, v, lens, &want_w);
      EXPECT_LT(max_abs_diff(attn->forward(q, k, v, lens), want), 1e-13) << "scaled " << scaled;
      EXPECT_LT(max_abs_diff(attn->attention_weights(), want_w), 1e-13);
      expect_valid_weights(attn->attention_weights(), lens);
    }
  }
  EXPECT_EQ(DotProductAttention()->parameters().size(), 0u);
  EXPECT_THROW(DotProductAttention(-0.5), std::invalid_argument);
  EXPECT_THROW(DotProductAttention()->forward(q, tg::narrow(k, 2, 0, 2), v), std::invalid_argument);
}

TEST(Attention, DropoutOnWeightsUsesSharedGeneratorAndEvalDisablesIt) {
  auto shared = std::make_shared<Generator>(5);
  Generator gen(4);
  DotProductAttention attn(DotProductAttentionOptions().dropout(0.5).generator(shared));
  EXPECT_EQ(attn->dropout->generator(), shared);
  const Tensor q = Tensor::uniform({B, Q, 3}, -1, 1, gen), k = Tensor::uniform({B, K, 3}, -1, 1, gen);
  const Tensor v = Tensor::uniform({B, K, 2}, -1, 1, gen);
  shared->seed(9);
  const Tensor a = attn->forward(q, k, v);
  shared->seed(9);
  EXPECT_EQ(max_abs_diff(a, attn->forward(q, k, v)), 0.0);
  attn->eval();
  const Tensor e = attn->forward(q, k, v);
  EXPECT_GT(max_abs_diff(a, e), 1e-4);
  attn->train();
  attn->dropout->eval();  // weights are kept before dropout either way
  // Only the dropout module reads the mode and it is the identity in both: the same arithmetic.
  EXPECT_EQ(max_abs_diff(attn->forward(q, k, v), e), 0.0);
}

// ---- float64 gradchecks ----------------------------------------------------------------------------

TEST(Attention, AdditiveGradcheck) {
  Generator gen(6);
  auto shared = std::make_shared<Generator>(0);
  // Dropout 0.3 in training mode: fn reseeds the shared generator so every call draws one mask.
  AdditiveAttention attn(AdditiveAttentionOptions(3, 2, 4).dropout(0.3).generator(shared), gen);
  attn->to(DType::f64);
  for (const Tensor& lens : {lens1(), lens2()}) {
    std::vector<Tensor> inputs{tg::testing::rand64({B, Q, 2}, gen), tg::testing::rand64({B, K, 3}, gen),
                               tg::testing::rand64({B, K, 2}, gen)};
    for (const Tensor& p : parameter_inputs(attn)) inputs.push_back(p);
    EXPECT_GRADCHECK(
        [&](const std::vector<Tensor>& xs) {
          bind_parameters(attn, xs, 3);
          shared->seed(17);
          return attn->forward(xs[0], xs[1], xs[2], lens);
        },
        inputs);
  }
}

TEST(Attention, DotProductGradcheck) {
  Generator gen(7);
  for (bool scaled : {true, false}) {
    DotProductAttention attn(0.0, scaled);
    for (const Tensor& lens : {lens1(), lens2()}) {
      EXPECT_GRADCHECK(
          [&](const std::vector<Tensor>& xs) { return attn->forward(xs[0], xs[1], xs[2], lens); },
          {tg::testing::rand64({B, Q, 3}, gen), tg::testing::rand64({B, K, 3}, gen),
           tg::testing::rand64({B, K, 2}, gen)});
    }
  }
}

}  // namespace
