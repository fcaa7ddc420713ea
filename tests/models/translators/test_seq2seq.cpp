#include <gtest/gtest.h>

#include "../../autograd/error_of.h"
#include "../../nn/layer_test_util.h"
#include "autograd/compact_grad.h"
#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_compare.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "models/text/data.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq.h"
#include "nn/nn.h"

using namespace tg;
using namespace tg::models;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::expect_all_within;
using tg::nn::testing::loss_and_parameter_grads;
using tg::nn::testing::max_abs_diff;
using tg::nn::testing::parameter_inputs;

namespace {

ModelConfig tiny(const std::string& model) {
  ModelConfig c;
  c.model = model;
  c.src_vocab = 9;
  c.tgt_vocab = 8;
  c.embed_size = 3;
  c.num_hiddens = 4;
  c.num_layers = model == "d2l" ? 2 : 1;
  c.dropout = 0.0;  // gradcheck needs a deterministic function
  c.num_heads = 1;  // transformer: embed_size 3
  c.num_steps = 4;
  return c;
}

Tensor ids(std::vector<std::int64_t> v, Shape s) { return Tensor::from_vector(v, s); }

// A batch of 3 with different source lengths (one full, one short, one of length 1).
struct Batch {
  Tensor src = ids({4, 5, 6, 3, 7, 3, 1, 1, 3, 1, 1, 1}, {3, 4});
  Tensor src_len = ids({4, 2, 1}, {3});
  Tensor tgt = ids({5, 6, 7, 3, 4, 3, 1, 1, 3, 1, 1, 1}, {3, 4});
  Tensor tgt_len = ids({4, 2, 1}, {3});
};

}  // namespace

TEST(Seq2Seq, D2lParameterNamesMatchPyTorch) {
  Generator gen(0);
  auto model = make_model(tiny("d2l"), gen);
  std::vector<std::string> names;
  for (const auto& [name, p] : model->named_parameters()) names.push_back(name);
  std::vector<std::string> expected = {"encoder.embedding.weight"};
  for (int l = 0; l < 2; ++l)
    for (const char* w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"})
      expected.push_back("encoder.rnn." + std::string(w) + "_l" + std::to_string(l));
  for (const char* w : {"decoder.attention.W_k.weight", "decoder.attention.W_q.weight", "decoder.attention.w_v.weight",
                        "decoder.embedding.weight"})
    expected.push_back(w);
  for (int l = 0; l < 2; ++l)
    for (const char* w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"})
      expected.push_back("decoder.rnn." + std::string(w) + "_l" + std::to_string(l));
  expected.push_back("decoder.dense.weight");
  expected.push_back("decoder.dense.bias");
  EXPECT_EQ(names, expected);
  EXPECT_EQ(model->parameter("decoder.rnn.weight_ih_l0").shape(), (Shape{12, 3 + 4}));
}

TEST(Seq2Seq, RnnSearchParameterShapes) {
  Generator gen(0);
  ModelConfig c = tiny("rnnsearch");
  auto model = make_model(c, gen);
  EXPECT_EQ(model->parameter("encoder.rnn.weight_ih_l0_reverse").shape(), (Shape{12, 3}));
  EXPECT_EQ(model->parameter("decoder.attention.W_k.weight").shape(), (Shape{4, 8}));  // U_a on [→h; ←h]
  EXPECT_EQ(model->parameter("decoder.rnn.weight_ih").shape(), (Shape{12, 3 + 8}));   // [E y ; c]
  EXPECT_EQ(model->parameter("decoder.maxout.weight").shape(), (Shape{4, 4 + 3 + 8}));  // 2 x 2 units
  EXPECT_EQ(model->parameter("decoder.dense.weight").shape(), (Shape{8, 2}));
  c.readout = Readout::linear;
  auto linear = make_model(c, gen);
  EXPECT_EQ(linear->parameter("decoder.dense.weight").shape(), (Shape{8, 4 + 3 + 8}));
}

TEST(Seq2Seq, ConfigErrorsNameTheField) {
  ModelConfig c = tiny("rnnsearch");
  c.embed_size = 0;
  Generator gen(0);
  try {
    make_model(c, gen);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("embed_size"), std::string::npos) << e.what();
  }
  c = tiny("rnnsearch");
  c.num_layers = 2;  // a model's own rule, from its registry entry
  try {
    make_model(c, gen);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rnnsearch has one recurrent layer"), std::string::npos) << e.what();
  }
  // Typed options are parsed at the boundary, with the allowed values in the message.
  try {
    (void)parse_option<Readout>("softmax", "--readout");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "--readout: unknown value \"softmax\" (allowed: maxout, linear)");
  }
  try {
    (void)ModelKind("nope");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "unknown model \"nope\" (registered: d2l, rnnsearch, rnnencdec, transformer)");
  }
}

