#pragma once
// Training and evaluation of the translators:
//
//   auto model = tg::models::make_model(config, gen);
//   auto result = tg::models::train(*model, data,
//       tg::models::TrainOptions().epochs(250).batch_size(64).lr(0.005).out_dir("ckpt").log_csv("loss.csv"));
//   auto report = tg::models::evaluate(*model, data.heldout_pairs, data.src_vocab, data.tgt_vocab);
//
// One optimizer step: teacher forcing (decoder input = `<bos>` + the target shifted right), loss =
// sequence_loss (mean cross-entropy over the valid target tokens, optionally label-smoothed),
// backward, clip_grad_norm, Adam with one lr schedule (constant, warmup + inverse square root, or
// a linear anneal) that a plateau decay scales: the nn:: parts of docs/training.md.
//
// Reproducibility. Every random choice is a function of (seed, position), never of history:
//   - epoch e's batch order is drawn from Generator(mix(seed, "shuffle", e));
//   - before step s, every dropout generator of the model (found by walking its modules:
//     nn::Dropout and nn::RNNBase layers) is reseeded with Generator(mix(seed, "dropout", s, i)).
// Kernels are deterministic whatever the thread count (autograd/parallel.h), so the same seed and
// options give the same losses bit for bit with 1 or N threads, and a run resumed from a
// checkpoint (TrainOptions::resume_from) repeats the straight run exactly: the checkpoint holds
// the weights, Adam's state and the position (step, epoch, batch within the epoch), and nothing
// else is needed. Weights and Adam state are stored as float32, so this is exact for float32
// models. With a weight EMA (TrainOptions::ema_decay) the checkpoint also holds the average and
// its update count, so it continues exactly too.
//
// Mixed precision (TrainOptions::precision(tg::autocast::Precision::bf16)): each step's forward and
// backward run inside a tg::autocast::Guard, so the matrix products read bf16-rounded operands and
// accumulate in float32 (autograd/autocast.h); the loss, the gradient clipping, Adam and its state,
// and the weights stay float32. Validation runs in the same precision. training.json records it.
//
// Validation (TrainOptions::dev): dev loss and dev BLEU at epoch ends, every validate_every()
// steps and after the last step; they draw no random numbers, so the steps do not change. What
// they drive (the best checkpoint, early stopping, lr decay on a plateau: nn::EarlyStopping and
// nn::PlateauDecay) is decided from counters kept in TrainingState, so a resumed run takes the same
// decisions as the straight one.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/training/checkpoint.h"
#include "nn/distributed.h"
#include "models/text/data.h"
#include "models/decoding/decode.h"
#include "models/translators/seq2seq.h"
#include "models/text/text.h"

