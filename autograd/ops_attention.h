#pragma once
// Fused attention ops: Bahdanau's additive scores (no (B, Q, K, H) intermediate, one tape node)
// and scaled dot-product attention (tiled, see below); each equals its composite (the tests compare
// them and gradcheck both).
// Implemented beside its backward in autograd/ops_attention.cpp.
#include <cstdint>
#include <optional>

#include "autograd/tensor.h"

namespace tg {

/// Bahdanau's additive scores: e[b, q, k] = Σ_h w[h] tanh(query[b, q, h] + keys[b, k, h]) for
/// query (B, Q, H), keys (B, K, H), w (H) -> (B, Q, K), without the (B, Q, K, H) intermediate.
Tensor additive_attention_scores(const Tensor& query, const Tensor& keys, const Tensor& w);

class Generator;

/// torch.nn.functional.scaled_dot_product_attention's keyword arguments, for C++20 designated
/// initializers, with torch's names, order and defaults:
///
///     scaled_dot_product_attention(q, k, v, {.is_causal = true});
///     scaled_dot_product_attention(q, k, v, {.attn_mask = m, .dropout_p = 0.1, .scale = 0.125});
///
/// Any field may be left out, but those given keep the declaration order (a C++20 rule; torch's
/// keywords come in any order). The last two are tapegrad's, after torch's four. All defaults:
/// call with three arguments (a bare `{}` is ambiguous with the positional overload's mask).
struct ScaledDotProductAttentionOptions {
  /// attn_mask=None: no mask. Bool (true = may attend), i64 (nonzero = may attend) or floating
  /// (added to the scores), broadcasting to (..., L, S).
  Tensor attn_mask{};
  /// dropout_p=0.0: dropout on the attention weights, p in [0, 1).
  double dropout_p = 0.0;
  /// is_causal=False: position l sees s <= l only (top-left aligned when L != S, as torch); not
  /// with attn_mask.
  bool is_causal = false;
  /// scale=None: 1/sqrt(E). A given value is used as it is, 0 and negative values included (as
  /// torch; the positional overload reads scale <= 0 as None).
  std::optional<double> scale{};
  /// The dropout masks' generator (one next_u64() per call when dropout_p > 0); nullptr draws
  /// from tg::default_generator(), holding its mutex, as torch's SDPA draws from its default
  /// generator (and as tapegrad's sampling ops without a generator argument).
  Generator* generator = nullptr;
  /// When set, the attention weights (before dropout; differentiable) are stored there, through
  /// the composed form.
  Tensor* weights = nullptr;
};

/// softmax(q kᵀ * scale + mask) v, as torch.nn.functional.scaled_dot_product_attention (PyTorch
/// 2.x): query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev), batch dims broadcast.
/// The options (attn_mask, dropout_p, is_causal, scale, generator, weights) are described above;
/// a query with no allowed key gets NaN, as PyTorch; in backward its NaN weights reach value's
/// gradient, and through the scores NaN flows for a float mask, nothing for a bool or i64 mask (as
/// the composite's add and masked_fill). Dropout: the generator's one draw per call seeds the mask
/// tg::dropout would draw for the (..., L, S) weights.
/// Fused (autograd/kernels/attention.h): a tiled online softmax whose memory per query row does not
/// grow with S, and a backward that recomputes the weights blockwise from each row's saved
/// log-sum-exp. The weights output and a floating mask that requires grad (which gets a gradient)
/// take the composed form below.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const ScaledDotProductAttentionOptions& options);

/// The same with positional arguments (the form before the options; kept): `scale` <= 0 means
/// 1/sqrt(E), and dropout (p > 0) needs `gen` (no default generator). Equal to the options form
/// with the same values, e.g. (q, k, v, Tensor(), 0.0, true) == (q, k, v, {.is_causal = true}).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0, bool is_causal = false,
                                    double scale = 0.0, Generator* gen = nullptr, Tensor* weights = nullptr);

/// The same, composed of matmul, masked_fill and softmax (the (..., L, S) weights in memory; same
/// arguments, checks and dropout draws): the reference of the fused op, and a form whose backward
/// is itself differentiable. Both overloads, as the fused op's.
Tensor scaled_dot_product_attention_composed(const Tensor& query, const Tensor& key, const Tensor& value,
                                             const ScaledDotProductAttentionOptions& options);
Tensor scaled_dot_product_attention_composed(const Tensor& query, const Tensor& key, const Tensor& value,
                                             const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                             bool is_causal = false, double scale = 0.0, Generator* gen = nullptr,
                                             Tensor* weights = nullptr);

}  // namespace tg
