// Fuzz target: a checkpoint's config.json (models::config_from_json). Error channel:
// std::runtime_error. A config it accepts must serialise (config_to_json) and parse again to the
// same JSON, once the vocabulary sizes (which may be left out) are filled in.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "models/training/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tg::models::ModelConfig config;
  try {
    config = tg::models::config_from_json(text, "fuzz/config.json");
  } catch (const std::runtime_error&) {
    return 0;
  }
  if (config.src_vocab == 0) config.src_vocab = 4;
  if (config.tgt_vocab == 0) config.tgt_vocab = 4;
  const std::string json = tg::models::config_to_json(config);
  const std::string again = tg::models::config_to_json(tg::models::config_from_json(json, "fuzz/re-serialised"));
  if (again != json) {
    std::fprintf(stderr, "fuzz_config_json: round trip changed\n%s\ninto\n%s\n", json.c_str(), again.c_str());
    std::abort();
  }
  return 0;
}