namespace tg::models {

/// A dev set for validation during training (TrainOptions::dev).
struct DevSet {
  /// The pairs as the model reads them (tokens or subword pieces), encoded with the training
  /// vocabularies for the teacher-forced dev loss.
  TokenizedPairs pairs;
  /// The detokenised target sentences BLEU compares against, one per pair (subword data: the
  /// sentences as written, the hypotheses decoded by TrainOptions::subword). Empty: the target
  /// tokens joined by spaces, compared with the output tokens joined by spaces (word and character
  /// level data, whose tokenisation cannot be undone).
  std::vector<std::string> references;
};

/// The first n (at most size) dev references as dev BLEU compares with them: `references`, or each
/// pair's target tokens joined by single spaces when it is empty.
std::vector<std::string> dev_references(const DevSet& dev, std::size_t n);

/// What "the best validation" means: highest dev BLEU (ties broken by the lower dev loss) or
/// lowest dev loss.
enum class SelectBy { kBleu, kLoss };

/// Options of train(). Chainable setters; validate() checks them.
class TrainOptions {
 public:
  /// Train until this many epochs are complete (default 10); ignored when steps() > 0.
  TrainOptions& epochs(std::int64_t v) { epochs_ = v; return *this; }
  /// Train until this many optimizer steps are done (0 = use epochs()). Both targets count from
  /// the start of training, so a resumed run continues to the same end as a straight one.
  TrainOptions& steps(std::int64_t v) { steps_ = v; return *this; }
  TrainOptions& batch_size(std::int64_t v) { batch_size_ = v; return *this; }
  /// Adam learning rate (default 0.005, d2l's Bahdanau chapter).
  TrainOptions& lr(double v) { lr_ = v; return *this; }
  /// 0 (default): lr is constant. > 0: nn::WarmupInverseSqrtLR, rising linearly to lr at this step
  /// and decaying as 1/sqrt(step) after it (the Transformer's schedule).
  TrainOptions& warmup_steps(std::int64_t v) { warmup_steps_ = v; return *this; }
  /// Linear lr annealing for a fixed budget (nn::LinearAnnealLR, a function of the step, so a resume
  /// repeats it): after `from` steps, step s + 1 (s steps done) uses lr × (to - s) / (to - from),
  /// reaching 0 at `to`;
  /// give steps(to) with it. Both 0 (default): off. Multiplies the plateau decay's factor; not
  /// combinable with warmup_steps().
  TrainOptions& lr_anneal(std::int64_t from, std::int64_t to) {
    lr_anneal_from_ = from;
    lr_anneal_to_ = to;
    return *this;
  }
  /// Label smoothing ε in [0, 1) of the training loss (default 0; sequence_loss). Evaluation losses
  /// are never smoothed.
  TrainOptions& label_smoothing(double v) { label_smoothing_ = v; return *this; }
  /// clip_grad_norm max norm (default 1.0); 0 disables clipping (the norm is still logged).
  TrainOptions& clip(double v) { clip_ = v; return *this; }
  TrainOptions& seed(std::uint64_t v) { seed_ = v; return *this; }
  /// Seeded shuffle each epoch (default) or file order.
  TrainOptions& shuffle(bool v) { shuffle_ = v; return *this; }
  /// CSV with one row per optimizer step: step,epoch,loss,tokens,grad_norm,lr,elapsed_s ("" = none);
  /// with a dev set two more columns, dev_loss,dev_bleu, filled on the rows of the steps after
  /// which a validation ran and empty on the others.
  /// A resumed run keeps an existing file's rows up to the checkpoint's step (rows past it, from a
  /// run killed after that checkpoint, are removed) and appends; otherwise the file is rewritten.
  /// The shortened copy replaces the file atomically; an existing log that cannot be read (or is
  /// above nn::io::limits::kTextData) stops the run before any step; one that is not a regular
  /// file (/dev/null, a pipe) is written without being read. Every row is flushed and checked, and
  /// so is the close at the end of train().
  TrainOptions& log_csv(std::string v) { log_csv_ = std::move(v); return *this; }
  /// Checkpoint directory written at each epoch end and at the end ("" = no checkpoints).
  TrainOptions& out_dir(std::string v) { out_dir_ = std::move(v); return *this; }
  /// Write the checkpoint every this many epochs (default 1 = each epoch end; 0 = only at the
  /// end). A checkpoint costs a few fsyncs, which matters for tiny epochs such as d2l's
  /// 10-batch one.
  TrainOptions& checkpoint_every(std::int64_t v) { checkpoint_every_ = v; return *this; }
  /// tg::set_num_threads(n) before training (process-wide); 0 = leave the setting alone.
  TrainOptions& threads(int v) { threads_ = v; return *this; }
  /// Progress bar on stderr, redrawn in place; drawn only if stderr is a terminal.
  TrainOptions& progress(bool v) { progress_ = v; return *this; }
  /// Resume from this checkpoint's optimizer state and training.json position (the model's
  /// weights must already be loaded from it, e.g. by load_checkpoint; a checkpoint with a weight
  /// EMA also has training_weights.npz, which train() loads into the model itself). "" = a fresh start.
  TrainOptions& resume_from(std::string v) { resume_from_ = std::move(v); return *this; }
  /// TrainResult::steps keeps the records of this many most recent steps (default 4096; 0 = none),
  /// so a long run's memory does not grow with its length. The CSV log has every step.
  TrainOptions& history(std::int64_t v) { history_ = v; return *this; }
  /// Data parallelism (run under `mpirun -np N` with a tg::dist::Context alive): each global batch
  /// of batch_size() rows is cut into this many fixed shards of consecutive rows, rank r takes shards
  /// [r S/N, (r+1) S/N), each shard's loss is scaled to its share of the batch's target tokens, and
  /// the shards' gradients are summed in a fixed tree (nn::DistributedDataParallel), so a power of
  /// two S gives the same parameters bit for bit on 1, 2, 4, ... ranks dividing S. Must be a
  /// multiple of the number of ranks. 0 (default) = the resumed checkpoint's value if the ranks
  /// divide it, else one shard per rank. 1 shard on 1 rank is the plain single-process step.
  /// Only rank 0 writes the CSV log, the progress bar and checkpoints.
  TrainOptions& shards(std::int64_t v) { shards_ = v; return *this; }
  /// What the run is trained on and toward, stored in the checkpoint as TrainingState::run.
  TrainOptions& run(RunRecord v) { run_ = std::move(v); return *this; }
  /// The SentencePiece model the data was encoded with, saved in every checkpoint as
  /// tokenizer.model (default none: word- or character-level vocabularies).
  TrainOptions& subword(std::optional<SubwordModel> v) { subword_ = std::move(v); return *this; }
  /// Token-based batches (Seq2SeqDataset::token_batch_rows): each batch holds at most this many
  /// padded tokens, rows sorted by length within the epoch, batch order shuffled by seed (0 =
  /// default: batches of batch_size() sentences).
  TrainOptions& batch_tokens(std::int64_t v) { batch_tokens_ = v; return *this; }
  /// Stop once the training time (TrainingState::elapsed_s, over every run of a resumed training,
  /// validations included) reaches this many seconds; the step under way finishes, then the run
  /// validates (with a dev set) and checkpoints as at its end (0 = no limit).
  TrainOptions& max_seconds(double v) { max_seconds_ = v; return *this; }
  /// Validate on this dev set at every epoch end, every validate_every() steps, and at the last step
  /// of the run: the teacher-forced dev loss over all its pairs and the sacreBLEU-compatible corpus
  /// BLEU (models/decoding/sacrebleu.h, 13a) of dev_decode() outputs on its first dev_bleu_pairs()
  /// pairs. Validation draws no random numbers, so it does not change the training steps.
  TrainOptions& dev(DevSet v) { dev_ = std::make_shared<const DevSet>(std::move(v)); return *this; }
  /// Also validate every this many steps (0 = at epoch ends only).
  TrainOptions& validate_every(std::int64_t v) { validate_every_ = v; return *this; }
  /// Dev BLEU on the first N dev pairs only, for speed (0 = all). The dev loss uses all pairs.
  TrainOptions& dev_bleu_pairs(std::int64_t v) { dev_bleu_pairs_ = v; return *this; }
  /// Decoding of the dev sources for BLEU (default greedy).
  TrainOptions& dev_decode(DecodeOptions v) { dev_decode_ = v; return *this; }
  /// Which validation is best (default SelectBy::kBleu).
  TrainOptions& select_by(SelectBy v) { select_by_ = v; return *this; }
  /// After each validation that is the best so far, the whole checkpoint (weights, optimizer,
  /// training.json) is also saved here, atomically as every save ("" = not kept). Must differ from
  /// out_dir() and not lie inside it.
  TrainOptions& best_dir(std::string v) { best_dir_ = std::move(v); return *this; }
  /// Early stopping: stop after this many validations in a row without a new best (0 = never).
  TrainOptions& patience(std::int64_t v) { patience_ = v; return *this; }
  /// Learning-rate decay on a plateau: after lr_patience() validations without a new best (counted
  /// since the best or the previous decay), lr is multiplied by this factor in (0, 1] (1 = off).
  /// The accumulated factor (TrainingState::lr_scale) stops at the smallest normal double,
  /// 2.2e-308, instead of rounding to 0, which training.json cannot hold. Not combinable with
  /// warmup_steps().
  TrainOptions& lr_decay(double v) { lr_decay_ = v; return *this; }
  TrainOptions& lr_patience(std::int64_t v) { lr_patience_ = v; return *this; }
  /// Exponential moving average of the weights (nn::WeightEma, nn/ema.h): 0 (default) =
  /// off; in (0, 1) = the decay D (typically 0.999), updated after every optimizer step from the
  /// weights at the start of training, with the warm-up min(D, (1 + n) / (10 + n)). When on,
  /// validation (and so the best checkpoint, lr decay and early stopping) uses the averaged weights,
  /// and checkpoints hold them as weights.npz, the raw weights as training_weights.npz. Under data
  /// parallelism every rank keeps the same average. A resume continues a checkpoint's average, or
  /// starts one from its weights if it has none; resumed with 0 from a checkpoint with an average,
  /// training continues from its raw weights and the average is dropped.
  TrainOptions& ema_decay(double v) { ema_decay_ = v; return *this; }
  /// Precision of the matrix products of every training step, forward and backward (default
  /// float32). bf16: each step runs inside a tg::autocast::Guard (bf16 operands, float32 sums; the
  /// weights, gradients, losses and Adam stay float32); validation (dev loss and dev BLEU) runs in
  /// the same precision, whatever dev_decode() says. Saved as TrainingState::precision.
  TrainOptions& precision(autocast::Precision v) { precision_ = v; return *this; }

