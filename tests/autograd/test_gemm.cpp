// The packed GEMM kernel against the plain reference loop, on every kernel path the CPU has
// (tg::cpu::set_isa picks the path; a path the CPU lacks is skipped, naming the missing flags).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "autograd/cpu.h"
#include "autograd/kernels/gemm.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"

namespace {

using tg::kernels::gemm;
using tg::kernels::gemm_batched;
using tg::kernels::gemm_reference;

/// The AVX-512 flags the CPU lacks, e.g. "avx512bw avx512vl" (empty when it has them all).
std::string missing_avx512() {
  const auto& f = tg::cpu::features();
  std::string s;
  for (auto [name, on] : {std::pair<const char*, bool>{"avx512f", f.avx512f}, {"avx512dq", f.avx512dq},
                          {"avx512bw", f.avx512bw}, {"avx512vl", f.avx512vl}})
    if (!on) (s += s.empty() ? "" : " ") += name;
  return s;
}

/// Runs each test on one kernel path.
class GemmTest : public ::testing::TestWithParam<tg::cpu::Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > tg::cpu::best_isa()) GTEST_SKIP() << "this CPU lacks " << missing_avx512();
    previous_ = tg::cpu::set_isa(GetParam());
    ASSERT_EQ(tg::cpu::isa(), GetParam());
  }
  void TearDown() override { tg::cpu::set_isa(previous_); }

 private:
  tg::cpu::Isa previous_ = tg::cpu::isa();
};

INSTANTIATE_TEST_SUITE_P(Paths, GemmTest, ::testing::Values(tg::cpu::Isa::avx2, tg::cpu::Isa::avx512),
                         [](const auto& info) { return std::string(tg::cpu::isa_name(info.param)); });

struct Case {
  bool ta, tb;
  int64_t M, N, K;
  double alpha, beta;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;  // extra leading-dimension elements
};

std::string describe(const Case& c) {
  return "ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) + " M=" + std::to_string(c.M) +
         " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta) + " pads=" + std::to_string(c.pad_a) + "," +
         std::to_string(c.pad_b) + "," + std::to_string(c.pad_c);
}

template <class T>
std::vector<T> random_vector(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(rng));
  return v;
}

/// Runs gemm and gemm_reference on one case and checks every element of C (and that the padding
/// between rows of C is untouched). The tolerance scales with K and the sum of |a*b|.
template <class T>
void check_case(const Case& c, uint32_t seed, double rel_tol) {
  SCOPED_TRACE(describe(c));
  std::mt19937 rng(seed);
  const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  const int64_t lda = a_cols + c.pad_a, ldb = b_cols + c.pad_b, ldc = c.N + c.pad_c;
  auto A = random_vector<T>(size_t(std::max<int64_t>(a_rows * lda, 1)), rng);
  auto B = random_vector<T>(size_t(std::max<int64_t>(b_rows * ldb, 1)), rng);
  std::vector<T> C0 = random_vector<T>(size_t(std::max<int64_t>(c.M * ldc, 1)), rng);
  const T sentinel = T(12345.5);
  if (c.beta == 0)
    for (auto& x : C0) x = std::numeric_limits<T>::quiet_NaN();
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = c.N; j < ldc; ++j) C0[size_t(i * ldc + j)] = sentinel;

  std::vector<T> C = C0, R = C0;
  gemm<T>(c.ta, c.tb, c.M, c.N, c.K, T(c.alpha), A.data(), lda, B.data(), ldb, T(c.beta), C.data(), ldc);
  gemm_reference<T>(c.ta, c.tb, c.M, c.N, c.K, T(c.alpha), A.data(), lda, B.data(), ldb, T(c.beta),
                    R.data(), ldc);

  int failures = 0;
  for (int64_t i = 0; i < c.M && failures < 5; ++i) {
    for (int64_t j = 0; j < ldc && failures < 5; ++j) {
      const T got = C[size_t(i * ldc + j)], want = R[size_t(i * ldc + j)];
      if (j >= c.N) {
        if (got != sentinel) {
          ADD_FAILURE() << "padding of C overwritten at (" << i << "," << j << ")";
          ++failures;
        }
        continue;
      }
      // Scale: |alpha| * sum_k |a_ik b_kj| + |beta c_ij|, bounded by |alpha| K + |beta| (entries in [-1, 1]).
      const double scale = std::abs(c.alpha) * double(std::max<int64_t>(c.K, 1)) + std::abs(c.beta) + 1e-30;
      if (!(std::abs(double(got) - double(want)) <= rel_tol * scale)) {
        ADD_FAILURE() << "C(" << i << "," << j << ") = " << got << ", reference " << want;
        ++failures;
      }
    }
  }
}

