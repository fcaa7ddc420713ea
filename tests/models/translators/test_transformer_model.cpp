// The `transformer` translator: parameters, gradients, the cached step decoder against the full
// recompute, padding, beam reordering of the cache, label smoothing, checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "../../nn/layer_test_util.h"
#include "../test_dirs.h"
#include "autograd/gradcheck.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "models/decoding/decode.h"
#include "models/text/data.h"
#include "models/text/tasks.h"
#include "models/training/trainer.h"
#include "models/text/text.h"
#include "models/training/checkpoint.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq.h"
#include "nn/optim.h"
#include "nn/utils.h"

using namespace tg;
using namespace tg::models;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::expect_all_within;
using tg::nn::testing::loss_and_parameter_grads;
using tg::nn::testing::max_abs_diff;
using tg::nn::testing::parameter_inputs;

namespace {

ModelConfig tiny(bool norm_first = false, bool tie = false) {
  ModelConfig c;
  c.model = "transformer";
  c.src_vocab = 9;
  c.tgt_vocab = 8;
  c.embed_size = 4;
  c.num_hiddens = 6;
  c.num_layers = 2;
  c.num_heads = 2;
  c.dropout = 0.0;
  c.num_steps = 4;
  c.norm_first = norm_first;
  c.tie_embeddings = tie;
  return c;
}

Tensor ids(std::vector<std::int64_t> v, Shape s) { return Tensor::from_vector(v, s); }

struct Batch {
  Tensor src = ids({4, 5, 6, 3, 7, 3, 1, 1, 3, 1, 1, 1}, {3, 4});
  Tensor src_len = ids({4, 2, 1}, {3});
  Tensor tgt = ids({5, 6, 7, 3, 4, 3, 1, 1, 3, 1, 1, 1}, {3, 4});
  Tensor tgt_len = ids({4, 2, 1}, {3});
};

}  // namespace

TEST(TransformerModel, ParameterCountNamesAndValidation) {
  for (bool norm_first : {false, true})
    for (bool tie : {false, true}) {
      SCOPED_TRACE(std::to_string(norm_first) + std::to_string(tie));
      const ModelConfig c = tiny(norm_first, tie);
      Generator gen(1);
      auto model = make_model(c, gen);
      EXPECT_EQ(model->num_parameters(), c.model.spec().num_parameters(c));
      EXPECT_EQ(model->named_parameters().front().first, "encoder.embedding.weight");
      EXPECT_NO_THROW(model->parameter("decoder.layers.1.multihead_attn.in_proj_weight"));
      EXPECT_NO_THROW(model->parameter("encoder.layers.0.self_attn.out_proj.weight"));
      EXPECT_EQ(model->named_parameters().back().first,
                tie ? (norm_first ? "decoder.norm.bias" : "decoder.layers.1.norm3.bias") : "decoder.dense.bias");
    }
  ModelConfig c = tiny();
  c.num_heads = 3;
  EXPECT_THROW(c.validate(), std::invalid_argument);  // 4 is not a multiple of 3
  c = tiny();
  c.attention_layer = 2;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c.attention_layer = -2;
  EXPECT_NO_THROW(c.validate());
  c.attention_head = 2;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  // The stacks' layers are re-drawn after cloning: two layers do not start equal.
  Generator gen(2);
  auto model = make_model(tiny(), gen);
  EXPECT_GT(max_abs_diff(model->parameter("encoder.layers.0.linear1.weight"),
                         model->parameter("encoder.layers.1.linear1.weight")),
            1e-3);
}

