// bf16 products (autocast's kernels, autograd/kernels/gemm_bf16.h) against tapegrad's float32 GEMM,
// on the workloads' shapes, per kernel path, and oneDNN's bf16 matmul where libdnnl-dev is
// installed. Arguments: M, K, N, trans_a, trans_b, threads; "GFLOPS" = 2 M N K per second / 1e9.
//   BM_f32            tapegrad's float32 GEMM (kernels::gemm)
//   BM_bf16_packed/P  the right operand packed once (a cached weight), path P; only the left one is
//                     rounded and packed per call
//   BM_bf16_call/P    both operands rounded and packed per call (backward's activation products)
//   BM_onednn_bf16    oneDNN 2.x matmul, bf16 weights reordered once, the f32 source reordered
//                     to bf16 per call (included in the time), f32 output
//   build/bin/bench_bf16 --benchmark_min_time=0.3
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/parallel.h"

#ifdef TG_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
extern "C" void omp_set_num_threads(int);
#endif

namespace {

namespace bf = tg::kernels::bf16;

struct Operands {
  std::vector<float> A, B, C;
};

Operands make(int64_t M, int64_t K, int64_t N) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-1, 1);
  Operands o;
  o.A.resize(size_t(M * K));
  o.B.resize(size_t(K * N));
  o.C.assign(size_t(M * N), 0.0f);
  for (auto& x : o.A) x = d(rng);
  for (auto& x : o.B) x = d(rng);
  return o;
}

struct Args {
  int64_t M, K, N;
  bool ta, tb;
  int threads;
  explicit Args(const benchmark::State& s)
      : M(s.range(0)), K(s.range(1)), N(s.range(2)), ta(s.range(3) != 0), tb(s.range(4) != 0),
        threads(static_cast<int>(s.range(5))) {}
  int64_t lda() const { return ta ? M : K; }
  int64_t ldb() const { return tb ? K : N; }
};

