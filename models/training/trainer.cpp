// The training loop (teacher forcing, clipping, Adam, CSV log, progress bar, checkpoints) and
// evaluation helpers.
#include "models/training/trainer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "autograd/dist.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "models/decoding/metrics.h"
#include "models/decoding/sacrebleu.h"
#include "nn/ema.h"
#include "models/translators/limits.h"
#include "nn/file_io.h"
#include "nn/lr_scheduler.h"
#include "nn/dropout.h"
#include "nn/early_stopping.h"
#include "nn/optim.h"
#include "nn/rnn.h"
#include "nn/utils.h"

namespace tg::models {

namespace {

using Clock = std::chrono::steady_clock;

/// A well-mixed 64-bit value from a few integers (splitmix64's output function, applied after each).
std::uint64_t mix(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0, std::uint64_t d = 0) {
  std::uint64_t x = a;
  for (std::uint64_t v : {b, c, d}) x = SplitMix64::finalize(x + 0x9e3779b97f4a7c15ULL + v);
  return x;
}
constexpr std::uint64_t kShuffleStream = 1, kDropoutStream = 2, kShardStream = 3;

/// Rows [r0, r1) of a batch (a shard of it).
Seq2SeqBatch batch_rows(const Seq2SeqBatch& b, std::int64_t r0, std::int64_t r1) {
  Seq2SeqBatch out;
  out.src = narrow(b.src, 0, r0, r1 - r0).clone();
  out.src_valid_len = narrow(b.src_valid_len, 0, r0, r1 - r0).clone();
  out.tgt = narrow(b.tgt, 0, r0, r1 - r0).clone();
  out.tgt_valid_len = narrow(b.tgt_valid_len, 0, r0, r1 - r0).clone();
  out.rows.assign(b.rows.begin() + r0, b.rows.begin() + r1);
  return out;
}


std::int64_t sum_i64(const Tensor& t) {
  std::int64_t s = 0;
  const std::int64_t* p = t.data<std::int64_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) s += p[i];
  return s;
}

/// Tokens joined by single spaces (word- and character-level dev BLEU).
std::string join(const std::vector<std::string>& tokens) {
  std::string out;
  for (const auto& t : tokens) {
    if (!out.empty()) out += ' ';
    out += t;
  }
  return out;
}

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", s / 60, s % 60);
  return buf;
}

/// Single-line progress bar on stderr, redrawn with '\r' at most 10 times a second.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO)) {}
  ~ProgressBar() { finish(); }
  void update(std::int64_t epoch, std::int64_t epochs, std::int64_t step, std::int64_t total_steps, double loss,
              double tokens_per_s, double elapsed, double eta, bool force = false) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (!force && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    constexpr int kWidth = 24;
    const double frac = total_steps > 0 ? std::min(1.0, static_cast<double>(step) / total_steps) : 0.0;
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r\033[Kepoch %lld/%lld [%s] step %lld/%lld loss %.4f %.0f tok/s elapsed %s eta %s",
                 static_cast<long long>(epoch), static_cast<long long>(epochs), bar.c_str(),
                 static_cast<long long>(step), static_cast<long long>(total_steps), loss, tokens_per_s,
                 clock_text(elapsed).c_str(), clock_text(eta).c_str());
    std::fflush(stderr);
  }
  void finish() {
    if (enabled_ && drawn_) std::fputc('\n', stderr);
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point last_{};
};

constexpr const char* kCsvHeader = "step,epoch,loss,tokens,grad_norm,lr,elapsed_s";
constexpr const char* kCsvDevColumns = ",dev_loss,dev_bleu";

/// Cuts an existing CSV log back to the rows of steps <= `last_step` (the checkpoint a resumed run
/// starts from), so the steps it redoes are not logged twice. An unterminated last line (a write cut
/// short by a kill) is dropped. The shortened file replaces the old one by a rename. Returns false
/// if the file does not exist or is empty. A line that is not a row of this log (step number first)
/// throws, leaving the file untouched.
bool truncate_csv_log(const std::string& path, std::int64_t last_step, const std::string& header) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;  // no log yet: a fresh one
    throw std::runtime_error(path + ": cannot read the CSV log to resume it (" + std::strerror(errno) + ")");
  }
  // A log that is not a regular file (/dev/null, a pipe) holds no rows to keep: it is written to,
  // never read back.
  if (!S_ISREG(st.st_mode)) return false;
  // Read whole (a regular file within nn::io::limits::kTextData); an error reading it is an error,
  // never an empty log that the run would then start afresh over.
  const std::string text = nn::io::read_file(path, nn::io::limits::kTextData);
  if (text.empty()) return false;
  std::string kept;
  std::size_t begin = 0;
  for (std::int64_t line_no = 1; begin < text.size(); ++line_no) {
    const std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) break;  // unterminated: a row cut short
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line_no == 1 && line.rfind("step,", 0) == 0) {
      if (line != header)
        throw std::runtime_error(path + ":1: the header '" + line + "' is not this run's ('" + header +
                                 "'; a dev set adds two columns); not appending to it");
      kept += line + "\n";
      continue;
    }
    std::int64_t step = 0;
    const auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), step);
    if (ec != std::errc() || ptr == line.data() + line.size() || *ptr != ',')
      throw std::runtime_error(path + ":" + std::to_string(line_no) +
                               ": not a row of a training log (step number first); not truncating it for the resume");
    if (step <= last_step) kept += line + "\n";
  }
  if (kept.size() == text.size()) return true;
  nn::io::write_file_atomic(path, kept);  // the shortened copy replaces the log whole, or not at all
  return !kept.empty();
}