// The whole model, every parameter, through forward and the loss (label smoothing included).
TEST(TransformerModel, GradcheckFloat64) {
  const GradcheckOptions tight{.eps = 1e-6, .atol = 1e-8, .rtol = 1e-6};  // float64 differences: ~1e-10
  for (bool norm_first : {false, true})
    for (bool tie : {false, true}) {
      SCOPED_TRACE(std::to_string(norm_first) + std::to_string(tie));
      Generator gen(3);
      auto model = make_model(tiny(norm_first, tie), gen);
      model->to(DType::f64);
      Batch b;
      const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
      auto inputs = parameter_inputs(*model);
      auto fn = [&](const std::vector<Tensor>& xs) {
        bind_parameters(*model, xs, 0);
        return sequence_loss(model->forward(b.src, b.src_len, dec_in), b.tgt, b.tgt_len);
      };
      EXPECT_GRADCHECK(fn, inputs, tight);
      auto loss_fn = [&](const std::vector<Tensor>& xs) {
        bind_parameters(*model, xs, 0);
        return model->loss(b.src, b.src_len, dec_in, b.tgt, b.tgt_len, 0.1);
      };
      EXPECT_GRADCHECK(loss_fn, inputs, tight);
    }
}

// loss() runs the stacks on the tokens only (nn::PackedTokens); forward() on the padded batch.
TEST(TransformerModel, LossEqualsSequenceLossOfForward) {
  for (bool norm_first : {false, true})
    for (bool tie : {false, true}) {
      SCOPED_TRACE(std::to_string(norm_first) + std::to_string(tie));
      Generator gen(4);
      auto model = make_model(tiny(norm_first, tie), gen);
      model->to(DType::f64);
      Batch b;
      const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
      for (double eps : {0.0, 0.2}) {
        const auto packed = loss_and_parameter_grads(*model, model->loss(b.src, b.src_len, dec_in, b.tgt, b.tgt_len, eps));
        const auto padded = loss_and_parameter_grads(
            *model, sequence_loss(model->forward(b.src, b.src_len, dec_in), b.tgt, b.tgt_len, eps));
        expect_all_within(packed, padded, 1e-13);
      }
    }
}

TEST(TransformerModel, LabelSmoothingIsTorchs) {
  // logits (2, 3), labels {0, 2}, ε = 0.3: Σ_rows [(1-ε) (-log p_y) + ε/3 Σ_c (-log p_c)] / 2.
  const Tensor logits = Tensor::from_values({1.0, 2.0, 0.5, -1.0, 0.0, 3.0}, {2, 3}, DType::f64);
  const Tensor labels = ids({0, 2}, {2});
  const std::vector<double> x = logits.to_vector<double>();
  std::vector<double> lp(6);  // log-softmax by hand, row by row
  for (int r = 0; r < 2; ++r) {
    const double log_z = std::log(std::exp(x[r * 3]) + std::exp(x[r * 3 + 1]) + std::exp(x[r * 3 + 2]));
    for (int c = 0; c < 3; ++c) lp[r * 3 + c] = x[r * 3 + c] - log_z;
  }
  double expected = 0;
  for (int r = 0; r < 2; ++r) {
    const int y = r == 0 ? 0 : 2;
    expected += 0.7 * -lp[r * 3 + y] + 0.1 * -(lp[r * 3] + lp[r * 3 + 1] + lp[r * 3 + 2]);
  }
  EXPECT_NEAR(smoothed_cross_entropy(logits, labels, 0.3).item(), expected / 2, 1e-14);
  EXPECT_EQ(smoothed_cross_entropy(logits, labels, 0.0).item(), cross_entropy(logits, labels).item());
  EXPECT_THROW(smoothed_cross_entropy(logits, labels, 1.0), std::invalid_argument);
  // sequence_loss smooths the valid positions only: uniform logits give log V whatever ε.
  EXPECT_NEAR(sequence_loss(Tensor::zeros({1, 4, 10}), ids({5, 6, 3, 1}, {1, 4}), ids({3}, {1}), 0.4).item(),
              std::log(10.0), 1e-6);
}

