// bahdanau: train, run and score attention translators from the command line.
//
//   bahdanau train --task dates --steps 2000 --out ckpt --log-csv loss.csv
//   bahdanau train --data data/fra-eng/train.tsv --subword 8000 --model rnnsearch --out ckpt
//   bahdanau train --data data/fra-eng/train.tsv --dev data/fra-eng/dev.tsv --subword 8000 --batch-tokens 4000
//       --patience 5 --lr-decay 0.5 --max-minutes 180 --out ckpt --log-csv log.csv   (one command; best in ckpt.best)
//   mpirun -np 2 bahdanau train --task dates --steps 2000 --out ckpt    (data parallel; rank 0 writes)
//   bahdanau translate --model ckpt --heatmap att.svg "the 3 rd of march 1 9 9 7"
//   echo "go ." | bahdanau translate --model ckpt --beam 4
//   bahdanau eval --model ckpt --split heldout
//   bahdanau bleu --hyp out.txt --ref ref.txt --metric sacrebleu
//   bahdanau average --models ckpt.a ckpt.b ckpt.c --out ckpt.avg
//   bahdanau bleu --metric sacrebleu --by-length --src src.txt --ref ref.txt --hyp a.txt --label A --hyp b.txt --label B
//   bahdanau split --data fra.txt --out data/fra-eng --test 5000 --dev 2000
//   bahdanau experiment length --quick --out-dir out/experiments/length
//   bahdanau gradcheck --model rnnsearch
//
// stdout carries results only (translations, scores); progress, summaries and warnings go to
// stderr. Any usage error or unreadable input prints "bahdanau: error: ..." on stderr (one line;
// a few errors add indented details on the lines after it) and exits with status 2; so do an
// output that would overwrite an input (checked before any work), a write error on stdout and
// running out of memory ("bahdanau: error: out of memory ..."). The CLI itself is
// tg::cli::bahdanau_main (bahdanau.h); TG_BAHDANAU_NO_MAIN leaves main() out (the fuzz target).
//
// `--precision bf16` (train, translate, eval, experiment) runs the matrix products under
// tg::autocast (bf16 operands, float32 sums; weights, losses and Adam stay float32); train records it
// in training.json, so --init-from continues in it. `bahdanau --version` names the CPU, the kernel
// paths and the bf16 path this machine takes.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "autograd/autocast.h"
#include "autograd/cpu.h"
#include "autograd/dist.h"
#include "autograd/error_text.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "models/plots/attention_bars.h"
#include "models/training/checkpoint.h"
#include "models/training/export_batches.h"
#include "models/text/data.h"
#include "models/text/split.h"
#include "models/text/subword.h"
#include "models/decoding/decode.h"
#include "models/experiments/experiments.h"
#include "models/plots/heatmap.h"
#include "models/decoding/metrics.h"
#include "models/decoding/length_buckets.h"
#include "models/decoding/sacrebleu.h"
#include "models/plots/plot.h"
#include "models/translators/limits.h"
#include "models/translators/readout.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq.h"
#include "models/text/tasks.h"
#include "models/training/trainer.h"
#include "nn/file_io.h"
#include "nn/gradcheck.h"
#include "nn/serialize.h"

#include "bahdanau.h"

using namespace tg;
using namespace tg::models;

namespace {

/// A user-facing error: printed as one line, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace io = tg::nn::io;
using io::NamedPath;

/// The one rule for every subcommand's files, checked before any work: no output may be, alias
/// (a link, another spelling) or lie inside an input, nor hold one inside it; and no two outputs
/// may be the same file or one inside the other (the later write would destroy the earlier).
/// Throws "NAME_OUT (PATH) would overwrite NAME_IN (PATH)" for the first clash.
void require_distinct(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs) {
  io::require_distinct_outputs(inputs, outputs);
  for (std::size_t i = 1; i < outputs.size(); ++i)
    io::require_distinct_outputs(std::vector<NamedPath>(outputs.begin(), outputs.begin() + static_cast<std::ptrdiff_t>(i)),
                                 {outputs[i]});
}

/// Each path of a repeatable flag as a NamedPath.
std::vector<NamedPath> named(const std::string& flag, const std::vector<std::string>& paths) {
  std::vector<NamedPath> out;
  for (const std::string& p : paths) out.push_back({flag, p});
  return out;
}

std::vector<NamedPath> concat(std::vector<NamedPath> a, const std::vector<NamedPath>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// CLI11 validators with plain messages ("expected a positive number, got 'abc'").
CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        double v = 0;
        std::size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        const bool ok = used == text.size() && used > 0 && std::isfinite(v) && (allow_zero ? v >= 0 : v > 0);
        return ok ? std::string() : std::string("expected a ") + (allow_zero ? "non-negative" : "positive") +
                                        " number, got '" + text + "'";
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}
const CLI::Validator kPositive = number_check(false);
const CLI::Validator kNonNegative = number_check(true);

/// A whole number in [lo, hi] (the bounds of models/translators/limits.h), checked before any work.
CLI::Validator int_range(std::int64_t lo, std::int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        std::size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used > 0 && used == text.size() && v >= lo && v <= hi) return std::string();
        return text.size() > 40 ? "a long value is out of range " + range : text + " is out of range " + range;
      },
      "INT in " + range);
}
const CLI::Validator kWidth = int_range(1, limits::kMaxWidth);
const CLI::Validator kMaxSteps = int_range(0, limits::kMaxSteps);

// ---- data sources shared by train and eval ------------------------------------------------

/// A number from a checkpoint's training.json notes; the error names the file and the note.
template <class T> T note_value(const std::map<std::string, std::string>& notes, const char* key, const std::string& ckpt) {
  const std::string& text = notes.at(key);
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    throw UsageError(ckpt + "/training.json: note '" + key + "' = '" + elide(text) + "' is not " +
                     (std::is_integral_v<T> ? "a whole number" : "a number"));
  return value;
}

struct DataArgs {
  std::string data;                 // --data FILE
  std::string task;                 // --task NAME
  std::int64_t num_examples = 0;    // 0: whole file / 1000 task pairs
  std::int64_t task_seed = 0;
  std::int64_t min_len = 1, max_len = 8;
  std::int64_t min_freq = 2;
  double holdout = 0.0;             // < 1: fraction, >= 1: count
  bool reverse = false;             // --reverse: translate the file's second column into its first
  std::int64_t subword = 0;         // train --subword N: SentencePiece pieces (0 = word level)
  std::string subword_type = "unigram";

  void add_options(CLI::App* app, CLI::Option*& data_opt, CLI::Option*& task_opt, std::int64_t default_task_seed) {
    task_seed = default_task_seed;
    data_opt = app->add_option("--data", data, "Tab-separated sentence pairs (UTF-8): source<TAB>target[<TAB>ignored]");
    std::string names;
    for (const auto& n : task_names()) names += (names.empty() ? "" : ", ") + n;
    task_opt = app->add_option("--task", task, "Built-in synthetic task: " + names)->check(CLI::IsMember(task_names()));
    data_opt->excludes(task_opt);
    app->add_flag("--reverse", reverse, "--data: translate the second column into the first (e.g. French to English)")
        ->needs(data_opt);
    app->add_option("--num-examples", num_examples, "Use the first N pairs of --data, or generate N task pairs (default 1000)")
        ->check(kNonNegative);
    app->add_option("--task-seed", task_seed, "Seed of the --task generator")->capture_default_str();
    app->add_option("--min-len", min_len, "Shortest task source (reverse, copy, primes)")->capture_default_str();
    app->add_option("--max-len", max_len, "Longest task source (reverse, copy, primes)")->capture_default_str();
  }

  std::map<std::string, std::string> notes() const {
    std::map<std::string, std::string> n;
    // Absolute, so that eval --split and train --init-from find it from any working directory.
    if (!data.empty()) n["data"] = std::filesystem::absolute(data).lexically_normal().string();
    if (reverse) n["reverse"] = "1";
    if (subword > 0) {
      n["subword"] = std::to_string(subword);
      n["subword_type"] = subword_type;
    }
    if (!task.empty()) n["task"] = task;
    n["num_examples"] = std::to_string(num_examples);
    n["task_seed"] = std::to_string(task_seed);
    n["min_len"] = std::to_string(min_len);
    n["max_len"] = std::to_string(max_len);
    n["min_freq"] = std::to_string(min_freq);
    std::ostringstream h;
    h.precision(17);
    h << holdout;
    n["holdout"] = h.str();
    return n;
  }