/// The CSV log: header on a fresh file, rows appended and flushed one by one. A resumed run
/// (`resume_step` >= 0) keeps the existing rows up to that step and appends after them.
class CsvLog {
 public:
  CsvLog(const std::string& path, std::int64_t resume_step, bool dev) : path_(path), dev_(dev) {
    if (path.empty()) return;
    const std::string header = std::string(kCsvHeader) + (dev ? kCsvDevColumns : "");
    const bool fresh = resume_step < 0 || !truncate_csv_log(path, resume_step, header);
    file_ = std::fopen(path.c_str(), fresh ? "wb" : "ab");
    if (!file_) throw std::runtime_error(path + ": cannot open the CSV log for writing (" + std::strerror(errno) + ")");
    if (fresh) std::fprintf(file_, "%s\n", header.c_str());
    flush();
  }
  ~CsvLog() {
    if (file_) std::fclose(file_);  // only on an exception: close() reports the errors otherwise
  }
  CsvLog(const CsvLog&) = delete;
  CsvLog& operator=(const CsvLog&) = delete;
  void write(const StepRecord& r, const ValidationRecord* v = nullptr) {
    if (!file_) return;
    // %.9g round-trips a float32 loss; %.17g the double grad norm.
    std::fprintf(file_, "%lld,%lld,%.9g,%lld,%.17g,%.9g,%.3f", static_cast<long long>(r.step),
                 static_cast<long long>(r.epoch), r.loss, static_cast<long long>(r.tokens), r.grad_norm, r.lr,
                 r.elapsed_s);
    if (dev_ && v) std::fprintf(file_, ",%.9g,%.4f", v->dev_loss, v->dev_bleu);
    else if (dev_) std::fputs(",,", file_);
    std::fputc('\n', file_);
    flush();
  }
  /// Closes the log, reporting a write error of the close (a full disk found at the last block).
  void close() {
    if (!file_) return;
    std::FILE* f = std::exchange(file_, nullptr);
    const bool failed = std::ferror(f) != 0;
    if (std::fclose(f) != 0 || failed)
      throw std::runtime_error(path_ + ": write error at the close of the CSV log (" + std::strerror(errno) + ")");
  }

 private:
  void flush() {
    if (std::fflush(file_) != 0 || std::ferror(file_))
      throw std::runtime_error(path_ + ": write error on the CSV log (" + std::strerror(errno) + ")");
  }

  std::string path_;
  bool dev_ = false;
  std::FILE* file_ = nullptr;
};

}  // namespace

void TrainOptions::validate() const {
  auto fail = [](const std::string& what) { throw std::invalid_argument("train: " + what); };
  if (steps_ < 0) fail("steps must be >= 0");
  if (steps_ == 0 && epochs_ < 1) fail("epochs must be >= 1 (or give steps)");
  if (batch_size_ < 1 || batch_size_ > limits::kMaxBatchSize)
    fail("batch_size = " + std::to_string(batch_size_) + " is out of range [1, " + std::to_string(limits::kMaxBatchSize) + "]");
  if (!(lr_ > 0) || !std::isfinite(lr_)) fail("lr must be positive");
  if (!(clip_ >= 0) || !std::isfinite(clip_)) fail("clip must be >= 0 (0 = no clipping)");
  if (warmup_steps_ < 0 || warmup_steps_ > limits::kMaxCount)
    fail("warmup_steps = " + std::to_string(warmup_steps_) + " is out of range [0, " + std::to_string(limits::kMaxCount) + "]");
  if (!(label_smoothing_ >= 0 && label_smoothing_ < 1)) fail("label_smoothing must be in [0, 1)");
  if (threads_ < 0) fail("threads must be >= 0");
  if (checkpoint_every_ < 0) fail("checkpoint_every must be >= 0 (0 = only at the end)");
  if (history_ < 0) fail("history must be >= 0 (0 = keep no step records)");
  if (shards_ < 0 || shards_ > limits::kMaxBatchSize)
    fail("shards = " + std::to_string(shards_) + " is out of range [0, " + std::to_string(limits::kMaxBatchSize) + "]");
  if (batch_tokens_ < 0 || batch_tokens_ > limits::kMaxCount)
    fail("batch_tokens = " + std::to_string(batch_tokens_) + " is out of range [0, " + std::to_string(limits::kMaxCount) + "]");
  if (!(max_seconds_ >= 0) || !std::isfinite(max_seconds_)) fail("max_seconds must be >= 0 (0 = no limit)");
  if (validate_every_ < 0 || validate_every_ > limits::kMaxCount) fail("validate_every must be >= 0 (0 = epoch ends only)");
  if (dev_bleu_pairs_ < 0) fail("dev_bleu_pairs must be >= 0 (0 = all)");
  if (patience_ < 0 || patience_ > limits::kMaxCount) fail("patience must be >= 0 (0 = no early stopping)");
  if (!(lr_decay_ > 0 && lr_decay_ <= 1)) fail("lr_decay must be in (0, 1] (1 = no decay)");
  if (lr_patience_ < 1 || lr_patience_ > limits::kMaxCount) fail("lr_patience must be >= 1");
  if (lr_decay_ < 1 && warmup_steps_ > 0) fail("lr_decay cannot be combined with warmup_steps (the schedule sets the lr)");
  if (lr_anneal_from_ != 0 || lr_anneal_to_ != 0) {
    if (lr_anneal_from_ < 0 || lr_anneal_to_ <= lr_anneal_from_ || lr_anneal_to_ > limits::kMaxCount)
      fail("lr_anneal from " + std::to_string(lr_anneal_from_) + " to " + std::to_string(lr_anneal_to_) +
           " must satisfy 0 <= from < to <= " + std::to_string(limits::kMaxCount));
    if (warmup_steps_ > 0) fail("lr_anneal cannot be combined with warmup_steps (the schedule sets the lr)");
  }
  if (precision_ != autocast::Precision::f32 && precision_ != autocast::Precision::bf16)
    fail("precision = " + std::to_string(static_cast<int>(precision_)) + " is not fp32 or bf16");
  if (!(ema_decay_ == 0 || (ema_decay_ > 0 && ema_decay_ < 1))) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", ema_decay_);
    fail(std::string("ema_decay = ") + buf + " must be 0 (off) or in (0, 1)");
  }
  if (dev_) {
    if (dev_->pairs.size() == 0) fail("the dev set is empty");
    if (dev_->pairs.src.size() != dev_->pairs.tgt.size()) fail("the dev set's source and target counts differ");
    if (!dev_->references.empty() && dev_->references.size() != dev_->pairs.size())
      fail("the dev set has " + std::to_string(dev_->references.size()) + " references for " +
           std::to_string(dev_->pairs.size()) + " pairs");
  } else if (patience_ > 0 || lr_decay_ < 1 || !best_dir_.empty() || validate_every_ > 0) {
    fail("patience, lr_decay, best_dir and validate_every need a dev set");
  }
  if (!best_dir_.empty() && !out_dir_.empty()) {
    namespace fs = std::filesystem;
    const fs::path best = fs::absolute(best_dir_).lexically_normal(), out = fs::absolute(out_dir_).lexically_normal();
    auto strip = [](fs::path p) { return p.filename().empty() ? p.parent_path() : p; };
    const fs::path b = strip(best), o = strip(out);
    const auto rel = b.lexically_relative(o);
    if (b == o || (!rel.empty() && *rel.begin() != ".."))
      fail("best_dir '" + best_dir_ + "' must not be out_dir or lie inside it (a save replaces the whole directory)");
  }
}

