#pragma once
// Fused attention ops: Bahdanau's additive scores (no (B, Q, K, H) intermediate, one tape node)
// and scaled dot-product attention (tiled, see below); each equals its composite (the tests compare
// them and gradcheck both).
// Implemented beside its backward in autograd/ops_attention.cpp.
#include <cstdint>

#include "autograd/tensor.h"

namespace tg {

/// Bahdanau's additive scores: e[b, q, k] = Σ_h w[h] tanh(query[b, q, h] + keys[b, k, h]) for
/// query (B, Q, H), keys (B, K, H), w (H) -> (B, Q, K), without the (B, Q, K, H) intermediate.
Tensor additive_attention_scores(const Tensor& query, const Tensor& keys, const Tensor& w);

class Generator;

/// softmax(q kᵀ * scale + mask) v, as torch.nn.functional.scaled_dot_product_attention (PyTorch
/// 2.x): query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev), batch dims broadcast.
/// `attn_mask` broadcasts to (..., L, S): a bool mask says where attention may go (true = allowed,
/// as PyTorch; an i64 mask is read the same way, nonzero = allowed), a floating one is added to the
/// scores. `is_causal` allows position l to see s <= l only (no attn_mask with it). `scale` <= 0
/// means 1/sqrt(E). Dropout (p in [0, 1)) on the weights takes its masks from `gen`, which is needed
/// when p > 0: one gen.next_u64() per call seeds the mask tg::dropout would draw for the (..., L, S)
/// weights. A query with no allowed key gets NaN, as PyTorch; in backward its NaN weights reach
/// value's gradient, and through the scores NaN flows for a float mask, nothing for a bool or i64
/// mask (as the composite's add and masked_fill).
/// Fused (autograd/kernels/attention.h): a tiled online softmax whose memory per query row does not
/// grow with S, and a backward that recomputes the weights blockwise from each row's saved
/// log-sum-exp. With `weights`, the attention weights (before dropout; differentiable) go there,
/// and a floating mask that requires grad gets one: both through the composed form below.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0, bool is_causal = false,
                                    double scale = 0.0, Generator* gen = nullptr, Tensor* weights = nullptr);

/// The same, composed of matmul, masked_fill and softmax (the (..., L, S) weights in memory; same
/// arguments, checks and dropout draws): the reference of the fused op, and a form whose backward
/// is itself differentiable.
Tensor scaled_dot_product_attention_composed(const Tensor& query, const Tensor& key, const Tensor& value,
                                             const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                             bool is_causal = false, double scale = 0.0, Generator* gen = nullptr,
                                             Tensor* weights = nullptr);

}  // namespace tg
