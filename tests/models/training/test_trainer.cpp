#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../autograd/error_of.h"
#include "../scripted_model.h"
#include "../test_dirs.h"
#include "trainer_fixtures.h"
#include "autograd/ops_elementwise.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "models/decoding/decode.h"
#include "models/decoding/metrics.h"
#include "models/decoding/sacrebleu.h"
#include "models/text/data.h"
#include "models/text/tasks.h"
#include "models/training/checkpoint.h"
#include "models/training/trainer.h"
#include "models/translators/limits.h"

using namespace tg;
using namespace tg::models;
using namespace tg::models::testing;
using tg::testing::error_of;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() { return tg::models::testing::per_test_dir("tg_trainer", true); }

/// A run of `total` steps straight, and the same run stopped after `split` steps (checkpoint in
/// `dir`) and resumed from it to `total`.
struct SplitRun {
  TrainResult full;   ///< the straight run
  TrainResult part2;  ///< the resumed steps
  Checkpoint ck;      ///< the checkpoint after `split` steps; its model then trained on to `total`
};

/// Runs both (each model initialised by Generator(1)) and expects the resumed run to repeat the
/// straight one: the same losses and the same final weights.
SplitRun expect_resume_repeats_straight(const ModelConfig& c, const TranslationData& data, const TrainOptions& options,
                                        std::int64_t split, std::int64_t total, const fs::path& dir) {
  SplitRun r;
  Generator gen_a(1);
  auto straight = make_model(c, gen_a);
  r.full = train(*straight, data, TrainOptions(options).steps(total));
  Generator gen_b(1);
  auto first = make_model(c, gen_b);
  const auto part1 = train(*first, data, TrainOptions(options).steps(split).out_dir(dir.string()));
  r.ck = load_checkpoint(dir.string());
  EXPECT_TRUE(r.ck.training);
  r.part2 = train(*r.ck.model, data, TrainOptions(options).steps(total).resume_from(r.ck.dir));
  std::vector<double> resumed = losses(part1);
  for (double l : losses(r.part2)) resumed.push_back(l);
  EXPECT_EQ(resumed, losses(r.full));
  EXPECT_TRUE(weights(*r.ck.model) == weights(*straight));
  return r;
}

}  // namespace

TEST(Trainer, SameLossesBitForBitWithOneAndTwoThreads) {
  ThreadReset reset;
  const TranslationData data = reverse_data(96);
  for (const std::string name : {"d2l", "rnnsearch"}) {
    std::vector<std::vector<double>> runs;
    std::vector<std::vector<std::vector<float>>> finals;
    for (int threads : {1, 2}) {
      Generator gen(7);
      auto model = make_model(tiny_config(data, name, 48), gen);
      const auto r = train(*model, data,
                           TrainOptions().steps(8).batch_size(32).lr(0.01).seed(5).threads(threads).progress(false));
      EXPECT_EQ(num_threads(), threads);
      ASSERT_EQ(r.steps.size(), 8u);
      runs.push_back(losses(r));
      finals.push_back(weights(*model));
    }
    EXPECT_EQ(runs[0], runs[1]) << name;  // exact equality of doubles (float32 losses)
    EXPECT_TRUE(finals[0] == finals[1]) << name;
  }
}

TEST(Trainer, ResumedRunRepeatsTheStraightRunExactly) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);  // batch 16: 4 batches per epoch, the last one partial
  const auto options = TrainOptions().batch_size(16).lr(0.01).seed(9).progress(false);

  Generator gen_a(1);
  auto straight = make_model(tiny_config(data), gen_a);
  const auto full = train(*straight, data, TrainOptions(options).steps(10).log_csv((root / "straight.csv").string()));

  // 6 steps = one epoch and two batches of the second: the checkpoint is mid-epoch.
  Generator gen_b(1);
  auto first = make_model(tiny_config(data), gen_b);
  const auto part1 = train(*first, data,
                           TrainOptions(options).steps(6).out_dir((root / "ck").string()).log_csv((root / "resumed.csv").string()));
  EXPECT_EQ(part1.state.step, 6);
  EXPECT_EQ(part1.state.epoch, 1);
  EXPECT_EQ(part1.state.batch_in_epoch, 2);
  Checkpoint ck = load_checkpoint((root / "ck").string());
  ASSERT_TRUE(ck.training && ck.has_optimizer);
  EXPECT_EQ(ck.training->step, 6);
  const auto part2 = train(*ck.model, data,
                           TrainOptions(options).steps(10).resume_from(ck.dir).log_csv((root / "resumed.csv").string()));
  ASSERT_EQ(part2.steps.size(), 4u);
  EXPECT_EQ(part2.steps.front().step, 7);

  std::vector<double> resumed = losses(part1);
  for (double l : losses(part2)) resumed.push_back(l);
  EXPECT_EQ(resumed, losses(full));
  EXPECT_TRUE(weights(*ck.model) == weights(*straight));
  // The resumed run appended to the CSV: the two logs are identical except for elapsed_s.
  auto without_time = [](const fs::path& p) {
    std::ifstream in(p);
    std::vector<std::string> rows;
    for (std::string line; std::getline(in, line);) rows.push_back(line.substr(0, line.rfind(',')));
    return rows;
  };
  EXPECT_EQ(without_time(root / "resumed.csv"), without_time(root / "straight.csv"));
  fs::remove_all(root);
}

// The transformer with the warmup schedule and label smoothing: the logged lr follows the schedule,
// training.json keeps both settings, and a resumed run repeats the straight one.
TEST(Trainer, WarmupScheduleAndLabelSmoothingResumeExactly) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);
  ModelConfig c = tiny_config(data, "transformer");
  c.num_heads = 2;
  const auto options = TrainOptions().batch_size(16).lr(0.01).warmup_steps(4).label_smoothing(0.1).seed(9).progress(false);
  const SplitRun run = expect_resume_repeats_straight(c, data, options, 5, 8, root / "ck");
  const TrainResult& full = run.full;
  ASSERT_EQ(full.steps.size(), 8u);
  for (const StepRecord& r : full.steps)
    EXPECT_DOUBLE_EQ(r.lr, 0.01 * std::min(r.step / 4.0, std::sqrt(4.0 / static_cast<double>(r.step))));
  ASSERT_TRUE(run.ck.training);
  EXPECT_EQ(run.ck.training->warmup_steps, 4);
  EXPECT_EQ(run.ck.training->label_smoothing, 0.1);
  EXPECT_EQ(run.part2.steps.front().lr, full.steps[5].lr);
  // Smoothing changes the loss being minimised: the first step's loss differs from the plain one.
  Generator gen_c(1);
  auto plain = make_model(c, gen_c);
  const auto unsmoothed = train(*plain, data, TrainOptions(options).label_smoothing(0).steps(1));
  EXPECT_NE(unsmoothed.steps.front().loss, full.steps.front().loss);
  EXPECT_THROW(train(*plain, data, TrainOptions(options).label_smoothing(1.0)), std::invalid_argument);
  EXPECT_THROW(train(*plain, data, TrainOptions(options).warmup_steps(-1)), std::invalid_argument);
  fs::remove_all(root);
}

