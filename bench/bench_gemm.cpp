// SGEMM throughput of tapegrad's kernel, and of OpenBLAS as a yardstick when it is available.
// Arguments: M, K, N, trans_a, trans_b, threads. Counter "GFLOPS" = 2*M*N*K per second / 1e9.
// Each tapegrad row's label is the kernel path it took (avx2 or avx512); TG_CPU=avx2 forces AVX2.
//   build-gemm/bin/bench_gemm --benchmark_repetitions=3 --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <cstdint>
#include <random>
#include <vector>

#include "autograd/cpu.h"
#include "autograd/kernels/gemm.h"
#include "autograd/ops_elementwise.h"
#include "autograd/parallel.h"

#ifdef TG_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace {

template <class T = float>
struct Operands {
  std::vector<T> A, B, C;
};

template <class T = float>
Operands<T> make_operands(int64_t M, int64_t K, int64_t N) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<T> dist(-1, 1);
  Operands<T> o;
  o.A.resize(size_t(M * K));
  o.B.resize(size_t(K * N));
  o.C.assign(size_t(M * N), T(0));
  for (auto& x : o.A) x = dist(rng);
  for (auto& x : o.B) x = dist(rng);
  return o;
}

void set_counters(benchmark::State& state, int64_t M, int64_t K, int64_t N) {
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * double(M) * double(N) * double(K) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_tapegrad_sgemm(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const int threads = static_cast<int>(state.range(5));
  Operands<float> o = make_operands<float>(M, K, N);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  tg::set_num_threads(threads);
  for (auto _ : state) {
    tg::kernels::gemm<float>(ta, tb, M, N, K, 1.f, o.A.data(), lda, o.B.data(), ldb, 0.f, o.C.data(), N);
    benchmark::DoNotOptimize(o.C.data());
    benchmark::ClobberMemory();
  }
  tg::set_num_threads(0);
  set_counters(state, M, K, N);
  state.SetLabel(tg::cpu::isa_name(tg::cpu::isa()));
}

// Double precision, a few shapes only (the models train in float).
void BM_tapegrad_dgemm(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const int threads = static_cast<int>(state.range(5));
  Operands<double> o = make_operands<double>(M, K, N);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  tg::set_num_threads(threads);
  for (auto _ : state) {
    tg::kernels::gemm<double>(ta, tb, M, N, K, 1.0, o.A.data(), lda, o.B.data(), ldb, 0.0, o.C.data(), N);
    benchmark::DoNotOptimize(o.C.data());
    benchmark::ClobberMemory();
  }
  tg::set_num_threads(0);
  set_counters(state, M, K, N);
  state.SetLabel(tg::cpu::isa_name(tg::cpu::isa()));
}

#ifdef TG_HAVE_OPENBLAS
void BM_openblas_dgemm(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const int threads = static_cast<int>(state.range(5));
  Operands<double> o = make_operands<double>(M, K, N);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  openblas_set_num_threads(threads);
  for (auto _ : state) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N),
                int(K), 1.0, o.A.data(), int(lda), o.B.data(), int(ldb), 0.0, o.C.data(), int(N));
    benchmark::DoNotOptimize(o.C.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, M, K, N);
}

void BM_openblas_sgemm(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const int threads = static_cast<int>(state.range(5));
  Operands<float> o = make_operands<float>(M, K, N);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  openblas_set_num_threads(threads);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N),
                int(K), 1.f, o.A.data(), int(lda), o.B.data(), int(ldb), 0.f, o.C.data(), int(N));
    benchmark::DoNotOptimize(o.C.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, M, K, N);
}
#endif

