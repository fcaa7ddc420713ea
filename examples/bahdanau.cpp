// bahdanau: train, run and score attention translators from the command line.
//
//   bahdanau train --task dates --steps 2000 --out ckpt --log-csv loss.csv
//   mpirun -np 2 bahdanau train --task dates --steps 2000 --out ckpt    (data parallel; rank 0 writes)
//   bahdanau translate --model ckpt --heatmap att.svg "the 3 rd of march 1 9 9 7"
//   echo "go ." | bahdanau translate --model ckpt --beam 4
//   bahdanau eval --model ckpt --split heldout
//   bahdanau bleu --hyp out.txt --ref ref.txt
//   bahdanau experiment length --quick --out-dir out/experiments/length
//
// stdout carries results only (translations, scores); progress, summaries and warnings go to
// stderr. Any usage error or unreadable input prints "bahdanau: error: ..." on stderr (one line;
// a few errors add indented details on the lines after it) and exits with status 2.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "autograd/dist.h"
#include "autograd/error_text.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "models/plots/attention_bars.h"
#include "models/training/checkpoint.h"
#include "models/text/data.h"
#include "models/decoding/decode.h"
#include "models/experiments/experiments.h"
#include "models/plots/heatmap.h"
#include "models/decoding/metrics.h"
#include "models/plots/plot.h"
#include "models/translators/limits.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq.h"
#include "models/text/tasks.h"
#include "models/training/trainer.h"
#include "nn/serialize.h"

using namespace tg;
using namespace tg::models;

namespace {

/// A user-facing error: printed as one line, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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

  void add_options(CLI::App* app, CLI::Option*& data_opt, CLI::Option*& task_opt, std::int64_t default_task_seed) {
    task_seed = default_task_seed;
    data_opt = app->add_option("--data", data, "Tab-separated sentence pairs (UTF-8): source<TAB>target[<TAB>ignored]");
    std::string names;
    for (const auto& n : task_names()) names += (names.empty() ? "" : ", ") + n;
    task_opt = app->add_option("--task", task, "Built-in synthetic task: " + names)->check(CLI::IsMember(task_names()));
    data_opt->excludes(task_opt);
    app->add_option("--num-examples", num_examples, "Use the first N pairs of --data, or generate N task pairs (default 1000)")
        ->check(kNonNegative);
    app->add_option("--task-seed", task_seed, "Seed of the --task generator")->capture_default_str();
    app->add_option("--min-len", min_len, "Shortest task source (reverse, copy, primes)")->capture_default_str();
    app->add_option("--max-len", max_len, "Longest task source (reverse, copy, primes)")->capture_default_str();
  }

  std::map<std::string, std::string> notes() const {
    std::map<std::string, std::string> n;
    if (!data.empty()) n["data"] = data;
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
    if (n.count("data")) data = n.at("data");
    else if (n.count("task")) task = n.at("task");
    else get("data");
    for (const char* key : {"num_examples", "task_seed", "min_len", "max_len", "min_freq", "holdout"}) get(key);
    num_examples = note_value<std::int64_t>(n, "num_examples", ckpt);
    task_seed = note_value<std::int64_t>(n, "task_seed", ckpt);
    min_len = note_value<std::int64_t>(n, "min_len", ckpt);
    max_len = note_value<std::int64_t>(n, "max_len", ckpt);
    min_freq = note_value<std::int64_t>(n, "min_freq", ckpt);
    holdout = note_value<double>(n, "holdout", ckpt);
  }

  std::vector<SentencePair> pairs() const {
    if (!data.empty())
      return read_sentence_pairs(data, num_examples > 0 ? std::optional<std::size_t>(num_examples) : std::nullopt);
    if (task.empty()) throw UsageError("give --data FILE or --task NAME");
    return make_task(task, {.count = num_examples > 0 ? num_examples : 1000,
                            .min_len = min_len,
                            .max_len = max_len,
                            .seed = static_cast<std::uint64_t>(task_seed)});
  }

  Holdout holdout_spec() const {
    if (holdout < 0) throw UsageError("--holdout must be >= 0");
    if (holdout == 0) return Holdout();
    if (holdout < 1) return Holdout::fraction(holdout);
    if (holdout != std::floor(holdout)) throw UsageError("--holdout must be a fraction below 1 or a whole count");
    return Holdout::count(static_cast<std::size_t>(holdout));
  }