  /// Fills unset fields from a checkpoint's notes (train --init-from / eval --split).
  void from_notes(const std::map<std::string, std::string>& n, const std::string& ckpt) {
    auto get = [&](const char* key) -> std::string {
      auto it = n.find(key);
      if (it == n.end()) throw UsageError(ckpt + "/training.json does not record the training data; give --data or --task");
      return it->second;
    };
    reverse = n.count("reverse") && n.at("reverse") == "1";
    if (n.count("data")) {
      data = n.at("data");
      std::error_code ec;
      if (!std::filesystem::exists(data, ec))
        throw UsageError(ckpt + "/training.json records the training data as " + data + ", which does not exist here; give --data");
    } else if (n.count("task")) {
      task = n.at("task");
    } else {
      get("data");
    }
    for (const char* key : {"num_examples", "task_seed", "min_len", "max_len", "min_freq", "holdout"}) get(key);
    num_examples = note_value<std::int64_t>(n, "num_examples", ckpt);
    task_seed = note_value<std::int64_t>(n, "task_seed", ckpt);
    min_len = note_value<std::int64_t>(n, "min_len", ckpt);
    max_len = note_value<std::int64_t>(n, "max_len", ckpt);
    min_freq = note_value<std::int64_t>(n, "min_freq", ckpt);
    holdout = note_value<double>(n, "holdout", ckpt);
    subword = n.count("subword") ? note_value<std::int64_t>(n, "subword", ckpt) : 0;
    if (n.count("subword_type")) subword_type = n.at("subword_type");
  }

  std::vector<SentencePair> pairs() const {
    if (!data.empty()) {
      io::require_regular_file(data, "--data");  // a FIFO, a device (/dev/zero) or a directory: refused, not read
      auto pairs = read_sentence_pairs(data, num_examples > 0 ? std::optional<std::size_t>(num_examples) : std::nullopt);
      return reverse ? reverse_pairs(std::move(pairs)) : pairs;
    }
    if (task.empty()) throw UsageError("give --data FILE or --task NAME");
    try {
      return make_task(task, {.count = num_examples > 0 ? num_examples : 1000,
                              .min_len = min_len,
                              .max_len = max_len,
                              .seed = static_cast<std::uint64_t>(task_seed)});
    } catch (const std::invalid_argument& e) {  // the library names its own fields; name the flags
      throw UsageError("--task " + task + " with --num-examples " + std::to_string(num_examples) + ", --min-len " +
                       std::to_string(min_len) + ", --max-len " + std::to_string(max_len) + ": " + e.what());
    }
  }

  Holdout holdout_spec() const {
    if (holdout < 0) throw UsageError("--holdout must be >= 0");
    if (holdout == 0) return Holdout();
    if (holdout < 1) return Holdout::fraction(holdout);
    if (holdout != std::floor(holdout)) throw UsageError("--holdout must be a fraction below 1 or a whole count");
    if (holdout > 1e15) throw UsageError("--holdout " + std::to_string(holdout) + " is more pairs than any corpus holds");
    return Holdout::count(static_cast<std::size_t>(holdout));
  }

  /// holdout_spec(), checked against the `n` pairs it will split (the library's error, named --holdout).
  Holdout holdout_for(std::size_t n) const {
    const Holdout h = holdout_spec();
    try {
      h.resolve(n);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--holdout: ") + e.what());
    }
    return h;
  }

  /// The data exactly as train makes it: split with Generator(seed); tokenised as d2l does, or
  /// into the pieces of `subword_model`.
  TranslationData make(std::int64_t num_steps, std::uint64_t seed, const SubwordModel* subword_model = nullptr) const {
    Generator gen(seed);
    const auto all = pairs();
    const auto options = TranslationDataOptions().num_steps(num_steps).min_freq(min_freq).holdout(holdout_for(all.size()));
    if (subword_model) return make_translation_data(encode_pairs(all, *subword_model), options, gen);
    return make_translation_data(all, options, gen);
  }

  /// The raw pairs of make()'s training or held-out part, in file order (the same rows: the split
  /// depends only on the seed and the number of pairs).
  std::vector<SentencePair> raw_part(std::uint64_t seed, bool heldout) const {
    const auto all = pairs();
    Generator gen(seed);
    const auto rows = split_indices(all.size(), holdout_for(all.size()), gen);
    std::vector<SentencePair> out;
    for (std::int64_t r : heldout ? rows.second : rows.first) out.push_back(all[static_cast<std::size_t>(r)]);
    return out;
  }

  /// A SentencePiece model of `subword` pieces trained on both sides of make()'s training part.
  SubwordModel train_subword(std::uint64_t seed) const {
    std::vector<std::string> sentences;
    for (const auto& p : raw_part(seed, false)) {
      sentences.push_back(p.src);
      sentences.push_back(p.tgt);
    }
    return SubwordModel::train(sentences,
                               SubwordOptions().vocab_size(subword).type(parse_subword_type(subword_type, "--subword-type")));
  }
};

/// Re-encodes both parts of `data` with a checkpoint's vocabularies.
void use_vocabularies(TranslationData& data, const Vocab& src, const Vocab& tgt, std::int64_t num_steps) {
  data.src_vocab = src;
  data.tgt_vocab = tgt;
  data.train = Seq2SeqDataset(data.train_pairs, src, tgt, num_steps);
  data.heldout = Seq2SeqDataset(data.heldout_pairs, src, tgt, num_steps);
}

/// "--precision" of train, translate, eval and experiment.
const std::vector<std::string> kPrecisions = {"fp32", "bf16"};
const char* const kPrecisionHelp =
    "Precision of the matrix products: fp32, or bf16 (autocast: operands rounded to bfloat16, sums in float32; "
    "weights, losses and the optimizer stay float32)";

/// With --precision bf16 on a machine whose bf16 products take the fallback (no avx512_bf16), one
/// line on stderr says so. On a CPU without bf16 arithmetic tg::autocast::Guard prints that line
/// itself at its first use (once per process), so here only the other way to the fallback is
/// reported: TG_BF16_PATH=avx2 forcing it on a CPU that has the instructions.
void note_precision(autocast::Precision p) {
  if (p != autocast::Precision::bf16 || dist::rank() != 0) return;
  const std::string path = autocast::bf16_path();
  if (!autocast::bf16_hardware() || path.rfind("avx512_bf16", 0) == 0) return;
  std::fprintf(stderr, "bahdanau: --precision bf16: TG_BF16_PATH forces the %s on this avx512_bf16 CPU; products "
                       "read bf16 and compute in float32\n", path.c_str());
}

/// `bahdanau --version`: the program, then the machine as the kernels see it.
std::string version_text() {
  std::string v = "bahdanau (tapegrad; no release number or commit is compiled in)";
#if defined(__VERSION__)
#if defined(__clang__)
  v += ", built by clang " __VERSION__;
#elif defined(__GNUC__)
  v += ", built by g++ " __VERSION__;
#endif
#endif
#ifdef NDEBUG
  v += ", optimised (NDEBUG)";
#else
  v += ", with assertions";
#endif
  v += "\ncpu: " + cpu::summary();
  v += std::string("\nisa: ") + cpu::isa_name(cpu::isa()) + " (best on this CPU: " + cpu::isa_name(cpu::best_isa()) +
       "; TG_CPU=avx2 caps it)";
  v += "\nkernel paths: " + cpu::kernel_paths();
  v += std::string("\nbf16 path: ") + autocast::bf16_path() + " (bf16 arithmetic: " +
       (autocast::bf16_hardware() ? "yes" : "no") + ")";
  return v;
}

void set_threads(int threads) {
  if (threads < 0) throw UsageError("--threads must be >= 0");
  if (threads > 0) set_num_threads(threads);
}

/// The lines of a text file the CLI reads itself (hypotheses, references, sources), without a
/// final '\r': through io::read_lines, so only a regular file of at most kTextData bytes with
/// lines of at most kLineBytes is read, and a read error is an error naming it.
std::vector<std::string> read_text_lines(const std::string& path, std::string_view flag) {
  std::vector<std::string> lines = io::read_lines(path, io::limits::kTextData, flag);
  for (std::string& line : lines)
    if (!line.empty() && line.back() == '\r') line.pop_back();
  return lines;
}

// ---- train ----------------------------------------------------------------------------------

// "Architecture:" and one line per registered model.
std::string model_help() {
  std::string help = "Architecture:";
  for (const ModelSpec* spec : model_registry())
    help += "\n  " + std::string(spec->name) + ": " + std::string(spec->description);
  return help;
}

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
};

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

/// Throws unless the file or directory `p` could be written (found before the work, not at its
/// end): a file, or a directory replaced through a temporary sibling (a checkpoint), can be made
/// beside where it goes.
void require_writable(const NamedPath& p) {
  if (p.path.empty()) return;
  std::error_code ec;
  std::filesystem::path where = std::filesystem::absolute(p.path, ec).lexically_normal();
  if (!where.has_filename()) where = where.parent_path();  // "ck/"
  // An existing directory is replaced, not written into: probe beside it.
  if (std::filesystem::is_directory(where, ec)) where = where.parent_path() / (where.filename().string() + ".tmp");
  try {
    io::require_writable_location(where);
  } catch (const std::runtime_error& e) {
    throw UsageError(p.name + ": " + e.what());
  }
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
  require_writable(out);
  for (const NamedPath& p : others) require_writable(p);
}

