#pragma once
// The training data's flags, shared by train and eval: a sentence-pair file or a built-in task, how
// it is split and tokenised, and how a checkpoint's training.json records them (RunRecord).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "models/text/data.h"
#include "models/text/subword.h"
#include "models/training/checkpoint.h"

namespace tg::cli {

/// The data flags of train and eval.
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

  /// Adds --data, --task, --reverse, --num-examples, --task-seed, --min-len and --max-len to `app`
  /// (data_opt and task_opt: the first two).
  void add_options(CLI::App* app, CLI::Option*& data_opt, CLI::Option*& task_opt, std::int64_t default_task_seed);

  /// Sets the data fields of `r`, what training.json records of the data (read back by from_record).
  void record(models::RunRecord& r) const;

  /// Fills the fields from a checkpoint's record (train --init-from / eval --split).
  void from_record(const models::RunRecord& r, const std::string& ckpt);

  /// The sentence pairs: --data's (the first --num-examples; reversed with --reverse) or --task's.
  std::vector<models::SentencePair> pairs() const;

  /// --holdout as a Holdout (none, a fraction or a count).
  models::Holdout holdout_spec() const;

  /// holdout_spec(), checked against the `n` pairs it will split (the library's error, named --holdout).
  models::Holdout holdout_for(std::size_t n) const;

  /// The data exactly as train makes it: split with Generator(seed); tokenised as d2l does, or
  /// into the pieces of `subword_model`.
  models::TranslationData make(std::int64_t num_steps, std::uint64_t seed,
                               const models::SubwordModel* subword_model = nullptr) const;

  /// The raw pairs of make()'s training or held-out part, in file order (the same rows: the split
  /// depends only on the seed and the number of pairs).
  std::vector<models::SentencePair> raw_part(std::uint64_t seed, bool heldout) const;

  /// A SentencePiece model of `subword` pieces trained on both sides of make()'s training part.
  models::SubwordModel train_subword(std::uint64_t seed) const;
};

}  // namespace tg::cli