void counters(benchmark::State& state, const Args& a) {
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(a.M) * double(a.N) * double(a.K) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void BM_f32(benchmark::State& state) {
  const Args a(state);
  Operands o = make(a.M, a.K, a.N);
  tg::set_num_threads(a.threads);
  for (auto _ : state) {
    tg::kernels::gemm<float>(a.ta, a.tb, a.M, a.N, a.K, 1.f, o.A.data(), a.lda(), o.B.data(), a.ldb(), 0.f,
                             o.C.data(), a.N);
    benchmark::ClobberMemory();
  }
  tg::set_num_threads(0);
  counters(state, a);
}

void bf16_packed(benchmark::State& state, bf::Path path) {
  if (!bf::available(path)) return state.SkipWithError("CPU lacks avx512_bf16");
  const Args a(state);
  Operands o = make(a.M, a.K, a.N);
  tg::set_num_threads(a.threads);
  const bf::PackedB P = bf::pack_b(a.tb, a.K, a.N, o.B.data(), a.ldb());
  for (auto _ : state) {
    bf::gemm_packed(a.ta, a.M, o.A.data(), a.lda(), P, 0.0f, o.C.data(), a.N, nullptr, path);
    benchmark::ClobberMemory();
  }
  tg::set_num_threads(0);
  state.SetLabel(bf::path_name(path));
  counters(state, a);
}

void bf16_call(benchmark::State& state, bf::Path path) {
  if (!bf::available(path)) return state.SkipWithError("CPU lacks avx512_bf16");
  const Args a(state);
  Operands o = make(a.M, a.K, a.N);
  tg::set_num_threads(a.threads);
  for (auto _ : state) {
    bf::gemm(a.ta, a.tb, a.M, a.N, a.K, o.A.data(), a.lda(), o.B.data(), a.ldb(), 0.0f, o.C.data(), a.N, nullptr, path);
    benchmark::ClobberMemory();
  }
  tg::set_num_threads(0);
  state.SetLabel(bf::path_name(path));
  counters(state, a);
}

void BM_bf16_packed_avx512bf16(benchmark::State& s) { bf16_packed(s, bf::Path::avx512bf16); }
void BM_bf16_packed_avx2(benchmark::State& s) { bf16_packed(s, bf::Path::avx2); }
void BM_bf16_call_avx512bf16(benchmark::State& s) { bf16_call(s, bf::Path::avx512bf16); }
void BM_bf16_call_avx2(benchmark::State& s) { bf16_call(s, bf::Path::avx2); }

/// Rounding and packing a (K, N) or (N, K) operand alone (a weight after each optimizer step; an
/// activation per call). Arguments: K, N, trans_b, threads; "GBps" counts the float32 bytes read.
void BM_pack_b(benchmark::State& state) {
  const int64_t K = state.range(0), N = state.range(1);
  const bool tb = state.range(2) != 0;
  Operands o = make(1, K, N);
  tg::set_num_threads(static_cast<int>(state.range(3)));
  for (auto _ : state) {
    bf::PackedB P = bf::pack_b(tb, K, N, o.B.data(), tb ? K : N);
    benchmark::DoNotOptimize(P.data);
  }
  tg::set_num_threads(0);
  state.counters["GBps"] = benchmark::Counter(4.0 * double(K) * double(N) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

#ifdef TG_HAVE_DNNL
void BM_onednn_bf16(benchmark::State& state) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const Args a(state);
  if (a.ta) return state.SkipWithError("trans_a not measured");
  Operands o = make(a.M, a.K, a.N);
  omp_set_num_threads(a.threads);
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const memory::dims src_dims{a.M, a.K}, w_dims{a.K, a.N}, dst_dims{a.M, a.N};
  matmul::desc d(memory::desc(src_dims, dt::bf16, tag::ab), memory::desc(w_dims, dt::bf16, tag::any),
                 memory::desc(dst_dims, dt::f32, tag::ab));
  matmul::primitive_desc pd(d, eng);
  matmul prim(pd);
  memory src_f32({src_dims, dt::f32, tag::ab}, eng, o.A.data());
  memory src_bf16({src_dims, dt::bf16, tag::ab}, eng);
  memory w_f32({w_dims, dt::f32, a.tb ? tag::ba : tag::ab}, eng, o.B.data());
  memory w_packed(pd.weights_desc(), eng);
  memory dst({dst_dims, dt::f32, tag::ab}, eng, o.C.data());
  reorder(w_f32, w_packed).execute(s, w_f32, w_packed);  // once, as a cached weight
  reorder to_bf16(src_f32, src_bf16);
  s.wait();
  for (auto _ : state) {
    to_bf16.execute(s, src_f32, src_bf16);
    prim.execute(s, {{DNNL_ARG_SRC, src_bf16}, {DNNL_ARG_WEIGHTS, w_packed}, {DNNL_ARG_DST, dst}});
    s.wait();
  }
  const char* impl = pd.impl_info_str();
  state.SetLabel(impl ? impl : "");
  counters(state, a);
}
#endif

void shapes(benchmark::internal::Benchmark* b) {
  const std::vector<std::vector<int64_t>> list = {
      // B: the readout (742 valid target tokens of a step, [s; Ey; c] = 1024 -> 8000), forward x Wᵀ,
      // input gradient G W and weight gradient Gᵀ x.
      {742, 1024, 8000, 0, 1}, {742, 8000, 1024, 0, 0}, {8000, 742, 1024, 1, 0},
      // B: a GRU's hoisted input projection (1280 = 64 x 20 rows), one recurrent step, the attention keys.
      {1280, 256, 768, 0, 1}, {64, 256, 768, 0, 1}, {1280, 512, 256, 0, 1},
      // G: the feed-forward block's two products (2048 tokens, d_model 256, 1024 hidden).
      {2048, 256, 1024, 0, 1}, {2048, 1024, 256, 0, 1},
      // Batch-1 decoding: B's readout and GRU step, T's readout and feed-forward.
      {1, 1024, 8000, 0, 1}, {1, 256, 768, 0, 1}, {1, 256, 8000, 0, 1}, {1, 1024, 256, 0, 1},
  };
  for (const auto& s : list)
    for (int64_t threads : {1, 2}) b->Args({s[0], s[1], s[2], s[3], s[4], threads});
  b->ArgNames({"M", "K", "N", "ta", "tb", "threads"});
  b->UseRealTime();
  b->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(BM_f32)->Apply(shapes);
BENCHMARK(BM_pack_b)->ArgsProduct({{1024, 8000}, {1024, 8000}, {0, 1}, {1, 2}})->ArgNames({"K", "N", "tb", "threads"})
    ->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_bf16_packed_avx512bf16)->Apply(shapes);
BENCHMARK(BM_bf16_packed_avx2)->Apply(shapes);
BENCHMARK(BM_bf16_call_avx512bf16)->Apply(shapes);
BENCHMARK(BM_bf16_call_avx2)->Apply(shapes);
#ifdef TG_HAVE_DNNL
BENCHMARK(BM_onednn_bf16)->Apply(shapes);
#endif
