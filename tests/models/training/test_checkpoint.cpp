#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../autograd/error_of.h"
#include "../test_dirs.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "models/text/text.h"
#include "models/training/checkpoint.h"
#include "models/translators/seq2seq.h"
#include "nn/optim.h"

using namespace tg;
using namespace tg::models;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() { return tg::models::testing::per_test_dir("tg_ckpt", true); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

struct Fixture {
  Vocab src_vocab = Vocab::build({{"go", "."}, {"i", "lost", "."}, {"he's", "calm", "."}}, 1);
  Vocab tgt_vocab = Vocab::build({{"va", "!"}, {"j'ai", "perdu", "."}, {"il", "est", "calme", "."}}, 1);
  ModelConfig config(const std::string& model = "d2l") const {
    ModelConfig c;
    c.model = model;
    c.src_vocab = src_vocab.size();
    c.tgt_vocab = tgt_vocab.size();
    c.embed_size = 6;
    c.num_hiddens = 5;
    c.num_layers = model == "d2l" ? 2 : 1;
    c.num_steps = 5;
    c.num_heads = 2;  // transformer: embed_size 6
    return c;
  }
};

/// Teacher-forced logits of a fixed batch, in eval mode.
std::vector<float> logits_of(Seq2Seq& model) {
  NoGradGuard no_grad;
  model.eval();
  const Tensor src = Tensor::from_vector(std::vector<std::int64_t>{4, 5, 3, 1, 1, 6, 7, 8, 3, 1}, {2, 5});
  const Tensor len = Tensor::from_vector(std::vector<std::int64_t>{3, 4}, {2});
  const Tensor dec = Tensor::from_vector(std::vector<std::int64_t>{2, 4, 5, 3, 1, 2, 6, 7, 8, 3}, {2, 5});
  auto out = model.forward(src, len, dec).to_vector<float>();
  model.train();
  return out;
}

std::vector<std::string> leftovers(const fs::path& parent) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(parent)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos) out.push_back(name);
  }
  return out;
}

std::string load_error(const fs::path& dir) {
  return tg::testing::error_of<std::runtime_error>([&] { load_checkpoint(dir.string()); });
}

}  // namespace

TEST(Checkpoint, RoundTripGivesIdenticalLogitsForEveryModel) {
  const fs::path root = temp_dir();
  Fixture f;
  for (const std::string name : {"d2l", "rnnsearch", "rnnencdec", "transformer"}) {
    Generator gen(11);
    auto model = make_model(f.config(name), gen);
    TrainingState st;
    st.step = 17;
    st.epoch = 2;
    st.batch_in_epoch = 3;
    st.seed = 0xfedcba9876543210ULL;
    st.batch_size = 4;
    st.lr = 0.005;
    st.clip = 1.0;
    st.shuffle = false;
    st.run.task = "dates";
    save_checkpoint((root / name).string(), *model, f.src_vocab, f.tgt_vocab, nullptr, &st);
    const Checkpoint ck = load_checkpoint((root / name).string());
    EXPECT_EQ(ck.config.model, name);
    EXPECT_EQ(ck.config.src_vocab, f.src_vocab.size());
    EXPECT_EQ(ck.config.num_layers, f.config(name).num_layers);
    EXPECT_EQ(ck.src_vocab, f.src_vocab);
    EXPECT_EQ(ck.tgt_vocab, f.tgt_vocab);
    EXPECT_EQ(logits_of(*ck.model), logits_of(*model)) << name;  // bitwise: float32 weights round-trip
    ASSERT_TRUE(ck.training.has_value());
    EXPECT_EQ(ck.training->step, 17);
    EXPECT_EQ(ck.training->epoch, 2);
    EXPECT_EQ(ck.training->batch_in_epoch, 3);
    EXPECT_EQ(ck.training->seed, 0xfedcba9876543210ULL);
    EXPECT_FALSE(ck.training->shuffle);
    EXPECT_EQ(ck.training->run.task, "dates");
    EXPECT_FALSE(ck.has_optimizer);
  }
  // The vocabulary files are one token per line, line i = id i.
  EXPECT_EQ(read_file(root / "d2l" / "tgt_vocab.txt").substr(0, 24), "<unk>\n<pad>\n<bos>\n<eos>\n");
  EXPECT_TRUE(leftovers(root).empty());
  fs::remove_all(root);
}

