// Fuzz target: .npz archives (nn::load_npz, which only reads from a path: the input is written to
// a scratch file). Error channel: std::runtime_error.
#include <cstdint>
#include <stdexcept>

#include "fuzz_util.h"
#include "nn/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tg::fuzz::input_file(data, size, "input.npz");
  try {
    tg::nn::load_npz(path);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
