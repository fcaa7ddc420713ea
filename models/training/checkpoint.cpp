// Checkpoint directories: JSON config, npz weights and optimizer state, vocabulary files, written
// into a temporary sibling directory and swapped into place.
#include "models/training/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "autograd/error_text.h"
#include "autograd/ops_elementwise.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "models/decoding/decode.h"
#include "models/translators/limits.h"
#include "models/translators/registry.h"
#include "nn/file_io.h"
#include "nn/optim.h"
#include "nn/serialize.h"

namespace tg::models {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kWeights = "weights.npz";
constexpr const char* kSrcVocab = "src_vocab.txt";
constexpr const char* kTgtVocab = "tgt_vocab.txt";
constexpr const char* kOptimizer = "optimizer.npz";
constexpr const char* kTraining = "training.json";
constexpr const char* kManifest = "manifest.json";
constexpr const char* kTokenizer = "tokenizer.model";
constexpr const char* kTrainingWeights = "training_weights.npz";
constexpr std::int64_t kManifestVersion = 1;

const std::set<std::string>& checkpoint_files() {
  static const std::set<std::string> files{kConfig,    kWeights,  kSrcVocab,  kTgtVocab,       kOptimizer,
                                           kTraining, kManifest, kTokenizer, kTrainingWeights};
  return files;
}

std::function<void(const std::string&)>& write_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

bool& exchange_disabled() {
  static bool disabled = false;
  return disabled;
}

std::string errno_text() { return std::strerror(errno); }

/// The size limit of each checkpoint file (nn/file_io.h; docs/reliability.md says why each).
std::uint64_t size_limit(const std::string& name) {
  namespace lim = nn::io::limits;
  if (name == kSrcVocab || name == kTgtVocab) return lim::kVocabulary;
  if (name == kTokenizer) return lim::kTokenizerModel;
  if (name == kWeights || name == kOptimizer || name == kTrainingWeights) return lim::kArchive;
  return lim::kSmallJson;  // config.json, training.json, manifest.json
}

/// A checkpoint's JSON file: a regular file within its limit, read whole (errors name the path).
std::string read_text(const fs::path& path) {
  return nn::io::read_file(path, size_limit(path.filename().string()));
}

void fsync_directory(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path.string() + ": cannot open for fsync (" + errno_text() + ")");
  const int rc = ::fsync(fd);
  const std::string err = rc != 0 ? errno_text() : "";
  ::close(fd);
  if (rc != 0) throw std::runtime_error(path.string() + ": fsync failed (" + err + ")");
}

/// Lower-case hex SHA-256 of a file's bytes (OpenSSL libcrypto), read in 1 MiB chunks. Only a
/// regular file within the size limit of its name is read: a FIFO put at a checkpoint file's name
/// is refused at once (it would block the open, or the read, forever).
std::string sha256_file(const fs::path& path) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error(path.string() + ": cannot start a SHA-256 digest");
  nn::io::read_chunks(path, size_limit(path.filename().string()), [&](const char* data, std::size_t n) {
    if (EVP_DigestUpdate(ctx.get(), data, n) != 1) throw std::runtime_error(path.string() + ": SHA-256 digest failed");
  });
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) throw std::runtime_error(path.string() + ": SHA-256 digest failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

/// Removes a directory that holds only checkpoint files (never anything else).
void remove_checkpoint_dir(const fs::path& dir) {
  std::error_code ec;
  for (const auto& name : checkpoint_files()) fs::remove(dir / name, ec);
  // Module::save / Optimizer::save write "<file>.tmp-XXXXXX" first; a failure can leave one.
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const auto& file : checkpoint_files())
      if (name.rfind(file + ".tmp-", 0) == 0) fs::remove(entry.path(), ec);
  }
  fs::remove(dir, ec);  // fails (harmlessly) if anything unexpected is left
}

/// A checkpoint file, or a partial one that Module::save / Optimizer::save left ("<file>.tmp-XXXXXX").
bool checkpoint_file_or_partial(const std::string& name) {
  if (checkpoint_files().count(name)) return true;
  for (const auto& file : checkpoint_files())
    if (name.rfind(file + ".tmp-", 0) == 0) return true;
  return false;
}

/// True if `name` is "<base>.tmp-XXXXXX" (a save's new directory) or "<base>.old-XXXXXX" (the
/// previous checkpoint moved aside where there is no atomic exchange), with six characters of
/// mkdtemp's alphabet.
bool is_temporary_of(const std::string& name, const std::string& base) {
  for (const char* kind : {".tmp-", ".old-"}) {
    const std::string prefix = base + kind;
    if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
    bool alnum = true;
    for (std::size_t i = prefix.size(); i < name.size(); ++i) alnum = alnum && std::isalnum(static_cast<unsigned char>(name[i]));
    if (alnum) return true;
  }
  return false;
}

/// Removes the `dir.tmp-XXXXXX` and `dir.old-XXXXXX` directories that killed saves of `dir` left,
/// when they hold only checkpoint files (a directory with anything else in it is left whole). Best effort: errors are
/// ignored, the save itself has already succeeded.
void remove_stale_temporaries(const fs::path& dir, const fs::path& parent) {
  std::error_code ec;
  const std::string base = dir.filename().string();
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    if (!is_temporary_of(entry.path().filename().string(), base)) continue;
    if (entry.is_symlink(ec) || !entry.is_directory(ec)) continue;
    bool only_ours = true;
    for (const auto& inner : fs::directory_iterator(entry.path(), ec))
      if (!inner.is_regular_file(ec) || inner.is_symlink(ec) ||
          !checkpoint_file_or_partial(inner.path().filename().string()))
        only_ours = false;
    if (only_ours && !ec) stale.push_back(entry.path());
  }
  for (const auto& path : stale) remove_checkpoint_dir(path);
}

