// bf16 conversion (round to nearest even, special values) and the bf16 product kernels against
// the plain reference, on every kernel path the CPU has (a path it lacks is skipped, naming the
// flag). Bounds: below kAvx2WidenRows rows the avx2 path adds each column's products in the
// reference's order with the same fma, so it equals the reference bit for bit; the rest (the
// float32 GEMM on bf16 values from kAvx2WidenRows rows, vdpbf16ps's pairs) is held to float32
// summation error, 2 (K + 2) 2^-24 sum|a b|. Up to kDirectRows rows an unpacked product is the
// float32 GEMM itself, compared with the float32 reference within the same bound.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "autograd/cpu.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/parallel.h"

namespace {

namespace bf = tg::kernels::bf16;

std::uint16_t conv(std::uint32_t bits) { return bf::from_float(std::bit_cast<float>(bits)); }

TEST(Bf16Convert, RoundsToNearestEven) {
  EXPECT_EQ(conv(0x3f800000u), 0x3f80);  // 1
  EXPECT_EQ(conv(0x3f808000u), 0x3f80);  // 1 + 2^-8: a tie, to the even 1
  EXPECT_EQ(conv(0x3f818000u), 0x3f82);  // a tie above an odd value: up, to even
  EXPECT_EQ(conv(0x3f808001u), 0x3f81);  // just above the tie: up
  EXPECT_EQ(conv(0x3f807fffu), 0x3f80);  // just below: down
  EXPECT_EQ(conv(0xbf818000u), 0xbf82);  // negative ties as positive ones
  EXPECT_EQ(conv(0x7f7f7fffu), 0x7f7f);
  EXPECT_EQ(conv(0x7f7fffffu), 0x7f80);  // float's largest value overflows to inf
  EXPECT_EQ(conv(0xff7fffffu), 0xff80);
  EXPECT_EQ(bf::round(3.14159265f), 3.140625f);
}

TEST(Bf16Convert, SpecialValues) {
  EXPECT_EQ(conv(0x00000000u), 0x0000);
  EXPECT_EQ(conv(0x80000000u), 0x8000);  // -0 keeps its sign
  EXPECT_EQ(conv(0x7f800000u), 0x7f80);  // inf
  EXPECT_EQ(conv(0xff800000u), 0xff80);
  EXPECT_EQ(conv(0x7fc00000u), 0x7fc0);  // quiet NaN
  EXPECT_EQ(conv(0x7f800001u), 0x7fc0);  // a signalling NaN whose payload is in the low bits: still NaN, quiet
  EXPECT_EQ(conv(0xff800001u), 0xffc0);
  EXPECT_EQ(conv(0x7fffffffu), 0x7fff);  // rounding would carry out of a NaN: truncated instead
  EXPECT_TRUE(std::isnan(bf::to_float(conv(0x7fa00000u))));
  // Subnormals round like other values (no flush to zero).
  EXPECT_EQ(conv(0x00000001u), 0x0000);
  EXPECT_EQ(conv(0x00008000u), 0x0000);  // a tie, to even
  EXPECT_EQ(conv(0x00018000u), 0x0002);
  EXPECT_EQ(conv(0x00010000u), 0x0001);  // the smallest bf16 subnormal is exact
  EXPECT_EQ(conv(0x00010001u), 0x0001);
  EXPECT_EQ(conv(0x007fffffu), 0x0080);  // the largest float subnormal rounds up to the smallest normal
  EXPECT_EQ(conv(0x807fffffu), 0x8080);
}

TEST(Bf16Convert, VectorEqualsScalar) {
  std::mt19937 rng(7);
  std::vector<std::uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                                     0xff800001u, 0x7fffffffu, 0x3f808000u, 0x3f818000u, 0x00008000u, 0x007fffffu,
                                     0x7f7fffffu, 0xffffffffu};
  for (int i = 0; i < 1 << 20; ++i) bits.push_back(rng());
  for (std::uint32_t b = 0; b < 1u << 17; ++b) bits.push_back(0x3f800000u + b);  // every tie pattern near 1
  std::vector<float> src(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) src[i] = std::bit_cast<float>(bits[i]);
  for (int offset : {0, 3}) {  // vector body and scalar tail at different positions
    std::vector<std::uint16_t> dst(src.size() - offset);
    bf::convert(src.data() + offset, static_cast<std::int64_t>(dst.size()), dst.data());
    for (std::size_t i = 0; i < dst.size(); ++i)
      ASSERT_EQ(dst[i], bf::from_float(src[i + offset])) << "bits " << std::hex << bits[i + offset];
  }
}

