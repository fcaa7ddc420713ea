#pragma once
// Translator checkpoints: one directory holding everything needed to translate with a model and
// to resume its training exactly.
//
//   DIR/config.json     ModelConfig as JSON (keys = field names; a missing key takes its default)
//   DIR/weights.npz     Module::save: PyTorch state_dict names, float32 (readable by numpy.load)
//   DIR/src_vocab.txt   one token per line, line i = id i (Vocab::save)
//   DIR/tgt_vocab.txt
//   DIR/optimizer.npz   optional: Optimizer::state_dict (Adam moments and step counts)
//   DIR/training.json   optional: TrainingState (progress, training options, the run's RunRecord)
//   DIR/training_weights.npz  optional, with a weight EMA (TrainOptions::ema_decay): the raw
//                       training weights, as weights.npz; weights.npz then holds the averaged
//                       weights, which translate, eval and average read
//   DIR/tokenizer.model optional: the SentencePiece model of subword vocabularies (SubwordModel);
//                       the vocabularies then hold its pieces, and translate/eval encode and
//                       decode through it
//   DIR/manifest.json   written last: {"format_version": 1, "sha256": {file: hex digest, ...}} for
//                       every other file above that the checkpoint holds
//
//   tg::models::save_checkpoint("ckpt", *model, src_vocab, tgt_vocab);
//   tg::models::Checkpoint ck = tg::models::load_checkpoint("ckpt");  // ck.model, ck.src_vocab, ...
//
// Atomic replacement. save_checkpoint writes every file into a fresh sibling directory
// `DIR.tmp-XXXXXX` (mkdtemp, same parent, so on the same file system), fsyncs each file and the
// directory, and only then puts it in place:
//   - DIR does not exist: rename(DIR.tmp-XXXXXX, DIR).
//   - DIR exists: renameat2(RENAME_EXCHANGE) swaps the two directories in one atomic step, after
//     which the previous checkpoint's files are removed.
// So at every instant DIR is either the complete old checkpoint or the complete new one; if any
// write fails the temporary directory is removed and DIR is untouched. File systems without
// RENAME_EXCHANGE get two renames instead (DIR to DIR.old-XXXXXX, then the new one to DIR): between
// them DIR does not exist, and a process killed there leaves the previous checkpoint complete in
// DIR.old-XXXXXX. An existing DIR is replaced
// only if it looks like a checkpoint (it holds only the files above) or is empty: anything else is
// refused, so a mistyped path never deletes a user's files. A process killed while writing can
// leave a `DIR.tmp-XXXXXX` (or `DIR.old-XXXXXX`) behind; it is never read, and the next successful
// save of DIR (or a resume of DIR with nothing left to do) removes every such directory (exactly
// `DIR.tmp-` or `DIR.old-` + six letters or digits) that holds only checkpoint files. Two processes saving the same DIR at once are not supported (one may remove the other's
// temporary directory).
//
// Every file of a checkpoint is read (and hashed) only if it is a regular file within its size
// limit (nn/file_io.h: 16 MiB for the JSON files, 64 MiB for a vocabulary or tokenizer.model,
// 64 GiB for an archive), so a FIFO or device at a file's name is refused at once, naming it.
// Loading returns nothing unless every check passes: manifest, config, vocabularies and weights
// before the model is built, training.json and tokenizer.model after. First manifest.json: every file it lists must
// exist and match its SHA-256, and no checkpoint file may be unlisted; a mismatch throws
// "checkpoint DIR: FILE does not match its SHA-256 in manifest.json". A checkpoint without a
// manifest (written before it existed) still loads, with a one-line note on stderr that its files
// are unverified. load_training_state and load_optimizer_state check their own file the same way.
// Then config.json is parsed (unknown keys, wrong
// types and invalid values are refused), both vocabularies are read, weights.npz is read fully
// (its zip CRCs are verified) and its names and shapes are checked against the model. Any problem
// throws std::runtime_error whose message starts with the offending file's path; nothing is
// half-loaded. tokenizer.model must parse as a SentencePiece model and hold every non-reserved token
// of both vocabularies ("DIR/tokenizer.model does not match DIR/src_vocab.txt: ..."); a
// training.json that records a subword model (RunRecord::subword) without the file is refused.
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "models/translators/seq2seq.h"
#include "models/text/subword.h"
#include "models/text/text.h"

namespace tg::nn {
class Optimizer;
}

