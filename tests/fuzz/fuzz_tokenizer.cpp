// Fuzz target: a checkpoint's tokenizer.model (models::SubwordModel::from_bytes, SentencePiece's
// serialized model). Error channel: std::runtime_error. A model that loads must encode and decode
// a sentence without failing, and every piece it produces must be one of its own.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "models/text/subword.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!tg::models::SubwordModel::available()) return 0;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto model = tg::models::SubwordModel::from_bytes(std::move(bytes), "tokenizer.model");
    for (const char* sentence : {"Hello, world!", "Il fait très beau aujourd'hui.", "", "  \xe2\x80\xaf ?"}) {
      const auto pieces = model.encode(sentence);
      for (const std::string& p : pieces)
        if (p != "<unk>" && !model.has_piece(p)) {
          std::fprintf(stderr, "fuzz_tokenizer: encode produced a piece the model does not have\n");
          std::abort();
        }
      (void)model.decode(pieces);
    }
  } catch (const std::runtime_error&) {
    return 0;
  }
  return 0;
}
