// nn::TransformerDecoderLayer, TransformerEncoder/Decoder, Transformer and the positional encodings
// against PyTorch 1.13 (tests/data/torch_mha_fixture.npz, made by tests/data/make_mha_fixture.py):
// state_dict keys and order, outputs and every gradient in float64; float64 gradchecks of every
// layer; incremental decoding (forward_step) against the full forward; clones; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/gradcheck.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "layer_test_util.h"
#include "nn/positional_encoding.h"
#include "nn/transformer.h"
#include "torch_mha_fixture.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Tensor;
using tg::nn::NamedTensors;
using tg::nn::Transformer;
using tg::nn::TransformerActivation;
using tg::nn::TransformerDecoder;
using tg::nn::TransformerDecoderLayer;
using tg::nn::TransformerEncoder;
using tg::nn::TransformerEncoderLayer;
using tg::nn::testing::as_i64_mask;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::fixture_error;
using tg::nn::testing::fixture_find;
using tg::nn::testing::fixture_get;
using tg::nn::testing::fixture_state;
using tg::nn::testing::parameter_inputs;

constexpr double kTorchTol = 1e-12;

/// Loads case `name`'s state_dict into `m` (after checking the keys and their order), runs `run` on
/// the case's `inputs` (requiring grad), backpropagates sum(out * r) and compares the output, the
/// inputs' gradients and every parameter's gradient with PyTorch's.
void check_against_torch(tg::nn::Module& m, const std::string& name, const std::vector<std::string>& inputs,
                         const std::function<Tensor(const std::vector<Tensor>&)>& run) {
  m.to(DType::f64);
  m.eval();
  const NamedTensors state = fixture_state(name);
  std::vector<std::string> ours, theirs;
  for (const auto& [n, _] : m.named_parameters()) ours.push_back(n);
  for (const auto& [n, _] : state) theirs.push_back(n);
  ASSERT_EQ(ours, theirs);
  m.load_state_dict(state);
  std::vector<Tensor> xs;
  for (const std::string& key : inputs) xs.push_back(fixture_get(name + "." + key).detach().clone().requires_grad_());
  const Tensor out = run(xs);
  tg::sum(out * fixture_get(name + ".r")).backward();
  double worst = 0;
  auto expect_close = [&](const Tensor& got, const std::string& key) {
    const double err = fixture_error(got, fixture_get(key));
    EXPECT_LE(err, kTorchTol) << key;
    worst = std::max(worst, err);
  };
  expect_close(out, name + ".out");
  for (std::size_t i = 0; i < xs.size(); ++i) expect_close(xs[i].grad(), name + ".grad." + inputs[i]);
  for (const auto& [n, p] : m.named_parameters()) expect_close(p.grad(), name + ".grad." + n);
  std::cout << "[ fixture  ] " << name << ": max abs error vs PyTorch " << worst << " over "
            << m.named_parameters().size() << " parameter gradients\n";
}

Tensor mask(const std::string& key) { return as_i64_mask(fixture_find(key)); }

/// Gradcheck of `m` w.r.t. `inputs` and every parameter (bound through layer_test_util's
/// bind_parameters, so the module's own forward runs on the perturbed values).
void gradcheck_module(tg::nn::Module& m, std::vector<Tensor> inputs,
                      const std::function<Tensor(const std::vector<Tensor>&)>& run) {
  const std::size_t first = inputs.size();
  for (const Tensor& p : parameter_inputs(m)) inputs.push_back(p);
  const auto report = tg::gradcheck(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(m, xs, first);
        return run(xs);
      },
      inputs);
  EXPECT_TRUE(report.ok) << report;
  EXPECT_GT(report.checked, 0);
}

TransformerDecoderLayer small_decoder_layer(Generator& gen, bool norm_first, bool batch_first = false) {
  return TransformerDecoderLayer({.d_model = 4,
                                  .nhead = 2,
                                  .dim_feedforward = 6,
                                  .activation = norm_first ? TransformerActivation::gelu : TransformerActivation::relu,
                                  .batch_first = batch_first,
                                  .norm_first = norm_first},
                                 gen);
}

}  // namespace

// ---- TransformerDecoderLayer -------------------------------------------------------------------

