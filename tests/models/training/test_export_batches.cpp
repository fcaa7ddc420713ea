#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../test_dirs.h"
#include "autograd/random.h"
#include "models/text/data.h"
#include "models/text/tasks.h"
#include "models/training/checkpoint.h"
#include "models/training/export_batches.h"
#include "models/training/trainer.h"
#include "models/translators/registry.h"
#include "nn/serialize.h"

using namespace tg;
using namespace tg::models;
namespace fs = std::filesystem;

namespace {

TranslationData reverse_data(std::int64_t count) {
  Generator gen(0);
  return make_translation_data(make_task("reverse", {.count = count, .min_len = 2, .max_len = 6, .seed = 3}),
                               TranslationDataOptions().num_steps(8).min_freq(1), gen);
}

std::shared_ptr<Seq2Seq> tiny_rnnsearch(const TranslationData& data) {
  ModelConfig c;
  c.model = "rnnsearch";
  c.src_vocab = data.src_vocab.size();
  c.tgt_vocab = data.tgt_vocab.size();
  c.embed_size = 8;
  c.num_hiddens = 8;
  c.num_layers = 1;
  c.num_steps = data.train.num_steps();
  Generator gen(5);
  return make_model(c, gen);
}

DevSet reverse_dev(std::int64_t count) {
  DevSet dev;
  dev.pairs = tokenize_pairs(make_task("reverse", {.count = count, .min_len = 2, .max_len = 6, .seed = 77}));
  return dev;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// The export holds the rows epoch_batch_rows gives step after step (cut at steps()), the encoded
// training and dev rows, the dev references, the settings and the model as given.
TEST(ExportBatches, WritesThePlanTheRowsTheSettingsAndTheInitialModel) {
  const fs::path dir = tg::models::testing::per_test_dir("tg_export_batches", true) / "out";
  const TranslationData data = reverse_data(40);
  const auto model = tiny_rnnsearch(data);
  const auto options = TrainOptions().batch_tokens(40).seed(7).steps(11).lr(0.002).max_seconds(90)
                           .dev(reverse_dev(6)).dev_bleu_pairs(4).validate_every(3);
  const BatchExport plan = write_training_batches(dir.string(), *model, data, options,
                                                  {.data = "task:reverse", .dev = "dev.tsv", .max_minutes = 1.5});

  std::vector<std::int64_t> rows, offsets{0}, epochs;
  for (std::int64_t e = 1; epochs.size() < 11; ++e)
    for (const auto& batch : epoch_batch_rows(data.train, options, e)) {
      if (epochs.size() == 11) break;
      rows.insert(rows.end(), batch.begin(), batch.end());
      offsets.push_back(static_cast<std::int64_t>(rows.size()));
      epochs.push_back(e);
    }
  ASSERT_GT(epochs.back(), 1) << "the plan should cross an epoch end";
  EXPECT_EQ(plan.steps, 11);
  EXPECT_EQ(plan.epochs, epochs.back());

  std::map<std::string, Tensor> npz;
  for (auto& [name, t] : nn::load_npz((dir / "batches.npz").string())) npz[name] = t;
  EXPECT_EQ(npz.at("plan_rows").to_vector<std::int64_t>(), rows);
  EXPECT_EQ(npz.at("plan_offsets").to_vector<std::int64_t>(), offsets);
  EXPECT_EQ(npz.at("plan_epoch").to_vector<std::int64_t>(), epochs);
  EXPECT_EQ(npz.at("train_tgt").to_vector<std::int64_t>(), data.train.tgt().to_vector<std::int64_t>());
  EXPECT_EQ(npz.at("train_src_valid_len").to_vector<std::int64_t>(), data.train.src_valid_len().to_vector<std::int64_t>());
  EXPECT_EQ(npz.at("dev_src").shape()[0], 6);

  std::string refs;
  for (const std::string& r : dev_references(*options.dev(), 6)) refs += r + "\n";
  EXPECT_EQ(read_file(dir / "dev.ref.txt"), refs);

  const auto meta = nlohmann::json::parse(read_file(dir / "meta.json"));
  EXPECT_EQ(meta.at("format"), "tapegrad train --write-batches 1");
  EXPECT_EQ(meta.at("model"), "rnnsearch");
  EXPECT_EQ(meta.at("num_parameters"), model->num_parameters());
  EXPECT_EQ(meta.at("padding_is_inert"), true);
  EXPECT_EQ(meta.at("seed"), 7);
  EXPECT_EQ(meta.at("lr"), 0.002);
  EXPECT_EQ(meta.at("max_minutes"), 1.5);
  EXPECT_EQ(meta.at("batch_tokens"), 40);
  EXPECT_EQ(meta.at("validate_every"), 3);
  EXPECT_EQ(meta.at("dev_bleu_pairs"), 4);
  EXPECT_EQ(meta.at("data"), "task:reverse");
  EXPECT_EQ(meta.at("dev"), "dev.tsv");
  EXPECT_EQ(meta.at("train_rows"), 40);
  EXPECT_EQ(meta.at("dev_rows"), 6);
  EXPECT_EQ(meta.at("plan_steps"), 11);
  EXPECT_EQ(meta.at("plan_epochs"), epochs.back());

  const Checkpoint init = load_checkpoint((dir / "init").string());
  EXPECT_FALSE(init.training.has_value());
  const auto saved = init.model->state_dict(), given = model->state_dict();
  ASSERT_EQ(saved.size(), given.size());
  for (std::size_t i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(saved[i].first, given[i].first);
    EXPECT_EQ(saved[i].second.to_vector<float>(), given[i].second.to_vector<float>()) << saved[i].first;
  }
  fs::remove_all(dir.parent_path());
}

// Without a dev set there is no dev file and meta.json records no validation; the time limit
// defaults to the options' in minutes; epochs() bounds a plan without steps().
TEST(ExportBatches, WithoutDevSetOrStepsAndItsErrors) {
  const fs::path root = tg::models::testing::per_test_dir("tg_export_batches", true);
  const TranslationData data = reverse_data(20);
  const auto model = tiny_rnnsearch(data);
  const auto options = TrainOptions().batch_size(8).epochs(2).max_seconds(120);
  const BatchExport plan = write_training_batches((root / "a").string(), *model, data, options, {.data = "pairs.tsv"});
  EXPECT_EQ(plan.steps, 6);  // 3 batches of at most 8 of the 20 rows, 2 epochs
  EXPECT_EQ(plan.epochs, 2);
  EXPECT_FALSE(fs::exists(root / "a" / "dev.ref.txt"));
  const auto meta = nlohmann::json::parse(read_file(root / "a" / "meta.json"));
  EXPECT_EQ(meta.at("max_minutes"), 2.0);
  EXPECT_EQ(meta.at("dev"), "");
  EXPECT_EQ(meta.at("dev_rows"), 0);
  EXPECT_EQ(meta.at("validate_every"), 0);

  // A time limit in minutes that is not the options' one.
  EXPECT_THROW(write_training_batches((root / "b").string(), *model, data, options, {.max_minutes = 3.0}),
               std::invalid_argument);
  EXPECT_THROW(write_training_batches((root / "b").string(), *model, TranslationData(), options, {}),
               std::invalid_argument);
  EXPECT_FALSE(fs::exists(root / "b"));
  // A directory that cannot be created: the error names it.
  std::ofstream(root / "file") << "x";
  try {
    write_training_batches((root / "file" / "sub").string(), *model, data, options, {});
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((root / "file" / "sub").string() + ": cannot create the directory"),
              std::string::npos) << e.what();
  }
  fs::remove_all(root);
}
