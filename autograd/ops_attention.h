#pragma once
// Bahdanau's additive attention scores, fused: no (B, Q, K, H) intermediate and one tape node; it equals
// the composite of elementwise and reduction ops (the tests gradcheck both and compare them).
// Implemented beside its backward in autograd/ops_attention.cpp.
#include <cstdint>

#include "autograd/tensor.h"

namespace tg {

/// Bahdanau's additive scores: e[b, q, k] = Σ_h w[h] tanh(query[b, q, h] + keys[b, k, h]) for
/// query (B, Q, H), keys (B, K, H), w (H) -> (B, Q, K), without the (B, Q, K, H) intermediate.
Tensor additive_attention_scores(const Tensor& query, const Tensor& keys, const Tensor& w);

}  // namespace tg
