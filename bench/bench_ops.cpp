// Op-level benchmarks through the public API (so per-op bookkeeping is included):
// elementwise ops, reductions and matmul, with 1 and 2 threads.
//   build/bin/bench_ops --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"

using namespace tg;

namespace {

Tensor rand_tensor(const Shape& s) {
  Generator gen(1);
  return Tensor::uniform(s, -1, 1, gen);
}

// args: numel, threads
void BM_Tanh(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(1)));
  Tensor x = rand_tensor({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(tanh(x));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 8);
  set_num_threads(0);
}
BENCHMARK(BM_Tanh)->ArgsProduct({{2048, 1 << 16, 1 << 22}, {1, 2}})->UseRealTime();

void BM_AddBroadcastBias(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(1)));
  Tensor x = rand_tensor({state.range(0), 1024});
  Tensor b = rand_tensor({1024});
  for (auto _ : state) benchmark::DoNotOptimize(x + b);
  state.SetBytesProcessed(state.iterations() * state.range(0) * 1024 * 8);
  set_num_threads(0);
}
BENCHMARK(BM_AddBroadcastBias)->ArgsProduct({{2, 64, 2048}, {1, 2}})->UseRealTime();

void BM_Mul(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(1)));
  Tensor a = rand_tensor({state.range(0)}), b = rand_tensor({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(a * b);
  state.SetBytesProcessed(state.iterations() * state.range(0) * 12);
  set_num_threads(0);
}
BENCHMARK(BM_Mul)->ArgsProduct({{2048, 1 << 22}, {1, 2}})->UseRealTime();

// args: rows, cols, axis, threads
void BM_Sum(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(3)));
  Tensor x = rand_tensor({state.range(0), state.range(1)});
  const std::int64_t axis = state.range(2);
  for (auto _ : state) benchmark::DoNotOptimize(sum(x, {axis}));
  state.SetBytesProcessed(state.iterations() * state.range(0) * state.range(1) * 4);
  set_num_threads(0);
}
BENCHMARK(BM_Sum)->ArgsProduct({{64, 4096}, {32, 1024}, {0, 1}, {1, 2}})->UseRealTime();

void BM_Max(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(2)));
  Tensor x = rand_tensor({state.range(0), state.range(1)});
  for (auto _ : state) benchmark::DoNotOptimize(max(x, {1}));
  state.SetBytesProcessed(state.iterations() * state.range(0) * state.range(1) * 4);
  set_num_threads(0);
}
BENCHMARK(BM_Max)->ArgsProduct({{64, 4096}, {1024}, {1, 2}})->UseRealTime();

// args: M, K, N, threads; forward matmul through the op layer, GFLOP/s.
void BM_Matmul(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(3)));
  const auto M = state.range(0), K = state.range(1), N = state.range(2);
  Tensor a = rand_tensor({M, K}), b = rand_tensor({K, N});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * M * K * N * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  set_num_threads(0);
}
BENCHMARK(BM_Matmul)
    ->Args({64, 32, 96, 1})->Args({64, 32, 96, 2})
    ->Args({64, 288, 768, 1})->Args({64, 288, 768, 2})
    ->Args({80, 1620, 3000, 1})->Args({80, 1620, 3000, 2})
    ->Args({512, 512, 512, 1})->Args({512, 512, 512, 2})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// Forward + backward of a small op chain: measures per-op bookkeeping (tape, allocation).
void BM_SmallGraphForwardBackward(benchmark::State& state) {
  Generator gen(2);
  Tensor w = Tensor::uniform({32, 32}, -0.1, 0.1, gen).requires_grad_();
  Tensor b = Tensor::uniform({32}, -0.1, 0.1, gen).requires_grad_();
  Tensor x = rand_tensor({64, 32});
  for (auto _ : state) {
    Tensor h = x;
    for (int i = 0; i < 4; ++i) h = tanh(linear(h, w, b));
    Tensor loss = mean(square(h));
    loss.backward();
    w.zero_grad();
    b.zero_grad();
  }
  state.counters["ops_per_iter"] = 4 * 2 + 2;
}
BENCHMARK(BM_SmallGraphForwardBackward)->Unit(benchmark::kMicrosecond);

// Per-op overhead on tiny tensors (4 elements), where the arithmetic is negligible: what an op
// costs in bookkeeping (output allocation, handle, tape node, closure), per op.
void BM_TinyOpNoGrad(benchmark::State& state) {
  Tensor x = rand_tensor({4});
  for (auto _ : state) {
    Tensor h = x;
    for (int i = 0; i < 100; ++i) h = h * 1.0001;
    benchmark::DoNotOptimize(h);
  }
  state.counters["ns_per_op"] = benchmark::Counter(static_cast<double>(state.iterations()) * 100,
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TinyOpNoGrad);

void BM_TinyOpForwardBackward(benchmark::State& state) {
  Tensor x = rand_tensor({4}).requires_grad_();
  for (auto _ : state) {
    Tensor h = x;
    for (int i = 0; i < 100; ++i) h = h * 1.0001;
    sum(h).backward();
    x.zero_grad();
  }
  state.counters["ns_per_op"] = benchmark::Counter(static_cast<double>(state.iterations()) * 101,
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TinyOpForwardBackward);

void BM_TensorEmpty(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Tensor::empty({state.range(0)}));
}
BENCHMARK(BM_TensorEmpty)->Arg(16)->Arg(1 << 16);

// One allocate/deallocate pair of the caching allocator (a cache hit): the lock and the free list.
void BM_CachingAllocator(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  memory::deallocate(memory::allocate(n), n);  // warm the class
  for (auto _ : state) {
    void* p = memory::allocate(n);
    benchmark::DoNotOptimize(p);
    memory::deallocate(p, n);
  }
}
BENCHMARK(BM_CachingAllocator)->Arg(64)->Arg(4096)->Arg(1 << 20);

}  // namespace