// (M, K, N, trans_a, trans_b) shapes: the TOOLCHAIN.md reference shapes, then model shapes.
void shapes(benchmark::internal::Benchmark* b) {
  const int64_t list[][5] = {
      {64, 32, 96, 0, 0},     {64, 288, 768, 0, 0},   {80, 1620, 3000, 0, 0}, {512, 512, 512, 0, 0},
      {640, 32, 96, 0, 0},    {64, 1000, 3000, 0, 0}, {80, 2620, 1000, 0, 0}, {1280, 1000, 30000, 0, 0},
      // x * W^T (trans_b) and weight gradients gy^T * x (trans_a: M = out, K = rows, N = in).
      {64, 1000, 3000, 0, 1}, {80, 1620, 3000, 0, 1}, {3000, 64, 1000, 1, 0}, {96, 640, 32, 1, 0},
      {1000, 1280, 3000, 1, 0},
      // Batch-1 decoding: one row through the readout of B ([s; Ey; c] = 1024 -> 8000) and C (3620 -> 30000).
      {1, 1024, 8000, 0, 1},  {1, 3620, 30000, 0, 1},
      // T's batch-1 decoding: its attention projections, feed-forward layers and readout (d_model 256).
      {1, 256, 256, 0, 1},    {1, 256, 1024, 0, 1},   {1, 1024, 256, 0, 1},   {1, 256, 8000, 0, 1},
  };
  for (auto& s : list)
    for (int64_t threads : {1, 2}) b->Args({s[0], s[1], s[2], s[3], s[4], threads});
  b->ArgNames({"M", "K", "N", "ta", "tb", "threads"});
  b->UseRealTime();
  b->Unit(benchmark::kMicrosecond);
}

void double_shapes(benchmark::internal::Benchmark* b) {
  const int64_t list[][5] = {{64, 288, 768, 0, 0}, {80, 1620, 3000, 0, 0}, {512, 512, 512, 0, 0}};
  for (auto& s : list)
    for (int64_t threads : {1, 2}) b->Args({s[0], s[1], s[2], s[3], s[4], threads});
  b->ArgNames({"M", "K", "N", "ta", "tb", "threads"});
  b->UseRealTime();
  b->Unit(benchmark::kMicrosecond);
}

// The FMA ceiling every GEMM figure is read against: 12 independent chains of float FMAs in
// registers (enough to cover the latency on both FMA pipes), no memory traffic. Run with
// ->Threads(2) for the two cores together. The 512-bit variant runs only where the CPU has
// AVX-512F; read the GEMM against the peak of the path it took (the row's label).
constexpr int kFmaChains = 12;
constexpr int64_t kFmaSteps = 1 << 16;

void set_fma_counter(benchmark::State& state, int lanes) {
  state.counters["GFLOPS"] = benchmark::Counter(double(state.iterations()) * kFmaSteps * kFmaChains * lanes * 2,
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_fma_peak_avx2(benchmark::State& state) {
  __m256 acc[kFmaChains];
  for (auto& a : acc) a = _mm256_set1_ps(0.999f);
  const __m256 b = acc[0], c = acc[0];
  for (auto _ : state) {
    for (int64_t n = 0; n < kFmaSteps; ++n) {
#pragma GCC unroll 12
      for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], b, c);
    }
    for (auto& a : acc) benchmark::DoNotOptimize(a);
  }
  set_fma_counter(state, 8);
}

__attribute__((target("avx512f"))) void fma_chains_avx512(benchmark::State& state) {
  __m512 acc[kFmaChains];
  for (auto& a : acc) a = _mm512_set1_ps(0.999f);
  const __m512 b = acc[0], c = acc[0];
  for (auto _ : state) {
    for (int64_t n = 0; n < kFmaSteps; ++n) {
#pragma GCC unroll 12
      for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
    }
    float sink[16];
    for (auto& a : acc) {
      _mm512_storeu_ps(sink, a);
      benchmark::DoNotOptimize(sink[0]);
    }
  }
}

void BM_fma_peak_avx512(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("no AVX-512F on this CPU");
    return;
  }
  fma_chains_avx512(state);
  set_fma_counter(state, 16);
}

BENCHMARK(BM_fma_peak_avx2)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_fma_peak_avx512)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_tapegrad_sgemm)->Apply(shapes);
BENCHMARK(BM_tapegrad_dgemm)->Apply(double_shapes);
#ifdef TG_HAVE_OPENBLAS
BENCHMARK(BM_openblas_sgemm)->Apply(shapes);
BENCHMARK(BM_openblas_dgemm)->Apply(double_shapes);
#endif

}  // namespace