TEST(TransformerDecoderLayer, PostNormReluCausalWithKeyPaddingMatchesTorch) {
  Generator gen(0);
  TransformerDecoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 16}, gen);
  check_against_torch(*layer, "dec_post", {"tgt", "memory"}, [&](const std::vector<Tensor>& in) {
    return layer->forward(in[0], in[1], mask("dec_post.tgt_mask"), Tensor(), mask("dec_post.tgt_key_padding_mask"),
                          mask("dec_post.memory_key_padding_mask"));
  });
}

TEST(TransformerDecoderLayer, PreNormGeluBatchFirstWithMemoryMaskMatchesTorch) {
  Generator gen(0);
  TransformerDecoderLayer layer({.d_model = 8,
                                 .nhead = 4,
                                 .dim_feedforward = 12,
                                 .activation = TransformerActivation::gelu,
                                 .batch_first = true,
                                 .norm_first = true},
                                gen);
  check_against_torch(*layer, "dec_pre", {"tgt", "memory"}, [&](const std::vector<Tensor>& in) {
    return layer->forward(in[0], in[1], mask("dec_pre.tgt_mask"), mask("dec_pre.memory_mask"));
  });
}

TEST(TransformerDecoderLayer, ChildrenAndDefaultsAsTorch) {
  Generator gen(1);
  TransformerDecoderLayer layer({.d_model = 8, .nhead = 2}, gen);
  std::vector<std::string> children;
  for (const auto& [n, _] : layer->named_children()) children.push_back(n);
  EXPECT_EQ(children, (std::vector<std::string>{"self_attn", "multihead_attn", "linear1", "dropout", "linear2", "norm1",
                                                "norm2", "norm3", "dropout1", "dropout2", "dropout3"}));
  EXPECT_EQ(layer->linear1->weight.shape(), (tg::Shape{2048, 8}));  // dim_feedforward = 2048
  EXPECT_EQ(layer->dropout1->p(), 0.1);
  EXPECT_EQ(layer->norm3->eps(), 1e-5);
  EXPECT_THROW(TransformerDecoderLayer({.d_model = 4, .nhead = 3}, gen), std::invalid_argument);
  EXPECT_THROW(TransformerDecoderLayer({.d_model = 4, .nhead = 2, .dim_feedforward = 0}, gen), std::invalid_argument);
}

TEST(TransformerDecoderLayer, GradchecksBothNormOrdersWithMasks) {
  for (const bool norm_first : {false, true}) {
    Generator gen(2);
    TransformerDecoderLayer layer = small_decoder_layer(gen, norm_first);
    layer->to(DType::f64);
    layer->eval();
    const Tensor tgt = tg::testing::rand64({3, 2, 4}, gen), memory = tg::testing::rand64({4, 2, 4}, gen);
    const Tensor causal = Transformer::generate_square_subsequent_mask(3, DType::f64);
    const Tensor memory_pad = Tensor::from_vector(std::vector<std::int64_t>{0, 0, 0, 1, 0, 0, 0, 0}, {2, 4});
    SCOPED_TRACE(norm_first ? "norm_first" : "post-norm");
    gradcheck_module(*layer, {tgt, memory}, [&](const std::vector<Tensor>& in) {
      return layer->forward(in[0], in[1], causal, Tensor(), Tensor(), memory_pad);
    });
  }
}

TEST(TransformerDecoderLayer, DropoutOnlyInTraining) {
  Generator gen(3);
  TransformerDecoderLayer layer({.d_model = 4, .nhead = 2, .dim_feedforward = 6}, gen);
  const Tensor tgt = Tensor::normal({3, 2, 4}, 0, 1, gen), memory = Tensor::normal({4, 2, 4}, 0, 1, gen);
  layer->eval();
  const std::vector<float> a = layer->forward(tgt, memory).to_vector<float>();
  EXPECT_EQ(layer->forward(tgt, memory).to_vector<float>(), a);
  layer->train();
  EXPECT_NE(layer->forward(tgt, memory).to_vector<float>(), a);
}

// ---- stacks and Transformer --------------------------------------------------------------------

TEST(Transformer, PostNormWithKeyPaddingMasksMatchesTorch) {
  Generator gen(0);
  Transformer model({.d_model = 8, .nhead = 2, .num_encoder_layers = 2, .num_decoder_layers = 2, .dim_feedforward = 16,
                     .dropout = 0.0},
                    gen);
  // torch's generate_square_subsequent_mask, -inf included.
  const Tensor causal = Transformer::generate_square_subsequent_mask(4, DType::f64);
  EXPECT_EQ(causal.to_vector<double>(), fixture_get("tfm_post.tgt_mask").to_vector<double>());
  check_against_torch(*model, "tfm_post", {"src", "tgt"}, [&](const std::vector<Tensor>& in) {
    return model->forward(in[0], in[1],
                          {.tgt_mask = causal,
                           .src_key_padding_mask = mask("tfm_post.src_key_padding_mask"),
                           .tgt_key_padding_mask = mask("tfm_post.tgt_key_padding_mask"),
                           .memory_key_padding_mask = mask("tfm_post.memory_key_padding_mask")});
  });
}

