// The weight EMA (nn/ema.h) and train()'s use of it (TrainOptions::ema_decay): the
// update rule against a hand computation, validation on the averaged weights, the checkpoint's
// weights.npz / training_weights.npz, and an exact resume.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "../../autograd/gradcheck_util.h"  // max_or_inf
#include "../../autograd/error_of.h"
#include "../test_dirs.h"
#include "autograd/random.h"
#include "models/text/data.h"
#include "models/text/tasks.h"
#include "models/training/checkpoint.h"
#include "nn/ema.h"
#include "models/training/trainer.h"
#include "nn/serialize.h"

using namespace tg;
using namespace tg::models;
using tg::nn::EmaSwapGuard;
using tg::nn::WeightEma;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() { return tg::models::testing::per_test_dir("tg_ema", true); }

TranslationData reverse_data(std::int64_t count) {
  Generator gen(0);
  return make_translation_data(make_task("reverse", {.count = count, .min_len = 2, .max_len = 6, .seed = 3}),
                               TranslationDataOptions().num_steps(8).min_freq(1), gen);
}

DevSet reverse_dev(std::int64_t count) {
  DevSet dev;
  dev.pairs = tokenize_pairs(make_task("reverse", {.count = count, .min_len = 2, .max_len = 6, .seed = 77}));
  return dev;
}

ModelConfig tiny_config(const TranslationData& data, const std::string& model = "d2l") {
  ModelConfig c;
  c.model = model;
  c.src_vocab = data.src_vocab.size();
  c.tgt_vocab = data.tgt_vocab.size();
  c.embed_size = 16;
  c.num_hiddens = 16;
  c.num_layers = model == "d2l" ? 2 : 1;
  c.dropout = 0.1;
  c.num_steps = data.train.num_steps();
  return c;
}

using Weights = std::vector<std::vector<float>>;

Weights weights(const Seq2Seq& model) {
  Weights out;
  for (const auto& p : model.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

Weights values(const nn::NamedTensors& tensors) {
  Weights out;
  for (const auto& [name, t] : tensors) out.push_back(t.to_vector<float>());
  return out;
}

std::vector<double> losses(const TrainResult& r) {
  std::vector<double> out;
  for (const auto& s : r.steps) out.push_back(s.loss);
  return out;
}

std::vector<std::string> csv_without_elapsed(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string row; std::getline(in, row);) {
    std::size_t begin = 0;
    for (int k = 0; k < 6; ++k) begin = row.find(',', begin) + 1;
    const std::size_t end = row.find(',', begin);
    out.push_back(row.substr(0, begin) + (end == std::string::npos ? "" : row.substr(end + 1)));
  }
  return out;
}

/// ema after updates from the weights `raw[1..]`, starting at raw[0], computed in double.
std::vector<std::vector<double>> hand_ema(const std::vector<Weights>& raw, double decay) {
  std::vector<std::vector<double>> e;
  for (const auto& p : raw[0]) e.emplace_back(p.begin(), p.end());
  for (std::size_t n = 0; n + 1 < raw.size(); ++n) {
    const double d = std::min(decay, (1.0 + n) / (10.0 + n));
    for (std::size_t k = 0; k < e.size(); ++k)
      for (std::size_t i = 0; i < e[k].size(); ++i) e[k][i] += (1 - d) * (raw[n + 1][k][i] - e[k][i]);
  }
  return e;
}

void expect_close(const Weights& got, const std::vector<std::vector<double>>& want) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].size(), want[k].size());
    for (std::size_t i = 0; i < got[k].size(); ++i)
      worst = tg::testing::max_or_inf(worst, std::abs(got[k][i] - want[k][i]) / std::max(1.0, std::abs(want[k][i])));
  }
  EXPECT_LT(worst, 1e-6);  // float32 arithmetic against double
}

}  // namespace