TEST(Bf16Path, FollowsTheCpuCap) {
  // TG_CPU=avx2 / cpu::set_isa cap the bf16 kernels as they cap the others.
  const tg::cpu::Isa previous = tg::cpu::set_isa(tg::cpu::Isa::avx2);
  EXPECT_EQ(bf::default_path(), bf::Path::avx2);
  tg::cpu::set_isa(previous);
  if (bf::hardware() && tg::cpu::isa() == tg::cpu::Isa::avx512 && !std::getenv("TG_BF16_PATH"))
    EXPECT_EQ(bf::default_path(), bf::Path::avx512bf16);
}

struct Shape3 {
  std::int64_t M, N, K;
};

class Bf16Gemm : public ::testing::TestWithParam<bf::Path> {
 protected:
  void SetUp() override {
    if (!bf::available(GetParam())) GTEST_SKIP() << "CPU lacks avx512_bf16 (or avx512bw/avx512vl)";
  }
};

std::vector<float> randn(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void check_against_reference(bf::Path path, bool ta, bool tb, Shape3 s, float beta, bool with_bias) {
  const auto [M, N, K] = s;
  const std::int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
  const std::vector<float> A = randn(static_cast<std::size_t>((ta ? K : M) * lda), 1);
  const std::vector<float> B = randn(static_cast<std::size_t>((tb ? N : K) * ldb), 2);
  const std::vector<float> bias = randn(static_cast<std::size_t>(N), 3);
  std::vector<float> C = randn(static_cast<std::size_t>(M * ldc), 4), R = C;
  const float* pb = with_bias ? bias.data() : nullptr;
  bf::gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc, pb, path);
  // Up to kDirectRows rows an unpacked product is the float32 GEMM (gemm_bf16.h).
  const bool f32 = M <= bf::kDirectRows;
  if (f32) tg::kernels::gemm_reference<float>(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, beta, R.data(), ldc);
  else bf::gemm_reference(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, beta, R.data(), ldc, pb);
  if (f32 && pb)
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) R[i * ldc + j] += bias[j];
  auto value = [&](float x) { return f32 ? x : bf::round(x); };
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < ldc; ++j) {
      const float c = C[i * ldc + j], r = R[i * ldc + j];
      // Padding untouched; the avx2 path's packed kernel and the direct path over B stored (K, N) add
      // in the reference's order.
      const bool exact = !f32 && path == bf::Path::avx2 && M < bf::kAvx2WidenRows;
      if (j >= N || exact) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(c), std::bit_cast<std::uint32_t>(r))
            << "i " << i << " j " << j << " M N K " << M << " " << N << " " << K << " ta " << ta << " tb " << tb;
        continue;
      }
      double mass = 0;
      for (std::int64_t k = 0; k < K; ++k)
        mass += std::fabs(value(ta ? A[k * lda + i] : A[i * lda + k])) *
                std::fabs(value(tb ? B[j * ldb + k] : B[k * ldb + j]));
      const double tol = 2.0 * (K + 2) * std::ldexp(1.0, -24) * (mass + std::fabs(beta * R[i * ldc + j]) + 1.0);
      ASSERT_NEAR(c, r, tol) << "i " << i << " j " << j << " M N K " << M << " " << N << " " << K;
    }
}

