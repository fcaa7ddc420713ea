// bahdanau train: a translator trained on sentence pairs or a built-in task, from scratch or
// continued from a checkpoint (--init-from: the checkpoint's architecture, and its settings for the
// flags not given), with validation on a dev set, under mpirun on every rank.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/dist.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "models/decoding/decode.h"
#include "models/decoding/metrics.h"
#include "models/text/data.h"
#include "models/text/split.h"
#include "models/text/subword.h"
#include "models/training/checkpoint.h"
#include "models/training/export_batches.h"
#include "models/training/trainer.h"
#include "models/translators/limits.h"
#include "models/translators/readout.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq.h"

#include "common.h"
#include "data_args.h"

namespace tg::cli {

using namespace tg::models;

namespace {

struct TrainArgs {
  DataArgs data;
  std::string model = std::string(ModelKind().name());  // the registry's first
  std::int64_t embed_size = 32, num_hiddens = 32, num_layers = 2, num_steps = 10, maxout_units = 0;
  double dropout = 0.1, embedding_dropout = 0.0, readout_dropout = 0.0;
  std::string readout = "maxout", attention = "additive";
  std::int64_t num_heads = 4;              // transformer
  bool norm_first = false, tie_embeddings = false;
  std::int64_t batch_size = 64, epochs = 10, steps = 0, warmup_steps = 0;
  double lr = 0.005, clip = 1.0, label_smoothing = 0.0;
  std::uint64_t seed = 0;
  bool no_shuffle = false, quiet = false, compact_grads = false;
  std::string init_from, log_csv, out;
  std::int64_t checkpoint_every = 1;
  std::int64_t shards = 0;
  int threads = 0;
  // Validation, batching by tokens, time limit.
  std::string dev, best, select_by = "bleu";
  std::int64_t dev_bleu_pairs = 0, dev_beam = 1, validate_every = 0, patience = 0, lr_patience = 1, batch_tokens = 0;
  std::int64_t lr_anneal_from = 0, lr_anneal_to = 0;
  double lr_decay = 1.0, max_minutes = 0.0;
  double ema_decay = 0.0;  // weight EMA (0 = off)
  std::string precision = "fp32";  // --precision
  std::string write_batches;  // --write-batches DIR: export what the run would train on, then stop
  std::map<std::string, CLI::Option*> opts;