int run_train(TrainArgs& a) {
  set_threads(a.threads);
  auto given = [&](const std::string& name) { return a.opts.at(name)->count() > 0; };

  ModelConfig config;
  std::optional<Checkpoint> ck;
  if (!a.init_from.empty()) {
    ck = load_checkpoint(a.init_from);
    config = ck->config;
    // The architecture comes from the checkpoint; a flag that contradicts it is an error.
    auto same = [&](const char* flag, auto mine, auto theirs) {
      if (given(flag) && mine != theirs) {
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
    if (given("dropout")) config.dropout = a.dropout;
    if (given("embedding-dropout")) config.embedding_dropout = a.embedding_dropout;
    if (given("readout-dropout")) config.readout_dropout = a.readout_dropout;
    // Unset training options continue the checkpoint's run.
    if (ck->training) {
      const TrainingState& t = *ck->training;
      if (!given("seed")) a.seed = t.seed;
      if (!given("batch-size") && t.batch_size > 0) a.batch_size = t.batch_size;
      if (!given("lr") && t.lr > 0) a.lr = t.lr;
      if (!given("clip")) a.clip = t.clip;
      if (!given("warmup-steps")) a.warmup_steps = t.warmup_steps;
      if (!given("lr-anneal-from") && !given("lr-anneal-to")) {
        a.lr_anneal_from = t.lr_anneal_from;
        a.lr_anneal_to = t.lr_anneal_to;
      }
      if (!given("label-smoothing")) a.label_smoothing = t.label_smoothing;
      if (!given("ema-decay")) a.ema_decay = t.ema_decay;
      if (!given("precision")) a.precision = precision_name(t.precision);
      if (!given("no-shuffle")) a.no_shuffle = !t.shuffle;
      if (!given("batch-tokens")) a.batch_tokens = t.batch_tokens;
      if (!given("data") && !given("task")) a.data.from_notes(t.notes, a.init_from);
      // The validation settings continue too (the dev file and its BLEU settings from the notes).
      if (!given("dev") && t.notes.count("dev")) {
        a.dev = t.notes.at("dev");
        if (!given("dev-bleu-pairs") && t.notes.count("dev_bleu_pairs"))
          a.dev_bleu_pairs = note_value<std::int64_t>(t.notes, "dev_bleu_pairs", a.init_from);
        if (!given("dev-beam") && t.notes.count("dev_beam"))
          a.dev_beam = note_value<std::int64_t>(t.notes, "dev_beam", a.init_from);
        if (!given("best") && t.notes.count("best")) a.best = t.notes.at("best");
      }
      if (!given("select-by")) a.select_by = t.select_by;
      if (!given("patience")) a.patience = t.patience;
      if (!given("lr-decay")) a.lr_decay = t.lr_decay;
      if (!given("lr-patience")) a.lr_patience = t.lr_patience;
      if (!given("validate-every")) a.validate_every = t.validate_every;
      // The target too: a run stopped early (a time limit, a killed job) continues to the same end.
      if (!given("epochs") && !given("steps")) {
        const bool by_steps = t.notes.count("steps") > 0;
        const char* key = by_steps ? "steps" : "epochs";
        if (t.notes.count(key)) {
          const auto target = note_value<std::int64_t>(t.notes, key, a.init_from);
          if (target < 1)
            throw UsageError(a.init_from + "/training.json: note '" + key + "' = " + std::to_string(target) +
                             " is not a target (must be >= 1)");
          (by_steps ? a.steps : a.epochs) = target;
        }
      }
    }
    if (a.out.empty()) a.out = a.init_from;
  } else {
    // Flags that shape only some models are refused for the others rather than ignored.
    const std::pair<const char*, std::vector<std::string>> only_for[] = {
        {"readout", {"rnnsearch", "rnnencdec"}}, {"maxout-units", {"rnnsearch", "rnnencdec"}},
        {"attention", {"rnnsearch", "d2l"}},     {"num-heads", {"transformer"}},
        {"norm-first", {"transformer"}}};
    for (const auto& [flag, models] : only_for)
      if (given(flag) && std::find(models.begin(), models.end(), a.model) == models.end())
        throw UsageError(std::string("--") + flag + " does not apply to --model " + a.model);
    if (given("maxout-units") && a.readout == "linear") throw UsageError("--maxout-units does not apply to --readout linear");
    config.model = a.model;
    config.embed_size = a.embed_size;
    config.num_hiddens = a.num_hiddens;
    config.num_layers = given("num-layers") ? a.num_layers : config.model.spec().default_num_layers;
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
  }
  if (a.data.data.empty() && a.data.task.empty()) throw UsageError("train: give --data FILE or --task NAME");
  if (a.dev.empty())
    for (const char* flag : {"validate-every", "dev-bleu-pairs", "dev-beam", "best", "select-by", "patience", "lr-decay",
                             "lr-patience"})
      if (given(flag)) throw UsageError(std::string("--") + flag + " needs --dev FILE (validation on a dev set)");
  // The best checkpoint is kept beside --out by default (a directory inside --out would be lost at
  // its next save); worked out here so that the checks below see it.
  if (!a.dev.empty() && a.best.empty() && !a.out.empty()) {
    std::string out = a.out;
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    a.best = out + ".best";
  }
  check_train_files(a);

  std::optional<SubwordModel> subword;
  if (ck && ck->subword) {
    if (given("subword")) throw UsageError("--subword: " + a.init_from + " already has its tokenizer.model");
    subword = ck->subword;
  } else if (ck && given("subword")) {
    throw UsageError("--subword cannot be added to " + a.init_from + ", whose vocabularies are not subword pieces");
  } else if (a.data.subword > 0) {
    if (!SubwordModel::available())
      throw UsageError("--subword: this build has no SentencePiece (install libsentencepiece-dev, rerun cmake, rebuild)");
    if (!a.data.task.empty()) throw UsageError("--subword applies to --data sentence pairs, not to --task");
    if (!given("min-freq")) a.data.min_freq = 1;  // every piece SentencePiece made is kept
    subword = a.data.train_subword(a.seed);
    std::fprintf(stderr, "bahdanau: SentencePiece %s model of %lld pieces trained on the training pairs\n",
                 a.data.subword_type.c_str(), static_cast<long long>(subword->size()));
  }
  TranslationData data = a.data.make(config.num_steps, a.seed, subword ? &*subword : nullptr);
  if (data.train.size() == 0) throw UsageError("train: no training pairs");
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
  if (a.compact_grads) allow_compact_grads(*model);
  const bool lead = dist::rank() == 0;  // under mpirun only rank 0 reports
  if (a.out.empty() && a.write_batches.empty() && lead) std::fprintf(stderr, "bahdanau: warning: no --out given, the trained model will not be saved\n");

  auto notes = a.data.notes();
  if (a.steps > 0) notes["steps"] = std::to_string(a.steps);
  else notes["epochs"] = std::to_string(a.epochs);
  std::optional<DevSet> dev;
  if (!a.dev.empty()) {
    dev = make_dev_set(a, subword ? &*subword : nullptr);
    notes["dev"] = a.dev;
    notes["dev_bleu_pairs"] = std::to_string(a.dev_bleu_pairs);
    notes["dev_beam"] = std::to_string(a.dev_beam);
    if (!a.best.empty()) notes["best"] = a.best;
  } else {
    a.patience = 0;  // settings continued from a checkpoint that had a dev set: nothing to drive them
    a.lr_decay = 1.0;
    a.validate_every = 0;
  }
  TrainOptions opts;
  opts.batch_size(a.batch_size).lr(a.lr).clip(a.clip).seed(a.seed).shuffle(!a.no_shuffle).log_csv(a.log_csv)
      .warmup_steps(a.warmup_steps).lr_anneal(a.lr_anneal_from, a.lr_anneal_to).label_smoothing(a.label_smoothing)
      .ema_decay(a.ema_decay)
      .out_dir(a.out).checkpoint_every(a.checkpoint_every).progress(!a.quiet).notes(notes).subword(subword)
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
  if (!a.write_batches.empty()) {
    if (ck) throw UsageError("--write-batches exports a training from its start, not one continued with --init-from");
    const BatchExportSources sources{
        .data = a.data.data.empty() ? "task:" + a.data.task : a.data.data, .dev = a.dev, .max_minutes = a.max_minutes};
    const BatchExport plan = write_training_batches(a.write_batches, *model, data, opts, sources);
    std::fprintf(stderr, "bahdanau: wrote %lld steps (%lld epochs) of batches over %lld training rows%s to %s "
                         "(batches.npz, meta.json%s, init/); nothing trained\n",
                 static_cast<long long>(plan.steps), static_cast<long long>(plan.epochs),
                 static_cast<long long>(data.train.size()), opts.dev() ? " and the dev rows" : "", a.write_batches.c_str(),
                 opts.dev() ? ", dev.ref.txt" : "");
    return 0;
  }

  if (lead) std::fprintf(stderr, "bahdanau: %s, %lld parameters, %lld training pairs (%lld held out), vocab %lld/%lld, %d threads%s\n",
               std::string(config.model.name()).c_str(), static_cast<long long>(model->num_parameters()),
               static_cast<long long>(data.train.size()), static_cast<long long>(data.heldout.size()),
               static_cast<long long>(data.src_vocab.size()), static_cast<long long>(data.tgt_vocab.size()),
               num_threads(), opts.precision() == autocast::Precision::bf16 ? ", bf16 mixed precision" : "");
  note_precision(opts.precision());
  const TrainResult r = train(*model, data, opts);
  if (!lead) return 0;
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
  if (data.heldout.size() > 0) {  // in the training's precision
    EvalOptions eo;
    eo.decode.precision(opts.precision());
    const EvalReport rep = evaluate(*model, data.heldout_pairs, data.src_vocab, data.tgt_vocab, eo);
    std::fprintf(stderr, "bahdanau: held out (%lld pairs): loss %.4f, BLEU-4 %.4f%s, exact match %.4f\n",
                 static_cast<long long>(rep.count), rep.loss, rep.bleu4, subword ? " (of pieces)" : "", rep.exact_match);
  }
  return 0;
}

// ---- translate ------------------------------------------------------------------------------

/// Decoding flags shared by translate and eval.
struct DecodeArgs {
  std::int64_t beam = 1, max_steps = 0, max_len_b = 0;
  double alpha = 1.0, max_len_a = 0.0;
  std::string length_penalty = "steps";
  std::string precision = "fp32";

  void add_options(CLI::App* app) {
    app->add_option("--beam", beam, "Beam size (1 = greedy)")->check(int_range(1, limits::kMaxBeam))->capture_default_str();
    app->add_option("--alpha", alpha, "Beam length normalisation exponent (GNMT uses 0.6 with --length-penalty gnmt)")
        ->check(kNonNegative)->capture_default_str();
    app->add_option("--length-penalty", length_penalty,
                    "Beam score: steps = log P / steps^alpha, gnmt = log P / ((5 + steps) / 6)^alpha")
        ->check(CLI::IsMember({"steps", "gnmt"}))->capture_default_str();
    app->add_option("--max-steps", max_steps,
                    "Longest output (0 = the model's num_steps, or no cap below the limit when --max-len-a/b are set)")
        ->check(kMaxSteps);
    app->add_option("--max-len-a", max_len_a,
                    "Per-sentence limit relative to the source, as fairseq: floor(a * source_len + b) steps, "
                    "source_len = tokens + <eos> as the model sees them")
        ->check(CLI::Range(0.0, static_cast<double>(limits::kMaxSteps)));
    app->add_option("--max-len-b", max_len_b, "See --max-len-a")->check(kMaxSteps);
    app->add_option("--precision", precision, kPrecisionHelp)->check(CLI::IsMember(kPrecisions))->capture_default_str();
  }
  DecodeOptions options() const {
    return DecodeOptions().beam_size(beam).length_alpha(alpha).max_steps(max_steps).max_len_a(max_len_a)
        .max_len_b(max_len_b).length_penalty(parse_length_penalty(length_penalty, "--length-penalty"))
        .precision(parse_precision(precision, "--precision"));
  }
};

struct TranslateArgs {
  std::string model;
  DecodeArgs decode;
  std::string heatmap, attention_out, bars;
  bool show_attention = false, quiet = false;
  std::int64_t attention_layer = -1, attention_head = -1;  // transformer
  CLI::Option *attention_layer_opt = nullptr, *attention_head_opt = nullptr;
  int threads = 0;
  std::vector<std::string> sentences;
  std::istream* in = &std::cin;  // the sentences when none is given
};

int run_translate(TranslateArgs& a) {
  require_distinct({{"--model", a.model}},
                   {{"--heatmap", a.heatmap}, {"--attention-out", a.attention_out}, {"--bars", a.bars}});
  set_threads(a.threads);
  Checkpoint ck = load_checkpoint(a.model);
  if (a.attention_layer_opt->count() || a.attention_head_opt->count()) {
    // Which weights step() reports is part of the config: rebuild with the same weights.
    ModelConfig config = ck.config;
    if (a.attention_layer_opt->count()) config.attention_layer = a.attention_layer;
    if (a.attention_head_opt->count()) config.attention_head = a.attention_head;
    try {
      config.validate("--attention-layer/--attention-head");
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    Generator gen(0);
    auto model = make_model(config, gen);
    model->load_state_dict(ck.model->state_dict(), a.model);
    ck.model = model;
  }
  const bool wants_attention = !a.heatmap.empty() || !a.attention_out.empty() || !a.bars.empty() || a.show_attention;
  if (wants_attention && !ck.model->has_attention())
    throw UsageError(a.model + ": model '" + std::string(ck.config.model.name()) + "' has no attention weights to show");
  std::vector<std::string> sentences = a.sentences;
  if (sentences.empty()) {  // a line longer than kLineBytes or a read error is an error, not the end
    io::LineReader reader(*a.in, "stdin");
    for (std::string line; reader.next(line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      sentences.push_back(line);
    }
  }
  if (sentences.empty()) return 0;
  // A model trained on a built-in task reads that task's tokenisation ("3rd" -> "3 rd").
  if (ck.training && ck.training->notes.count("task"))
    for (auto& s : sentences) s = task_input(ck.training->notes.at("task"), s);
  const DecodeOptions decode_options = a.decode.options();
  note_precision(decode_options.precision());
  std::vector<Translation> out;
  if (ck.subword) {  // plain sentences in and out: the pieces stay inside
    std::vector<std::vector<std::string>> pieces;
    for (const auto& s : sentences) pieces.push_back(ck.subword->encode(s));
    out = translate_tokens(*ck.model, pieces, ck.src_vocab, ck.tgt_vocab, decode_options);
  } else {
    out = translate(*ck.model, sentences, ck.src_vocab, ck.tgt_vocab, decode_options);
  }
  for (const auto& tr : out)
    std::fprintf(stdout, "%s\n", (ck.subword ? ck.subword->decode(tr.tokens) : tr.text()).c_str());
  std::fflush(stdout);
  if (!a.quiet)  // what the model could not see of an input: one line per input, on stderr
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::string warning;
      if (const std::int64_t n = out[i].unknown_tokens; n > 0)
        warning = std::to_string(n) + (n == 1 ? " unknown token" : " unknown tokens") + " (<unk>)";
      if (const auto seen = static_cast<std::int64_t>(out[i].source.size()); out[i].source_length > seen)
        warning += (warning.empty() ? "" : ", ") + std::string("truncated from ") +
                   std::to_string(out[i].source_length) + " to " + std::to_string(seen) + " tokens (<eos> included)";
      if (!warning.empty()) std::fprintf(stderr, "bahdanau translate: input %zu: %s\n", i + 1, warning.c_str());
    }

  const Translation& first = out.front();
  if (!a.attention_out.empty()) {
    std::vector<float> flat;
    for (const auto& row : first.attention) flat.insert(flat.end(), row.begin(), row.end());
    const Tensor t = Tensor::from_vector(flat, {static_cast<std::int64_t>(first.attention.size()),
                                                static_cast<std::int64_t>(first.source.size())});
    io::write_file_atomic(a.attention_out, nn::npy_encode(t));
  }
  if (!a.heatmap.empty())
    io::write_file_atomic(a.heatmap, attention_heatmap_svg({first.source, first.step_labels(), first.attention}, sentences.front()));
  if (!a.bars.empty())
    io::write_file_atomic(a.bars, attention_bars_svg({first.source, first.step_labels(), first.attention}, sentences.front()));
  if (a.show_attention)
    for (std::size_t i = 0; i < out.size(); ++i)
      std::fprintf(stderr, "%s\n%s\n", sentences[i].c_str(),
                   attention_terminal({out[i].source, out[i].step_labels(), out[i].attention}).c_str());
  return 0;
}

// ---- eval -----------------------------------------------------------------------------------

struct EvalArgs {
  std::string model;
  DataArgs data;
  std::string split;
  DecodeArgs decode;
  int bleu_k = 2;
  int threads = 0;
  std::string output;
  std::map<std::string, CLI::Option*> opts;
};

int run_eval(EvalArgs& a) {
  require_distinct({{"--model", a.model}, {"--data", a.data.data}}, {{"--output", a.output}});
  set_threads(a.threads);
  Checkpoint ck = load_checkpoint(a.model);
  TokenizedPairs pairs;
  std::vector<std::string> raw_refs;  // subword checkpoints: the references as written, for sacreBLEU/chrF
  const SubwordModel* sp = ck.subword ? &*ck.subword : nullptr;
  const bool have_data = a.opts.at("data")->count() > 0 || a.opts.at("task")->count() > 0;
  if (!a.split.empty()) {
    // Reproduce the training run's data and split from the checkpoint's notes.
    if (!ck.training) throw UsageError(a.model + ": no training.json, so --split cannot reproduce the training data");
    if (!have_data) {
      a.data.from_notes(ck.training->notes, a.model);
      // The training data recorded in the checkpoint is an input too.
      require_distinct({{a.model + "/training.json's data", a.data.data}}, {{"--output", a.output}});
    } else {
      const auto& n = ck.training->notes;
      if (n.count("min_freq")) a.data.min_freq = note_value<std::int64_t>(n, "min_freq", a.model);
      if (n.count("holdout")) a.data.holdout = note_value<double>(n, "holdout", a.model);
    }
    TranslationData data = a.data.make(ck.config.num_steps, ck.training->seed, sp);
    pairs = a.split == "train" ? data.train_pairs : data.heldout_pairs;
    if (sp)
      for (const auto& p : a.data.raw_part(ck.training->seed, a.split == "heldout")) raw_refs.push_back(p.tgt);
    if (a.split == "heldout" && pairs.size() == 0)
      throw UsageError(a.model + ": the training run held nothing out (train with --holdout)");
  } else {
    if (!have_data) throw UsageError("eval: give --data FILE, --task NAME or --split train|heldout");
    const auto raw = a.data.pairs();
    if (sp) {
      pairs = encode_pairs(raw, *sp);
      for (const auto& p : raw) raw_refs.push_back(p.tgt);
    } else {
      pairs = tokenize_pairs(raw);
    }
  }
  EvalOptions eo;
  eo.decode = a.decode.options();
  eo.bleu_k = a.bleu_k;
  note_precision(eo.decode.precision());
  const EvalReport rep = evaluate(*ck.model, pairs, ck.src_vocab, ck.tgt_vocab, eo);
  std::vector<std::string> hyps;
  for (const auto& tr : rep.translations) hyps.push_back(sp ? sp->decode(tr.tokens) : tr.text());
  if (!a.output.empty()) {
    std::string text;
    for (const auto& h : hyps) text += h + "\n";
    io::write_file_atomic(a.output, text);
  }
  std::printf("pairs           %lld\n", static_cast<long long>(rep.count));
  std::printf("bleu4           %.4f\n", rep.bleu4);
  std::printf("bleu%d_d2l       %.4f\n", rep.k, rep.bleu_k);
  std::printf("exact_match     %.4f\n", rep.exact_match);
  std::printf("token_accuracy  %.4f\n", rep.token_accuracy);
  std::printf("psa             %.4f\n", rep.psa);
  std::printf("lcsr            %.4f\n", rep.lcsr);
  std::printf("loss            %.4f\n", rep.loss);
  if (sp && !raw_refs.empty()) {  // on plain sentences, as papers report; the lines above score pieces
    const SacreBleuScore b = sacre_bleu(hyps, raw_refs);
    const ChrfScore c = sacre_chrf(hyps, raw_refs);
    std::printf("sacrebleu       %.2f\n", b.score);
    std::printf("chrf2           %.2f\n", c.score);
    std::fprintf(stderr, "%s\n%s\n", b.format().c_str(), c.format().c_str());
  }
  return 0;
}

// ---- bleu -----------------------------------------------------------------------------------

struct BleuArgs {
  std::vector<std::string> hyp, label;
  std::string ref, src, buckets = "1,3,5,7,9,11,13,15", csv, svg;
  bool by_length = false;
  int d2l_k = 0;
  std::string metric = "bleu4", tokenize = "13a";
  CLI::Option* tokenize_opt = nullptr;
  CLI::Option* buckets_opt = nullptr;
};

/// "1,3,5,15" -> {1, 3, 5, 15}.
std::vector<std::int64_t> parse_bucket_starts(const std::string& text) {
  std::vector<std::int64_t> starts;
  std::istringstream in(text);
  for (std::string field; std::getline(in, field, ',');) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
    if (ec != std::errc() || end != field.data() + field.size() || field.empty())
      throw UsageError("--buckets: '" + elide(field) + "' is not a whole number (expected e.g. 1,3,5,15)");
    starts.push_back(v);
  }
  return starts;
}

// bleu --by-length: a table of one row per source-length bucket, a column per system.
int run_bleu_by_length(const BleuArgs& a, const std::vector<std::vector<std::string>>& hyps,
                       const std::vector<std::string>& ref) {
  const auto src = read_text_lines(a.src, "--src");
  if (src.size() != ref.size())
    throw UsageError(a.src + " has " + std::to_string(src.size()) + " lines but " + a.ref + " has " +
                     std::to_string(ref.size()));
  std::vector<SystemOutput> systems;
  for (std::size_t k = 0; k < hyps.size(); ++k) systems.push_back({a.label.empty() ? a.hyp[k] : a.label[k], hyps[k]});
  const bool chrf = a.metric == "chrf";
  const auto tok = a.tokenize == "13a" ? SacreTokenizer::k13a : SacreTokenizer::kNone;
  const CorpusMetric metric = [&](const std::vector<std::string>& h, const std::vector<std::string>& r) {
    return chrf ? sacre_chrf(h, r).score : sacre_bleu(h, r, tok).score;
  };
  LengthScores s;
  try {
    s = score_by_length(src, ref, systems, parse_bucket_starts(a.buckets), metric);
  } catch (const std::invalid_argument& e) {
    throw UsageError(a.src + ", " + a.ref + ": " + e.what());
  }
  // The signature of the metric (scores inside a bucket have the same one).
  SacreBleuScore bleu_signature;
  bleu_signature.tokenizer = tok;
  std::printf("%s by source length in words (%s)\n",
              (chrf ? ChrfScore().signature() : bleu_signature.signature()).c_str(), a.src.c_str());
  std::vector<int> width;
  std::printf("%-8s %9s", "words", "sentences");
  for (const std::string& label : s.labels) {
    width.push_back(std::max<int>(8, static_cast<int>(display_width(label))));
    std::printf("  %*s", width.back(), label.c_str());
  }
  auto row = [&](const std::string& name, std::size_t n, const std::vector<double>& v) {
    std::printf("\n%-8s %9zu", name.c_str(), n);
    for (std::size_t k = 0; k < v.size(); ++k)
      if (std::isnan(v[k])) std::printf("  %*s", width[k], "-");
      else std::printf("  %*.2f", width[k], v[k]);
  };
  for (std::size_t b = 0; b < s.buckets.size(); ++b) row(s.buckets[b].label(), s.buckets[b].lines.size(), s.scores[b]);
  row("all", src.size(), s.overall);
  std::printf("\n");
  if (!a.csv.empty()) io::write_file_atomic(a.csv, length_scores_csv(s));
  if (!a.svg.empty()) {
    // x: the mean source length of each bucket's sentences, so the open last bucket has a place too.
    std::vector<Series> series;
    for (std::size_t k = 0; k < s.labels.size(); ++k) {
      Series& se = series.emplace_back();
      se.label = s.labels[k];
      for (std::size_t b = 0; b < s.buckets.size(); ++b)
        if (!s.buckets[b].lines.empty()) {
          se.x.push_back(s.buckets[b].mean_words);
          se.y.push_back(s.scores[b][k]);
        }
    }
    PlotOptions po;
    po.title = std::string(chrf ? "chrF2" : "BLEU") + " by source sentence length";
    po.x_label = "source sentence length in words (mean of each bucket)";
    po.y_label = chrf ? "chrF2" : "BLEU (sacreBLEU-compatible)";
    io::write_file_atomic(a.svg, line_plot_svg(series, po));
  }
  return 0;
}

int run_bleu(const BleuArgs& a) {
  require_distinct(concat(named("--hyp", a.hyp), {{"--ref", a.ref}, {"--src", a.src}}),
                   {{"--csv", a.csv}, {"--svg", a.svg}});
  if (!a.label.empty() && a.label.size() != a.hyp.size())
    throw UsageError(std::to_string(a.label.size()) + " --label for " + std::to_string(a.hyp.size()) +
                     " --hyp: give one label per --hyp, in the same order");
  if (a.tokenize_opt->count() > 0 && a.metric != "sacrebleu")
    throw UsageError("--tokenize applies to --metric sacrebleu only");
  if (a.by_length) {
    if (a.src.empty()) throw UsageError("--by-length needs --src (the source sentences, one per line)");
    if (a.metric == "bleu4") throw UsageError("--by-length needs --metric sacrebleu or chrf");
    if (a.d2l_k > 0) throw UsageError("--d2l-k cannot be combined with --by-length");
  } else {
    for (const auto& [flag, given] : {std::pair{"--src", !a.src.empty()}, {"--csv", !a.csv.empty()},
                                      {"--svg", !a.svg.empty()}, {"--buckets", a.buckets_opt->count() > 0}})
      if (given) throw UsageError(std::string(flag) + " applies to --by-length only");
  }
  const auto ref = read_text_lines(a.ref, "--ref");
  std::vector<std::vector<std::string>> hyps;
  for (const std::string& path : a.hyp) {
    hyps.push_back(read_text_lines(path, "--hyp"));
    if (hyps.back().size() != ref.size())
      throw UsageError(path + " has " + std::to_string(hyps.back().size()) + " lines but " + a.ref + " has " +
                       std::to_string(ref.size()));
  }
  if (a.by_length) return run_bleu_by_length(a, hyps, ref);
  if (a.d2l_k > 0) {  // d2l's sentence-level BLEU-k, one score per line
    if (a.metric != "bleu4") throw UsageError("--d2l-k cannot be combined with --metric " + a.metric);
    if (hyps.size() != 1) throw UsageError("--d2l-k scores one --hyp at a time");
    for (std::size_t i = 0; i < ref.size(); ++i) std::printf("%.3f\n", bleu_d2l(hyps[0][i], ref[i], a.d2l_k));
    return 0;
  }
  for (std::size_t k = 0; k < hyps.size(); ++k) {
    // One system: the score line alone, as before; several: each line after its label and a tab.
    if (hyps.size() > 1) std::printf("%s\t", a.label.empty() ? a.hyp[k].c_str() : a.label[k].c_str());
    const auto& hyp = hyps[k];
    try {
      if (a.metric == "sacrebleu") {
        const auto tok = a.tokenize == "13a" ? SacreTokenizer::k13a : SacreTokenizer::kNone;
        std::printf("%s\n", sacre_bleu(hyp, ref, tok).format().c_str());
        continue;
      }
      if (a.metric == "chrf") {
        std::printf("%s\n", sacre_chrf(hyp, ref).format().c_str());
        continue;
      }
    } catch (const std::invalid_argument& e) {
      throw UsageError(a.hyp[k] + ", " + a.ref + ": " + e.what());
    }
    const BleuResult b = corpus_bleu(hyp, ref, 4);
    std::printf("BLEU-4 %.4f (p1 %.4f p2 %.4f p3 %.4f p4 %.4f, BP %.4f, hyp_len %lld, ref_len %lld)\n", b.score,
                b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.brevity_penalty,
                static_cast<long long>(b.hyp_len), static_cast<long long>(b.ref_len));
  }
  return 0;
}

// ---- split ----------------------------------------------------------------------------------

struct SplitArgs {
  std::string data, out;
  std::int64_t test = 5000, dev = 2000;
  std::uint64_t seed = 0;
  bool reverse = false;
};

int run_split(const SplitArgs& a) {
  // The files write_corpus_split writes: DIR itself may hold --data (fra.txt beside its split),
  // but none of them may be --data.
  std::vector<NamedPath> outputs;
  for (const char* part : {"train", "dev", "test"})
    for (const char* ext : {".tsv", ".src.txt", ".ref.txt"})
      outputs.push_back({"--out", std::filesystem::path(a.out) / (std::string(part) + ext)});
  require_distinct({{"--data", a.data}}, outputs);
  io::require_regular_file(a.data, "--data");
  const auto pairs = read_sentence_pairs(a.data);
  CorpusSplit split;
  try {
    split = split_corpus(pairs, CorpusSplitOptions().test(a.test).dev(a.dev).seed(a.seed));
  } catch (const std::invalid_argument& e) {
    throw UsageError(a.data + ": --test " + std::to_string(a.test) + " and --dev " + std::to_string(a.dev) + ": " + e.what());
  }
  if (a.reverse) {  // split in the file's orientation, so both directions share one split
    split.train = reverse_pairs(std::move(split.train));
    split.dev = reverse_pairs(std::move(split.dev));
    split.test = reverse_pairs(std::move(split.test));
  }
  write_corpus_split(split, a.out);
  std::fprintf(stderr, "bahdanau: split %zu pairs of %s into train %zu, dev %zu, test %zu%s; wrote %s/{train,dev,test}"
               ".{tsv,src.txt,ref.txt}\n", pairs.size(), a.data.c_str(), split.train.size(), split.dev.size(),
               split.test.size(), a.reverse ? " (reversed)" : "", a.out.c_str());
  return 0;
}

// ---- plot ---------------------------------------------------------------------------------

struct PlotArgs {
  std::vector<std::string> csv, labels;
  std::string out, column = "loss", x = "step", title;
  bool log = false, x_minutes = false;
  int smooth = 1;
};

int run_plot(const PlotArgs& a) {
  require_distinct(named("--csv", a.csv), {{"--out", a.out}});
  if (!a.labels.empty() && a.labels.size() != a.csv.size())
    throw UsageError("--label given " + std::to_string(a.labels.size()) + " times for " + std::to_string(a.csv.size()) +
                     " --csv files");
  std::vector<Series> series;
  for (std::size_t i = 0; i < a.csv.size(); ++i) {
    io::require_regular_file(a.csv[i], "--csv");
    Series s = read_csv_series(a.csv[i], a.x, a.column);
    if (a.x_minutes)
      for (double& x : s.x) x /= 60.0;
    if (!a.labels.empty()) s.label = a.labels[i];
    if (const std::size_t bad = count_unplottable({s}, a.log))
      std::cerr << "bahdanau plot: " << a.csv[i] << ": skipped " << bad << " of " << s.y.size()
                << (a.log ? " points (non-finite, or not positive on the log axis)\n" : " points (non-finite)\n");
    if (a.smooth > 1) s.y = trailing_mean(s.y, a.smooth);  // per-batch losses are noisy
    series.push_back(std::move(s));
  }
  PlotOptions o;
  o.title = a.title;
  o.y_label = a.column;
  o.x_label = a.x_minutes ? a.x + " / 60 (minutes)" : a.x;
  o.log_y = a.log;
  io::write_file_atomic(a.out, line_plot_svg(series, o));
  return 0;
}

// ---- average --------------------------------------------------------------------------------

struct AverageArgs {
  std::vector<std::string> models;
  std::string out;
};

int run_average(const AverageArgs& a) {
  require_distinct(named("--models", a.models), {{"--out", a.out}});
  require_writable({"--out", a.out});
  for (std::size_t i = 0; i < a.models.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) {
      std::error_code ec;
      if (a.models[i] == a.models[j] || std::filesystem::equivalent(a.models[i], a.models[j], ec))
        throw UsageError("--models names " + a.models[i] + " twice; each checkpoint counts once in the mean");
    }
  const Checkpoint avg = average_checkpoints(a.models);
  save_checkpoint(a.out, *avg.model, avg.src_vocab, avg.tgt_vocab, nullptr, nullptr,
                  avg.subword ? &*avg.subword : nullptr);
  std::fprintf(stderr, "bahdanau: the mean of %zu checkpoints' weights is in %s\n", a.models.size(), a.out.c_str());
  return 0;
}

// ---- experiment -----------------------------------------------------------------------------

// ---- gradcheck ------------------------------------------------------------------------------

struct GradcheckArgs {
  std::string model = "d2l";
  std::int64_t max_entries = 0;
  std::uint64_t seed = 0;
  double eps = 1e-6, atol = 1e-5, rtol = 1e-3;
};

/// Builds a tiny float64 instance of a registered model (dropout 0) and checks the gradient of its
/// training loss on a fixed random batch with respect to every parameter. Exit status 1 on failure.
int run_gradcheck(const GradcheckArgs& a) {
  ModelConfig config;
  config.model = a.model;
  config.src_vocab = 7;
  config.tgt_vocab = 6;
  config.embed_size = 4;
  config.num_hiddens = 6;
  config.num_layers = config.model.spec().default_num_layers;
  config.dropout = 0.0;
  config.num_steps = 4;
  Generator gen(a.seed);
  std::shared_ptr<Seq2Seq> model = make_model(config, gen);
  model->to(DType::f64);
  const std::int64_t B = 2, S = 4, T = 3;
  auto tokens = [&](std::int64_t rows, std::int64_t cols, std::int64_t vocab) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(rows * cols));
    for (auto& t : v) t = static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(vocab)));
    return Tensor::from_vector(v, {rows, cols});
  };
  const Tensor src = tokens(B, S, config.src_vocab);
  const Tensor dec_input = tokens(B, T, config.tgt_vocab);
  const Tensor tgt = tokens(B, T, config.tgt_vocab);
  const Tensor src_valid = Tensor::from_vector(std::vector<std::int64_t>{S, S - 1}, {B});
  const Tensor tgt_valid = Tensor::from_vector(std::vector<std::int64_t>{T, T - 1}, {B});

  nn::ModuleGradcheckOptions opt;
  opt.tolerances = {a.eps, a.atol, a.rtol};
  opt.max_entries = a.max_entries;
  opt.seed = a.seed;
  const nn::ModuleGradcheckReport report = nn::gradcheck(
      *model, [&](const std::vector<Tensor>& in) { return model->loss(in[0], in[1], in[2], in[3], in[4]); },
      {src, src_valid, dec_input, tgt, tgt_valid}, opt);
  std::printf("gradcheck of model '%s' (float64; embed_size %lld, num_hiddens %lld, num_layers %lld; batch %lld, "
              "source %lld, target %lld; seed %llu; eps %g, atol %g, rtol %g)\n",
              a.model.c_str(), static_cast<long long>(config.embed_size), static_cast<long long>(config.num_hiddens),
              static_cast<long long>(config.num_layers), static_cast<long long>(B), static_cast<long long>(S),
              static_cast<long long>(T), static_cast<unsigned long long>(a.seed), a.eps, a.atol, a.rtol);
  std::fputs(report.str().c_str(), stdout);
  return report.ok ? 0 : 1;
}