TEST(WeightEma, UpdateRuleWithWarmUpByHand) {
  EXPECT_DOUBLE_EQ(WeightEma::decay_at(0.999, 0), 0.1);
  EXPECT_DOUBLE_EQ(WeightEma::decay_at(0.999, 1), 2.0 / 11.0);
  EXPECT_DOUBLE_EQ(WeightEma::decay_at(0.2, 2), 0.2);  // 3/12 = 0.25 capped by the decay
  EXPECT_DOUBLE_EQ(WeightEma::decay_at(0.999, 100000), 0.999);

  Tensor a = Tensor::from_vector(std::vector<float>{1.0f, -2.0f, 4.0f}, {3});
  Tensor b = Tensor::from_vector(std::vector<float>{0.5f, 8.0f}, {2, 1});
  WeightEma ema({{"a", a}, {"b", b}}, 0.2);
  EXPECT_EQ(ema.updates(), 0);
  ASSERT_EQ(ema.averages().size(), 2u);
  EXPECT_EQ(ema.averages()[1].first, "b");
  // Step 1 moves a to 2, -2, 0 and b to 1.5, 8: d = 0.1, ema = ema + 0.9 (p - ema).
  a.copy_(Tensor::from_vector(std::vector<float>{2.0f, -2.0f, 0.0f}, {3}));
  b.copy_(Tensor::from_vector(std::vector<float>{1.5f, 8.0f}, {2, 1}));
  ema.update();
  const std::vector<float> a1{1.9f, -2.0f, 0.4f}, b1{1.4f, 8.0f};
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(ema.averages()[0].second.to_vector<float>()[i], a1[i], 1e-6);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_NEAR(ema.averages()[1].second.to_vector<float>()[i], b1[i], 1e-6);
  // Step 2: d = 2/11; step 3: d = min(0.2, 3/12) = 0.2.
  a.copy_(Tensor::from_vector(std::vector<float>{3.0f, 0.0f, 0.0f}, {3}));
  ema.update();
  const double d2 = 2.0 / 11.0;
  const std::vector<double> a2{1.9 + (1 - d2) * (3 - 1.9), -2.0 + (1 - d2) * 2.0, 0.4 - (1 - d2) * 0.4};
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(ema.averages()[0].second.to_vector<float>()[i], a2[i], 1e-6);
  a.copy_(Tensor::from_vector(std::vector<float>{-1.0f, 1.0f, 10.0f}, {3}));
  ema.update();
  const std::vector<double> a3{a2[0] + 0.8 * (-1 - a2[0]), a2[1] + 0.8 * (1 - a2[1]), a2[2] + 0.8 * (10 - a2[2])};
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(ema.averages()[0].second.to_vector<float>()[i], a3[i], 1e-5);
  EXPECT_EQ(ema.updates(), 3);
  // b did not move after step 1: its distance to 1.5 shrinks by d each update.
  const double b_expect = 1.5 - 0.1 * d2 * 0.2;
  EXPECT_NEAR(ema.averages()[1].second.to_vector<float>()[0], b_expect, 1e-6);

  // swap exchanges the values bit for bit; twice restores both.
  const auto raw = a.to_vector<float>(), avg = ema.averages()[0].second.to_vector<float>();
  ema.swap();
  EXPECT_EQ(a.to_vector<float>(), avg);
  EXPECT_EQ(ema.averages()[0].second.to_vector<float>(), raw);
  {
    EmaSwapGuard back(&ema);
    EXPECT_EQ(a.to_vector<float>(), raw);
  }
  EXPECT_EQ(a.to_vector<float>(), avg);
  ema.swap();
  EXPECT_EQ(a.to_vector<float>(), raw);

  for (double bad : {0.0, 1.0, -0.5, std::nan("")})
    EXPECT_THROW(WeightEma({{"a", a}}, bad), std::invalid_argument) << bad;
}

// train() with an EMA: the training steps are those of a run without it (bit for bit), and the
// average after 3 steps is the hand computation from the raw weights after 0, 1, 2 and 3 steps.
TEST(TrainerEma, AverageOfTheRawWeightsStepByStep) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);
  const auto options = TrainOptions().batch_size(16).lr(0.05).seed(9).progress(false);
  std::vector<Weights> raw;
  std::vector<double> plain_losses;
  for (std::int64_t steps = 0; steps <= 3; ++steps) {
    Generator gen(1);
    auto model = make_model(tiny_config(data), gen);
    if (steps > 0) plain_losses = losses(train(*model, data, TrainOptions(options).steps(steps)));
    raw.push_back(weights(*model));
  }
  Generator gen(1);
  auto model = make_model(tiny_config(data), gen);
  const double decay = 0.2;  // d = 0.1, 2/11, then capped at 0.2
  const auto r = train(*model, data, TrainOptions(options).steps(3).ema_decay(decay).out_dir((root / "ck").string()));
  EXPECT_EQ(losses(r), plain_losses);
  EXPECT_EQ(r.state.ema_updates, 3);
  EXPECT_EQ(r.state.ema_decay, decay);
  EXPECT_TRUE(values(r.training_weights) == raw[3]);
  const auto want = hand_ema(raw, decay);
  expect_close(weights(*model), want);  // the model ends holding the average
  // The checkpoint: weights.npz the average, training_weights.npz the raw weights.
  Checkpoint ck = load_checkpoint((root / "ck").string());
  EXPECT_TRUE(ck.has_training_weights);
  EXPECT_TRUE(weights(*ck.model) == weights(*model));
  ASSERT_TRUE(ck.training);
  EXPECT_EQ(ck.training->ema_decay, decay);
  EXPECT_EQ(ck.training->ema_updates, 3);
  load_training_weights(ck.dir, *ck.model);
  EXPECT_TRUE(weights(*ck.model) == raw[3]);
  // Without EMA no training_weights.npz, and the fields say so.
  Generator gen2(1);
  auto plain = make_model(tiny_config(data), gen2);
  const auto p = train(*plain, data, TrainOptions(options).steps(1).out_dir((root / "plain").string()));
  EXPECT_TRUE(p.training_weights.empty());
  EXPECT_FALSE(fs::exists(root / "plain" / "training_weights.npz"));
  EXPECT_EQ(load_checkpoint((root / "plain").string()).training->ema_decay, 0.0);
  EXPECT_THROW(load_training_weights((root / "plain").string(), *plain), std::runtime_error);
  fs::remove_all(root);
}

