// nn::MultiheadAttention against PyTorch 1.13 (tests/data/torch_mha_fixture.npz, made by
// tests/data/make_mha_fixture.py): same state_dict keys and order, outputs, weights and gradients;
// float64 gradchecks of scaled_dot_product_attention and of the layer; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
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
#include "../autograd/error_of.h"
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

void check_against_torch(const MultiheadAttention& mha, const std::string& name, bool average) {
  mha->to(DType::f64);
  mha->eval();
  const NamedTensors state = fixture_state(name);
  std::vector<std::string> ours, theirs;
  for (const auto& [n, _] : mha->named_parameters()) ours.push_back(n);
  for (const auto& [n, _] : state) theirs.push_back(n);
  ASSERT_EQ(ours, theirs);
  mha->load_state_dict(state);
  const Tensor q = fixture_get(name + ".query").detach().clone().requires_grad_();
  const Tensor k = fixture_get(name + ".key").detach().clone().requires_grad_();
  const Tensor v = fixture_get(name + ".value").detach().clone().requires_grad_();
  const std::string kpm_key = name + ".key_padding_mask", am_key = name + ".attn_mask";
  Tensor kpm, am;
  for (const auto& [n, t] : mha_fixture()) {
    if (n == kpm_key) kpm = as_i64_mask(t);
    if (n == am_key) am = as_i64_mask(t);
  }
  auto [out, w] = mha->forward(q, k, v, kpm, true, am, average);
  tg::sum(out * fixture_get(name + ".r")) .backward();  // out's part
  auto [out2, w2] = mha->forward(q, k, v, kpm, true, am, average);
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
  for (const auto& [n, p] : mha->named_parameters()) expect_close(p.grad(), name + ".grad." + n);
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
  mha->to(DType::f64);
  const Tensor x = Tensor::normal({3, 4}, 0, 1, gen, DType::f64).requires_grad_();  // unbatched (L, E)
  std::vector<Tensor> inputs = {x};
  for (const Tensor& p : tg::nn::testing::parameter_inputs(mha)) inputs.push_back(p);
  const Tensor causal = tg::triu(Tensor::ones({3, 3}, DType::i64), 1);  // nonzero = may not attend
  const auto report = tg::gradcheck(
      [&](const std::vector<Tensor>& in) {
        tg::nn::testing::bind_parameters(mha, in, 1);  // the parameters' own columns, not constants
        return std::get<0>(mha->forward(in[0], in[0], in[0], Tensor(), false, causal));
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
  using tg::testing::error_of;
  Generator gen(3);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { MultiheadAttention(6, 4, gen); }),  // 6 % 4
            "MultiheadAttention: embed_dim (6) must be a positive multiple of num_heads (4)");
  MultiheadAttention mha(8, 2, gen);
  EXPECT_EQ(error_of<std::invalid_argument>(
                [&] { mha->forward(Tensor::zeros({5, 3, 7}), Tensor::zeros({5, 3, 8}), Tensor::zeros({5, 3, 8})); }),
            "MultiheadAttention: feature sizes differ from embed_dim, kdim, vdim: query [5, 3, 7], key [5, 3, 8], "
            "value [5, 3, 8]");
  // key_padding_mask (N, S) = (3, 5), given (3, 4).
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              mha->forward(Tensor::zeros({5, 3, 8}), Tensor::zeros({5, 3, 8}), Tensor::zeros({5, 3, 8}),
                           Tensor::zeros({3, 4}, DType::i64));
            }),
            "MultiheadAttention: key_padding_mask must be [3, 5], got [3, 4]: query [5, 3, 8], key [5, 3, 8], "
            "value [5, 3, 8]");
}