// tie_embeddings: the target embedding is the vocabulary projection (no decoder.dense), and only
// where the shapes allow it; the models without a tie refuse it instead of ignoring it.
TEST(Seq2Seq, TiedEmbeddingsReplaceTheOutputProjection) {
  for (const char* name : {"rnnsearch", "rnnencdec"}) {
    SCOPED_TRACE(name);
    ModelConfig c = tiny(name);
    c.maxout_units = c.embed_size;
    Generator gen(2);
    const std::int64_t untied = make_model(c, gen)->num_parameters();
    c.tie_embeddings = true;
    auto model = make_model(c, gen);
    EXPECT_EQ(model->num_parameters(), untied - c.tgt_vocab * (c.embed_size + 1));  // W_o and its bias
    for (const auto& [param, t] : model->named_parameters()) EXPECT_EQ(param.find("decoder.dense"), std::string::npos);
    // Drawn as the untied projection: U(-1/sqrt(3), 1/sqrt(3)).
    Tensor table = model->parameter("decoder.embedding.weight");
    for (std::int64_t i = 0; i < table.numel(); ++i) EXPECT_LE(std::abs(table.data<float>()[i]), 1 / std::sqrt(3.0));
    // The projection reads the table: a change of one row changes only that token's logits.
    Batch b;
    const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
    const Tensor before = model->forward(b.src, b.src_len, dec_in);
    {
      NoGradGuard no_grad;
      table.data<float>()[5 * c.embed_size] += 1.0f;  // row 5, not an input of dec_in's first step
    }
    const Tensor after = model->forward(b.src, b.src_len, dec_in);
    for (std::int64_t v = 0; v < c.tgt_vocab; ++v) {
      const float d = after.data<float>()[v] - before.data<float>()[v];  // batch 0, step 0, token v
      if (v == 5) EXPECT_NE(d, 0.0f);
      else EXPECT_EQ(d, 0.0f) << v;
    }
  }
  auto error = [](const ModelConfig& c) {
    Generator gen(0);
    return tg::testing::error_of<std::invalid_argument>([&] { make_model(c, gen); });
  };
  ModelConfig c = tiny("rnnsearch");
  c.tie_embeddings = true;  // maxout units 2 (num_hiddens / 2), embed_size 3
  EXPECT_EQ(error(c), "model config: tie_embeddings needs maxout_units = embed_size (the target embedding is the output "
                      "projection), got maxout units 2 and embed_size 3");
  c.readout = Readout::linear;
  EXPECT_EQ(error(c), "model config: tie_embeddings needs the maxout readout (the linear readout's input is [s_i; E "
                      "y_{i-1}; c_i], not an embedding)");
  c = tiny("rnnencdec");
  c.tie_embeddings = true;
  EXPECT_NE(error(c).find("tie_embeddings needs maxout_units = embed_size"), std::string::npos) << error(c);
  c = tiny("d2l");
  c.tie_embeddings = true;
  EXPECT_NE(error(c).find("tie_embeddings applies to rnnsearch, rnnencdec and transformer only"), std::string::npos)
      << error(c);
}

