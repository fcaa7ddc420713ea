// nn::MultiheadAttention against PyTorch 1.13 (tests/data/torch_mha_fixture.npz, made by
// tests/data/make_mha_fixture.py): same state_dict keys and order, outputs, weights and gradients;
// float64 gradchecks of scaled_dot_product_attention and of the layer; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "nn/multihead_attention.h"
#include "nn/serialize.h"
#include "nn/transformer.h"
#include "layer_test_util.h"
#include "torch_mha_fixture.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Tensor;
using tg::nn::MultiheadAttention;
using tg::nn::MultiheadAttentionOptions;
using tg::nn::NamedTensors;
using tg::nn::testing::as_i64_mask;
using tg::nn::testing::fixture_error;
using tg::nn::testing::fixture_get;
using tg::nn::testing::fixture_state;
using tg::nn::testing::mha_fixture;

void check_against_torch(MultiheadAttention& mha, const std::string& name, bool average) {
  mha.to(DType::f64);
  mha.eval();
  const NamedTensors state = fixture_state(name);
  std::vector<std::string> ours, theirs;
  for (const auto& [n, _] : mha.named_parameters()) ours.push_back(n);
  for (const auto& [n, _] : state) theirs.push_back(n);
  ASSERT_EQ(ours, theirs);
  mha.load_state_dict(state);
  const Tensor q = fixture_get(name + ".query").detach().clone().requires_grad_();
  const Tensor k = fixture_get(name + ".key").detach().clone().requires_grad_();
  const Tensor v = fixture_get(name + ".value").detach().clone().requires_grad_();
  const std::string kpm_key = name + ".key_padding_mask", am_key = name + ".attn_mask";
  Tensor kpm, am;
  for (const auto& [n, t] : mha_fixture()) {
    if (n == kpm_key) kpm = as_i64_mask(t);
    if (n == am_key) am = as_i64_mask(t);
  }
  auto [out, w] = mha.forward(q, k, v, kpm, true, am, average);
  tg::sum(out * fixture_get(name + ".r")) .backward();  // out's part
  auto [out2, w2] = mha.forward(q, k, v, kpm, true, am, average);
  tg::sum(w2 * fixture_get(name + ".rw")).backward();   // the weights' part, accumulated
  const double tol = 1e-12;
  double worst = 0;
  auto expect_close = [&](const Tensor& got, const std::string& key) {
    const double err = fixture_error(got, fixture_get(key));
    EXPECT_LE(err, tol) << key;
    worst = std::max(worst, err);
  };
  expect_close(out, name + ".out");
  expect_close(w, name + ".weights");
  expect_close(q.grad(), name + ".grad.query");
  expect_close(k.grad(), name + ".grad.key");
  expect_close(v.grad(), name + ".grad.value");
  for (const auto& [n, p] : mha.named_parameters()) expect_close(p.grad(), name + ".grad." + n);
  std::cout << "[ fixture  ] " << name << ": max abs error vs PyTorch " << worst << "\n";
}

}  // namespace

TEST(MultiheadAttention, SelfAttentionWithKeyPaddingMatchesTorch) {
  Generator gen(0);
  MultiheadAttention mha(8, 2, gen);
  check_against_torch(mha, "self", true);
}

TEST(MultiheadAttention, CrossAttentionWithKdimVdimAttnMaskAndPerHeadWeightsMatchesTorch) {
  Generator gen(0);
  MultiheadAttention mha(MultiheadAttentionOptions{.embed_dim = 8, .num_heads = 4, .kdim = 6, .vdim = 5, .batch_first = true}, gen);
  check_against_torch(mha, "cross", false);
}