TEST_P(Bf16Gemm, MatchesReferenceOnOddShapes) {
  const Shape3 shapes[] = {{1, 1, 1},   {1, 33, 7},  {2, 31, 1},  {5, 64, 2},   {13, 65, 17},
                           {12, 32, 64}, {25, 100, 33}, {97, 70, 129}, {130, 3, 300}, {3, 257, 1025}};
  for (const Shape3& s : shapes)
    for (int t = 0; t < 4; ++t) check_against_reference(GetParam(), t & 1, t & 2, s, 0.0f, false);
}

TEST_P(Bf16Gemm, BetaAndBias) {
  check_against_reference(GetParam(), false, true, {37, 45, 19}, 0.5f, true);
  check_against_reference(GetParam(), true, false, {37, 45, 19}, 1.0f, false);
  check_against_reference(GetParam(), false, false, {1, 45, 19}, 0.0f, true);
}

TEST_P(Bf16Gemm, PackedWeightEqualsUnpacked) {
  const std::int64_t M = 29, N = 77, K = 51;
  const auto A = randn(M * K, 5), W = randn(N * K, 6);
  std::vector<float> C1(M * N), C2(M * N);
  const bf::PackedB P = bf::pack_b(true, K, N, W.data(), K);
  bf::gemm_packed(false, M, A.data(), K, P, 0.0f, C1.data(), N, nullptr, GetParam());
  bf::gemm(false, true, M, N, K, A.data(), K, W.data(), K, 0.0f, C2.data(), N, nullptr, GetParam());
  EXPECT_EQ(C1, C2);
}

TEST_P(Bf16Gemm, BatchedSharedAndSummed) {
  const std::int64_t batch = 3, M = 9, N = 40, K = 11;
  const auto A = randn(batch * M * K, 8), B = randn(batch * K * N, 9);
  // Shared B (stride 0) and per-entry B, each entry against a single product.
  for (std::int64_t sb : {std::int64_t{0}, K * N}) {
    std::vector<float> C(batch * M * N), one(M * N);
    bf::gemm_batched(false, false, batch, M, N, K, A.data(), K, M * K, B.data(), N, sb, 0.0f, C.data(), N, M * N,
                     GetParam());
    for (std::int64_t i = 0; i < batch; ++i) {
      bf::gemm(false, false, M, N, K, A.data() + i * M * K, K, B.data() + i * sb, N, 0.0f, one.data(), N, nullptr,
               GetParam());
      for (std::int64_t e = 0; e < M * N; ++e) ASSERT_EQ(C[i * M * N + e], one[e]);
    }
  }
  // stride_c == 0: the entries' products summed in batch order.
  std::vector<float> S(M * N), T(M * N);
  bf::gemm_batched(false, false, batch, M, N, K, A.data(), K, M * K, B.data(), N, K * N, 0.0f, S.data(), N, 0,
                   GetParam());
  for (std::int64_t i = 0; i < batch; ++i)
    bf::gemm(false, false, M, N, K, A.data() + i * M * K, K, B.data() + i * K * N, N, i == 0 ? 0.0f : 1.0f, T.data(),
             N, nullptr, GetParam());
  EXPECT_EQ(S, T);
}

TEST_P(Bf16Gemm, OneAndTwoThreadsIdentical) {
  const std::int64_t M = 300, N = 530, K = 257;
  const auto A = randn(M * K, 10), B = randn(N * K, 11);
  std::vector<float> C1(M * N), C2(M * N);
  tg::set_num_threads(1);
  bf::gemm(false, true, M, N, K, A.data(), K, B.data(), K, 0.0f, C1.data(), N, nullptr, GetParam());
  tg::set_num_threads(2);
  bf::gemm(false, true, M, N, K, A.data(), K, B.data(), K, 0.0f, C2.data(), N, nullptr, GetParam());
  tg::set_num_threads(0);
  EXPECT_EQ(C1, C2);
}

INSTANTIATE_TEST_SUITE_P(Paths, Bf16Gemm, ::testing::Values(bf::Path::avx2, bf::Path::avx512bf16),
                         [](const auto& info) { return std::string(info.param == bf::Path::avx2 ? "avx2" : "avx512bf16"); });

}  // namespace
