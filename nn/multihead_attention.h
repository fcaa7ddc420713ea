#pragma once
// torch.nn.MultiheadAttention (PyTorch 1.13): parameters, state_dict keys, initialisation and
// forward semantics, computed through tg::scaled_dot_product_attention.
//
// Masks: bool (DType::b8) as PyTorch's; an i64 mask is read the same way (nonzero = true). As in
// PyTorch's MultiheadAttention, a true entry of key_padding_mask (N, S) or attn_mask (L, S) /
// (N * num_heads, L, S) means "may NOT attend" (the opposite of scaled_dot_product_attention's bool
// mask); a floating mask is added to the scores.
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "autograd/dtype.h"
#include "autograd/tensor.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/packed_tokens.h"

namespace tg {
class Generator;
}

namespace tg::nn {

/// A mask in this file's convention as a floating mask of `dtype` to add to the scores: -inf where a
/// bool or i64 entry is true (blocked), 0 elsewhere; a floating mask converted as it is.
Tensor additive_mask(const Tensor& mask, DType dtype);

/// Options of MultiheadAttention, named as torch's constructor arguments.
struct MultiheadAttentionOptions {
  std::int64_t embed_dim;
  std::int64_t num_heads;
  double dropout = 0.0;  ///< on the attention weights; in [0, 1), as nn::Dropout (PyTorch also takes 1)
  bool bias = true;
  std::int64_t kdim = 0;  ///< 0: embed_dim
  std::int64_t vdim = 0;  ///< 0: embed_dim
  bool batch_first = false;
  std::shared_ptr<Generator> generator{};  ///< dropout masks (null: the layer's own Generator(0))
};

/// Parameters (PyTorch's names and order): `in_proj_weight` (3E, E) when kdim == vdim == E, else
/// `q_proj_weight` (E, E), `k_proj_weight` (E, kdim), `v_proj_weight` (E, vdim); `in_proj_bias`
/// (3E) with bias; child `out_proj` Linear(E, E, bias). Initialised as torch: xavier_uniform_ on the
/// input projections, zero biases, out_proj.weight as a Linear.
class MultiheadAttentionImpl : public Module {
 public:
  using options_type = MultiheadAttentionOptions;
  MultiheadAttentionImpl(const MultiheadAttentionOptions& options, Generator& gen);
  MultiheadAttentionImpl(std::int64_t embed_dim, std::int64_t num_heads, Generator& gen)
      : MultiheadAttentionImpl(MultiheadAttentionOptions{.embed_dim = embed_dim, .num_heads = num_heads}, gen) {}

  /// query (L, N, E) ((N, L, E) with batch_first; (L, E) unbatched), key (S, N, kdim), value
  /// (S, N, vdim) -> {output like query, weights}. Weights, when need_weights: (N, L, S) averaged over
  /// heads, or (N, num_heads, L, S) when !average_attn_weights (unbatched: without N); else undefined.
  /// The weights are differentiable, as torch's, but taken before dropout (torch's are after it).
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = Tensor(), bool need_weights = true,
                                     const Tensor& attn_mask = Tensor(), bool average_attn_weights = true);
  /// forward() on packed tokens (nn/packed_tokens.h; batch_first layout whatever the option):
  /// query (query_tokens.tokens(), E), key and value (key_tokens.tokens(), kdim / vdim) -> (query
  /// tokens, E), with the projections computed for the tokens only; masks as forward()'s, over the
  /// padded lengths (N, S) and (L, S). The padding's keys and values are zeros here, so the rows
  /// equal forward()'s on the unpacked batch when no query attends to a padded key.
  Tensor forward_packed(const Tensor& query, const PackedTokens& query_tokens, const Tensor& key, const Tensor& value,
                        const PackedTokens& key_tokens, const Tensor& key_padding_mask = Tensor(),
                        const Tensor& attn_mask = Tensor());
  std::string extra_repr() const override;
  const MultiheadAttentionOptions& options() const { return options_; }

  Tensor in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias;
  Linear out_proj{nullptr};

 private:
  Tensor in_weight(int i) const;  // W_q, W_k, W_v
  Tensor in_bias(int i) const;    // their biases (undefined without bias)
  /// attn_mask and key_padding_mask as one additive mask (N or 1, H or 1, L or 1, S) of query's
  /// dtype, or undefined; an error names the shapes of query, key and value.
  Tensor combined_mask(const Tensor& attn_mask, const Tensor& key_padding_mask, std::int64_t N, std::int64_t L,
                       std::int64_t S, bool batched, const Tensor& query, const Tensor& key, const Tensor& value) const;
  MultiheadAttentionOptions options_;
  std::int64_t kdim_, vdim_;
  std::shared_ptr<Generator> gen_;
};
TG_MODULE(MultiheadAttention);

}  // namespace tg::nn
