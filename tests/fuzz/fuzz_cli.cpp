// Fuzz target: the bahdanau command line (the sources of examples/bahdanau/ but main.cpp), in
// process. The input is an argument list and a stdin text:
//
//   ARG \0 or \n ARG ... [ "\n%%\n" STDIN ]
//
// Every argument list is parsed (every subcommand's flags and checks). Lists naming the fast
// subcommands (translate, eval, bleu, split, plot, average) also run, on small files copied into a
// fresh scratch directory before each run: a tiny checkpoint `ck` trained once at start-up (reverse
// task, some pairs held out), `data.tsv`, `hyp.txt`, `ref.txt`, `src.txt` and `log.csv`. Guards
// against slow paths and against writing outside the scratch directory (the list is then only
// parsed): train, experiment and gradcheck are never run; no number above 32 (nor an exponent or
// a hex float); at most 16 stdin lines; a path flag's value may not be absolute nor contain "..";
// relative paths are made relative to the scratch directory.
//
// Findings: crashes, sanitizer reports and exceptions escaping bahdanau_main. An exit status 2
// (a refused argument or file) is the CLI working. Its stdout and stderr go to /dev/null during
// each run (sanitizer reports and escaped exceptions still reach the real stderr).
#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "bahdanau.h"
#include "fuzz_util.h"

extern "C" void __sanitizer_set_report_fd(void* fd) __attribute__((weak));

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kStdinMarker = "\n%%\n";
constexpr std::size_t kMaxArgs = 64;
constexpr std::size_t kMaxStdinLines = 16;
constexpr long kMaxNumber = 32;

// The subcommands that run, and the flags of each whose values are paths (the repeatable ones,
// --hyp, --csv and --models, take every value up to the next flag).
const std::map<std::string, std::set<std::string>> kFastSubcommands = {
    {"translate", {"--model", "--heatmap", "--attention-out", "--bars"}},
    {"eval", {"--model", "--data", "--output"}},
    {"bleu", {"--hyp", "--ref", "--src", "--csv", "--svg"}},
    {"split", {"--data", "--out"}},
    {"plot", {"--csv", "--out"}},
    {"average", {"--models", "--out"}}};

int g_real_stderr = -1;
int g_real_stdout = -1;
int g_null = -1;

void write_real_stderr(const char* text) {
  if (g_real_stderr >= 0 && ::write(g_real_stderr, text, std::char_traits<char>::length(text)) < 0) return;
}

enum class Run { kNothing, kFast, kAll };  // which subcommands bahdanau_main may run after parsing

int call(std::vector<std::string> args, const std::string& stdin_text, Run run) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::istringstream in(stdin_text);
  std::ostringstream help;
  tg::cli::MainOptions options;
  options.in = &in;
  options.help_out = &help;
  options.run_subcommand = [run](const std::string& name) {
    return run == Run::kAll || (run == Run::kFast && kFastSubcommands.count(name) > 0);
  };
  // The CLI's output goes to /dev/null while it runs.
  std::fflush(stdout);
  std::cout.flush();
  ::dup2(g_null, STDOUT_FILENO);
  ::dup2(g_null, STDERR_FILENO);
  const int status = tg::cli::bahdanau_main(static_cast<int>(args.size()), argv.data(), options);
  std::fflush(stdout);
  std::cout.flush();
  std::clearerr(stdout);
  std::cout.clear();
  ::dup2(g_real_stdout, STDOUT_FILENO);
  ::dup2(g_real_stderr, STDERR_FILENO);
  return status;
}

/// The scratch directory's fixtures, made once: what the fast subcommands read.
const fs::path& fixtures() {
  static const fs::path dir = [] {
    const fs::path d = tg::fuzz::scratch_dir() / "fixtures";
    fs::create_directories(d);
    std::string pairs;
    for (int i = 0; i < 24; ++i) pairs += "a b " + std::to_string(i % 5) + "\t" + std::to_string(i % 5) + " b a\n";
    tg::fuzz::write_bytes(d / "data.tsv", pairs);
    tg::fuzz::write_bytes(d / "hyp.txt", "the cat sat\non a mat\nhello\n\n");
    tg::fuzz::write_bytes(d / "ref.txt", "the cat sat down\non the mat\nhello there\nx\n");
    tg::fuzz::write_bytes(d / "src.txt", "le chat\nsur le tapis rouge\nbonjour\ny z\n");
    tg::fuzz::write_bytes(d / "log.csv", "step,epoch,loss,elapsed_s,dev_bleu\n1,0,4.5,0.1,\n2,0,3.25,0.2,1.5\n3,1,2,0.3,\n");
    const int status = call({"bahdanau", "train", "--task", "reverse", "--num-examples", "40", "--max-len", "4",
                             "--num-steps", "6", "--embed-size", "4", "--num-hiddens", "4", "--batch-size", "8",
                             "--holdout", "8", "--steps", "2", "--quiet", "--threads", "1", "--out", (d / "ck").string()},
                            "", Run::kAll);
    if (status != 0 || !fs::exists(d / "ck" / "manifest.json")) {
      write_real_stderr(("fuzz_cli: could not train the fixture checkpoint (status " + std::to_string(status) + ")\n").c_str());
      std::abort();
    }
    return d;
  }();
  return dir;
}

