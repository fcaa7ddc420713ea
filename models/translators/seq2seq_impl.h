#pragma once
// Internal: the loss helpers, the embedding lookup and the parameter counting the model files share.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
#include "models/translators/seq2seq.h"
#include "nn/dropout.h"
#include "nn/embedding.h"

namespace tg::models {

/// table(ids), through `dropout` when the model has one (rnnsearch and rnnencdec's embedding
/// dropout: empty when its rate is 0).
inline Tensor embed(const nn::Embedding& table, const Tensor& ids, const nn::Dropout& dropout) {
  const Tensor e = table->forward(ids);
  return dropout ? dropout(e) : e;
}

/// The mean (label-smoothed) cross-entropy of readout(picked) against target's entries at `rows`:
/// picked (N, F) holds the features of the flat target positions rows (N) (e.g. valid_positions).
template <class Readout>
Tensor loss_at_rows(const Tensor& picked, const Tensor& target, const Tensor& rows, const Readout& readout,
                    double label_smoothing = 0.0) {
  Tensor labels = Tensor::empty({rows.numel()}, DType::i64);
  const std::int64_t *pos = rows.data<std::int64_t>(), *y = target.data<std::int64_t>();
  std::int64_t* label = labels.data<std::int64_t>();
  for (std::int64_t i = 0; i < rows.numel(); ++i) label[i] = y[pos[i]];
  return smoothed_cross_entropy(readout(picked), labels, label_smoothing);
}

/// sequence_loss of readout(features) for features (B, T, F), with the readout applied only at
/// the valid target positions: pads' logits get no loss and no gradient, so skipping them gives
/// the same value and gradients for less work. `readout` maps (N, F) to logits (N, V).
template <class Readout>
Tensor loss_at_valid_positions(const Tensor& features, const Tensor& target, const Tensor& target_valid_len,
                               const Readout& readout, double label_smoothing = 0.0) {
  const std::int64_t B = features.size(0), T = features.size(1);
  if (!(target.shape() == Shape{B, T}) || !(target_valid_len.shape() == Shape{B}))
    throw std::invalid_argument("loss: target " + target.shape().str() + " and target_valid_len " +
                                target_valid_len.shape().str() + " do not match features " + features.shape().str());
  const Tensor rows = valid_positions(target_valid_len, T);
  return loss_at_rows(index_select(reshape(features, {B * T, features.size(2)}), 0, rows), target, rows, readout,
                      label_smoothing);
}

/// Exact parameter counts of the layers the models are built from, for ModelSpec::num_parameters.
/// The sizes are validated first (limits.h), so every product fits in int64 with room to spare;
/// the arithmetic still refuses to overflow rather than wrap.
class ParameterCount {
 public:
  std::int64_t total() const { return n_; }
  /// Embedding(num, dim).
  ParameterCount& embedding(std::int64_t num, std::int64_t dim) { return add(mul(num, dim)); }
  /// Linear(in, out, bias).
  ParameterCount& linear(std::int64_t in, std::int64_t out, bool bias = true) {
    return add(mul(in, out)).add(bias ? out : 0);
  }
  /// One GRU layer in one direction (a GRUCell): weight_ih, weight_hh, bias_ih, bias_hh.
  ParameterCount& gru_cell(std::int64_t in, std::int64_t hidden) {
    const std::int64_t gates = mul(3, hidden);
    return add(mul(gates, in)).add(mul(gates, hidden)).add(mul(2, gates));
  }
  /// nn::GRU(in, hidden) with `layers` layers and `directions` (1 or 2) directions.
  ParameterCount& gru(std::int64_t in, std::int64_t hidden, std::int64_t layers, std::int64_t directions) {
    for (std::int64_t l = 0; l < layers; ++l)
      for (std::int64_t d = 0; d < directions; ++d) gru_cell(l == 0 ? in : mul(directions, hidden), hidden);
    return *this;
  }
  /// LayerNorm(d): weight and bias.
  ParameterCount& layer_norm(std::int64_t d) { return add(mul(2, d)); }
  /// AdditiveAttention(key_size, query_size, num_hiddens): W_k, W_q, w_v, no biases.
  ParameterCount& additive_attention(std::int64_t key_size, std::int64_t query_size, std::int64_t num_hiddens) {
    return linear(key_size, num_hiddens, false).linear(query_size, num_hiddens, false).linear(num_hiddens, 1, false);
  }

  static std::int64_t mul(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) overflow();
    return r;
  }

 private:
  ParameterCount& add(std::int64_t k) {
    if (__builtin_add_overflow(n_, k, &n_)) overflow();
    return *this;
  }
  [[noreturn]] static void overflow() {
    throw std::invalid_argument("model config: the parameter count overflows 64-bit integers");
  }
  std::int64_t n_ = 0;
};

}  // namespace tg::models
