// CPU feature detection, the TG_CPU cap, and the kernel paths against each other.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "autograd/cpu.h"
#include "autograd/kernels/gemm.h"
#include "autograd/parallel.h"

namespace {

using tg::cpu::Isa;

TEST(CpuDispatch, FeaturesAgreeWithTheCompiler) {
  const auto& f = tg::cpu::features();
  EXPECT_EQ(f.avx2, bool(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(f.fma, bool(__builtin_cpu_supports("fma")));
  EXPECT_EQ(f.avx512f, bool(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(f.avx512dq, bool(__builtin_cpu_supports("avx512dq")));
  EXPECT_EQ(f.avx512bw, bool(__builtin_cpu_supports("avx512bw")));
  EXPECT_EQ(f.avx512vl, bool(__builtin_cpu_supports("avx512vl")));
  EXPECT_EQ(f.avx512_vnni, bool(__builtin_cpu_supports("avx512vnni")));
  EXPECT_EQ(f.avx512_bf16, bool(__builtin_cpu_supports("avx512bf16")));
  EXPECT_EQ(f.amx_tile, bool(__builtin_cpu_supports("amx-tile")));
  // The build targets x86-64-v3: a CPU running these tests has AVX2 and FMA.
  EXPECT_TRUE(f.avx2 && f.fma);
  EXPECT_FALSE(f.vendor.empty());
  EXPECT_EQ(tg::cpu::best_isa() == Isa::avx512, f.avx512f && f.avx512dq && f.avx512bw && f.avx512vl);
}

TEST(CpuDispatch, SummaryAndKernelPaths) {
  const std::string s = tg::cpu::summary();
  const auto& f = tg::cpu::features();
  EXPECT_NE(s.find(f.brand.empty() ? f.vendor : f.brand), std::string::npos) << s;
  EXPECT_NE(s.find(" avx2"), std::string::npos) << s;
  EXPECT_EQ(s.find("avx512f") != std::string::npos, f.avx512f) << s;

  const Isa before = tg::cpu::set_isa(Isa::avx2);
  EXPECT_EQ(tg::cpu::isa(), Isa::avx2);
  EXPECT_NE(tg::cpu::kernel_paths().find("gemm_f32: avx2"), std::string::npos) << tg::cpu::kernel_paths();
  // A cap above what the CPU has gives what it has.
  tg::cpu::set_isa(Isa::avx512);
  EXPECT_EQ(tg::cpu::isa(), tg::cpu::best_isa());
  const std::string want = std::string("gemm_f32: ") + tg::cpu::isa_name(tg::cpu::best_isa());
  EXPECT_NE(tg::cpu::kernel_paths().find(want), std::string::npos) << tg::cpu::kernel_paths();
  tg::cpu::set_isa(before);
}

TEST(CpuDispatch, TgCpuValues) {
  std::string warning;
  for (Isa best : {Isa::avx2, Isa::avx512}) {
    EXPECT_EQ(tg::cpu::detail::cap_from_env(nullptr, best, warning), best);
    EXPECT_TRUE(warning.empty());
    EXPECT_EQ(tg::cpu::detail::cap_from_env("", best, warning), best);
    EXPECT_EQ(tg::cpu::detail::cap_from_env("native", best, warning), best);
    EXPECT_EQ(tg::cpu::detail::cap_from_env("avx2", best, warning), Isa::avx2);
    EXPECT_TRUE(warning.empty());
    EXPECT_EQ(tg::cpu::detail::cap_from_env("avx512", best, warning), best);
    EXPECT_EQ(warning.empty(), best == Isa::avx512) << warning;
    EXPECT_EQ(tg::cpu::detail::cap_from_env("AVX-512", best, warning), best);
    EXPECT_NE(warning.find("TG_CPU=AVX-512 is not one of"), std::string::npos) << warning;
  }
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// The AVX-512 micro-kernel does each element's FMAs in the same order as the AVX2 one (kc depends
// on K alone), so the two paths give the same bits: training does not change with the CPU's
// vector width.
template <class T>
void expect_paths_agree(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T beta, bool bias, uint32_t seed) {
  SCOPED_TRACE("ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " M=" + std::to_string(M) +
               " N=" + std::to_string(N) + " K=" + std::to_string(K) + " beta=" + std::to_string(double(beta)) +
               " bias=" + std::to_string(bias));
  std::mt19937 rng(seed);
  auto rnd = [&](size_t n) {
    const auto f = random_floats(n, rng);
    return std::vector<T>(f.begin(), f.end());
  };
  const auto A = rnd(size_t(M * K)), B = rnd(size_t(K * N)), C0 = rnd(size_t(M * N)), b = rnd(size_t(N));
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  std::vector<T> c2 = C0, c512 = C0;
  const Isa before = tg::cpu::set_isa(Isa::avx2);
  tg::kernels::gemm<T>(ta, tb, M, N, K, T(0.75), A.data(), lda, B.data(), ldb, beta, c2.data(), N,
                       bias ? b.data() : nullptr);
  tg::cpu::set_isa(Isa::avx512);
  tg::kernels::gemm<T>(ta, tb, M, N, K, T(0.75), A.data(), lda, B.data(), ldb, beta, c512.data(), N,
                       bias ? b.data() : nullptr);
  tg::cpu::set_isa(before);
  EXPECT_EQ(0, std::memcmp(c2.data(), c512.data(), c2.size() * sizeof(T)));
}

TEST(CpuDispatch, GemmPathsGiveTheSameBits) {
  if (tg::cpu::best_isa() < Isa::avx512) GTEST_SKIP() << "this CPU lacks AVX-512 (F, DQ, BW, VL)";
  uint32_t seed = 1;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    for (auto [M, N, K] : {std::array<int64_t, 3>{5, 7, 9}, {13, 33, 17}, {64, 96, 32}, {100, 250, 700},
                           {512, 512, 512}, {157, 1100, 700}, {700, 45, 40}}) {
      expect_paths_agree<float>(ta, tb, M, N, K, 0.f, false, seed++);
      expect_paths_agree<float>(ta, tb, M, N, K, 1.f, false, seed++);
      expect_paths_agree<float>(ta, tb, M, N, K, -0.5f, false, seed++);
      expect_paths_agree<float>(ta, tb, M, N, K, 0.f, true, seed++);
      expect_paths_agree<double>(ta, tb, M, N, K, 0.0, false, seed++);
      expect_paths_agree<double>(ta, tb, M, N, K, 0.5, false, seed++);
    }
  }
}

}  // namespace