std::vector<std::shared_ptr<Generator>> dropout_generators(Seq2Seq& model) {
  std::vector<std::shared_ptr<Generator>> out;
  std::set<const Generator*> seen;
  auto add = [&](const std::shared_ptr<Generator>& g) {
    if (g && seen.insert(g.get()).second) out.push_back(g);
  };
  for (auto& [name, m] : model.named_modules()) {
    if (auto* d = dynamic_cast<nn::DropoutImpl*>(m)) add(d->generator());
    if (auto* r = dynamic_cast<nn::RNNBase*>(m)) add(r->generator());
  }
  return out;
}

std::vector<std::string> dev_references(const DevSet& dev, std::size_t n) {
  n = std::min(n, dev.pairs.size());
  std::vector<std::string> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back(dev.references.empty() ? join(dev.pairs.tgt[i]) : dev.references[i]);
  return out;
}

std::vector<std::vector<std::int64_t>> epoch_batch_rows(const Seq2SeqDataset& data, const TrainOptions& options,
                                                        std::int64_t epoch) {
  if (epoch < 1) throw std::invalid_argument("epoch_batch_rows: epoch must be >= 1, got " + std::to_string(epoch));
  Generator gen(mix(options.seed(), kShuffleStream, static_cast<std::uint64_t>(epoch)));
  return options.batch_tokens() > 0 ? data.token_batch_rows(options.batch_tokens(), options.shuffle(), gen)
                                    : data.sentence_batch_rows(options.batch_size(), options.shuffle(), gen);
}