// Validation scores the averaged weights: every logged dev loss is evaluate_loss of the average
// (the best checkpoint's weights.npz, and the model at the end), not of the raw weights.
TEST(TrainerEma, ValidationUsesTheAveragedWeights) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);  // 4 batches per epoch
  const DevSet dev = reverse_dev(20);
  Generator gen(1);
  auto model = make_model(tiny_config(data, "rnnsearch"), gen);
  const auto r = train(*model, data, TrainOptions().batch_size(16).lr(0.05).seed(2).progress(false).epochs(3)
                                         .ema_decay(0.9).dev(dev).best_dir((root / "best").string()));
  ASSERT_EQ(r.validations.size(), 3u);
  const Seq2SeqDataset dev_data(dev.pairs, data.src_vocab, data.tgt_vocab, model->config().num_steps);
  EXPECT_EQ(evaluate_loss(*model, dev_data), r.validations.back().dev_loss);
  Checkpoint best = load_checkpoint((root / "best").string());
  ASSERT_TRUE(best.training && best.has_training_weights);
  const auto& v = r.validations[static_cast<std::size_t>(best.training->best_step / 4 - 1)];
  EXPECT_TRUE(v.best);
  EXPECT_EQ(evaluate_loss(*best.model, dev_data), v.dev_loss);
  EXPECT_EQ(best.training->best_dev_loss, v.dev_loss);
  // The raw weights give another dev loss: the validation did not score them.
  load_training_weights(best.dir, *best.model);
  EXPECT_NE(evaluate_loss(*best.model, dev_data), v.dev_loss);
  fs::remove_all(root);
}

// A run with an EMA stopped mid-epoch and resumed repeats the straight run bit for bit: losses,
// validations (of the average), log, raw weights and average.
TEST(TrainerEma, ResumedRunRepeatsTheStraightRunExactly) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);
  const auto options = TrainOptions().batch_size(16).lr(0.02).seed(4).progress(false).ema_decay(0.95)
                           .dev(reverse_dev(12)).validate_every(3).lr_decay(0.5).lr_patience(1);
  Generator gen_a(1);
  auto straight = make_model(tiny_config(data), gen_a);
  const auto full = train(*straight, data, TrainOptions(options).steps(10).log_csv((root / "straight.csv").string()));
  EXPECT_EQ(full.state.ema_updates, 10);

  Generator gen_b(1);
  auto first = make_model(tiny_config(data), gen_b);
  const auto part1 = train(*first, data, TrainOptions(options).steps(6).out_dir((root / "ck").string())
                                             .log_csv((root / "resumed.csv").string()));
  Checkpoint ck = load_checkpoint((root / "ck").string());
  ASSERT_TRUE(ck.training && ck.has_training_weights);
  EXPECT_EQ(ck.training->batch_in_epoch, 2);
  EXPECT_EQ(ck.training->ema_updates, 6);
  const auto part2 = train(*ck.model, data, TrainOptions(options).steps(10).resume_from(ck.dir)
                                                .log_csv((root / "resumed.csv").string()));
  std::vector<double> resumed = losses(part1);
  for (double l : losses(part2)) resumed.push_back(l);
  EXPECT_EQ(resumed, losses(full));
  EXPECT_EQ(csv_without_elapsed(root / "resumed.csv"), csv_without_elapsed(root / "straight.csv"));
  EXPECT_TRUE(values(part2.training_weights) == values(full.training_weights));
  EXPECT_TRUE(weights(*ck.model) == weights(*straight));  // the averages
  EXPECT_FALSE(weights(*straight) == values(full.training_weights));
  EXPECT_EQ(part2.state.ema_updates, 10);
  EXPECT_EQ(part2.state.best_step, full.state.best_step);
  EXPECT_EQ(part2.state.lr_scale, full.state.lr_scale);
  fs::remove_all(root);
}

