#pragma once
// Shared by the LibTorch references (bench/libtorch/*.cpp): thread settings, the BLAS check,
// CPU time, peak RSS and the JSON number format of bench_seq2seq.
#include <dlfcn.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ltbench {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

inline double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

inline double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

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

/// The CPU's model name (/proc/cpuinfo), for the JSON: figures are compared within one machine.
inline std::string cpu_model() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      std::string name = line.substr(line.find(':') + 1);
      name.erase(0, name.find_first_not_of(' '));
      std::string clean;
      for (char c : name)
        if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) clean += c;
      return clean;
    }
  return "unknown";
}

/// The JSON fields every LibTorch reference writes: framework, version, threads, BLAS and CPU.
inline std::string json_head() {
  std::ostringstream js;
  js << "\"framework\":\"libtorch\",\"torch_version\":\"" << TORCH_VERSION << "\",\"threads\":" << at::get_num_threads()
     << ",\"blas\":\"" << blas_in_use() << "\",\"openblas_threads\":" << openblas_threads()
     << ",\"omp_wait_policy\":\"" << (std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "") << "\""
     << ",\"cpu\":\"" << cpu_model() << "\"";
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
