// nn::PackedTokens and the packed forwards of MultiheadAttention, TransformerEncoderLayer and
// TransformerDecoderLayer: the same rows, loss and parameter gradients as the padded forward when
// no token attends to padding (float64, both norm placements), gradchecks, and the errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../autograd/error_of.h"
#include "autograd/gradcheck.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "layer_test_util.h"
#include "nn/packed_tokens.h"
#include "nn/transformer.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Tensor;
using tg::nn::PackedTokens;
using tg::nn::TransformerActivation;
using tg::nn::TransformerDecoderLayer;
using tg::nn::TransformerEncoderLayer;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::expect_all_within;
using tg::nn::testing::loss_and_parameter_grads;
using tg::nn::testing::parameter_inputs;
using tg::testing::error_of;

Tensor lengths(const std::vector<std::int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(v.size())}, DType::i64);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<std::int64_t>()[i] = v[i];
  return t;
}

// Additive key padding mask (N, T): -1e9 past each row's length.
Tensor padding_mask(const std::vector<std::int64_t>& len, std::int64_t T) {
  const auto N = static_cast<std::int64_t>(len.size());
  Tensor m = Tensor::zeros({N, T}, DType::f64);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t t = len[static_cast<std::size_t>(n)]; t < T; ++t) m.data<double>()[n * T + t] = -1e9;
  return m;
}

Tensor causal_mask(std::int64_t T) {
  Tensor m = Tensor::zeros({T, T}, DType::f64);
  for (std::int64_t i = 0; i < T; ++i)
    for (std::int64_t j = i + 1; j < T; ++j) m.data<double>()[i * T + j] = -1e9;
  return m;
}

tg::nn::TransformerLayerOptions options(bool norm_first) {
  return {.d_model = 8,
          .nhead = 2,
          .dim_feedforward = 12,
          .dropout = 0.0,
          .activation = norm_first ? TransformerActivation::gelu : TransformerActivation::relu,
          .batch_first = true,
          .norm_first = norm_first};
}

}  // namespace

TEST(PackedTokens, PacksTheValidRowsInOrderAndUnpacksWithZeros) {
  const PackedTokens tokens(lengths({2, 0, 3}), 3);
  EXPECT_EQ(tokens.batch(), 3);
  EXPECT_EQ(tokens.length(), 3);
  EXPECT_EQ(tokens.tokens(), 5);
  EXPECT_EQ(tokens.index().to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 6, 7, 8}));
  Generator gen(1);
  const Tensor x = Tensor::uniform({3, 3, 2}, -1, 1, gen, DType::f64).requires_grad_();
  const Tensor packed = tokens.pack(x);
  ASSERT_EQ(packed.shape(), (tg::Shape{5, 2}));
  const std::vector<double> xv = x.to_vector<double>(), pv = packed.to_vector<double>();
  const std::vector<std::int64_t> rows{0, 1, 6, 7, 8};
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t e = 0; e < 2; ++e) EXPECT_EQ(pv[i * 2 + e], xv[static_cast<std::size_t>(rows[i]) * 2 + e]);
  const std::vector<double> back = tokens.unpack(packed).to_vector<double>();
  for (std::int64_t pos = 0; pos < 9; ++pos) {
    const bool valid = pos < 2 || pos >= 6;
    for (std::size_t e = 0; e < 2; ++e) {
      const std::size_t k = static_cast<std::size_t>(pos) * 2 + e;
      EXPECT_EQ(back[k], valid ? xv[k] : 0.0) << pos;
    }
  }
  const tg::GradcheckReport report = tg::gradcheck(
      [&](const std::vector<Tensor>& in) { return tokens.unpack(tokens.pack(in[0]) * 2.0); }, {x});
  EXPECT_TRUE(report.ok) << report;
  const tg::GradcheckReport second = tg::gradgradcheck(
      [&](const std::vector<Tensor>& in) { return tokens.unpack(tokens.pack(in[0] * in[0])); }, {x});
  EXPECT_TRUE(second.ok) << second;
  const PackedTokens empty(lengths({0, 0}), 4);
  EXPECT_EQ(empty.tokens(), 0);
  EXPECT_EQ(empty.unpack(Tensor::zeros({0, 3})).shape(), (tg::Shape{2, 4, 3}));
}