namespace tg::models {

/// What a run was trained on and toward, as the program that trained it records it (`bahdanau
/// train` fills it from its flags), so that a continued run (`--init-from`), `eval --split` and
/// `translate` can repeat it. An empty string or an absent number was not recorded. training.json
/// holds it as the object "run" of typed fields; a training.json written before it (with "notes",
/// an object of strings) still loads: its notes of these names fill these fields, numbers parsed
/// from their text, and other notes are ignored.
struct RunRecord {
  // The data: a sentence-pair file or a built-in task, and how it was split and tokenised.
  std::string data;                         ///< the pairs file, an absolute path
  bool reverse = false;                     ///< the file's second column was the source
  std::string task;                         ///< the built-in task (models/text/tasks.h)
  std::optional<std::int64_t> num_examples;  ///< pairs read or generated (0 = the whole file / 1000)
  std::optional<std::int64_t> task_seed, min_len, max_len;  ///< the task generator's settings
  std::optional<std::int64_t> min_freq;     ///< vocabulary cut-off
  std::optional<double> holdout;            ///< held-out pairs: a fraction < 1 or a count
  std::int64_t subword = 0;                 ///< SentencePiece pieces asked for (0 = word or character level)
  std::string subword_type;                 ///< "unigram" or "bpe", with subword
  // The target of the training (one of them, >= 1).
  std::optional<std::int64_t> steps, epochs;
  // Validation.
  std::string dev;                           ///< the dev pairs file ("" = no dev set)
  std::optional<std::int64_t> dev_bleu_pairs;  ///< dev BLEU on the first N pairs (0 = all)
  std::optional<std::int64_t> dev_beam;     ///< beam size of the dev translations
  std::string best;                          ///< where the best checkpoint is kept