// Linear annealing (lr_anneal): the logged lr follows (to - s) / (to - from) after `from` steps,
// training.json keeps the steps, and a run resumed in the middle of the anneal repeats the straight one.
TEST(Trainer, LinearLrAnnealingResumesExactly) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);
  const auto options = TrainOptions().batch_size(16).lr(0.02).lr_anneal(3, 8).seed(9).progress(false);
  const SplitRun run = expect_resume_repeats_straight(tiny_config(data, "rnnsearch"), data, options, 5, 8, root / "ck");
  const TrainResult& full = run.full;
  ASSERT_EQ(full.steps.size(), 8u);
  const std::vector<double> factor{1, 1, 1, 1, 4.0 / 5, 3.0 / 5, 2.0 / 5, 1.0 / 5};  // step s: (8 - (s - 1)) / 5, at most 1
  for (std::size_t k = 0; k < 8; ++k) EXPECT_EQ(full.steps[k].lr, 0.02 * factor[k]) << "step " << k + 1;
  ASSERT_TRUE(run.ck.training);
  EXPECT_EQ(run.ck.training->lr_anneal_from, 3);
  EXPECT_EQ(run.ck.training->lr_anneal_to, 8);
  // Without annealing the same steps differ (the lr is constant).
  Generator gen_c(1);
  auto constant = make_model(tiny_config(data, "rnnsearch"), gen_c);
  const auto flat = train(*constant, data, TrainOptions(options).lr_anneal(0, 0).steps(8));
  EXPECT_EQ(flat.steps.back().lr, 0.02);
  EXPECT_NE(losses(flat), losses(full));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { train(*constant, data, TrainOptions(options).lr_anneal(5, 5)); }),
            "train: lr_anneal from 5 to 5 must satisfy 0 <= from < to <= " + std::to_string(limits::kMaxCount));
  EXPECT_EQ(error_of<std::invalid_argument>([&] { train(*constant, data, TrainOptions(options).warmup_steps(2)); }),
            "train: lr_anneal cannot be combined with warmup_steps (the schedule sets the lr)");
  fs::remove_all(root);
}

TEST(Trainer, LogsEveryStepAndCheckpointsAtEpochEnds) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(40);
  Generator gen(3);
  auto model = make_model(tiny_config(data, "rnnencdec"), gen);
  const auto r = train(*model, data,
                       TrainOptions().epochs(3).batch_size(16).seed(1).progress(false).shuffle(false)
                           .log_csv((root / "log.csv").string()).out_dir((root / "ck").string()));
  ASSERT_EQ(r.steps.size(), 9u);  // 3 batches (16, 16, 8) per epoch
  EXPECT_EQ(r.state.epoch, 3);
  EXPECT_EQ(r.state.step, 9);
  std::ifstream in(root / "log.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "step,epoch,loss,tokens,grad_norm,lr,elapsed_s");
  std::vector<std::string> rows;
  while (std::getline(in, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 9u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    long long step = 0, epoch = 0, tokens = 0;
    double loss = 0, norm = 0, lr = 0, elapsed = 0;
    ASSERT_EQ(std::sscanf(rows[i].c_str(), "%lld,%lld,%lf,%lld,%lf,%lf,%lf", &step, &epoch, &loss, &tokens, &norm, &lr,
                          &elapsed),
              7)
        << rows[i];
    EXPECT_EQ(step, static_cast<long long>(i + 1));
    EXPECT_EQ(epoch, static_cast<long long>(i / 3 + 1));
    EXPECT_EQ(static_cast<float>(loss), static_cast<float>(r.steps[i].loss));
    EXPECT_EQ(tokens, r.steps[i].tokens);
    EXPECT_GT(norm, 0.0);
    EXPECT_EQ(lr, 0.005);
  }
  // The last batch of each epoch holds 8 pairs; its tokens are the valid target lengths.
  std::int64_t expect_tokens = 0;
  for (auto v : data.train.tgt_valid_len().to_vector<std::int64_t>()) expect_tokens += v;
  EXPECT_EQ(r.steps[0].tokens + r.steps[1].tokens + r.steps[2].tokens, expect_tokens);
  const auto st = load_training_state((root / "ck").string());
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->epoch, 3);
  EXPECT_EQ(st->batch_in_epoch, 0);
  EXPECT_FALSE(st->shuffle);

  // Every second epoch: 3 epochs write at epoch 2 and at the end (2 checkpoints, not 3).
  int writes = 0;
  tg::models::detail::set_checkpoint_write_hook([&](const std::string& file) { writes += file == "config.json"; });
  Generator gen2(3);
  auto model2 = make_model(tiny_config(data, "rnnencdec"), gen2);
  train(*model2, data, TrainOptions().epochs(3).batch_size(16).progress(false).checkpoint_every(2)
                           .out_dir((root / "ck2").string()));
  tg::models::detail::set_checkpoint_write_hook({});
  EXPECT_EQ(writes, 2);
  EXPECT_EQ(load_training_state((root / "ck2").string())->epoch, 3);
  EXPECT_THROW(TrainOptions().checkpoint_every(-1).validate(), std::invalid_argument);
  fs::remove_all(root);
}