TEST(MultiheadAttention, GradchecksUnbatchedAndCausal) {
  Generator gen(1);
  MultiheadAttention mha(MultiheadAttentionOptions{.embed_dim = 4, .num_heads = 2}, gen);
  mha.to(DType::f64);
  const Tensor x = Tensor::normal({3, 4}, 0, 1, gen, DType::f64).requires_grad_();  // unbatched (L, E)
  std::vector<Tensor> inputs = {x};
  for (const Tensor& p : tg::nn::testing::parameter_inputs(mha)) inputs.push_back(p);
  const Tensor causal = tg::triu(Tensor::ones({3, 3}, DType::i64), 1);  // nonzero = may not attend
  const auto report = tg::gradcheck(
      [&](const std::vector<Tensor>& in) {
        tg::nn::testing::bind_parameters(mha, in, 1);  // the parameters' own columns, not constants
        return std::get<0>(mha.forward(in[0], in[0], in[0], Tensor(), false, causal));
      },
      inputs);
  EXPECT_TRUE(report.ok) << report.message;
}

TEST(ScaledDotProductAttention, ValuesMasksAndGradcheck) {
  Generator gen(2);
  const Tensor q = Tensor::normal({2, 3, 4}, 0, 1, gen, DType::f64), k = Tensor::normal({2, 5, 4}, 0, 1, gen, DType::f64);
  const Tensor v = Tensor::normal({2, 5, 3}, 0, 1, gen, DType::f64);
  // Reference: softmax(q kᵀ / 2) v by hand for one row.
  const Tensor y = tg::scaled_dot_product_attention(q, k, v);
  const std::vector<double> qv = q.to_vector<double>(), kv = k.to_vector<double>(), vv = v.to_vector<double>();
  std::vector<double> s(5);
  double z = 0;
  for (int j = 0; j < 5; ++j) {
    double d = 0;
    for (int e = 0; e < 4; ++e) d += qv[e] * kv[j * 4 + e];
    s[j] = std::exp(d / 2.0);
    z += s[j];
  }
  for (int c = 0; c < 3; ++c) {
    double want = 0;
    for (int j = 0; j < 5; ++j) want += s[j] / z * vv[j * 3 + c];
    EXPECT_NEAR(y.to_vector<double>()[c], want, 1e-12);
  }
  // Causal equals an explicit lower-triangular i64 mask (nonzero = allowed).
  auto first = [](const Tensor& t) { return tg::squeeze(tg::narrow(t, 0, 0, 1), 0); };
  const Tensor q5 = Tensor::normal({5, 4}, 0, 1, gen, DType::f64);
  const Tensor allowed = tg::tril(Tensor::ones({5, 5}, DType::i64));
  const auto a = tg::scaled_dot_product_attention(q5, first(k), first(v), Tensor(), 0.0, true).to_vector<double>();
  const auto b = tg::scaled_dot_product_attention(q5, first(k), first(v), allowed).to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-15);
  // A query with no allowed key gets NaN, as PyTorch.
  const Tensor none = Tensor::zeros({3, 5}, DType::i64);
  EXPECT_TRUE(std::isnan(tg::scaled_dot_product_attention(first(q), first(k), first(v), none).to_vector<double>()[0]));
  const Tensor float_mask = Tensor::normal({3, 5}, 0, 1, gen, DType::f64);
  for (const Tensor& mask : {Tensor(), float_mask, tg::tril(Tensor::ones({3, 5}, DType::i64))}) {
    const auto report = tg::gradcheck(
        [&](const std::vector<Tensor>& in) { return tg::scaled_dot_product_attention(in[0], in[1], in[2], mask); },
        {q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_(), v.detach().clone().requires_grad_()});
    EXPECT_TRUE(report.ok) << report.message;
  }
  EXPECT_THROW(tg::scaled_dot_product_attention(q, Tensor::zeros({2, 5, 3}, DType::f64), v), std::invalid_argument);
  EXPECT_THROW(tg::scaled_dot_product_attention(q, k, v, Tensor(), 0.5), std::invalid_argument);  // no generator
}

