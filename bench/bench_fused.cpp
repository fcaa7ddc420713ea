// Fused ops, forward and backward as in training (issue 14's performance section), float32, with
// 1 and 2 threads; bench/fused_compare.py runs bench/pytorch_fused_reference.py beside it.
//   - layer_norm over the last dim of x (batch 8, T, 512) with weight and bias, all three
//     receiving gradients; items/s = rows (tokens).
//   - scaled_dot_product_attention, q, k, v (batch 8, 8 heads, T, 64), all receiving gradients,
//     plain and causal; items/s = query rows; GFLOP/s counts the nominal 12 B H T² D of the four
//     products of the forward and backward (half with causal), not the backward's recomputation.
//   - the same through scaled_dot_product_attention_composed (the (T, T) weights in memory).
// CPU time is the whole process's (all threads), as PyTorch's time.process_time().
//   build/bin/bench_fused --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstdint>

#include "autograd/ops_attention.h"
#include "autograd/ops_norm.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tensor.h"

using namespace tg;

namespace {

constexpr std::int64_t kBatch = 8, kHeads = 8, kHeadDim = 64;

// args: T, threads
void BM_LayerNormForwardBackward(benchmark::State& state) {
  const std::int64_t T = state.range(0), C = kHeads * kHeadDim;
  set_num_threads(static_cast<int>(state.range(1)));
  Generator gen(1);
  Tensor x = Tensor::normal({kBatch, T, C}, 0, 1, gen).requires_grad_();
  Tensor w = Tensor::normal({C}, 1, 0.1, gen).requires_grad_(), b = Tensor::normal({C}, 0, 0.1, gen).requires_grad_();
  const Tensor dy = Tensor::normal({kBatch, T, C}, 0, 1, gen);
  for (auto _ : state) {
    layer_norm(x, {C}, w, b).backward(dy);
    for (Tensor* t : {&x, &w, &b}) t->zero_grad();
  }
  state.SetItemsProcessed(state.iterations() * kBatch * T);
  set_num_threads(0);
}
BENCHMARK(BM_LayerNormForwardBackward)
    ->ArgNames({"T", "threads"})
    ->ArgsProduct({{128, 512}, {1, 2}})
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

template <bool Fused>
void sdpa_forward_backward(benchmark::State& state) {
  const std::int64_t T = state.range(0);
  const bool causal = state.range(2) != 0;
  set_num_threads(static_cast<int>(state.range(1)));
  Generator gen(2);
  Tensor q = Tensor::normal({kBatch, kHeads, T, kHeadDim}, 0, 1, gen).requires_grad_();
  Tensor k = Tensor::normal({kBatch, kHeads, T, kHeadDim}, 0, 1, gen).requires_grad_();
  Tensor v = Tensor::normal({kBatch, kHeads, T, kHeadDim}, 0, 1, gen).requires_grad_();
  const Tensor dout = Tensor::normal({kBatch, kHeads, T, kHeadDim}, 0, 1, gen);
  for (auto _ : state) {
    const Tensor out = Fused ? scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal)
                             : scaled_dot_product_attention_composed(q, k, v, Tensor(), 0.0, causal);
    out.backward(dout);
    for (Tensor* t : {&q, &k, &v}) t->zero_grad();
  }
  state.SetItemsProcessed(state.iterations() * kBatch * kHeads * T);
  const double flops = 12.0 * double(kBatch * kHeads) * double(T) * double(T) * double(kHeadDim) * (causal ? 0.5 : 1.0);
  state.counters["GFLOP/s"] = benchmark::Counter(double(state.iterations()) * flops * 1e-9, benchmark::Counter::kIsRate);
  set_num_threads(0);
}

// args: T, threads, causal
void BM_SDPAForwardBackward(benchmark::State& state) { sdpa_forward_backward<true>(state); }
void BM_SDPAComposedForwardBackward(benchmark::State& state) { sdpa_forward_backward<false>(state); }
BENCHMARK(BM_SDPAForwardBackward)
    ->ArgNames({"T", "threads", "causal"})
    ->ArgsProduct({{128, 512}, {1, 2}, {0, 1}})
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SDPAComposedForwardBackward)
    ->ArgNames({"T", "threads", "causal"})
    ->ArgsProduct({{128, 512}, {1, 2}, {0}})
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