struct ExperimentArgs {
  std::string name;
  ExperimentOptions o;
  std::string max_lens;
  std::string precision = "fp32";
  bool quiet = false;
};

int run_experiment_cmd(ExperimentArgs& a) {
  set_threads(a.o.threads);
  if (!a.max_lens.empty()) {
    try {
      a.o.max_lens = parse_length_list(a.max_lens);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--max-lens: ") + e.what());
    }
  }
  if (!a.o.data_file.empty() && a.name != "length") throw UsageError("--data is only used by the length experiment");
  if (a.o.out_dir.empty()) a.o.out_dir = "out/experiments/" + a.name;
  require_distinct({{"--data", a.o.data_file}}, {{"--out-dir", a.o.out_dir}});
  {  // made now, not after the training it would otherwise throw away
    std::error_code ec;
    std::filesystem::create_directories(a.o.out_dir, ec);
    if (ec || !std::filesystem::is_directory(a.o.out_dir, ec))
      throw UsageError("--out-dir " + a.o.out_dir + ": cannot create the directory" + (ec ? " (" + ec.message() + ")" : ""));
  }
  a.o.verbose = !a.quiet;
  a.o.precision = parse_precision(a.precision, "--precision");
  note_precision(a.o.precision);
  try {
    a.o.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const ExperimentResult r = tg::models::run_experiment(a.name, a.o);
  std::fputs(r.markdown().c_str(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "bahdanau: experiment %s%s took %.1f s (training %.1f s); wrote", a.name.c_str(),
               a.o.quick ? " --quick" : "", r.seconds, r.train_seconds);
  for (const auto& f : r.files) std::fprintf(stderr, " %s", f.c_str());
  std::fprintf(stderr, "\n");
  return 0;
}

/// Prints "bahdanau: error: " and the message's first line on stderr; the details some messages
/// carry on later lines (a list of problems, a file header) follow, indented, and no line is
/// longer than 300 characters.
void print_error(const std::string& what) {
  std::istringstream in(what);
  bool first = true;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.empty()) continue;
    line = elide(line, 300);
    if (first) std::fprintf(stderr, "bahdanau: error: %s\n", line.c_str());
    else std::fprintf(stderr, "  %s\n", line.c_str() + line.find_first_not_of(' '));
    first = false;
  }
  if (first) std::fprintf(stderr, "bahdanau: error: (no message)\n");
}