TEST(Trainer, LossGoesDownAndEvaluationIsConsistent) {
  const TranslationData data = reverse_data(120, 8);
  Generator gen(4);
  auto config = tiny_config(data, "d2l", 32);
  config.dropout = 0.0;
  auto model = make_model(config, gen);
  const double before = evaluate_loss(*model, data.train);
  const auto r = train(*model, data, TrainOptions().steps(60).batch_size(32).lr(0.01).seed(2).progress(false));
  const double after = evaluate_loss(*model, data.train);
  EXPECT_LT(after, 0.75 * before) << "before " << before << " after " << after;
  EXPECT_TRUE(model->is_training());

  const EvalReport rep = evaluate(*model, data.train_pairs, data.src_vocab, data.tgt_vocab);
  EXPECT_EQ(rep.count, static_cast<std::int64_t>(data.train_pairs.size()));
  EXPECT_DOUBLE_EQ(rep.loss, after);
  std::int64_t exact = 0;
  std::vector<std::vector<std::string>> hyps;
  for (std::size_t i = 0; i < data.train_pairs.size(); ++i) {
    exact += rep.translations[i].tokens == data.train_pairs.tgt[i];
    hyps.push_back(rep.translations[i].tokens);
  }
  EXPECT_DOUBLE_EQ(rep.exact_match, static_cast<double>(exact) / static_cast<double>(rep.count));
  EXPECT_DOUBLE_EQ(rep.bleu4, corpus_bleu(hyps, data.train_pairs.tgt).score);
}

TEST(Trainer, EvaluateAPerfectTranslator) {
  // Two one-word sources, each translated perfectly by a scripted model.
  TokenizedPairs pairs;
  pairs.src = {{"x"}, {"y"}};
  pairs.tgt = {{"a", "b", "a", "b"}, {"b", "a", "b", "a", "a"}};
  const Vocab src_vocab = Vocab::build(pairs.src, 1);
  const Vocab tgt_vocab = Vocab::build(pairs.tgt, 1);
  const std::vector<std::vector<std::int64_t>> outputs{tgt_vocab.ids(pairs.tgt[0]), tgt_vocab.ids(pairs.tgt[1])};
  const std::int64_t x = src_vocab.id("x");
  ModelConfig c;
  c.src_vocab = src_vocab.size();
  c.tgt_vocab = tgt_vocab.size();
  c.num_steps = 8;
  tg::models::testing::ScriptedModel model(c, [&](std::int64_t src0, const std::vector<std::int64_t>& prefix) {
    const auto& out = outputs[src0 == x ? 0 : 1];
    std::vector<double> p(static_cast<std::size_t>(c.tgt_vocab), 0.01);
    p[prefix.size() < out.size() ? out[prefix.size()] : Vocab::kEos] = 0.95;
    return p;
  });
  const EvalReport rep = evaluate(model, pairs, src_vocab, tgt_vocab, EvalOptions{DecodeOptions().beam_size(2), 2, 64});
  EXPECT_EQ(rep.translations[1].text(), "b a b a a");
  EXPECT_DOUBLE_EQ(rep.exact_match, 1.0);
  EXPECT_DOUBLE_EQ(rep.token_accuracy, 1.0);
  EXPECT_DOUBLE_EQ(rep.bleu_k, 1.0);
  EXPECT_DOUBLE_EQ(rep.bleu4, 1.0);
  // Every target token (and <eos>) has probability 0.95 / (0.95 + 0.01 (V - 1)).
  const double p = 0.95 / (0.95 + 0.01 * static_cast<double>(c.tgt_vocab - 1));
  EXPECT_NEAR(rep.loss, -std::log(p), 1e-5);
}

TEST(Trainer, OptionsAreValidated) {
  EXPECT_THROW(TrainOptions().batch_size(0).validate(), std::invalid_argument);
  EXPECT_THROW(TrainOptions().lr(-1).validate(), std::invalid_argument);
  EXPECT_THROW(TrainOptions().clip(-1).validate(), std::invalid_argument);
  EXPECT_THROW(TrainOptions().epochs(0).validate(), std::invalid_argument);
  EXPECT_NO_THROW(TrainOptions().epochs(0).steps(5).validate());
}

namespace {

/// The CSV's rows without their elapsed_s column (header included).
std::vector<std::string> csv_without_time(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(line.substr(0, line.rfind(',')));
  return rows;
}

void write_file_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string read_file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST(Trainer, ResumeDropsLogRowsPastTheCheckpointStep) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);  // batch 16: 4 batches per epoch
  const auto options = TrainOptions().batch_size(16).lr(0.01).seed(9).progress(false);
  const fs::path csv = root / "log.csv";

  Generator gen_a(1);
  auto straight = make_model(tiny_config(data), gen_a);
  train(*straight, data, TrainOptions(options).steps(10).log_csv((root / "straight.csv").string()));

  Generator gen_b(1);
  auto first = make_model(tiny_config(data), gen_b);
  train(*first, data, TrainOptions(options).steps(6).out_dir((root / "ck").string()).log_csv(csv.string()));
  // A run resumed from the checkpoint logs steps 7..9 and is killed before its next checkpoint.
  {
    Checkpoint ck = load_checkpoint((root / "ck").string());
    train(*ck.model, data, TrainOptions(options).steps(9).resume_from(ck.dir).log_csv(csv.string()));
  }
  // ...and half a row, as a kill in the middle of a write leaves.
  { std::ofstream(csv, std::ios::app) << "10,3,2.5"; }
  ASSERT_EQ(csv_without_time(csv).size(), 1u + 9u + 1u);

  Checkpoint ck = load_checkpoint((root / "ck").string());
  ASSERT_EQ(ck.training->step, 6);
  train(*ck.model, data, TrainOptions(options).steps(10).resume_from(ck.dir).log_csv(csv.string()));
  const auto rows = csv_without_time(csv);
  std::vector<long long> steps;
  for (std::size_t i = 1; i < rows.size(); ++i) steps.push_back(std::stoll(rows[i]));
  EXPECT_EQ(steps, (std::vector<long long>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(rows, csv_without_time(root / "straight.csv"));

  // A file that is not a training log is refused, not truncated.
  write_file_text(root / "other.csv", "step,epoch\nnot a row\n");
  EXPECT_THROW(train(*ck.model, data, TrainOptions(options).steps(10).resume_from(ck.dir).log_csv(
                                          (root / "other.csv").string())),
               std::runtime_error);
  EXPECT_EQ(csv_without_time(root / "other.csv"), (std::vector<std::string>{"step", "not a row"}));
  fs::remove_all(root);
}

// A checkpoint saved in the middle of an epoch, resumed on data with fewer batches per epoch
// (or a crafted batch_in_epoch): the epoch could never end, and training looped forever.
TEST(Trainer, ResumePastTheEndOfAnEpochOfThisDataIsRefused) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);  // batch 16: 4 batches per epoch
  const auto options = TrainOptions().batch_size(16).lr(0.01).seed(9).progress(false);
  Generator gen(1);
  auto model = make_model(tiny_config(data), gen);
  train(*model, data, TrainOptions(options).steps(3).out_dir((root / "ck").string()));
  Checkpoint ck = load_checkpoint((root / "ck").string());
  ASSERT_EQ(ck.training->batch_in_epoch, 3);
  const TranslationData fewer = reverse_data(20);  // 2 batches per epoch
  try {
    train(*ck.model, fewer, TrainOptions(options).steps(10).resume_from(ck.dir));
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "train: " + ck.dir +
                                         "/training.json: batch_in_epoch = 3 but an epoch of this data has 2 "
                                         "batches (not the data the checkpoint was trained on)");
  }
  fs::remove_all(root);
}

