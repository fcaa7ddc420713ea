// Op-level benchmarks through the public API (so per-op bookkeeping is included):
// elementwise ops, reductions and matmul, with 1 and 2 threads.
//   build/bin/bench_ops --benchmark_min_time=0.5
// Issue 14's yardstick runs (BM_BatchedMatmul*, BM_Bandwidth) time the op and its yardstick in the
// same iterations, alternately, so their ratio is read off one run even on a loaded machine:
//   build/bin/bench_ops --benchmark_filter='BatchedMatmul|Bandwidth' --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <functional>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/kernels/parallel_for.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/ops_shape.h"
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

// dropout(p = 0.1) in training: its decisions are drawn per element from a splitmix64 stream.
void BM_Dropout(benchmark::State& state) {
  set_num_threads(static_cast<int>(state.range(1)));
  Tensor a = rand_tensor({state.range(0)});
  Generator gen(3);
  for (auto _ : state) benchmark::DoNotOptimize(dropout(a, 0.1, gen, true));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 8);
  set_num_threads(0);
}
BENCHMARK(BM_Dropout)->ArgsProduct({{2048, 1 << 18, 1 << 22}, {1, 2}})->UseRealTime();

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

// ---------------------------------------------------------------------------------------------
// Issue 14: batched and broadcast matmul against the plain 2-D product of the same FLOPs, and
// elementwise ops and reductions against a plain copy. Each iteration runs the op, then its
// yardstick (timed separately with a steady clock; the reported time is the op's); the counters
// are rates over the whole run: GFLOPS (or GB/s) of the op, of the yardstick, and their ratio.

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Runs op and yardstick alternately; work_per_call (flops or bytes) / 1e9 per second for each.
void run_against_yardstick(benchmark::State& state, const std::function<void()>& op,
                           const std::function<void()>& yardstick, double op_work, double yard_work,
                           const char* unit) {
  op();  // warm: the caching allocator holds the outputs from here on
  yardstick();
  double t_op = 0, t_yard = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    op();
    const auto t1 = Clock::now();
    yardstick();
    const auto t2 = Clock::now();
    t_op += seconds(t0, t1);
    t_yard += seconds(t1, t2);
    state.SetIterationTime(seconds(t0, t1));
  }
  const double n = static_cast<double>(state.iterations());
  const std::string u(unit);
  state.counters[u] = op_work * n / t_op * 1e-9;
  state.counters[u + "_yardstick"] = yard_work * n / t_yard * 1e-9;
  state.counters["ratio"] = (op_work / t_op) / (yard_work / t_yard);
}