TEST(MultiheadAttention, ErrorsNameTheLayerAndShapes) {
  Generator gen(3);
  EXPECT_THROW(MultiheadAttention(6, 4, gen), std::invalid_argument);  // 6 % 4
  MultiheadAttention mha(8, 2, gen);
  try {
    mha.forward(Tensor::zeros({5, 3, 7}), Tensor::zeros({5, 3, 8}), Tensor::zeros({5, 3, 8}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("MultiheadAttention"), std::string::npos) << m;
    EXPECT_NE(m.find("[5, 3, 7]"), std::string::npos) << m;
  }
  EXPECT_THROW(mha.forward(Tensor::zeros({5, 3, 8}), Tensor::zeros({5, 3, 8}), Tensor::zeros({5, 3, 8}),
                           Tensor::zeros({3, 4}, DType::i64)),
               std::invalid_argument);
}

// ---- TransformerEncoderLayer -------------------------------------------------------------------

namespace {

void check_layer_against_torch(tg::nn::TransformerEncoderLayer& layer, const std::string& name) {
  layer.to(DType::f64);
  layer.eval();
  const NamedTensors state = fixture_state(name);
  std::vector<std::string> ours, theirs;
  for (const auto& [n, _] : layer.named_parameters()) ours.push_back(n);
  for (const auto& [n, _] : state) theirs.push_back(n);
  ASSERT_EQ(ours, theirs);
  layer.load_state_dict(state);
  const Tensor src = fixture_get(name + ".src").detach().clone().requires_grad_();
  Tensor mask, kpm;
  for (const auto& [n, t] : mha_fixture()) {
    if (n == name + ".src_mask") mask = as_i64_mask(t);
    if (n == name + ".key_padding_mask") kpm = as_i64_mask(t);
  }
  const Tensor out = layer.forward(src, mask, kpm);
  tg::sum(out * fixture_get(name + ".r")).backward();
  double worst = 0;
  auto expect_close = [&](const Tensor& got, const std::string& key) {
    const double err = fixture_error(got, fixture_get(key));
    EXPECT_LE(err, 1e-12) << key;
    worst = std::max(worst, err);
  };
  expect_close(out, name + ".out");
  expect_close(src.grad(), name + ".grad.src");
  for (const auto& [n, p] : layer.named_parameters()) expect_close(p.grad(), name + ".grad." + n);
  std::cout << "[ fixture  ] " << name << ": max abs error vs PyTorch " << worst << "\n";
}

}  // namespace

TEST(TransformerEncoderLayer, PostNormReluWithKeyPaddingMatchesTorch) {
  Generator gen(0);
  tg::nn::TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 16}, gen);
  check_layer_against_torch(layer, "enc_post");
}

TEST(TransformerEncoderLayer, PreNormGeluBatchFirstCausalMatchesTorch) {
  Generator gen(0);
  tg::nn::TransformerEncoderLayer layer({.d_model = 8,
                                         .nhead = 4,
                                         .dim_feedforward = 12,
                                         .activation = tg::nn::TransformerActivation::gelu,
                                         .batch_first = true,
                                         .norm_first = true},
                                        gen);
  check_layer_against_torch(layer, "enc_pre");
}

TEST(TransformerEncoderLayer, GradchecksAndDropoutOnlyInTraining) {
  Generator gen(4);
  tg::nn::TransformerEncoderLayer layer({.d_model = 4, .nhead = 2, .dim_feedforward = 6, .norm_first = true}, gen);
  layer.to(DType::f64);
  layer.eval();
  const Tensor src = Tensor::normal({3, 2, 4}, 0, 1, gen, DType::f64).requires_grad_();
  std::vector<Tensor> inputs = {src};
  for (const Tensor& p : tg::nn::testing::parameter_inputs(layer)) inputs.push_back(p);
  const auto report = tg::gradcheck(
      [&](const std::vector<Tensor>& in) {
        tg::nn::testing::bind_parameters(layer, in, 1);  // the parameters' own columns, not constants
        return layer.forward(in[0]);
      },
      inputs);
  EXPECT_TRUE(report.ok) << report.message;
  const std::vector<double> a = layer.forward(src).to_vector<double>(), b = layer.forward(src).to_vector<double>();
  EXPECT_EQ(a, b);  // eval: deterministic
  layer.train();
  EXPECT_NE(layer.forward(src).to_vector<double>(), a);  // dropout 0.1 in training
  EXPECT_THROW(tg::nn::TransformerEncoderLayer({.d_model = 4, .nhead = 3}, gen), std::invalid_argument);
}