TEST(Trainer, ResumeWithNothingLeftKeepsTheCheckpointAndItsLastLoss) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);  // batch 16: 4 batches per epoch
  const auto options = TrainOptions().batch_size(16).lr(0.01).seed(9).progress(false);
  Generator gen(1);
  auto model = make_model(tiny_config(data), gen);
  const auto first = train(*model, data, TrainOptions(options).epochs(2).out_dir((root / "ck").string()));
  ASSERT_EQ(first.state.step, 8);
  EXPECT_EQ(first.total_steps, 8);
  EXPECT_EQ(first.state.last_loss, first.steps.back().loss);
  const std::string saved = read_file_text(root / "ck" / "training.json");

  Checkpoint ck = load_checkpoint((root / "ck").string());
  ASSERT_TRUE(ck.training);
  EXPECT_EQ(ck.training->last_loss, first.steps.back().loss);  // stored exactly (%.17g)
  for (const auto& more : {TrainOptions(options).epochs(2), TrainOptions(options).steps(8)}) {
    const auto again = train(*ck.model, data, TrainOptions(more).resume_from(ck.dir).out_dir(ck.dir));
    EXPECT_TRUE(again.steps.empty());
    EXPECT_EQ(again.steps_run, 0);
    EXPECT_EQ(again.total_steps, 8);
    EXPECT_EQ(again.state.step, 8);
    EXPECT_EQ(again.state.last_loss, first.steps.back().loss);
    EXPECT_EQ(read_file_text(root / "ck" / "training.json"), saved);  // not rewritten
  }
  // A checkpoint written before last_loss was stored: NaN, not an error.
  write_file_text(root / "old.json", "{\"step\": 3}");
  fs::create_directories(root / "old");
  fs::copy_file(root / "old.json", root / "old" / "training.json");
  EXPECT_TRUE(std::isnan(load_training_state((root / "old").string())->last_loss));
  fs::remove_all(root);
}

TEST(Trainer, ResumeWithNothingLeftRemovesWhatAKilledFinalSaveLeft) {
  // A run killed inside its final save, after the swap: the checkpoint is complete, and its
  // temporary sibling still holds part of the previous one. The resume has nothing to save, so it
  // must clean up as a save would (scripts/kill_test.sh checks that nothing stray is left).
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);
  const auto options = TrainOptions().batch_size(16).lr(0.01).seed(9).progress(false).epochs(2);
  Generator gen(1);
  auto model = make_model(tiny_config(data), gen);
  const std::string dir = (root / "ck").string();
  train(*model, data, TrainOptions(options).out_dir(dir));
  fs::create_directories(root / "ck.tmp-abc123");
  fs::copy_file(root / "ck" / "weights.npz", root / "ck.tmp-abc123" / "weights.npz");
  fs::create_directories(root / "ck.tmp-keep99");  // holds a file that is not a checkpoint's: kept
  write_file_text(root / "ck.tmp-keep99" / "notes.txt", "mine");
  fs::create_directories(root / "ck.tmp-abc12");  // not mkdtemp's pattern: kept
  const std::string saved = read_file_text(root / "ck" / "training.json");

  Checkpoint ck = load_checkpoint(dir);
  const auto again = train(*ck.model, data, TrainOptions(options).resume_from(dir).out_dir(dir));
  EXPECT_EQ(again.steps_run, 0);
  EXPECT_FALSE(again.saved);
  EXPECT_FALSE(fs::exists(root / "ck.tmp-abc123"));
  EXPECT_TRUE(fs::exists(root / "ck.tmp-keep99" / "notes.txt"));
  EXPECT_TRUE(fs::exists(root / "ck.tmp-abc12"));
  EXPECT_EQ(read_file_text(root / "ck" / "training.json"), saved);  // not rewritten
  EXPECT_NO_THROW(load_checkpoint(dir));
  fs::remove_all(root);
}

TEST(Trainer, StepHistoryIsBoundedToTheMostRecentSteps) {
  const TranslationData data = reverse_data(24, 6);
  const auto options = TrainOptions().batch_size(8).lr(0.01).seed(4).progress(false).steps(40);
  auto run = [&](std::int64_t history) {
    Generator gen(2);
    auto model = make_model(tiny_config(data, "rnnencdec", 4), gen);
    return train(*model, data, TrainOptions(options).history(history));
  };
  EXPECT_EQ(TrainOptions().history(), 4096);  // the default: 4096 records of 56 bytes
  const TrainResult full = run(100);
  ASSERT_EQ(full.steps.size(), 40u);
  const TrainResult last5 = run(5);
  EXPECT_EQ(last5.steps_run, 40);
  ASSERT_EQ(last5.steps.size(), 5u);
  EXPECT_LE(last5.steps.capacity(), 5u);  // never held more
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(last5.steps[i].step, static_cast<std::int64_t>(36 + i));
    EXPECT_EQ(last5.steps[i].loss, full.steps[35 + i].loss);
  }
  EXPECT_EQ(last5.state.last_loss, full.steps.back().loss);
  EXPECT_EQ(last5.tokens, full.tokens);
  const TrainResult none = run(0);
  EXPECT_TRUE(none.steps.empty());
  EXPECT_EQ(none.steps_run, 40);
  EXPECT_THROW(TrainOptions().history(-1).validate(), std::invalid_argument);
}

// ---- validation on a dev set, best checkpoint, early stopping, lr decay, token batches ---------