/// True if `dir` is empty or holds only checkpoint files.
bool replaceable(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (!entry.is_regular_file() || checkpoint_files().count(entry.path().filename().string()) == 0) return false;
  return true;
}

// ---- JSON field access ------------------------------------------------------------------

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw std::runtime_error(source + ": " + what);
}

std::int64_t get_int(const json& j, const std::string& key, const std::string& source) {
  const json& v = j.at(key);
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    bad(source, "'" + key + "' = " + elide(v.dump()) + " does not fit in a 64-bit signed integer");
  if (v.is_number_integer()) return v.get<std::int64_t>();
  bad(source, "'" + key + "' must be an integer, got " + elide(v.dump()));
}

std::uint64_t get_u64(const json& j, const std::string& key, const std::string& source) {
  const json& v = j.at(key);
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0)) return v.get<std::uint64_t>();
  bad(source, "'" + key + "' must be a non-negative integer, got " + elide(v.dump()));
}

double get_double(const json& j, const std::string& key, const std::string& source) {
  const json& v = j.at(key);
  if (v.is_number()) return v.get<double>();
  bad(source, "'" + key + "' must be a number, got " + elide(v.dump()));
}

std::string get_string(const json& j, const std::string& key, const std::string& source) {
  const json& v = j.at(key);
  if (v.is_string()) return v.get<std::string>();
  bad(source, "'" + key + "' must be a string, got " + elide(v.dump()));
}

bool get_bool(const json& j, const std::string& key, const std::string& source) {
  const json& v = j.at(key);
  if (v.is_boolean()) return v.get<bool>();
  bad(source, "'" + key + "' must be true or false, got " + elide(v.dump()));
}

json parse_object(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, or out_of_range for a number too large for a double ("1e999").
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 3: ...".
    std::string msg = e.what();
    const auto pos = msg.find("] ");
    bad(source, "invalid JSON: " + elide(pos == std::string::npos ? msg : msg.substr(pos + 2), 120));
  }
  if (!j.is_object()) bad(source, "expected a JSON object");
  return j;
}

void check_known_keys(const json& j, const std::set<std::string>& known, const std::string& source) {
  for (const auto& [key, value] : j.items()) {
    if (known.count(key)) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    bad(source, "unknown key '" + elide(key) + "'\n  known keys: " + list);
  }
}

/// The ranges training_from_json accepts, checked on a state: by the loader after parsing, and by
/// training_to_json before writing, so a checkpoint never holds a training.json its own loader
/// refuses. A NaN best_dev_* means "no validation yet" (the key is then absent).
void check_training_state(const TrainingState& s, const std::string& source) {
  auto check_count = [&](const char* key, std::int64_t v, std::int64_t hi) {
    if (v < 0 || v > hi)
      bad(source, std::string(key) + " = " + std::to_string(v) + " is out of range [0, " + std::to_string(hi) + "]");
  };
  check_count("step", s.step, limits::kMaxCount);
  check_count("epoch", s.epoch, limits::kMaxCount);
  check_count("batch_in_epoch", s.batch_in_epoch, limits::kMaxCount);
  check_count("batch_size", s.batch_size, limits::kMaxBatchSize);
  check_count("warmup_steps", s.warmup_steps, limits::kMaxCount);
  check_count("lr_anneal_to", s.lr_anneal_to, limits::kMaxCount);
  if ((s.lr_anneal_from != 0 || s.lr_anneal_to != 0) && !(s.lr_anneal_from >= 0 && s.lr_anneal_from < s.lr_anneal_to))
    bad(source, "lr_anneal_from = " + std::to_string(s.lr_anneal_from) + " is out of range [0, lr_anneal_to = " +
                    std::to_string(s.lr_anneal_to) + ")");
  check_count("batch_tokens", s.batch_tokens, limits::kMaxCount);
  check_count("validations", s.validations, limits::kMaxCount);
  check_count("last_validation_step", s.last_validation_step, s.step);
  check_count("best_step", s.best_step, s.step);
  check_count("bad_validations", s.bad_validations, s.validations);
  check_count("lr_bad_validations", s.lr_bad_validations, s.bad_validations);
  check_count("patience", s.patience, limits::kMaxCount);
  check_count("lr_patience", s.lr_patience, limits::kMaxCount);
  check_count("validate_every", s.validate_every, limits::kMaxCount);
  check_count("ema_updates", s.ema_updates, s.step);
  if (!(s.ema_decay >= 0 && s.ema_decay < 1))
    bad(source, "ema_decay = " + std::to_string(s.ema_decay) + " is out of range [0, 1)");
  if (s.select_by != "bleu" && s.select_by != "loss")
    bad(source, "select_by = '" + elide(s.select_by) + "' is not 'bleu' or 'loss'");
  if (s.precision != autocast::Precision::f32 && s.precision != autocast::Precision::bf16)
    bad(source, "precision = " + std::to_string(static_cast<int>(s.precision)) + " is not fp32 or bf16");
  if (!std::isnan(s.best_dev_bleu) && !(s.best_dev_bleu >= 0 && s.best_dev_bleu <= 100))
    bad(source, "best_dev_bleu = " + std::to_string(s.best_dev_bleu) + " is out of range [0, 100]");
  if (!std::isnan(s.best_dev_loss) && !(s.best_dev_loss >= 0 && std::isfinite(s.best_dev_loss)))
    bad(source, "best_dev_loss = " + std::to_string(s.best_dev_loss) + " must be finite and >= 0");
  if (!(s.lr_scale > 0 && s.lr_scale <= 1))
    bad(source, "lr_scale = " + std::to_string(s.lr_scale) + " is out of range (0, 1]");
  if (!(s.lr_decay > 0 && s.lr_decay <= 1))
    bad(source, "lr_decay = " + std::to_string(s.lr_decay) + " is out of range (0, 1]");
  if (s.shards < 1 || s.shards > limits::kMaxBatchSize)
    bad(source, "shards = " + std::to_string(s.shards) + " is out of range [1, " + std::to_string(limits::kMaxBatchSize) + "]");
  auto check_real = [&](const char* key, double v) {  // NaN fails too
    if (!(v >= 0 && std::isfinite(v))) bad(source, std::string(key) + " = " + std::to_string(v) + " must be finite and >= 0");
  };
  check_real("elapsed_s", s.elapsed_s);
  check_real("lr", s.lr);
  check_real("clip", s.clip);
  if (!(s.label_smoothing >= 0 && s.label_smoothing < 1))
    bad(source, "label_smoothing = " + std::to_string(s.label_smoothing) + " is out of range [0, 1)");
  const RunRecord& r = s.run;
  for (const auto& [key, text] : {std::pair<const char*, const std::string*>{"data", &r.data}, {"task", &r.task},
                                  {"subword_type", &r.subword_type}, {"dev", &r.dev}, {"best", &r.best}})
    if (find_invalid_utf8(*text) != std::string::npos)  // JSON strings are UTF-8: nlohmann refuses to write others
      bad(source, std::string("run.") + key + " holds invalid UTF-8 (not representable in JSON)");
  for (const auto& [key, v] : {std::pair<const char*, std::optional<std::int64_t>>{"num_examples", r.num_examples},
                               {"min_freq", r.min_freq}, {"dev_bleu_pairs", r.dev_bleu_pairs}})
    if (v && *v < 0) bad(source, std::string("run.") + key + " = " + std::to_string(*v) + " must be >= 0");
  if (r.subword < 0) bad(source, "run.subword = " + std::to_string(r.subword) + " must be >= 0");
  if (r.dev_beam && *r.dev_beam < 1) bad(source, "run.dev_beam = " + std::to_string(*r.dev_beam) + " must be >= 1");
  for (const auto& [key, v] : {std::pair<const char*, std::optional<std::int64_t>>{"steps", r.steps}, {"epochs", r.epochs}})
    if (v && *v < 1) bad(source, std::string("run.") + key + " = " + std::to_string(*v) + " is not a target (must be >= 1)");
  if (r.holdout && !(*r.holdout >= 0 && std::isfinite(*r.holdout)))
    bad(source, "run.holdout = " + std::to_string(*r.holdout) + " must be finite and >= 0");
}

