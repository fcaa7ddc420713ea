#pragma once
// Shared by the LibTorch references (bench/libtorch/*.cpp): thread settings, the BLAS check and
// the OpenBLAS core type, bf16 autocast (issue 39), CPU time, peak RSS and the JSON number format
// of bench_seq2seq.
#include <ATen/autocast_mode.h>
#include <dlfcn.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../process_stats.h"

namespace ltbench {

// The same clock, CPU-time and peak-RSS readings as tapegrad's bench programs.
using tg::bench::Clock;
using tg::bench::cpu_seconds;
using tg::bench::peak_rss_mib;
using tg::bench::since;

inline std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// Sets ATen's (OpenMP) threads and OpenBLAS's own pool, which ignores at::set_num_threads. Debian
/// ships no libopenblas.so dev link, so OpenBLAS is reached through the already loaded
/// libopenblas.so.0 (libblas.so.3 points at it when libopenblas0-pthread is installed).
inline void set_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(n);
  if (void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD)) {
    if (auto f = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"))) f(n);
    dlclose(h);
  }
}

/// OpenBLAS's thread count, or -1 when OpenBLAS is not loaded.
inline int openblas_threads() {
  int n = -1;
  if (void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD)) {
    if (auto f = reinterpret_cast<int (*)()>(dlsym(h, "openblas_get_num_threads"))) n = f();
    dlclose(h);
  }
  return n;
}

/// Which BLAS the process has mapped: "OpenBLAS" when libopenblas is loaded, else the libblas path.
inline std::string blas_in_use() {
  std::ifstream maps("/proc/self/maps");
  std::string line, other = "unknown";
  while (std::getline(maps, line)) {
    if (line.find("libopenblas") != std::string::npos) return "OpenBLAS";
    if (line.find("libblas") != std::string::npos) other = line.substr(line.find('/'));
  }
  return other;
}

/// The core type OpenBLAS took (openblas_get_corename; OPENBLAS_CORETYPE can force it), or "" when
/// OpenBLAS is not loaded.
inline std::string openblas_core() {
  std::string core;
  if (void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD)) {
    if (auto f = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_corename"))) core = f();
    dlclose(h);
  }
  return core;
}

/// Printable characters of s without quotes and backslashes, for a JSON string.
inline std::string json_clean(const std::string& s) {
  std::string clean;
  for (char c : s)
    if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) clean += c;
  return clean;
}

/// The OPENBLAS_* variables of the environment, "NAME=value" joined by spaces (sorted).
inline std::string openblas_env() {
  std::set<std::string> vars;
  for (char** e = ::environ; *e; ++e)
    if (std::strncmp(*e, "OPENBLAS_", 9) == 0) vars.insert(*e);
  std::string out;
  for (const auto& v : vars) out += (out.empty() ? "" : " ") + v;
  return json_clean(out);
}

/// The CPU as tg::cpu::summary() names it (bench/reference_context.py's cpu_summary): "<model name>
/// (family F model M): <flags>", from /proc/cpuinfo. Figures are compared within one machine.
inline std::string cpu_summary() {
  std::ifstream info("/proc/cpuinfo");
  std::string line, name = "unknown CPU", family = "?", model = "?", flags;
  auto value = [&] {
    std::string v = line.substr(line.find(':') + 1);
    v.erase(0, v.find_first_not_of(' '));
    return v;
  };
  while (std::getline(info, line) && !line.empty()) {
    if (line.find(':') == std::string::npos) continue;
    if (line.rfind("model name", 0) == 0) name = value();
    else if (line.rfind("cpu family", 0) == 0) family = value();
    else if (line.rfind("model", 0) == 0 && line.find_first_of("\t:") == 5) model = value();
    else if (line.rfind("flags", 0) == 0) flags = " " + value() + " ";
  }
  std::string s = name + " (family " + family + " model " + model + "):";
  for (const char* f : {"avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                        "amx_tile", "amx_bf16", "amx_int8"})
    if (flags.find(std::string(" ") + f + " ") != std::string::npos) (s += ' ') += f;
  return json_clean(s);
}

/// --precision: "f32" (also "fp32") or "bf16".
inline std::string precision_arg(const std::string& value) {
  if (value == "f32" || value == "fp32") return "f32";
  if (value == "bf16") return "bf16";
  throw std::invalid_argument("--precision must be f32 (or fp32) or bf16, not " + value);
}

/// torch.autocast("cpu", dtype=torch.bfloat16) in C++ (LibTorch 1.13's at::autocast API, driven as the
/// Python context manager's __enter__ and __exit__ drive it): on entry autocast is enabled for CPU
/// with dtype bf16 and the nesting level raised; on exit the level is lowered, the cast cache (the
/// bf16 copies of the parameters) cleared when it reaches 0, and the previous state restored. The
/// cache stays enabled (torch.autocast's default). With enabled = false it does nothing (f32).
class Autocast {
 public:
  explicit Autocast(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    prev_enabled_ = at::autocast::is_cpu_enabled();
    prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~Autocast() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(prev_enabled_);
    at::autocast::set_autocast_cpu_dtype(prev_dtype_);
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool enabled_, prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kBFloat16;
};

/// The JSON fields every LibTorch reference writes: framework, version, threads, BLAS, the OpenBLAS
/// core type and settings, CPU and precision.
inline std::string json_head(const std::string& precision = "f32") {
  std::ostringstream js;
  js << "\"framework\":\"libtorch\",\"torch_version\":\"" << TORCH_VERSION << "\",\"threads\":" << at::get_num_threads()
     << ",\"blas\":\"" << blas_in_use() << "\",\"openblas_threads\":" << openblas_threads()
     << ",\"openblas_core\":\"" << json_clean(openblas_core()) << "\",\"openblas_env\":\"" << openblas_env() << "\""
     << ",\"omp_wait_policy\":\"" << json_clean(std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "") << "\""
     << ",\"cpu\":\"" << cpu_summary() << "\",\"precision\":\"" << precision << "\",\"autocast\":\""
     << (precision == "bf16" ? "at::autocast cpu bf16" : "off") << "\"";
  return js.str();
}

/// splitmix64, as tg::SplitMix64 (bench/workloads.h, bench/encoder_workload.h).
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }
};

/// PyTorch's zero_grad(set_to_none=True): LibTorch 1.13's Optimizer::zero_grad zeroes in place.
inline void drop_grads(const std::vector<torch::Tensor>& params) {
  for (auto p : params) p.mutable_grad() = torch::Tensor();
}

/// "--key value" and "--flag" arguments; unknown keys are an error naming the program.
struct Args {
  std::map<std::string, std::string> values;
  Args(int argc, char** argv, const std::set<std::string>& known, const std::set<std::string>& flags) {
    for (int i = 1; i < argc; ++i) {
      const std::string k = argv[i];
      if (flags.count(k)) {
        values[k] = "1";
      } else if (known.count(k) && i + 1 < argc) {
        values[k] = argv[++i];
      } else {
        throw std::invalid_argument(std::string(argv[0]) + ": unknown or incomplete argument " + k);
      }
    }
  }
  std::string str(const std::string& k, const std::string& def) const {
    auto it = values.find(k);
    return it == values.end() ? def : it->second;
  }
  long long integer(const std::string& k, long long def) const {
    auto it = values.find(k);
    return it == values.end() ? def : std::stoll(it->second);
  }
  bool flag(const std::string& k) const { return values.count(k) > 0; }
};

}  // namespace ltbench