  std::int64_t epochs() const { return epochs_; }
  std::int64_t steps() const { return steps_; }
  std::int64_t batch_size() const { return batch_size_; }
  double lr() const { return lr_; }
  std::int64_t warmup_steps() const { return warmup_steps_; }
  std::int64_t lr_anneal_from() const { return lr_anneal_from_; }
  std::int64_t lr_anneal_to() const { return lr_anneal_to_; }
  double label_smoothing() const { return label_smoothing_; }
  double clip() const { return clip_; }
  std::uint64_t seed() const { return seed_; }
  bool shuffle() const { return shuffle_; }
  const std::string& log_csv() const { return log_csv_; }
  const std::string& out_dir() const { return out_dir_; }
  std::int64_t checkpoint_every() const { return checkpoint_every_; }
  int threads() const { return threads_; }
  bool progress() const { return progress_; }
  const std::string& resume_from() const { return resume_from_; }
  std::int64_t history() const { return history_; }
  std::int64_t shards() const { return shards_; }
  const RunRecord& run() const { return run_; }
  const std::optional<SubwordModel>& subword() const { return subword_; }
  std::int64_t batch_tokens() const { return batch_tokens_; }
  double max_seconds() const { return max_seconds_; }
  /// The dev set, or null.
  const DevSet* dev() const { return dev_.get(); }
  std::int64_t validate_every() const { return validate_every_; }
  std::int64_t dev_bleu_pairs() const { return dev_bleu_pairs_; }
  const DecodeOptions& dev_decode() const { return dev_decode_; }
  SelectBy select_by() const { return select_by_; }
  const std::string& best_dir() const { return best_dir_; }
  std::int64_t patience() const { return patience_; }
  double lr_decay() const { return lr_decay_; }
  std::int64_t lr_patience() const { return lr_patience_; }
  double ema_decay() const { return ema_decay_; }
  autocast::Precision precision() const { return precision_; }
  /// Throws std::invalid_argument naming the first bad option.
  void validate() const;