// pack and unpack are block copies; they give the bits of the gather / scatter they replace
// (index_select of the token rows; index_add into zeros), forward and backward, at 1 and 2 threads
// (rows of 7 x 96 x 128 floats are large enough to be split between the threads), with rows of
// several lengths and an empty row in the middle.
TEST(PackedTokens, CopiesEqualTheGatherAndScatterTheyReplace) {
  const PackedTokens tokens(lengths({5, 0, 2, 7, 1}), 7);
  const Tensor index = tokens.index();
  for (int threads : {1, 2}) {
    tg::set_num_threads(threads);
    Generator gen(4);
    const Tensor padded = Tensor::uniform({5, 7, 96, 128}, -1, 1, gen).requires_grad_();
    const Tensor packed = tokens.pack(padded);
    const Tensor rows = tg::reshape(padded, {35, 96, 128});
    EXPECT_EQ(packed.to_vector<float>(), tg::index_select(rows, 0, index).to_vector<float>());
    const Tensor unpacked = tokens.unpack(packed);
    EXPECT_EQ(tg::reshape(unpacked, {35, 96, 128}).to_vector<float>(),
              tg::index_add(Tensor::zeros({35, 96, 128}), 0, index, packed).to_vector<float>());
    const Tensor w = Tensor::uniform({5, 7, 96, 128}, -1, 1, gen);
    tg::sum(unpacked * w).backward();
    // d/d padded of sum(unpack(pack(padded)) * w) is w at the tokens and zero at the padding.
    EXPECT_EQ(padded.grad().to_vector<float>(),
              tg::reshape(tg::index_add(Tensor::zeros({35, 96, 128}), 0, index,
                                        tg::index_select(tg::reshape(w, {35, 96, 128}), 0, index)),
                          {5, 7, 96, 128}).to_vector<float>());
  }
  tg::set_num_threads(0);
}

TEST(PackedTokens, BadInputIsAClearError) {
  EXPECT_EQ(error_of<std::invalid_argument>([] { PackedTokens(lengths({1, 5}), 4); }),
            "PackedTokens: valid_len[1] = 5 is outside [0, 4]");
  EXPECT_EQ(error_of<std::invalid_argument>([] { PackedTokens(lengths({-1}), 4); }),
            "PackedTokens: valid_len[0] = -1 is outside [0, 4]");
  EXPECT_EQ(error_of<std::invalid_argument>([] { PackedTokens(Tensor::zeros({2}), 4); }),
            "PackedTokens: valid_len must be a 1-D int64 tensor, got [2] float32");
  const PackedTokens tokens(lengths({1, 2}), 4);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tokens.pack(Tensor::zeros({2, 3, 5})); }),
            "PackedTokens::pack: expected (N, length, ...): got [2, 3, 5] for 2 rows of length 4");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tokens.unpack(Tensor::zeros({4, 5})); }),
            "PackedTokens::unpack: expected (tokens, ...): got [4, 5] for 2 rows of length 4");
}

// Encoder layer: the packed rows, their loss and every parameter gradient equal the padded
// forward's at the tokens, with the padding masked.
TEST(PackedTokens, EncoderLayerEqualsThePaddedForwardAtTheTokens) {
  for (bool norm_first : {false, true}) {
    SCOPED_TRACE(norm_first);
    Generator gen(2);
    TransformerEncoderLayer layer(options(norm_first), gen);
    layer->to(DType::f64);
    const std::vector<std::int64_t> len{4, 1, 3};
    const PackedTokens tokens(lengths(len), 4);
    const Tensor x = Tensor::uniform({3, 4, 8}, -1, 1, gen, DType::f64);
    const Tensor pad = padding_mask(len, 4);
    const Tensor r = Tensor::uniform({tokens.tokens(), 8}, -1, 1, gen, DType::f64);
    const auto packed =
        loss_and_parameter_grads(layer, tg::sum(layer->forward_packed(tokens.pack(x), tokens, Tensor(), pad) * r));
    const auto padded = loss_and_parameter_grads(layer, tg::sum(tokens.pack(layer->forward(x, Tensor(), pad)) * r));
    expect_all_within(packed, padded, 1e-12);
  }
}

