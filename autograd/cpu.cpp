#include "autograd/cpu.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tg::cpu {
namespace {

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = {};
  return r;
}

bool bit(unsigned word, int n) { return (word >> n) & 1u; }

// xgetbv without the -mxsave flag the intrinsic would need.
uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

Features detect() {
  Features f;
  const Regs v = cpuid(0);
  const unsigned max_leaf = v.a;
  char vendor[13] = {};
  std::memcpy(vendor, &v.b, 4);
  std::memcpy(vendor + 4, &v.d, 4);
  std::memcpy(vendor + 8, &v.c, 4);
  f.vendor = vendor;

  const Regs l1 = cpuid(1);
  const unsigned base_family = (l1.a >> 8) & 0xf, base_model = (l1.a >> 4) & 0xf;
  f.family = int(base_family == 0xf ? base_family + ((l1.a >> 20) & 0xff) : base_family);
  f.model = int(base_family == 0x6 || base_family == 0xf ? base_model | (((l1.a >> 16) & 0xf) << 4) : base_model);

  // Register state the OS saves: SSE+AVX (bits 1-2), AVX-512 opmask/ZMM (5-7), AMX tiles (17-18).
  const bool osxsave = bit(l1.c, 27);
  const uint64_t xcr = osxsave ? xcr0() : 0;
  const bool ymm_os = (xcr & 0x6) == 0x6;
  const bool zmm_os = ymm_os && (xcr & 0xe0) == 0xe0;
  const bool tile_os = (xcr & 0x60000) == 0x60000;

  f.fma = ymm_os && bit(l1.c, 12);
  if (max_leaf >= 7) {
    const Regs l7 = cpuid(7, 0);
    f.avx2 = ymm_os && bit(l7.b, 5);
    f.avx512f = zmm_os && bit(l7.b, 16);
    f.avx512dq = zmm_os && bit(l7.b, 17);
    f.avx512bw = zmm_os && bit(l7.b, 30);
    f.avx512vl = zmm_os && bit(l7.b, 31);
    f.avx512_vnni = zmm_os && bit(l7.c, 11);
    f.amx_bf16 = tile_os && bit(l7.d, 22);
    f.amx_tile = tile_os && bit(l7.d, 24);
    f.amx_int8 = tile_os && bit(l7.d, 25);
    if (l7.a >= 1) f.avx512_bf16 = zmm_os && bit(cpuid(7, 1).a, 5);
  }

  if (cpuid(0x80000000).a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    std::string s = brand;
    const auto first = s.find_first_not_of(' ');
    const auto last = s.find_last_not_of(' ');
    f.brand = first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
  }
  return f;
}

Isa detect_best(const Features& f) {
  return f.avx512f && f.avx512dq && f.avx512bw && f.avx512vl ? Isa::avx512 : Isa::avx2;
}

/// TG_CPU, applied once at the first use.
Isa initial_cap(Isa best) {
  std::string warning;
  const Isa cap = detail::cap_from_env(std::getenv("TG_CPU"), best, warning);
  if (!warning.empty()) std::fprintf(stderr, "tapegrad: %s\n", warning.c_str());
  return cap;
}

struct State {
  Features features = detect();
  Isa best = detect_best(features);
  std::atomic<int> current{int(initial_cap(best))};
};

State& state() {
  static State s;
  return s;
}

// Kernel families with a run-time choice and the highest level each has a variant for.
struct Family {
  const char* name;
  Isa highest;
};
constexpr Family kFamilies[] = {
    {"gemm_f32", Isa::avx512},
    {"gemm_f64", Isa::avx512},
    {"elementwise", Isa::avx2},
};

}  // namespace

namespace detail {
Isa cap_from_env(const char* value, Isa best, std::string& warning) {
  warning.clear();
  if (!value || !*value || std::strcmp(value, "native") == 0) return best;
  Isa want;
  if (std::strcmp(value, "avx2") == 0) {
    want = Isa::avx2;
  } else if (std::strcmp(value, "avx512") == 0) {
    want = Isa::avx512;
  } else {
    warning = std::string("TG_CPU=") + value + " is not one of avx2, avx512, native: using " + isa_name(best);
    return best;
  }
  if (want > best)
    warning = std::string("TG_CPU=") + value + " but this CPU lacks AVX-512 (F, DQ, BW, VL): using " + isa_name(best);
  return std::min(want, best);
}
}  // namespace detail

const Features& features() { return state().features; }

const char* isa_name(Isa isa) { return isa == Isa::avx512 ? "avx512" : "avx2"; }

Isa best_isa() { return state().best; }

Isa isa() { return Isa(state().current.load(std::memory_order_relaxed)); }

Isa set_isa(Isa cap) {
  State& s = state();
  return Isa(s.current.exchange(int(std::min(cap, s.best)), std::memory_order_relaxed));
}

std::string summary() {
  const Features& f = features();
  std::string s = f.brand.empty() ? f.vendor : f.brand;
  s += " (family " + std::to_string(f.family) + " model " + std::to_string(f.model) + "):";
  const std::pair<const char*, bool> flags[] = {
      {"avx2", f.avx2},           {"fma", f.fma},
      {"avx512f", f.avx512f},     {"avx512dq", f.avx512dq},
      {"avx512bw", f.avx512bw},   {"avx512vl", f.avx512vl},
      {"avx512_vnni", f.avx512_vnni}, {"avx512_bf16", f.avx512_bf16},
      {"amx_tile", f.amx_tile},   {"amx_bf16", f.amx_bf16},
      {"amx_int8", f.amx_int8},
  };
  for (const auto& [name, on] : flags)
    if (on) (s += ' ') += name;
  return s;
}

std::string kernel_paths() {
  const Isa now = isa();
  std::string s;
  for (const Family& fam : kFamilies) {
    if (!s.empty()) s += ", ";
    (s += fam.name) += ": ";
    s += isa_name(std::min(now, fam.highest));
  }
  return s;
}

}  // namespace tg::cpu
