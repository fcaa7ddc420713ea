// tg::cli::bahdanau_main (bahdanau.h): builds the CLI11 app from the subcommands' add_<name>
// (examples/bahdanau/<name>.cpp), parses the arguments and runs the chosen subcommand; every error
// becomes "bahdanau: error: ..." on stderr and exit status 2.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "autograd/autocast.h"
#include "autograd/cpu.h"
#include "autograd/dist.h"
#include "autograd/error_text.h"
#include "nn/file_io.h"

#include "bahdanau.h"
#include "common.h"

namespace tg::cli {

namespace {

/// `bahdanau --version`: the program, then the machine as the kernels see it.
std::string version_text() {
  std::string v = "bahdanau (tapegrad; no release number or commit is compiled in)";
#if defined(__VERSION__)
#if defined(__clang__)
  v += ", built by clang " __VERSION__;
#elif defined(__GNUC__)
  v += ", built by g++ " __VERSION__;
#endif
#endif
#ifdef NDEBUG
  v += ", optimised (NDEBUG)";
#else
  v += ", with assertions";
#endif
  v += "\ncpu: " + cpu::summary();
  v += std::string("\nisa: ") + cpu::isa_name(cpu::isa()) + " (best on this CPU: " + cpu::isa_name(cpu::best_isa()) +
       "; TG_CPU=avx2 caps it)";
  v += "\nkernel paths: " + cpu::kernel_paths();
  v += std::string("\nbf16 path: ") + autocast::bf16_path() + " (bf16 arithmetic: " +
       (autocast::bf16_hardware() ? "yes" : "no") + ")";
  return v;
}

/// Prints "bahdanau: error: " and the message's first line on stderr; the details some messages
/// carry on later lines (a list of problems, a file header) follow, indented, and no line is
/// longer than 300 characters.
void print_error(const std::string& what) {
  std::istringstream in(what);
  bool first = true;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.empty()) continue;
    line = elide(line, 300);
    if (first) std::fprintf(stderr, "bahdanau: error: %s\n", line.c_str());
    else std::fprintf(stderr, "  %s\n", line.c_str() + line.find_first_not_of(' '));
    first = false;
  }
  if (first) std::fprintf(stderr, "bahdanau: error: (no message)\n");
}

/// Prints an out-of-memory error as one line: tapegrad's allocator says how many bytes of what it
/// could not get; a plain std::bad_alloc says nothing more.
void print_out_of_memory(const std::bad_alloc& e) {
  const std::string what = e.what();
  if (what.empty() || what == "std::bad_alloc") print_error("out of memory");
  else if (what.rfind("out of memory", 0) == 0) print_error(what);  // tg::OutOfMemoryError says it already
  else print_error("out of memory: " + what);
}

/// Parses the arguments into `app`. Returns the exit status when bahdanau_main is done (--help,
/// --version, a usage error), or nothing when a subcommand is to run.
std::optional<int> parse_arguments(CLI::App& app, int argc, char** argv, const MainOptions& options) {
  // CLI11 answers a mistyped subcommand with "a subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) known = known || sub->check_name(argv[1]);
    if (!known) {
      std::fprintf(stderr, "bahdanau: error: unknown subcommand '%s' (see --help)\n", elide(argv[1], 60).c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help
      const int status = app.exit(e, options.help_out ? *options.help_out : std::cout);
      try {
        io::flush_stdout_or_throw();
      } catch (const std::exception& flush_error) {
        print_error(flush_error.what());
        return 2;
      }
      return status;
    }
    std::string what = e.what();  // CLI11 messages are one line; they quote what was given, so elide
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::fprintf(stderr, "bahdanau: error: %s (see --help)\n", elide(what, 140).c_str());
    return 2;
  } catch (const std::bad_alloc& e) {
    print_out_of_memory(e);
    return 2;
  }
  return std::nullopt;
}

/// Runs `chosen` (nullptr: none) and flushes stdout; an error is printed and gives status 2.
int run_chosen(const Subcommand* chosen, int& argc, char**& argv) {
  // Under mpirun, train runs on every rank (tg::dist); the other commands are single-process.
  std::optional<dist::Context> mpi;
  try {
    if (chosen && chosen->distributed) mpi.emplace(&argc, &argv);
  } catch (const std::exception& e) {
    print_error(e.what());
    return 2;
  }
  // On an error, the other ranks would wait for this one in their next collective: stop them now.
  auto stop_other_ranks = [] {
    if (dist::world_size() > 1) dist::abort("stopping every rank after the error above", 2);
  };
  try {
    int status = 0;
    if (chosen) status = chosen->run();
    // Results that never reached stdout (a full disk, a closed pipe, /dev/full) are an error.
    io::flush_stdout_or_throw();
    return status;
  } catch (const std::bad_alloc& e) {  // before std::exception: say what it is, not "std::bad_alloc"
    std::fflush(stdout);
    print_out_of_memory(e);
    stop_other_ranks();
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    print_error(e.what());
    stop_other_ranks();
    return 2;
  }
}

}  // namespace

int bahdanau_main(int argc, char** argv, const MainOptions& options) {
  CLI::App app{"Bahdanau attention translator (tapegrad): train, translate, evaluate, score."};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text,
                       "Print the program, the CPU, its vector features, the kernel paths and the bf16 path, then exit");

  // Each subcommand's flags, in the order of --help.
  const std::vector<Subcommand> subcommands = {
      add_train(app),      add_translate(app, options.in), add_eval(app),  add_bleu(app),     add_split(app),
      add_plot(app),       add_experiment(app),            add_average(app), add_gradcheck(app)};
  if (const std::optional<int> status = parse_arguments(app, argc, argv, options)) return *status;
  if (options.run_subcommand)
    for (const CLI::App* chosen : app.get_subcommands())
      if (!options.run_subcommand(chosen->get_name())) return 0;
  const Subcommand* chosen = nullptr;
  for (const Subcommand& s : subcommands)
    if (!chosen && s.app->parsed()) chosen = &s;
  return run_chosen(chosen, argc, argv);
}

}  // namespace tg::cli