TEST(Transformer, PreNormGeluBatchFirstWithSrcMaskMatchesTorch) {
  Generator gen(0);
  Transformer model({.d_model = 8, .nhead = 4, .num_encoder_layers = 2, .num_decoder_layers = 2, .dim_feedforward = 16,
                     .dropout = 0.0, .activation = TransformerActivation::gelu, .batch_first = true, .norm_first = true},
                    gen);
  check_against_torch(*model, "tfm_pre", {"src", "tgt"}, [&](const std::vector<Tensor>& in) {
    return model->forward(in[0], in[1],
                          {.src_mask = mask("tfm_pre.src_mask"), .tgt_mask = fixture_get("tfm_pre.tgt_mask")});
  });
}

TEST(Transformer, Float32OutputWithin1e5OfTorchFloat64) {
  Generator gen(0);
  Transformer model({.d_model = 8, .nhead = 2, .num_encoder_layers = 2, .num_decoder_layers = 2, .dim_feedforward = 16,
                     .dropout = 0.0},
                    gen);
  model->eval();
  model->load_state_dict(fixture_state("tfm_post"));  // converted to the model's float32
  const Tensor out = model->forward(fixture_get("tfm_post.src").to(DType::f32), fixture_get("tfm_post.tgt").to(DType::f32),
                                    {.tgt_mask = Transformer::generate_square_subsequent_mask(4),
                                     .src_key_padding_mask = mask("tfm_post.src_key_padding_mask"),
                                     .tgt_key_padding_mask = mask("tfm_post.tgt_key_padding_mask"),
                                     .memory_key_padding_mask = mask("tfm_post.memory_key_padding_mask")});
  EXPECT_EQ(out.dtype(), DType::f32);
  const double err = fixture_error(out, fixture_get("tfm_post.out"));
  EXPECT_LE(err, 1e-5);
  std::cout << "[ fixture  ] tfm_post in float32: max abs error vs PyTorch float64 " << err << "\n";
}

TEST(Transformer, DefaultsChildrenAndErrors) {
  const tg::nn::TransformerOptions defaults;
  EXPECT_EQ(defaults.d_model, 512);
  EXPECT_EQ(defaults.nhead, 8);
  EXPECT_EQ(defaults.num_encoder_layers, 6);
  EXPECT_EQ(defaults.num_decoder_layers, 6);
  EXPECT_EQ(defaults.dim_feedforward, 2048);
  EXPECT_EQ(defaults.dropout, 0.1);
  Generator gen(4);
  Transformer model({.d_model = 4, .nhead = 2, .num_encoder_layers = 1, .num_decoder_layers = 3, .dim_feedforward = 6},
                    gen);
  EXPECT_EQ(model->encoder->num_layers(), 1);
  EXPECT_EQ(model->decoder->num_layers(), 3);
  ASSERT_TRUE(model->encoder->norm && model->decoder->norm);
  EXPECT_NO_THROW(model->parameter("decoder.layers.2.multihead_attn.out_proj.bias"));
  EXPECT_NO_THROW(model->parameter("encoder.norm.weight"));
  // xavier_uniform_ re-draws the matrices after the clones: they differ between layers, the
  // biases stay the clones' (equal), as torch's _reset_parameters.
  EXPECT_NE(model->parameter("decoder.layers.0.linear1.weight").to_vector<float>(),
            model->parameter("decoder.layers.1.linear1.weight").to_vector<float>());
  EXPECT_EQ(model->parameter("decoder.layers.0.linear1.bias").to_vector<float>(),
            model->parameter("decoder.layers.1.linear1.bias").to_vector<float>());
  const Tensor src = Tensor::zeros({5, 2, 4}), tgt = Tensor::zeros({3, 2, 4});
  EXPECT_EQ(model->forward(src, tgt).shape(), (tg::Shape{3, 2, 4}));
  try {
    model->forward(src, Tensor::zeros({3, 3, 4}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(tg::testing::Contains(e.what(), "Transformer: the batch sizes"));
  }
  EXPECT_THROW(model->forward(src, Tensor::zeros({3, 2, 5})), std::invalid_argument);
  EXPECT_THROW(Transformer({.d_model = 4, .nhead = 2, .num_encoder_layers = 0}, gen), std::invalid_argument);
  const Tensor m = Transformer::generate_square_subsequent_mask(3);
  EXPECT_EQ(m.dtype(), DType::f32);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{0, -inf, -inf, 0, 0, -inf, 0, 0, 0}));
}