namespace {

/// The resumed checkpoint's training.json (nullopt: a fresh start, or weights without one, e.g.
/// converted from PyTorch, which start at step 0), its optimizer state loaded into `optimizer`.
std::optional<TrainingState> resume(const TrainOptions& options, nn::Optimizer& optimizer) {
  if (options.resume_from().empty()) return std::nullopt;
  std::optional<TrainingState> saved = load_training_state(options.resume_from());
  const bool has_optimizer = std::filesystem::exists(std::filesystem::path(options.resume_from()) / "optimizer.npz");
  if (saved && !has_optimizer)
    throw std::runtime_error(options.resume_from() + "/optimizer.npz: missing, cannot resume training exactly");
  if (saved && saved->batch_in_epoch > 0 &&
      (saved->batch_size != options.batch_size() || saved->shuffle != options.shuffle() ||
       saved->seed != options.seed() || saved->batch_tokens != options.batch_tokens()))
    throw std::invalid_argument("train: " + options.resume_from() +
                                " stopped in the middle of an epoch; resuming it needs the same batch size, "
                                "batch tokens, shuffle setting and seed (" + std::to_string(saved->batch_size) +
                                ", " + std::to_string(saved->batch_tokens) + ", " +
                                (saved->shuffle ? "shuffle" : "no shuffle") + ", seed " +
                                std::to_string(saved->seed) + ")");
  if (has_optimizer) load_optimizer_state(options.resume_from(), optimizer);
  return saved;
}

/// The weight EMA of options.ema_decay() (none at 0). A checkpoint with one holds the average in
/// weights.npz (which the model was loaded from) and the raw weights in training_weights.npz, which
/// training continues from: the average continues, or is dropped with ema_decay 0.
std::optional<nn::WeightEma> make_ema(Seq2Seq& model, const TrainOptions& options,
                                      const std::optional<TrainingState>& saved) {
  std::optional<nn::WeightEma> ema;
  const bool resume_ema = !options.resume_from().empty() &&
                          std::filesystem::exists(std::filesystem::path(options.resume_from()) / "training_weights.npz");
  if (options.ema_decay() > 0 && resume_ema)
    ema.emplace(model.named_parameters(), options.ema_decay(), saved ? saved->ema_updates : 0);
  if (resume_ema) load_training_weights(options.resume_from(), model);
  if (options.ema_decay() > 0 && !ema) ema.emplace(model.named_parameters(), options.ema_decay());
  return ema;
}

/// This run's settings, as training.json records them (the position comes from the checkpoint).
void record_settings(TrainingState& st, const TrainOptions& options, std::int64_t shards) {
  st.ema_decay = options.ema_decay();
  st.precision = options.precision();
  st.seed = options.seed();
  st.batch_size = options.batch_size();
  st.lr = options.lr();
  st.clip = options.clip();
  st.warmup_steps = options.warmup_steps();
  st.lr_anneal_from = options.lr_anneal_from();
  st.lr_anneal_to = options.lr_anneal_to();
  st.label_smoothing = options.label_smoothing();
  st.shuffle = options.shuffle();
  st.batch_tokens = options.batch_tokens();
  st.select_by = options.select_by() == SelectBy::kBleu ? "bleu" : "loss";
  st.patience = options.patience();
  st.lr_decay = options.lr_decay();
  st.lr_patience = options.lr_patience();
  st.validate_every = options.validate_every();
  st.run = options.run();
  st.shards = shards;
}

/// The one lr mechanism: a LambdaLR of the update (constant, warmup then inverse square root, or
/// the linear anneal), continued after `step` updates; the plateau decay scales its base lr.
std::unique_ptr<nn::LambdaLR> make_schedule(nn::Optimizer& optimizer, const TrainOptions& options, std::int64_t step) {
  if (options.warmup_steps() > 0) return std::make_unique<nn::WarmupInverseSqrtLR>(optimizer, options.warmup_steps(), step);
  if (options.lr_anneal_to() > 0)
    return std::make_unique<nn::LinearAnnealLR>(optimizer, options.lr_anneal_from(), options.lr_anneal_to(), step);
  return std::make_unique<nn::LambdaLR>(optimizer, [](std::int64_t) { return 1.0; });
}

/// Early stopping and the best validation as training.json keeps them: select_by bleu is the
/// highest dev BLEU with ties broken by the lower dev loss, select_by loss the lowest dev loss.
nn::EarlyStopping make_stopping(const TrainOptions& options, const TrainingProgress& p) {
  using Mode = nn::EarlyStopping::Mode;
  const bool by_loss = options.select_by() == SelectBy::kLoss;
  const nn::EarlyStopping::State s{p.validations, p.last_validation_step, p.best_step, p.bad_validations,
                                   by_loss ? p.best_dev_loss : p.best_dev_bleu, by_loss ? p.best_dev_bleu : p.best_dev_loss};
  return nn::EarlyStopping(by_loss ? Mode::min : Mode::max, options.dev() ? options.patience() : 0,
                           by_loss ? std::nullopt : std::optional<Mode>(Mode::min), s);
}

/// The parts' states back into training.json's fields.
void record_parts(TrainingProgress& p, const nn::EarlyStopping& stop, const nn::PlateauDecay& decay, SelectBy by) {
  const auto& s = stop.state();
  p.validations = s.validations;
  p.last_validation_step = s.last_step;
  p.best_step = s.best_step;
  p.bad_validations = s.bad_validations;
  p.best_dev_bleu = by == SelectBy::kLoss ? s.best_second : s.best;
  p.best_dev_loss = by == SelectBy::kLoss ? s.best : s.best_second;
  p.lr_scale = decay.state().scale;
  p.lr_bad_validations = decay.state().bad_validations;
}

/// Validation's scores: the teacher-forced dev loss over every dev pair and the sacreBLEU-compatible
/// BLEU of the decoded first dev_bleu_pairs() sources, in the training's precision, of the averaged
/// weights when there is an EMA. Draws no random numbers.
class DevScorer {
 public:
  DevScorer(const TrainOptions& options, const Seq2Seq& model, const Vocab& src_vocab, const Vocab& tgt_vocab)
      : options_(options), src_vocab_(src_vocab), tgt_vocab_(tgt_vocab),
        decode_(DecodeOptions(options.dev_decode()).precision(options.precision())) {
    const DevSet* dev = options.dev();
    if (!dev) return;
    data_ = Seq2SeqDataset(dev->pairs, src_vocab, tgt_vocab, model.config().num_steps);
    const std::size_t n = options.dev_bleu_pairs() > 0
                              ? std::min(dev->pairs.size(), static_cast<std::size_t>(options.dev_bleu_pairs()))
                              : dev->pairs.size();
    sources_.assign(dev->pairs.src.begin(), dev->pairs.src.begin() + static_cast<std::ptrdiff_t>(n));
    refs_ = dev_references(*dev, n);
  }
  ValidationRecord score(Seq2Seq& model, nn::WeightEma* ema, std::int64_t step, std::int64_t epoch) const {
    ValidationRecord v{.step = step, .epoch = epoch};
    nn::EmaSwapGuard swap(ema);  // the averaged weights are the ones validated
    {
      const autocast::Guard precision(options_.precision());
      v.dev_loss = evaluate_loss(model, data_);
    }
    const auto out = translate_tokens(model, sources_, src_vocab_, tgt_vocab_, decode_);
    std::vector<std::string> hyps;
    hyps.reserve(out.size());
    for (const auto& t : out) hyps.push_back(options_.subword() ? options_.subword()->decode(t.tokens) : join(t.tokens));
    v.dev_bleu = sacre_bleu(hyps, refs_).score;
    v.bleu_pairs = static_cast<std::int64_t>(hyps.size());
    return v;
  }