std::vector<Case> shape_cases() {
  std::vector<Case> cases;
  const int64_t dims[][3] = {
      {1, 1, 1},    {1, 1, 7},     {1, 17, 5},   {7, 1, 9},     {5, 3, 1},    {6, 16, 8},
      {12, 32, 16}, {13, 33, 17},  {7, 15, 9},   {1, 100, 40},  {100, 1, 40}, {64, 96, 32},
      {65, 97, 31}, {37, 53, 385}, {19, 8, 800}, {150, 40, 10}, {4, 9, 3},    {23, 24, 25},
  };
  for (auto& d : dims)
    for (int t = 0; t < 4; ++t) cases.push_back(
          {.ta = bool(t & 1), .tb = bool(t & 2), .M = d[0], .N = d[1], .K = d[2], .alpha = 1.0, .beta = 0.0});
  return cases;
}

TEST_P(GemmTest, ShapesDouble) {
  uint32_t seed = 1;
  for (const auto& c : shape_cases()) check_case<double>(c, seed++, 1e-13);
}

TEST_P(GemmTest, ShapesFloat) {
  uint32_t seed = 100;
  for (const auto& c : shape_cases()) check_case<float>(c, seed++, 2e-6);
}

TEST_P(GemmTest, AlphaBetaAndLeadingDimensions) {
  uint32_t seed = 200;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    for (double beta : {0.0, 1.0, -0.5}) {
      for (double alpha : {1.0, 0.75, -2.0}) {
        Case c{.ta = ta, .tb = tb, .M = 29, .N = 45, .K = 37, .alpha = alpha, .beta = beta,
               .pad_a = 3, .pad_b = 5, .pad_c = 7};
        check_case<double>(c, seed, 1e-13);
        check_case<float>(c, seed++, 2e-6);
      }
    }
  }
}

TEST_P(GemmTest, SeveralBlocks) {
  // Spans several K passes, several A blocks (MC) and, for double, several B slabs (NC).
  uint32_t seed = 300;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    check_case<double>({ta, tb, 157, 1100, 700, 0.5, 1.0, 1, 2, 3}, seed++, 1e-13);
    check_case<float>({ta, tb, 157, 1100, 700, 1.0, 0.0, 0, 0, 0}, seed++, 4e-6);
  }
  check_case<double>({false, false, 50, 2100, 300, 1.0, 0.0}, seed++, 1e-13);
  check_case<float>({false, false, 400, 3200, 40, 1.0, 0.5}, seed++, 2e-6);
  // One K pass: up to 640 rows read A in place (several MC blocks here), taller ones pack it.
  for (int t = 0; t < 4; ++t)
    for (int64_t M : {150, 640, 641, 700}) {
      check_case<float>({bool(t & 1), bool(t & 2), M, 70, 50, 1.0, 0.0, 1, 2, 3}, seed++, 2e-6);
      check_case<double>({bool(t & 1), bool(t & 2), M, 45, 33, -0.5, 1.0, 0, 1, 0}, seed++, 1e-13);
    }
}