// Decoding through step() with the key/value cache gives what teacher forcing computes over the
// whole prefix, logits and cross-attention, for every layer/head choice.
TEST(TransformerModel, CachedStepsEqualTheFullRecompute) {
  for (bool norm_first : {false, true})
    for (std::int64_t layer : {0, -1})
      for (std::int64_t head : {-1, 1}) {
        SCOPED_TRACE(std::to_string(norm_first) + " " + std::to_string(layer) + " " + std::to_string(head));
        ModelConfig c = tiny(norm_first);
        c.attention_layer = layer;
        c.attention_head = head;
        Generator gen(5);
        auto model = make_model(c, gen);
        model->to(DType::f64);
        model->eval();
        NoGradGuard no_grad;
        Batch b;
        const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
        Tensor att_full, att_steps;
        const Tensor full = model->forward(b.src, b.src_len, dec_in, &att_full);
        const Tensor steps = model->Seq2Seq::forward(b.src, b.src_len, dec_in, &att_steps);  // step() T times
        EXPECT_EQ(full.shape(), (Shape{3, 4, 8}));
        EXPECT_LT(max_abs_diff(full, steps), 1e-12);
        ASSERT_EQ(att_full.shape(), (Shape{3, 4, 4}));
        EXPECT_LT(max_abs_diff(att_full, att_steps), 1e-12);
        // Masked source positions get no weight: row 2 has one valid position.
        EXPECT_NEAR(att_steps.at({2, 3, 0}), 1.0, 1e-12);
        EXPECT_NEAR(att_steps.at({1, 0, 2}) + att_steps.at({1, 0, 3}), 0.0, 1e-12);
        // The cache grows by one position per step.
        DecoderState state = model->begin(b.src, b.src_len);
        model->step(ids({2, 2, 2}, {3}), state);
        model->step(ids({5, 4, 3}, {3}), state);
        ASSERT_EQ(state.cache.size(), 8u);  // 4 tensors per layer
        EXPECT_EQ(state.cache[0].shape(), (Shape{3, 2, 2, 2}));  // (B, heads, T, d / heads)
        EXPECT_EQ(state.cache[2].shape(), (Shape{3, 2, 4, 2}));  // memory keys (B, heads, S, d / heads)
      }
}

// Greedy decoding with the cache equals decoding that recomputes the whole prefix each step.
TEST(TransformerModel, GreedyDecodeEqualsRecomputingDecode) {
  Generator gen(6);
  ModelConfig c = tiny();
  c.num_steps = 6;
  auto model = make_model(c, gen);
  model->to(DType::f64);
  Batch b;
  const auto out = greedy_decode(*model, b.src, b.src_len, 6);
  model->eval();
  NoGradGuard no_grad;
  for (std::int64_t r = 0; r < 3; ++r) {
    const Tensor src = narrow(b.src, 0, r, 1), len = narrow(b.src_len, 0, r, 1);
    std::vector<std::int64_t> prefix{Vocab::kBos}, got;
    for (int t = 0; t < 6; ++t) {
      const Tensor logits = model->forward(src, len, Tensor::from_vector(prefix, {1, static_cast<std::int64_t>(prefix.size())}));
      const std::vector<double> last = narrow(logits, 1, t, 1).to_vector<double>();
      const auto y = static_cast<std::int64_t>(std::max_element(last.begin(), last.end()) - last.begin());
      if (y == Vocab::kEos) break;
      got.push_back(y);
      prefix.push_back(y);
    }
    EXPECT_EQ(out[static_cast<std::size_t>(r)].ids, got) << "row " << r;
  }
}