TEST(TransformerStacks, ClonesStartEqualAndOwnTheirParameters) {
  Generator gen(5);
  TransformerEncoderLayer proto({.d_model = 4, .nhead = 2, .dim_feedforward = 6}, gen);
  proto->to(DType::f64);
  proto->eval();
  TransformerEncoder encoder(proto, 3, tg::nn::LayerNorm(4));
  std::vector<std::string> keys;
  for (const auto& [n, _] : encoder->named_parameters()) keys.push_back(n);
  EXPECT_EQ(keys.front(), "layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(keys.back(), "norm.bias");
  EXPECT_EQ(keys.size(), 3 * proto->named_parameters().size() + 2);
  for (std::int64_t i = 0; i < 3; ++i) {
    const NamedTensors theirs = proto->named_parameters(), ours = encoder->layer(i)->named_parameters();
    for (std::size_t k = 0; k < ours.size(); ++k) {
      EXPECT_EQ(ours[k].second.dtype(), DType::f64);
      EXPECT_EQ(ours[k].second.to_vector<double>(), theirs[k].second.to_vector<double>()) << ours[k].first;
      EXPECT_FALSE(ours[k].second.shares_storage(theirs[k].second));
    }
    EXPECT_FALSE(encoder->layer(i)->is_training());  // the prototype's mode
  }
  TransformerDecoder decoder(small_decoder_layer(gen, false), 2);
  EXPECT_FALSE(decoder->norm);
  EXPECT_THROW(decoder->parameter("norm.weight"), std::out_of_range);
  EXPECT_THROW(TransformerDecoder(small_decoder_layer(gen, false), 0), std::invalid_argument);
}

TEST(TransformerStacks, GradchecksEncoderDecoderAndTransformer) {
  Generator gen(6);
  TransformerEncoderLayer enc_layer({.d_model = 4, .nhead = 2, .dim_feedforward = 6}, gen);
  TransformerEncoder encoder(enc_layer, 2, tg::nn::LayerNorm(4));
  encoder->to(DType::f64);
  encoder->eval();
  const Tensor src = tg::testing::rand64({3, 2, 4}, gen);
  const Tensor pad = Tensor::from_vector(std::vector<std::int64_t>{0, 0, 0, 0, 0, 1}, {2, 3});
  gradcheck_module(*encoder, {src}, [&](const std::vector<Tensor>& in) { return encoder->forward(in[0], Tensor(), pad); });

  TransformerDecoder decoder(small_decoder_layer(gen, true, true), 2, tg::nn::LayerNorm(4));
  decoder->to(DType::f64);
  decoder->eval();
  const Tensor tgt = tg::testing::rand64({2, 3, 4}, gen), memory = tg::testing::rand64({2, 2, 4}, gen);
  const Tensor causal = Transformer::generate_square_subsequent_mask(3, DType::f64);
  gradcheck_module(*decoder, {tgt, memory},
                   [&](const std::vector<Tensor>& in) { return decoder->forward(in[0], in[1], causal); });

  Transformer model({.d_model = 4, .nhead = 2, .num_encoder_layers = 1, .num_decoder_layers = 1, .dim_feedforward = 6,
                     .norm_first = true},
                    gen);
  model->to(DType::f64);
  model->eval();
  const Tensor s = tg::testing::rand64({3, 1, 4}, gen), t = tg::testing::rand64({2, 1, 4}, gen);
  gradcheck_module(*model, {s, t}, [&](const std::vector<Tensor>& in) {
    return model->forward(in[0], in[1], {.tgt_mask = Transformer::generate_square_subsequent_mask(2, DType::f64)});
  });
}

// ---- incremental decoding ----------------------------------------------------------------------

TEST(TransformerDecoder, ForwardStepEqualsCausalForward) {
  for (const bool norm_first : {false, true}) {
    for (const bool batch_first : {false, true}) {
      SCOPED_TRACE(std::string(norm_first ? "norm_first" : "post-norm") + (batch_first ? ", batch_first" : ""));
      Generator gen(7);
      TransformerDecoder decoder(small_decoder_layer(gen, norm_first, batch_first), 2,
                                 tg::nn::LayerNorm(4));
      decoder->to(DType::f64);
      decoder->eval();
      const std::int64_t T = 5, N = 2, S = 3, t_axis = batch_first ? 1 : 0;
      const Tensor tgt = Tensor::normal(batch_first ? tg::Shape{N, T, 4} : tg::Shape{T, N, 4}, 0, 1, gen, DType::f64);
      const Tensor memory = Tensor::normal(batch_first ? tg::Shape{N, S, 4} : tg::Shape{S, N, 4}, 0, 1, gen, DType::f64);
      const Tensor memory_pad = Tensor::from_vector(std::vector<std::int64_t>{0, 0, 1, 0, 0, 0}, {N, S});
      const Tensor full = decoder->forward(tgt, memory, Transformer::generate_square_subsequent_mask(T, DType::f64),
                                           Tensor(), Tensor(), memory_pad);
      // One position at a time, then the same with chunks of 2 + 1 + 2 positions; the padding mask
      // as i64 and as bool (PyTorch's), which must block the same key.
      for (const DType pad_dtype : {DType::i64, DType::b8})
        for (const std::vector<std::int64_t>& chunks : {std::vector<std::int64_t>{1, 1, 1, 1, 1}, {2, 1, 2}}) {
          const Tensor pad = memory_pad.to(pad_dtype);
          tg::nn::TransformerDecoderCache cache;
          std::vector<Tensor> steps;
          std::int64_t start = 0;
          for (const std::int64_t len : chunks) {
            steps.push_back(decoder->forward_step(tg::narrow(tgt, t_axis, start, len), memory, cache, pad));
            start += len;
            EXPECT_EQ(cache.length(), start);
          }
          EXPECT_LE(tg::nn::testing::max_abs_diff(tg::concat(steps, t_axis), full), 1e-12) << tg::dtype_name(pad_dtype);
        }
    }
  }
  Generator gen(8);
  TransformerDecoderLayer layer = small_decoder_layer(gen, false);  // training, dropout 0.1
  tg::nn::TransformerDecoderLayerCache cache;
  EXPECT_THROW(layer->forward_step(Tensor::zeros({1, 2, 4}), Tensor::zeros({3, 2, 4}), cache), std::invalid_argument);
  layer->eval();
  EXPECT_NO_THROW(layer->forward_step(Tensor::zeros({1, 2, 4}), Tensor::zeros({3, 2, 4}), cache));
  EXPECT_THROW(layer->forward_step(Tensor::zeros({1, 3, 4}), Tensor::zeros({3, 3, 4}), cache), std::invalid_argument);
  // The in-projection rows were cut at the first step and are kept for the next: self q, k, v, then cross q.
  for (int part = 0; part < 4; ++part) {
    const auto& mha = part < 3 ? *layer->self_attn : *layer->multihead_attn;
    const std::int64_t row = part < 3 ? part * 4 : 0;
    ASSERT_TRUE(cache.projection_weights[part].defined()) << part;
    EXPECT_EQ(tg::nn::testing::max_abs_diff(cache.projection_weights[part], tg::narrow(mha.in_proj_weight, 0, row, 4)), 0.0);
    EXPECT_EQ(tg::nn::testing::max_abs_diff(cache.projection_biases[part], tg::narrow(mha.in_proj_bias, 0, row, 4)), 0.0);
  }
  // Views of the parameters' buffers, not copies, marked for the bf16 weight cache.
  for (int part = 0; part < 4; ++part) {
    const auto& mha = part < 3 ? *layer->self_attn : *layer->multihead_attn;
    EXPECT_TRUE(cache.projection_weights[part].shares_storage(mha.in_proj_weight)) << part;
    EXPECT_TRUE(cache.projection_biases[part].shares_storage(mha.in_proj_bias)) << part;
    EXPECT_TRUE(tg::autocast::is_cacheable(cache.projection_weights[part])) << part;
  }
  const Tensor kept = cache.projection_weights[0];
  layer->forward_step(Tensor::zeros({1, 2, 4}), Tensor::zeros({3, 2, 4}), cache);
  EXPECT_EQ(cache.projection_weights[0].data<float>(), kept.data<float>());  // not cut again
}

// Under bf16 autocast the in-projection rows forward_step keeps (views of in_proj_weight, marked
// cacheable) are read from the weight cache. At 8 rows (over kDirectRows, where a product on an
// uncached operand rounds and packs it at every call) the steps give the bits of the path without
// the cache; the copies are packed once, kept for the next decode (at batch 1 too) and renewed
// after an in-place write to the parameter.
TEST(TransformerDecoder, ForwardStepBf16ReadsCachedProjectionRows) {
  Generator gen(9);
  TransformerDecoderLayer layer({.d_model = 64, .nhead = 4, .dim_feedforward = 96, .dropout = 0.0, .batch_first = true},
                                gen);
  layer->eval();
  tg::NoGradGuard no_grad;
  const std::int64_t S = 6, T = 4;
  const Tensor tgt = Tensor::normal({8, T, 64}, 0, 1, gen), memory = Tensor::normal({8, S, 64}, 0, 1, gen);
  auto decode = [&](std::int64_t N, bool cache_enabled) {
    tg::autocast::Guard bf16(tg::autocast::Precision::bf16, true, cache_enabled);
    tg::nn::TransformerDecoderLayerCache cache;
    const Tensor mem = tg::narrow(memory, 0, 0, N);
    std::vector<float> out;
    for (std::int64_t t = 0; t < T; ++t) {
      const auto y = layer->forward_step(tg::narrow(tg::narrow(tgt, 0, 0, N), 1, t, 1), mem, cache).to_vector<float>();
      out.insert(out.end(), y.begin(), y.end());
    }
    return out;
  };
  tg::autocast::clear_cache();
  const auto s0 = tg::autocast::cache_stats();
  const auto cached = decode(8, true);
  const auto s1 = tg::autocast::cache_stats();
  EXPECT_EQ(cached, decode(8, false));
  // Self q, k, v rows, cross q, k, v rows (k and v on the memory, at the first step), both
  // out_proj, linear1 and linear2: 10 copies, and 8 products a step.
  EXPECT_EQ(s1.entries, 10);
  EXPECT_EQ(s1.packs - s0.packs, 10);
  EXPECT_EQ(s1.hits - s0.hits, 8 * (T - 1));
  EXPECT_EQ(decode(8, true), cached);  // a new decode: nothing packed
  const auto s2 = tg::autocast::cache_stats();
  EXPECT_EQ(s2.packs - s1.packs, 0);
  EXPECT_EQ(s2.hits - s1.hits, 8 * T + 2);
  decode(1, true);  // batch 1: the same copies
  const auto s3 = tg::autocast::cache_stats();
  EXPECT_EQ(s3.packs - s2.packs, 0);
  EXPECT_EQ(s3.hits - s2.hits, 8 * T + 2);
  layer->self_attn->in_proj_weight.mul_(0.5);  // in place: the self-attention's three rows renewed
  const auto renewed = decode(8, true);
  const auto s4 = tg::autocast::cache_stats();
  EXPECT_EQ(s4.packs - s3.packs, 3);
  EXPECT_EQ(s4.entries, 10);
  EXPECT_EQ(renewed, decode(8, false));
  EXPECT_NE(renewed, cached);
  tg::autocast::clear_cache();
}

// ---- positional encodings ----------------------------------------------------------------------

TEST(PositionalEncoding, SinusoidalTableMatchesTheTutorialAndIsNoParameter) {
  const Tensor want = fixture_get("pe.table");  // (50, 8), float64
  tg::nn::SinusoidalPositionalEncoding pe({.d_model = 8, .max_len = 50, .dropout = 0.0});
  const double err = fixture_error(pe->pe(), want);
  EXPECT_LE(err, 1e-15);
  std::cout << "[ fixture  ] pe.table: max abs error vs PyTorch " << err << "\n";
  EXPECT_TRUE(pe->named_parameters().empty());
  // A non-persistent buffer: listed, converted by to(), not in the state_dict.
  ASSERT_EQ(pe->named_buffers().size(), 1u);
  EXPECT_EQ(pe->named_buffers()[0].first, "pe");
  EXPECT_EQ(pe->named_buffers()[0].second.impl(), pe->pe().impl());
  EXPECT_TRUE(pe->state_dict().empty());
  {
    tg::nn::SinusoidalPositionalEncoding pe32({.d_model = 8, .max_len = 50, .dropout = 0.0});
    pe32->eval();
    const Tensor z = Tensor::zeros({4, 2, 8});
    const std::vector<float> before = pe32(z).to_vector<float>();
    pe32->to(DType::f32);
    EXPECT_EQ(pe32->pe().dtype(), DType::f32);
    EXPECT_EQ(pe32(z).to_vector<float>(), before);  // rounded once from the float64 table either way
  }
  EXPECT_EQ(tg::nn::sinusoidal_position_table(3, 5).shape(), (tg::Shape{3, 5}));  // odd d_model
  Generator gen(9);
  // (T, N, E): every batch column gets the same positions; start shifts them.
  const Tensor x = Tensor::normal({4, 2, 8}, 0, 1, gen, DType::f64);
  const Tensor y = pe->forward(x, 3);
  for (std::int64_t t = 0; t < 4; ++t)
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t e = 0; e < 8; ++e)
        EXPECT_DOUBLE_EQ(y.at({t, n, e}), x.at({t, n, e}) + want.at({t + 3, e}));
  EXPECT_EQ(pe->forward(Tensor::zeros({4, 2, 8})).dtype(), DType::f32);
  tg::nn::SinusoidalPositionalEncoding pe_bf({.d_model = 8, .max_len = 50, .batch_first = true});
  pe_bf->eval();
  EXPECT_EQ(pe_bf->forward(Tensor::zeros({2, 4, 8}), 1).at({1, 2, 0}), static_cast<float>(want.at({3, 0})));
  EXPECT_THROW(pe->forward(x, 47), std::invalid_argument);             // 47 + 4 > 50
  EXPECT_THROW(pe->forward(Tensor::zeros({4, 2, 6})), std::invalid_argument);  // not d_model
  const auto report = tg::gradcheck([&](const std::vector<Tensor>& in) { return pe->forward(in[0], 1); },
                                    {tg::testing::rand64({3, 2, 8}, gen)});
  EXPECT_TRUE(report.ok) << report;
}