TEST(Seq2Seq, RegistryDrivesNamesAndFactories) {
  ASSERT_EQ(model_names(), (std::vector<std::string>{"d2l", "rnnsearch", "rnnencdec", "transformer"}));
  for (const ModelSpec* spec : model_registry()) {
    SCOPED_TRACE(std::string(spec->name));
    EXPECT_FALSE(spec->description.empty());
    EXPECT_EQ(ModelKind(spec->name).name(), spec->name);
    ModelConfig c = tiny(std::string(spec->name));
    c.num_layers = spec->default_num_layers;
    Generator gen(1);
    EXPECT_GT(make_model(c, gen)->num_parameters(), 0);
  }
  EXPECT_EQ(ModelKind(), ModelKind("d2l"));
  for (const Ablation a : option_values<Ablation>()) EXPECT_EQ(parse_option<Ablation>(to_string(a), "x"), a);
  EXPECT_EQ(option_names<AttentionScore>(), (std::vector<std::string>{"additive", "dot", "scaled_dot"}));
}

// The whole model, every parameter, through the loss: float64 central differences.
class ModelGradcheck : public ::testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {};

TEST_P(ModelGradcheck, LossGradientMatchesFiniteDifferences) {
  const auto& [model_name, readout, variant] = GetParam();
  ModelConfig c = tiny(model_name);
  c.readout = parse_option<Readout>(readout, "readout");
  const bool compact = variant == "compact" || variant == "tied_compact";
  const bool tied = variant == "tied" || variant == "tied_compact";
  if (tied) c.tie_embeddings = true, c.maxout_units = c.embed_size;
  if (variant == "dot" || variant == "scaled_dot") c.attention = parse_option<AttentionScore>(variant, "attention");
  else if (compact) c.src_vocab = 30, c.tgt_vocab = 40;  // large enough for compact forms to be smaller
  else if (variant != "none" && !tied) c.ablation = parse_option<Ablation>(variant, "ablation");
  Generator gen(3);
  auto model = make_model(c, gen);
  model->to(DType::f64);
  Batch b;
  const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
  auto inputs = parameter_inputs(*model);
  if (compact) {  // as allow_compact_grads: the embedding tables and the vocabulary projection
    const auto names = model->named_parameters();
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i].first.find("embedding.weight") != std::string::npos || names[i].first == "decoder.dense.weight")
        inputs[i].allow_compact_grad();
  }
  auto fn = [&](const std::vector<Tensor>& xs) {
    bind_parameters(*model, xs, 0);
    return sequence_loss(model->forward(b.src, b.src_len, dec_in), b.tgt, b.tgt_len);
  };
  // In float64 the central differences are good to ~1e-10 here; torch's default tolerances (atol
  // 1e-5, rtol 1e-3) would let a 1% error in these ~1e-3 gradients through.
  const GradcheckOptions tight{.eps = 1e-6, .atol = 1e-8, .rtol = 1e-6};
  EXPECT_GRADCHECK(fn, inputs, tight);
  // Seq2Seq::loss (readout only at valid positions for rnnsearch/rnnencdec) through the same check.
  auto loss_fn = [&](const std::vector<Tensor>& xs) {
    bind_parameters(*model, xs, 0);
    return model->loss(b.src, b.src_len, dec_in, b.tgt, b.tgt_len);
  };
  EXPECT_GRADCHECK(loss_fn, inputs, tight);
  if (compact) {  // the check above went through the compact forms
    bind_parameters(*model, inputs, 0);
    model->zero_grad();
    model->loss(b.src, b.src_len, dec_in, b.tgt, b.tgt_len).backward();
    EXPECT_NE(model->parameter("encoder.embedding.weight").compact_grad(), nullptr);
    // Tied, the target table has two gradients (lookup rows and the projection's), so it is dense.
    EXPECT_EQ(model->parameter("decoder.embedding.weight").compact_grad() == nullptr, tied);
    // rnnsearch's readout runs at the 7 valid positions only: 7 x (15 + 40) < 15 x 40. (d2l's runs
    // at all 12 positions of its 4-unit state, where the pair would not be smaller.)
    if (model_name == "rnnsearch" && !tied) {
      ASSERT_NE(model->parameter("decoder.dense.weight").compact_grad(), nullptr);
      EXPECT_STREQ(model->parameter("decoder.dense.weight").compact_grad()->kind(), "low_rank");
    }
  }
}

