// bahdanau split: a deterministic train/dev/test split of a sentence-pair file.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/text/data.h"
#include "models/text/split.h"

#include "common.h"

namespace tg::cli {

using namespace tg::models;

namespace {

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

}  // namespace

Subcommand add_split(CLI::App& app) {
  auto args = std::make_shared<SplitArgs>();
  SplitArgs& sa = *args;
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
  return {split_cmd, [args] { return run_split(*args); }};
}

}  // namespace tg::cli
