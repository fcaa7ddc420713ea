#pragma once
// Test helpers: run a built program as a child process and capture what it did.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tg::testing {

namespace fs = std::filesystem;

struct ProgramRun {
  int status = -1;  ///< exit code, or -1 if the program did not exit normally
  std::string out, err;
};

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// `<temp dir>/<name>_<pid>`, created on first use (one per test process).
inline fs::path scratch_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::create_directories(p);
  return p;
}

/// Runs `command` (program and arguments, already shell-quoted) with `input` on stdin; the
/// streams pass through files in `dir`. With `stdout_to` (e.g. /dev/full), stdout goes there
/// instead and `out` stays empty.
inline ProgramRun run_command(const std::string& command, const fs::path& dir, const std::string& input = "",
                              const fs::path& stdout_to = {}) {
  const fs::path in = dir / "stdin.txt", out = stdout_to.empty() ? dir / "stdout.txt" : stdout_to, err = dir / "stderr.txt";
  std::ofstream(in, std::ios::binary) << input;
  const int rc = std::system((command + " <" + in.string() + " >" + out.string() + " 2>" + err.string()).c_str());
  ProgramRun r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (stdout_to.empty()) r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

}  // namespace tg::testing