// allow_compact_grads changes memory, not training: a step (loss, backward, clipping that scales,
// Adam) gives the same parameters as with dense gradients. Float64: equal to 1e-12 (only the
// low-rank norm is summed differently); float32: the same up to that norm's rounding.
TEST(Seq2Seq, CompactGradsTrainLikeDenseGradients) {
  for (DType dt : {DType::f64, DType::f32}) {
    ModelConfig c = tiny("rnnsearch");
    c.readout = Readout::linear, c.src_vocab = 30, c.tgt_vocab = 40;
    Batch b;
    const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
    auto train = [&](bool compact) {
      Generator gen(5);
      auto model = make_model(c, gen);
      model->to(dt);
      if (compact) allow_compact_grads(*model);
      nn::Adam opt(model->named_parameters(), nn::AdamOptions(0.01));
      for (int step = 0; step < 3; ++step) {
        opt.zero_grad();
        model->loss(b.src, b.src_len, dec_in, b.tgt, b.tgt_len).backward();
        if (compact) {
          EXPECT_NE(model->parameter("decoder.dense.weight").compact_grad(), nullptr);
        }
        EXPECT_GT(nn::clip_grad_norm(model->parameters(), 0.05), 0.05);  // clipping scales the gradients
        opt.step();
      }
      return model->named_parameters();
    };
    const auto dense = train(false), compact = train(true);
    ASSERT_EQ(dense.size(), compact.size());
    for (std::size_t i = 0; i < dense.size(); ++i)
      EXPECT_LT(max_abs_diff(dense[i].second, compact[i].second), dt == DType::f64 ? 1e-12 : 1e-6) << dense[i].first;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Seq2Seq, ModelGradcheck,
    ::testing::Values(std::make_tuple("d2l", "linear", "none"), std::make_tuple("rnnsearch", "maxout", "none"),
                      std::make_tuple("rnnsearch", "linear", "none"), std::make_tuple("rnnsearch", "maxout", "dot"),
                      std::make_tuple("rnnsearch", "maxout", "scaled_dot"),
                      std::make_tuple("rnnsearch", "maxout", "zero_init"),
                      std::make_tuple("rnnsearch", "maxout", "state_only_output"),
                      std::make_tuple("rnnsearch", "maxout", "no_prev_token"),
                      std::make_tuple("rnnsearch", "maxout", "recurrence_only"),
                      std::make_tuple("rnnencdec", "maxout", "none"), std::make_tuple("rnnencdec", "linear", "none"),
                      std::make_tuple("rnnsearch", "linear", "compact"), std::make_tuple("d2l", "linear", "compact"),
                      std::make_tuple("rnnsearch", "maxout", "tied"), std::make_tuple("rnnencdec", "maxout", "tied"),
                      std::make_tuple("rnnsearch", "maxout", "tied_compact")),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" + std::get<2>(info.param);
    });