  /// Whether --NAME was given on the command line (NAME a key of opts).
  bool given(const std::string& name) const { return opts.at(name)->count() > 0; }
};

// ---- the flags --------------------------------------------------------------------------------

/// --model and the flags that shape the network (refused with --init-from when they contradict it).
void add_architecture_flags(CLI::App* train_cmd, TrainArgs& ta) {
  ta.opts["model"] = train_cmd->add_option("--model", ta.model, model_help())
                         ->check(CLI::IsMember(model_names()))->capture_default_str();
  ta.opts["embed-size"] = train_cmd->add_option("--embed-size", ta.embed_size, "Embedding size")
                              ->check(kWidth)->capture_default_str();
  ta.opts["num-hiddens"] = train_cmd->add_option("--num-hiddens", ta.num_hiddens, "Recurrent state size (transformer: feed-forward width)")
                               ->check(kWidth)->capture_default_str();
  ta.opts["num-layers"] = train_cmd->add_option("--num-layers", ta.num_layers,
                                                 "d2l: GRU layers; transformer: encoder and decoder layers (2 for both "
                                                 "when not given); rnnsearch and rnnencdec have 1")
                              ->check(int_range(1, limits::kMaxLayers))->capture_default_str();
  ta.opts["dropout"] = train_cmd->add_option("--dropout", ta.dropout, "Dropout probability (d2l: GRU layers and attention; rnnsearch: attention weights; transformer: every sublayer and the embeddings)")
                           ->check(CLI::Range(0.0, 0.999))->capture_default_str();
  ta.opts["embedding-dropout"] =
      train_cmd->add_option("--embedding-dropout", ta.embedding_dropout,
                            "rnnsearch/rnnencdec: dropout on the source and target embeddings (not in the paper)")
          ->check(CLI::Range(0.0, 0.999))->capture_default_str();
  ta.opts["readout-dropout"] =
      train_cmd->add_option("--readout-dropout", ta.readout_dropout,
                            "rnnsearch/rnnencdec: dropout on the output layer's input (not in the paper)")
          ->check(CLI::Range(0.0, 0.999))->capture_default_str();
  ta.opts["num-steps"] = train_cmd->add_option("--num-steps", ta.num_steps, "Sequence length (truncate/pad)")
                             ->check(int_range(1, limits::kMaxSteps))->capture_default_str();
  ta.opts["readout"] = train_cmd->add_option("--readout", ta.readout, "rnnsearch/rnnencdec output layer: maxout|linear")
                           ->check(CLI::IsMember(option_names<Readout>()))->capture_default_str();
  ta.opts["attention"] = train_cmd->add_option("--attention", ta.attention, "rnnsearch score: additive|dot|scaled_dot")
                             ->check(CLI::IsMember(option_names<AttentionScore>()))->capture_default_str();
  ta.opts["maxout-units"] = train_cmd->add_option("--maxout-units", ta.maxout_units, "Maxout output size (0 = num_hiddens / 2)")
      ->check(int_range(0, limits::kMaxWidth));
  ta.opts["num-heads"] = train_cmd->add_option("--num-heads", ta.num_heads, "transformer: attention heads")
                             ->check(kWidth)->capture_default_str();
  ta.opts["norm-first"] = train_cmd->add_flag("--norm-first", ta.norm_first, "transformer: pre-LN (default post-LN)");
  ta.opts["tie-embeddings"] =
      train_cmd->add_flag("--tie-embeddings", ta.tie_embeddings,
                          "output projection = target embedding (transformer; rnnsearch and rnnencdec with a maxout "
                          "readout of embed-size units, e.g. --num-hiddens 2 x --embed-size)");
}

/// --min-freq, --subword, --subword-type, --holdout.
void add_vocabulary_flags(CLI::App* train_cmd, TrainArgs& ta) {
  ta.opts["min-freq"] = train_cmd->add_option("--min-freq", ta.data.min_freq,
                                              "Tokens seen fewer times become <unk> (--subword: default 1)")
                            ->check(kNonNegative)->capture_default_str();
  ta.opts["subword"] =
      train_cmd->add_option("--subword", ta.data.subword,
                            "Subword vocabulary: train a joint SentencePiece model of about N pieces on both sides of "
                            "the training pairs (stored in the checkpoint as tokenizer.model); cased, untokenised text "
                            "in and out")
          ->check(int_range(8, 1000000));
  train_cmd->add_option("--subword-type", ta.data.subword_type, "SentencePiece algorithm: unigram or bpe")
      ->check(CLI::IsMember({"unigram", "bpe"}))->capture_default_str()->needs(ta.opts["subword"]);
  train_cmd->add_option("--holdout", ta.data.holdout, "Pairs held out for evaluation: a fraction < 1 or a count")
      ->check(kNonNegative);
}

/// Batches, the learning rate and its schedule, --epochs or --steps, --clip, --seed.
void add_optimizer_flags(CLI::App* train_cmd, TrainArgs& ta) {
  ta.opts["batch-size"] = train_cmd->add_option("--batch-size", ta.batch_size, "Minibatch size")
                              ->check(int_range(1, limits::kMaxBatchSize))->capture_default_str();
  ta.opts["lr"] = train_cmd->add_option("--lr", ta.lr,
                                      "Adam learning rate (with --init-from, the checkpoint's plateau decays "
                                      "still multiply it)")->check(kPositive)->capture_default_str();
  ta.opts["warmup-steps"] =
      train_cmd->add_option("--warmup-steps", ta.warmup_steps, "lr warmup steps, then 1/sqrt(step) decay (0 = constant lr)")
          ->check(kNonNegative);
  ta.opts["label-smoothing"] = train_cmd->add_option("--label-smoothing", ta.label_smoothing, "Label smoothing of the loss")
                                   ->check(CLI::Range(0.0, 0.999));
  ta.opts["ema-decay"] =
      train_cmd->add_option("--ema-decay", ta.ema_decay,
                            "Exponential moving average of the weights with this decay D after every step (typical "
                            "0.999; 0 = off), warmed up as min(D, (1 + n) / (10 + n)) at update n: validation (dev "
                            "loss and BLEU, so --best, --lr-decay and --patience) uses the averaged weights, and the "
                            "checkpoint's weights.npz holds them (what translate, eval and average use); the raw "
                            "weights, which training continues from, go to training_weights.npz. With --init-from: continues "
                            "the checkpoint's average, or starts one from its weights; --ema-decay 0 on a checkpoint "
                            "with an average continues from its raw weights and drops the average")
          ->check(CLI::Range(0.0, 1.0));
  CLI::Option* epochs_opt = train_cmd->add_option("--epochs", ta.epochs,
                                                  "Train until this many epochs in total (with --init-from: the "
                                                  "checkpoint's target unless --epochs or --steps is given)")
                                ->check(kPositive)->capture_default_str();
  CLI::Option* steps_opt = train_cmd->add_option("--steps", ta.steps, "Train until this many optimizer steps in total")
                               ->check(kPositive);
  ta.opts["epochs"] = epochs_opt;
  ta.opts["steps"] = steps_opt;
  epochs_opt->excludes(steps_opt);
  ta.opts["clip"] = train_cmd->add_option("--clip", ta.clip, "Gradient-norm clipping (0 = off)")
                        ->check(kNonNegative)->capture_default_str();
  ta.opts["seed"] = train_cmd->add_option("--seed", ta.seed, "Seed of initialisation, split, shuffling and dropout")
                        ->capture_default_str();
  ta.opts["no-shuffle"] = train_cmd->add_flag("--no-shuffle", ta.no_shuffle, "Batches in file order");
}

/// --init-from, --log-csv, --out, checkpoints, threads and shards, --batch-tokens, --max-minutes.
void add_run_flags(CLI::App* train_cmd, TrainArgs& ta) {
  train_cmd->add_option("--init-from", ta.init_from,
                        "Continue from this checkpoint (exactly, if it has training.json and optimizer.npz); "
                        "unset options and the data source come from it; --out defaults to it");
  train_cmd->add_option("--log-csv", ta.log_csv, "Per-step log: step,epoch,loss,tokens,grad_norm,lr,elapsed_s (with --dev also dev_loss,dev_bleu, "
                        "filled on the rows of the steps after which a validation ran)");
  train_cmd->add_option("--out", ta.out, "Checkpoint directory, written at each epoch end and at the end");
  train_cmd->add_option("--checkpoint-every", ta.checkpoint_every, "Checkpoint every N epochs (0 = only at the end)")
      ->check(kNonNegative)->capture_default_str();
  train_cmd->add_option("--threads", ta.threads, "Threads (0 = all cores)")->capture_default_str();
  train_cmd->add_option("--shards", ta.shards,
                        "Split each batch into this many fixed shards (a multiple of the mpirun ranks; 0 = the "
                        "checkpoint's, else one per rank); a power of two gives the same result on any power-of-two "
                        "number of ranks dividing it")
      ->check(int_range(0, limits::kMaxBatchSize))->capture_default_str();
  ta.opts["batch-tokens"] =
      train_cmd->add_option("--batch-tokens", ta.batch_tokens,
                            "Token-based batches: at most N padded tokens each (rows x longest of source and target), "
                            "rows sorted by length, batch order shuffled by --seed (0 = --batch-size sentences)")
          ->check(int_range(0, limits::kMaxCount));
  train_cmd->add_option("--max-minutes", ta.max_minutes,
                        "Stop when the training time (all runs of a resumed training, validations included) reaches "
                        "this many minutes; the run then validates and saves as at its end (0 = no limit)")
      ->check(kNonNegative);
}

/// --dev and what validation drives: the best checkpoint, early stopping, lr decay and annealing.
void add_validation_flags(CLI::App* train_cmd, TrainArgs& ta) {
  ta.opts["dev"] = train_cmd->add_option("--dev", ta.dev,
                                         "Dev pairs (TSV like --data) to validate on at every epoch end: dev loss "
                                         "(teacher-forced) and sacreBLEU-compatible dev BLEU, printed and logged");
  ta.opts["validate-every"] = train_cmd->add_option("--validate-every", ta.validate_every,
                                                    "Also validate every N steps (0 = epoch ends only)")
                                  ->check(int_range(0, limits::kMaxCount));
  ta.opts["dev-bleu-pairs"] = train_cmd->add_option("--dev-bleu-pairs", ta.dev_bleu_pairs,
                                                    "Dev BLEU on the first N dev pairs only, for speed (0 = all; the "
                                                    "dev loss always uses all)")
                                  ->check(int_range(0, limits::kMaxCount));
  ta.opts["dev-beam"] = train_cmd->add_option("--dev-beam", ta.dev_beam, "Beam size of the dev translations (1 = greedy)")
                            ->check(int_range(1, limits::kMaxBeam));
  ta.opts["best"] = train_cmd->add_option("--best", ta.best,
                                          "Where the best validation's checkpoint is kept (default OUT.best)");
  ta.opts["select-by"] = train_cmd->add_option("--select-by", ta.select_by,
                                               "Best validation: bleu (highest dev BLEU, ties by lower dev loss) or loss")
                             ->check(CLI::IsMember({"bleu", "loss"}));
  ta.opts["patience"] = train_cmd->add_option("--patience", ta.patience,
                                              "Early stopping after N validations in a row without a new best (0 = off)")
                            ->check(int_range(0, limits::kMaxCount));
  ta.opts["lr-decay"] = train_cmd->add_option("--lr-decay", ta.lr_decay,
                                              "Multiply the lr by this factor in (0, 1] after --lr-patience validations "
                                              "without a new best (1 = off)")
                            ->check(CLI::Range(1e-9, 1.0));
  ta.opts["lr-anneal-from"] = train_cmd->add_option("--lr-anneal-from", ta.lr_anneal_from,
                                                    "Anneal the lr linearly to 0 after this many steps (with "
                                                    "--lr-anneal-to; as torch's LinearLR)")
                                  ->check(int_range(0, limits::kMaxCount));
  ta.opts["lr-anneal-to"] = train_cmd->add_option("--lr-anneal-to", ta.lr_anneal_to,
                                                  "The step at which the annealed lr reaches 0 (give --steps "
                                                  "the same; 0 = no annealing)")
                                ->check(int_range(0, limits::kMaxCount))
                                ->needs(ta.opts["lr-anneal-from"]);
  ta.opts["lr-anneal-from"]->needs(ta.opts["lr-anneal-to"]);
  ta.opts["lr-patience"] = train_cmd->add_option("--lr-patience", ta.lr_patience,
                                                 "Validations without a new best before each lr decay")
                               ->check(int_range(1, limits::kMaxCount));
}

/// --write-batches, --precision, --quiet, --compact-grads.
void add_output_flags(CLI::App* train_cmd, TrainArgs& ta) {
  train_cmd->add_option("--write-batches", ta.write_batches,
                        "Write what this run would train on to DIR and stop without training: batches.npz (the "
                        "encoded training and dev rows, and the rows of every step's batch in training order for "
                        "--epochs epochs or --steps steps: give a few epochs, not a time limit's 1000), meta.json "
                        "(model and training settings, special ids), dev.ref.txt (dev BLEU references) and init/ "
                        "(the initialised model as a checkpoint, with vocabularies and tokenizer.model); read by "
                        "scripts/pytorch_rnnsearch.py");
  ta.opts["precision"] =
      train_cmd->add_option("--precision", ta.precision,
                            std::string(kPrecisionHelp) + "; recorded in training.json (with --init-from: the "
                            "checkpoint's unless given); validation and the held-out scores run in it too")
          ->check(CLI::IsMember(kPrecisions))->capture_default_str();
  train_cmd->add_flag("--quiet", ta.quiet, "No progress bar");
  train_cmd->add_flag("--compact-grads", ta.compact_grads,
                      "Keep the embeddings' and the vocabulary projection's gradients compact (less memory for "
                      "large vocabularies, same training)");
}

// ---- the files --------------------------------------------------------------------------------

/// The dev set of train --dev: the file's pairs (reversed with --reverse) as the model reads them,
/// with the sentences as written as BLEU references when they are subword pieces.
DevSet make_dev_set(const TrainArgs& a, const SubwordModel* subword) {
  io::require_regular_file(a.dev, "--dev");
  auto raw = read_sentence_pairs(a.dev);
  if (a.data.reverse) raw = reverse_pairs(std::move(raw));
  if (raw.empty()) throw UsageError(a.dev + ": no sentence pairs");
  DevSet dev;
  if (subword) {
    dev.pairs = encode_pairs(raw, *subword);
    for (const auto& p : raw) dev.references.push_back(p.tgt);
  } else {
    dev.pairs = tokenize_pairs(raw);
  }
  return dev;
}

/// train's files, checked before any work. Inputs: --data, --dev (or those recorded in the
/// checkpoint) and the --init-from checkpoint; outputs: --out, --best, --log-csv, --write-batches.
/// One exception: --out may be the --init-from checkpoint itself (resuming into it, the default),
/// as the checkpoint is read whole before the first save replaces it atomically; every other output
/// must stay clear of it.
void check_train_files(const TrainArgs& a) {
  const std::vector<NamedPath> data = {{"--data", a.data.data}, {"--dev", a.dev}};
  const NamedPath init{"--init-from", a.init_from}, out{"--out", a.out};
  std::error_code ec;
  const bool resume_in_place = !a.init_from.empty() && !a.out.empty() && std::filesystem::equivalent(a.out, a.init_from, ec);
  require_distinct(resume_in_place ? data : concat(data, {init}), {out});
  const std::vector<NamedPath> others = {{"--best", a.best}, {"--log-csv", a.log_csv}, {"--write-batches", a.write_batches}};
  require_distinct(concat(data, {init}), others);
  require_distinct({out}, others);  // inside --out, a file would be lost at its next save
  // Inputs: regular files only (a FIFO would block, /dev/zero would never end).
  if (!a.data.data.empty()) io::require_regular_file(a.data.data, "--data");
  if (!a.dev.empty()) io::require_regular_file(a.dev, "--dev");
  require_writable_output(out);
  for (const NamedPath& p : others) require_writable_output(p);
}

// ---- the model: from the flags, or continued from --init-from --------------------------------

/// --init-from: the checkpoint's architecture (a flag that contradicts it is an error), with the
/// dropout of the flags given.
ModelConfig config_from_checkpoint(const TrainArgs& a, const Checkpoint& ck) {
  ModelConfig config = ck.config;
  // The architecture comes from the checkpoint; a flag that contradicts it is an error.
  auto same = [&](const char* flag, auto mine, auto theirs) {
    if (a.given(flag) && mine != theirs) {
      std::ostringstream os;
      os << "--" << flag << " " << mine << " contradicts " << a.init_from << "/config.json (" << theirs << ")";
      throw UsageError(os.str());
    }
  };
  same("model", a.model, config.model);
  same("embed-size", a.embed_size, config.embed_size);
  same("num-hiddens", a.num_hiddens, config.num_hiddens);
  same("num-layers", a.num_layers, config.num_layers);
  same("num-steps", a.num_steps, config.num_steps);
  same("readout", a.readout, std::string(to_string(config.readout)));
  same("attention", a.attention, std::string(to_string(config.attention)));
  same("num-heads", a.num_heads, config.num_heads);
  same("norm-first", a.norm_first, config.norm_first);
  same("tie-embeddings", a.tie_embeddings, config.tie_embeddings);
  // Dropout is not part of the weights: it may change.
  if (a.given("dropout")) config.dropout = a.dropout;
  if (a.given("embedding-dropout")) config.embedding_dropout = a.embedding_dropout;
  if (a.given("readout-dropout")) config.readout_dropout = a.readout_dropout;
  return config;
}

/// --init-from: the training options not given continue the checkpoint's run (its training.json).
void continue_training_run(TrainArgs& a, const TrainingState& t) {
  if (!a.given("seed")) a.seed = t.seed;
  if (!a.given("batch-size") && t.batch_size > 0) a.batch_size = t.batch_size;
  if (!a.given("lr") && t.lr > 0) a.lr = t.lr;
  if (!a.given("clip")) a.clip = t.clip;
  if (!a.given("warmup-steps")) a.warmup_steps = t.warmup_steps;
  if (!a.given("lr-anneal-from") && !a.given("lr-anneal-to")) {
    a.lr_anneal_from = t.lr_anneal_from;
    a.lr_anneal_to = t.lr_anneal_to;
  }
  if (!a.given("label-smoothing")) a.label_smoothing = t.label_smoothing;
  if (!a.given("ema-decay")) a.ema_decay = t.ema_decay;
  if (!a.given("precision")) a.precision = precision_name(t.precision);
  if (!a.given("no-shuffle")) a.no_shuffle = !t.shuffle;
  if (!a.given("batch-tokens")) a.batch_tokens = t.batch_tokens;
  if (!a.given("data") && !a.given("task")) a.data.from_record(t.run, a.init_from);
  // The validation settings continue too (the dev file and its BLEU settings from the record).
  if (!a.given("dev") && !t.run.dev.empty()) {
    a.dev = t.run.dev;
    if (!a.given("dev-bleu-pairs") && t.run.dev_bleu_pairs) a.dev_bleu_pairs = *t.run.dev_bleu_pairs;
    if (!a.given("dev-beam") && t.run.dev_beam) a.dev_beam = *t.run.dev_beam;
    if (!a.given("best") && !t.run.best.empty()) a.best = t.run.best;
  }
  if (!a.given("select-by")) a.select_by = t.select_by;
  if (!a.given("patience")) a.patience = t.patience;
  if (!a.given("lr-decay")) a.lr_decay = t.lr_decay;
  if (!a.given("lr-patience")) a.lr_patience = t.lr_patience;
  if (!a.given("validate-every")) a.validate_every = t.validate_every;
  // The target too: a run stopped early (a time limit, a killed job) continues to the same end.
  if (!a.given("epochs") && !a.given("steps")) {  // training.json's loader checked that a target is >= 1
    if (t.run.steps) a.steps = *t.run.steps;
    else if (t.run.epochs) a.epochs = *t.run.epochs;
  }
}

/// A new model's architecture from the flags.
ModelConfig config_from_flags(const TrainArgs& a) {
  ModelConfig config;
  // Flags that shape only some models are refused for the others rather than ignored.
  const std::pair<const char*, std::vector<std::string>> only_for[] = {
      {"readout", {"rnnsearch", "rnnencdec"}}, {"maxout-units", {"rnnsearch", "rnnencdec"}},
      {"attention", {"rnnsearch", "d2l"}},     {"num-heads", {"transformer"}},
      {"norm-first", {"transformer"}}};
  for (const auto& [flag, models] : only_for)
    if (a.given(flag) && std::find(models.begin(), models.end(), a.model) == models.end())
      throw UsageError(std::string("--") + flag + " does not apply to --model " + a.model);
  if (a.given("maxout-units") && a.readout == "linear") throw UsageError("--maxout-units does not apply to --readout linear");
  config.model = a.model;
  config.embed_size = a.embed_size;
  config.num_hiddens = a.num_hiddens;
  config.num_layers = a.given("num-layers") ? a.num_layers : config.model.spec().default_num_layers;
  config.dropout = a.dropout;
  config.embedding_dropout = a.embedding_dropout;
  config.readout_dropout = a.readout_dropout;
  config.num_steps = a.num_steps;
  config.readout = parse_option<Readout>(a.readout, "--readout");
  config.attention = parse_option<AttentionScore>(a.attention, "--attention");
  config.maxout_units = a.maxout_units;
  config.num_heads = a.num_heads;
  config.norm_first = a.norm_first;
  config.tie_embeddings = a.tie_embeddings;
  return config;
}

/// The data source is given, the validation flags only with --dev, and --best defaults to OUT.best.
void check_data_and_dev_flags(TrainArgs& a) {
  if (a.data.data.empty() && a.data.task.empty()) throw UsageError("train: give --data FILE or --task NAME");
  if (a.dev.empty())
    for (const char* flag : {"validate-every", "dev-bleu-pairs", "dev-beam", "best", "select-by", "patience", "lr-decay",
                             "lr-patience"})
      if (a.given(flag)) throw UsageError(std::string("--") + flag + " needs --dev FILE (validation on a dev set)");
  // The best checkpoint is kept beside --out by default (a directory inside --out would be lost at
  // its next save); worked out here so that the checks below see it.
  if (!a.dev.empty() && a.best.empty() && !a.out.empty()) {
    std::string out = a.out;
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    a.best = out + ".best";
  }
}

/// The SentencePiece model: the checkpoint's, one trained now (--subword), or none.
std::optional<SubwordModel> make_tokenizer(TrainArgs& a, const std::optional<Checkpoint>& ck) {
  std::optional<SubwordModel> subword;
  if (ck && ck->subword) {
    if (a.given("subword")) throw UsageError("--subword: " + a.init_from + " already has its tokenizer.model");
    subword = ck->subword;
  } else if (ck && a.given("subword")) {
    throw UsageError("--subword cannot be added to " + a.init_from + ", whose vocabularies are not subword pieces");
  } else if (a.data.subword > 0) {
    if (!SubwordModel::available())
      throw UsageError("--subword: this build has no SentencePiece (install libsentencepiece-dev, rerun cmake, rebuild)");
    if (!a.data.task.empty()) throw UsageError("--subword applies to --data sentence pairs, not to --task");
    if (!a.given("min-freq")) a.data.min_freq = 1;  // every piece SentencePiece made is kept
    subword = a.data.train_subword(a.seed);
    std::fprintf(stderr, "bahdanau: SentencePiece %s model of %lld pieces trained on the training pairs\n",
                 a.data.subword_type.c_str(), static_cast<long long>(subword->size()));
  }
  return subword;
}

/// Re-encodes both parts of `data` with a checkpoint's vocabularies.
void use_vocabularies(TranslationData& data, const Vocab& src, const Vocab& tgt, std::int64_t num_steps) {
  data.src_vocab = src;
  data.tgt_vocab = tgt;
  data.train = Seq2SeqDataset(data.train_pairs, src, tgt, num_steps);
  data.heldout = Seq2SeqDataset(data.heldout_pairs, src, tgt, num_steps);
}

/// The model to train: the checkpoint's (rebuilt if its dropout changed), or a new one.
std::shared_ptr<Seq2Seq> make_train_model(const TrainArgs& a, ModelConfig& config, const std::optional<Checkpoint>& ck,
                                          TranslationData& data) {
  std::shared_ptr<Seq2Seq> model;
  if (ck) {
    use_vocabularies(data, ck->src_vocab, ck->tgt_vocab, config.num_steps);
    model = ck->model;
    if (config != ck->config) {
      // Only the dropout can differ from the checkpoint's (the flags that would change the
      // architecture were refused above): rebuild with it and copy the weights over.
      Generator gen(a.seed);
      model = make_model(config, gen);
      model->load_state_dict(ck->model->state_dict(), a.init_from);
    }
  } else {
    config.src_vocab = data.src_vocab.size();
    config.tgt_vocab = data.tgt_vocab.size();
    Generator gen(a.seed ^ 0x5eedULL);
    model = make_model(config, gen);
  }
  return model;
}

// ---- the run ----------------------------------------------------------------------------------

/// The trainer's options from the flags, with the run record training.json keeps and the dev set.
TrainOptions make_train_options(TrainArgs& a, const std::optional<Checkpoint>& ck,
                                const std::optional<SubwordModel>& subword) {
  RunRecord run;
  a.data.record(run);
  if (a.steps > 0) run.steps = a.steps;
  else run.epochs = a.epochs;
  std::optional<DevSet> dev;
  if (!a.dev.empty()) {
    dev = make_dev_set(a, subword ? &*subword : nullptr);
    run.dev = a.dev;
    run.dev_bleu_pairs = a.dev_bleu_pairs;
    run.dev_beam = a.dev_beam;
    run.best = a.best;
  } else {
    a.patience = 0;  // settings continued from a checkpoint that had a dev set: nothing to drive them
    a.lr_decay = 1.0;
    a.validate_every = 0;
  }
  TrainOptions opts;
  opts.batch_size(a.batch_size).lr(a.lr).clip(a.clip).seed(a.seed).shuffle(!a.no_shuffle).log_csv(a.log_csv)
      .warmup_steps(a.warmup_steps).lr_anneal(a.lr_anneal_from, a.lr_anneal_to).label_smoothing(a.label_smoothing)
      .ema_decay(a.ema_decay)
      .out_dir(a.out).checkpoint_every(a.checkpoint_every).progress(!a.quiet).run(run).subword(subword)
      .batch_tokens(a.batch_tokens).max_seconds(a.max_minutes * 60.0)
      .precision(parse_precision(a.precision, "--precision"));
  if (dev) {
    opts.dev(std::move(*dev)).validate_every(a.validate_every).dev_bleu_pairs(a.dev_bleu_pairs)
        .dev_decode(DecodeOptions().beam_size(a.dev_beam)).select_by(a.select_by == "loss" ? SelectBy::kLoss : SelectBy::kBleu)
        .best_dir(a.best).patience(a.patience).lr_decay(a.lr_decay).lr_patience(a.lr_patience);
  }
  try {
    opts.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (a.steps > 0) opts.steps(a.steps);
  else opts.epochs(a.epochs);
  if (ck && ck->training) opts.resume_from(a.init_from);
  opts.shards(a.shards);
  return opts;
}

/// --write-batches: what the run would train on, written instead of training.
int export_batches(const TrainArgs& a, const std::optional<Checkpoint>& ck, const Seq2Seq& model,
                   const TranslationData& data, const TrainOptions& opts) {
  if (ck) throw UsageError("--write-batches exports a training from its start, not one continued with --init-from");
  const BatchExportSources sources{
      .data = a.data.data.empty() ? "task:" + a.data.task : a.data.data, .dev = a.dev, .max_minutes = a.max_minutes};
  const BatchExport plan = write_training_batches(a.write_batches, model, data, opts, sources);
  std::fprintf(stderr, "bahdanau: wrote %lld steps (%lld epochs) of batches over %lld training rows%s to %s "
                       "(batches.npz, meta.json%s, init/); nothing trained\n",
               static_cast<long long>(plan.steps), static_cast<long long>(plan.epochs),
               static_cast<long long>(data.train.size()), opts.dev() ? " and the dev rows" : "", a.write_batches.c_str(),
               opts.dev() ? ", dev.ref.txt" : "");
  return 0;
}

/// The summary on stderr once training ends (rank 0).
void report_training(const TrainArgs& a, const TrainResult& r) {
  if (r.ranks > 1 || r.shards > 1)
    std::fprintf(stderr, "bahdanau: data parallel: %lld ranks, %lld shards per batch, %.1f MiB of gradients per step "
                         "per rank (%lld bucket exchanges as rows), %.2f s waiting for transfers\n",
                 static_cast<long long>(r.ranks), static_cast<long long>(r.shards),
                 r.ddp.steps > 0 ? static_cast<double>(r.ddp.bytes_sent) / r.ddp.steps / (1 << 20) : 0.0,
                 static_cast<long long>(r.ddp.sparse_buckets), r.ddp.wait_seconds);
  if (r.steps_run == 0) {
    std::fprintf(stderr, "bahdanau: nothing to do: checkpoint already at step %lld of %lld\n",
                 static_cast<long long>(r.state.step), static_cast<long long>(r.total_steps));
    std::fprintf(stderr, "bahdanau: at step %lld (%lld complete epochs), last loss %.4f%s%s\n",
                 static_cast<long long>(r.state.step), static_cast<long long>(r.state.epoch), r.state.last_loss,
                 r.saved ? ", copied to " : "", r.saved ? a.out.c_str() : "");
  } else {
    std::fprintf(stderr,
                 "bahdanau: trained to step %lld (%lld complete epochs) in %.1f s, %.0f tokens/s, last loss %.4f%s%s\n",
                 static_cast<long long>(r.state.step), static_cast<long long>(r.state.epoch), r.seconds,
                 r.seconds > 0 ? r.tokens / r.seconds : 0.0, r.state.last_loss, r.saved ? ", saved to " : "",
                 r.saved ? a.out.c_str() : "");
  }
  if (!r.validations.empty() || r.state.best_step > 0)
    std::fprintf(stderr, "bahdanau: best dev validation at step %lld: dev BLEU %.2f, dev loss %.4f%s%s; lr now %g\n",
                 static_cast<long long>(r.state.best_step), r.state.best_dev_bleu, r.state.best_dev_loss,
                 a.best.empty() ? "" : ", kept in ", a.best.c_str(), a.lr * r.state.lr_scale);
  if (r.stopped_early)
    std::fprintf(stderr, "bahdanau: stopped early: no new best dev %s in %lld validations (--patience)\n",
                 a.select_by == "loss" ? "loss" : "BLEU", static_cast<long long>(r.state.bad_validations));
  if (r.time_limit_reached)
    std::fprintf(stderr, "bahdanau: stopped at the time limit (--max-minutes %g) after %.1f s of training\n", a.max_minutes,
                 r.state.elapsed_s);
}

int run_train(TrainArgs& a) {
  set_threads(a.threads);
  ModelConfig config;
  std::optional<Checkpoint> ck;
  if (!a.init_from.empty()) {
    ck = load_checkpoint(a.init_from);
    config = config_from_checkpoint(a, *ck);
    // Unset training options continue the checkpoint's run.
    if (ck->training) continue_training_run(a, *ck->training);
    if (a.out.empty()) a.out = a.init_from;
  } else {
    config = config_from_flags(a);
  }
  check_data_and_dev_flags(a);
  check_train_files(a);

  const std::optional<SubwordModel> subword = make_tokenizer(a, ck);
  TranslationData data = a.data.make(config.num_steps, a.seed, subword ? &*subword : nullptr);
  if (data.train.size() == 0) throw UsageError("train: no training pairs");
  const std::shared_ptr<Seq2Seq> model = make_train_model(a, config, ck, data);
  if (a.compact_grads) allow_compact_grads(*model);
  const bool lead = dist::rank() == 0;  // under mpirun only rank 0 reports
  if (a.out.empty() && a.write_batches.empty() && lead) std::fprintf(stderr, "bahdanau: warning: no --out given, the trained model will not be saved\n");

  const TrainOptions opts = make_train_options(a, ck, subword);
  if (!a.write_batches.empty()) return export_batches(a, ck, *model, data, opts);

  if (lead) std::fprintf(stderr, "bahdanau: %s, %lld parameters, %lld training pairs (%lld held out), vocab %lld/%lld, %d threads%s\n",
               std::string(config.model.name()).c_str(), static_cast<long long>(model->num_parameters()),
               static_cast<long long>(data.train.size()), static_cast<long long>(data.heldout.size()),
               static_cast<long long>(data.src_vocab.size()), static_cast<long long>(data.tgt_vocab.size()),
               num_threads(), opts.precision() == autocast::Precision::bf16 ? ", bf16 mixed precision" : "");
  note_precision(opts.precision());
  const TrainResult r = train(*model, data, opts);
  if (!lead) return 0;
  report_training(a, r);
  if (data.heldout.size() > 0) {  // in the training's precision
    EvalOptions eo;
    eo.decode.precision(opts.precision());
    const EvalReport rep = evaluate(*model, data.heldout_pairs, data.src_vocab, data.tgt_vocab, eo);
    std::fprintf(stderr, "bahdanau: held out (%lld pairs): loss %.4f, BLEU-4 %.4f%s, exact match %.4f\n",
                 static_cast<long long>(rep.count), rep.loss, rep.bleu4, subword ? " (of pieces)" : "", rep.exact_match);
  }
  return 0;
}

}  // namespace

Subcommand add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  TrainArgs& ta = *args;
  CLI::App* train_cmd = app.add_subcommand("train", "Train a translator on sentence pairs or a built-in task");
  CLI::Option *data_opt = nullptr, *task_opt = nullptr;
  ta.data.add_options(train_cmd, data_opt, task_opt, 0);
  ta.opts["data"] = data_opt;
  ta.opts["task"] = task_opt;
  add_architecture_flags(train_cmd, ta);
  add_vocabulary_flags(train_cmd, ta);
  add_optimizer_flags(train_cmd, ta);
  add_run_flags(train_cmd, ta);
  add_validation_flags(train_cmd, ta);
  add_output_flags(train_cmd, ta);
  return {train_cmd, [args] { return run_train(*args); }, true};
}

}  // namespace tg::cli
