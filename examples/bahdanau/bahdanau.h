#pragma once
// The bahdanau command line as a function, so that it can run inside another program:
// examples/bahdanau/main.cpp's main() calls it, and the fuzz target tests/fuzz/fuzz_cli.cpp links
// the CLI's other sources (examples/bahdanau/sources.cmake) and calls it with the fuzzer's argument
// lists. Defined in examples/bahdanau/cli.cpp.
#include <functional>
#include <istream>
#include <ostream>
#include <string>

namespace tg::cli {

struct MainOptions {
  /// What translate reads when no sentence is given on the command line (nullptr: std::cin).
  std::istream* in = nullptr;
  /// Where --help is printed (nullptr: std::cout).
  std::ostream* help_out = nullptr;
  /// Called once the arguments are parsed and checked by CLI11, with the subcommand's name; when it
  /// returns false, the subcommand is not run and bahdanau_main returns 0 (the fuzz target parses
  /// train and experiment without training). Empty: every subcommand runs.
  std::function<bool(const std::string& subcommand)> run_subcommand;
};

/// Runs `bahdanau ARGS` (argv[0] is the program name) and returns its exit status: 0 on success,
/// 1 for a failed gradcheck, 2 for any error, which is printed on stderr as "bahdanau: error: ...".
/// Status 0 only once everything written to stdout has reached it.
int bahdanau_main(int argc, char** argv, const MainOptions& options = {});

}  // namespace tg::cli
