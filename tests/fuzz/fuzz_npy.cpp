// Fuzz target: .npy bytes (nn::npy_decode, the parser behind load_npz's entries). Error channel:
// std::runtime_error. A decoded tensor must re-encode and decode to the same shape, unless it is a
// float64 tensor holding a finite value beyond float32's range, which npy_encode refuses with
// std::invalid_argument (it writes floats as float32, and that value would read back as inf).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <limits>
#include <string>
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
  std::string encoded;
  try {
    encoded = tg::nn::npy_encode(t);
  } catch (const std::invalid_argument& e) {
    bool beyond_float32 = false;
    if (t.dtype() == tg::DType::f64)
      for (const double v : t.to_vector<double>())
        beyond_float32 |= std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max();
    if (beyond_float32) return 0;
    std::fprintf(stderr, "fuzz_npy: npy_encode refused a %s tensor it should keep: %s\n", t.shape().str().c_str(), e.what());
    std::abort();
  }
  const tg::Tensor back = tg::nn::npy_decode(encoded, "fuzz.npy re-encoded");
  if (!(back.shape() == t.shape())) {
    std::fprintf(stderr, "fuzz_npy: shape %s came back as %s\n", t.shape().str().c_str(), back.shape().str().c_str());
    std::abort();
  }
  return 0;
}