// Switching the EMA on or off at a resume: on for a checkpoint without one starts it from the
// checkpoint's weights (n = 0); off for one with it continues the raw weights and drops it.
TEST(TrainerEma, ResumeSwitchingTheAverageOnAndOff) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);
  const auto options = TrainOptions().batch_size(16).lr(0.05).seed(9).progress(false);
  std::vector<Weights> raw;  // raw weights after 4, 5 and 6 steps of the plain run
  for (std::int64_t steps : {4, 5, 6}) {
    Generator gen(1);
    auto model = make_model(tiny_config(data), gen);
    train(*model, data, TrainOptions(options).steps(steps));
    raw.push_back(weights(*model));
  }
  Generator gen(1);
  auto model = make_model(tiny_config(data), gen);
  train(*model, data, TrainOptions(options).steps(4).out_dir((root / "plain").string()));
  Checkpoint plain = load_checkpoint((root / "plain").string());
  const auto on = train(*plain.model, data, TrainOptions(options).steps(6).ema_decay(0.5).resume_from(plain.dir)
                                                .out_dir((root / "on").string()));
  EXPECT_EQ(on.state.ema_updates, 2);
  EXPECT_TRUE(values(on.training_weights) == raw[2]);
  expect_close(weights(*plain.model), hand_ema(raw, 0.5));

  Checkpoint with = load_checkpoint((root / "on").string());
  ASSERT_TRUE(with.has_training_weights);
  const auto off = train(*with.model, data, TrainOptions(options).steps(6).resume_from(with.dir)
                                                .out_dir((root / "copy").string()));
  EXPECT_EQ(off.steps_run, 0);  // nothing to do: the copy holds the raw weights only
  Checkpoint copy = load_checkpoint((root / "copy").string());
  EXPECT_FALSE(copy.has_training_weights);
  EXPECT_EQ(copy.training->ema_decay, 0.0);
  EXPECT_TRUE(weights(*copy.model) == raw[2]);
  Checkpoint with2 = load_checkpoint((root / "on").string());
  const auto cont = train(*with2.model, data, TrainOptions(options).steps(8).resume_from(with2.dir)
                                                .out_dir((root / "off").string()));
  EXPECT_TRUE(cont.training_weights.empty());
  Generator gen8(1);
  auto straight8 = make_model(tiny_config(data), gen8);
  train(*straight8, data, TrainOptions(options).steps(8));
  EXPECT_TRUE(weights(*with2.model) == weights(*straight8));
  EXPECT_FALSE(fs::exists(root / "off" / "training_weights.npz"));
  fs::remove_all(root);
}

TEST(TrainerEma, BadDecayAndInconsistentCheckpointsAreRefused) {
  for (double bad : {-0.1, 1.0, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    try {
      TrainOptions().ema_decay(bad).validate();
      ADD_FAILURE() << "ema_decay " << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("ema_decay = "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("must be 0 (off) or in (0, 1)"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(tg::testing::error_of<std::invalid_argument>([] { TrainOptions().ema_decay(1.5).validate(); }),
            "train: ema_decay = 1.5 must be 0 (off) or in (0, 1)");
  EXPECT_NO_THROW(TrainOptions().ema_decay(0).validate());
  EXPECT_NO_THROW(TrainOptions().ema_decay(0.9999).validate());

  // training.json: the fields round-trip, and are range-checked.
  TrainingState s;
  s.step = 12;
  s.ema_decay = 0.999;
  s.ema_updates = 7;
  const TrainingState back = training_from_json(training_to_json(s));
  EXPECT_EQ(back.ema_decay, 0.999);
  EXPECT_EQ(back.ema_updates, 7);
  EXPECT_THROW(training_from_json(R"({"step": 3, "ema_updates": 4})"), std::runtime_error);
  EXPECT_THROW(training_from_json(R"({"ema_decay": 1.0})"), std::runtime_error);
  EXPECT_THROW(training_from_json(R"({"ema_decay": -0.5})"), std::runtime_error);

  // A checkpoint whose training.json records an EMA needs training_weights.npz, which the
  // manifest covers like every file.
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);
  Generator gen(1);
  auto model = make_model(tiny_config(data), gen);
  train(*model, data, TrainOptions().batch_size(16).steps(2).progress(false).ema_decay(0.9).out_dir((root / "ck").string()));
  const fs::path tw = root / "ck" / "training_weights.npz";
  ASSERT_TRUE(fs::exists(tw));
  Generator other_gen(5);
  make_model(tiny_config(data), other_gen)->save(tw.string());
  try {
    load_checkpoint((root / "ck").string());
    ADD_FAILURE() << "a changed training_weights.npz was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("training_weights.npz does not match its SHA-256"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_training_weights((root / "ck").string(), *model), std::runtime_error);
  fs::remove(root / "ck" / "manifest.json");
  fs::remove(tw);
  try {
    load_checkpoint((root / "ck").string());
    ADD_FAILURE() << "a checkpoint recording an EMA without training_weights.npz was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("training_weights.npz: missing (training.json records ema_decay"),
              std::string::npos) << e.what();
  }
  fs::remove_all(root);
}