TEST_P(GemmTest, SkinnyProducts) {
  // M <= 4 takes the unpacked path (dot products for a transposed B, row sums otherwise), M = 5
  // the packed one. Alpha, beta, leading dimensions, SIMD tails.
  uint32_t seed = 400;
  for (int t = 0; t < 4; ++t)
    for (int64_t M : {1, 2, 4, 5})
      for (int64_t K : {1, 15, 16, 33, 700, 3000}) {
        check_case<double>({bool(t & 1), bool(t & 2), M, 37, K, -0.5, 0.25, 2, 3, 4}, seed++, 1e-13);
        check_case<float>({bool(t & 1), bool(t & 2), M, 300, K, 1.0, 0.0, 0, 1, 0}, seed++, 4e-6);
      }
  // K <= 4 takes the same path for any M (attention's (S, 1) x (1, H) outer products), K = 5 not.
  for (int t = 0; t < 4; ++t)
    for (int64_t K : {1, 2, 4, 5})
      for (int64_t M : {10, 64, 300}) {
        check_case<double>({bool(t & 1), bool(t & 2), M, 37, K, -0.5, 0.25, 2, 3, 4}, seed++, 1e-13);
        check_case<float>({bool(t & 1), bool(t & 2), M, 33, K, 1.0, 0.0, 0, 1, 0}, seed++, 4e-6);
      }
}

TEST_P(GemmTest, ZeroSizes) {
  std::vector<double> C(12, 2.0);
  double dummy = 1.0;
  // K == 0: C = beta * C.
  gemm<double>(false, false, 3, 4, 0, 1.0, &dummy, 1, &dummy, 4, 0.5, C.data(), 4);
  for (double x : C) EXPECT_EQ(x, 1.0);
  gemm<double>(false, false, 3, 4, 0, 1.0, &dummy, 1, &dummy, 4, 0.0, C.data(), 4);
  for (double x : C) EXPECT_EQ(x, 0.0);
  // M == 0 or N == 0: nothing happens.
  gemm<double>(false, false, 0, 4, 3, 1.0, &dummy, 3, &dummy, 4, 0.0, nullptr, 4);
  gemm<double>(false, false, 3, 0, 3, 1.0, &dummy, 3, &dummy, 1, 0.0, nullptr, 1);
}

/// gemm_batched against per-entry references; stride 0 shares A or B.
template <class T>
void check_batched(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, bool share_a,
                   bool share_b, double beta, uint32_t seed, double tol) {
  SCOPED_TRACE("batched ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " batch=" +
               std::to_string(batch) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
               " K=" + std::to_string(K) + " share_a=" + std::to_string(share_a) +
               " share_b=" + std::to_string(share_b));
  std::mt19937 rng(seed);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
  const int64_t sa = share_a ? 0 : M * K, sb = share_b ? 0 : K * N, sc = M * N;
  auto A = random_vector<T>(size_t((share_a ? 1 : batch) * M * K), rng);
  auto B = random_vector<T>(size_t((share_b ? 1 : batch) * K * N), rng);
  auto C = random_vector<T>(size_t(batch * M * N), rng);
  if (beta == 0)
    for (auto& x : C) x = std::numeric_limits<T>::quiet_NaN();
  auto R = C;
  gemm_batched<T>(ta, tb, batch, M, N, K, T(1.5), A.data(), lda, sa, B.data(), ldb, sb, T(beta), C.data(),
                  ldc, sc);
  for (int64_t i = 0; i < batch; ++i)
    gemm_reference<T>(ta, tb, M, N, K, T(1.5), A.data() + i * sa, lda, B.data() + i * sb, ldb, T(beta),
                      R.data() + i * sc, ldc);
  const double scale = 1.5 * double(K) + std::abs(beta);
  for (size_t i = 0; i < C.size(); ++i)
    ASSERT_LE(std::abs(double(C[i]) - double(R[i])), tol * scale) << "element " << i;
}

