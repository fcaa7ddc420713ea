// Checkpoint files as files: only regular files within their size limits are read or hashed, and
// a training.json the loader would refuse is never written.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "../../autograd/error_of.h"
#include "../../nn/deadline.h"
#include "../test_dirs.h"
#include "autograd/random.h"
#include "models/text/text.h"
#include "models/training/checkpoint.h"
#include "models/translators/limits.h"
#include "models/translators/seq2seq.h"
#include "nn/file_io.h"
#include "nn/optim.h"

using namespace tg;
using namespace tg::models;
namespace fs = std::filesystem;
using tg::testing::error_of;

namespace {

/// A small checkpoint with every optional file but the tokenizer and the EMA weights.
fs::path saved_checkpoint(const fs::path& root) {
  const Vocab src = Vocab::build({{"go", "."}, {"i", "lost", "."}}, 1);
  const Vocab tgt = Vocab::build({{"va", "!"}, {"j'ai", "perdu", "."}}, 1);
  ModelConfig c;
  c.model = "d2l";
  c.src_vocab = src.size();
  c.tgt_vocab = tgt.size();
  c.embed_size = 4;
  c.num_hiddens = 4;
  c.num_layers = 1;
  c.num_steps = 4;
  Generator gen(3);
  auto model = make_model(c, gen);
  nn::Adam opt(model->named_parameters(), nn::AdamOptions(0.01));
  TrainingState st;
  st.step = 5;
  st.epoch = 1;
  const fs::path dir = root / "ck";
  save_checkpoint(dir.string(), *model, src, tgt, &opt, &st);
  return dir;
}

/// A copy of the checkpoint `from` named `name` beside it, with `file` replaced by a FIFO.
fs::path copy_with_fifo(const fs::path& from, const std::string& name, const std::string& file, bool keep_manifest) {
  const fs::path dir = from.parent_path() / name;
  fs::copy(from, dir, fs::copy_options::recursive);
  fs::remove(dir / file);
  EXPECT_EQ(::mkfifo((dir / file).c_str(), 0600), 0);
  if (!keep_manifest) fs::remove(dir / "manifest.json");
  return dir;
}

}  // namespace

// Before: opening a FIFO at a checkpoint file's name waited for a writer forever, in the manifest's
// SHA-256 pass (translate, eval and train --init-from hung) and in the readers of config.json,
// the vocabularies and training.json. Now each is refused at once, naming the file.
TEST(CheckpointFiles, AFifoAtACheckpointFileNameIsRefusedAtOnceNamingIt) {
  const fs::path root = tg::models::testing::per_test_dir("tg_ckfiles", true);
  const fs::path ck = saved_checkpoint(root);
  struct Case {
    std::string name, file;
    bool manifest, training_only;
  };
  const Case cases[] = {{"hashed_weights", "weights.npz", true, false},
                        {"hashed_vocab", "tgt_vocab.txt", true, false},
                        {"config", "config.json", false, false},
                        {"vocab", "src_vocab.txt", false, false},
                        {"manifest", "manifest.json", true, false},
                        {"training_hashed", "training.json", true, true},
                        {"training", "training.json", false, true}};
  for (const Case& c : cases) {
    const fs::path dir = copy_with_fifo(ck, c.name, c.file, c.manifest);
    const std::string fifo = (dir / c.file).string();
    const std::string error = tg::testing::error_within(
        10, c.name,
        [&] {
          if (c.training_only) load_training_state(dir.string());
          else load_checkpoint(dir.string());
        },
        [&] { tg::testing::unblock_fifo_reader(fifo); });
    EXPECT_EQ(error, fifo + ": is a FIFO, not a regular file") << c.name;
  }
  fs::remove_all(root);
}

// Sparse files (their size on no disk block): refused by their size before a byte is read or
// hashed, naming the file and the limit. Before: a 1 GiB config.json was read into memory whole.
TEST(CheckpointFiles, FilesAboveTheirLimitAreRefusedBeforeTheyAreRead) {
  const fs::path root = tg::models::testing::per_test_dir("tg_ckfiles", true);
  const fs::path ck = saved_checkpoint(root);
  auto grown = [&](const std::string& name, const std::string& file, std::uint64_t size, bool keep_manifest) {
    const fs::path dir = root / name;
    fs::copy(ck, dir, fs::copy_options::recursive);
    fs::resize_file(dir / file, size);
    if (!keep_manifest) fs::remove(dir / "manifest.json");
    return dir;
  };
  const std::string above = " bytes, above the limit of ";
  const std::string refused = " for this kind of file (refused before reading it)";
  const fs::path config = grown("config", "config.json", std::uint64_t{1} << 30, false);
  EXPECT_EQ(error_of([&] { load_checkpoint(config.string()); }),
            (config / "config.json").string() + ": is 1073741824" + above + "16 MiB" + refused);
  const fs::path hashed = grown("hashed", "src_vocab.txt", std::uint64_t{65} << 20, true);
  EXPECT_EQ(error_of([&] { load_checkpoint(hashed.string()); }),
            (hashed / "src_vocab.txt").string() + ": is 68157440" + above + "64 MiB" + refused);
  const fs::path vocab = grown("vocab", "tgt_vocab.txt", std::uint64_t{65} << 20, false);
  EXPECT_EQ(error_of([&] { load_checkpoint(vocab.string()); }),
            (vocab / "tgt_vocab.txt").string() + ": is 68157440" + above + "64 MiB" + refused);
  const fs::path manifest = grown("manifest", "manifest.json", std::uint64_t{1} << 30, true);
  EXPECT_EQ(error_of([&] { load_checkpoint(manifest.string()); }),
            (manifest / "manifest.json").string() + ": is 1073741824" + above + "16 MiB" + refused);
  const fs::path training = grown("training", "training.json", std::uint64_t{17} << 20, false);
  EXPECT_EQ(error_of([&] { load_training_state(training.string()); }),
            (training / "training.json").string() + ": is 17825792" + above + "16 MiB" + refused);
  fs::remove_all(root);
}