// The run record's fields: strings, whole numbers, the holdout (a number) and reverse (a bool).
// One table per kind names each field once, for the writer and both readers.
template <class T>
struct RunField {
  const char* key;
  T RunRecord::*member;
};
constexpr RunField<std::string> kRunStrings[] = {
    {"data", &RunRecord::data}, {"task", &RunRecord::task}, {"subword_type", &RunRecord::subword_type},
    {"dev", &RunRecord::dev},   {"best", &RunRecord::best}};
constexpr RunField<std::optional<std::int64_t>> kRunCounts[] = {
    {"num_examples", &RunRecord::num_examples}, {"task_seed", &RunRecord::task_seed},
    {"min_len", &RunRecord::min_len},           {"max_len", &RunRecord::max_len},
    {"min_freq", &RunRecord::min_freq},         {"steps", &RunRecord::steps},
    {"epochs", &RunRecord::epochs},             {"dev_bleu_pairs", &RunRecord::dev_bleu_pairs},
    {"dev_beam", &RunRecord::dev_beam}};

/// The field of `r` that `key` names in `table`, or null.
template <class T, std::size_t N>
T* run_field(const RunField<T> (&table)[N], RunRecord& r, const std::string& key) {
  for (const RunField<T>& f : table)
    if (key == f.key) return &(r.*f.member);
  return nullptr;
}
std::string* run_string(RunRecord& r, const std::string& key) { return run_field(kRunStrings, r, key); }
std::optional<std::int64_t>* run_count(RunRecord& r, const std::string& key) { return run_field(kRunCounts, r, key); }

json run_to_json(RunRecord r) {
  json j = json::object();
  for (const auto& f : kRunStrings)
    if (!(r.*f.member).empty()) j[f.key] = r.*f.member;
  for (const auto& f : kRunCounts)
    if (r.*f.member) j[f.key] = *(r.*f.member);
  if (r.holdout) j["holdout"] = *r.holdout;
  if (r.reverse) j["reverse"] = true;
  if (r.subword > 0) j["subword"] = r.subword;
  return j;
}

RunRecord run_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) bad(source, "'run' must be an object");
  RunRecord r;
  for (const auto& [key, v] : j.items()) {
    const std::string where = "run." + key;
    if (std::string* text = run_string(r, key)) {
      if (!v.is_string()) bad(source, where + " must be a string, got " + elide(v.dump()));
      *text = v.get<std::string>();
    } else if (auto* count = run_count(r, key); count || key == "subword") {
      if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)))
        bad(source, where + " must be a 64-bit integer, got " + elide(v.dump()));
      if (count) *count = v.get<std::int64_t>();
      else r.subword = v.get<std::int64_t>();
    } else if (key == "holdout") {
      if (!v.is_number()) bad(source, where + " must be a number, got " + elide(v.dump()));
      r.holdout = v.get<double>();
    } else if (key == "reverse") {
      if (!v.is_boolean()) bad(source, where + " must be true or false, got " + elide(v.dump()));
      r.reverse = v.get<bool>();
    } else {
      bad(source, "unknown key '" + elide(where) + "'");
    }
  }
  return r;
}