// Beam search moves hypotheses between rows: DecoderState::reorder carries the cache along, so a
// step after reordering equals the step of the picked rows.
TEST(TransformerModel, ReorderCarriesTheCache) {
  Generator gen(7);
  auto model = make_model(tiny(), gen);
  model->to(DType::f64);
  model->eval();
  NoGradGuard no_grad;
  Batch b;
  DecoderState state = model->begin(b.src, b.src_len);
  model->step(ids({2, 2, 2}, {3}), state);
  model->step(ids({5, 4, 6}, {3}), state);
  const Tensor index = ids({2, 0, 0}, {3});
  DecoderState picked = state.reorder(index);
  const Tensor next = model->step(ids({7, 5, 5}, {3}), picked);      // rows: old 2, old 0, old 0
  const Tensor reference = model->step(ids({5, 4, 7}, {3}), state);  // old rows fed the same tokens
  EXPECT_LT(max_abs_diff(narrow(next, 0, 0, 1), narrow(reference, 0, 2, 1)), 1e-12);
  EXPECT_LT(max_abs_diff(narrow(next, 0, 1, 1), narrow(reference, 0, 0, 1)), 1e-12);
  EXPECT_LT(max_abs_diff(narrow(next, 0, 2, 1), narrow(reference, 0, 0, 1)), 1e-12);
  EXPECT_EQ(next.shape(), (Shape{3, 8}));
  // Beam 1 is greedy.
  const auto greedy = greedy_decode(*model, b.src, b.src_len, 4);
  const auto beam1 = beam_search(*model, b.src, b.src_len, 1, 4);
  const auto beam3 = beam_search(*model, b.src, b.src_len, 3, 4);
  for (std::size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(greedy[r].ids, beam1[r].ids);
    EXPECT_GE(beam3[r].score, beam1[r].score - 1e-12);
    EXPECT_EQ(beam3[r].attention.size(), static_cast<std::size_t>(beam3[r].steps()));
  }
}

TEST(TransformerModel, IgnoresPadding) {
  Generator gen(8);
  auto model = make_model(tiny(), gen);
  model->to(DType::f64);
  model->eval();
  NoGradGuard no_grad;
  ASSERT_TRUE(model->padding_is_inert());
  Batch b;
  const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
  const Tensor batched = model->forward(b.src, b.src_len, dec_in);
  const Tensor alone = model->forward(ids({7, 3, 5, 6}, {1, 4}), ids({2}, {1}), narrow(dec_in, 0, 1, 1));
  EXPECT_LT(max_abs_diff(narrow(batched, 0, 1, 1), alone), 1e-12);
}

TEST(TransformerModel, CheckpointRoundTrip) {
  const auto dir = tg::models::testing::per_test_dir("tg_tfm_ckpt", true);
  const Vocab src_vocab = Vocab::build({{"go", "."}, {"i", "lost", "."}, {"he's", "calm", "."}}, 1);
  const Vocab tgt_vocab = Vocab::build({{"va", "!"}, {"j'ai", "perdu", "."}, {"il", "est", "calme", "."}}, 1);
  ModelConfig c = tiny(/*norm_first=*/true, /*tie=*/true);
  c.src_vocab = src_vocab.size();
  c.tgt_vocab = tgt_vocab.size();
  c.attention_layer = 0;
  c.attention_head = 1;
  c.dropout = 0.1;
  Generator gen(9);
  auto model = make_model(c, gen);
  save_checkpoint(dir.string(), *model, src_vocab, tgt_vocab);
  const Checkpoint ck = load_checkpoint(dir.string());
  EXPECT_EQ(ck.config.model, ModelKind("transformer"));
  EXPECT_EQ(ck.config.num_heads, 2);
  EXPECT_TRUE(ck.config.norm_first);
  EXPECT_TRUE(ck.config.tie_embeddings);
  EXPECT_EQ(ck.config.attention_layer, 0);
  EXPECT_EQ(ck.config.attention_head, 1);
  EXPECT_EQ(config_to_json(ck.config), config_to_json(c));
  const auto a = translate(*model, {"i lost .", "go ."}, src_vocab, tgt_vocab);
  const auto r = translate(*ck.model, {"i lost .", "go ."}, src_vocab, tgt_vocab);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ids, r[i].ids);
    EXPECT_EQ(a[i].attention, r[i].attention);
  }
  // A config written before the transformer's fields existed still loads, with their defaults.
  const ModelConfig old = config_from_json(R"({"model": "rnnsearch", "embed_size": 8, "num_hiddens": 8,
      "num_layers": 1, "dropout": 0.1, "num_steps": 5, "readout": "maxout", "maxout_units": 0,
      "attention": "additive", "ablation": "none"})",
                                           "old/config.json");
  EXPECT_EQ(old.num_heads, ModelConfig().num_heads);
  EXPECT_FALSE(old.norm_first);
  EXPECT_THROW(config_from_json(R"({"model": "transformer", "embed_size": 6, "num_heads": 4})", "x/config.json"),
               std::runtime_error);
  std::filesystem::remove_all(dir);
}