TEST_P(GemmTest, Batched) {
  uint32_t seed = 400;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    for (int share = 0; share < 3; ++share) {
      check_batched<double>(ta, tb, 5, 13, 21, 9, share == 1, share == 2, 0.0, seed++, 1e-13);
      check_batched<double>(ta, tb, 3, 40, 70, 50, share == 1, share == 2, 1.0, seed++, 1e-13);
      check_batched<float>(ta, tb, 37, 8, 16, 24, share == 1, share == 2, 0.0, seed++, 2e-6);
      check_batched<float>(ta, tb, 4, 70, 130, 90, share == 1, share == 2, 0.5, seed++, 2e-6);
      // Attention's shapes: (1, S) x (S, H) per sentence and the (S, 1) x (1, H) outer products
      // of its backward take the serial skinny path for the whole batch.
      check_batched<float>(ta, tb, 64, 1, 32, 10, share == 1, share == 2, 0.0, seed++, 2e-6);
      check_batched<double>(ta, tb, 64, 10, 32, 1, share == 1, share == 2, 1.0, seed++, 1e-13);
    }
  }
}

/// The result must not depend on the number of threads (K is never split).
template <class T>
void check_thread_invariance(bool ta, bool tb, int64_t M, int64_t N, int64_t K, uint32_t seed) {
  SCOPED_TRACE("threads ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " M=" + std::to_string(M) +
               " N=" + std::to_string(N) + " K=" + std::to_string(K));
  std::mt19937 rng(seed);
  auto A = random_vector<T>(size_t(M * K), rng);
  auto B = random_vector<T>(size_t(K * N), rng);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  std::vector<T> C1(size_t(M * N), T(0)), C2(size_t(M * N), T(0));
  tg::set_num_threads(1);
  gemm<T>(ta, tb, M, N, K, T(1), A.data(), lda, B.data(), ldb, T(0), C1.data(), N);
  tg::set_num_threads(2);
  gemm<T>(ta, tb, M, N, K, T(1), A.data(), lda, B.data(), ldb, T(0), C2.data(), N);
  tg::set_num_threads(0);
  EXPECT_EQ(0, std::memcmp(C1.data(), C2.data(), C1.size() * sizeof(T)));
}

TEST_P(GemmTest, BitwiseIdenticalAcrossThreadCounts) {
  uint32_t seed = 500;
  for (int t = 0; t < 4; ++t) {
    check_thread_invariance<float>(t & 1, t & 2, 80, 1000, 900, seed++);
    check_thread_invariance<float>(t & 1, t & 2, 300, 200, 500, seed++);
    check_thread_invariance<double>(t & 1, t & 2, 64, 700, 420, seed++);
  }
  // Skinny products (M <= 4 streams B without packing) split over N.
  check_thread_invariance<float>(false, true, 1, 8000, 1024, seed++);
  check_thread_invariance<float>(true, false, 3, 5000, 300, seed++);
  check_thread_invariance<float>(true, false, 600, 5000, 2, seed++);
  // A skinny product with B stored (N, K): a column computed alone (where a task boundary would
  // leave it) has the same bits as inside the whole product, whatever the kernel groups.
  for (int64_t M : {1, 2, 4})
    for (int64_t K : {7, 260}) {
      SCOPED_TRACE("column alone M=" + std::to_string(M) + " K=" + std::to_string(K));
      std::mt19937 rng(seed++);
      const int64_t N = 13;
      auto A = random_vector<float>(size_t(M * K), rng);
      auto B = random_vector<float>(size_t(N * K), rng);
      std::vector<float> whole(size_t(M * N)), alone(size_t(M * N));
      gemm<float>(false, true, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f, whole.data(), N);
      for (int64_t n = 0; n < N; ++n)
        gemm<float>(false, true, M, 1, K, 1.f, A.data(), K, B.data() + n * K, K, 0.f, alone.data() + n, N);
      EXPECT_EQ(0, std::memcmp(whole.data(), alone.data(), whole.size() * sizeof(float)));
    }
  // gemm_batched with many small entries (parallel over entries) against 1 thread.
  std::mt19937 rng(seed);
  const int64_t batch = 64, M = 16, N = 24, K = 40;
  auto A = random_vector<float>(size_t(M * K), rng);
  auto B = random_vector<float>(size_t(batch * K * N), rng);
  std::vector<float> C1(size_t(batch * M * N)), C2(C1.size());
  tg::set_num_threads(1);
  gemm_batched<float>(false, false, batch, M, N, K, 1.f, A.data(), K, 0, B.data(), N, K * N, 0.f, C1.data(), N,
                      M * N);
  tg::set_num_threads(2);
  gemm_batched<float>(false, false, batch, M, N, K, 1.f, A.data(), K, 0, B.data(), N, K * N, 0.f, C2.data(), N,
                      M * N);
  tg::set_num_threads(0);
  EXPECT_EQ(0, std::memcmp(C1.data(), C2.data(), C1.size() * sizeof(float)));
}

}  // namespace