// Every range training_from_json checks is checked when the state is written: a state at the
// limits round-trips exactly; one past a limit is refused by training_to_json and save_checkpoint,
// which then writes nothing. Before: the writer wrote what its own loader refused, so the run's
// last checkpoint could not be resumed.
// training.json as `bahdanau train` wrote it before RunRecord (build/bin/bahdanau at 1201fbf,
// a bf16 Transformer run with a dev set): its "notes" load into the typed fields.
TEST(CheckpointFiles, TrainingJsonWithNotesLoadsIntoTheRunRecord) {
  const std::string old = R"({
  "bad_validations": 1, "batch_in_epoch": 0, "batch_size": 8, "batch_tokens": 0,
  "best_dev_bleu": 0.44368348140227776, "best_dev_loss": 1.5359418392181396, "best_step": 36, "clip": 1.0,
  "elapsed_s": 1.466324722, "ema_decay": 0.95, "ema_updates": 40, "epoch": 5, "label_smoothing": 0.0,
  "last_loss": 1.9419159889221191, "last_validation_step": 40, "lr": 0.005, "lr_bad_validations": 1,
  "lr_decay": 1.0, "lr_patience": 1, "lr_scale": 1.0,
  "notes": {
    "best": "/tmp/issue41-before/cr.best", "data": "/tmp/issue41/train.tsv", "dev": "/tmp/issue41/dev.tsv",
    "dev_beam": "1", "dev_bleu_pairs": "0", "holdout": "0", "max_len": "8", "min_freq": "2", "min_len": "1",
    "num_examples": "0", "steps": "40", "task_seed": "0"
  },
  "patience": 3, "precision": "bf16", "seed": 0, "select_by": "bleu", "shards": 1, "shuffle": true, "step": 40,
  "validate_every": 6, "validations": 11, "warmup_steps": 10
})";
  const TrainingState s = training_from_json(old);
  EXPECT_EQ(s.step, 40);
  EXPECT_EQ(s.best_dev_bleu, 0.44368348140227776);
  RunRecord want;
  want.best = "/tmp/issue41-before/cr.best";
  want.data = "/tmp/issue41/train.tsv";
  want.dev = "/tmp/issue41/dev.tsv";
  want.dev_beam = 1;
  want.dev_bleu_pairs = 0;
  want.holdout = 0.0;
  want.max_len = 8;
  want.min_freq = 2;
  want.min_len = 1;
  want.num_examples = 0;
  want.steps = 40;
  want.task_seed = 0;
  EXPECT_EQ(s.run, want);
  EXPECT_FALSE(s.run.epochs);
  // Written again, the record is typed JSON, and reads back the same.
  const std::string now = training_to_json(s);
  EXPECT_NE(now.find("\"steps\": 40"), std::string::npos) << now;
  EXPECT_EQ(now.find("\"notes\""), std::string::npos) << now;
  EXPECT_EQ(training_from_json(now).run, want);
  // The older form's numbers are parsed whole, as the CLI read them; both forms at once are refused.
  EXPECT_EQ(error_of<std::runtime_error>([] { training_from_json(R"({"notes": {"epochs": "x"}})"); }),
            "training.json: note 'epochs' = 'x' is not a whole number");
  EXPECT_EQ(error_of<std::runtime_error>([] { training_from_json(R"({"notes": {"epochs": "0"}})"); }),
            "training.json: run.epochs = 0 is not a target (must be >= 1)");
  EXPECT_EQ(error_of<std::runtime_error>([] { training_from_json(R"({"run": {"epochs": 2}, "notes": {}})"); }),
            "training.json: both 'run' and 'notes' (the older form of 'run')");
  EXPECT_EQ(error_of<std::runtime_error>([] { training_from_json(R"({"run": {"epoch": 2}})"); }),
            "training.json: unknown key 'run.epoch'");
  EXPECT_EQ(error_of<std::runtime_error>([] { training_from_json(R"({"run": {"dev": 2}})"); }),
            "training.json: run.dev must be a string, got 2");
}