  bool operator==(const RunRecord&) const = default;
};

/// Where a training is: its position and its validation state, which a resumed run takes over
/// whole from the checkpoint (TrainOptions::resume_from).
struct TrainingProgress {
  std::int64_t step = 0;            ///< optimizer steps done
  std::int64_t epoch = 0;           ///< epochs completed
  std::int64_t batch_in_epoch = 0;  ///< batches of the next epoch (epoch + 1) already done
  double elapsed_s = 0.0;           ///< training time so far, over every run
  /// Loss of the last step done (NaN before the first step, or if training.json predates it).
  double last_loss = std::numeric_limits<double>::quiet_NaN();
  // Validation on a dev set (TrainOptions::dev), its best result and what it drives. Absent in a
  // training.json written before validation existed: no validation done yet, lr not decayed.
  std::int64_t validations = 0;           ///< validations done
  std::int64_t last_validation_step = 0;  ///< step of the last one (0 = none)
  std::int64_t best_step = 0;             ///< step of the best one (0 = none)
  /// Dev figures of the best validation (NaN before the first; BLEU in [0, 100]).
  double best_dev_bleu = std::numeric_limits<double>::quiet_NaN();
  double best_dev_loss = std::numeric_limits<double>::quiet_NaN();
  std::int64_t bad_validations = 0;     ///< validations since the best one (early stopping counts these)
  std::int64_t lr_bad_validations = 0;  ///< validations since the best one or the last lr decay
  double lr_scale = 1.0;                ///< the lr in use is lr × lr_scale (decay on plateau); in (0, 1]
  /// Updates of the weight EMA so far (its n; 0 without one). Counts from the step the average
  /// started at, so it is at most `step`.
  std::int64_t ema_updates = 0;
};

/// Training progress and the settings needed to continue it exactly (training.json).
struct TrainingState : TrainingProgress {
  // The options the run used (TrainOptions); resuming with the same ones repeats a straight run.
  std::uint64_t seed = 0;
  std::int64_t batch_size = 0;
  double lr = 0.0;
  double clip = 0.0;
  std::int64_t warmup_steps = 0;    ///< 0 = constant lr (absent in older training.json)
  /// TrainOptions::lr_anneal's steps (both 0 = off; absent in older training.json).
  std::int64_t lr_anneal_from = 0, lr_anneal_to = 0;
  double label_smoothing = 0.0;
  bool shuffle = true;
  /// Fixed shards each global batch was split into (TrainOptions::shards; 1 before data parallelism).
  std::int64_t shards = 1;
  /// Token budget of a batch (TrainOptions::batch_tokens; 0 = batches of batch_size sentences).
  std::int64_t batch_tokens = 0;
  // The settings of validation, for a continued run that does not give them again.
  std::string select_by = "bleu";       ///< "bleu" or "loss": what "best" means
  std::int64_t patience = 0;            ///< early stopping after this many bad validations (0 = never)
  double lr_decay = 1.0;                ///< lr factor on a plateau, in (0, 1] (1 = no decay)
  std::int64_t lr_patience = 1;         ///< bad validations before a decay
  std::int64_t validate_every = 0;      ///< steps between validations besides epoch ends (0 = epoch ends only)
  /// Decay of the weight EMA (TrainOptions::ema_decay; 0 = none). > 0: weights.npz holds the
  /// average and training_weights.npz the raw weights.
  double ema_decay = 0.0;
  /// Precision of the training steps' matrix products (TrainOptions::precision): "precision" in
  /// training.json, "fp32" or "bf16" (models/decoding/decode.h's names); absent in a training.json
  /// written before mixed precision, which reads as f32.
  autocast::Precision precision = autocast::Precision::f32;
  /// What the run was trained on and toward (the CLI's data source, target and dev set).
  RunRecord run;
};

/// A loaded checkpoint.
struct Checkpoint {
  std::string dir;
  ModelConfig config;
  Vocab src_vocab, tgt_vocab;
  std::shared_ptr<Seq2Seq> model;          ///< make_model(config) with weights.npz loaded
  std::optional<TrainingState> training;   ///< present if training.json exists
  bool has_optimizer = false;              ///< optimizer.npz exists (load it with load_optimizer_state)
  /// training_weights.npz exists: `model` holds the weight EMA, the raw weights are there
  /// (load_training_weights).
  bool has_training_weights = false;
  std::optional<SubwordModel> subword;     ///< tokenizer.model, if the vocabularies are subword pieces
};

/// ModelConfig as a JSON object (every field, pretty-printed).
std::string config_to_json(const ModelConfig& config);
/// Parses a JSON object into a ModelConfig: missing keys keep their defaults; an unknown key, a
/// value of the wrong type, or a config that fails ModelConfig::validate() throws
/// std::runtime_error prefixed by `source`.
ModelConfig config_from_json(const std::string& text, const std::string& source = "config.json");

/// TrainingState as a JSON object, and back: the same rules as config_from_json; counts and rates
/// are range-checked (models/translators/limits.h) with a message naming the field. The writer
/// checks the same ranges (and that the run record's strings are valid UTF-8) and throws std::runtime_error
/// "training.json: FIELD = V is out of range [...] (not saved: its loader would refuse it)"
/// instead of writing a file its loader refuses.
std::string training_to_json(const TrainingState& state);
TrainingState training_from_json(const std::string& text, const std::string& source = "training.json");

/// Writes a checkpoint to `dir` atomically (see the file comment). `optimizer` and `training`
/// are optional; `subword`, if given, is stored as tokenizer.model. config.json takes the model's config with src_vocab/tgt_vocab set to the
/// vocabulary sizes, which must match the model's. `training_weights`, if given (a run with a
/// weight EMA, whose averaged weights the model then holds), is stored as training_weights.npz.
/// Throws std::runtime_error naming the path on
/// failure, leaving any previous checkpoint at `dir` intact.
void save_checkpoint(const std::string& dir, const Seq2Seq& model, const Vocab& src_vocab, const Vocab& tgt_vocab,
                     const nn::Optimizer* optimizer = nullptr, const TrainingState* training = nullptr,
                     const SubwordModel* subword = nullptr, const nn::NamedTensors* training_weights = nullptr);

/// Throws the std::runtime_error save_checkpoint(dir, ...) would for its destination, before any
/// work is done: dir exists and is not a directory, or holds other files than a checkpoint's, or a
/// file stands where one of its parent directories must be. Creates nothing.
void check_checkpoint_destination(const std::string& dir);

/// The element-wise mean of the weights of several checkpoints of one model, summed in float64 (as
/// fairseq's average_checkpoints.py; typically the last few checkpoints of a run). Every checkpoint
/// must have the first one's architecture (config.json equal but for the dropout fields, which
/// only training uses), vocabularies and tokenizer.model, else std::runtime_error names the first
/// that differs and how. The result has the first checkpoint's config, vocabularies and tokenizer,
/// and no training state or optimizer: save it to translate and evaluate with; it does not resume.
Checkpoint average_checkpoints(const std::vector<std::string>& dirs);

/// Removes the `DIR.tmp-XXXXXX` directories that killed saves of `dir` left, exactly as a successful
/// save_checkpoint does after it (same rules; best effort, errors ignored). For a writer of `dir`
/// that has nothing to save, e.g. a resume already at its target: a kill after the final save's
/// swap can leave the previous checkpoint's temporary directory behind.
void remove_stale_checkpoint_temporaries(const std::string& dir);

/// Reads a checkpoint (see the file comment for the checks). config.json's src_vocab/tgt_vocab,
/// when present, must equal the vocabulary files' sizes. The model is in training mode.
Checkpoint load_checkpoint(const std::string& dir);

/// Reads only `dir`/training.json (nullopt if the file does not exist); errors name the file.
std::optional<TrainingState> load_training_state(const std::string& dir);

/// Loads `dir`/optimizer.npz into `optimizer` (names and shapes checked; nothing changes on error).
void load_optimizer_state(const std::string& dir, nn::Optimizer& optimizer);

/// Loads `dir`/training_weights.npz (the raw weights of a run with a weight EMA) into `model`,
/// verified against manifest.json, names and shapes checked. Throws std::runtime_error naming the
/// file if it is missing or does not fit.
void load_training_weights(const std::string& dir, Seq2Seq& model);

/// Writes `text` to `path`, replacing the file atomically (nn::io::write_file_atomic: a temporary
/// beside it, fsynced and renamed over it; a failure leaves the old file). Throws
/// std::runtime_error naming the path and the system's reason when the file cannot be written.
void write_text(const std::string& path, const std::string& text);

namespace detail {
/// Test hook: called after each file of a checkpoint is written into the temporary directory
/// (with the file name, e.g. "weights.npz"); throwing from it simulates a failed write. Pass an
/// empty function to remove it.
void set_checkpoint_write_hook(std::function<void(const std::string& file)> hook);
/// Test hook: true makes save_checkpoint skip renameat2(RENAME_EXCHANGE) and use the fallback
/// (move the old directory aside, then the new one in), as on file systems without the exchange.
void set_checkpoint_exchange_disabled(bool disabled);
}  // namespace detail

}  // namespace tg::models
