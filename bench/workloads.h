#pragma once
// The workloads A, B, C of issue 6 and T of issue 15 (the transformer translator), and their
// synthetic batches, shared by bench_seq2seq and the allocation-count test
// (tests/models/training/test_allocations.cpp). bench/pytorch_reference.py and
// bench/libtorch/seq2seq.cpp draw the same batches: keep the three in step.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "models/translators/seq2seq.h"

namespace tg::bench {

constexpr std::int64_t kPad = 1, kBos = 2, kEos = 3, kFirstWord = 4;

// splitmix64: trivial to reproduce bit for bit in Python (bench/pytorch_reference.py).
using tg::SplitMix64;

struct Workload {
  std::string name;
  tg::models::ModelConfig config;
  std::int64_t batch = 0;
  int default_steps = 0, default_warmup = 0;
  double decode_min_time = 1.0;   // seconds per decode measurement (at least one repetition)
  /// Where a step drops the previous step's gradients, the same in bench/pytorch_reference.py:
  /// just before backward (A, B: as d2l's train loop), or before the forward (C: the usual order
  /// for large models, so that last step's gradients do not sit beside this step's activations).
  bool zero_grad_before_forward = false;
  /// models::allow_compact_grads (C: the embedding and readout gradients of a 30000-word model);
  /// PyTorch has no counterpart and keeps its dense gradients.
  bool compact_grads = false;
  /// Shortest valid row, <eos> included: lengths are uniform in [min_len, num_steps].
  std::int64_t min_len = 3;
  /// Adam's settings (T: the nn.Transformer tutorial's lr 1e-4, betas (0.9, 0.98), eps 1e-9).
  double lr = 0.005, beta2 = 0.999, adam_eps = 1e-8;
};

inline Workload workload(const std::string& name, const std::string& readout) {
  using tg::models::Readout;
  Workload w;
  if (name == "A") {
    w = {.name = name,
         .config = {.model = "d2l", .src_vocab = 184, .tgt_vocab = 201, .embed_size = 32, .num_hiddens = 32,
                    .num_layers = 2, .dropout = 0.1, .num_steps = 10},
         .batch = 64, .default_steps = 100, .default_warmup = 10};
  } else if (name == "B") {
    w = {.name = name,
         .config = {.model = "rnnsearch", .src_vocab = 8000, .tgt_vocab = 8000, .embed_size = 256, .num_hiddens = 256,
                    .num_layers = 1, .dropout = 0.0, .num_steps = 20, .readout = Readout::linear},
         .batch = 64, .default_steps = 10, .default_warmup = 2};
  } else if (name == "C") {
    w = {.name = name,
         .config = {.model = "rnnsearch", .src_vocab = 30000, .tgt_vocab = 30000, .embed_size = 620,
                    .num_hiddens = 1000, .num_layers = 1, .dropout = 0.0, .num_steps = 30, .readout = Readout::linear},
         .batch = 80, .default_steps = 3, .default_warmup = 1, .decode_min_time = 0.0,
         .zero_grad_before_forward = true, .compact_grads = true};
  } else if (name == "T") {
    w = {.name = name,
         .config = {.model = "transformer", .src_vocab = 8000, .tgt_vocab = 8000, .embed_size = 256, .num_hiddens = 1024,
                    .num_layers = 3, .dropout = 0.1, .num_steps = 40, .num_heads = 4, .norm_first = false},
         .batch = 64, .default_steps = 3, .default_warmup = 1,
         .min_len = 20, .lr = 1e-4, .beta2 = 0.98, .adam_eps = 1e-9};
  } else {
    throw std::invalid_argument("unknown --config " + name + " (A, B, C or T)");
  }
  if (!readout.empty()) {
    if (w.config.model != "rnnsearch") throw std::invalid_argument("--readout applies to B and C only");
    w.config.readout = tg::models::parse_option<Readout>(readout, "--readout");
  }
  w.config.validate();
  return w;
}

struct Batch {
  tg::Tensor src, src_len, tgt, tgt_len;
  std::int64_t tokens = 0;  // valid target tokens, <eos> included
};

// One row of `n` tokens: length uniform in [min_len, n], words uniform in [4, vocab), <eos>, <pad>s.
inline std::int64_t fill_row(SplitMix64& rng, std::int64_t* row, std::int64_t n, std::int64_t vocab,
                             std::int64_t min_len = 3) {
  const std::int64_t len = min_len + rng.below(n - min_len + 1);
  for (std::int64_t j = 0; j < len - 1; ++j) row[j] = kFirstWord + rng.below(vocab - kFirstWord);
  row[len - 1] = kEos;
  for (std::int64_t j = len; j < n; ++j) row[j] = kPad;
  return len;
}

inline Batch make_batch(SplitMix64& rng, std::int64_t B, const tg::models::ModelConfig& c, std::int64_t min_len = 3) {
  const std::int64_t T = c.num_steps;
  std::vector<std::int64_t> src(B * T), tgt(B * T), src_len(B), tgt_len(B);
  Batch b;
  for (std::int64_t i = 0; i < B; ++i) {
    src_len[i] = fill_row(rng, src.data() + i * T, T, c.src_vocab, min_len);
    tgt_len[i] = fill_row(rng, tgt.data() + i * T, T, c.tgt_vocab, min_len);
    b.tokens += tgt_len[i];
  }
  b.src = tg::Tensor::from_vector(src, {B, T});
  b.tgt = tg::Tensor::from_vector(tgt, {B, T});
  b.src_len = tg::Tensor::from_vector(src_len, {B});
  b.tgt_len = tg::Tensor::from_vector(tgt_len, {B});
  return b;
}

}  // namespace tg::bench