TEST(CheckpointFiles, TrainingStateAtTheLoaderLimitsRoundTripsAndPastThemIsNotSaved) {
  constexpr std::int64_t kMax = limits::kMaxCount;
  TrainingState s;
  s.step = s.epoch = s.batch_in_epoch = kMax;
  s.validations = s.last_validation_step = s.best_step = s.bad_validations = s.lr_bad_validations = kMax;
  s.ema_updates = s.warmup_steps = s.batch_tokens = s.patience = s.lr_patience = s.validate_every = kMax;
  s.lr_anneal_from = kMax - 1;
  s.lr_anneal_to = kMax;
  s.batch_size = s.shards = limits::kMaxBatchSize;
  s.seed = std::numeric_limits<std::uint64_t>::max();
  s.elapsed_s = s.lr = s.clip = s.best_dev_loss = DBL_MAX;
  s.best_dev_bleu = 100;
  s.lr_scale = s.lr_decay = DBL_MIN;
  s.label_smoothing = s.ema_decay = std::nextafter(1.0, 0.0);
  s.last_loss = -DBL_MAX;
  s.run.data = "caf\xc3\xa9.tsv";
  const TrainingState back = training_from_json(training_to_json(s));
  EXPECT_EQ(training_to_json(back), training_to_json(s));
  EXPECT_EQ(back.step, kMax);
  EXPECT_EQ(back.validations, kMax);
  EXPECT_EQ(back.ema_updates, kMax);
  EXPECT_EQ(back.seed, s.seed);
  EXPECT_EQ(back.elapsed_s, DBL_MAX);
  EXPECT_EQ(back.lr_scale, DBL_MIN);
  EXPECT_EQ(back.label_smoothing, s.label_smoothing);
  EXPECT_EQ(back.last_loss, -DBL_MAX);
  EXPECT_EQ(back.run, s.run);

  const std::string suffix = " (not saved: its loader would refuse it)";
  auto refused = [&](auto change) {
    TrainingState t;
    t.step = 10;
    change(t);
    return error_of<std::runtime_error>([&] { training_to_json(t); });
  };
  EXPECT_EQ(refused([](TrainingState& t) { t.step = kMax + 1; }),
            "training.json: step = 9007199254740993 is out of range [0, 9007199254740992]" + suffix);
  EXPECT_EQ(refused([](TrainingState& t) { t.epoch = kMax + 1; }),
            "training.json: epoch = 9007199254740993 is out of range [0, 9007199254740992]" + suffix);
  EXPECT_EQ(refused([](TrainingState& t) { t.validations = kMax + 1; }),
            "training.json: validations = 9007199254740993 is out of range [0, 9007199254740992]" + suffix);
  EXPECT_EQ(refused([](TrainingState& t) { t.ema_updates = 11; }),
            "training.json: ema_updates = 11 is out of range [0, 10]" + suffix);
  EXPECT_EQ(refused([](TrainingState& t) { t.lr_scale = 0; }),
            "training.json: lr_scale = 0.000000 is out of range (0, 1]" + suffix);
  EXPECT_EQ(refused([](TrainingState& t) { t.elapsed_s = INFINITY; }),
            "training.json: elapsed_s = inf must be finite and >= 0" + suffix);
  EXPECT_EQ(refused([](TrainingState& t) { t.lr = NAN; }), "training.json: lr = nan must be finite and >= 0" + suffix);
  EXPECT_EQ(refused([](TrainingState& t) { t.best_dev_loss = INFINITY; }),
            "training.json: best_dev_loss = inf must be finite and >= 0" + suffix);
  EXPECT_EQ(refused([](TrainingState& t) { t.run.data = "caf\xe9.tsv"; }),
            "training.json: run.data holds invalid UTF-8 (not representable in JSON)" + suffix);
  TrainingState noted;
  noted.run.data = std::string(nn::io::limits::kSmallJson, 'x');
  EXPECT_EQ(error_of<std::runtime_error>([&] { training_to_json(noted); }),
            "training.json: 16777784 bytes, above the limit of 16 MiB its loader reads (not saved)");

  // save_checkpoint refuses it before writing anything: the previous checkpoint stays as it was.
  const fs::path root = tg::models::testing::per_test_dir("tg_ckfiles", true);
  const fs::path ck = saved_checkpoint(root);
  const Checkpoint loaded = load_checkpoint(ck.string());
  TrainingState bad = *loaded.training;
  bad.step = kMax + 1;
  EXPECT_EQ(error_of<std::runtime_error>(
                [&] { save_checkpoint(ck.string(), *loaded.model, loaded.src_vocab, loaded.tgt_vocab, nullptr, &bad); }),
            "training.json: step = 9007199254740993 is out of range [0, 9007199254740992]" + suffix);
  EXPECT_EQ(load_training_state(ck.string())->step, 5);
  for (const auto& e : fs::directory_iterator(root)) EXPECT_EQ(e.path().filename(), "ck");
  fs::remove_all(root);
}
