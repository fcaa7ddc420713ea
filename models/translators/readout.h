#pragma once
// Internal: the paper's deep output layer, shared by rnnsearch and rnnencdec.
//   maxout: t~ = W [s_i; E y_{i-1}; c_i] + b  (2 * units),  t_j = max(t~_{2j}, t~_{2j+1}),  logits = W_o t
//   linear: logits = W [s_i; E y_{i-1}; c_i] + b
// with dropout on [s_i; E y_{i-1}; c_i] when readout_dropout > 0. Registered into the decoder as
// "maxout" (maxout only), "dense" (the vocabulary projection) and "readout_dropout" (no parameters).
// tie_embeddings: W_o is the target embedding E (maxout of embed_size units only), logits = t Eᵀ with no
// bias (the paper's W_o has none; so does the transformer's tie), and no "dense" is registered.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "models/translators/limits.h"
#include "models/translators/seq2seq_impl.h"

namespace tg::models {

/// The maxout output size of a config: maxout_units, or num_hiddens / 2 when it is 0.
inline std::int64_t maxout_units_of(const ModelConfig& c) {
  return c.maxout_units > 0 ? c.maxout_units : std::max<std::int64_t>(1, c.num_hiddens / 2);
}

struct DeepOutput {
  nn::Linear maxout{nullptr};    // empty for the linear readout
  nn::Linear dense{nullptr};     // empty when tied
  nn::Embedding tied{nullptr};   // the target embedding as W_o, or empty
  nn::Dropout dropout{nullptr};  // empty when readout_dropout is 0

  /// The model rule of tie_embeddings (std::invalid_argument without a prefix, as ModelSpec::validate).
  static void check_tie(bool use_maxout, std::int64_t units, std::int64_t embed_size) {
    if (!use_maxout)
      throw std::invalid_argument("tie_embeddings needs the maxout readout (the linear readout's input is [s_i; E y_{i-1}; "
                                  "c_i], not an embedding)");
    if (units != embed_size)
      throw std::invalid_argument("tie_embeddings needs maxout_units = embed_size (the target embedding is the output "
                                  "projection), got maxout units " + std::to_string(units) + " and embed_size " +
                                  std::to_string(embed_size));
  }

  /// `dropout_gen` draws the dropout masks (unused when `dropout_p` is 0). `tie_to`: the target
  /// embedding (vocab x units) becomes W_o; its entries are redrawn as the untied projection's would
  /// be, U(-1/sqrt(units), 1/sqrt(units)), because each logit is now a sum of `units` of them.
  DeepOutput(nn::Module& owner, bool use_maxout, std::int64_t in, std::int64_t units, std::int64_t vocab, Generator& gen,
             double dropout_p = 0.0, std::shared_ptr<Generator> dropout_gen = nullptr,
             nn::Embedding tie_to = nullptr) {
    // ModelConfig::validate bounds units; checked again here because 2 * units must not overflow.
    if (units < 1 || units > limits::kMaxWidth)
      throw std::invalid_argument("readout: maxout units = " + std::to_string(units) + " is out of range [1, " +
                                  std::to_string(limits::kMaxWidth) + "]");
    if (tie_to) {
      check_tie(use_maxout, units, tie_to->embedding_dim());
      if (tie_to->num_embeddings() != vocab)
        throw std::invalid_argument("readout: the tied embedding has " + std::to_string(tie_to->num_embeddings()) +
                                    " rows for a vocabulary of " + std::to_string(vocab));
    }
    if (use_maxout) {
      maxout = owner.register_module("maxout", nn::Linear(in, 2 * units, gen));
      if (tie_to) {
        tied = std::move(tie_to);
        const double bound = 1.0 / std::sqrt(static_cast<double>(units));
        nn::init::uniform_(tied->weight, gen, -bound, bound);
      } else {
        dense = owner.register_module("dense", nn::Linear(units, vocab, gen));
      }
    } else {
      dense = owner.register_module("dense", nn::Linear(in, vocab, gen));
    }
    if (dropout_p > 0)
      dropout = owner.register_module("readout_dropout", nn::Dropout(dropout_p, std::move(dropout_gen)));
  }

  /// features (..., in) -> logits (..., vocab)
  Tensor operator()(const Tensor& input) const {
    const Tensor features = dropout ? dropout(input) : input;
    if (!maxout) return dense->forward(features);
    const Tensor t = maxout->forward(features);
    Shape pairs = t.shape();
    pairs[pairs.size() - 1] = t.size(-1) / 2;
    pairs.push_back(2);
    const Tensor units = std::get<0>(max(reshape(t, pairs), -1));
    return tied ? linear(units, tied->weight) : dense->forward(units);
  }

  /// The parameters DeepOutput(owner, use_maxout, in, units, vocab, ..., tie_to) registers (tied: none of W_o's).
  static void count(ParameterCount& n, bool use_maxout, std::int64_t in, std::int64_t units, std::int64_t vocab,
                    bool tied = false) {
    if (use_maxout) {
      n.linear(in, ParameterCount::mul(2, units));
      if (!tied) n.linear(units, vocab);
    } else {
      n.linear(in, vocab);
    }
  }

  /// sequence_loss of the logits of features (B, T, in), computed only at the valid positions.
  Tensor loss_at_valid(const Tensor& features, const Tensor& target, const Tensor& target_valid_len,
                       double label_smoothing = 0.0) const {
    return loss_at_valid_positions(features, target, target_valid_len, *this, label_smoothing);
  }
};

}  // namespace tg::models