/// Prints an out-of-memory error as one line: tapegrad's allocator says how many bytes of what it
/// could not get; a plain std::bad_alloc says nothing more.
void print_out_of_memory(const std::bad_alloc& e) {
  const std::string what = e.what();
  if (what.empty() || what == "std::bad_alloc") print_error("out of memory");
  else if (what.rfind("out of memory", 0) == 0) print_error(what);  // tg::OutOfMemoryError says it already
  else print_error("out of memory: " + what);
}

}  // namespace

int tg::cli::bahdanau_main(int argc, char** argv, const MainOptions& options) {
  CLI::App app{"Bahdanau attention translator (tapegrad): train, translate, evaluate, score."};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text,
                       "Print the program, the CPU, its vector features, the kernel paths and the bf16 path, then exit");

  // train
  TrainArgs ta;
  CLI::App* train_cmd = app.add_subcommand("train", "Train a translator on sentence pairs or a built-in task");
  CLI::Option *data_opt = nullptr, *task_opt = nullptr;
  ta.data.add_options(train_cmd, data_opt, task_opt, 0);
  ta.opts["data"] = data_opt;
  ta.opts["task"] = task_opt;
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

  // translate
  TranslateArgs tr;
  CLI::App* translate_cmd = app.add_subcommand(
      "translate",
      "Translate sentences (arguments, or one per line on stdin); prints one translation per line and nothing else "
      "on stdout");
  translate_cmd->add_option("--model", tr.model, "Checkpoint directory")->required();
  tr.decode.add_options(translate_cmd);
  translate_cmd->add_option("--heatmap", tr.heatmap, "Write the first sentence's attention as an SVG heatmap");
  translate_cmd->add_option("--attention-out", tr.attention_out,
                            "Write the first sentence's attention as float32 .npy (decoding steps, source positions)");
  translate_cmd->add_option("--bars", tr.bars, "Write the first sentence's attention as per-step bar charts (SVG)");
  translate_cmd->add_flag("--show-attention", tr.show_attention, "Draw each sentence's attention on stderr");
  tr.attention_layer_opt = translate_cmd->add_option("--attention-layer", tr.attention_layer,
                            "transformer: decoder layer whose cross-attention is shown (-1 = the last)");
  tr.attention_head_opt = translate_cmd->add_option("--attention-head", tr.attention_head,
                            "transformer: head shown (-1 = the mean over heads)");
  translate_cmd->add_flag("--quiet", tr.quiet,
                          "No warnings on stderr about unknown tokens (read as <unk>) or inputs cut to the model's "
                          "num_steps");
  translate_cmd->add_option("--threads", tr.threads, "Threads (0 = all cores)");
  translate_cmd->add_option("sentences", tr.sentences, "Sentences to translate (default: read stdin)");
  if (options.in) tr.in = options.in;

  // eval
  EvalArgs ea;
  CLI::App* eval_cmd = app.add_subcommand("eval", "Score a checkpoint: BLEU-4, d2l's BLEU-k, exact match, token accuracy; subword checkpoints also "
                 "sacreBLEU-compatible BLEU and chrF2 on the decoded sentences");
  eval_cmd->add_option("--model", ea.model, "Checkpoint directory")->required();
  CLI::Option *edata = nullptr, *etask = nullptr;
  ea.data.add_options(eval_cmd, edata, etask, 1);
  ea.opts["data"] = edata;
  ea.opts["task"] = etask;
  eval_cmd->add_option("--split", ea.split,
                       "Score the training run's own 'train' or 'heldout' pairs (data and split from training.json)")
      ->check(CLI::IsMember({"train", "heldout"}));
  ea.decode.add_options(eval_cmd);
  eval_cmd->add_option("--bleu-k", ea.bleu_k, "k of d2l's BLEU")->check(kPositive)->capture_default_str();
  eval_cmd->add_option("--output", ea.output, "Also write the translations, one per line, to this file");
  eval_cmd->add_option("--threads", ea.threads, "Threads (0 = all cores)");

  // bleu
  BleuArgs ba;
  CLI::App* bleu_cmd = app.add_subcommand(
      "bleu", "Score a system output against references: corpus BLEU-4 of whitespace tokens (default), "
              "sacreBLEU-compatible BLEU, or chrF2");
  bleu_cmd->add_option("--hyp", ba.hyp, "System output, one sentence per line; repeat to score several systems")
      ->required()->take_all();
  bleu_cmd->add_option("--ref", ba.ref, "References, one per line")->required();
  bleu_cmd->add_option("--label", ba.label, "Name of each --hyp (repeat, in the same order; default: the file name)")
      ->take_all();
  bleu_cmd->add_option("--metric", ba.metric,
                       "bleu4: BLEU-4 in [0, 1] of whitespace-split lines (Papineni, no smoothing); "
                       "sacrebleu: BLEU in [0, 100] as sacreBLEU 2.x computes it on detokenised text (13a, exp "
                       "smoothing), with its signature; chrf: chrF2 as sacreBLEU 2.x")
      ->check(CLI::IsMember({"bleu4", "sacrebleu", "chrf"}))->capture_default_str();
  ba.tokenize_opt = bleu_cmd->add_option("--tokenize", ba.tokenize, "sacrebleu: 13a (sacreBLEU's default) or none")
                        ->check(CLI::IsMember({"13a", "none"}))->capture_default_str();
  bleu_cmd->add_flag("--by-length", ba.by_length,
                     "Score each source-length bucket on its own (sacrebleu or chrf; needs --src): one row per "
                     "bucket with its range in source words (whitespace-separated), its sentence count and each "
                     "system's corpus score over that bucket's lines, then 'all'");
  bleu_cmd->add_option("--src", ba.src, "Source sentences, one per line, aligned with --ref (for --by-length)");
  ba.buckets_opt = bleu_cmd->add_option("--buckets", ba.buckets,
                                        "--by-length buckets: the first length of each, comma-separated; the last "
                                        "bucket has no upper bound (the default suits fra.txt: 1-2, 3-4, ..., 13-14, 15+)")
                       ->capture_default_str();
  bleu_cmd->add_option("--csv", ba.csv, "--by-length: also write the table as CSV (bucket,min_words,max_words,sentences,"
                                        "mean_words, then one column per system)");
  bleu_cmd->add_option("--svg", ba.svg, "--by-length: also plot it as SVG (one line per system; x = mean source "
                                        "length of each bucket)");
  bleu_cmd->add_option("--d2l-k", ba.d2l_k, "Print d2l's sentence-level BLEU-k of each line instead")->check(CLI::Range(1, 8));

  // split
  SplitArgs sa;
  CLI::App* split_cmd = app.add_subcommand(
      "split", "Deterministic train/dev/test split of a sentence-pair file (pairs sharing a sentence stay in one "
               "part), written as DIR/{train,dev,test}.tsv, .src.txt and .ref.txt");
  split_cmd->add_option("--data", sa.data, "Tab-separated sentence pairs, e.g. fra.txt")->required();
  split_cmd->add_option("--out", sa.out, "Output directory")->required();
  split_cmd->add_option("--test", sa.test, "Test pairs")->check(kNonNegative)->capture_default_str();
  split_cmd->add_option("--dev", sa.dev, "Dev pairs")->check(kNonNegative)->capture_default_str();
  split_cmd->add_option("--seed", sa.seed, "Mixed into the sentence hash (another seed, another split)")
      ->capture_default_str();
  split_cmd->add_flag("--reverse", sa.reverse, "Write the second column as the source (same split as without)");

  // plot
  PlotArgs pa;
  CLI::App* plot_cmd = app.add_subcommand("plot", "Curves from one or more --log-csv files on one SVG");
  plot_cmd->add_option("--csv", pa.csv, "A per-step log written by train --log-csv (repeatable)")->required();
  plot_cmd->add_option("--label", pa.labels, "Legend label of each --csv, in order (default: the file name)");
  plot_cmd->add_option("--out", pa.out, "Output SVG file")->required();
  plot_cmd->add_option("--column", pa.column, "Column to plot (rows where it is empty are skipped)")->capture_default_str();
  plot_cmd->add_option("--x", pa.x, "Column of the x axis, e.g. elapsed_s for wall time")->capture_default_str();
  plot_cmd->add_flag("--x-minutes", pa.x_minutes, "The --x column holds seconds: plot it in minutes");
  plot_cmd->add_option("--smooth", pa.smooth, "Moving average over N steps")->check(kPositive)->capture_default_str();
  plot_cmd->add_option("--title", pa.title, "Plot title");
  plot_cmd->add_flag("--log", pa.log, "Logarithmic y axis");

  // experiment
  ExperimentArgs xa;
  CLI::App* exp_cmd = app.add_subcommand(
      "experiment", "Run an experiment (length, ablation, primes, scores): Markdown table on stdout, "
                    "NAME.md, CSV and SVG plot in --out-dir");
  exp_cmd->add_option("name", xa.name, "Experiment")->required()->check(CLI::IsMember(experiment_names()));
  exp_cmd->add_flag("--quick", xa.o.quick, "Small settings that finish in well under a minute");
  exp_cmd->add_option("--out-dir", xa.o.out_dir, "Output directory (default out/experiments/NAME)");
  exp_cmd->add_option("--threads", xa.o.threads, "Threads (0 = all cores)")->check(kNonNegative);
  exp_cmd->add_option("--seed", xa.o.seed, "Seed (rounds use seed + round - 1)")->capture_default_str();
  exp_cmd->add_option("--data", xa.o.data_file, "length: also study sentence pairs of this file (e.g. fra.txt)")
      ->check(CLI::ExistingFile);
  exp_cmd->add_option("--data-max-len", xa.o.data_max_len, "length: longest sentence taken from --data (tokens)")
      ->check(kPositive)->capture_default_str();
  exp_cmd->add_option("--task", xa.o.task, "ablation (default primes) / scores (default dates): task")
      ->check(CLI::IsMember(task_names()));
  exp_cmd->add_option("--max-lens", xa.max_lens, "ablation/primes: comma-separated maximum lengths, e.g. 10,60,110");
  exp_cmd->add_option("--max-len", xa.o.max_len, "length: longest reverse source; scores: task length")->check(kPositive);
  exp_cmd->add_option("--rounds", xa.o.rounds, "Fresh initialisations per setting")->check(kPositive);
  exp_cmd->add_option("--steps", xa.o.steps, "Optimizer steps per model")->check(kPositive);
  exp_cmd->add_option("--batch-size", xa.o.batch_size, "Minibatch size")->check(int_range(1, limits::kMaxBatchSize));
  exp_cmd->add_option("--lr", xa.o.lr, "Adam learning rate")->check(kPositive);
  exp_cmd->add_option("--embed-size", xa.o.embed_size, "Embedding size")->check(kWidth);
  exp_cmd->add_option("--num-hiddens", xa.o.num_hiddens, "Recurrent state size")->check(kWidth);
  exp_cmd->add_option("--train-pairs", xa.o.train_pairs, "Training pairs")->check(kPositive);
  exp_cmd->add_option("--test-pairs", xa.o.test_pairs, "Held-out pairs scored")->check(kPositive);
  exp_cmd->add_option("--precision", xa.precision, kPrecisionHelp)->check(CLI::IsMember(kPrecisions))->capture_default_str();
  exp_cmd->add_flag("--quiet", xa.quiet, "No per-model progress lines on stderr");

  // average
  AverageArgs aa;
  CLI::App* avg_cmd = app.add_subcommand(
      "average", "Average the weights of checkpoints of one model (e.g. a run's last few) into a new checkpoint "
                 "for translate/eval (no training state: it does not resume)");
  avg_cmd->add_option("--models", aa.models, "Checkpoint directories (same architecture, vocabularies, tokenizer)")
      ->required()->expected(1, -1);
  avg_cmd->add_option("--out", aa.out, "Where the averaged checkpoint is written (atomically)")->required();

  // gradcheck
  GradcheckArgs ga;
  CLI::App* grad_cmd = app.add_subcommand(
      "gradcheck", "Float64 gradient check of a tiny instance of a registered model: one line per parameter "
                   "(entries checked, worst absolute and relative error, pass or fail, time); exit status 1 on failure");
  grad_cmd->add_option("--model", ga.model, model_help())->check(CLI::IsMember(model_names()))->capture_default_str();
  grad_cmd->add_option("--max-entries", ga.max_entries, "Check at most N entries per parameter, picked with --seed (0 = all)")
      ->check(kNonNegative)->capture_default_str();
  grad_cmd->add_option("--seed", ga.seed, "Seed of the model, the batch and the picked entries")->capture_default_str();
  grad_cmd->add_option("--eps", ga.eps, "Finite-difference step")->check(kPositive)->capture_default_str();
  grad_cmd->add_option("--atol", ga.atol, "Absolute tolerance")->check(kNonNegative)->capture_default_str();
  grad_cmd->add_option("--rtol", ga.rtol, "Relative tolerance")->check(kNonNegative)->capture_default_str();

  // CLI11 answers a mistyped subcommand with "a subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) known = known || sub->check_name(argv[1]);
    if (!known) {
      std::fprintf(stderr, "bahdanau: error: unknown subcommand '%s' (see --help)\n", elide(argv[1], 60).c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help
      const int status = app.exit(e, options.help_out ? *options.help_out : std::cout);
      try {
        io::flush_stdout_or_throw();
      } catch (const std::exception& flush_error) {
        print_error(flush_error.what());
        return 2;
      }
      return status;
    }
    std::string what = e.what();  // CLI11 messages are one line; they quote what was given, so elide
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::fprintf(stderr, "bahdanau: error: %s (see --help)\n", elide(what, 140).c_str());
    return 2;
  } catch (const std::bad_alloc& e) {
    print_out_of_memory(e);
    return 2;
  }
  if (options.run_subcommand)
    for (const CLI::App* chosen : app.get_subcommands())
      if (!options.run_subcommand(chosen->get_name())) return 0;
  // Under mpirun, train runs on every rank (tg::dist); the other commands are single-process.
  std::optional<dist::Context> mpi;
  try {
    if (train_cmd->parsed()) mpi.emplace(&argc, &argv);
  } catch (const std::exception& e) {
    print_error(e.what());
    return 2;
  }
  // On an error, the other ranks would wait for this one in their next collective: stop them now.
  auto stop_other_ranks = [] {
    if (dist::world_size() > 1) dist::abort("stopping every rank after the error above", 2);
  };
  try {
    int status = 0;
    if (train_cmd->parsed()) status = run_train(ta);
    else if (translate_cmd->parsed()) status = run_translate(tr);
    else if (eval_cmd->parsed()) status = run_eval(ea);
    else if (bleu_cmd->parsed()) status = run_bleu(ba);
    else if (split_cmd->parsed()) status = run_split(sa);
    else if (plot_cmd->parsed()) status = run_plot(pa);
    else if (exp_cmd->parsed()) status = run_experiment_cmd(xa);
    else if (grad_cmd->parsed()) status = run_gradcheck(ga);
    else if (avg_cmd->parsed()) status = run_average(aa);
    // Results that never reached stdout (a full disk, a closed pipe, /dev/full) are an error.
    io::flush_stdout_or_throw();
    return status;
  } catch (const std::bad_alloc& e) {  // before std::exception: say what it is, not "std::bad_alloc"
    std::fflush(stdout);
    print_out_of_memory(e);
    stop_other_ranks();
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    print_error(e.what());
    stop_other_ranks();
    return 2;
  }
}

#ifndef TG_BAHDANAU_NO_MAIN
int main(int argc, char** argv) { return tg::cli::bahdanau_main(argc, argv); }
#endif
