#pragma once
// Internal: the paper's deep output layer, shared by rnnsearch and rnnencdec.
//   maxout: t~ = W [s_i; E y_{i-1}; c_i] + b  (2 * units),  t_j = max(t~_{2j}, t~_{2j+1}),  logits = W_o t
//   linear: logits = W [s_i; E y_{i-1}; c_i] + b
// Registered into the decoder as "maxout" (maxout only) and "dense" (the vocabulary projection).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
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
  std::shared_ptr<nn::Linear> maxout;  // null for the linear readout
  std::shared_ptr<nn::Linear> dense;

  DeepOutput(nn::Module& owner, bool use_maxout, std::int64_t in, std::int64_t units, std::int64_t vocab, Generator& gen) {
    // ModelConfig::validate bounds units; checked again here because 2 * units must not overflow.
    if (units < 1 || units > limits::kMaxWidth)
      throw std::invalid_argument("readout: maxout units = " + std::to_string(units) + " is out of range [1, " +
                                  std::to_string(limits::kMaxWidth) + "]");
    if (use_maxout) {
      maxout = owner.register_module("maxout", std::make_shared<nn::Linear>(in, 2 * units, gen));
      dense = owner.register_module("dense", std::make_shared<nn::Linear>(units, vocab, gen));
    } else {
      dense = owner.register_module("dense", std::make_shared<nn::Linear>(in, vocab, gen));
    }
  }

  /// features (..., in) -> logits (..., vocab)
  Tensor operator()(const Tensor& features) const {
    if (!maxout) return dense->forward(features);
    const Tensor t = maxout->forward(features);
    Shape pairs = t.shape();
    pairs[pairs.size() - 1] = t.size(-1) / 2;
    pairs.push_back(2);
    return dense->forward(std::get<0>(max(reshape(t, pairs), -1)));
  }

  /// The parameters DeepOutput(owner, use_maxout, in, units, vocab) registers.
  static void count(ParameterCount& n, bool use_maxout, std::int64_t in, std::int64_t units, std::int64_t vocab) {
    if (use_maxout) n.linear(in, ParameterCount::mul(2, units)).linear(units, vocab);
    else n.linear(in, vocab);
  }

  /// sequence_loss of the logits of features (B, T, in), computed only at the valid positions.
  Tensor loss_at_valid(const Tensor& features, const Tensor& target, const Tensor& target_valid_len,
                       double label_smoothing = 0.0) const {
    return loss_at_valid_positions(features, target, target_valid_len, *this, label_smoothing);
  }
};

}  // namespace tg::models