/// A training.json from before RunRecord: "notes", strings only. The notes of the record's names
/// fill it (numbers parsed whole from their text, as the CLI read them); others are ignored.
RunRecord run_from_notes(const json& notes, const std::string& source) {
  if (!notes.is_object()) bad(source, "'notes' must be an object of strings");
  RunRecord r;
  for (const auto& [key, v] : notes.items()) {
    if (!v.is_string()) bad(source, "notes '" + elide(key) + "' must be a string");
    const std::string text = v.get<std::string>();
    auto whole = [&] {
      std::int64_t value = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc() || end != text.data() + text.size())
        bad(source, "note '" + elide(key) + "' = '" + elide(text) + "' is not a whole number");
      return value;
    };
    if (std::string* field = run_string(r, key)) {
      *field = text;
    } else if (auto* count = run_count(r, key)) {
      *count = whole();
    } else if (key == "subword") {
      r.subword = whole();
    } else if (key == "reverse") {
      r.reverse = text == "1";
    } else if (key == "holdout") {
      double value = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc() || end != text.data() + text.size())
        bad(source, "note 'holdout' = '" + elide(text) + "' is not a number");
      r.holdout = value;
    }
  }
  return r;
}

}  // namespace

std::string training_to_json(const TrainingState& s) {
  try {
    check_training_state(s, "training.json");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (not saved: its loader would refuse it)");
  }
  json j;
  j["step"] = s.step;
  j["epoch"] = s.epoch;
  j["batch_in_epoch"] = s.batch_in_epoch;
  j["elapsed_s"] = s.elapsed_s;
  if (std::isfinite(s.last_loss)) j["last_loss"] = s.last_loss;  // JSON has no NaN: absent = none yet
  j["seed"] = s.seed;
  j["batch_size"] = s.batch_size;
  j["lr"] = s.lr;
  j["clip"] = s.clip;
  j["warmup_steps"] = s.warmup_steps;
  if (s.lr_anneal_to > 0) {  // absent = off, so files of runs without it read as before
    j["lr_anneal_from"] = s.lr_anneal_from;
    j["lr_anneal_to"] = s.lr_anneal_to;
  }
  j["label_smoothing"] = s.label_smoothing;
  j["shuffle"] = s.shuffle;
  j["shards"] = s.shards;
  j["batch_tokens"] = s.batch_tokens;
  j["validations"] = s.validations;
  j["last_validation_step"] = s.last_validation_step;
  j["best_step"] = s.best_step;
  if (std::isfinite(s.best_dev_bleu)) j["best_dev_bleu"] = s.best_dev_bleu;  // absent = no validation yet
  if (std::isfinite(s.best_dev_loss)) j["best_dev_loss"] = s.best_dev_loss;
  j["bad_validations"] = s.bad_validations;
  j["lr_bad_validations"] = s.lr_bad_validations;
  j["lr_scale"] = s.lr_scale;
  j["select_by"] = s.select_by;
  j["patience"] = s.patience;
  j["lr_decay"] = s.lr_decay;
  j["lr_patience"] = s.lr_patience;
  j["validate_every"] = s.validate_every;
  j["ema_decay"] = s.ema_decay;
  j["ema_updates"] = s.ema_updates;
  j["precision"] = precision_name(s.precision);
  j["run"] = run_to_json(s.run);
  std::string text = j.dump(2) + "\n";
  if (text.size() > nn::io::limits::kSmallJson)  // only the run record's strings can make it this large
    throw std::runtime_error("training.json: " + std::to_string(text.size()) +
                             " bytes, above the limit of 16 MiB its loader reads (not saved)");
  return text;
}