TEST(PositionalEncoding, LearnedEmbeddingAddsRowsAndGradchecks) {
  Generator gen(10);
  tg::nn::LearnedPositionalEmbedding pos({.d_model = 3, .max_len = 6, .dropout = 0.0, .batch_first = true}, gen);
  ASSERT_EQ(pos->named_parameters().size(), 1u);
  EXPECT_EQ(pos->named_parameters()[0].first, "weight");
  EXPECT_EQ(pos->weight.shape(), (tg::Shape{6, 3}));
  pos->to(DType::f64);
  const Tensor x = tg::testing::rand64({2, 4, 3}, gen);
  const Tensor y = pos->forward(x, 2);
  EXPECT_DOUBLE_EQ(y.at({1, 3, 2}), x.at({1, 3, 2}) + pos->weight.at({5, 2}));
  EXPECT_THROW(pos->forward(x, 3), std::invalid_argument);  // 3 + 4 > 6
  gradcheck_module(*pos, {x}, [&](const std::vector<Tensor>& in) { return pos->forward(in[0], 1); });
  // Unbatched (T, E), dropout only in training.
  tg::nn::LearnedPositionalEmbedding drop({.d_model = 3, .max_len = 6, .dropout = 0.5}, gen);
  const Tensor u = Tensor::ones({4, 3});
  drop->eval();
  EXPECT_LE(tg::nn::testing::max_abs_diff(drop->forward(u), u + tg::narrow(drop->weight, 0, 0, 4)), 0.0);
  drop->train();
  EXPECT_GT(tg::nn::testing::max_abs_diff(drop->forward(u), u + tg::narrow(drop->weight, 0, 0, 4)), 0.0);
}

