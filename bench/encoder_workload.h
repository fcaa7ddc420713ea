#pragma once
// Workload G of issue 20 (the generic path): one pre-LN Transformer encoder layer written with
// public ops only, trained with Adam on a synthetic regression target. Shared by
// bench/bench_encoder.cpp; bench/libtorch/encoder.cpp and bench/encoder_reference.py implement the
// same model and draw the same batches: keep the three in step.
//
//   y = x + Wo·MHA(LN1(x));  out = y + W2·gelu(W1·LN2(y))      (pre-LN, dropout 0, exact GELU)
//   MHA: q, k, v = separate linear layers with bias, 4 heads, softmax(q kᵀ / sqrt(64)) v
//   loss = mean((out - target)²), target[b, t] = x[b, (t + 1) mod T] (predict the next vector)
//   Linear weights and biases U(-1/sqrt(in), 1/sqrt(in)) (torch.nn.Linear's default scheme),
//   LayerNorm weight 1, bias 0, eps 1e-5. Adam(lr 1e-3), gradients dropped just before backward.
// Data: x[b, t, d] = 2 u - 1 with u = (splitmix64() >> 40) / 2^24 in row-major (b, t, d) order,
// batch after batch, from splitmix64 seeded with seed * 0x632BE59BD9B4E019 + 12345.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "autograd/random.h"

namespace tg::bench::encoder {

constexpr std::int64_t kDModel = 256, kHeads = 4, kFF = 1024, kBatch = 32, kSeq = 64;
constexpr double kLayerNormEps = 1e-5, kLearningRate = 1e-3;
constexpr int kDefaultSteps = 20, kDefaultWarmup = 3;

inline std::uint64_t data_seed(std::uint64_t seed) { return seed * 0x632BE59BD9B4E019ULL + 12345; }

/// One batch's input (B, T, D) and target, as flat row-major vectors.
inline void make_batch(tg::SplitMix64& rng, std::vector<float>& x, std::vector<float>& target) {
  const std::int64_t n = kBatch * kSeq * kDModel;
  x.resize(n);
  target.resize(n);
  for (std::int64_t i = 0; i < n; ++i)
    x[i] = 2.0f * (static_cast<float>(rng.next() >> 40) * (1.0f / 16777216.0f)) - 1.0f;
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::int64_t t = 0; t < kSeq; ++t) {
      const float* src = x.data() + (b * kSeq + (t + 1) % kSeq) * kDModel;
      std::copy(src, src + kDModel, target.data() + (b * kSeq + t) * kDModel);
    }
}

}  // namespace tg::bench::encoder