TrainingState training_from_json(const std::string& text, const std::string& source) {
  const json j = parse_object(text, source);
  check_known_keys(j, {"step", "epoch", "batch_in_epoch", "elapsed_s", "last_loss", "seed", "batch_size", "lr",
                       "clip", "warmup_steps", "lr_anneal_from", "lr_anneal_to", "label_smoothing", "shuffle", "shards", "batch_tokens",
                       "validations", "last_validation_step", "best_step", "best_dev_bleu", "best_dev_loss",
                       "bad_validations", "lr_bad_validations", "lr_scale", "select_by", "patience", "lr_decay",
                       "lr_patience", "validate_every", "ema_decay", "ema_updates", "precision", "run", "notes"},
                   source);
  TrainingState s;
  if (j.contains("step")) s.step = get_int(j, "step", source);
  if (j.contains("epoch")) s.epoch = get_int(j, "epoch", source);
  if (j.contains("batch_in_epoch")) s.batch_in_epoch = get_int(j, "batch_in_epoch", source);
  if (j.contains("elapsed_s")) s.elapsed_s = get_double(j, "elapsed_s", source);
  if (j.contains("last_loss")) s.last_loss = get_double(j, "last_loss", source);
  if (j.contains("seed")) s.seed = get_u64(j, "seed", source);
  if (j.contains("batch_size")) s.batch_size = get_int(j, "batch_size", source);
  if (j.contains("lr")) s.lr = get_double(j, "lr", source);
  if (j.contains("clip")) s.clip = get_double(j, "clip", source);
  if (j.contains("warmup_steps")) s.warmup_steps = get_int(j, "warmup_steps", source);
  if (j.contains("lr_anneal_from")) s.lr_anneal_from = get_int(j, "lr_anneal_from", source);
  if (j.contains("lr_anneal_to")) s.lr_anneal_to = get_int(j, "lr_anneal_to", source);
  if (j.contains("label_smoothing")) s.label_smoothing = get_double(j, "label_smoothing", source);
  if (j.contains("shuffle")) s.shuffle = get_bool(j, "shuffle", source);
  if (j.contains("shards")) s.shards = get_int(j, "shards", source);
  if (j.contains("batch_tokens")) s.batch_tokens = get_int(j, "batch_tokens", source);
  if (j.contains("validations")) s.validations = get_int(j, "validations", source);
  if (j.contains("last_validation_step")) s.last_validation_step = get_int(j, "last_validation_step", source);
  if (j.contains("best_step")) s.best_step = get_int(j, "best_step", source);
  if (j.contains("best_dev_bleu")) s.best_dev_bleu = get_double(j, "best_dev_bleu", source);
  if (j.contains("best_dev_loss")) s.best_dev_loss = get_double(j, "best_dev_loss", source);
  if (j.contains("bad_validations")) s.bad_validations = get_int(j, "bad_validations", source);
  if (j.contains("lr_bad_validations")) s.lr_bad_validations = get_int(j, "lr_bad_validations", source);
  if (j.contains("lr_scale")) s.lr_scale = get_double(j, "lr_scale", source);
  if (j.contains("select_by")) s.select_by = get_string(j, "select_by", source);
  if (j.contains("patience")) s.patience = get_int(j, "patience", source);
  if (j.contains("lr_decay")) s.lr_decay = get_double(j, "lr_decay", source);
  if (j.contains("lr_patience")) s.lr_patience = get_int(j, "lr_patience", source);
  if (j.contains("validate_every")) s.validate_every = get_int(j, "validate_every", source);
  if (j.contains("ema_decay")) s.ema_decay = get_double(j, "ema_decay", source);
  if (j.contains("ema_updates")) s.ema_updates = get_int(j, "ema_updates", source);
  if (j.contains("precision")) {  // absent: a run from before mixed precision, float32
    const std::string p = get_string(j, "precision", source);
    if (p == "fp32") s.precision = autocast::Precision::f32;
    else if (p == "bf16") s.precision = autocast::Precision::bf16;
    else bad(source, "precision = '" + elide(p) + "' is not 'fp32' or 'bf16'");
  }
  if (j.contains("run") && j.contains("notes")) bad(source, "both 'run' and 'notes' (the older form of 'run')");
  if (j.contains("run")) s.run = run_from_json(j["run"], source);
  if (j.contains("notes")) s.run = run_from_notes(j["notes"], source);  // written before RunRecord
  check_training_state(s, source);
  return s;
}

namespace {

std::string manifest_to_json(const std::map<std::string, std::string>& digests) {
  json j;
  j["format_version"] = kManifestVersion;
  j["sha256"] = digests;
  return j.dump(2) + "\n";
}

/// manifest.json's digests, or nullopt if the checkpoint has none (older format).
std::optional<std::map<std::string, std::string>> read_manifest(const fs::path& dir) {
  const fs::path path = dir / kManifest;
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  const std::string source = path.string();
  const json j = parse_object(read_text(path), source);
  check_known_keys(j, {"format_version", "sha256"}, source);
  if (!j.contains("format_version") || !j.contains("sha256")) bad(source, "needs 'format_version' and 'sha256'");
  const std::int64_t version = get_int(j, "format_version", source);
  if (version != kManifestVersion)
    bad(source, "format_version " + std::to_string(version) + " is not the one this build reads (" +
                    std::to_string(kManifestVersion) + ")");
  if (!j["sha256"].is_object()) bad(source, "'sha256' must be an object of file name to hex digest");
  std::map<std::string, std::string> digests;
  for (const auto& [file, digest] : j["sha256"].items()) {
    if (file == kManifest || checkpoint_files().count(file) == 0) bad(source, "lists an unknown file '" + elide(file) + "'");
    if (!digest.is_string()) bad(source, "sha256 '" + elide(file) + "' must be a string");
    digests[file] = digest.get<std::string>();
  }
  return digests;
}

[[noreturn]] void manifest_mismatch(const fs::path& dir, const std::string& what) {
  throw std::runtime_error("checkpoint " + dir.string() + ": " + what);
}

/// Checks `file` (one name, or every checkpoint file when empty) against manifest.json. Without a
/// manifest (older format) nothing is checked; `note` then says so on stderr, in one line.
void verify_manifest(const fs::path& dir, const std::string& file, bool note) {
  const auto digests = read_manifest(dir);
  if (!digests) {
    if (note) std::fprintf(stderr, "checkpoint %s: no manifest.json (older format), files not verified\n", dir.c_str());
    return;
  }
  std::error_code ec;
  for (const auto& name : checkpoint_files()) {
    if (name == kManifest || (!file.empty() && name != file)) continue;
    const bool present = fs::exists(dir / name, ec);
    const auto it = digests->find(name);
    if (it == digests->end()) {
      if (present) manifest_mismatch(dir, name + " is not listed in manifest.json");
      continue;
    }
    if (!present) manifest_mismatch(dir, name + " is listed in manifest.json but missing");
    if (sha256_file(dir / name) != it->second)
      manifest_mismatch(dir, name + " does not match its SHA-256 in manifest.json");
  }
}

}  // namespace