// ---- the feed-forward activation: named (enum) or a callable, as torch's `activation` ----------

namespace {

using tg::nn::TransformerActivationFn;

/// Output and every gradient of an encoder layer, a decoder layer and a Transformer built from
/// Generator(seed) with `activation`, on fixed float32 inputs.
std::vector<std::vector<float>> run_all(const TransformerActivationFn& activation) {
  std::vector<std::vector<float>> out;
  auto record = [&](tg::nn::Module& m, const Tensor& y, std::vector<Tensor> xs) {
    tg::sum(y * y).backward();
    out.push_back(y.to_vector<float>());
    for (const Tensor& x : xs) out.push_back(x.grad().to_vector<float>());
    for (const auto& [n, p] : m.named_parameters()) out.push_back(p.grad().to_vector<float>());
  };
  Generator gen(11);
  const Tensor src = Tensor::normal({3, 2, 4}, 0, 1, gen).requires_grad_();
  const Tensor tgt = Tensor::normal({2, 2, 4}, 0, 1, gen).requires_grad_();
  TransformerEncoderLayer enc({.d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0, .activation = activation},
                              gen);
  record(*enc, enc->forward(src), {src});
  TransformerDecoderLayer dec({.d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0, .activation = activation,
                               .norm_first = true},
                              gen);
  record(*dec, dec->forward(tgt, src.detach()), {tgt});
  Transformer model({.d_model = 4, .nhead = 2, .num_encoder_layers = 2, .num_decoder_layers = 1, .dim_feedforward = 6,
                     .dropout = 0.0, .activation = activation},
                    gen);
  record(*model, model->forward(src.detach(), tgt.detach()), {});
  return out;
}

}  // namespace

