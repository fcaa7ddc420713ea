// TrainOptions::precision (bf16 autocast during training), its record in training.json, and the
// names the command line uses.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "../../autograd/error_of.h"
#include "../test_dirs.h"
#include "trainer_fixtures.h"
#include "autograd/autocast.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "models/decoding/decode.h"
#include "models/text/data.h"
#include "models/text/tasks.h"
#include "models/training/checkpoint.h"
#include "models/training/trainer.h"

using namespace tg;
using namespace tg::models;
using namespace tg::models::testing;
using tg::testing::error_of;
namespace fs = std::filesystem;

namespace {

constexpr auto kF32 = autocast::Precision::f32;
constexpr auto kBf16 = autocast::Precision::bf16;

}  // namespace

TEST(MixedPrecision, NamesParseAndOthersAreRefusedNamingTheFlag) {
  EXPECT_STREQ(precision_name(kF32), "fp32");
  EXPECT_STREQ(precision_name(kBf16), "bf16");
  EXPECT_EQ(parse_precision("fp32"), kF32);
  EXPECT_EQ(parse_precision("bf16"), kBf16);
  for (const char* bad : {"fp16", "f32", "BF16", ""})
    EXPECT_EQ(error_of([&] { parse_precision(bad, "--precision"); }),
              std::string("--precision: expected fp32 or bf16, got '") + bad + "'");
  const auto out_of_range = static_cast<autocast::Precision>(7);
  EXPECT_NE(error_of([&] { DecodeOptions().precision(out_of_range).validate(); }).find("precision = 7 is not fp32 or bf16"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TrainOptions().precision(out_of_range).validate(); }).find("train: precision = 7"),
            std::string::npos);
  EXPECT_EQ(TrainOptions().precision(), kF32);
  EXPECT_EQ(DecodeOptions().precision(), kF32);
}

TEST(MixedPrecision, TrainingJsonRecordsItAndOlderFilesReadAsFp32) {
  TrainingState s;
  s.precision = kBf16;
  const std::string text = training_to_json(s);
  EXPECT_NE(text.find("\"precision\": \"bf16\""), std::string::npos) << text;
  EXPECT_EQ(training_from_json(text).precision, kBf16);
  s.precision = kF32;
  EXPECT_NE(training_to_json(s).find("\"precision\": \"fp32\""), std::string::npos);
  EXPECT_EQ(training_from_json(R"({"step": 3})").precision, kF32);  // written before mixed precision
  EXPECT_EQ(error_of([] { training_from_json(R"({"precision": "fp16"})", "ck/training.json"); }),
            "ck/training.json: precision = 'fp16' is not 'fp32' or 'bf16'");
  EXPECT_NE(error_of([] { training_from_json(R"({"precision": 1})", "ck/training.json"); }).find("ck/training.json: "),
            std::string::npos);
  s.precision = static_cast<autocast::Precision>(7);
  EXPECT_NE(error_of([&] { training_to_json(s); }).find("precision = 7 is not fp32 or bf16 (not saved"),
            std::string::npos);
}

// bf16 changes the products, so the losses move off the float32 ones, at the first step (before the
// weights differ) only by bf16 rounding: each product's entries z = sum_k a_k b_k change by at most
// about 2 * 2^-9 * sum_k |a_k b_k| (both operands rounded to nearest, relative error 2^-9 each), and
// a mean cross-entropy moves by at most 2 max |dz| over the logits. With this initialisation's small
// weights that is far below the 0.05 checked at step 1 (a loose bound, not a tight derivation); the
// later steps, whose weights differ too, are only required to stay within 0.1.
TEST(MixedPrecision, Bf16StepsStayCloseToFp32AndAreTheSameOnOneAndTwoThreads) {
  ThreadReset reset;
  const TranslationData data = reverse_data(96);
  const auto options = TrainOptions().steps(6).batch_size(32).lr(0.01).seed(5).progress(false);
  std::vector<double> f32;
  {
    Generator gen(7);
    auto model = make_model(tiny_config(data, "rnnsearch", 24), gen);
    f32 = losses(train(*model, data, TrainOptions(options).threads(1)));
  }
  std::vector<std::vector<double>> runs;
  std::vector<std::vector<std::vector<float>>> finals;
  for (int threads : {1, 2}) {
    Generator gen(7);
    auto model = make_model(tiny_config(data, "rnnsearch", 24), gen);
    const TrainResult r = train(*model, data, TrainOptions(options).threads(threads).precision(kBf16));
    EXPECT_EQ(r.state.precision, kBf16);
    runs.push_back(losses(r));
    finals.push_back(weights(*model));
    EXPECT_FALSE(autocast::is_enabled()) << "train() must leave no autocast scope open";
  }
  ASSERT_EQ(runs[0].size(), 6u);
  EXPECT_EQ(runs[0], runs[1]);  // bit for bit
  EXPECT_TRUE(finals[0] == finals[1]);
  EXPECT_NE(runs[0], f32) << "the products did not run in bf16";
  EXPECT_NEAR(runs[0][0], f32[0], 0.05);
  for (std::size_t i = 0; i < f32.size(); ++i) EXPECT_NEAR(runs[0][i], f32[i], 0.1) << "step " << i + 1;
}