 private:
  const TrainOptions& options_;
  const Vocab& src_vocab_;
  const Vocab& tgt_vocab_;
  DecodeOptions decode_;
  Seq2SeqDataset data_;
  std::vector<std::vector<std::string>> sources_;
  std::vector<std::string> refs_;
};

void print_validation(const ValidationRecord& v, const TrainOptions& options, bool stopped) {
  std::fprintf(stderr, "validation at step %lld (epoch %lld): dev loss %.4f, dev BLEU %.2f (%lld pairs), %.1f s%s%s%s\n",
               static_cast<long long>(v.step), static_cast<long long>(v.epoch), v.dev_loss, v.dev_bleu,
               static_cast<long long>(v.bleu_pairs), v.seconds,
               v.best ? (options.best_dir().empty() ? ", best so far" : ", best so far, saved") : "",
               v.lr_decayed ? ", lr decayed" : "",
               stopped ? ", early stop (no new best in the last patience validations)" : "");
}

/// Reseeds the dropout generators for step `step` (and shard `shard` of a sharded step).
void reseed_dropout(const std::vector<std::shared_ptr<Generator>>& generators, std::uint64_t seed, std::int64_t step,
                    std::optional<std::int64_t> shard = std::nullopt) {
  for (std::size_t g = 0; g < generators.size(); ++g) {
    const std::uint64_t s = mix(seed, kDropoutStream, static_cast<std::uint64_t>(step), g);
    *generators[g] = Generator(shard ? mix(s, kShardStream, static_cast<std::uint64_t>(*shard)) : s);
  }
}

/// The plain step's forward and backward on one batch; returns its loss.
double local_step(Seq2Seq& model, Seq2SeqBatch&& batch, const TrainOptions& options,
                  const std::vector<std::shared_ptr<Generator>>& generators, std::int64_t step) {
  // Each batch is used once: moved, not copied (a step allocates nothing for its rows).
  const Seq2SeqBatch b = model.padding_is_inert() ? trim_padding(std::move(batch)) : std::move(batch);
  reseed_dropout(generators, options.seed(), step);
  const Tensor dec_input = teacher_forcing_input(b.tgt, Vocab::kBos);
  // The step's forward and backward under autocast (bf16: products recorded here run their
  // backward with bf16 operands too, and products the backward itself records, if any, take the
  // same state); clipping, Adam and the EMA stay outside, in float32.
  const autocast::Guard precision(options.precision());
  const Tensor loss = model.loss(b.src, b.src_valid_len, dec_input, b.tgt, b.tgt_valid_len, options.label_smoothing());
  loss.backward();
  return loss.item();
}

/// The sharded step: this rank's shards of each batch, gradients exchanged in buckets during the
/// last backward (nn::DistributedDataParallel), the shards' losses summed in a fixed tree.
class ShardedStep {
 public:
  ShardedStep(Seq2Seq& model, const TrainOptions& options, std::int64_t shards, std::int64_t world, std::int64_t rank)
      : model_(model), options_(options), shards_(shards), rank_(rank), local_(shards / world),
        ddp_(model.named_parameters(), nn::DDPOptions().average(false)),
        shard_loss_(static_cast<std::size_t>(local_)), all_loss_(static_cast<std::size_t>(shards)) {}

  double run(const Seq2SeqBatch full, const std::vector<std::shared_ptr<Generator>>& generators, std::int64_t step) {
    const std::int64_t rows = full.src.size(0);
    const std::int64_t batch_tokens = sum_i64(full.tgt_valid_len);
    for (std::int64_t j = 0; j < local_; ++j) {
      const std::int64_t s = rank_ * local_ + j;
      const std::int64_t r0 = s * rows / shards_, r1 = (s + 1) * rows / shards_;
      Tensor loss;
      shard_loss_[static_cast<std::size_t>(j)] = 0.0;
      if (r1 > r0) {  // a short last batch can leave a shard empty: it contributes zeros
        Seq2SeqBatch b = batch_rows(full, r0, r1);
        if (model_.padding_is_inert()) b = trim_padding(std::move(b));
        reseed_dropout(generators, options_.seed(), step, s);
        const Tensor dec_input = teacher_forcing_input(b.tgt, Vocab::kBos);
        // The shard's mean loss scaled to its share of the batch's tokens: the shards' gradients
        // then sum to the gradient of the whole batch's mean loss.
        const double share = batch_tokens > 0 ? static_cast<double>(sum_i64(b.tgt_valid_len)) / batch_tokens : 0.0;
        const autocast::Guard precision(options_.precision());
        loss = model_.loss(b.src, b.src_valid_len, dec_input, b.tgt, b.tgt_valid_len, options_.label_smoothing()) * share;
        shard_loss_[static_cast<std::size_t>(j)] = loss.item();
      }
      const autocast::Guard precision(options_.precision());  // backward as the forward
      ddp_.backward(loss, j == local_ - 1);
    }
    ddp_.synchronize();
    dist::iallgather(shard_loss_.data(), shard_loss_.size() * sizeof(double), all_loss_.data(), "shard losses").wait();
    std::vector<const double*> parts(all_loss_.size());
    for (std::size_t s = 0; s < parts.size(); ++s) parts[s] = &all_loss_[s];
    double total = 0.0;
    dist::tree_sum(parts.data(), parts.size(), 1, &total);
    return total;
  }
  nn::DDPStats stats() const { return ddp_.stats(); }

 private:
  Seq2Seq& model_;
  const TrainOptions& options_;
  std::int64_t shards_, rank_, local_;
  nn::DistributedDataParallel ddp_;
  std::vector<double> shard_loss_, all_loss_;
};

/// Each step's forward and backward: the plain one, or under data parallelism (shards > 1 or
/// several ranks) this rank's shards of the batch (ShardedStep). Reseeds the dropout first.
class BatchStep {
 public:
  BatchStep(Seq2Seq& model, const TrainOptions& options, std::int64_t shards, std::int64_t world, std::int64_t rank)
      : model_(model), options_(options), generators_(dropout_generators(model)) {
    if (shards > 1 || world > 1) sharded_.emplace(model, options, shards, world, rank);
  }
  /// The forward and backward on the batch of step `step` + 1; returns the batch's loss.
  double run(Seq2SeqBatch&& batch, std::int64_t step) {
    return sharded_ ? sharded_->run(std::move(batch), generators_, step)
                    : local_step(model_, std::move(batch), options_, generators_, step);
  }
  /// The communication so far (zero when not sharded).
  nn::DDPStats stats() const { return sharded_ ? sharded_->stats() : nn::DDPStats(); }