TEST(TransformerActivation, CallableEqualsTheNamedActivationBitwise) {
  using F = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<TransformerActivation, F>> cases = {
      {TransformerActivation::relu, [](const Tensor& x) { return tg::relu(x); }},
      {TransformerActivation::gelu, [](const Tensor& x) { return tg::gelu(x); }},
      {TransformerActivation::gelu_tanh, [](const Tensor& x) { return tg::gelu(x, tg::GeluApproximate::tanh); }},
      {TransformerActivation::silu, [](const Tensor& x) { return tg::silu(x); }},
      {TransformerActivation::tanh, [](const Tensor& x) { return tg::tanh(x); }},
      {TransformerActivation::sigmoid, [](const Tensor& x) { return tg::sigmoid(x); }},
  };
  std::vector<std::vector<float>> relu_result;
  for (const auto& [kind, fn] : cases) {
    const TransformerActivationFn named = kind, callable = fn;
    SCOPED_TRACE(named.str());
    EXPECT_TRUE(callable.is_callable());
    EXPECT_TRUE(named == kind);
    EXPECT_FALSE(callable == kind);
    const auto a = run_all(named), b = run_all(callable);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "tensor " << i;
    if (kind == TransformerActivation::relu) relu_result = a;
    else EXPECT_NE(a.front(), relu_result.front());  // the activation is really used
  }
  // A plain function converts too, and the default is relu (as torch's).
  EXPECT_EQ(run_all(tg::relu), relu_result);
  EXPECT_EQ(run_all(TransformerActivationFn()), relu_result);
  EXPECT_THROW(TransformerActivationFn{F{}}, std::invalid_argument);  // an empty std::function
}