// args: B, H, T, D, S, threads. Operands are independent per batch entry:
//   BM_BatchedMatmul:            [B, H, T, D] @ [B, H, D, S]
//   BM_BatchedMatmulTransposed:  q @ k.transpose(-2, -1), q [B, H, T, D], k [B, H, S, D]
// Yardstick: one 2-D matmul [B*H*T, D] @ [D, S] (the same FLOPs, depth and width).
template <bool Transposed>
void batched_matmul(benchmark::State& state) {
  const std::int64_t B = state.range(0), H = state.range(1), T = state.range(2), D = state.range(3), S = state.range(4);
  set_num_threads(static_cast<int>(state.range(5)));
  const Tensor a = rand_tensor({B, H, T, D});
  const Tensor b = Transposed ? rand_tensor({B, H, S, D}) : rand_tensor({B, H, D, S});
  const Tensor a2 = rand_tensor({B * H * T, D}), b2 = rand_tensor({D, S});
  const double flops = 2.0 * double(B * H * T) * double(D) * double(S);
  run_against_yardstick(
      state, [&] { benchmark::DoNotOptimize(Transposed ? matmul(a, transpose(b, -2, -1)) : matmul(a, b)); },
      [&] { benchmark::DoNotOptimize(matmul(a2, b2)); }, flops, flops, "GFLOPS");
  set_num_threads(0);
}
void BM_BatchedMatmul(benchmark::State& state) { batched_matmul<false>(state); }
void BM_BatchedMatmulTransposed(benchmark::State& state) { batched_matmul<true>(state); }
// Attention's shapes (batch 8, 8 heads, head dim 64, T = S = 128 and 512), then larger matrices.
BENCHMARK(BM_BatchedMatmul)
    ->ArgNames({"B", "H", "T", "D", "S", "threads"})
    ->ArgsProduct({{8}, {8}, {128, 512}, {64}, {128, 512}, {1, 2}})
    ->Args({4, 1, 512, 512, 512, 1})->Args({4, 1, 512, 512, 512, 2})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BatchedMatmulTransposed)
    ->ArgNames({"B", "H", "T", "D", "S", "threads"})
    ->ArgsProduct({{8}, {8}, {128, 512}, {64}, {128, 512}, {1, 2}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// args: T, D, B, S, threads: a shared [T, D] left operand broadcast against [B, D, S] (a weight
// applied to every batch entry). Yardstick: [T, D] @ [D, B*S], the same FLOPs in one product.
void BM_BroadcastMatmul(benchmark::State& state) {
  const std::int64_t T = state.range(0), D = state.range(1), B = state.range(2), S = state.range(3);
  set_num_threads(static_cast<int>(state.range(4)));
  const Tensor a = rand_tensor({T, D}), b = rand_tensor({B, D, S}), b2 = rand_tensor({D, B * S});
  const double flops = 2.0 * double(B * T) * double(D) * double(S);
  run_against_yardstick(
      state, [&] { benchmark::DoNotOptimize(matmul(a, b)); }, [&] { benchmark::DoNotOptimize(matmul(a, b2)); }, flops,
      flops, "GFLOPS");
  set_num_threads(0);
}
BENCHMARK(BM_BroadcastMatmul)
    ->ArgNames({"T", "D", "B", "S", "threads"})
    ->ArgsProduct({{128, 512}, {64, 512}, {8, 32}, {128}, {1, 2}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// On x (and y) of 16M floats (64 MiB each, far beyond the caches); arg: threads.
// GB/s counts the bytes an op must move: add and mul read two tensors and write one (12 B per
// element), exp and gelu read one and write one (8 B), the sums read one (4 B). Yardstick: a copy
// of x into a preallocated tensor (memcpy per chunk of 1M floats, split between the threads as the
// ops' kernels are; 8 B per element).
enum class BandwidthOp { add, mul, exp, gelu, sum_last_dim, sum_all };

void BM_Bandwidth(benchmark::State& state, BandwidthOp op) {
  constexpr std::int64_t kRows = 4096, kCols = 4096, kN = kRows * kCols;
  set_num_threads(static_cast<int>(state.range(0)));
  const Tensor x = rand_tensor({kRows, kCols}), y = rand_tensor({kRows, kCols});
  Tensor dst = Tensor::empty({kRows, kCols});
  const float* src_p = x.data<float>();
  float* dst_p = dst.data<float>();
  const std::function<void()> copy = [&] {
    kernels::parallel_for(kN, std::int64_t{1} << 20, [&](std::int64_t b, std::int64_t e) {
      std::memcpy(dst_p + b, src_p + b, static_cast<std::size_t>(e - b) * sizeof(float));
    });
    benchmark::ClobberMemory();
  };
  std::function<void()> run;
  double bytes = 0;
  switch (op) {
    case BandwidthOp::add: run = [&] { benchmark::DoNotOptimize(x + y); }, bytes = 12; break;
    case BandwidthOp::mul: run = [&] { benchmark::DoNotOptimize(x * y); }, bytes = 12; break;
    case BandwidthOp::exp: run = [&] { benchmark::DoNotOptimize(exp(x)); }, bytes = 8; break;
    case BandwidthOp::gelu: run = [&] { benchmark::DoNotOptimize(gelu(x)); }, bytes = 8; break;
    case BandwidthOp::sum_last_dim: run = [&] { benchmark::DoNotOptimize(sum(x, {-1})); }, bytes = 4; break;
    case BandwidthOp::sum_all: run = [&] { benchmark::DoNotOptimize(sum(x)); }, bytes = 4; break;
  }
  run_against_yardstick(state, run, copy, bytes * double(kN), 8.0 * double(kN), "GB/s");
  set_num_threads(0);
}
#define TG_BANDWIDTH(op)                                                                                  \
  BENCHMARK_CAPTURE(BM_Bandwidth, op, BandwidthOp::op)->ArgName("threads")->Arg(1)->Arg(2)->UseManualTime() \
      ->Unit(benchmark::kMillisecond)
TG_BANDWIDTH(add);
TG_BANDWIDTH(mul);
TG_BANDWIDTH(exp);
TG_BANDWIDTH(gelu);
TG_BANDWIDTH(sum_last_dim);
TG_BANDWIDTH(sum_all);
#undef TG_BANDWIDTH

}  // namespace
