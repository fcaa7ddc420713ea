// Op-level benchmarks at workload G's shapes (issue 20: B 32, T 64, d_model 256, 4 heads of 64),
// through the public API, with 1 and 2 threads. bench/libtorch/ops.cpp times the same cases (same
// names and arguments) in LibTorch. Layer norm is composed from public ops, as bench_encoder's
// model writes it; *FwdBwd cases time forward + backward of sum(out).
//   build/bin/bench_generic_ops --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cmath>

#include "autograd/ops_attention.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tensor.h"

using namespace tg;

namespace {

Tensor rnd(const Shape& s, std::uint64_t seed = 1) {
  Generator gen(seed);
  return Tensor::uniform(s, -1, 1, gen);
}

Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor centred = x - mean(x, {2}, true);
  return centred * rsqrt(var(x, {2}, Correction{0}, true) + 1e-5) * w + b;
}

// args: rows (B*T), d_model, threads
void BM_LayerNorm(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(2)));
  Tensor x = rnd({32, 64, 256}), w = Tensor::ones({256}), b = Tensor::zeros({256});
  for (auto _ : state) benchmark::DoNotOptimize(layer_norm(x, w, b));
  set_num_threads(0);
}
BENCHMARK(BM_LayerNorm)->ArgsProduct({{2048}, {256}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_LayerNormFwdBwd(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(2)));
  Tensor x = rnd({32, 64, 256}).requires_grad_();
  Tensor w = Tensor::ones({256}).requires_grad_(), b = Tensor::zeros({256}).requires_grad_();
  for (auto _ : state) {
    sum(layer_norm(x, w, b)).backward();
    x.zero_grad(), w.zero_grad(), b.zero_grad();
  }
  set_num_threads(0);
}
BENCHMARK(BM_LayerNormFwdBwd)->ArgsProduct({{2048}, {256}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

// args: rows, row length, threads; scores (32, 4, 64, 64) over the last axis.
void BM_Softmax(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(2)));
  Tensor s = rnd({32, 4, 64, 64});
  for (auto _ : state) benchmark::DoNotOptimize(softmax(s, -1));
  set_num_threads(0);
}
BENCHMARK(BM_Softmax)->ArgsProduct({{512 * 64}, {64}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_SoftmaxFwdBwd(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(2)));
  Tensor s = rnd({32, 4, 64, 64}).requires_grad_();
  for (auto _ : state) {
    sum(softmax(s, -1)).backward();
    s.zero_grad();
  }
  set_num_threads(0);
}
BENCHMARK(BM_SoftmaxFwdBwd)->ArgsProduct({{512 * 64}, {64}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

// args: batch, M, K, N, threads; (batch, M, K) x (batch, K, N), and with B given transposed.
void BM_BatchedMatmul(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(4)));
  const auto n = state.range(0), M = state.range(1), K = state.range(2), N = state.range(3);
  Tensor a = rnd({n, M, K}), b = rnd({n, K, N}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * n * M * K * N * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  set_num_threads(0);
}
BENCHMARK(BM_BatchedMatmul)->ArgsProduct({{128}, {64}, {64}, {64}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_BatchedMatmulTransB(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(4)));
  const auto n = state.range(0), M = state.range(1), K = state.range(2), N = state.range(3);
  Tensor a = rnd({n, M, K}), b = rnd({n, N, K}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, transpose(b, 1, 2)));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * n * M * K * N * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  set_num_threads(0);
}
BENCHMARK(BM_BatchedMatmulTransB)->ArgsProduct({{128}, {64}, {64}, {64}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

// args: B, heads, T, head dim, threads: scaled_dot_product_attention (tapegrad's op).
void BM_SDPA(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(4)));
  const Shape s{state.range(0), state.range(1), state.range(2), state.range(3)};
  Tensor q = rnd(s, 1), k = rnd(s, 2), v = rnd(s, 3);
  for (auto _ : state) benchmark::DoNotOptimize(scaled_dot_product_attention(q, k, v));
  set_num_threads(0);
}
BENCHMARK(BM_SDPA)->ArgsProduct({{32}, {4}, {64}, {64}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_SDPAFwdBwd(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(4)));
  const Shape s{state.range(0), state.range(1), state.range(2), state.range(3)};
  Tensor q = rnd(s, 1).requires_grad_(), k = rnd(s, 2).requires_grad_(), v = rnd(s, 3).requires_grad_();
  for (auto _ : state) {
    sum(scaled_dot_product_attention(q, k, v)).backward();
    q.zero_grad(), k.zero_grad(), v.zero_grad();
  }
  set_num_threads(0);
}
BENCHMARK(BM_SDPAFwdBwd)->ArgsProduct({{32}, {4}, {64}, {64}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

// args: numel, threads: tanh(a) * b + 1, three recorded ops.
void BM_ElementwiseChain(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(1)));
  Tensor a = rnd({state.range(0)}, 1), b = rnd({state.range(0)}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(tanh(a) * b + 1.0);
  state.SetBytesProcessed(state.iterations() * state.range(0) * 12);
  set_num_threads(0);
}
BENCHMARK(BM_ElementwiseChain)->ArgsProduct({{1 << 16, 1 << 22}, {1, 2}})->UseRealTime();

void BM_Gelu(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(1)));
  Tensor x = rnd({32, 64, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(gelu(x));
  set_num_threads(0);
}
BENCHMARK(BM_Gelu)->ArgsProduct({{32 * 64 * 1024}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
