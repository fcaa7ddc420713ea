// Fuzz target: vocabulary files (models::Vocab::load, from a path: the input goes to a scratch
// file). Error channel: std::runtime_error. A loaded vocabulary must map each token back to its id.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "fuzz_util.h"
#include "models/text/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tg::fuzz::input_file(data, size, "vocab.txt");
  tg::models::Vocab vocab;
  try {
    vocab = tg::models::Vocab::load(path);
  } catch (const std::runtime_error&) {
    return 0;
  }
  for (std::int64_t i = 0; i < vocab.size(); ++i) {
    if (vocab.id(vocab.token(i)) != i) {
      std::fprintf(stderr, "fuzz_vocab: token %lld does not map back to its id\n", static_cast<long long>(i));
      std::abort();
    }
  }
  return 0;
}