// average_checkpoints: every weight is the mean of the checkpoints' (float64 sum, then float32),
// the dropout fields may differ, anything else that differs is refused naming the file.
TEST(Checkpoint, AverageCheckpointsTakesTheMeanOfEveryWeight) {
  const fs::path root = temp_dir();
  Fixture f;
  std::vector<std::string> dirs;
  std::vector<nn::NamedTensors> weights;
  for (std::uint64_t seed : {1, 2, 3}) {
    ModelConfig c = f.config("rnnsearch");
    c.readout_dropout = 0.1 * static_cast<double>(seed);  // training-only: may differ
    Generator gen(seed);
    auto model = make_model(c, gen);
    TrainingState st;
    st.step = static_cast<std::int64_t>(seed);
    dirs.push_back((root / ("s" + std::to_string(seed))).string());
    save_checkpoint(dirs.back(), *model, f.src_vocab, f.tgt_vocab, nullptr, &st);
    weights.push_back(load_checkpoint(dirs.back()).model->named_parameters());
  }
  const Checkpoint avg = average_checkpoints(dirs);
  EXPECT_FALSE(avg.training.has_value());
  EXPECT_FALSE(avg.has_optimizer);
  EXPECT_EQ(avg.config.readout_dropout, 0.1);  // the first checkpoint's config
  const nn::NamedTensors got = avg.model->named_parameters();
  ASSERT_EQ(got.size(), weights[0].size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    const auto a = weights[0][k].second.to_vector<float>(), b = weights[1][k].second.to_vector<float>(),
               c = weights[2][k].second.to_vector<float>(), m = got[k].second.to_vector<float>();
    for (std::size_t i = 0; i < m.size(); ++i)
      ASSERT_EQ(m[i], static_cast<float>((double(a[i]) + double(b[i]) + double(c[i])) / 3.0)) << got[k].first;
  }
  // One checkpoint averages to itself.
  EXPECT_EQ(logits_of(*average_checkpoints({dirs[0]}).model), logits_of(*load_checkpoint(dirs[0]).model));
  // It saves and loads like any checkpoint.
  save_checkpoint((root / "avg").string(), *avg.model, avg.src_vocab, avg.tgt_vocab);
  EXPECT_EQ(logits_of(*load_checkpoint((root / "avg").string()).model), logits_of(*avg.model));

  auto error = [&](const std::vector<std::string>& d) {
    return tg::testing::error_of<std::runtime_error>([&] { average_checkpoints(d); });
  };
  Generator gen(4);
  ModelConfig wider = f.config("rnnsearch");
  wider.num_hiddens = 7;
  save_checkpoint((root / "wider").string(), *make_model(wider, gen), f.src_vocab, f.tgt_vocab);
  EXPECT_EQ(error({dirs[0], (root / "wider").string()}),
            "average_checkpoints: " + (root / "wider").string() + " is not a checkpoint of " + dirs[0] +
                "'s model: its config.json (architecture) differs");
  Vocab other_tgt = Vocab::build({{"va", "!"}, {"j'ai", "perdu", "."}, {"elle", "est", "calme", "."}}, 1);
  ASSERT_EQ(other_tgt.size(), f.tgt_vocab.size());
  save_checkpoint((root / "vocab").string(), *make_model(f.config("rnnsearch"), gen), f.src_vocab, other_tgt);
  EXPECT_EQ(error({dirs[0], (root / "vocab").string()}),
            "average_checkpoints: " + (root / "vocab").string() + " is not a checkpoint of " + dirs[0] +
                "'s model: its tgt_vocab.txt differs");
  EXPECT_EQ(error({}), "average_checkpoints: no checkpoints given");
  fs::remove_all(root);
}