 private:
  Seq2Seq& model_;
  const TrainOptions& options_;
  std::vector<std::shared_ptr<Generator>> generators_;
  std::optional<ShardedStep> sharded_;
};

/// Where and when train() saves, rank 0 only: out_dir every checkpoint_every() epochs and at the
/// end, best_dir after each new best. With an EMA, weights.npz gets the average (swapped in for the
/// save) and training_weights.npz the raw weights.
class CheckpointPolicy {
 public:
  CheckpointPolicy(const TrainOptions& options, bool lead, Seq2Seq& model, const Vocab& src_vocab,
                   const Vocab& tgt_vocab, const nn::Optimizer& optimizer, nn::WeightEma* ema)
      : options_(options), lead_(lead), model_(model), src_vocab_(src_vocab), tgt_vocab_(tgt_vocab),
        optimizer_(optimizer), ema_(ema) {}
  /// Saves the whole checkpoint to `dir` (st.ema_updates set from the EMA first).
  void save(const std::string& dir, TrainingState& st) const {
    st.ema_updates = ema_ ? ema_->updates() : 0;
    nn::EmaSwapGuard swap(ema_);
    save_checkpoint(dir, model_, src_vocab_, tgt_vocab_, &optimizer_, &st,
                    options_.subword() ? &*options_.subword() : nullptr, ema_ ? &ema_->averages() : nullptr);
  }
  /// Whether `epochs` completed epochs call for a checkpoint.
  bool epoch_due(std::int64_t epochs) const {
    return options_.checkpoint_every() > 0 && epochs % options_.checkpoint_every() == 0;
  }
  /// Saves to out_dir if there is one and this is rank 0; returns whether it saved.
  bool to_out_dir(TrainingState& st) const {
    if (options_.out_dir().empty() || !lead_) return false;
    save(options_.out_dir(), st);
    return true;
  }
  /// After a new best: saves to best_dir if there is one and this is rank 0.
  void best(TrainingState& st) const {
    if (lead_ && !options_.best_dir().empty()) save(options_.best_dir(), st);
  }
  /// A resume that found its checkpoint at the target does no step: the checkpoint is rewritten only
  /// to copy it to another out_dir (true: copied). The same out_dir is cleaned of the temporary
  /// directories a save killed after its swap can leave, since no save follows to do it.
  bool copy_resumed(TrainingState& st) const {
    std::error_code ec;
    if (!lead_ || options_.out_dir().empty()) return false;
    if (std::filesystem::equivalent(options_.out_dir(), options_.resume_from(), ec)) {
      remove_stale_checkpoint_temporaries(options_.out_dir());
      return false;
    }
    save(options_.out_dir(), st);
    return true;
  }

 private:
  const TrainOptions& options_;
  bool lead_;
  Seq2Seq& model_;
  const Vocab& src_vocab_;
  const Vocab& tgt_vocab_;
  const nn::Optimizer& optimizer_;
  nn::WeightEma* ema_;
};

/// What train() reports of each step: the CSV log and the progress bar (rank 0 only) and the last
/// TrainOptions::history() records, a ring taken oldest first at the end.
class StepLog {
 public:
  StepLog(const TrainOptions& options, bool lead, std::int64_t resume_step, std::size_t history)
      : options_(options), lead_(lead),
        csv_(lead ? options.log_csv() : std::string(), resume_step, options.dev() != nullptr),
        bar_(options.progress() && lead), n_(history) {
    records_.reserve(history);
  }
  /// Throws if the loss of `r` is not finite, after logging it (the last good checkpoint stays).
  void check_finite(const StepRecord& r) {
    if (std::isfinite(r.loss)) return;
    csv_.write(r);
    throw std::runtime_error("train: the loss became " + std::to_string(r.loss) + " at step " + std::to_string(r.step) +
                             " (try a smaller --lr or --clip)");
  }
  /// Logs step `r` with the validation after it, if any, and keeps its record.
  void step(const StepRecord& r, const ValidationRecord* v) {
    ++steps_;
    tokens_ += r.tokens;
    if (records_.size() < n_) {
      records_.push_back(r);
    } else if (n_ > 0) {
      records_[next_] = r;
      next_ = (next_ + 1) % n_;
    }
    csv_.write(r, v);
  }
  /// Redraws the progress bar after step `r` of `total`, `run_s` seconds into this run.
  void progress(const StepRecord& r, std::int64_t epochs, std::int64_t total, double run_s, bool last) {
    const double done = static_cast<double>(steps_);
    double eta = done > 0 ? run_s / done * static_cast<double>(total - r.step) : NAN;
    if (options_.max_seconds() > 0) eta = std::min(eta, std::max(0.0, options_.max_seconds() - r.elapsed_s));
    bar_.update(r.epoch, epochs, r.step, total, r.loss, run_s > 0 ? tokens_ / run_s : 0.0, r.elapsed_s, eta, last);
  }
  /// Prints a validation's line on stderr (rank 0, with progress()).
  void validation(const ValidationRecord& v, bool stopped) {
    if (!lead_ || !options_.progress()) return;
    bar_.finish();
    print_validation(v, options_, stopped);
  }
  std::int64_t steps() const { return steps_; }
  std::int64_t tokens() const { return tokens_; }
  /// Closes the log and the bar; returns the records, oldest first.
  std::vector<StepRecord> close() {
    csv_.close();
    bar_.finish();
    std::rotate(records_.begin(), records_.begin() + static_cast<std::ptrdiff_t>(next_), records_.end());
    return std::move(records_);
  }

