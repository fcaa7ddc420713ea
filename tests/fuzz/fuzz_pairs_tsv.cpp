// Fuzz target: sentence-pair TSV files (models::read_sentence_pairs, from a path: the input goes to
// a scratch file), then tokenize_pairs on what it accepted. Error channel of the reader:
// std::runtime_error. tokenize_pairs throws only for tabs or invalid UTF-8, which the reader
// refuses, so any exception from it is a finding.
#include <cstdint>
#include <stdexcept>

#include "fuzz_util.h"
#include "models/text/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tg::fuzz::input_file(data, size, "pairs.tsv");
  std::vector<tg::models::SentencePair> pairs;
  try {
    pairs = tg::models::read_sentence_pairs(path);
  } catch (const std::runtime_error&) {
    return 0;
  }
  tg::models::tokenize_pairs(pairs);
  return 0;
}
