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
#include "nn/dropout.h"
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

TrainResult train(Seq2Seq& model, const Seq2SeqDataset& data, const Vocab& src_vocab, const Vocab& tgt_vocab,
                  const TrainOptions& options) {
  options.validate();
  if (data.size() == 0) throw std::invalid_argument("train: the training set is empty");
  // Where the checkpoints go is checked before the first step, not at the first save.
  if (!options.out_dir().empty()) check_checkpoint_destination(options.out_dir());
  if (!options.best_dir().empty()) check_checkpoint_destination(options.best_dir());
  if (options.threads() > 0) set_num_threads(options.threads());

  TrainingState st;
  nn::Adam optimizer(model.named_parameters(), nn::AdamOptions(options.lr()));
  optimizer.zero_grad();  // gradients left from before train() must not add to the first step's
  const bool resuming = !options.resume_from().empty();
  std::optional<TrainingState> saved;
  if (resuming) {
    saved = load_training_state(options.resume_from());
    const bool has_optimizer = std::filesystem::exists(std::filesystem::path(options.resume_from()) / "optimizer.npz");
    if (saved) {
      if (!has_optimizer)
        throw std::runtime_error(options.resume_from() + "/optimizer.npz: missing, cannot resume training exactly");
      // The position and the validation state (best so far, counters, decayed lr) continue; the
      // settings are this run's options, set below.
      static_cast<TrainingProgress&>(st) = *saved;
      if (st.batch_in_epoch > 0 && (saved->batch_size != options.batch_size() ||
                                    saved->shuffle != options.shuffle() || saved->seed != options.seed() ||
                                    saved->batch_tokens != options.batch_tokens()))
        throw std::invalid_argument("train: " + options.resume_from() +
                                    " stopped in the middle of an epoch; resuming it needs the same batch size, "
                                    "batch tokens, shuffle setting and seed (" + std::to_string(saved->batch_size) +
                                    ", " + std::to_string(saved->batch_tokens) + ", " +
                                    (saved->shuffle ? "shuffle" : "no shuffle") + ", seed " +
                                    std::to_string(saved->seed) + ")");
    }
    // Without training.json (e.g. weights converted from PyTorch) training starts at step 0.
    if (has_optimizer) load_optimizer_state(options.resume_from(), optimizer);
  }
  // The weight EMA. A checkpoint with one holds the average in weights.npz (which the model was
  // loaded from) and the raw weights in training_weights.npz, which training continues from.
  std::optional<nn::WeightEma> ema;
  const bool resume_ema =
      resuming && std::filesystem::exists(std::filesystem::path(options.resume_from()) / "training_weights.npz");
  if (options.ema_decay() > 0 && resume_ema)
    ema.emplace(model.named_parameters(), options.ema_decay(), saved ? saved->ema_updates : 0);
  if (resume_ema) load_training_weights(options.resume_from(), model);
  if (options.ema_decay() > 0 && !ema) ema.emplace(model.named_parameters(), options.ema_decay());
  st.ema_decay = options.ema_decay();
  st.ema_updates = ema ? ema->updates() : 0;
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
  if (!options.dev()) st.lr_scale = 1.0;  // no plateau decisions without a dev set
  if (st.lr_scale != 1.0) optimizer.set_lr(options.lr() * st.lr_scale);
  // Continues from the steps already done (a resumed run's optimizer holds options.lr()).
  // lr_anneal: the lr of the next step, a function of the step alone, so a resume repeats it.
  auto annealed_lr = [&] {
    const double left = static_cast<double>(options.lr_anneal_to() - st.step) /
                        static_cast<double>(options.lr_anneal_to() - options.lr_anneal_from());
    return options.lr() * st.lr_scale * std::clamp(left, 0.0, 1.0);
  };
  std::optional<nn::WarmupInverseSqrtLR> schedule;
  if (options.warmup_steps() > 0) schedule.emplace(optimizer, options.warmup_steps(), st.step);
  st.notes = options.notes();
  // Data parallelism: every rank runs this function; only rank 0 ("lead") writes anything.
  const std::int64_t world = dist::world_size(), rank = dist::rank();
  const bool lead = rank == 0;
  std::int64_t shards = options.shards();
  if (shards == 0) shards = saved && saved->shards % world == 0 ? saved->shards : world;
  if (shards % world != 0)
    throw std::invalid_argument("train: shards = " + std::to_string(shards) + " is not a multiple of the " +
                                std::to_string(world) + " ranks");
  st.shards = shards;

  // Token batches: every epoch has the same number (the boundaries depend only on the lengths).
  auto epoch_batches = [&](std::int64_t epoch) {
    std::vector<Seq2SeqBatch> out;
    for (const auto& rows : epoch_batch_rows(data, options, epoch)) out.push_back(data.batch(rows));
    return out;
  };
  std::int64_t per_epoch = (data.size() + options.batch_size() - 1) / options.batch_size();
  if (options.batch_tokens() > 0) {
    Generator unused(0);
    per_epoch = static_cast<std::int64_t>(data.token_batch_rows(options.batch_tokens(), false, unused).size());
  }
  // Without this a resume into other data would never finish its epoch (no batch left to run).
  if (st.batch_in_epoch > per_epoch)
    throw std::invalid_argument("train: " + options.resume_from() + "/training.json: batch_in_epoch = " +
                                std::to_string(st.batch_in_epoch) + " but an epoch of this data has " +
                                std::to_string(per_epoch) + " batches (not the data the checkpoint was trained on)");
  const bool by_steps = options.steps() > 0;
  const std::int64_t total_steps = by_steps ? options.steps() : options.epochs() * per_epoch;
  const std::int64_t total_epochs = by_steps ? (total_steps + per_epoch - 1) / per_epoch : options.epochs();
  // The stops besides the target: early stopping (re-derived from the counters, so a resume with
  // more patience continues) and the time limit (read once per step, so a step's row and the loop
  // agree on it).
  auto stopped_early = [&] { return options.dev() && options.patience() > 0 && st.bad_validations >= options.patience(); };
  bool out_of_time = options.max_seconds() > 0 && st.elapsed_s >= options.max_seconds();
  auto finished = [&] {
    return (by_steps ? st.step >= options.steps() : st.epoch >= options.epochs()) || stopped_early() || out_of_time;
  };

  TrainResult result;
  // A ring of the last history() records: `next` is where the following one goes once it is full.
  const auto history = static_cast<std::size_t>(
      std::min<std::int64_t>(options.history(), std::max<std::int64_t>(0, total_steps - st.step)));
  result.steps.reserve(history);
  std::size_t next = 0;
  CsvLog csv(lead ? options.log_csv() : std::string(), resuming ? st.step : -1, options.dev() != nullptr);
  ProgressBar bar(options.progress() && lead);
  const auto generators = dropout_generators(model);
  const auto params = model.parameters();
  const double max_norm = options.clip() > 0 ? options.clip() : std::numeric_limits<double>::infinity();
  const double elapsed_before = st.elapsed_s;
  const auto t0 = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const std::int64_t first_step = st.step;

  // With an EMA, weights.npz gets the average (swapped in for the save) and training_weights.npz
  // the raw weights (then in the EMA's buffers).
  auto save_to = [&](const std::string& dir) {
    nn::EmaSwapGuard swap(ema ? &*ema : nullptr);
    save_checkpoint(dir, model, src_vocab, tgt_vocab, &optimizer, &st, options.subword() ? &*options.subword() : nullptr,
                    ema ? &ema->averages() : nullptr);
  };
  auto checkpoint = [&] {
    st.elapsed_s = elapsed_before + seconds();
    if (options.out_dir().empty() || !lead) return;
    save_to(options.out_dir());
    result.saved = true;
  };
  result.total_steps = total_steps;
  const bool nothing_to_do = finished();  // a resume from a checkpoint already at the target

  // Validation: every rank computes it (the weights are the same everywhere), so every rank takes
  // the same decisions; only the lead saves and reports.
  Seq2SeqDataset dev_data;
  std::vector<std::vector<std::string>> dev_sources;
  std::vector<std::string> dev_refs;
  if (const DevSet* dev = options.dev()) {
    dev_data = Seq2SeqDataset(dev->pairs, src_vocab, tgt_vocab, model.config().num_steps);
    const std::size_t n = options.dev_bleu_pairs() > 0
                              ? std::min(dev->pairs.size(), static_cast<std::size_t>(options.dev_bleu_pairs()))
                              : dev->pairs.size();
    dev_sources.assign(dev->pairs.src.begin(), dev->pairs.src.begin() + static_cast<std::ptrdiff_t>(n));
    dev_refs = dev_references(*dev, n);
  }
  // Validation in the training's precision.
  const DecodeOptions dev_decode = DecodeOptions(options.dev_decode()).precision(options.precision());
  auto validate = [&](std::int64_t epoch_of_step) {
    const auto v0 = Clock::now();
    ValidationRecord v;
    v.step = st.step;
    v.epoch = epoch_of_step;
    {
      nn::EmaSwapGuard swap(ema ? &*ema : nullptr);  // the averaged weights are the ones validated
      {
        const autocast::Guard precision(options.precision());
        v.dev_loss = evaluate_loss(model, dev_data);
      }
      const auto out = translate_tokens(model, dev_sources, src_vocab, tgt_vocab, dev_decode);
      std::vector<std::string> hyps;
      hyps.reserve(out.size());
      for (const auto& t : out) hyps.push_back(options.subword() ? options.subword()->decode(t.tokens) : join(t.tokens));
      v.dev_bleu = sacre_bleu(hyps, dev_refs).score;
      v.bleu_pairs = static_cast<std::int64_t>(hyps.size());
    }
    ++st.validations;
    st.last_validation_step = st.step;
    const bool first = st.best_step == 0;
    v.best = first || (options.select_by() == SelectBy::kLoss
                           ? v.dev_loss < st.best_dev_loss
                           : v.dev_bleu > st.best_dev_bleu || (v.dev_bleu == st.best_dev_bleu && v.dev_loss < st.best_dev_loss));
    if (v.best) {
      st.best_step = st.step;
      st.best_dev_bleu = v.dev_bleu;
      st.best_dev_loss = v.dev_loss;
      st.bad_validations = 0;
      st.lr_bad_validations = 0;
    } else {
      ++st.bad_validations;
      ++st.lr_bad_validations;
      if (options.lr_decay() < 1 && st.lr_bad_validations >= options.lr_patience()) {
        // Never below the smallest normal double: training.json's loader needs lr_scale > 0, and
        // enough decays would round the product to 0 (lr × 2.2e-308 already moves no weight).
        st.lr_scale = std::max(st.lr_scale * options.lr_decay(), std::numeric_limits<double>::min());
        optimizer.set_lr(options.lr() * st.lr_scale);
        st.lr_bad_validations = 0;
        v.lr_decayed = true;
      }
    }
    v.lr = options.lr_anneal_to() > 0 ? annealed_lr() : optimizer.lr();  // what the next step uses
    st.elapsed_s = elapsed_before + seconds();
    if (v.best && lead && !options.best_dir().empty()) save_to(options.best_dir());
    v.seconds = std::chrono::duration<double>(Clock::now() - v0).count();
    if (lead && options.progress()) {
      bar.finish();
      std::fprintf(stderr, "validation at step %lld (epoch %lld): dev loss %.4f, dev BLEU %.2f (%lld pairs), %.1f s%s%s%s\n",
                   static_cast<long long>(v.step), static_cast<long long>(v.epoch), v.dev_loss, v.dev_bleu,
                   static_cast<long long>(v.bleu_pairs), v.seconds,
                   v.best ? (options.best_dir().empty() ? ", best so far" : ", best so far, saved") : "",
                   v.lr_decayed ? ", lr decayed" : "",
                   stopped_early() ? ", early stop (no new best in the last patience validations)" : "");
    }
    result.validations.push_back(v);
    return v;
  };

  // The sharded step: this rank's shards, gradients exchanged in buckets during the last backward.
  std::unique_ptr<nn::DistributedDataParallel> ddp;
  if (shards > 1 || world > 1)
    ddp = std::make_unique<nn::DistributedDataParallel>(model.named_parameters(), nn::DDPOptions().average(false));
  const std::int64_t local_shards = shards / world;
  std::vector<double> shard_loss(static_cast<std::size_t>(local_shards)), all_loss(static_cast<std::size_t>(shards));
  auto sharded_step = [&](const Seq2SeqBatch& full) -> double {
    const std::int64_t rows = full.src.size(0);
    const std::int64_t batch_tokens = sum_i64(full.tgt_valid_len);
    for (std::int64_t j = 0; j < local_shards; ++j) {
      const std::int64_t s = rank * local_shards + j;
      const std::int64_t r0 = s * rows / shards, r1 = (s + 1) * rows / shards;
      Tensor loss;
      shard_loss[static_cast<std::size_t>(j)] = 0.0;
      if (r1 > r0) {  // a short last batch can leave a shard empty: it contributes zeros
        Seq2SeqBatch b = batch_rows(full, r0, r1);
        if (model.padding_is_inert()) b = trim_padding(std::move(b));
        for (std::size_t g = 0; g < generators.size(); ++g)
          *generators[g] = Generator(mix(mix(options.seed(), kDropoutStream, static_cast<std::uint64_t>(st.step), g),
                                         kShardStream, static_cast<std::uint64_t>(s)));
        const Tensor dec_input = teacher_forcing_input(b.tgt, Vocab::kBos);
        // The shard's mean loss scaled to its share of the batch's tokens: the shards' gradients
        // then sum to the gradient of the whole batch's mean loss.
        const double share = batch_tokens > 0 ? static_cast<double>(sum_i64(b.tgt_valid_len)) / batch_tokens : 0.0;
        const autocast::Guard precision(options.precision());
        loss = model.loss(b.src, b.src_valid_len, dec_input, b.tgt, b.tgt_valid_len, options.label_smoothing()) * share;
        shard_loss[static_cast<std::size_t>(j)] = loss.item();
      }
      const autocast::Guard precision(options.precision());  // backward as the forward (see below)
      ddp->backward(loss, j == local_shards - 1);
    }
    ddp->synchronize();
    dist::iallgather(shard_loss.data(), shard_loss.size() * sizeof(double), all_loss.data(), "shard losses").wait();
    std::vector<const double*> parts(all_loss.size());
    for (std::size_t s = 0; s < parts.size(); ++s) parts[s] = &all_loss[s];
    double total = 0.0;
    dist::tree_sum(parts.data(), parts.size(), 1, &total);
    return total;
  };

  model.train();
  bool saved_at_end = false;
  while (!finished()) {
    const std::int64_t epoch = st.epoch + 1;
    auto batches = epoch_batches(epoch);
    bool epoch_done = false;
    for (auto i = static_cast<std::size_t>(st.batch_in_epoch); i < batches.size() && !finished(); ++i) {
      // Each batch is used once: moved, not copied (a step allocates nothing for its rows).
      double loss_value = 0.0;
      std::int64_t batch_tokens = 0;
      if (ddp) {
        const Seq2SeqBatch full = std::move(batches[i]);
        batch_tokens = sum_i64(full.tgt_valid_len);
        loss_value = sharded_step(full);
      } else {
        const Seq2SeqBatch b =
            model.padding_is_inert() ? trim_padding(std::move(batches[i])) : std::move(batches[i]);
        for (std::size_t g = 0; g < generators.size(); ++g)
          *generators[g] = Generator(mix(options.seed(), kDropoutStream, static_cast<std::uint64_t>(st.step), g));
        const Tensor dec_input = teacher_forcing_input(b.tgt, Vocab::kBos);
        // The step's forward and backward under autocast (bf16: products recorded here run their
        // backward with bf16 operands too, and products the backward itself records, if any,
        // take the same state); clipping, Adam and the EMA below stay outside, in float32.
        const autocast::Guard precision(options.precision());
        const Tensor loss = model.loss(b.src, b.src_valid_len, dec_input, b.tgt, b.tgt_valid_len, options.label_smoothing());
        loss.backward();
        loss_value = loss.item();
        batch_tokens = sum_i64(b.tgt_valid_len);
      }
      const double grad_norm = nn::clip_grad_norm(params, max_norm);
      if (options.lr_anneal_to() > 0) optimizer.set_lr(annealed_lr());
      const double lr = optimizer.lr();
      optimizer.step();
      if (ema) {
        ema->update();
        st.ema_updates = ema->updates();
      }
      if (schedule) schedule->step();
      optimizer.zero_grad();  // now, not before the next backward: no gradient sits beside the next forward's activations
      ++st.step;
      st.batch_in_epoch = static_cast<std::int64_t>(i) + 1;
      if (st.batch_in_epoch == static_cast<std::int64_t>(batches.size())) {
        ++st.epoch;
        st.batch_in_epoch = 0;
        epoch_done = true;
      }
      if (options.max_seconds() > 0) {
        out_of_time = elapsed_before + seconds() >= options.max_seconds();
        if (world > 1) {  // the ranks' clocks differ: rank 0 decides for all, or one would wait forever
          char flag = out_of_time ? 1 : 0;
          dist::ibroadcast(&flag, 1, 0, "time limit").wait();
          out_of_time = flag != 0;
        }
      }

      StepRecord r;
      r.step = st.step;
      r.epoch = epoch;
      r.loss = loss_value;
      r.tokens = batch_tokens;
      r.grad_norm = grad_norm;
      r.lr = lr;
      r.elapsed_s = elapsed_before + seconds();
      st.last_loss = r.loss;
      ++result.steps_run;
      result.tokens += r.tokens;
      if (result.steps.size() < history) {
        result.steps.push_back(r);
      } else if (history > 0) {
        result.steps[next] = r;
        next = (next + 1) % history;
      }
      if (!std::isfinite(r.loss)) {
        csv.write(r);
        throw std::runtime_error("train: the loss became " + std::to_string(r.loss) + " at step " +
                                 std::to_string(r.step) + " (try a smaller --lr or --clip)");
      }
      // Validate at epoch ends, every validate_every steps, and after the run's last step.
      std::optional<ValidationRecord> v;
      if (options.dev() && st.last_validation_step != st.step &&
          (epoch_done || finished() || (options.validate_every() > 0 && st.step % options.validate_every() == 0)))
        v = validate(epoch);
      csv.write(r, v ? &*v : nullptr);
      const double run_s = seconds();
      const double done = static_cast<double>(st.step - first_step);
      double eta = done > 0 ? run_s / done * static_cast<double>(total_steps - st.step) : NAN;
      if (options.max_seconds() > 0) eta = std::min(eta, std::max(0.0, options.max_seconds() - r.elapsed_s));
      bar.update(epoch, total_epochs, st.step, total_steps, r.loss, run_s > 0 ? result.tokens / run_s : 0.0,
                 r.elapsed_s, eta, finished());
    }
    saved_at_end = false;
    if (epoch_done) {
      if (options.checkpoint_every() > 0 && st.epoch % options.checkpoint_every() == 0) {
        checkpoint();
        saved_at_end = true;
      }
    }
  }
  if (nothing_to_do && saved) {
    // Keep the checkpoint's own record (its options and time); rewrite it only to copy it elsewhere.
    // Its EMA fields follow the weights a copy holds (an average dropped by ema_decay 0 is gone).
    st = *saved;
    st.ema_decay = options.ema_decay();
    st.ema_updates = ema ? ema->updates() : 0;
    std::error_code ec;
    if (!lead) {
    } else if (!options.out_dir().empty() && !std::filesystem::equivalent(options.out_dir(), options.resume_from(), ec)) {
      save_to(options.out_dir());
      result.saved = true;
    } else if (!options.out_dir().empty()) {
      // No save follows to clean up after a run killed inside its final save.
      remove_stale_checkpoint_temporaries(options.out_dir());
    }
  } else {
    if (!saved_at_end) checkpoint();
    st.elapsed_s = elapsed_before + seconds();
  }
  csv.close();
  bar.finish();
  std::rotate(result.steps.begin(), result.steps.begin() + static_cast<std::ptrdiff_t>(next), result.steps.end());
  result.state = st;
  result.seconds = seconds();
  result.shards = shards;
  result.ranks = world;
  result.stopped_early = stopped_early();
  result.time_limit_reached = out_of_time && !(by_steps ? st.step >= options.steps() : st.epoch >= options.epochs());
  if (ddp) result.ddp = ddp->stats();
  if (ema) {
    // The model ends holding the average, as weights.npz: the model to translate with.
    ema->swap();
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
