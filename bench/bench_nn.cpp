// Layer-level benchmarks through the public nn API, forward and backward as in training, with 1
// and 2 threads:
//   - GRU over a whole sequence (input projection hoisted, then the time loop), tokens/s = steps *
//     batch per second, and the GFLOP/s of its matrix products;
//   - one decoder step of additive (Bahdanau) attention with projected keys: forward_projected
//     (masked by valid lengths) and backward, items/s = queries (batch entries) per second;
//   - PackedTokens::unpack and pack at workload T's sizes (64 rows of 3..40 tokens, d_model 256),
//     beside the index_add-on-zeros / index_select they replaced; bytes/s = the padded tensor's.
// Sizes: d2l's small translator (hidden 32) and the paper's RNNsearch (hidden 1000, embeddings 620).
//   build/bin/bench_nn --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "nn/nn.h"

using namespace tg;

namespace {

// args: steps, batch, input size, hidden size, threads
void BM_GRUForwardBackward(benchmark::State& state) {
  const std::int64_t T = state.range(0), B = state.range(1), in = state.range(2), H = state.range(3);
  set_num_threads(static_cast<int>(state.range(4)));
  Generator gen(1);
  nn::GRU gru(nn::GRUOptions(in, H), gen);
  const Tensor x = Tensor::uniform({T, B, in}, -1, 1, gen);
  for (auto _ : state) {
    auto [output, h_n] = gru->forward(x);
    sum(output).backward();
    gru->zero_grad();
  }
  state.SetItemsProcessed(state.iterations() * T * B);
  // Matrix products per iteration: forward x W_ih (T*B, in)x(in, 3H) and h W_hh (B, H)x(H, 3H) per
  // step; backward dW_ih, dW_hh and dh (x needs no gradient): 2 * T*B * 3H * (2 in + 3 H) flops.
  const double flops = 2.0 * static_cast<double>(T * B) * 3.0 * static_cast<double>(H) * static_cast<double>(2 * in + 3 * H);
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * flops * 1e-9,
                                                 benchmark::Counter::kIsRate);
  set_num_threads(0);
}
BENCHMARK(BM_GRUForwardBackward)
    ->ArgNames({"steps", "batch", "in", "hidden", "threads"})
    ->Args({10, 64, 32, 32, 1})
    ->Args({10, 64, 32, 32, 2})
    ->Args({30, 80, 620, 1000, 1})
    ->Args({30, 80, 620, 1000, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// args: batch, keys, hidden, threads
void BM_AdditiveAttentionStep(benchmark::State& state) {
  const std::int64_t B = state.range(0), K = state.range(1), H = state.range(2);
  set_num_threads(static_cast<int>(state.range(3)));
  Generator gen(2);
  nn::AdditiveAttention attention(nn::AdditiveAttentionOptions(H, H, H), gen);
  // What a decoder holds during a step: the keys projected once per sentence, the values (encoder
  // outputs) and this step's projected query, all receiving gradients; lengths K/2 .. K.
  Tensor key_proj = Tensor::uniform({B, K, H}, -1, 1, gen).requires_grad_();
  Tensor values = Tensor::uniform({B, K, H}, -1, 1, gen).requires_grad_();
  Tensor query_proj = Tensor::uniform({B, 1, H}, -1, 1, gen).requires_grad_();
  std::vector<std::int64_t> lens(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b) lens[b] = K / 2 + b % (K - K / 2 + 1);
  const Tensor valid_lens = Tensor::from_vector(lens, {B});
  for (auto _ : state) {
    sum(attention->forward_projected(query_proj, key_proj, values, valid_lens)).backward();
    attention->zero_grad();
    for (Tensor* t : {&key_proj, &values, &query_proj}) t->zero_grad();
  }
  state.SetItemsProcessed(state.iterations() * B);
  set_num_threads(0);
}
BENCHMARK(BM_AdditiveAttentionStep)
    ->ArgNames({"batch", "keys", "hidden", "threads"})
    ->Args({64, 10, 32, 1})
    ->Args({64, 10, 32, 2})
    ->Args({80, 30, 1000, 1})
    ->Args({80, 30, 1000, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// args: threads. The layouts of workload T: 64 rows of 3..40 tokens (about 1500), d_model 256.
struct PackedBatch {
  Tensor lengths = Tensor::empty({64}, DType::i64);
  std::int64_t total = 0;
  PackedBatch() {
    for (std::int64_t i = 0; i < 64; ++i) total += lengths.data<std::int64_t>()[i] = 3 + (i * 37) % 38;
  }
};
enum class PackOp { unpack, unpack_by_index_add, pack, pack_by_index_select };

void BM_PackedTokens(benchmark::State& state, PackOp op) {
  set_num_threads(static_cast<int>(state.range(0)));
  const PackedBatch batch;
  const nn::PackedTokens tokens(batch.lengths, 40);
  Generator gen(3);
  const Tensor packed = Tensor::uniform({batch.total, 256}, -1, 1, gen);
  const Tensor padded = tokens.unpack(packed);
  for (auto _ : state) {
    switch (op) {
      case PackOp::unpack: benchmark::DoNotOptimize(tokens.unpack(packed)); break;
      case PackOp::unpack_by_index_add:
        benchmark::DoNotOptimize(index_add(Tensor::zeros({64 * 40, 256}), 0, tokens.index(), packed));
        break;
      case PackOp::pack: benchmark::DoNotOptimize(tokens.pack(padded)); break;
      case PackOp::pack_by_index_select:
        benchmark::DoNotOptimize(index_select(reshape(padded, {64 * 40, 256}), 0, tokens.index()));
        break;
    }
  }
  state.SetBytesProcessed(state.iterations() * padded.numel() * 4);
  set_num_threads(0);
}
BENCHMARK_CAPTURE(BM_PackedTokens, unpack, PackOp::unpack)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_PackedTokens, unpack_by_index_add, PackOp::unpack_by_index_add)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_PackedTokens, pack, PackOp::pack)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_PackedTokens, pack_by_index_select, PackOp::pack_by_index_select)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
