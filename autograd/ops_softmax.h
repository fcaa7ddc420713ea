#pragma once
// The softmax family and losses.
// Implemented beside their backward in autograd/ops_softmax.cpp; each
// validates its arguments and throws std::invalid_argument naming the op and the shapes.
#include <cstdint>

#include "autograd/tensor.h"

namespace tg {

Tensor softmax(const Tensor& x, std::int64_t axis = -1);
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1);
/// Softmax over the last axis where, as in d2l, positions at or beyond each row's valid length
/// are set to -1e6 first (finite, so a fully masked row gives uniform weights, not NaN).
/// valid_lens: i64 of shape (B) (one length per batch entry, shared by all rows of that entry) or
/// of scores.shape without the last axis (one length per row); undefined = no mask.
Tensor masked_softmax(const Tensor& scores, const Tensor& valid_lens);
/// Mean over targets != ignore_index of -log_softmax(logits)[target], as torch's
/// CrossEntropyLoss(ignore_index, reduction='mean'). logits (N, C) or (..., C): the class axis is
/// the last one (torch's is dim 1 for (N, C, d1, ...)); targets i64 of logits.shape without it.
/// NaN when every target is ignored (as PyTorch).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index = -100);

/// Row primitive on raw logits, outside autograd, for decoders that read each row once: the stable
/// log Σ exp of x[0, n) (the log-softmax normaliser greedy and beam search share, so both score a
/// token identically); with `argmax`, also the first index of the row's maximum.
double log_sum_exp_row(const float* x, std::int64_t n, std::int64_t* argmax = nullptr);
double log_sum_exp_row(const double* x, std::int64_t n, std::int64_t* argmax = nullptr);

}  // namespace tg