namespace {

/// Reverse-task pairs drawn with another seed than reverse_data's: a dev set.
DevSet reverse_dev(std::int64_t count) {
  DevSet dev;
  dev.pairs = tokenize_pairs(make_task("reverse", {.count = count, .min_len = 2, .max_len = 6, .seed = 77}));
  return dev;
}

std::vector<std::string> csv_rows(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(line);
  return rows;
}

/// The last `n` comma-separated fields of a row.
std::vector<std::string> last_fields(const std::string& row, std::size_t n) {
  std::vector<std::string> out;
  std::size_t end = row.size();
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t comma = row.rfind(',', end - 1);
    out.insert(out.begin(), row.substr(comma + 1, end - comma - 1));
    end = comma;
  }
  return out;
}

/// The CSV's rows without their elapsed_s column (the 7th), dev columns kept.
std::vector<std::string> csv_without_elapsed(const fs::path& p) {
  std::vector<std::string> out;
  for (const std::string& row : csv_rows(p)) {
    std::size_t begin = 0;
    for (int k = 0; k < 6; ++k) begin = row.find(',', begin) + 1;
    const std::size_t end = row.find(',', begin);
    out.push_back(row.substr(0, begin) + (end == std::string::npos ? "" : row.substr(end + 1)));
  }
  return out;
}

/// sacreBLEU of `model`'s translations of the first n dev pairs, as the trainer scores them.
double dev_bleu_of(Seq2Seq& model, const TranslationData& data, const DevSet& dev, std::size_t n, const DecodeOptions& decode) {
  const std::vector<std::vector<std::string>> sources(dev.pairs.src.begin(), dev.pairs.src.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<std::string> hyps;
  for (const Translation& t : translate_tokens(model, sources, data.src_vocab, data.tgt_vocab, decode)) {
    std::string line;
    for (const std::string& w : t.tokens) line += (line.empty() ? "" : " ") + w;
    hyps.push_back(line);
  }
  return sacre_bleu(hyps, dev_references(dev, n)).score;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

TEST(Trainer, ValidationLogsDevColumnsAndKeepsTheBestEpochsCheckpoint) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);  // batch 16: 4 batches per epoch
  const auto options = TrainOptions().batch_size(16).lr(0.02).seed(9).progress(false).epochs(5);
  Generator gen_a(1);
  auto model = make_model(tiny_config(data, "rnnsearch"), gen_a);
  const auto r = train(*model, data,
                       TrainOptions(options).dev(reverse_dev(30)).dev_bleu_pairs(20).out_dir((root / "ck").string())
                           .best_dir((root / "best").string()).log_csv((root / "log.csv").string()));
  ASSERT_EQ(r.validations.size(), 5u);  // one per epoch end
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(r.validations[k].step, static_cast<std::int64_t>(4 * (k + 1)));
    EXPECT_EQ(r.validations[k].epoch, static_cast<std::int64_t>(k + 1));
    EXPECT_EQ(r.validations[k].bleu_pairs, 20);
    EXPECT_GE(r.validations[k].dev_bleu, 0.0);
    EXPECT_GT(r.validations[k].dev_loss, 0.0);
  }
  // The CSV: two more columns, filled on the rows of the validated steps only.
  const auto rows = csv_rows(root / "log.csv");
  ASSERT_EQ(rows.size(), 21u);
  EXPECT_EQ(rows[0], "step,epoch,loss,tokens,grad_norm,lr,elapsed_s,dev_loss,dev_bleu");
  for (std::size_t step = 1; step <= 20; ++step) {
    const auto dev = last_fields(rows[step], 2);
    if (step % 4 != 0) {
      EXPECT_EQ(dev, (std::vector<std::string>{"", ""})) << rows[step];
      continue;
    }
    const ValidationRecord& v = r.validations[step / 4 - 1];
    EXPECT_EQ(dev[0], fmt("%.9g", v.dev_loss)) << rows[step];
    EXPECT_EQ(dev[1], fmt("%.4f", v.dev_bleu)) << rows[step];
  }
  // The best: highest dev BLEU, ties to the lower dev loss, the first of equals.
  std::size_t best = 0;
  for (std::size_t k = 1; k < 5; ++k) {
    const auto &v = r.validations[k], &b = r.validations[best];
    if (v.dev_bleu > b.dev_bleu || (v.dev_bleu == b.dev_bleu && v.dev_loss < b.dev_loss)) best = k;
  }
  EXPECT_EQ(r.state.best_step, r.validations[best].step);
  EXPECT_EQ(r.state.best_dev_bleu, r.validations[best].dev_bleu);
  EXPECT_EQ(r.state.best_dev_loss, r.validations[best].dev_loss);
  EXPECT_EQ(r.state.bad_validations, static_cast<std::int64_t>(4 - best));
  EXPECT_TRUE(r.validations[0].best);
  EXPECT_TRUE(r.validations[best].best);
  for (std::size_t k = best + 1; k < 5; ++k) EXPECT_FALSE(r.validations[k].best);
  // The best checkpoint holds the weights of that step: a run without validation stopped there.
  Checkpoint ck = load_checkpoint((root / "best").string());
  ASSERT_TRUE(ck.training && ck.has_optimizer);
  EXPECT_EQ(ck.training->step, r.validations[best].step);
  EXPECT_EQ(ck.training->best_step, r.validations[best].step);
  Generator gen_b(1);
  auto reference = make_model(tiny_config(data, "rnnsearch"), gen_b);
  const auto upto = train(*reference, data, TrainOptions(options).epochs(static_cast<std::int64_t>(best + 1)));
  EXPECT_TRUE(weights(*ck.model) == weights(*reference));
  // Its dev BLEU is sacreBLEU of greedy translations of the first 20 dev pairs by those weights.
  const DevSet dev = reverse_dev(30);
  EXPECT_EQ(dev_bleu_of(*ck.model, data, dev, 20, DecodeOptions()), r.validations[best].dev_bleu);
  EXPECT_GT(r.validations[best].dev_bleu, 0.0);  // so the BLEU comparisons above decided something
  // Validation draws no random numbers: the losses are those of a run without it, bit for bit.
  Generator gen_c(1);
  auto plain = make_model(tiny_config(data, "rnnsearch"), gen_c);
  EXPECT_EQ(losses(train(*plain, data, options)), losses(r));
  EXPECT_TRUE(weights(*plain) == weights(*model));
  fs::remove_all(root);
}

