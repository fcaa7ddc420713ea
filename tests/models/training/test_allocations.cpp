// Once the shapes of a step have been seen, a training step makes no heap allocation: every tensor
// buffer, tensor handle, autograd record and scratch vector is served from the caching allocator's
// free lists. The readout runs at the valid target positions only, so some buffers are sized by the
// batch's token count: a batch with more tokens than any before may need a block of a new size
// class (as in any caching allocator). The test therefore warms up on the very batches it then
// measures, and asserts zero for the second pass over them.
//
// This file replaces the global operator new/delete (every overload, aligned ones included) for the
// whole test_models executable with counting versions. The caching allocator takes its blocks below
// 1 MiB from ::operator new(size, align_val_t) and larger ones from mmap; the count adds its own
// count of system allocations (cache_stats().system_allocs), so every block it has to get from the
// system is counted, possibly twice (a zero stays a zero).
// Counting is off except inside the measured window. TBB's own task allocation does not go through
// operator new (and is outside this library's control), which is why the steps run with
// set_num_threads(1): the measurement is about this library's allocations. Workload G is measured on
// 2 threads as well, to cover the parallel paths of its kernels.
//
// TG_ALLOC_TRACE=1 in the environment prints the call stacks of counted allocations (symbolise the
// +0x offsets with addr2line -C -f -e build/bin/test_models).
#include <execinfo.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "bench/encoder_workload.h"
#include "bench/workloads.h"
#include "nn/ema.h"
#include "models/translators/seq2seq.h"
#include "nn/optim.h"
#include "nn/utils.h"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<std::int64_t> g_news{0};

// ---- optional stack traces (fixed tables: tracing must not allocate through operator new) ----
constexpr int kDepth = 14, kMaxSites = 512;
struct Site {
  void* frames[kDepth];
  int depth;
  std::int64_t count;
};
Site g_sites[kMaxSites];
int g_num_sites = 0;
bool g_trace = std::getenv("TG_ALLOC_TRACE") != nullptr;
thread_local bool t_in_trace = false;

void trace() {
  if (t_in_trace) return;
  t_in_trace = true;
  void* frames[kDepth + 2];
  const int n = backtrace(frames, kDepth + 2) - 2;  // drop trace() and operator new
  if (n > 0) {
    int i = 0;
    for (; i < g_num_sites; ++i)
      if (g_sites[i].depth == n && std::memcmp(g_sites[i].frames, frames + 2, sizeof(void*) * n) == 0) break;
    if (i == g_num_sites && g_num_sites < kMaxSites) {
      std::memcpy(g_sites[i].frames, frames + 2, sizeof(void*) * n);
      g_sites[i].depth = n;
      ++g_num_sites;
    }
    if (i < kMaxSites) ++g_sites[i].count;
  }
  t_in_trace = false;
}

void print_sites() {
  for (int i = 0; i < g_num_sites; ++i) {
    std::fprintf(stderr, "---- %lld allocations from:\n", static_cast<long long>(g_sites[i].count));
    backtrace_symbols_fd(g_sites[i].frames, g_sites[i].depth, 2);
  }
  g_num_sites = 0;
}

void note_allocation() {
  if (!g_counting.load(std::memory_order_relaxed)) return;
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (g_trace) trace();
}

void* checked(void* p) {
  if (!p) throw std::bad_alloc();
  return p;
}
void* allocate(std::size_t n) {
  note_allocation();
  return checked(std::malloc(n ? n : 1));
}
void* allocate_aligned(std::size_t n, std::align_val_t a) {
  note_allocation();
  void* p = nullptr;
  const std::size_t align = std::max(static_cast<std::size_t>(a), sizeof(void*));
  if (posix_memalign(&p, align, n ? n : 1) != 0) throw std::bad_alloc();
  return p;
}

}  // namespace