TEST(TransformerActivation, PrintedAndClonedIntoStacks) {
  Generator gen(12);
  EXPECT_NE(TransformerEncoderLayer({.d_model = 4, .nhead = 2}, gen)->str().find("activation=relu"), std::string::npos);
  EXPECT_NE(TransformerEncoderLayer({.d_model = 4, .nhead = 2, .activation = TransformerActivation::gelu_tanh}, gen)
                ->str()
                .find("activation=gelu_tanh"),
            std::string::npos);
  int calls = 0;
  TransformerEncoderLayer proto({.d_model = 4, .nhead = 2, .dim_feedforward = 6,
                                 .activation = [&calls](const Tensor& x) {
                                   ++calls;
                                   return tg::tanh(x);
                                 }},
                                gen);
  EXPECT_NE(proto->str().find("activation=<callable>"), std::string::npos);
  TransformerEncoder encoder(proto, 3);
  encoder->eval();
  encoder->forward(Tensor::zeros({2, 1, 4}));
  EXPECT_EQ(calls, 3);  // each clone calls the user's function
}

TEST(TransformerActivation, GradchecksWithTanhGeluAndACallable) {
  Generator gen(13);
  const std::vector<TransformerActivationFn> activations = {
      TransformerActivation::gelu_tanh, [](const Tensor& x) { return tg::softplus(x) * 0.5 + tg::tanh(x); }};
  for (const auto& activation : activations) {
    SCOPED_TRACE(activation.str());
    TransformerEncoderLayer layer({.d_model = 4, .nhead = 2, .dim_feedforward = 6, .activation = activation}, gen);
    layer->to(DType::f64);
    layer->eval();
    const Tensor src = tg::testing::rand64({3, 2, 4}, gen);
    gradcheck_module(*layer, {src}, [&](const std::vector<Tensor>& in) { return layer->forward(in[0]); });
  }
}