namespace {

// gemm with a row bias equals the reference plus the bias on every row: skinny (M <= 4), thin
// (K <= 4), in-place A, packed A, several K passes, edge tiles and K = 0.
template <class T>
void check_bias(bool ta, bool tb, int64_t M, int64_t N, int64_t K, uint32_t seed, double tol) {
  SCOPED_TRACE("bias ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " M=" + std::to_string(M) +
               " N=" + std::to_string(N) + " K=" + std::to_string(K));
  std::mt19937 rng(seed);
  auto A = random_vector<T>(size_t(std::max<int64_t>(M * K, 1)), rng);
  auto B = random_vector<T>(size_t(std::max<int64_t>(K * N, 1)), rng);
  const auto bias = random_vector<T>(size_t(N), rng);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  std::vector<T> C(size_t(M * N), std::numeric_limits<T>::quiet_NaN()), R(C.size());
  gemm<T>(ta, tb, M, N, K, T(0.5), A.data(), std::max<int64_t>(lda, 1), B.data(), std::max<int64_t>(ldb, 1), T(0),
          C.data(), N, bias.data());
  gemm_reference<T>(ta, tb, M, N, K, T(0.5), A.data(), std::max<int64_t>(lda, 1), B.data(), std::max<int64_t>(ldb, 1),
                    T(0), R.data(), N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      ASSERT_NEAR(double(C[size_t(i * N + j)]), double(R[size_t(i * N + j)] + bias[size_t(j)]), tol * double(K + 2))
          << i << "," << j;
}

TEST_P(GemmTest, RowBias) {
  uint32_t seed = 900;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    for (auto [M, N, K] : {std::array<int64_t, 3>{1, 37, 50}, {3, 300, 7}, {64, 201, 32}, {65, 97, 3},
                           {700, 45, 40}, {29, 45, 700}, {13, 33, 0}}) {
      check_bias<float>(ta, tb, M, N, K, seed++, 2e-6);
      check_bias<double>(ta, tb, M, N, K, seed++, 1e-13);
    }
  }
  std::vector<float> a(4), b(4), c(4), bias(2);
  EXPECT_THROW(gemm<float>(false, false, 2, 2, 2, 1.f, a.data(), 2, b.data(), 2, 1.f, c.data(), 2, bias.data()),
               std::invalid_argument);
}

}  // namespace