// clang-format off
void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { note_allocation(); return std::malloc(n ? n : 1); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { note_allocation(); return std::malloc(n ? n : 1); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate_aligned(n, a); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try { return allocate_aligned(n, a); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try { return allocate_aligned(n, a); } catch (...) { return nullptr; }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
// clang-format on

namespace {

using namespace tg;

using bench::Batch;
using bench::kBos;
using bench::make_batch;
using bench::SplitMix64;

/// Runs step(i) for i < warmup + measured and returns the operator new calls plus the caching
/// allocator's system allocations of each step from `warmup` on; then prints the allocation sites
/// if tracing and restores the default thread count.
template <class Step>
std::vector<std::int64_t> count_per_step(int warmup, int measured, Step&& step) {
  std::vector<std::int64_t> counts;
  for (int i = 0; i < warmup + measured; ++i) {
    const std::int64_t before = g_news.load() + memory::cache_stats().system_allocs;
    g_counting = i >= warmup;
    step(i);
    g_counting = false;
    if (i >= warmup) counts.push_back(g_news.load() + memory::cache_stats().system_allocs - before);
  }
  if (g_trace) print_sites();
  set_num_threads(0);
  return counts;
}

/// Operator-new calls of each of `measured` training steps, as in bench_seq2seq and train():
/// teacher forcing, Seq2Seq::loss, backward, clip_grad_norm(1.0), Adam. The measured steps train on
/// the batches of the `warmup` steps again, in the same order (warmup >= measured). `ema`: a weight
/// EMA updated after each step, as train() does with ema_decay. `bf16`: the forward and backward
/// inside a bf16 autocast::Guard opened for each step, clipping, Adam and the EMA outside, as
/// train() with precision bf16: the weight cache outlives the Guard and renews each weight's copy
/// in place after Adam's step.
std::vector<std::int64_t> allocations_per_step(const models::ModelConfig& config, std::int64_t batch, int warmup,
                                               int measured, bool compact_grads = false, bool ema = false,
                                               bool bf16 = false) {
  set_num_threads(1);
  Generator gen(0);
  auto model = models::make_model(config, gen);
  if (compact_grads) models::allow_compact_grads(*model);
  nn::Adam optimizer(model->named_parameters(), nn::AdamOptions(0.005));
  const std::vector<Tensor> params = model->parameters();
  std::optional<nn::WeightEma> average;
  if (ema) average.emplace(model->named_parameters(), 0.999);
  SplitMix64 rng{12345};
  std::vector<Batch> batches;
  for (int i = 0; i < warmup; ++i) batches.push_back(make_batch(rng, batch, config));
  model->train();
  autocast::clear_cache();
  const std::int64_t packs_before = autocast::cache_stats().packs;
  const std::vector<std::int64_t> counts = count_per_step(warmup, measured, [&](int i) {
    const Batch& b = batches[static_cast<std::size_t>(i % warmup)];
    const Tensor dec_input = models::teacher_forcing_input(b.tgt, kBos);
    optimizer.zero_grad();
    double loss_value = 0;
    {
      const autocast::Guard precision(bf16 ? autocast::Precision::bf16 : autocast::Precision::f32);
      const Tensor loss = model->loss(b.src, b.src_len, dec_input, b.tgt, b.tgt_len);
      loss.backward();
      loss_value = loss.item();
    }
    nn::clip_grad_norm(params, 1.0);
    optimizer.step();
    if (average) average->update();
    EXPECT_TRUE(std::isfinite(loss_value));
  });
  if (bf16) {  // every cached weight was packed at the first step and renewed after each Adam step
    const autocast::CacheStats cache = autocast::cache_stats();
    EXPECT_GT(cache.entries, 0);
    EXPECT_EQ(cache.packs - packs_before, cache.entries * (warmup + measured));
    autocast::clear_cache();
  }
  return counts;
}

std::string str(const std::vector<std::int64_t>& v) {
  std::string s;
  for (auto x : v) {
    if (!s.empty()) s += ' ';
    s += std::to_string(x);
  }
  return s;
}

TEST(Allocations, CounterSeesEveryOverload) {
  const std::int64_t before = g_news.load();
  g_counting = true;
  delete new int(1);
  delete[] new int[3];
  struct alignas(64) Wide {
    float x[16];
  };
  delete new Wide;
  ::operator delete(::operator new(100, std::align_val_t{64}), std::align_val_t{64});
  g_counting = false;
  EXPECT_EQ(g_news.load() - before, 4);
}

TEST(Allocations, D2lTrainingStepAllocatesNothing) {
  const bench::Workload a = bench::workload("A", "");
  const auto counts = allocations_per_step(a.config, a.batch, 20, 20);
  std::printf("d2l (workload A): operator new calls per step after warm-up: %s\n", str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

TEST(Allocations, RnnSearchTrainingStepAllocatesNothing) {
  models::ModelConfig c;
  c.model = "rnnsearch";
  c.src_vocab = 60, c.tgt_vocab = 70, c.embed_size = 16, c.num_hiddens = 32, c.num_layers = 1;
  c.dropout = 0.0, c.num_steps = 6;
  const auto counts = allocations_per_step(c, 8, 20, 20);
  std::printf("rnnsearch (small): operator new calls per step after warm-up: %s\n", str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

// The same with a weight EMA updated after every step (train() with ema_decay).
TEST(Allocations, RnnSearchTrainingStepWithEmaAllocatesNothing) {
  models::ModelConfig c;
  c.model = "rnnsearch";
  c.src_vocab = 60, c.tgt_vocab = 70, c.embed_size = 16, c.num_hiddens = 32, c.num_layers = 1;
  c.dropout = 0.0, c.num_steps = 6;
  const auto counts = allocations_per_step(c, 8, 20, 20, false, true);
  std::printf("rnnsearch (small, weight EMA): operator new calls per step after warm-up: %s\n", str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

// The same with compact gradients (models::allow_compact_grads): the readout's low-rank gradient
// (32 valid positions x (112 + 70) < 112 x 70) and the embeddings' rows, read by clipping and Adam.
TEST(Allocations, RnnSearchCompactGradsStepAllocatesNothing) {
  models::ModelConfig c;
  c.model = "rnnsearch";
  c.src_vocab = 60, c.tgt_vocab = 70, c.embed_size = 16, c.num_hiddens = 32, c.num_layers = 1;
  c.dropout = 0.0, c.num_steps = 6, c.readout = tg::models::Readout::linear;
  const auto counts = allocations_per_step(c, 8, 20, 20, true);
  std::printf("rnnsearch (small, compact gradients): operator new calls per step after warm-up: %s\n", str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

models::ModelConfig small_transformer(double dropout) {
  models::ModelConfig c;
  c.model = "transformer";
  c.src_vocab = 60, c.tgt_vocab = 70, c.embed_size = 16, c.num_hiddens = 32, c.num_layers = 2, c.num_heads = 4;
  c.dropout = dropout, c.num_steps = 6;
  return c;
}

TEST(Allocations, TransformerTrainingStepAllocatesNothing) {
  const auto counts = allocations_per_step(small_transformer(0.1), 8, 20, 20);
  std::printf("transformer (small, dropout 0.1): operator new calls per step after warm-up: %s\n", str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

// Workload G (bench/bench_encoder): a pre-LN encoder layer from public ops trained with Adam, the
// same model and train_step as the benchmark at smaller sizes, chosen so that the GEMMs still take
// several K passes and A blocks (B*T = 768 rows, ff 384). Every batch has the same shape, so the
// measured steps train on fresh batches.
std::vector<std::int64_t> encoder_allocations_per_step(int threads, int warmup, int measured, bool bf16 = false) {
  namespace enc = bench::encoder;
  const enc::Sizes sizes{.d_model = 64, .heads = 4, .ff = 384, .batch = 8, .seq = 96};
  set_num_threads(threads);
  Generator gen(0);
  const enc::EncoderLayer layer(sizes, gen);
  nn::Adam optimizer(layer.named_parameters(), nn::AdamOptions(enc::kLearningRate));
  SplitMix64 rng{enc::data_seed(0)};
  std::vector<std::pair<Tensor, Tensor>> batches;
  std::vector<float> xs, ts;
  for (int i = 0; i < warmup + measured; ++i) {
    enc::make_batch(rng, xs, ts, sizes);
    batches.emplace_back(Tensor::from_vector(xs, {sizes.batch, sizes.seq, sizes.d_model}),
                         Tensor::from_vector(ts, {sizes.batch, sizes.seq, sizes.d_model}));
  }
  autocast::clear_cache();
  const std::int64_t packs_before = autocast::cache_stats().packs;
  const std::vector<std::int64_t> counts = count_per_step(warmup, measured, [&](int i) {
    const auto& [x, target] = batches[static_cast<std::size_t>(i)];
    // bf16: a Guard a step, as bench_encoder --precision bf16's products (Adam runs no product).
    const autocast::Guard precision(bf16 ? autocast::Precision::bf16 : autocast::Precision::f32);
    const Tensor loss = enc::train_step(layer, optimizer, x, target);
    EXPECT_TRUE(std::isfinite(loss.item()));
  });
  if (bf16) {
    const autocast::CacheStats cache = autocast::cache_stats();
    EXPECT_GT(cache.entries, 0);
    EXPECT_EQ(cache.packs - packs_before, cache.entries * (warmup + measured));
    autocast::clear_cache();
  }
  return counts;
}

TEST(Allocations, EncoderWorkloadGTrainingStepAllocatesNothing) {
  const auto counts = encoder_allocations_per_step(1, 5, 10);
  std::printf("encoder layer (workload G, small): operator new calls per step after warm-up: %s\n",
              str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

// The same on 2 threads, as bench_encoder runs it: the GEMMs, GELU and the ff-sized elementwise ops
// then take their parallel paths (scratch and partial results of tasks, blocks freed on workers).
TEST(Allocations, EncoderWorkloadGTwoThreadTrainingStepAllocatesNothing) {
  const auto counts = encoder_allocations_per_step(2, 5, 10);
  std::printf("encoder layer (workload G, small, 2 threads): operator new calls per step after warm-up: %s\n",
              str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

// The same steps in bf16 (autocast, as train() with precision bf16 and bench_encoder --precision
// bf16): the weight cache renews each weight's bf16 copy after Adam's step into the copy's own
// buffers, and the bf16 products take their scratch from the caching allocator.
TEST(Allocations, Bf16D2lTrainingStepAllocatesNothing) {
  const bench::Workload a = bench::workload("A", "");
  const auto counts = allocations_per_step(a.config, a.batch, 20, 20, false, false, true);
  std::printf("d2l (workload A, bf16): operator new calls per step after warm-up: %s\n", str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

TEST(Allocations, Bf16RnnSearchTrainingStepWithEmaAllocatesNothing) {
  models::ModelConfig c;
  c.model = "rnnsearch";
  c.src_vocab = 60, c.tgt_vocab = 70, c.embed_size = 16, c.num_hiddens = 32, c.num_layers = 1;
  c.dropout = 0.0, c.num_steps = 6;
  const auto counts = allocations_per_step(c, 8, 20, 20, false, true, true);
  std::printf("rnnsearch (small, weight EMA, bf16): operator new calls per step after warm-up: %s\n",
              str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

TEST(Allocations, Bf16RnnSearchCompactGradsStepAllocatesNothing) {
  models::ModelConfig c;
  c.model = "rnnsearch";
  c.src_vocab = 60, c.tgt_vocab = 70, c.embed_size = 16, c.num_hiddens = 32, c.num_layers = 1;
  c.dropout = 0.0, c.num_steps = 6, c.readout = tg::models::Readout::linear;
  const auto counts = allocations_per_step(c, 8, 20, 20, true, false, true);
  std::printf("rnnsearch (small, compact gradients, bf16): operator new calls per step after warm-up: %s\n",
              str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

// 40 warm-up steps, not 20: in a process of its own (as ctest runs it) the caching allocator's pool
// takes its last block from the system at step 33 (in SDPA's backward); nothing after it (measured
// over steps 40-79, and 100-199 with 100 warm-up steps).
TEST(Allocations, Bf16TransformerTrainingStepAllocatesNothing) {
  const auto counts = allocations_per_step(small_transformer(0.1), 8, 40, 20, false, false, true);
  std::printf("transformer (small, dropout 0.1, bf16): operator new calls per step after warm-up: %s\n",
              str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

TEST(Allocations, Bf16EncoderWorkloadGTrainingStepAllocatesNothing) {
  const auto counts = encoder_allocations_per_step(1, 5, 10, true);
  std::printf("encoder layer (workload G, small, bf16): operator new calls per step after warm-up: %s\n",
              str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

TEST(Allocations, Bf16EncoderWorkloadGTwoThreadTrainingStepAllocatesNothing) {
  const auto counts = encoder_allocations_per_step(2, 5, 10, true);
  std::printf("encoder layer (workload G, small, 2 threads, bf16): operator new calls per step after warm-up: %s\n",
              str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

// Cached decoding: begin() then step() after step() (as greedy_decode), each step appending one
// position to every layer's key/value cache. The second pass over the same batch is measured.
TEST(Allocations, TransformerCachedDecodingStepAllocatesNothing) {
  set_num_threads(1);
  const models::ModelConfig config = small_transformer(0.0);
  Generator gen(0);
  auto model = models::make_model(config, gen);
  model->eval();
  SplitMix64 rng{777};
  const Batch b = make_batch(rng, 8, config);
  std::vector<std::int64_t> counts;
  for (int pass = 0; pass < 3; ++pass) {
    NoGradGuard no_grad;
    models::DecoderState state = model->begin(b.src, b.src_len);
    Tensor y = Tensor::full({8}, static_cast<double>(kBos), DType::i64);
    for (std::int64_t t = 0; t < config.num_steps; ++t) {
      const std::int64_t before = g_news.load() + memory::cache_stats().system_allocs;
      g_counting = pass == 2;
      {
        const Tensor logits = model->step(y, state);
        y = argmax(logits, -1);
      }
      g_counting = false;
      if (pass == 2) counts.push_back(g_news.load() + memory::cache_stats().system_allocs - before);
    }
  }
  if (g_trace) print_sites();
  set_num_threads(0);
  std::printf("transformer (small): operator new calls per cached decoding step: %s\n", str(counts).c_str());
  for (auto n : counts) EXPECT_EQ(n, 0) << str(counts);
}

}  // namespace