Checkpoint average_checkpoints(const std::vector<std::string>& dirs) {
  if (dirs.empty()) throw std::runtime_error("average_checkpoints: no checkpoints given");
  Checkpoint first = load_checkpoint(dirs[0]);
  const ModelConfig architecture = first.config.without_dropout();
  NoGradGuard no_grad;
  const nn::NamedTensors params = first.model->named_parameters();
  std::vector<Tensor> sums;
  for (const auto& [name, p] : params) sums.push_back(p.to(DType::f64));
  for (std::size_t i = 1; i < dirs.size(); ++i) {
    const Checkpoint other = load_checkpoint(dirs[i]);
    auto differ = [&](const std::string& what) {
      throw std::runtime_error("average_checkpoints: " + dirs[i] + " is not a checkpoint of " + dirs[0] +
                               "'s model: its " + what + " differs");
    };
    if (other.config.without_dropout() != architecture) differ("config.json (architecture)");
    if (!(other.src_vocab == first.src_vocab)) differ(kSrcVocab);
    if (!(other.tgt_vocab == first.tgt_vocab)) differ(kTgtVocab);
    const bool same_tokenizer = other.subword.has_value() == first.subword.has_value() &&
                                (!other.subword || other.subword->bytes() == first.subword->bytes());
    if (!same_tokenizer) differ(kTokenizer);
    const nn::NamedTensors others = other.model->named_parameters();
    for (std::size_t k = 0; k < params.size(); ++k) sums[k] = sums[k] + others[k].second.to(DType::f64);
  }
  const double scale = 1.0 / static_cast<double>(dirs.size());
  for (std::size_t k = 0; k < params.size(); ++k) {
    Tensor p = params[k].second;
    p.copy_((sums[k] * scale).to(p.dtype()));
  }
  first.dir.clear();
  first.training.reset();
  first.has_optimizer = false;
  first.has_training_weights = false;  // weights.npz (the averaged weights of EMA runs) were averaged
  return first;
}

namespace detail {
void set_checkpoint_write_hook(std::function<void(const std::string& file)> hook) { write_hook() = std::move(hook); }
void set_checkpoint_exchange_disabled(bool disabled) { exchange_disabled() = disabled; }
}  // namespace detail

std::string config_to_json(const ModelConfig& c) {
  json j;
  j["model"] = std::string(c.model.name());
  j["src_vocab"] = c.src_vocab;
  j["tgt_vocab"] = c.tgt_vocab;
  j["embed_size"] = c.embed_size;
  j["num_hiddens"] = c.num_hiddens;
  j["num_layers"] = c.num_layers;
  j["dropout"] = c.dropout;
  j["embedding_dropout"] = c.embedding_dropout;
  j["readout_dropout"] = c.readout_dropout;
  j["num_steps"] = c.num_steps;
  j["readout"] = std::string(to_string(c.readout));
  j["maxout_units"] = c.maxout_units;
  j["attention"] = std::string(to_string(c.attention));
  j["ablation"] = std::string(to_string(c.ablation));
  j["num_heads"] = c.num_heads;
  j["norm_first"] = c.norm_first;
  j["tie_embeddings"] = c.tie_embeddings;
  j["attention_layer"] = c.attention_layer;
  j["attention_head"] = c.attention_head;
  return j.dump(2) + "\n";
}

ModelConfig config_from_json(const std::string& text, const std::string& source) {
  const json j = parse_object(text, source);
  check_known_keys(j,
                   {"model", "src_vocab", "tgt_vocab", "embed_size", "num_hiddens", "num_layers", "dropout",
                    "embedding_dropout", "readout_dropout", "num_steps", "readout", "maxout_units", "attention",
                    "ablation", "num_heads", "norm_first", "tie_embeddings", "attention_layer", "attention_head"},
                   source);
  // Typed fields are parsed here, once; an unknown value names the field and the allowed ones.
  auto typed = [&](const char* key, auto parse) {
    const std::string text = get_string(j, key, source);
    try {
      // Appended piecewise: GCC 12 warns falsely (-Wrestrict, its bug 105651) on "'" + std::string(key).
      std::string where = "'";
      where.append(key).append("'");
      return parse(text, where);
    } catch (const std::invalid_argument& e) {
      bad(source, e.what());
    }
  };
  ModelConfig c;
  if (j.contains("model"))
    c.model = typed("model", [](const std::string& text, const std::string& where) {
      try {
        return ModelKind(text);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(where + ": " + e.what());
      }
    });
  if (j.contains("src_vocab")) c.src_vocab = get_int(j, "src_vocab", source);
  if (j.contains("tgt_vocab")) c.tgt_vocab = get_int(j, "tgt_vocab", source);
  if (j.contains("embed_size")) c.embed_size = get_int(j, "embed_size", source);
  if (j.contains("num_hiddens")) c.num_hiddens = get_int(j, "num_hiddens", source);
  if (j.contains("num_layers")) c.num_layers = get_int(j, "num_layers", source);
  if (j.contains("dropout")) c.dropout = get_double(j, "dropout", source);
  if (j.contains("embedding_dropout")) c.embedding_dropout = get_double(j, "embedding_dropout", source);
  if (j.contains("readout_dropout")) c.readout_dropout = get_double(j, "readout_dropout", source);
  if (j.contains("num_steps")) c.num_steps = get_int(j, "num_steps", source);
  if (j.contains("readout")) c.readout = typed("readout", parse_option<Readout>);
  if (j.contains("maxout_units")) c.maxout_units = get_int(j, "maxout_units", source);
  if (j.contains("attention")) c.attention = typed("attention", parse_option<AttentionScore>);
  if (j.contains("ablation")) c.ablation = typed("ablation", parse_option<Ablation>);
  // The transformer's fields; configs written before it existed leave them at their defaults.
  if (j.contains("num_heads")) c.num_heads = get_int(j, "num_heads", source);
  if (j.contains("norm_first")) c.norm_first = get_bool(j, "norm_first", source);
  if (j.contains("tie_embeddings")) c.tie_embeddings = get_bool(j, "tie_embeddings", source);
  if (j.contains("attention_layer")) c.attention_layer = get_int(j, "attention_layer", source);
  if (j.contains("attention_head")) c.attention_head = get_int(j, "attention_head", source);
  // Every field range-checked (models/translators/limits.h) before any size is used. Vocabulary
  // sizes may be left out (the vocabulary files give them): validate with stand-ins.
  ModelConfig check = c;
  if (!j.contains("src_vocab")) check.src_vocab = limits::kMinVocab;
  if (!j.contains("tgt_vocab")) check.tgt_vocab = limits::kMinVocab;
  try {
    check.validate(source);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());  // already "SOURCE: field = value is out of range [lo, hi]"
  }
  return c;
}

