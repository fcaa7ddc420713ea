#pragma once
// What several subcommands of the bahdanau CLI share: the user-facing error, the checks of their
// files (inputs against outputs, outputs writable), CLI11 validators, the --precision and --threads
// flags, and the Subcommand each examples/bahdanau/<name>.cpp adds to the app (cli.cpp builds the
// app from them and runs the chosen one).
#include <charconv>
#include <cstdint>
#include <functional>
#include <istream>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "autograd/autocast.h"
#include "autograd/error_text.h"
#include "nn/file_io.h"

namespace tg::cli {

/// A user-facing error: printed as one line, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace io = tg::nn::io;
using io::NamedPath;

// ---- files ------------------------------------------------------------------------------------

/// The one rule for every subcommand's files, checked before any work: no output may be, alias
/// (a link, another spelling) or lie inside an input, nor hold one inside it; and no two outputs
/// may be the same file or one inside the other (the later write would destroy the earlier).
/// Throws "NAME_OUT (PATH) would overwrite NAME_IN (PATH)" for the first clash.
void require_distinct(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs);

/// Each path of a repeatable flag as a NamedPath.
std::vector<NamedPath> named(const std::string& flag, const std::vector<std::string>& paths);

std::vector<NamedPath> concat(std::vector<NamedPath> a, const std::vector<NamedPath>& b);

/// The CLI's one check that an output can be written, before the work that makes it: throws unless
/// the file or directory `p` could be written (found before the work, not at its end). Built on
/// nn::io::require_writable_location (which takes only files): an empty path (flag not given) passes,
/// a directory replaced through a temporary sibling (a checkpoint) is probed beside where it goes,
/// and the error names the flag ("--out: ...").
void require_writable_output(const NamedPath& p);

// ---- flags ------------------------------------------------------------------------------------

/// CLI11 validators with plain messages ("expected a positive number, got 'abc'").
extern const CLI::Validator kPositive;
extern const CLI::Validator kNonNegative;

/// A whole number in [lo, hi] (the bounds of models/translators/limits.h), checked before any work.
CLI::Validator int_range(std::int64_t lo, std::int64_t hi);
extern const CLI::Validator kWidth;     ///< int_range(1, limits::kMaxWidth)
extern const CLI::Validator kMaxSteps;  ///< int_range(0, limits::kMaxSteps)

/// "--precision" of train, translate, eval and experiment.
extern const std::vector<std::string> kPrecisions;
extern const char* const kPrecisionHelp;

/// With --precision bf16 on a machine whose bf16 products take the fallback (no avx512_bf16), one
/// line on stderr says so. On a CPU without bf16 arithmetic tg::autocast::Guard prints that line
/// itself at its first use (once per process), so here only the other way to the fallback is
/// reported: TG_BF16_PATH=avx2 forcing it on a CPU that has the instructions.
void note_precision(autocast::Precision p);

/// --threads: 0 keeps the default (all cores).
void set_threads(int threads);

/// "Architecture:" and one line per registered model (--model of train and gradcheck).
std::string model_help();


// ---- the subcommands --------------------------------------------------------------------------

/// One subcommand as bahdanau_main sees it: its CLI11 app, whose flags are bound to state the
/// subcommand owns, and how to run it once the arguments are parsed.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;  ///< runs it on the parsed flags; returns its exit status
  bool distributed = false;  ///< runs on every rank under mpirun (tg::dist): train only
};

// Each adds its subcommand to `app` (examples/bahdanau/<name>.cpp); bahdanau_main calls them in the
// order of --help.
Subcommand add_train(CLI::App& app);
Subcommand add_translate(CLI::App& app, std::istream* in);  // in: the sentences' source (nullptr: std::cin)
Subcommand add_eval(CLI::App& app);
Subcommand add_bleu(CLI::App& app);
Subcommand add_split(CLI::App& app);
Subcommand add_plot(CLI::App& app);
Subcommand add_experiment(CLI::App& app);
Subcommand add_average(CLI::App& app);
Subcommand add_gradcheck(CLI::App& app);

}  // namespace tg::cli