// Held-out exact match on the built-in tasks, with the data, initialisation and training that
// `bahdanau train --task T --num-examples N --holdout H --model transformer --embed-size 32
// --num-hiddens 64 --num-layers 2 --num-heads 4 --dropout 0 --batch-size 32 --steps S --lr LR
// --warmup-steps 100` uses (seed 0), so the command should print the same figures (not checked here).
namespace {

double heldout_exact_match(const std::string& task, std::int64_t examples, std::size_t holdout, std::int64_t steps,
                           double lr) {
  Generator split(0);
  const TranslationData data =
      make_translation_data(make_task(task, {.count = examples, .min_len = 1, .max_len = 8, .seed = 0}),
                            TranslationDataOptions().num_steps(10).min_freq(2).holdout(Holdout::count(holdout)), split);
  ModelConfig c;
  c.model = "transformer";
  c.src_vocab = data.src_vocab.size();
  c.tgt_vocab = data.tgt_vocab.size();
  c.embed_size = 32, c.num_hiddens = 64, c.num_layers = 2, c.num_heads = 4, c.dropout = 0, c.num_steps = 10;
  Generator gen(0x5eedULL);
  auto model = make_model(c, gen);
  // One thread: these tensors are too small for threads to pay, and ctest runs tests side by side.
  train(*model, data,
        TrainOptions().steps(steps).batch_size(32).lr(lr).warmup_steps(100).seed(0).threads(1).progress(false));
  const double exact = evaluate(*model, data.heldout_pairs, data.src_vocab, data.tgt_vocab).exact_match;
  set_num_threads(0);
  return exact;
}

}  // namespace

TEST(TransformerModel, LearnsReverse) {
  const double exact = heldout_exact_match("reverse", 1000, 200, 800, 0.003);
  std::printf("transformer on reverse: held-out exact match %.4f\n", exact);
  EXPECT_GE(exact, 0.99);
}

TEST(TransformerModel, LearnsDates) {
  const double exact = heldout_exact_match("dates", 4000, 300, 900, 0.007);
  std::printf("transformer on dates: held-out exact match %.4f\n", exact);
  EXPECT_GE(exact, 0.99);
}

// allow_compact_grads changes memory, not training, tied output projection included (the target
// embedding's gradient then has a dense part from the projection).
TEST(TransformerModel, CompactGradsTrainLikeDenseGradients) {
  for (const bool tie : {false, true}) {
    SCOPED_TRACE(tie);
    ModelConfig c = tiny(false, tie);
    c.src_vocab = 30, c.tgt_vocab = 40;
    Batch b;
    const Tensor dec_in = teacher_forcing_input(b.tgt, 2);
    auto train_steps = [&](bool compact) {
      Generator gen(5);
      auto model = make_model(c, gen);
      model->to(DType::f64);
      if (compact) allow_compact_grads(*model);
      nn::Adam opt(model->named_parameters(), nn::AdamOptions(0.01));
      for (int step = 0; step < 3; ++step) {
        opt.zero_grad();
        model->loss(b.src, b.src_len, dec_in, b.tgt, b.tgt_len).backward();
        nn::clip_grad_norm(model->parameters(), 0.05);
        opt.step();
      }
      return model->named_parameters();
    };
    const auto dense = train_steps(false), compact = train_steps(true);
    ASSERT_EQ(dense.size(), compact.size());
    for (std::size_t i = 0; i < dense.size(); ++i)
      EXPECT_LT(max_abs_diff(dense[i].second, compact[i].second), 1e-12) << dense[i].first;
  }
}