TEST(Checkpoint, OptimizerStateRoundTrips) {
  const fs::path root = temp_dir();
  Fixture f;
  Generator gen(5);
  auto model = make_model(f.config(), gen);
  nn::Adam opt(model->named_parameters(), nn::AdamOptions(0.01));
  for (auto& p : model->parameters()) p.set_grad(Tensor::full(p.shape(), 0.25));
  opt.step();
  save_checkpoint((root / "ck").string(), *model, f.src_vocab, f.tgt_vocab, &opt);
  const Checkpoint ck = load_checkpoint((root / "ck").string());
  ASSERT_TRUE(ck.has_optimizer);
  nn::Adam opt2(ck.model->named_parameters(), nn::AdamOptions(0.01));
  load_optimizer_state(ck.dir, opt2);
  EXPECT_EQ(opt2.step_count(), 1);
  const auto a = opt.state_dict(), b = opt2.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_vector<double>(), b[i].second.to_vector<double>()) << a[i].first;
  }
  fs::remove_all(root);
}

TEST(Checkpoint, ConfigJsonDefaultsAndErrors) {
  // Missing keys take their defaults.
  const ModelConfig c = config_from_json(R"({"model": "rnnsearch", "num_layers": 1, "dropout": 0})", "c.json");
  EXPECT_EQ(c.model, "rnnsearch");
  EXPECT_EQ(c.embed_size, ModelConfig().embed_size);
  EXPECT_EQ(c.dropout, 0.0);
  EXPECT_EQ(c.readout, Readout::maxout);
  // Round trip of every field.
  ModelConfig d;
  d.model = "rnnsearch";
  d.src_vocab = 9;
  d.tgt_vocab = 8;
  d.num_layers = 1;
  d.readout = Readout::linear;
  d.attention = AttentionScore::dot;
  d.ablation = Ablation::zero_init;
  d.maxout_units = 3;
  d.embedding_dropout = 0.25;
  d.readout_dropout = 0.5;
  const ModelConfig e = config_from_json(config_to_json(d));
  EXPECT_EQ(e.embedding_dropout, 0.25);
  EXPECT_EQ(e.readout_dropout, 0.5);
  EXPECT_EQ(config_to_json(e), config_to_json(d));

  auto message = [](const std::string& text) {
    return tg::testing::error_of<std::runtime_error>([&] { config_from_json(text, "ck/config.json"); });
  };
  EXPECT_EQ(message(R"({"model": "lstm"})"),
            "ck/config.json: 'model': unknown model \"lstm\" (registered: d2l, rnnsearch, rnnencdec, transformer)");
  EXPECT_EQ(message(R"({"readout": "softmax"})"),
            "ck/config.json: 'readout': unknown value \"softmax\" (allowed: maxout, linear)");
  EXPECT_EQ(message(R"({"ablation": 3})"), "ck/config.json: 'ablation' must be a string, got 3");
  EXPECT_NE(message(R"({"embed_size": "big"})").find("'embed_size' must be an integer"), std::string::npos);
  EXPECT_NE(message(R"({"num_hiden": 3})").find("unknown key 'num_hiden'"), std::string::npos);
  EXPECT_NE(message(R"({"model": "d2l",)").find("ck/config.json: invalid JSON"), std::string::npos);
  EXPECT_NE(message("[1, 2]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(message(R"({"dropout": 1.5})").find("dropout"), std::string::npos);
  // A number too large for a double is nlohmann's out_of_range, not a parse_error (found by
  // fuzzing: tests/fuzz/regressions/config_json/number_overflow); it too is a runtime_error.
  EXPECT_EQ(message(R"({"dropout": 1e999})"), "ck/config.json: invalid JSON: number overflow parsing '1e999'");
  EXPECT_NE(message("2222E000000222222222222220000").find("ck/config.json: invalid JSON: number overflow"),
            std::string::npos);
}

TEST(Checkpoint, CorruptFilesAreRefusedNamingTheFile) {
  const fs::path root = temp_dir();
  Fixture f;
  Generator gen(2);
  auto model = make_model(f.config(), gen);
  const fs::path ck = root / "ck";
  save_checkpoint(ck.string(), *model, f.src_vocab, f.tgt_vocab);
  // Without manifest.json (an older checkpoint) each file's own checks are what catch corruption.
  fs::remove(ck / "manifest.json");
  const std::string weights = read_file(ck / "weights.npz");
  const std::string config = read_file(ck / "config.json");
  const std::string vocab = read_file(ck / "src_vocab.txt");

  // A flipped byte inside the tensor data (the zip CRC catches it).
  std::string flipped = weights;
  flipped[weights.size() / 2] = static_cast<char>(flipped[weights.size() / 2] ^ 0x5a);
  write_file(ck / "weights.npz", flipped);
  EXPECT_NE(load_error(ck).find((ck / "weights.npz").string()), std::string::npos) << load_error(ck);
  // A truncated archive.
  write_file(ck / "weights.npz", weights.substr(0, weights.size() - 100));
  EXPECT_NE(load_error(ck).find((ck / "weights.npz").string()), std::string::npos) << load_error(ck);
  write_file(ck / "weights.npz", weights);
  EXPECT_EQ(load_error(ck), "(no exception)");

  // Truncated JSON; an invalid value.
  write_file(ck / "config.json", config.substr(0, config.size() / 2));
  EXPECT_NE(load_error(ck).find((ck / "config.json").string() + ": invalid JSON"), std::string::npos) << load_error(ck);
  write_file(ck / "config.json", R"({"model": "d2l", "num_hiddens": 7})");
  // Shapes no longer match the weights: refused by the weights' name/shape check.
  EXPECT_NE(load_error(ck).find((ck / "weights.npz").string()), std::string::npos) << load_error(ck);
  write_file(ck / "config.json", R"({"model": "d2l", "src_vocab": 99, "embed_size": 6, "num_hiddens": 5})");
  EXPECT_NE(load_error(ck).find("src_vocab = 99"), std::string::npos) << load_error(ck);
  write_file(ck / "config.json", config);

  // A vocabulary file without its reserved tokens; a missing file.
  write_file(ck / "src_vocab.txt", "go\n.\n");
  EXPECT_NE(load_error(ck).find((ck / "src_vocab.txt").string()), std::string::npos) << load_error(ck);
  write_file(ck / "src_vocab.txt", vocab);
  fs::remove(ck / "weights.npz");
  EXPECT_NE(load_error(ck).find((ck / "weights.npz").string()), std::string::npos) << load_error(ck);
  EXPECT_NE(load_error(root / "nope").find("no such directory"), std::string::npos);
  fs::remove_all(root);
}

TEST(Checkpoint, ReplacesAtomicallyAndKeepsTheOldOneWhenWritingFails) {
  const fs::path root = temp_dir();
  Fixture f;
  Generator gen1(1), gen2(2);
  auto old_model = make_model(f.config(), gen1);
  auto new_model = make_model(f.config(), gen2);
  const fs::path ck = root / "ck";
  save_checkpoint(ck.string(), *old_model, f.src_vocab, f.tgt_vocab);
  const auto old_logits = logits_of(*old_model);

  // A failure after each file in turn: the old checkpoint stays whole, nothing is left behind.
  for (const std::string failing : {"config.json", "weights.npz", "src_vocab.txt", "tgt_vocab.txt", "manifest.json"}) {
    tg::models::detail::set_checkpoint_write_hook([&](const std::string& file) {
      if (file == failing) throw std::runtime_error("injected failure after " + file);
    });
    EXPECT_THROW(save_checkpoint(ck.string(), *new_model, f.src_vocab, f.tgt_vocab), std::runtime_error) << failing;
    tg::models::detail::set_checkpoint_write_hook({});
    EXPECT_EQ(logits_of(*load_checkpoint(ck.string()).model), old_logits) << failing;
    EXPECT_TRUE(leftovers(root).empty()) << failing;
  }

  // A successful save replaces it, by the atomic exchange and by the fallback of two renames.
  save_checkpoint(ck.string() + "/", *new_model, f.src_vocab, f.tgt_vocab);
  EXPECT_EQ(logits_of(*load_checkpoint(ck.string()).model), logits_of(*new_model));
  EXPECT_TRUE(leftovers(root).empty());
  tg::models::detail::set_checkpoint_exchange_disabled(true);
  save_checkpoint(ck.string(), *old_model, f.src_vocab, f.tgt_vocab);
  EXPECT_EQ(logits_of(*load_checkpoint(ck.string()).model), old_logits);
  EXPECT_TRUE(leftovers(root).empty());
  save_checkpoint(ck.string(), *new_model, f.src_vocab, f.tgt_vocab);
  tg::models::detail::set_checkpoint_exchange_disabled(false);
  EXPECT_EQ(logits_of(*load_checkpoint(ck.string()).model), logits_of(*new_model));
  EXPECT_TRUE(leftovers(root).empty());
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(ck)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"config.json", "manifest.json", "src_vocab.txt", "tgt_vocab.txt",
                                             "weights.npz"}));

  // A parent that is a regular file: refused, nothing created.
  write_file(root / "afile", "x");
  EXPECT_THROW(save_checkpoint((root / "afile" / "ck").string(), *new_model, f.src_vocab, f.tgt_vocab),
               std::runtime_error);
  EXPECT_EQ(read_file(root / "afile"), "x");
  // Creating a new checkpoint inside a directory that cannot be written fails cleanly (skipped
  // when running as root, which ignores permissions).
  const fs::path locked = root / "locked";
  fs::create_directories(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
  if (::access(locked.c_str(), W_OK) != 0) {  // root ignores permissions
    EXPECT_THROW(save_checkpoint((locked / "ck").string(), *new_model, f.src_vocab, f.tgt_vocab), std::runtime_error);
    EXPECT_FALSE(fs::exists(locked / "ck"));
  }
  fs::permissions(locked, fs::perms::owner_all);
  fs::remove_all(root);
}

