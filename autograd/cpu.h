#pragma once
// The processor tapegrad runs on, and which instruction set its kernels use there. One build runs
// on any x86-64-v3 (AVX2 + FMA) CPU; kernels that have an AVX-512 variant choose it at run time
// when the CPU and the operating system support it.
//
// The environment variable TG_CPU caps the path for the whole process: TG_CPU=avx2 runs the AVX2
// kernels on an AVX-512 CPU (A/B comparisons, tests); TG_CPU=avx512 or unset takes the best the
// CPU has. It is read once, at the first call into this header.
#include <string>

namespace tg::cpu {

/// What cpuid (and, for register state, xgetbv) reports. A vector extension counts only when the
/// operating system also saves its registers (XCR0), as __builtin_cpu_supports does.
struct Features {
  std::string vendor;  ///< "GenuineIntel", "AuthenticAMD", ...
  std::string brand;   ///< the brand string, e.g. "AMD EPYC 9R45" (as cpuid gives it, trimmed)
  int family = 0, model = 0;  ///< display family and model
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512dq = false, avx512bw = false, avx512vl = false;
  bool avx512_vnni = false, avx512_bf16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
};

/// The features of this CPU, detected once.
const Features& features();

/// The instruction-set levels kernels are written for, in increasing order.
enum class Isa { avx2 = 0, avx512 = 1 };

/// "avx2" or "avx512".
const char* isa_name(Isa isa);

/// The best level this CPU supports: avx512 needs AVX-512 F, DQ, BW and VL with the ZMM state
/// enabled by the OS.
Isa best_isa();

/// The level kernels use now: best_isa(), capped by TG_CPU and by set_isa().
Isa isa();

/// Caps the level kernels use (never above best_isa()) and returns the previous cap. Process-wide;
/// for tests and benchmarks that compare paths in one process. Calls running concurrently on other
/// threads may take either path.
Isa set_isa(Isa cap);

/// One line: brand, family/model, the vector features, e.g.
/// "AMD EPYC (family 26 model 2): avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16".
std::string summary();

/// The path each kernel family with a run-time choice takes now, e.g.
/// "gemm_f32: avx512, gemm_f64: avx512, elementwise: avx2".
std::string kernel_paths();

namespace detail {
/// The cap a TG_CPU value asks for on a CPU whose best level is `best`; sets `warning` (else
/// leaves it empty) when the value is unknown or names a level the CPU lacks.
Isa cap_from_env(const char* value, Isa best, std::string& warning);
}  // namespace detail

}  // namespace tg::cpu