// Decoder layer: causal self-attention (padding at the ends), memory padding masked.
TEST(PackedTokens, DecoderLayerEqualsThePaddedForwardAtTheTokens) {
  for (bool norm_first : {false, true}) {
    SCOPED_TRACE(norm_first);
    Generator gen(3);
    TransformerDecoderLayer layer(options(norm_first), gen);
    layer->to(DType::f64);
    const std::vector<std::int64_t> tgt_len{2, 5, 3}, mem_len{3, 1, 4};
    const PackedTokens tgt_tokens(lengths(tgt_len), 5), mem_tokens(lengths(mem_len), 4);
    const Tensor x = Tensor::uniform({3, 5, 8}, -1, 1, gen, DType::f64);
    const Tensor memory = Tensor::uniform({3, 4, 8}, -1, 1, gen, DType::f64);
    const Tensor causal = causal_mask(5), pad = padding_mask(mem_len, 4);
    const Tensor r = Tensor::uniform({tgt_tokens.tokens(), 8}, -1, 1, gen, DType::f64);
    const auto packed = loss_and_parameter_grads(
        layer, tg::sum(layer->forward_packed(tgt_tokens.pack(x), tgt_tokens, mem_tokens.pack(memory), mem_tokens, causal,
                                             Tensor(), Tensor(), pad) *
                       r));
    const auto padded = loss_and_parameter_grads(
        layer, tg::sum(tgt_tokens.pack(layer->forward(x, memory, causal, Tensor(), Tensor(), pad)) * r));
    expect_all_within(packed, padded, 1e-12);
  }
}

TEST(PackedTokens, PackedLayersPassGradcheck) {
  Generator gen(4);
  const std::vector<std::int64_t> len{3, 1};
  const PackedTokens tokens(lengths(len), 3);
  const Tensor pad = padding_mask(len, 3);
  TransformerEncoderLayer enc({.d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0, .batch_first = true}, gen);
  enc->to(DType::f64);
  std::vector<Tensor> inputs{Tensor::uniform({tokens.tokens(), 4}, -1, 1, gen, DType::f64).requires_grad_()};
  for (const Tensor& p : parameter_inputs(enc)) inputs.push_back(p);
  const tg::GradcheckReport report = tg::gradcheck(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(enc, xs, 1);
        return enc->forward_packed(xs[0], tokens, Tensor(), pad);
      },
      inputs);
  EXPECT_TRUE(report.ok) << report;
  EXPECT_GT(report.checked, 0);

  TransformerDecoderLayer dec({.d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0, .batch_first = true,
                               .norm_first = true},
                              gen);
  dec->to(DType::f64);
  const PackedTokens tgt_tokens(lengths({2, 3}), 3);
  std::vector<Tensor> dec_inputs{Tensor::uniform({tgt_tokens.tokens(), 4}, -1, 1, gen, DType::f64).requires_grad_(),
                                 Tensor::uniform({tokens.tokens(), 4}, -1, 1, gen, DType::f64).requires_grad_()};
  for (const Tensor& p : parameter_inputs(dec)) dec_inputs.push_back(p);
  const tg::GradcheckReport dec_report = tg::gradcheck(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(dec, xs, 2);
        return dec->forward_packed(xs[0], tgt_tokens, xs[1], tokens, causal_mask(3), Tensor(), Tensor(), pad);
      },
      dec_inputs);
  EXPECT_TRUE(dec_report.ok) << dec_report;
  EXPECT_GT(dec_report.checked, 0);
}

TEST(PackedTokens, MultiheadAttentionForwardPackedChecksItsInputs) {
  Generator gen(5);
  tg::nn::MultiheadAttention mha({.embed_dim = 4, .num_heads = 2, .batch_first = true}, gen);
  const PackedTokens q(lengths({2, 1}), 3), k(lengths({1, 1, 1}), 2);
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              mha->forward_packed(Tensor::zeros({3, 4}), q, Tensor::zeros({3, 4}), Tensor::zeros({3, 4}), k);
            }),
            "MultiheadAttention::forward_packed: batch sizes differ: query [3, 4] (3 tokens), key [3, 4], value [3, 4] "
            "(3 tokens)");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              mha->forward_packed(Tensor::zeros({2, 4}), q, Tensor::zeros({3, 4}), Tensor::zeros({3, 4}), q);
            }),
            "MultiheadAttention::forward_packed: rows differ from the token counts: query [2, 4] (3 tokens), key [3, 4], "
            "value [3, 4] (3 tokens)");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              mha->forward_packed(Tensor::zeros({3, 5}), q, Tensor::zeros({3, 4}), Tensor::zeros({3, 4}), q);
            }),
            "MultiheadAttention::forward_packed: feature sizes differ from embed_dim, kdim, vdim: query [3, 5] (3 tokens), "
            "key [3, 4], value [3, 4] (3 tokens)");
}
