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

class Generator;

/// softmax(q kᵀ * scale + mask) v, as torch.nn.functional.scaled_dot_product_attention (PyTorch
/// 2.x; composed of matmul and softmax, so every gradient flows): query (..., L, E), key (..., S, E),
/// value (..., S, Ev) -> (..., L, Ev), batch dims broadcast. `attn_mask` broadcasts to (..., L, S):
/// a bool mask says where attention may go (true = allowed, as PyTorch; an i64 mask is read the same
/// way, nonzero = allowed), a floating one is added to the scores. `is_causal` allows position l to see
/// s <= l only (no attn_mask with it). `scale` <= 0 means 1/sqrt(E). Dropout (p in [0, 1)) on the
/// weights takes its masks from `gen`, which is needed when p > 0. A query with no allowed key
/// gets NaN, as PyTorch. With `weights`, the attention weights (before dropout; differentiable) go there.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0, bool is_causal = false,
                                    double scale = 0.0, Generator* gen = nullptr, Tensor* weights = nullptr);

}  // namespace tg