// TrainOptions::dev_decode (the CLI's --dev-beam): dev BLEU is that of beam-search translations.
TEST(Trainer, DevBleuUsesTheDevDecodeOptions) {
  const TranslationData data = reverse_data(50);
  const DevSet dev = reverse_dev(30);
  const DecodeOptions beam = DecodeOptions().beam_size(3);
  Generator gen(1);
  auto model = make_model(tiny_config(data, "rnnsearch"), gen);
  const auto r = train(*model, data, TrainOptions().batch_size(16).lr(0.02).seed(9).progress(false).epochs(3).dev(dev)
                                         .dev_bleu_pairs(20).dev_decode(beam));
  ASSERT_EQ(r.validations.size(), 3u);
  EXPECT_EQ(dev_bleu_of(*model, data, dev, 20, beam), r.validations.back().dev_bleu);  // the final weights
}

// lr_scale decays by a factor each plateau; without a floor, two decays of 1e-200 round it to 0,
// which training.json's loader refuses (lr_scale in (0, 1]): the checkpoint the run saved could not
// be resumed. It now stops at the smallest normal double and the checkpoint loads.
TEST(Trainer, LrDecayStopsAtTheSmallestNormalDoubleSoTheCheckpointResumes) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(32);  // 2 batches per epoch
  const auto options = TrainOptions().batch_size(16).lr(1e-30).seed(3).progress(false).epochs(4).dev(reverse_dev(10))
                           .select_by(SelectBy::kLoss).lr_decay(1e-200).lr_patience(1).out_dir((root / "ck").string());
  Generator gen(1);
  auto model = make_model(tiny_config(data), gen);
  const auto r = train(*model, data, options);
  ASSERT_EQ(r.validations.size(), 4u);  // the best, then three bad ones, each decaying
  EXPECT_EQ(r.state.lr_scale, std::numeric_limits<double>::min());
  const auto saved = load_training_state((root / "ck").string());
  ASSERT_TRUE(saved.has_value());
  EXPECT_EQ(saved->lr_scale, std::numeric_limits<double>::min());
  EXPECT_EQ(saved->step, 8);
  fs::remove_all(root);
}

// lr 1e-30 changes no float32 weight, so the dev loss stays exactly the same: a plateau from the
// second validation on. With lr decay after every bad validation and patience 3, the run decays
// three times and stops after the fourth epoch; a resume from the second epoch does the same.
TEST(Trainer, EarlyStoppingAndLrDecayOnAPlateauResumeExactly) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);  // 4 batches per epoch
  const double lr = 1e-30;
  const auto options = TrainOptions().batch_size(16).lr(lr).seed(3).progress(false).epochs(20).dev(reverse_dev(10))
                           .select_by(SelectBy::kLoss).patience(3).lr_decay(0.5).lr_patience(1);
  Generator gen_a(1);
  auto straight = make_model(tiny_config(data), gen_a);
  const auto full = train(*straight, data, TrainOptions(options).log_csv((root / "straight.csv").string()));
  EXPECT_TRUE(full.stopped_early);
  EXPECT_FALSE(full.time_limit_reached);
  EXPECT_EQ(full.state.epoch, 4);
  EXPECT_EQ(full.state.step, 16);
  ASSERT_EQ(full.validations.size(), 4u);
  EXPECT_EQ(full.state.best_step, 4);
  EXPECT_EQ(full.state.bad_validations, 3);
  EXPECT_EQ(full.state.lr_scale, 0.125);
  for (std::size_t k = 1; k < 4; ++k) {
    EXPECT_EQ(full.validations[k].dev_loss, full.validations[0].dev_loss);  // the plateau
    EXPECT_TRUE(full.validations[k].lr_decayed);
  }
  for (const StepRecord& s : full.steps) {
    const double expect = s.step <= 8 ? lr : s.step <= 12 ? lr / 2 : lr / 4;
    EXPECT_EQ(s.lr, expect) << "step " << s.step;
  }

  Generator gen_b(1);
  auto first = make_model(tiny_config(data), gen_b);
  const auto part1 = train(*first, data, TrainOptions(options).epochs(2).out_dir((root / "ck").string())
                                             .log_csv((root / "resumed.csv").string()));
  EXPECT_FALSE(part1.stopped_early);
  const auto saved = load_training_state((root / "ck").string());
  ASSERT_TRUE(saved);
  EXPECT_EQ(saved->lr_scale, 0.5);
  EXPECT_EQ(saved->bad_validations, 1);
  EXPECT_EQ(saved->validations, 2);
  Checkpoint ck = load_checkpoint((root / "ck").string());
  const auto part2 = train(*ck.model, data, TrainOptions(options).resume_from(ck.dir).out_dir(ck.dir)
                                                .log_csv((root / "resumed.csv").string()));
  EXPECT_TRUE(part2.stopped_early);
  EXPECT_EQ(part2.state.step, 16);
  EXPECT_EQ(part2.state.lr_scale, 0.125);
  EXPECT_EQ(part2.steps.front().lr, lr / 2);
  std::vector<double> resumed = losses(part1);
  for (double l : losses(part2)) resumed.push_back(l);
  EXPECT_EQ(resumed, losses(full));
  EXPECT_EQ(csv_without_elapsed(root / "resumed.csv"), csv_without_elapsed(root / "straight.csv"));
  EXPECT_EQ(last_fields(csv_rows(root / "straight.csv").at(16), 2)[0], fmt("%.9g", full.validations[3].dev_loss));
  // Resuming the stopped run does nothing; with more patience it goes on (to 5 bad validations).
  Checkpoint stopped = load_checkpoint(ck.dir);
  const auto again = train(*stopped.model, data, TrainOptions(options).resume_from(ck.dir).out_dir(ck.dir));
  EXPECT_EQ(again.steps_run, 0);
  EXPECT_TRUE(again.stopped_early);
  const auto more = train(*stopped.model, data, TrainOptions(options).patience(5).resume_from(ck.dir).out_dir(ck.dir));
  EXPECT_EQ(more.state.epoch, 6);
  EXPECT_TRUE(more.stopped_early);
  EXPECT_EQ(more.state.bad_validations, 5);
  fs::remove_all(root);
}

