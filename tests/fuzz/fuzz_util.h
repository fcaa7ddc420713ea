#pragma once
// Helpers shared by the fuzz targets (tests/fuzz/*.cpp): a per-process scratch directory for
// parsers that only read from a path, and the checkpoint-directory input format.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace tg::fuzz {

/// A directory `$TMPDIR/tg-fuzz-XXXXXX` made on first use and removed when the process exits
/// normally (a crashing run leaves it; scripts/fuzz.sh points TMPDIR at a directory it removes).
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      const char* tmp = std::getenv("TMPDIR");
      std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/tg-fuzz-XXXXXX";
      if (!mkdtemp(tmpl.data())) {
        std::perror("tg-fuzz: mkdtemp");
        std::abort();
      }
      path = tmpl;
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir;
  return dir.path;
}

/// Writes `bytes` to `path` (truncating); aborts if it cannot, since that is not a parser finding.
inline void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "tg-fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

/// The fuzz input as a file in the scratch directory, under `name`; returns its path.
inline std::string input_file(const uint8_t* data, size_t size, const std::string& name) {
  const auto path = scratch_dir() / name;
  write_bytes(path, std::string_view(reinterpret_cast<const char*>(data), size));
  return path.string();
}

/// Checkpoint-directory inputs: the files in this order, separated by kFileSeparator. Parts past
/// the last one given are absent files; an empty part is an empty file.
inline constexpr const char* kCheckpointFiles[] = {"config.json",  "src_vocab.txt", "tgt_vocab.txt",
                                                   "weights.npz",  "training.json", "manifest.json"};
inline constexpr std::string_view kFileSeparator = "\n--tg-fuzz-next-file--\n";

inline std::vector<std::string_view> split_files(std::string_view input) {
  std::vector<std::string_view> parts;
  constexpr std::size_t max_parts = std::size(kCheckpointFiles);
  while (parts.size() + 1 < max_parts) {
    const auto pos = input.find(kFileSeparator);
    if (pos == std::string_view::npos) break;
    parts.push_back(input.substr(0, pos));
    input.remove_prefix(pos + kFileSeparator.size());
  }
  parts.push_back(input);
  return parts;
}

}  // namespace tg::fuzz