// Attention dropout (p > 0, training mode): masks from the layer's generator, so the same seed gives
// the same output; eval() turns it off; the returned weights are taken before dropout; gradients
// are right for a fixed mask.
TEST(MultiheadAttention, DropoutIsSeededOffInEvalAndBeforeTheWeights) {
  using tg::testing::max_abs_diff;
  auto shared = std::make_shared<Generator>(0);
  auto other = std::make_shared<Generator>(0);
  Generator init_a(21), init_b(21), init_c(21);  // the same initial parameters in all three
  MultiheadAttention drop(MultiheadAttentionOptions{.embed_dim = 4, .num_heads = 2, .dropout = 0.5, .generator = shared}, init_a);
  MultiheadAttention twin(MultiheadAttentionOptions{.embed_dim = 4, .num_heads = 2, .dropout = 0.5, .generator = other}, init_b);
  MultiheadAttention plain(MultiheadAttentionOptions{.embed_dim = 4, .num_heads = 2}, init_c);
  for (const MultiheadAttention& m : {drop, twin, plain}) m->to(DType::f64);
  const auto pd = drop->named_parameters(), pp = plain->named_parameters();
  ASSERT_EQ(pd.size(), pp.size());
  for (std::size_t i = 0; i < pd.size(); ++i) ASSERT_EQ(max_abs_diff(pd[i].second, pp[i].second), 0.0) << pd[i].first;
  ASSERT_TRUE(drop->is_training());
  Generator gen(22);
  const Tensor q = Tensor::normal({3, 2, 4}, 0, 1, gen, DType::f64), kv = Tensor::normal({5, 2, 4}, 0, 1, gen, DType::f64);
  const auto [ref_out, ref_w] = plain->forward(q, kv, kv);

  // Same seed, same mask: the same layer reseeded, and another layer whose generator has that seed.
  shared->seed(9);
  const auto [out1, w1] = drop->forward(q, kv, kv);
  shared->seed(9);
  const auto [out2, w2] = drop->forward(q, kv, kv);
  other->seed(9);
  const auto [out3, w3] = twin->forward(q, kv, kv);
  EXPECT_EQ(max_abs_diff(out1, out2), 0.0);
  EXPECT_EQ(max_abs_diff(out1, out3), 0.0);
  const auto [out4, w4] = drop->forward(q, kv, kv);  // not reseeded: the next mask
  EXPECT_GT(max_abs_diff(out1, out4), 0.0);
  EXPECT_GT(max_abs_diff(out1, ref_out), 0.0) << "dropout 0.5 changed nothing in training";
  // The weights (need_weights) are taken before dropout: those of the dropout-0 layer, whatever the mask.
  EXPECT_EQ(max_abs_diff(w1, ref_w), 0.0);
  EXPECT_EQ(max_abs_diff(w4, ref_w), 0.0);
  // Without need_weights (the fused kernel: other rounding, the same draws) the same seed gives the
  // same mask, so the output of the composed form to rounding.
  shared->seed(9);
  EXPECT_LT(max_abs_diff(std::get<0>(drop->forward(q, kv, kv, Tensor(), false)), out1), 1e-12);

  // eval(): no dropout, the dropout-0 layer's output and weights, bit for bit.
  drop->eval();
  const auto [eval_out, eval_w] = drop->forward(q, kv, kv);
  EXPECT_EQ(max_abs_diff(eval_out, ref_out), 0.0);
  EXPECT_EQ(max_abs_diff(eval_w, ref_w), 0.0);
  EXPECT_EQ(max_abs_diff(std::get<0>(drop->forward(q, kv, kv, Tensor(), false)),
                         std::get<0>(plain->forward(q, kv, kv, Tensor(), false))),
            0.0);
  drop->train();

  // float64 gradcheck with dropout: fn reseeds the generator so every evaluation draws one mask;
  // with and without the weights (the composed and the fused path).
  for (bool need_weights : {false, true}) {
    std::vector<Tensor> inputs = {q.detach().clone().requires_grad_(), kv.detach().clone().requires_grad_()};
    for (const Tensor& p : tg::nn::testing::parameter_inputs(drop)) inputs.push_back(p);
    EXPECT_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          tg::nn::testing::bind_parameters(drop, in, 2);  // the parameters' own columns, not constants
          shared->seed(17);
          return std::get<0>(drop->forward(in[0], in[1], in[1], Tensor(), need_weights));
        },
        inputs);
  }
}

// ---- TransformerEncoderLayer -------------------------------------------------------------------

namespace {

void check_layer_against_torch(const tg::nn::TransformerEncoderLayer& layer, const std::string& name) {
  layer->to(DType::f64);
  layer->eval();
  const NamedTensors state = fixture_state(name);
  std::vector<std::string> ours, theirs;
  for (const auto& [n, _] : layer->named_parameters()) ours.push_back(n);
  for (const auto& [n, _] : state) theirs.push_back(n);
  ASSERT_EQ(ours, theirs);
  layer->load_state_dict(state);
  const Tensor src = fixture_get(name + ".src").detach().clone().requires_grad_();
  Tensor mask, kpm;
  for (const auto& [n, t] : mha_fixture()) {
    if (n == name + ".src_mask") mask = as_i64_mask(t);
    if (n == name + ".key_padding_mask") kpm = as_i64_mask(t);
  }
  const Tensor out = layer->forward(src, mask, kpm);
  tg::sum(out * fixture_get(name + ".r")).backward();
  double worst = 0;
  auto expect_close = [&](const Tensor& got, const std::string& key) {
    const double err = fixture_error(got, fixture_get(key));
    EXPECT_LE(err, 1e-12) << key;
    worst = std::max(worst, err);
  };
  expect_close(out, name + ".out");
  expect_close(src.grad(), name + ".grad.src");
  for (const auto& [n, p] : layer->named_parameters()) expect_close(p.grad(), name + ".grad." + n);
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
  layer->to(DType::f64);
  layer->eval();
  const Tensor src = Tensor::normal({3, 2, 4}, 0, 1, gen, DType::f64).requires_grad_();
  std::vector<Tensor> inputs = {src};
  for (const Tensor& p : tg::nn::testing::parameter_inputs(layer)) inputs.push_back(p);
  const auto report = tg::gradcheck(
      [&](const std::vector<Tensor>& in) {
        tg::nn::testing::bind_parameters(layer, in, 1);  // the parameters' own columns, not constants
        return layer->forward(in[0]);
      },
      inputs);
  EXPECT_TRUE(report.ok) << report.message;
  const std::vector<double> a = layer->forward(src).to_vector<double>(), b = layer->forward(src).to_vector<double>();
  EXPECT_EQ(a, b);  // eval: deterministic
  layer->train();
  EXPECT_NE(layer->forward(src).to_vector<double>(), a);  // dropout 0.1 in training
  EXPECT_THROW(tg::nn::TransformerEncoderLayer({.d_model = 4, .nhead = 3}, gen), std::invalid_argument);
}
