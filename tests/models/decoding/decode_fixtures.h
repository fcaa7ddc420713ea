#pragma once
// Setup shared by the decoding tests that run real models: a small model, random source rows, and
// a guard that restores the thread count.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "models/text/text.h"
#include "models/translators/seq2seq.h"

namespace tg::models::testing {

/// A small real model of the given family (d2l: 2 layers, the others 1), initialised by Generator(seed).
inline std::shared_ptr<Seq2Seq> small_model(const std::string& model, const std::string& attention,
                                            std::int64_t src_vocab, std::int64_t tgt_vocab, std::int64_t embed,
                                            std::int64_t hidden, std::int64_t num_steps, std::uint64_t seed) {
  ModelConfig c;
  c.model = model;
  c.attention = parse_option<AttentionScore>(attention, "attention");
  c.src_vocab = src_vocab;
  c.tgt_vocab = tgt_vocab;
  c.embed_size = embed;
  c.num_hiddens = hidden;
  c.num_layers = model == "d2l" ? 2 : 1;
  c.num_steps = num_steps;
  Generator gen(seed);
  return make_model(c, gen);
}

/// B random source rows of num_steps ids: 2..max_len valid tokens in [4, src_vocab), <eos> last,
/// then <pad>.
struct Sources {
  Tensor src, valid;
};
inline Sources random_sources(std::int64_t B, std::int64_t num_steps, std::int64_t max_len, std::int64_t src_vocab,
                              std::uint64_t seed) {
  std::vector<std::int64_t> flat, lens;
  SplitMix64 mix{seed};
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t len = 2 + mix.below(max_len - 1);
    for (std::int64_t j = 0; j < num_steps; ++j)
      flat.push_back(j + 1 < len ? 4 + mix.below(src_vocab - 4) : j + 1 == len ? Vocab::kEos : Vocab::kPad);
    lens.push_back(len);
  }
  return {Tensor::from_vector(flat, {B, num_steps}), Tensor::from_vector(lens, {B})};
}

/// Restores, when it goes out of scope, the thread count there was when it was made.
struct ThreadRestore {
  int threads = num_threads();
  ~ThreadRestore() { set_num_threads(threads); }
};

}  // namespace tg::models::testing