TEST(Seq2Seq, TeacherForcingEqualsStepByStep) {
  for (const std::string name : {"d2l", "rnnsearch", "rnnencdec"}) {
    SCOPED_TRACE(name);
    Generator gen(5);
    auto model = make_model(tiny(name), gen);
    model->to(DType::f64);
    model->eval();
    Batch b;
    const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
    Tensor att_fast, att_slow;
    NoGradGuard no_grad;
    const Tensor fast = model->forward(b.src, b.src_len, dec_in, &att_fast);
    const Tensor slow = model->Seq2Seq::forward(b.src, b.src_len, dec_in, &att_slow);
    EXPECT_LT(max_abs_diff(fast, slow), 1e-12);
    EXPECT_EQ(fast.shape(), (Shape{3, 4, 8}));
    if (model->has_attention()) {
      EXPECT_EQ(att_fast.shape(), (Shape{3, 4, 4}));
      EXPECT_LT(max_abs_diff(att_fast, att_slow), 1e-12);
    }
  }
}

// embedding_dropout and readout_dropout: the same initial weights as without them; in eval mode
// the same function; in training mode a different loss, reproducible from the seed, whose
// gradient reaches every parameter.
TEST(Seq2Seq, EmbeddingAndReadoutDropout) {
  for (const std::string name : {"rnnsearch", "rnnencdec"}) {
    SCOPED_TRACE(name);
    ModelConfig plain = tiny(name);
    ModelConfig dropped = plain;
    dropped.embedding_dropout = 0.3;
    dropped.readout_dropout = 0.4;
    auto make = [](const ModelConfig& c) {
      Generator gen(5);
      auto model = make_model(c, gen);
      model->to(DType::f64);
      return model;
    };
    auto a = make(plain), b = make(dropped);
    const auto pa = a->named_parameters(), pb = b->named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (std::size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i].first, pb[i].first);
      EXPECT_EQ(max_abs_diff(pa[i].second, pb[i].second), 0.0) << pa[i].first;
    }
    Batch batch;
    const Tensor dec_in = teacher_forcing_input(batch.tgt, 2);
    auto loss_of = [&](Seq2Seq& m) { return m.loss(batch.src, batch.src_len, dec_in, batch.tgt, batch.tgt_len, 0.0); };
    a->eval();
    b->eval();
    {
      NoGradGuard no_grad;
      EXPECT_EQ(loss_of(*a).item(), loss_of(*b).item());
    }
    a->train();
    b->train();
    const double without = loss_of(*a).item();
    const Tensor with = loss_of(*b);
    EXPECT_NE(with.item(), without);
    with.backward();
    for (const auto& [pname, p] : b->named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << pname;
      EXPECT_TRUE(all(isfinite(p.grad())).item() != 0) << pname;
    }
    auto c = make(dropped);
    c->train();
    EXPECT_EQ(loss_of(*c).item(), with.item());  // same seed, same masks
  }
}

TEST(Seq2Seq, MaskedModelsIgnorePadding) {
  // rnnsearch and rnnencdec mask the encoder by valid length: a sentence's logits do not depend
  // on the padding after it, nor on the other sentences in its batch.
  for (const std::string name : {"rnnsearch", "rnnencdec"}) {
    SCOPED_TRACE(name);
    Generator gen(6);
    auto model = make_model(tiny(name), gen);
    model->to(DType::f64);
    model->eval();
    NoGradGuard no_grad;
    Batch b;
    const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
    const Tensor batched = model->forward(b.src, b.src_len, dec_in);
    // Row 1 alone, with different garbage in its padded positions.
    const Tensor alone = model->forward(ids({7, 3, 5, 6}, {1, 4}), ids({2}, {1}), narrow(dec_in, 0, 1, 1));
    EXPECT_LT(max_abs_diff(narrow(batched, 0, 1, 1), alone), 1e-12);
  }
}