void init() {
  static const bool done = [] {
    g_real_stdout = ::dup(STDOUT_FILENO);
    g_real_stderr = ::dup(STDERR_FILENO);
    g_null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (g_real_stdout < 0 || g_real_stderr < 0 || g_null < 0) {
      std::perror("fuzz_cli: dup/open");
      std::abort();
    }
    // Sanitizer reports and escaped exceptions go to the real stderr, not to /dev/null.
    if (__sanitizer_set_report_fd) __sanitizer_set_report_fd(reinterpret_cast<void*>(static_cast<intptr_t>(g_real_stderr)));
    std::set_terminate([] {
      write_real_stderr("fuzz_cli: an exception escaped bahdanau_main\n");
      std::abort();
    });
    // Train the fixture through the CLI before anything is fuzzed; then the trainer's threads.
    fixtures();
    return true;
  }();
  (void)done;
}

/// Whether the argument list is safe and cheap to run (otherwise it is only parsed): a fast
/// subcommand, small numbers, no absolute or climbing paths. Makes path values relative to `base`.
bool guard(std::vector<std::string>& args, const fs::path& base) {
  if (args.size() < 2 || !kFastSubcommands.count(args[1])) return false;
  const std::set<std::string>& path_flags = kFastSubcommands.at(args[1]);
  bool ok = true;
  bool in_paths = false, repeatable = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    // Numbers: no digit run above kMaxNumber, no exponent or hex float (they bound the work).
    long run = 0;
    bool digits = false;
    for (std::size_t k = 0; k < a.size(); ++k) {
      const char c = a[k];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        run = std::min<long>(run * 10 + (c - '0'), 1000000);
        if (run > kMaxNumber) ok = false;
        digits = true;
      } else {
        if (digits && (c == 'e' || c == 'E' || c == 'p' || c == 'P' || c == 'x' || c == 'X')) ok = false;
        run = 0;
        digits = false;
      }
    }
    // Path values: relative to `base`, never absolute or climbing out.
    std::string flag, value;
    bool has_value = false;
    if (a.rfind("--", 0) == 0) {
      const auto eq = a.find('=');
      flag = a.substr(0, eq);
      in_paths = path_flags.count(flag) > 0;
      repeatable = flag == "--models" || flag == "--hyp" || flag == "--csv";
      if (eq != std::string::npos && in_paths) {
        value = a.substr(eq + 1);
        has_value = true;
        in_paths = repeatable;
      }
    } else if (in_paths) {
      value = a;
      has_value = true;
      in_paths = repeatable;
    }
    if (a.find("..") != std::string::npos) ok = false;
    if (a.rfind("--threads", 0) == 0) ok = false;  // a thread count outlives the run (set_num_threads)
    if (!has_value) continue;
    if (!value.empty() && value[0] == '/') {
      ok = false;
      continue;
    }
    const std::string prefixed = (base / value).string();
    a = flag.empty() || a.rfind("--", 0) != 0 ? prefixed : flag + "=" + prefixed;
  }
  return ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  init();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto marker = input.find(kStdinMarker);
  const std::string_view arg_text = input.substr(0, marker);
  std::string stdin_text;
  if (marker != std::string_view::npos) {  // at most kMaxStdinLines lines
    std::string_view rest = input.substr(marker + kStdinMarker.size());
    for (std::size_t lines = 0; !rest.empty() && lines < kMaxStdinLines; ++lines) {
      const auto nl = rest.find('\n');
      stdin_text += rest.substr(0, nl == std::string_view::npos ? rest.size() : nl + 1);
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    }
  }
  std::vector<std::string> args = {"bahdanau"};
  std::size_t start = 0;
  for (std::size_t i = 0; i <= arg_text.size() && args.size() <= kMaxArgs; ++i)
    if (i == arg_text.size() || arg_text[i] == '\0' || arg_text[i] == '\n') {
      if (i > start || i < arg_text.size()) args.emplace_back(arg_text.substr(start, i - start));
      start = i + 1;
    }

  // A fresh copy of the fixtures for each run: a run may write anything inside it.
  const fs::path run_dir = tg::fuzz::scratch_dir() / "run";
  std::error_code ec;
  fs::remove_all(run_dir, ec);
  fs::copy(fixtures(), run_dir, fs::copy_options::recursive, ec);
  if (ec) {
    write_real_stderr("fuzz_cli: cannot copy the fixtures\n");
    std::abort();
  }
  std::vector<std::string> parsed = args;
  const bool cheap = guard(args, run_dir);
  if (cheap) call(args, stdin_text, Run::kFast);
  else call(parsed, stdin_text, Run::kNothing);  // parsed and checked only: nothing runs
  return 0;
}