void save_checkpoint(const std::string& dir_arg, const Seq2Seq& model, const Vocab& src_vocab,
                     const Vocab& tgt_vocab, const nn::Optimizer* optimizer, const TrainingState* training,
                     const SubwordModel* subword, const nn::NamedTensors* training_weights) {
  fs::path dir = fs::path(dir_arg).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "ckpt/" -> "ckpt"
  if (dir.empty() || dir == "." || dir == "..") throw std::runtime_error(dir_arg + ": not a usable checkpoint path");
  if (model.config().src_vocab != src_vocab.size() || model.config().tgt_vocab != tgt_vocab.size())
    throw std::runtime_error(dir_arg + ": the model's vocabulary sizes (" + std::to_string(model.config().src_vocab) +
                             ", " + std::to_string(model.config().tgt_vocab) + ") do not match the vocabularies (" +
                             std::to_string(src_vocab.size()) + ", " + std::to_string(tgt_vocab.size()) + ")");
  check_checkpoint_destination(dir_arg);
  // The JSON texts first: a training state its loader would refuse is refused here, before
  // anything is written.
  const std::string config_text = config_to_json(model.config());
  const std::string training_text = training ? training_to_json(*training) : std::string();
  std::error_code ec;
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec) throw std::runtime_error(parent.string() + ": cannot create directory (" + ec.message() + ")");

  std::string tmpl = dir.string() + ".tmp-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error(dir.string() + ": cannot create a temporary directory beside it (" + errno_text() + ")");
  const fs::path tmp(tmpl);
  try {
    // Every writer below (write_text, save_npz, Vocab::save, SubwordModel::save) fsyncs its file.
    auto done = [&](const char* file) {
      if (write_hook()) write_hook()(file);
    };
    write_text(tmp / kConfig, config_text);
    done(kConfig);
    model.save((tmp / kWeights).string());
    done(kWeights);
    src_vocab.save((tmp / kSrcVocab).string());
    done(kSrcVocab);
    tgt_vocab.save((tmp / kTgtVocab).string());
    done(kTgtVocab);
    if (optimizer) {
      optimizer->save((tmp / kOptimizer).string());
      done(kOptimizer);
    }
    if (training) {
      write_text(tmp / kTraining, training_text);
      done(kTraining);
    }
    if (subword) {
      subword->save((tmp / kTokenizer).string());
      done(kTokenizer);
    }
    if (training_weights) {
      nn::save_npz((tmp / kTrainingWeights).string(), *training_weights);
      done(kTrainingWeights);
    }
    // Last, so a manifest exists only beside complete files: the digests of everything above.
    std::map<std::string, std::string> digests;
    for (const auto& entry : fs::directory_iterator(tmp)) {
      const std::string name = entry.path().filename().string();
      if (checkpoint_files().count(name)) digests[name] = sha256_file(entry.path());
    }
    write_text(tmp / kManifest, manifest_to_json(digests));
    done(kManifest);
    fsync_directory(tmp);

    if (!fs::exists(dir)) {
      if (std::rename(tmp.c_str(), dir.c_str()) != 0)
        throw std::runtime_error(dir.string() + ": cannot rename the new checkpoint into place (" + errno_text() + ")");
    } else if (!exchange_disabled() &&
               ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
      remove_checkpoint_dir(tmp);  // now holds the previous checkpoint
    } else {
      // No atomic exchange on this file system: move the old one aside, then the new one in.
      const fs::path old = dir.string() + ".old-" + tmp.string().substr(tmp.string().size() - 6);
      if (std::rename(dir.c_str(), old.c_str()) != 0)
        throw std::runtime_error(dir.string() + ": cannot move the previous checkpoint aside (" + errno_text() + ")");
      if (std::rename(tmp.c_str(), dir.c_str()) != 0) {
        const std::string err = errno_text();
        std::rename(old.c_str(), dir.c_str());
        throw std::runtime_error(dir.string() + ": cannot rename the new checkpoint into place (" + err + ")");
      }
      remove_checkpoint_dir(old);
    }
    fsync_directory(parent);
  } catch (...) {
    if (fs::exists(tmp)) remove_checkpoint_dir(tmp);
    throw;
  }
  remove_stale_temporaries(dir, parent);
}

void check_checkpoint_destination(const std::string& dir_arg) {
  const fs::path dir(dir_arg);
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) throw std::runtime_error(dir.string() + ": exists and is not a directory");
    if (!replaceable(dir))
      throw std::runtime_error(dir.string() +
                               ": exists and is not a checkpoint (it holds other files); refusing to replace it");
    return;
  }
  for (fs::path p = dir.parent_path(); !p.empty(); p = p.parent_path()) {
    if (fs::exists(p, ec)) {
      if (!fs::is_directory(p, ec))
        throw std::runtime_error(dir.string() + ": cannot create it, " + p.string() + " is not a directory");
      return;
    }
    if (p == p.parent_path()) return;
  }
}