TEST(Seq2Seq, AttentionIsMaskedBySourceLength) {
  Generator gen(7);
  auto model = make_model(tiny("rnnsearch"), gen);
  model->eval();
  NoGradGuard no_grad;
  Batch b;
  DecoderState state = model->begin(b.src, b.src_len);
  model->step(ids({2, 2, 2}, {3}), state);
  ASSERT_EQ(state.attention.shape(), (Shape{3, 4}));
  EXPECT_NEAR(state.attention.at({1, 2}) + state.attention.at({1, 3}), 0.0, 1e-6);
  EXPECT_NEAR(state.attention.at({2, 0}), 1.0, 1e-6);
  // Beam search reorders hypotheses with DecoderState::reorder.
  DecoderState picked = state.reorder(ids({2, 2, 0}, {3}));
  EXPECT_EQ(picked.attention.at({0, 0}), state.attention.at({2, 0}));
  EXPECT_EQ(picked.hidden.shape(), state.hidden.shape());
}

TEST(Seq2Seq, LossHelpers) {
  const Tensor y = ids({5, 6, 3, 1}, {1, 4});
  EXPECT_EQ(teacher_forcing_input(y, 2).to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 5, 6, 3}));
  // Uniform logits: the loss is log(V) whatever the mask.
  const Tensor logits = Tensor::zeros({1, 4, 10});
  EXPECT_NEAR(sequence_loss(logits, y, ids({3}, {1})).item(), std::log(10.0), 1e-6);
  EXPECT_THROW(sequence_loss(logits, ids({1, 2}, {1, 2}), ids({2}, {1})), std::invalid_argument);
}

TEST(Seq2Seq, TrimmedBatchGivesTheSameLossAndGradients) {
  // train() cuts a batch to its longest valid rows when padding_is_inert(); that must not change
  // the loss or any gradient. Rows of length 3 and 2 padded to width 4 (one pad column each side).
  for (const std::string name : {"rnnsearch", "rnnencdec"}) {
    SCOPED_TRACE(name);
    Generator gen(8);
    auto model = make_model(tiny(name), gen);
    model->to(DType::f64);
    ASSERT_TRUE(model->padding_is_inert());
    Seq2SeqBatch full{.src = ids({4, 5, 3, 1, 6, 3, 1, 1}, {2, 4}),
                      .src_valid_len = ids({3, 2}, {2}),
                      .tgt = ids({5, 3, 1, 1, 6, 7, 3, 1}, {2, 4}),
                      .tgt_valid_len = ids({2, 3}, {2}),
                      .rows = {0, 1}};
    const Seq2SeqBatch cut = trim_padding(full);
    ASSERT_EQ(cut.src.shape(), (Shape{2, 3}));
    ASSERT_EQ(cut.tgt.shape(), (Shape{2, 3}));
    auto loss_and_grads = [&](const Seq2SeqBatch& b) {
      return loss_and_parameter_grads(
          *model, sequence_loss(model->forward(b.src, b.src_valid_len, teacher_forcing_input(b.tgt, 2)), b.tgt,
                                b.tgt_valid_len));
    };
    expect_all_within(loss_and_grads(full), loss_and_grads(cut), 1e-13);
  }
  Generator gen(8);
  EXPECT_FALSE(make_model(tiny("d2l"), gen)->padding_is_inert());
}

TEST(Seq2Seq, LossEqualsSequenceLossOfForward) {
  for (const std::string name : {"d2l", "rnnsearch", "rnnencdec"}) {
    for (const std::string readout : {"maxout", "linear"}) {
      SCOPED_TRACE(name + " " + readout);
      ModelConfig c = tiny(name);
      c.readout = parse_option<Readout>(readout, "readout");
      Generator gen(9);
      auto model = make_model(c, gen);
      model->to(DType::f64);
      Batch b;
      const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
      const auto fused = loss_and_parameter_grads(*model, model->loss(b.src, b.src_len, dec_in, b.tgt, b.tgt_len));
      const auto full = loss_and_parameter_grads(
          *model, sequence_loss(model->forward(b.src, b.src_len, dec_in), b.tgt, b.tgt_len));
      expect_all_within(fused, full, 1e-13);
    }
  }
  EXPECT_EQ(valid_positions(ids({2, 0, 3}, {3}), 3).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 6, 7, 8}));
}
