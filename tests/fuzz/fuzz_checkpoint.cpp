// Fuzz target: a checkpoint directory (models::load_checkpoint). The input is split into the
// checkpoint's files (fuzz_util.h: kCheckpointFiles, separated by kFileSeparator), written into a
// fresh scratch directory, and loaded. Error channel: std::runtime_error.
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include "fuzz_util.h"
#include "models/training/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const fs::path dir = tg::fuzz::scratch_dir() / "ckpt";
  fs::remove_all(dir);
  fs::create_directory(dir);
  const auto parts = tg::fuzz::split_files(std::string_view(reinterpret_cast<const char*>(data), size));
  for (std::size_t i = 0; i < parts.size(); ++i) tg::fuzz::write_bytes(dir / tg::fuzz::kCheckpointFiles[i], parts[i]);
  try {
    tg::models::load_checkpoint(dir.string());
  } catch (const std::runtime_error&) {
  }
  return 0;
}