 private:
  std::int64_t epochs_ = 10;
  std::int64_t steps_ = 0;
  std::int64_t batch_size_ = 64;
  double lr_ = 0.005;
  std::int64_t warmup_steps_ = 0;
  std::int64_t lr_anneal_from_ = 0, lr_anneal_to_ = 0;
  double label_smoothing_ = 0.0;
  double clip_ = 1.0;
  std::uint64_t seed_ = 0;
  bool shuffle_ = true;
  std::string log_csv_;
  std::string out_dir_;
  std::int64_t checkpoint_every_ = 1;
  int threads_ = 0;
  bool progress_ = true;
  std::string resume_from_;
  std::int64_t history_ = 4096;
  std::int64_t shards_ = 0;
  RunRecord run_;
  std::optional<SubwordModel> subword_;
  std::int64_t batch_tokens_ = 0;
  double max_seconds_ = 0.0;
  std::shared_ptr<const DevSet> dev_;
  std::int64_t validate_every_ = 0;
  std::int64_t dev_bleu_pairs_ = 0;
  DecodeOptions dev_decode_;
  SelectBy select_by_ = SelectBy::kBleu;
  std::string best_dir_;
  std::int64_t patience_ = 0;
  double lr_decay_ = 1.0;
  std::int64_t lr_patience_ = 1;
  double ema_decay_ = 0.0;
  autocast::Precision precision_ = autocast::Precision::f32;
};

/// One validation on the dev set, as logged.
struct ValidationRecord {
  std::int64_t step = 0;    ///< the step after which it ran
  std::int64_t epoch = 0;   ///< 1-based epoch of that step
  double dev_loss = 0.0;    ///< token-weighted teacher-forced loss over every dev pair
  double dev_bleu = 0.0;    ///< sacreBLEU-compatible corpus BLEU in [0, 100]
  std::int64_t bleu_pairs = 0;  ///< dev pairs BLEU was computed on
  bool best = false;        ///< a new best (and saved to best_dir when set)
  double lr = 0.0;          ///< the lr after it (lower than before if it decayed)
  bool lr_decayed = false;
  double seconds = 0.0;     ///< time it took
};

/// One optimizer step, as logged.
struct StepRecord {
  std::int64_t step = 0;     ///< 1-based global step
  std::int64_t epoch = 0;    ///< 1-based epoch of the batch
  double loss = 0.0;         ///< the batch's loss before the update
  std::int64_t tokens = 0;   ///< valid target tokens in the batch
  double grad_norm = 0.0;    ///< gradient norm before clipping
  double lr = 0.0;
  double elapsed_s = 0.0;    ///< training time since the first run started
};

/// The rows of each batch of the 1-based `epoch`, in the order train() takes them: drawn from
/// Generator(mix(seed, "shuffle", epoch)) by Seq2SeqDataset::token_batch_rows (batch_tokens() > 0)
/// or Seq2SeqDataset::sentence_batch_rows (batch_size()), with options.shuffle(). No other random
/// draw (model initialisation, dropout) touches that generator, and train() builds its batches
/// from exactly these rows, so another program given them trains on the same batches in the same
/// order (`bahdanau train --write-batches`). A batch of a model whose padding is inert is then
/// cut to its longest rows (trim_padding).
std::vector<std::vector<std::int64_t>> epoch_batch_rows(const Seq2SeqDataset& data, const TrainOptions& options,
                                                        std::int64_t epoch);

/// What train() did.
struct TrainResult {
  /// The last TrainOptions::history() steps of this run, oldest first (a resumed run: only new ones).
  std::vector<StepRecord> steps;
  std::int64_t steps_run = 0;     ///< optimizer steps this run did (0: a resume with nothing left to do)
  std::int64_t total_steps = 0;   ///< the step the options aim at: steps(), or epochs() × batches per epoch
  TrainingState state;            ///< position at the end (as stored in the last checkpoint), last_loss included
  bool saved = false;             ///< this run wrote a checkpoint to out_dir
  double seconds = 0.0;           ///< wall time of this run
  std::int64_t tokens = 0;        ///< target tokens processed by this run
  std::int64_t shards = 1;        ///< shards per global batch used (TrainOptions::shards)
  std::int64_t ranks = 1;         ///< ranks the batches were spread over
  nn::DDPStats ddp;               ///< communication of this run (zero when not sharded)
  std::vector<ValidationRecord> validations;  ///< this run's validations, in order
  bool stopped_early = false;     ///< stopped by patience() (also when a resume found it already stopped)
  bool time_limit_reached = false;  ///< stopped by max_seconds()
  /// With TrainOptions::ema_decay: the raw training weights at the end, named and ordered as
  /// model.parameters() (the model itself then holds the averaged ones); empty otherwise.
  nn::NamedTensors training_weights;
};

/// Trains `model` on `data` (see the file comment). With TrainOptions::ema_decay the model holds the
/// averaged weights when it returns (TrainResult::training_weights the raw ones); an exception
/// leaves it with the raw weights. `src_vocab`/`tgt_vocab` are only needed for
/// checkpoints (out_dir). A resume whose checkpoint is already at the target does no step: the
/// result carries the checkpoint's state (last_loss included) and the checkpoint is not rewritten
/// when out_dir is the resumed directory (another out_dir gets a copy of it). Throws std::runtime_error if the loss becomes NaN or infinite (the
/// last good checkpoint stays).
TrainResult train(Seq2Seq& model, const Seq2SeqDataset& data, const Vocab& src_vocab, const Vocab& tgt_vocab,
                  const TrainOptions& options);
/// train() on data.train with data's vocabularies.
TrainResult train(Seq2Seq& model, const TranslationData& data, const TrainOptions& options);

/// Token-weighted mean of sequence_loss over `data` (sum of the batches' loss × tokens over all
/// tokens), teacher-forced, in eval mode without recording; NaN for an empty dataset. Its products
/// run in the caller's autocast state (a tg::autocast::Guard around the call makes them bf16).
double evaluate_loss(Seq2Seq& model, const Seq2SeqDataset& data, std::int64_t batch_size = 64);

/// Options of evaluate().
struct EvalOptions {
  /// Greedy by default; its precision() also applies to the loss.
  DecodeOptions decode;
  int bleu_k = 2;              ///< k of d2l's sentence BLEU (its Bahdanau chapter uses 2)
  std::int64_t batch_size = 64;  ///< for the loss
};

/// Scores of a model on sentence pairs.
struct EvalReport {
  std::int64_t count = 0;        ///< number of pairs
  double bleu4 = 0.0;            ///< corpus BLEU-4 (Papineni), output tokens vs reference tokens
  double bleu_k = 0.0;           ///< mean over sentences of d2l's BLEU-k
  int k = 2;
  double exact_match = 0.0;      ///< fraction of outputs equal to the reference
  double token_accuracy = 0.0;   ///< pooled positional token accuracy (metrics.h)
  double psa = 0.0, lcsr = 0.0;  ///< mean PSA and LCSR (metrics.h)
  double loss = 0.0;             ///< evaluate_loss on the pairs encoded with the vocabularies
  std::vector<Translation> translations;  ///< the outputs, in pair order
};

/// Decodes every source of `pairs` and scores the outputs against the targets (tokens as the
/// data code makes them; targets are compared as written, so words outside the target vocabulary
/// can never match).
EvalReport evaluate(Seq2Seq& model, const TokenizedPairs& pairs, const Vocab& src_vocab, const Vocab& tgt_vocab,
                    const EvalOptions& options = EvalOptions());

/// The generators the model's dropout layers draw from (nn::Dropout and nn::RNNBase), each once,
/// in module order. train() reseeds them before every step.
std::vector<std::shared_ptr<Generator>> dropout_generators(Seq2Seq& model);

}  // namespace tg::models