// A checkpoint written before RunRecord keeps the run's record as "notes", strings only: it loads
// into the typed fields and resumes exactly (plateau decay, early-stopping counters and EMA
// included), and the next save writes "run".
TEST(Trainer, ResumeFromATrainingJsonWithNotesRepeatsTheStraightRun) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);  // 4 batches per epoch
  RunRecord run;
  run.task = "reverse";
  run.num_examples = 50;
  run.holdout = 0.25;
  run.steps = 12;
  run.dev = "dev.tsv";
  run.dev_beam = 1;
  const auto options = TrainOptions().batch_size(16).lr(0.01).seed(3).progress(false).dev(reverse_dev(10))
                           .validate_every(3).lr_decay(0.5).lr_patience(1).patience(10).ema_decay(0.9).run(run);
  Generator gen_a(1);
  auto straight = make_model(tiny_config(data), gen_a);
  const auto full = train(*straight, data, TrainOptions(options).steps(12));
  Generator gen_b(1);
  auto first = make_model(tiny_config(data), gen_b);
  const auto part1 = train(*first, data, TrainOptions(options).steps(6).out_dir((root / "ck").string()));
  // training.json as the code before RunRecord wrote it, without the manifest of that time.
  auto j = nlohmann::json::parse(read_file_text(root / "ck" / "training.json"));
  ASSERT_TRUE(j.contains("run"));
  j.erase("run");
  j["notes"] = {{"task", "reverse"}, {"num_examples", "50"}, {"holdout", "0.25"}, {"steps", "12"},
                {"dev", "dev.tsv"}, {"dev_beam", "1"}, {"from_a_newer_program", "ignored"}};
  std::ofstream(root / "ck" / "training.json", std::ios::trunc) << j.dump(2) << "\n";
  fs::remove(root / "ck" / "manifest.json");
  Checkpoint ck = load_checkpoint((root / "ck").string());
  ASSERT_TRUE(ck.training);
  EXPECT_EQ(ck.training->run, run);
  EXPECT_EQ(ck.training->lr_scale, part1.state.lr_scale);
  const auto part2 = train(*ck.model, data, TrainOptions(options).steps(12).resume_from(ck.dir).out_dir(ck.dir));
  std::vector<double> resumed = losses(part1);
  for (double l : losses(part2)) resumed.push_back(l);
  EXPECT_EQ(resumed, losses(full));
  EXPECT_TRUE(weights(*ck.model) == weights(*straight));
  EXPECT_EQ(part2.state.lr_scale, full.state.lr_scale);
  EXPECT_EQ(part2.state.best_step, full.state.best_step);
  EXPECT_LT(full.state.lr_scale, 1.0);  // the decay was exercised
  const std::string rewritten = read_file_text(root / "ck" / "training.json");
  EXPECT_EQ(rewritten.find("\"notes\""), std::string::npos) << rewritten;
  EXPECT_EQ(nlohmann::json::parse(rewritten)["run"]["num_examples"], 50) << rewritten;
  fs::remove_all(root);
}

// Token batches, validation every 3 steps (inside epochs) and lr decay: a run resumed from the
// middle of an epoch repeats the straight one, validations included.
TEST(Trainer, TokenBatchesAndMidEpochValidationResumeExactly) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);
  const auto options = TrainOptions().batch_tokens(60).lr(0.02).seed(4).progress(false).dev(reverse_dev(12))
                           .validate_every(3).lr_decay(0.5).lr_patience(1);
  Generator plan_gen(0);
  const auto per_epoch = static_cast<std::int64_t>(data.train.token_batch_rows(60, false, plan_gen).size());
  ASSERT_GT(per_epoch, 3);
  const std::int64_t total = 2 * per_epoch + 2, cut = per_epoch + 1;
  Generator gen_a(1);
  auto straight = make_model(tiny_config(data), gen_a);
  const auto full = train(*straight, data, TrainOptions(options).steps(total).log_csv((root / "straight.csv").string()));
  ASSERT_EQ(full.steps_run, total);
  // Every step's batch is one of the token plan's (rows x longest row <= 60, every pair once per epoch).
  std::int64_t epoch_tokens = 0;
  for (auto v : data.train.tgt_valid_len().to_vector<std::int64_t>()) epoch_tokens += v;
  std::int64_t first_epoch = 0;
  for (const StepRecord& s : full.steps) first_epoch += s.epoch == 1 ? s.tokens : 0;
  EXPECT_EQ(first_epoch, epoch_tokens);
  // Validations: every 3 steps, at each epoch end and at the last step, never twice for one step.
  std::vector<std::int64_t> expect;
  for (std::int64_t s = 1; s <= total; ++s)
    if (s % 3 == 0 || s % per_epoch == 0 || s == total) expect.push_back(s);
  std::vector<std::int64_t> got;
  for (const auto& v : full.validations) got.push_back(v.step);
  EXPECT_EQ(got, expect);

  Generator gen_b(1);
  auto first = make_model(tiny_config(data), gen_b);
  train(*first, data, TrainOptions(options).steps(cut).out_dir((root / "ck").string()).log_csv((root / "resumed.csv").string()));
  Checkpoint ck = load_checkpoint((root / "ck").string());
  ASSERT_EQ(ck.training->batch_in_epoch, 1);
  ASSERT_EQ(ck.training->batch_tokens, 60);
  const auto part2 = train(*ck.model, data, TrainOptions(options).steps(total).resume_from(ck.dir)
                                                .log_csv((root / "resumed.csv").string()));
  EXPECT_EQ(csv_without_elapsed(root / "resumed.csv"), csv_without_elapsed(root / "straight.csv"));
  EXPECT_TRUE(weights(*ck.model) == weights(*straight));
  EXPECT_EQ(part2.state.lr_scale, full.state.lr_scale);
  EXPECT_EQ(part2.state.best_step, full.state.best_step);
  // Resuming mid-epoch with another token budget would change the epoch's batches: refused.
  EXPECT_THROW(train(*ck.model, data, TrainOptions(options).batch_tokens(80).steps(total).resume_from(
                                           (root / "ck").string())),
               std::invalid_argument);
  fs::remove_all(root);
}