namespace {

// gemm_batched with stride_c == 0 sums the entries into one C (the gradient of an operand shared
// across a batch): against the sum of per-entry references, for every transpose flag, shared
// operands, odd sizes, batch 1, beta 0 (C garbage) and 1.
template <class T>
void check_batched_sum(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, bool share_a, bool share_b,
                       double beta, uint32_t seed, double tol) {
  SCOPED_TRACE("sum ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " batch=" + std::to_string(batch) +
               " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
               " share_a=" + std::to_string(share_a) + " share_b=" + std::to_string(share_b));
  std::mt19937 rng(seed);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  const int64_t sa = share_a ? 0 : M * K, sb = share_b ? 0 : K * N;
  auto A = random_vector<T>(size_t((share_a ? 1 : batch) * M * K), rng);
  auto B = random_vector<T>(size_t((share_b ? 1 : batch) * K * N), rng);
  auto C = random_vector<T>(size_t(M * N), rng);
  std::vector<T> R(C.size(), T(0)), E(C.size());
  for (int64_t i = 0; i < batch; ++i) {
    gemm_reference<T>(ta, tb, M, N, K, T(1.5), A.data() + i * sa, lda, B.data() + i * sb, ldb, T(0), E.data(), N);
    for (size_t j = 0; j < R.size(); ++j) R[j] += E[j];
  }
  for (size_t j = 0; j < R.size(); ++j) R[j] += beta == 0 ? T(0) : T(beta) * C[j];
  if (beta == 0)
    for (auto& x : C) x = std::numeric_limits<T>::quiet_NaN();
  gemm_batched<T>(ta, tb, batch, M, N, K, T(1.5), A.data(), lda, sa, B.data(), ldb, sb, T(beta), C.data(), N, 0);
  const double scale = 1.5 * double(K * batch) + std::abs(beta);
  for (size_t i = 0; i < C.size(); ++i) ASSERT_LE(std::abs(double(C[i]) - double(R[i])), tol * scale) << "element " << i;
}

TEST_P(GemmTest, BatchedSumIntoOneC) {
  uint32_t seed = 700;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    for (int share = 0; share < 3; ++share) {
      check_batched_sum<double>(ta, tb, 5, 13, 21, 9, share == 1, share == 2, 0.0, seed++, 1e-13);
      check_batched_sum<double>(ta, tb, 1, 7, 33, 17, share == 1, share == 2, 1.0, seed++, 1e-13);
      check_batched_sum<float>(ta, tb, 6, 40, 70, 350, share == 1, share == 2, 0.0, seed++, 2e-6);
      check_batched_sum<float>(ta, tb, 8, 3, 16, 24, share == 1, share == 2, 1.0, seed++, 2e-6);  // skinny
    }
  }
}

// Large entries, at least two per thread: whole entries per task. Against the reference, and
// bitwise the same with 1 and 2 threads, for every flag and shared operand.
TEST_P(GemmTest, BatchedLargeEntriesPerTask) {
  uint32_t seed = 800;
  const int64_t batch = 4, M = 203, N = 211, K = 345;  // 2MNK > 8 x the parallel threshold; odd edges
  for (int t = 0; t < 4; ++t)
    for (int share = 0; share < 3; ++share) {
      const bool ta = t & 1, tb = t & 2, share_a = share == 1, share_b = share == 2;
      SCOPED_TRACE("ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " share=" + std::to_string(share));
      std::mt19937 rng(seed++);
      const int64_t lda = ta ? M : K, ldb = tb ? K : N, sa = share_a ? 0 : M * K, sb = share_b ? 0 : K * N;
      auto A = random_vector<float>(size_t((share_a ? 1 : batch) * M * K), rng);
      auto B = random_vector<float>(size_t((share_b ? 1 : batch) * K * N), rng);
      std::vector<float> C1(size_t(batch * M * N)), C2(C1.size()), R(C1.size());
      tg::set_num_threads(1);
      gemm_batched<float>(ta, tb, batch, M, N, K, 1.f, A.data(), lda, sa, B.data(), ldb, sb, 0.f, C1.data(), N, M * N);
      tg::set_num_threads(2);
      gemm_batched<float>(ta, tb, batch, M, N, K, 1.f, A.data(), lda, sa, B.data(), ldb, sb, 0.f, C2.data(), N, M * N);
      tg::set_num_threads(0);
      EXPECT_EQ(0, std::memcmp(C1.data(), C2.data(), C1.size() * sizeof(float)));
      for (int64_t i = 0; i < batch; ++i)
        gemm_reference<float>(ta, tb, M, N, K, 1.f, A.data() + i * sa, lda, B.data() + i * sb, ldb, 0.f,
                              R.data() + i * M * N, N);
      for (size_t i = 0; i < R.size(); ++i) ASSERT_LE(std::abs(C1[i] - R[i]), 2e-6f * float(K)) << "element " << i;
    }
}

}  // namespace