 private:
  const TrainOptions& options_;
  bool lead_;
  CsvLog csv_;
  ProgressBar bar_;
  std::int64_t steps_ = 0, tokens_ = 0;
  std::size_t n_, next_ = 0;
  std::vector<StepRecord> records_;
};

/// The training's shards per global batch: options.shards(), else the resumed checkpoint's if the
/// ranks divide it, else one per rank; a multiple of the ranks.
std::int64_t shards_of(const TrainOptions& options, const std::optional<TrainingState>& saved, std::int64_t world) {
  std::int64_t shards = options.shards();
  if (shards == 0) shards = saved && saved->shards % world == 0 ? saved->shards : world;
  if (shards % world != 0)
    throw std::invalid_argument("train: shards = " + std::to_string(shards) + " is not a multiple of the " +
                                std::to_string(world) + " ranks");
  return shards;
}

/// Counts batch `i` of an epoch of `n` batches as done; returns whether it ended the epoch.
bool advance(TrainingProgress& p, std::size_t i, std::size_t n) {
  ++p.step;
  p.batch_in_epoch = static_cast<std::int64_t>(i) + 1;
  if (p.batch_in_epoch != static_cast<std::int64_t>(n)) return false;
  ++p.epoch;
  p.batch_in_epoch = 0;
  return true;
}

/// The training time: this run's seconds, and the total over every run of a resumed training.
class Stopwatch {
 public:
  explicit Stopwatch(double before) : before_(before), t0_(Clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  double elapsed() const { return before_ + seconds(); }

 private:
  double before_;
  Clock::time_point t0_;
};

/// The checks before any work (the checkpoints' destinations too, not only at the first save), and
/// the thread count.
void prepare(const TrainOptions& options, const Seq2SeqDataset& data) {
  options.validate();
  if (data.size() == 0) throw std::invalid_argument("train: the training set is empty");
  if (!options.out_dir().empty()) check_checkpoint_destination(options.out_dir());
  if (!options.best_dir().empty()) check_checkpoint_destination(options.best_dir());
  if (options.threads() > 0) set_num_threads(options.threads());
}

/// Batches in an epoch: every epoch has the same number (token batches' boundaries depend only on
/// the lengths). A resume into other data would never finish its epoch, so that is refused.
std::int64_t batches_per_epoch(const Seq2SeqDataset& data, const TrainOptions& options, std::int64_t batch_in_epoch) {
  std::int64_t per_epoch = (data.size() + options.batch_size() - 1) / options.batch_size();
  if (options.batch_tokens() > 0) {
    Generator unused(0);
    per_epoch = static_cast<std::int64_t>(data.token_batch_rows(options.batch_tokens(), false, unused).size());
  }
  if (batch_in_epoch > per_epoch)
    throw std::invalid_argument("train: " + options.resume_from() + "/training.json: batch_in_epoch = " +
                                std::to_string(batch_in_epoch) + " but an epoch of this data has " +
                                std::to_string(per_epoch) + " batches (not the data the checkpoint was trained on)");
  return per_epoch;
}

/// The stop by the time limit, read once per step; under data parallelism rank 0 decides for all,
/// since the ranks' clocks differ and one would otherwise wait forever.
bool out_of_time_now(const TrainOptions& options, double elapsed, std::int64_t world) {
  bool out = elapsed >= options.max_seconds();
  if (world > 1) {
    char flag = out ? 1 : 0;
    dist::ibroadcast(&flag, 1, 0, "time limit").wait();
    out = flag != 0;
  }
  return out;
}

}  // namespace

TrainResult train(Seq2Seq& model, const Seq2SeqDataset& data, const Vocab& src_vocab, const Vocab& tgt_vocab,
                  const TrainOptions& options) {
  prepare(options, data);
  nn::Adam optimizer(model.named_parameters(), nn::AdamOptions(options.lr()));
  optimizer.zero_grad();  // gradients left from before train() must not add to the first step's
  const std::optional<TrainingState> saved = resume(options, optimizer);
  TrainingState st;
  if (saved) static_cast<TrainingProgress&>(st) = *saved;  // position and validation state continue
  std::optional<nn::WeightEma> ema = make_ema(model, options, saved);
  // Data parallelism: every rank runs this function; only rank 0 ("lead") writes anything.
  const std::int64_t world = dist::world_size(), rank = dist::rank(), shards = shards_of(options, saved, world);
  const bool lead = rank == 0;
  record_settings(st, options, shards);
  // The parts: one lr schedule (scaled by the plateau decay) and early stopping. Without a dev set
  // there are no plateau decisions, so the lr is not decayed.
  const auto schedule = make_schedule(optimizer, options, st.step);
  nn::PlateauDecay decay(*schedule, options.lr_decay(), options.lr_patience(),
                         {.scale = options.dev() ? st.lr_scale : 1.0, .bad_validations = st.lr_bad_validations});
  nn::EarlyStopping stop = make_stopping(options, st);
  record_parts(st, stop, decay, options.select_by());

  const std::int64_t per_epoch = batches_per_epoch(data, options, st.batch_in_epoch);
  const std::int64_t total_steps = options.steps() > 0 ? options.steps() : options.epochs() * per_epoch;
  const std::int64_t total_epochs = options.steps() > 0 ? (total_steps + per_epoch - 1) / per_epoch : options.epochs();
  auto reached = [&] { return options.steps() > 0 ? st.step >= options.steps() : st.epoch >= options.epochs(); };
  bool out_of_time = options.max_seconds() > 0 && st.elapsed_s >= options.max_seconds();
  auto finished = [&] { return reached() || stop.should_stop() || out_of_time; };

  TrainResult result;
  result.total_steps = total_steps;
  StepLog log(options, lead, options.resume_from().empty() ? -1 : st.step,
              static_cast<std::size_t>(std::min(options.history(), std::max<std::int64_t>(0, total_steps - st.step))));
  const auto params = model.parameters();
  const double max_norm = options.clip() > 0 ? options.clip() : std::numeric_limits<double>::infinity();
  const Stopwatch clock(st.elapsed_s);
  const CheckpointPolicy checkpoints(options, lead, model, src_vocab, tgt_vocab, optimizer, ema ? &*ema : nullptr);
  auto checkpoint = [&] {
    st.elapsed_s = clock.elapsed();
    if (checkpoints.to_out_dir(st)) result.saved = true;
  };
  const bool nothing_to_do = finished();  // a resume from a checkpoint already at the target
  // Validation: every rank computes it (the weights are the same everywhere), so every rank takes
  // the same decisions; only the lead saves and reports.
  const DevScorer dev(options, model, src_vocab, tgt_vocab);
  auto validate = [&](std::int64_t epoch) {
    const auto v0 = Clock::now();
    ValidationRecord v = dev.score(model, ema ? &*ema : nullptr, st.step, epoch);
    const bool by_loss = options.select_by() == SelectBy::kLoss;
    v.best = stop.step(st.step, by_loss ? v.dev_loss : v.dev_bleu, by_loss ? v.dev_bleu : v.dev_loss);
    v.lr_decayed = decay.step(v.best);
    v.lr = optimizer.lr();  // what the next step uses
    record_parts(st, stop, decay, options.select_by());
    st.elapsed_s = clock.elapsed();
    if (v.best) checkpoints.best(st);
    v.seconds = std::chrono::duration<double>(Clock::now() - v0).count();
    log.validation(v, stop.should_stop());
    return result.validations.emplace_back(v);
  };
  BatchStep batch_step(model, options, shards, world, rank);

  model.train();
  bool saved_at_end = false;
  auto every = [&](std::int64_t n) { return n > 0 && st.step % n == 0; };
  while (!finished()) {
    const std::int64_t epoch = st.epoch + 1;
    std::vector<Seq2SeqBatch> batches;
    for (const auto& rows : epoch_batch_rows(data, options, epoch)) batches.push_back(data.batch(rows));
    bool epoch_done = false;
    for (auto i = static_cast<std::size_t>(st.batch_in_epoch); i < batches.size() && !finished(); ++i) {
      StepRecord r{.step = st.step + 1, .epoch = epoch, .tokens = sum_i64(batches[i].tgt_valid_len)};
      r.loss = batch_step.run(std::move(batches[i]), st.step);
      r.grad_norm = nn::clip_grad_norm(params, max_norm);
      r.lr = optimizer.lr();
      optimizer.step();
      if (ema) ema->update();
      schedule->step();
      optimizer.zero_grad();  // now, not before the next backward: no gradient sits beside the next forward's activations
      epoch_done = advance(st, i, batches.size());
      if (options.max_seconds() > 0) out_of_time = out_of_time_now(options, clock.elapsed(), world);
      r.elapsed_s = clock.elapsed();
      st.last_loss = r.loss;
      log.check_finite(r);
      // Validate at epoch ends, every validate_every steps, and after the run's last step.
      std::optional<ValidationRecord> v;
      if (options.dev() && stop.state().last_step != st.step && (epoch_done || finished() || every(options.validate_every())))
        v = validate(epoch);
      log.step(r, v ? &*v : nullptr);
      log.progress(r, total_epochs, total_steps, clock.seconds(), finished());
    }
    saved_at_end = epoch_done && checkpoints.epoch_due(st.epoch);
    if (saved_at_end) checkpoint();
  }
  if (nothing_to_do && saved) {
    // Keep the checkpoint's own record (its options and time); rewrite it only to copy it elsewhere.
    // Its EMA fields follow the weights a copy holds (an average dropped by ema_decay 0 is gone).
    st = *saved;
    st.ema_decay = options.ema_decay();
    result.saved = checkpoints.copy_resumed(st);
  } else {
    if (!saved_at_end) checkpoint();
    st.elapsed_s = clock.elapsed();
  }
  st.ema_updates = ema ? ema->updates() : 0;
  result.steps = log.close();
  result.steps_run = log.steps();
  result.tokens = log.tokens();
  result.state = st;
  result.seconds = clock.seconds();
  result.stopped_early = stop.should_stop();
  result.time_limit_reached = out_of_time && !reached();
  result.shards = shards;
  result.ranks = world;
  result.ddp = batch_step.stats();
  if (ema) {
    ema->swap();  // the model ends holding the average, as weights.npz: the model to translate with
    result.training_weights = ema->averages();
  }
  return result;
}

TrainResult train(Seq2Seq& model, const TranslationData& data, const TrainOptions& options) {
  return train(model, data.train, data.src_vocab, data.tgt_vocab, options);
}

double evaluate_loss(Seq2Seq& model, const Seq2SeqDataset& data, std::int64_t batch_size) {
  if (batch_size < 1) throw std::invalid_argument("evaluate_loss: batch_size must be >= 1");
  NoGradGuard no_grad;
  nn::EvalModeGuard eval(model);
  double total = 0.0;
  std::int64_t tokens = 0;
  for (const auto& full : data.batches(batch_size)) {
    const Seq2SeqBatch b = model.padding_is_inert() ? trim_padding(full) : full;
    const std::int64_t n = sum_i64(b.tgt_valid_len);
    if (n == 0) continue;
    const Tensor loss = model.loss(b.src, b.src_valid_len, teacher_forcing_input(b.tgt, Vocab::kBos), b.tgt,
                                   b.tgt_valid_len);
    total += loss.item() * static_cast<double>(n);
    tokens += n;
  }
  return tokens > 0 ? total / static_cast<double>(tokens) : std::numeric_limits<double>::quiet_NaN();
}

EvalReport evaluate(Seq2Seq& model, const TokenizedPairs& pairs, const Vocab& src_vocab, const Vocab& tgt_vocab,
                    const EvalOptions& options) {
  EvalReport rep;
  rep.k = options.bleu_k;
  rep.count = static_cast<std::int64_t>(pairs.size());
  if (pairs.size() == 0) {
    rep.loss = std::numeric_limits<double>::quiet_NaN();
    return rep;
  }
  rep.translations = translate_tokens(model, pairs.src, src_vocab, tgt_vocab, options.decode);
  const autocast::Guard precision(options.decode.precision());  // for the loss below
  std::vector<std::vector<std::string>> hyps;
  hyps.reserve(pairs.size());
  double bleu_sum = 0.0;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    hyps.push_back(rep.translations[i].tokens);
    bleu_sum += bleu_d2l(hyps.back(), pairs.tgt[i], options.bleu_k);
  }
  rep.bleu4 = corpus_bleu(hyps, pairs.tgt, 4).score;
  rep.bleu_k = bleu_sum / static_cast<double>(pairs.size());
  const CorpusScores cs = corpus_scores(hyps, pairs.tgt);
  rep.exact_match = cs.exact_match;
  rep.token_accuracy = cs.token_accuracy;
  rep.psa = cs.psa;
  rep.lcsr = cs.lcsr;
  const Seq2SeqDataset encoded(pairs, src_vocab, tgt_vocab, model.config().num_steps);
  rep.loss = evaluate_loss(model, encoded, options.batch_size);
  return rep;
}

}  // namespace tg::models