TEST(Checkpoint, RefusesToReplaceADirectoryThatIsNotACheckpoint) {
  const fs::path root = temp_dir();
  Fixture f;
  Generator gen(1);
  auto model = make_model(f.config(), gen);
  fs::create_directories(root / "mine");
  write_file(root / "mine" / "notes.txt", "precious");
  try {
    save_checkpoint((root / "mine").string(), *model, f.src_vocab, f.tgt_vocab);
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a checkpoint"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(root / "mine" / "notes.txt"), "precious");
  EXPECT_TRUE(leftovers(root).empty());
  // An empty directory is fine.
  fs::create_directories(root / "empty");
  save_checkpoint((root / "empty").string(), *model, f.src_vocab, f.tgt_vocab);
  EXPECT_EQ(logits_of(*load_checkpoint((root / "empty").string()).model), logits_of(*model));
  // Vocabularies that do not match the model are refused before anything is written.
  EXPECT_THROW(save_checkpoint((root / "bad").string(), *model, f.tgt_vocab, f.tgt_vocab), std::runtime_error);
  EXPECT_FALSE(fs::exists(root / "bad"));
  fs::remove_all(root);
}

namespace {

/// The first line of load_checkpoint's error ("" if it loads).
std::string first_line_of_load_error(const fs::path& dir) {
  const std::string e = load_error(dir);
  return e.substr(0, e.find('\n'));
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

}  // namespace

TEST(Checkpoint, ManifestRefusesAChangedFileNamingIt) {
  const fs::path root = temp_dir();
  Fixture f;
  Generator gen(3), other_gen(4);
  auto model = make_model(f.config(), gen);
  auto other = make_model(f.config(), other_gen);
  nn::Adam opt(model->named_parameters(), nn::AdamOptions(0.01));
  TrainingState st;
  st.step = 17;
  const fs::path ck = root / "ck";
  auto fresh = [&] {
    fs::remove_all(ck);
    save_checkpoint(ck.string(), *model, f.src_vocab, f.tgt_vocab, &opt, &st);
    ASSERT_EQ(load_error(ck), "(no exception)");
  };
  auto expect_named = [&](const std::string& file) {
    EXPECT_EQ(first_line_of_load_error(ck),
              "checkpoint " + ck.string() + ": " + file + " does not match its SHA-256 in manifest.json");
    // The same files without the manifest load (an older checkpoint's path): only the digest caught it.
    const fs::path bare = root / "bare";
    fs::remove_all(bare);
    fs::copy(ck, bare, fs::copy_options::recursive);
    fs::remove(bare / "manifest.json");
    ::testing::internal::CaptureStderr();  // "no manifest.json (older format)"
    EXPECT_EQ(load_error(bare), "(no exception)") << file;
    nn::Adam reader(model->named_parameters(), nn::AdamOptions(0.01));
    EXPECT_NO_THROW(load_optimizer_state(bare.string(), reader)) << file;
    EXPECT_NO_THROW(load_training_state(bare.string())) << file;
    ::testing::internal::GetCapturedStderr();
  };
  // Each change below still parses and loads without a manifest: only the digest catches it.
  fresh();
  write_file(ck / "config.json", replaced(read_file(ck / "config.json"), "\"dropout\": 0.1", "\"dropout\": 0.5"));
  expect_named("config.json");
  fresh();
  std::string vocab = read_file(ck / "src_vocab.txt");
  vocab = replaced(vocab, "calm\n", "CALM\n");
  write_file(ck / "src_vocab.txt", vocab);
  expect_named("src_vocab.txt");
  fresh();
  write_file(ck / "tgt_vocab.txt", replaced(read_file(ck / "tgt_vocab.txt"), "perdu\n", "trouvé\n"));
  expect_named("tgt_vocab.txt");
  fresh();
  write_file(ck / "training.json", replaced(read_file(ck / "training.json"), "\"step\": 17", "\"step\": 18"));
  expect_named("training.json");
  try {
    load_training_state(ck.string());
    ADD_FAILURE() << "load_training_state accepted a changed training.json";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("training.json does not match its SHA-256"), std::string::npos) << e.what();
  }
  fresh();
  other->save((ck / "weights.npz").string());  // a valid archive (CRCs fine) with other weights
  expect_named("weights.npz");
  fresh();
  {
    nn::Adam opt2(model->named_parameters(), nn::AdamOptions(0.01));
    for (auto& p : model->parameters()) p.set_grad(Tensor::full(p.shape(), 0.5));
    opt2.step();
    opt2.save((ck / "optimizer.npz").string());
  }
  expect_named("optimizer.npz");
  nn::Adam opt3(model->named_parameters(), nn::AdamOptions(0.01));
  EXPECT_THROW(load_optimizer_state(ck.string(), opt3), std::runtime_error);
  // A listed file removed; a checkpoint file the manifest does not list.
  fresh();
  fs::remove(ck / "optimizer.npz");
  EXPECT_EQ(first_line_of_load_error(ck),
            "checkpoint " + ck.string() + ": optimizer.npz is listed in manifest.json but missing");
  fs::remove_all(ck);
  save_checkpoint(ck.string(), *model, f.src_vocab, f.tgt_vocab);
  write_file(ck / "training.json", "{}\n");
  EXPECT_EQ(first_line_of_load_error(ck), "checkpoint " + ck.string() + ": training.json is not listed in manifest.json");
  // A newer format is refused rather than half-checked.
  fs::remove_all(ck);
  save_checkpoint(ck.string(), *model, f.src_vocab, f.tgt_vocab);
  write_file(ck / "manifest.json", replaced(read_file(ck / "manifest.json"), "\"format_version\": 1",
                                           "\"format_version\": 2"));
  EXPECT_NE(first_line_of_load_error(ck).find("manifest.json: format_version 2"), std::string::npos)
      << load_error(ck);
  fs::remove_all(root);
}

// Before the fix the model was built from config.json first: sizes in range but far from the
// weights' (here about 850 million parameters, 3.4 GB) were allocated before load_state_dict refused the shapes.
TEST(Checkpoint, ConfigSizesThatDoNotMatchTheWeightsAreRefusedBeforeBuildingTheModel) {
  const fs::path root = temp_dir();
  Fixture f;
  Generator gen(3);
  auto model = make_model(f.config(), gen);
  const fs::path ck = root / "ck";
  save_checkpoint(ck.string(), *model, f.src_vocab, f.tgt_vocab);
  fs::remove(ck / "manifest.json");  // a crafted checkpoint can carry a matching manifest as well
  ModelConfig big = f.config();
  big.embed_size = 4096;
  big.num_hiddens = 4096;
  big.num_layers = 4;
  write_file(ck / "config.json", config_to_json(big));
  ::testing::internal::CaptureStderr();
  const std::int64_t peak_before = memory::cache_stats().peak_in_use_bytes;
  const std::string err = load_error(ck);
  const std::int64_t peak_after = memory::cache_stats().peak_in_use_bytes;
  ::testing::internal::GetCapturedStderr();
  // Nothing near the model's size was allocated: the high-water mark moved by less than 64 MiB.
  EXPECT_LT(peak_after - peak_before, std::int64_t{64} << 20);
  EXPECT_EQ(err.rfind((ck / "weights.npz").string() + ": holds " + std::to_string(model->num_parameters()) +
                          " values but " + (ck / "config.json").string() + "'s sizes give ",
                      0),
            0u)
      << err;
  fs::remove_all(root);
}

TEST(Checkpoint, WithoutManifestLoadsWithAOneLineNote) {
  const fs::path root = temp_dir();
  Fixture f;
  Generator gen(6);
  auto model = make_model(f.config(), gen);
  const fs::path ck = root / "ck";
  save_checkpoint(ck.string(), *model, f.src_vocab, f.tgt_vocab);
  ASSERT_TRUE(fs::exists(ck / "manifest.json"));
  ::testing::internal::CaptureStderr();
  load_checkpoint(ck.string());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  fs::remove(ck / "manifest.json");
  ::testing::internal::CaptureStderr();
  const Checkpoint loaded = load_checkpoint(ck.string());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(logits_of(*loaded.model), logits_of(*model));
  EXPECT_EQ(err, "checkpoint " + ck.string() + ": no manifest.json (older format), files not verified\n");
  fs::remove_all(root);
}

TEST(Checkpoint, SuccessfulSaveRemovesStaleTemporaryDirectoriesOfTheSameOutputOnly) {
  const fs::path root = temp_dir();
  Fixture f;
  Generator gen(8);
  auto model = make_model(f.config(), gen);
  const fs::path ck = root / "ck";
  // What killed saves of ck leave: a temporary directory with some files and a half-written one.
  auto stale = [&](const std::string& name) {
    fs::create_directories(root / name);
    write_file(root / name / "config.json", "{}");
    write_file(root / name / "weights.npz.tmp-Qx81zP", "partial");
    return root / name;
  };
  stale("ck.tmp-AbC123");
  stale("ck.tmp-zz9Z0a");
  stale("ck.old-AbC123");  // the previous checkpoint, moved aside by the save without RENAME_EXCHANGE
  // Not ours to remove: another output's, wrong suffixes, a regular file, a directory with a user file.
  stale("ck2.tmp-AbC123");
  stale("xck.tmp-AbC123");
  stale("ck.tmp-AbC12");
  stale("ck.tmp-AbC1234");
  stale("ck.tmp-AbC_23");
  stale("ck.old-AbC12");
  write_file(root / "ck.tmp-FILE12", "a file");
  stale("ck.tmp-Mine00");
  write_file(root / "ck.tmp-Mine00" / "notes.txt", "precious");
  // A symbolic link with the pattern's name, to a directory that would match: neither is touched.
  const fs::path target = stale("elsewhere");
  fs::create_directory_symlink(target, root / "ck.tmp-Link00");

  // A failed save removes nothing of them.
  tg::models::detail::set_checkpoint_write_hook([](const std::string& file) {
    if (file == "weights.npz") throw std::runtime_error("injected");
  });
  EXPECT_THROW(save_checkpoint(ck.string(), *model, f.src_vocab, f.tgt_vocab), std::runtime_error);
  tg::models::detail::set_checkpoint_write_hook({});
  EXPECT_TRUE(fs::exists(root / "ck.tmp-AbC123"));

  save_checkpoint(ck.string(), *model, f.src_vocab, f.tgt_vocab);
  std::vector<std::string> names = leftovers(root);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"ck.old-AbC12", "ck.tmp-AbC12", "ck.tmp-AbC1234", "ck.tmp-AbC_23",
                                             "ck.tmp-FILE12", "ck.tmp-Link00", "ck.tmp-Mine00", "ck2.tmp-AbC123",
                                             "xck.tmp-AbC123"}));
  EXPECT_TRUE(fs::is_symlink(root / "ck.tmp-Link00"));
  EXPECT_TRUE(fs::exists(target / "config.json"));
  EXPECT_EQ(read_file(root / "ck.tmp-Mine00" / "notes.txt"), "precious");
  EXPECT_TRUE(fs::exists(root / "ck.tmp-Mine00" / "config.json"));  // left whole, not emptied
  EXPECT_EQ(read_file(root / "ck.tmp-FILE12"), "a file");
  EXPECT_EQ(logits_of(*load_checkpoint(ck.string()).model), logits_of(*model));
  // Also when the save replaces an existing checkpoint.
  stale("ck.tmp-Again1");
  save_checkpoint(ck.string(), *model, f.src_vocab, f.tgt_vocab);
  EXPECT_FALSE(fs::exists(root / "ck.tmp-Again1"));
  fs::remove_all(root);
}
