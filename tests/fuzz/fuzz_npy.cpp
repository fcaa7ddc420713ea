// Fuzz target: .npy bytes (nn::npy_decode, the parser behind load_npz's entries). Error channel:
// std::runtime_error. A decoded tensor must re-encode and decode to the same shape.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "nn/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tg::Tensor t;
  try {
    t = tg::nn::npy_decode(bytes, "fuzz.npy");
  } catch (const std::runtime_error&) {
    return 0;
  }
  const tg::Tensor back = tg::nn::npy_decode(tg::nn::npy_encode(t), "fuzz.npy re-encoded");
  if (!(back.shape() == t.shape())) {
    std::fprintf(stderr, "fuzz_npy: shape %s came back as %s\n", t.shape().str().c_str(), back.shape().str().c_str());
    std::abort();
  }
  return 0;
}