TEST(MixedPrecision, Bf16RunResumesExactlyFromItsCheckpoint) {
  const fs::path dir = tg::models::testing::per_test_dir("tg_mixed_precision", true) / "ck";
  const TranslationData data = reverse_data(50);  // batch 16: 4 batches per epoch
  const auto options = TrainOptions().batch_size(16).lr(0.01).seed(9).progress(false).precision(kBf16);
  Generator gen_a(1);
  auto straight = make_model(tiny_config(data, "rnnsearch", 16), gen_a);
  const TrainResult full = train(*straight, data, TrainOptions(options).steps(7));
  Generator gen_b(1);
  auto first = make_model(tiny_config(data, "rnnsearch", 16), gen_b);
  const TrainResult part1 = train(*first, data, TrainOptions(options).steps(3).out_dir(dir.string()));
  Checkpoint ck = load_checkpoint(dir.string());
  ASSERT_TRUE(ck.training);
  EXPECT_EQ(ck.training->precision, kBf16);
  const TrainResult part2 = train(*ck.model, data, TrainOptions(options).steps(7).resume_from(ck.dir));
  std::vector<double> resumed = losses(part1);
  for (double l : losses(part2)) resumed.push_back(l);
  EXPECT_EQ(resumed, losses(full));
  EXPECT_TRUE(weights(*ck.model) == weights(*straight));
}

// Validation runs in the training's precision: the dev loss logged after the last step is the
// bf16 evaluate_loss of the final weights (bit for bit), not the float32 one.
TEST(MixedPrecision, ValidationRunsInTheTrainingsPrecision) {
  const TranslationData data = reverse_data(64);
  const TranslationData dev_data = reverse_data(24, 8, 11);
  DevSet dev;
  dev.pairs = dev_data.train_pairs;
  Generator gen(2);
  auto model = make_model(tiny_config(data, "rnnsearch", 16), gen);
  const TrainResult r =
      train(*model, data,
            TrainOptions().steps(4).batch_size(32).lr(0.01).seed(1).progress(false).precision(kBf16).dev(dev));
  ASSERT_FALSE(r.validations.empty());
  const ValidationRecord& last = r.validations.back();
  ASSERT_EQ(last.step, 4);
  const Seq2SeqDataset encoded(dev.pairs, data.src_vocab, data.tgt_vocab, model->config().num_steps);
  double bf16 = 0, f32 = 0;
  {
    autocast::Guard guard(kBf16);
    bf16 = evaluate_loss(*model, encoded);
  }
  f32 = evaluate_loss(*model, encoded);
  EXPECT_EQ(last.dev_loss, bf16);
  EXPECT_NE(last.dev_loss, f32);
  EXPECT_NEAR(bf16, f32, 0.05);
  // evaluate() scores its loss in the precision of its decoding options too.
  EvalOptions eo;
  eo.decode.precision(kBf16);
  EXPECT_EQ(evaluate(*model, dev.pairs, data.src_vocab, data.tgt_vocab, eo).loss, bf16);
  EXPECT_EQ(evaluate(*model, dev.pairs, data.src_vocab, data.tgt_vocab).loss, f32);
}