void remove_stale_checkpoint_temporaries(const std::string& dir_arg) {
  fs::path dir = fs::path(dir_arg).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  if (dir.empty() || dir == "." || dir == "..") return;
  remove_stale_temporaries(dir, dir.has_parent_path() ? dir.parent_path() : fs::path("."));
}

Checkpoint load_checkpoint(const std::string& dir_arg) {
  const fs::path dir(dir_arg);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw std::runtime_error(dir_arg + ": not a checkpoint directory (" +
                             (fs::exists(dir, ec) ? "not a directory" : "no such directory") + ")");
  if (!fs::exists(dir / "config.json", ec) && !fs::exists(dir / kManifest, ec))
    throw std::runtime_error(dir_arg + ": not a checkpoint (no config.json or manifest.json)");
  verify_manifest(dir, "", true);
  Checkpoint ck;
  ck.dir = dir_arg;
  const fs::path config_path = dir / kConfig;
  ck.config = config_from_json(read_text(config_path), config_path.string());
  ck.src_vocab = Vocab::load((dir / kSrcVocab).string());
  ck.tgt_vocab = Vocab::load((dir / kTgtVocab).string());
  auto check_size = [&](std::int64_t& field, const Vocab& vocab, const char* key, const char* file) {
    if (field == 0) field = vocab.size();
    if (field != vocab.size())
      throw std::runtime_error(config_path.string() + ": " + key + " = " + std::to_string(field) + " but " +
                               (dir / file).string() + " has " + std::to_string(vocab.size()) + " tokens");
  };
  check_size(ck.config.src_vocab, ck.src_vocab, "src_vocab", kSrcVocab);
  check_size(ck.config.tgt_vocab, ck.tgt_vocab, "tgt_vocab", kTgtVocab);

  const std::string weights_path = (dir / kWeights).string();
  if (!fs::exists(weights_path)) throw std::runtime_error(weights_path + ": missing");
  const auto entries = nn::load_npz(weights_path);
  // The config's sizes must account for exactly the values weights.npz holds before the model is
  // built: otherwise a config with large in-range sizes would allocate up to
  // limits::kMaxParameters before load_state_dict finds the shapes wrong.
  if (const auto count = ck.config.model.spec().num_parameters) {
    std::int64_t stored = 0;
    for (const auto& [name, tensor] : entries) stored += tensor.numel();
    const std::int64_t expected = count(ck.config);
    if (stored != expected)
      throw std::runtime_error(weights_path + ": holds " + std::to_string(stored) + " values but " +
                               config_path.string() + "'s sizes give " + std::to_string(expected) +
                               " parameters (config and weights do not belong together)");
  }
  Generator gen(0);
  ck.model = make_model(ck.config, gen);
  ck.model->load_state_dict(entries, weights_path);

  const fs::path training_path = dir / kTraining;
  if (fs::exists(training_path)) ck.training = training_from_json(read_text(training_path), training_path.string());
  ck.has_optimizer = fs::exists(dir / kOptimizer);
  ck.has_training_weights = fs::exists(dir / kTrainingWeights);
  if (ck.training && ck.training->ema_decay > 0 && !ck.has_training_weights)
    throw std::runtime_error((dir / kTrainingWeights).string() + ": missing (training.json records ema_decay = " +
                             std::to_string(ck.training->ema_decay) + ")");

  const fs::path tokenizer_path = dir / kTokenizer;
  if (fs::exists(tokenizer_path)) {
    ck.subword = SubwordModel::load(tokenizer_path.string());
    // Every piece the model was trained with must be one the tokenizer produces.
    for (const auto& [vocab, file] : {std::pair{&ck.src_vocab, kSrcVocab}, std::pair{&ck.tgt_vocab, kTgtVocab}}) {
      const auto& tokens = vocab->tokens();
      for (std::size_t id = Vocab::reserved_tokens().size(); id < tokens.size(); ++id)
        if (!ck.subword->has_piece(tokens[id]))
          throw std::runtime_error(tokenizer_path.string() + " does not match " + (dir / file).string() + ": token '" +
                                   tokens[id] + "' (id " + std::to_string(id) + ") is not one of its pieces");
    }
  } else if (ck.training && ck.training->run.subword > 0) {
    throw std::runtime_error(tokenizer_path.string() + ": missing (training.json records a subword model)");
  }
  return ck;
}

std::optional<TrainingState> load_training_state(const std::string& dir) {
  const fs::path path = fs::path(dir) / kTraining;
  if (!fs::exists(path)) return std::nullopt;
  verify_manifest(dir, kTraining, false);
  return training_from_json(read_text(path), path.string());
}

void load_optimizer_state(const std::string& dir, nn::Optimizer& optimizer) {
  const fs::path path = fs::path(dir) / kOptimizer;
  if (!fs::exists(path)) throw std::runtime_error(path.string() + ": missing (the checkpoint has no optimizer state)");
  verify_manifest(dir, kOptimizer, false);
  optimizer.load_state_dict(nn::load_npz(path.string()), path.string());
}

void load_training_weights(const std::string& dir, Seq2Seq& model) {
  const fs::path path = fs::path(dir) / kTrainingWeights;
  if (!fs::exists(path)) throw std::runtime_error(path.string() + ": missing (the checkpoint has no weight EMA)");
  verify_manifest(dir, kTrainingWeights, false);
  model.load_state_dict(nn::load_npz(path.string()), path.string());
}

void write_text(const std::string& path, const std::string& text) { nn::io::write_file_atomic(path, text); }

}  // namespace tg::models