namespace {

// A real model that records every batch train() computes a loss on.
class RecordingModel : public Seq2Seq {
 public:
  explicit RecordingModel(std::shared_ptr<Seq2Seq> inner)
      : Seq2Seq(inner->config()), inner_(register_module("inner", std::move(inner))) {}
  std::string name() const override { return "Recording"; }
  DecoderState begin(const Tensor& src, const Tensor& src_valid_len) override { return inner_->begin(src, src_valid_len); }
  Tensor step(const Tensor& y_prev, DecoderState& state) override { return inner_->step(y_prev, state); }
  Tensor forward(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, Tensor* attention) override {
    return inner_->forward(src, src_valid_len, dec_input, attention);
  }
  Tensor loss(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, const Tensor& tgt,
              const Tensor& tgt_valid_len, double label_smoothing) override {
    seen.push_back({.src = src.clone(), .src_valid_len = src_valid_len.clone(), .tgt = tgt.clone(),
                    .tgt_valid_len = tgt_valid_len.clone(), .rows = {}});
    return inner_->loss(src, src_valid_len, dec_input, tgt, tgt_valid_len, label_smoothing);
  }
  bool padding_is_inert() const override { return inner_->padding_is_inert(); }
  std::vector<Seq2SeqBatch> seen;

 private:
  std::shared_ptr<Seq2Seq> inner_;
};

bool same_batch(const Seq2SeqBatch& a, const Seq2SeqBatch& b) {
  return a.src.shape() == b.src.shape() && a.tgt.shape() == b.tgt.shape() &&
         a.src.to_vector<std::int64_t>() == b.src.to_vector<std::int64_t>() &&
         a.tgt.to_vector<std::int64_t>() == b.tgt.to_vector<std::int64_t>() &&
         a.src_valid_len.to_vector<std::int64_t>() == b.src_valid_len.to_vector<std::int64_t>() &&
         a.tgt_valid_len.to_vector<std::int64_t>() == b.tgt_valid_len.to_vector<std::int64_t>();
}

}  // namespace

// epoch_batch_rows is the plan `bahdanau train --write-batches` exports: the batches train()
// computes its losses on are those rows, epoch after epoch, for token and sentence batches, and
// whatever the model's initialisation drew from its own generator.
TEST(Trainer, EpochBatchRowsAreTheBatchesTrainingStepsOn) {
  const TranslationData data = reverse_data(40);
  for (const auto& options : {TrainOptions().batch_tokens(40).seed(7), TrainOptions().batch_size(6).seed(7)}) {
    for (std::uint64_t init_seed : {1, 2}) {
      Generator gen(init_seed);
      RecordingModel model(make_model(tiny_config(data, "rnnsearch"), gen));
      const std::int64_t epochs = 3;
      train(model, data, TrainOptions(options).epochs(epochs).lr(0.01).progress(false));
      std::vector<Seq2SeqBatch> plan;
      std::vector<std::vector<std::int64_t>> epoch_rows;
      for (std::int64_t e = 1; e <= epochs; ++e) {
        std::vector<std::int64_t> all;
        for (const auto& rows : epoch_batch_rows(data.train, options, e)) {
          plan.push_back(trim_padding(data.train.batch(rows)));
          all.insert(all.end(), rows.begin(), rows.end());
        }
        std::sort(all.begin(), all.end());
        std::vector<std::int64_t> every(static_cast<std::size_t>(data.train.size()));
        std::iota(every.begin(), every.end(), std::int64_t{0});
        EXPECT_EQ(all, every) << "epoch " << e << ": every row once";
        epoch_rows.push_back(epoch_batch_rows(data.train, options, e).front());
      }
      EXPECT_NE(epoch_rows[0], epoch_rows[1]) << "each epoch draws its own order";
      ASSERT_EQ(model.seen.size(), plan.size());
      for (std::size_t i = 0; i < plan.size(); ++i) EXPECT_TRUE(same_batch(model.seen[i], plan[i])) << "step " << i + 1;
    }
  }
  EXPECT_THROW(epoch_batch_rows(data.train, TrainOptions(), 0), std::invalid_argument);
}

TEST(Trainer, TimeLimitStopsAfterTheStepUnderWayAndSaves) {
  const fs::path root = temp_dir();
  const TranslationData data = reverse_data(50);
  const auto options = TrainOptions().batch_size(16).seed(2).progress(false).epochs(50).max_seconds(1e-9);
  Generator gen(1);
  auto model = make_model(tiny_config(data), gen);
  const auto r = train(*model, data, TrainOptions(options).dev(reverse_dev(5)).out_dir((root / "ck").string()));
  EXPECT_TRUE(r.time_limit_reached);
  EXPECT_EQ(r.steps_run, 1);
  ASSERT_EQ(r.validations.size(), 1u);  // the run's last step is validated
  EXPECT_EQ(r.validations[0].step, 1);
  EXPECT_EQ(load_training_state((root / "ck").string())->step, 1);
  Checkpoint ck = load_checkpoint((root / "ck").string());
  const auto again = train(*ck.model, data, TrainOptions(options).resume_from(ck.dir));
  EXPECT_EQ(again.steps_run, 0);  // the limit counts every run's time
  EXPECT_TRUE(again.time_limit_reached);
  fs::remove_all(root);
}

TEST(Trainer, ValidationOptionsAreChecked) {
  EXPECT_THROW(TrainOptions().patience(2).validate(), std::invalid_argument);  // no dev set
  EXPECT_THROW(TrainOptions().best_dir("b").validate(), std::invalid_argument);
  EXPECT_THROW(TrainOptions().dev(reverse_dev(3)).lr_decay(0).validate(), std::invalid_argument);
  EXPECT_THROW(TrainOptions().dev(reverse_dev(3)).lr_decay(0.5).warmup_steps(10).validate(), std::invalid_argument);
  EXPECT_THROW(TrainOptions().dev(reverse_dev(3)).lr_patience(0).validate(), std::invalid_argument);
  EXPECT_THROW(TrainOptions().dev(DevSet()).validate(), std::invalid_argument);
  EXPECT_THROW(TrainOptions().batch_tokens(-1).validate(), std::invalid_argument);
  EXPECT_THROW(TrainOptions().max_seconds(-1).validate(), std::invalid_argument);
  // The best checkpoint must not be the output directory or inside it (its save replaces it whole).
  EXPECT_THROW(TrainOptions().dev(reverse_dev(3)).out_dir("ck").best_dir("ck/best").validate(), std::invalid_argument);
  EXPECT_THROW(TrainOptions().dev(reverse_dev(3)).out_dir("ck/").best_dir("./ck").validate(), std::invalid_argument);
  EXPECT_NO_THROW(TrainOptions().dev(reverse_dev(3)).out_dir("ck").best_dir("ck.best").validate());
  EXPECT_NO_THROW(TrainOptions().dev(reverse_dev(3)).out_dir("ck").best_dir("ckbest/x").validate());
}
