#pragma once
// Internal: the loss helper the model files share.
#include <memory>
#include <stdexcept>

#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
#include "models/translators/seq2seq.h"

namespace tg::models {

/// sequence_loss of readout(features) for features (B, T, F), with the readout applied only at
/// the valid target positions: pads' logits get no loss and no gradient, so skipping them gives
/// the same value and gradients for less work. `readout` maps (N, F) to logits (N, V).
template <class Readout>
Tensor loss_at_valid_positions(const Tensor& features, const Tensor& target, const Tensor& target_valid_len,
                               const Readout& readout) {
  const std::int64_t B = features.size(0), T = features.size(1);
  if (!(target.shape() == Shape{B, T}) || !(target_valid_len.shape() == Shape{B}))
    throw std::invalid_argument("loss: target " + target.shape().str() + " and target_valid_len " +
                                target_valid_len.shape().str() + " do not match features " + features.shape().str());
  const Tensor rows = valid_positions(target_valid_len, T);
  const Tensor picked = index_select(reshape(features, {B * T, features.size(2)}), 0, rows);
  Tensor labels = Tensor::empty({rows.numel()}, DType::i64);
  const std::int64_t *pos = rows.data<std::int64_t>(), *y = target.data<std::int64_t>();
  std::int64_t* label = labels.data<std::int64_t>();
  for (std::int64_t i = 0; i < rows.numel(); ++i) label[i] = y[pos[i]];
  return cross_entropy(readout(picked), labels);
}

}  // namespace tg::models
