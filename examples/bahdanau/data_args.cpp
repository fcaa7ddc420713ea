// DataArgs (data_args.h): the training data's flags of train and eval.
#include "data_args.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "autograd/random.h"
#include "models/text/split.h"
#include "models/text/tasks.h"

#include "common.h"

namespace tg::cli {

using namespace tg::models;

void DataArgs::add_options(CLI::App* app, CLI::Option*& data_opt, CLI::Option*& task_opt, std::int64_t default_task_seed) {
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

void DataArgs::record(RunRecord& r) const {
  // Absolute, so that eval --split and train --init-from find it from any working directory.
  r.data = data.empty() ? std::string() : std::filesystem::absolute(data).lexically_normal().string();
  r.reverse = reverse;
  r.subword = subword;
  r.subword_type = subword > 0 ? subword_type : std::string();
  r.task = task;
  r.num_examples = num_examples;
  r.task_seed = task_seed;
  r.min_len = min_len;
  r.max_len = max_len;
  r.min_freq = min_freq;
  r.holdout = holdout;
}

void DataArgs::from_record(const RunRecord& r, const std::string& ckpt) {
  const std::string missing = ckpt + "/training.json does not record the training data; give --data or --task";
  reverse = r.reverse;
  if (!r.data.empty()) {
    data = r.data;
    std::error_code ec;
    if (!std::filesystem::exists(data, ec))
      throw UsageError(ckpt + "/training.json records the training data as " + data + ", which does not exist here; give --data");
  } else if (!r.task.empty()) {
    task = r.task;
  } else {
    throw UsageError(missing);
  }
  if (!r.num_examples || !r.task_seed || !r.min_len || !r.max_len || !r.min_freq || !r.holdout) throw UsageError(missing);
  num_examples = *r.num_examples;
  task_seed = *r.task_seed;
  min_len = *r.min_len;
  max_len = *r.max_len;
  min_freq = *r.min_freq;
  holdout = *r.holdout;
  subword = r.subword;
  if (!r.subword_type.empty()) subword_type = r.subword_type;
}

std::vector<SentencePair> DataArgs::pairs() const {
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

Holdout DataArgs::holdout_spec() const {
  if (holdout < 0) throw UsageError("--holdout must be >= 0");
  if (holdout == 0) return Holdout();
  if (holdout < 1) return Holdout::fraction(holdout);
  if (holdout != std::floor(holdout)) throw UsageError("--holdout must be a fraction below 1 or a whole count");
  if (holdout > 1e15) throw UsageError("--holdout " + std::to_string(holdout) + " is more pairs than any corpus holds");
  return Holdout::count(static_cast<std::size_t>(holdout));
}

Holdout DataArgs::holdout_for(std::size_t n) const {
  const Holdout h = holdout_spec();
  try {
    h.resolve(n);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--holdout: ") + e.what());
  }
  return h;
}

TranslationData DataArgs::make(std::int64_t num_steps, std::uint64_t seed, const SubwordModel* subword_model) const {
  Generator gen(seed);
  const auto all = pairs();
  const auto options = TranslationDataOptions().num_steps(num_steps).min_freq(min_freq).holdout(holdout_for(all.size()));
  if (subword_model) return make_translation_data(encode_pairs(all, *subword_model), options, gen);
  return make_translation_data(all, options, gen);
}

std::vector<SentencePair> DataArgs::raw_part(std::uint64_t seed, bool heldout) const {
  const auto all = pairs();
  Generator gen(seed);
  const auto rows = split_indices(all.size(), holdout_for(all.size()), gen);
  std::vector<SentencePair> out;
  for (std::int64_t r : heldout ? rows.second : rows.first) out.push_back(all[static_cast<std::size_t>(r)]);
  return out;
}

SubwordModel DataArgs::train_subword(std::uint64_t seed) const {
  std::vector<std::string> sentences;
  for (const auto& p : raw_part(seed, false)) {
    sentences.push_back(p.src);
    sentences.push_back(p.tgt);
  }
  return SubwordModel::train(sentences,
                             SubwordOptions().vocab_size(subword).type(parse_subword_type(subword_type, "--subword-type")));
}

}  // namespace tg::cli