  /// The data exactly as train makes it: split with Generator(seed).
  TranslationData make(std::int64_t num_steps, std::uint64_t seed) const {
    Generator gen(seed);
    return make_translation_data(pairs(), TranslationDataOptions().num_steps(num_steps).min_freq(min_freq).holdout(holdout_spec()), gen);
  }
};

/// Re-encodes both parts of `data` with a checkpoint's vocabularies.
void use_vocabularies(TranslationData& data, const Vocab& src, const Vocab& tgt, std::int64_t num_steps) {
  data.src_vocab = src;
  data.tgt_vocab = tgt;
  data.train = Seq2SeqDataset(data.train_pairs, src, tgt, num_steps);
  data.heldout = Seq2SeqDataset(data.heldout_pairs, src, tgt, num_steps);
}

void set_threads(int threads) {
  if (threads < 0) throw UsageError("--threads must be >= 0");
  if (threads > 0) set_num_threads(threads);
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw UsageError(path + ": cannot open for writing");
  out << bytes;
  out.close();
  if (!out) throw UsageError(path + ": write failed");
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot open");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
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
  double dropout = 0.1;
  std::string readout = "maxout", attention = "additive";
  std::int64_t batch_size = 64, epochs = 10, steps = 0;
  double lr = 0.005, clip = 1.0;
  std::uint64_t seed = 0;
  bool no_shuffle = false, quiet = false, compact_grads = false;
  std::string init_from, log_csv, out;
  std::int64_t checkpoint_every = 1;
  std::int64_t shards = 0;
  int threads = 0;
  std::map<std::string, CLI::Option*> opts;
};

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
    if (given("dropout")) config.dropout = a.dropout;  // not part of the weights: may change
    // Unset training options continue the checkpoint's run.
    if (ck->training) {
      const TrainingState& t = *ck->training;
      if (!given("seed")) a.seed = t.seed;
      if (!given("batch-size") && t.batch_size > 0) a.batch_size = t.batch_size;
      if (!given("lr") && t.lr > 0) a.lr = t.lr;
      if (!given("clip")) a.clip = t.clip;
      if (!given("no-shuffle")) a.no_shuffle = !t.shuffle;
      if (!given("data") && !given("task")) a.data.from_notes(t.notes, a.init_from);
    }
    if (a.out.empty()) a.out = a.init_from;
  } else {
    config.model = a.model;
    config.embed_size = a.embed_size;
    config.num_hiddens = a.num_hiddens;
    config.num_layers = given("num-layers") ? a.num_layers : config.model.spec().default_num_layers;
    config.dropout = a.dropout;
    config.num_steps = a.num_steps;
    config.readout = parse_option<Readout>(a.readout, "--readout");
    config.attention = parse_option<AttentionScore>(a.attention, "--attention");
    config.maxout_units = a.maxout_units;
  }
  if (a.data.data.empty() && a.data.task.empty()) throw UsageError("train: give --data FILE or --task NAME");

  TranslationData data = a.data.make(config.num_steps, a.seed);
  if (data.train.size() == 0) throw UsageError("train: no training pairs");
  std::shared_ptr<Seq2Seq> model;
  if (ck) {
    use_vocabularies(data, ck->src_vocab, ck->tgt_vocab, config.num_steps);
    model = ck->model;
    if (config.dropout != ck->config.dropout) {
      // Rebuild with the new dropout and copy the weights over.
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
  if (a.out.empty() && lead) std::fprintf(stderr, "bahdanau: warning: no --out given, the trained model will not be saved\n");

  TrainOptions opts;
  opts.batch_size(a.batch_size).lr(a.lr).clip(a.clip).seed(a.seed).shuffle(!a.no_shuffle).log_csv(a.log_csv)
      .out_dir(a.out).checkpoint_every(a.checkpoint_every).progress(!a.quiet).notes(a.data.notes());
  if (a.steps > 0) opts.steps(a.steps);
  else opts.epochs(a.epochs);
  if (ck && ck->training) opts.resume_from(a.init_from);
  opts.shards(a.shards);

  if (lead) std::fprintf(stderr, "bahdanau: %s, %lld parameters, %lld training pairs (%lld held out), vocab %lld/%lld, %d threads\n",
               std::string(config.model.name()).c_str(), static_cast<long long>(model->num_parameters()),
               static_cast<long long>(data.train.size()), static_cast<long long>(data.heldout.size()),
               static_cast<long long>(data.src_vocab.size()), static_cast<long long>(data.tgt_vocab.size()),
               num_threads());
  const TrainResult r = train(*model, data, opts);
  if (!lead) return 0;
  if (r.ranks > 1 || r.shards > 1)
    std::fprintf(stderr, "bahdanau: data parallel: %lld ranks, %lld shards per batch, %.1f MiB of gradients per step "
                         "per rank, %.2f s waiting for transfers\n",
                 static_cast<long long>(r.ranks), static_cast<long long>(r.shards),
                 r.ddp.steps > 0 ? static_cast<double>(r.ddp.bytes_sent) / r.ddp.steps / (1 << 20) : 0.0,
                 r.ddp.wait_seconds);
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
  if (data.heldout.size() > 0) {
    const EvalReport rep = evaluate(*model, data.heldout_pairs, data.src_vocab, data.tgt_vocab);
    std::fprintf(stderr, "bahdanau: held out (%lld pairs): loss %.4f, BLEU-4 %.4f, exact match %.4f\n",
                 static_cast<long long>(rep.count), rep.loss, rep.bleu4, rep.exact_match);
  }
  return 0;
}

// ---- translate ------------------------------------------------------------------------------

struct TranslateArgs {
  std::string model;
  std::int64_t beam = 1, max_steps = 0;
  double alpha = 1.0;
  std::string heatmap, attention_out, bars;
  bool show_attention = false, quiet = false;
  int threads = 0;
  std::vector<std::string> sentences;
};

int run_translate(TranslateArgs& a) {
  set_threads(a.threads);
  Checkpoint ck = load_checkpoint(a.model);
  const bool wants_attention = !a.heatmap.empty() || !a.attention_out.empty() || !a.bars.empty() || a.show_attention;
  if (wants_attention && !ck.model->has_attention())
    throw UsageError(a.model + ": model '" + std::string(ck.config.model.name()) + "' has no attention weights to show");
  std::vector<std::string> sentences = a.sentences;
  if (sentences.empty()) {
    for (std::string line; std::getline(std::cin, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      sentences.push_back(line);
    }
  }
  if (sentences.empty()) return 0;
  // A model trained on a built-in task reads that task's tokenisation ("3rd" -> "3 rd").
  if (ck.training && ck.training->notes.count("task"))
    for (auto& s : sentences) s = task_input(ck.training->notes.at("task"), s);
  const auto out = translate(*ck.model, sentences, ck.src_vocab, ck.tgt_vocab,
                             DecodeOptions().beam_size(a.beam).length_alpha(a.alpha).max_steps(a.max_steps));
  for (const auto& tr : out) std::fprintf(stdout, "%s\n", tr.text().c_str());
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
    write_file(a.attention_out, nn::npy_encode(t));
  }
  if (!a.heatmap.empty())
    write_file(a.heatmap, attention_heatmap_svg({first.source, first.step_labels(), first.attention}, sentences.front()));
  if (!a.bars.empty())
    write_file(a.bars, attention_bars_svg({first.source, first.step_labels(), first.attention}, sentences.front()));
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
  std::int64_t beam = 1, max_steps = 0;
  int bleu_k = 2;
  int threads = 0;
  std::string output;
  std::map<std::string, CLI::Option*> opts;
};

int run_eval(EvalArgs& a) {
  set_threads(a.threads);
  Checkpoint ck = load_checkpoint(a.model);
  TokenizedPairs pairs;
  const bool have_data = a.opts.at("data")->count() > 0 || a.opts.at("task")->count() > 0;
  if (!a.split.empty()) {
    // Reproduce the training run's data and split from the checkpoint's notes.
    if (!ck.training) throw UsageError(a.model + ": no training.json, so --split cannot reproduce the training data");
    if (!have_data) a.data.from_notes(ck.training->notes, a.model);
    else {
      const auto& n = ck.training->notes;
      if (n.count("min_freq")) a.data.min_freq = note_value<std::int64_t>(n, "min_freq", a.model);
      if (n.count("holdout")) a.data.holdout = note_value<double>(n, "holdout", a.model);
    }
    TranslationData data = a.data.make(ck.config.num_steps, ck.training->seed);
    pairs = a.split == "train" ? data.train_pairs : data.heldout_pairs;
    if (a.split == "heldout" && pairs.size() == 0)
      throw UsageError(a.model + ": the training run held nothing out (train with --holdout)");
  } else {
    if (!have_data) throw UsageError("eval: give --data FILE, --task NAME or --split train|heldout");
    pairs = tokenize_pairs(a.data.pairs());
  }
  EvalOptions eo;
  eo.decode = DecodeOptions().beam_size(a.beam).max_steps(a.max_steps);
  eo.bleu_k = a.bleu_k;
  const EvalReport rep = evaluate(*ck.model, pairs, ck.src_vocab, ck.tgt_vocab, eo);
  if (!a.output.empty()) {
    std::string text;
    for (const auto& tr : rep.translations) text += tr.text() + "\n";
    write_file(a.output, text);
  }
  std::printf("pairs           %lld\n", static_cast<long long>(rep.count));
  std::printf("bleu4           %.4f\n", rep.bleu4);
  std::printf("bleu%d_d2l       %.4f\n", rep.k, rep.bleu_k);
  std::printf("exact_match     %.4f\n", rep.exact_match);
  std::printf("token_accuracy  %.4f\n", rep.token_accuracy);
  std::printf("psa             %.4f\n", rep.psa);
  std::printf("lcsr            %.4f\n", rep.lcsr);
  std::printf("loss            %.4f\n", rep.loss);
  return 0;
}

// ---- bleu -----------------------------------------------------------------------------------

int run_bleu(const std::string& hyp_path, const std::string& ref_path, int d2l_k) {
  const auto hyp = read_lines(hyp_path);
  const auto ref = read_lines(ref_path);
  if (hyp.size() != ref.size())
    throw UsageError(hyp_path + " has " + std::to_string(hyp.size()) + " lines but " + ref_path + " has " +
                     std::to_string(ref.size()));
  if (d2l_k > 0) {  // d2l's sentence-level BLEU-k, one score per line
    for (std::size_t i = 0; i < hyp.size(); ++i) std::printf("%.3f\n", bleu_d2l(hyp[i], ref[i], d2l_k));
    return 0;
  }
  const BleuResult b = corpus_bleu(hyp, ref, 4);
  std::printf("BLEU-4 %.4f (p1 %.4f p2 %.4f p3 %.4f p4 %.4f, BP %.4f, hyp_len %lld, ref_len %lld)\n", b.score,
              b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.brevity_penalty,
              static_cast<long long>(b.hyp_len), static_cast<long long>(b.ref_len));
  return 0;
}

// ---- plot ---------------------------------------------------------------------------------

struct PlotArgs {
  std::vector<std::string> csv, labels;
  std::string out, column = "loss", title;
  bool log = false;
  int smooth = 1;
};

int run_plot(const PlotArgs& a) {
  if (!a.labels.empty() && a.labels.size() != a.csv.size())
    throw UsageError("--label given " + std::to_string(a.labels.size()) + " times for " + std::to_string(a.csv.size()) +
                     " --csv files");
  std::vector<Series> series;
  for (std::size_t i = 0; i < a.csv.size(); ++i) {
    Series s = read_csv_series(a.csv[i], "step", a.column);
    if (!a.labels.empty()) s.label = a.labels[i];
    if (const std::size_t bad = count_unplottable({s}, a.log))
      std::cerr << "bahdanau plot: " << a.csv[i] << ": skipped " << bad << " of " << s.y.size()
                << (a.log ? " points (non-finite, or not positive on the log axis)\n" : " points (non-finite)\n");
    if (a.smooth > 1) {  // trailing moving average over the last N finite values: per-batch losses are noisy
      std::vector<double> y(s.y.size()), window;
      double acc = 0;
      std::size_t oldest = 0;
      for (std::size_t k = 0; k < s.y.size(); ++k) {
        if (!std::isfinite(s.y[k])) {
          y[k] = s.y[k];  // stays unplottable
          continue;
        }
        window.push_back(s.y[k]);
        acc += s.y[k];
        if (window.size() - oldest > static_cast<std::size_t>(a.smooth)) acc -= window[oldest++];
        y[k] = acc / static_cast<double>(window.size() - oldest);
      }
      s.y = std::move(y);
    }
    series.push_back(std::move(s));
  }
  PlotOptions o;
  o.title = a.title;
  o.y_label = a.column;
  o.log_y = a.log;
  write_file(a.out, line_plot_svg(series, o));
  return 0;
}

// ---- experiment -----------------------------------------------------------------------------

struct ExperimentArgs {
  std::string name;
  ExperimentOptions o;
  std::string max_lens;
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
  a.o.verbose = !a.quiet;
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Bahdanau attention translator (tapegrad): train, translate, evaluate, score."};
  app.require_subcommand(1);

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
  ta.opts["num-hiddens"] = train_cmd->add_option("--num-hiddens", ta.num_hiddens, "Recurrent state size")
                               ->check(kWidth)->capture_default_str();
  ta.opts["num-layers"] = train_cmd->add_option("--num-layers", ta.num_layers, "GRU layers (d2l; the others have 1)")
                              ->check(int_range(1, limits::kMaxLayers))->capture_default_str();
  ta.opts["dropout"] = train_cmd->add_option("--dropout", ta.dropout, "Dropout probability")
                           ->check(CLI::Range(0.0, 0.999))->capture_default_str();
  ta.opts["num-steps"] = train_cmd->add_option("--num-steps", ta.num_steps, "Sequence length (truncate/pad)")
                             ->check(int_range(1, limits::kMaxSteps))->capture_default_str();
  ta.opts["readout"] = train_cmd->add_option("--readout", ta.readout, "rnnsearch/rnnencdec output layer: maxout|linear")
                           ->check(CLI::IsMember(option_names<Readout>()))->capture_default_str();
  ta.opts["attention"] = train_cmd->add_option("--attention", ta.attention, "rnnsearch score: additive|dot|scaled_dot")
                             ->check(CLI::IsMember(option_names<AttentionScore>()))->capture_default_str();
  train_cmd->add_option("--maxout-units", ta.maxout_units, "Maxout output size (0 = num_hiddens / 2)")
      ->check(int_range(0, limits::kMaxWidth));
  train_cmd->add_option("--min-freq", ta.data.min_freq, "Tokens seen fewer times become <unk>")
      ->check(kNonNegative)->capture_default_str();
  train_cmd->add_option("--holdout", ta.data.holdout, "Pairs held out for evaluation: a fraction < 1 or a count")
      ->check(kNonNegative);
  ta.opts["batch-size"] = train_cmd->add_option("--batch-size", ta.batch_size, "Minibatch size")
                              ->check(int_range(1, limits::kMaxBatchSize))->capture_default_str();
  ta.opts["lr"] = train_cmd->add_option("--lr", ta.lr, "Adam learning rate")->check(kPositive)->capture_default_str();
  CLI::Option* epochs_opt = train_cmd->add_option("--epochs", ta.epochs, "Train until this many epochs in total")
                                ->check(kPositive)->capture_default_str();
  CLI::Option* steps_opt = train_cmd->add_option("--steps", ta.steps, "Train until this many optimizer steps in total")
                               ->check(kPositive);
  epochs_opt->excludes(steps_opt);
  ta.opts["clip"] = train_cmd->add_option("--clip", ta.clip, "Gradient-norm clipping (0 = off)")
                        ->check(kNonNegative)->capture_default_str();
  ta.opts["seed"] = train_cmd->add_option("--seed", ta.seed, "Seed of initialisation, split, shuffling and dropout")
                        ->capture_default_str();
  ta.opts["no-shuffle"] = train_cmd->add_flag("--no-shuffle", ta.no_shuffle, "Batches in file order");
  train_cmd->add_option("--init-from", ta.init_from,
                        "Continue from this checkpoint (exactly, if it has training.json and optimizer.npz); "
                        "unset options and the data source come from it; --out defaults to it");
  train_cmd->add_option("--log-csv", ta.log_csv, "Per-step log: step,epoch,loss,tokens,grad_norm,lr,elapsed_s");
  train_cmd->add_option("--out", ta.out, "Checkpoint directory, written at each epoch end and at the end");
  train_cmd->add_option("--checkpoint-every", ta.checkpoint_every, "Checkpoint every N epochs (0 = only at the end)")
      ->check(kNonNegative)->capture_default_str();
  train_cmd->add_option("--threads", ta.threads, "Threads (0 = all cores)")->capture_default_str();
  train_cmd->add_option("--shards", ta.shards,
                        "Split each batch into this many fixed shards (a multiple of the mpirun ranks; 0 = the "
                        "checkpoint's, else one per rank); a power of two gives the same result on any power-of-two "
                        "number of ranks dividing it")
      ->check(int_range(0, limits::kMaxBatchSize))->capture_default_str();
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
  translate_cmd->add_option("--beam", tr.beam, "Beam size (1 = greedy)")->check(int_range(1, limits::kMaxBeam))->capture_default_str();
  translate_cmd->add_option("--alpha", tr.alpha, "Beam length normalisation: score = log P / steps^alpha")
      ->check(kNonNegative)->capture_default_str();
  translate_cmd->add_option("--max-steps", tr.max_steps, "Longest output (0 = the model's num_steps)")
      ->check(kMaxSteps);
  translate_cmd->add_option("--heatmap", tr.heatmap, "Write the first sentence's attention as an SVG heatmap");
  translate_cmd->add_option("--attention-out", tr.attention_out,
                            "Write the first sentence's attention as float32 .npy (decoding steps, source positions)");
  translate_cmd->add_option("--bars", tr.bars, "Write the first sentence's attention as per-step bar charts (SVG)");
  translate_cmd->add_flag("--show-attention", tr.show_attention, "Draw each sentence's attention on stderr");
  translate_cmd->add_flag("--quiet", tr.quiet,
                          "No warnings on stderr about unknown tokens (read as <unk>) or inputs cut to the model's "
                          "num_steps");
  translate_cmd->add_option("--threads", tr.threads, "Threads (0 = all cores)");
  translate_cmd->add_option("sentences", tr.sentences, "Sentences to translate (default: read stdin)");

  // eval
  EvalArgs ea;
  CLI::App* eval_cmd = app.add_subcommand("eval", "Score a checkpoint: BLEU-4, d2l's BLEU-k, exact match, token accuracy");
  eval_cmd->add_option("--model", ea.model, "Checkpoint directory")->required();
  CLI::Option *edata = nullptr, *etask = nullptr;
  ea.data.add_options(eval_cmd, edata, etask, 1);
  ea.opts["data"] = edata;
  ea.opts["task"] = etask;
  eval_cmd->add_option("--split", ea.split,
                       "Score the training run's own 'train' or 'heldout' pairs (data and split from training.json)")
      ->check(CLI::IsMember({"train", "heldout"}));
  eval_cmd->add_option("--beam", ea.beam, "Beam size (1 = greedy)")->check(int_range(1, limits::kMaxBeam));
  eval_cmd->add_option("--max-steps", ea.max_steps, "Longest output (0 = the model's num_steps)")->check(kMaxSteps);
  eval_cmd->add_option("--bleu-k", ea.bleu_k, "k of d2l's BLEU")->check(kPositive)->capture_default_str();
  eval_cmd->add_option("--output", ea.output, "Also write the translations, one per line, to this file");
  eval_cmd->add_option("--threads", ea.threads, "Threads (0 = all cores)");

  // bleu
  std::string hyp, ref;
  CLI::App* bleu_cmd = app.add_subcommand("bleu", "Corpus BLEU-4 (Papineni et al.) of whitespace-tokenised lines");
  bleu_cmd->add_option("--hyp", hyp, "System output, one sentence per line")->required();
  bleu_cmd->add_option("--ref", ref, "References, one per line")->required();
  int d2l_k = 0;
  bleu_cmd->add_option("--d2l-k", d2l_k, "Print d2l's sentence-level BLEU-k of each line instead")->check(CLI::Range(1, 8));

  // plot
  PlotArgs pa;
  CLI::App* plot_cmd = app.add_subcommand("plot", "Curves from one or more --log-csv files on one SVG");
  plot_cmd->add_option("--csv", pa.csv, "A per-step log written by train --log-csv (repeatable)")->required();
  plot_cmd->add_option("--label", pa.labels, "Legend label of each --csv, in order (default: the file name)");
  plot_cmd->add_option("--out", pa.out, "Output SVG file")->required();
  plot_cmd->add_option("--column", pa.column, "Column to plot against step")->capture_default_str();
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
  exp_cmd->add_flag("--quiet", xa.quiet, "No per-model progress lines on stderr");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::string what = e.what();  // CLI11 messages are one line; they quote what was given, so elide
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::fprintf(stderr, "bahdanau: error: %s (see --help)\n", elide(what, 140).c_str());
    return 2;
  }
  // Under mpirun, train runs on every rank (tg::dist); the other commands are single-process.
  std::optional<dist::Context> mpi;
  try {
    if (train_cmd->parsed()) mpi.emplace(&argc, &argv);
  } catch (const std::exception& e) {
    print_error(e.what());
    return 2;
  }
  try {
    if (train_cmd->parsed()) return run_train(ta);
    if (translate_cmd->parsed()) return run_translate(tr);
    if (eval_cmd->parsed()) return run_eval(ea);
    if (bleu_cmd->parsed()) return run_bleu(hyp, ref, d2l_k);
    if (plot_cmd->parsed()) return run_plot(pa);
    if (exp_cmd->parsed()) return run_experiment_cmd(xa);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    print_error(e.what());
    // The other ranks would wait for this one in their next collective: stop them now.
    if (dist::world_size() > 1) dist::abort("stopping every rank after the error above", 2);
    return 2;
  }
  return 0;
}
