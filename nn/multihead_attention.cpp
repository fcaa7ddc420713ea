#include "nn/multihead_attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "autograd/ops_attention.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "nn/init.h"

namespace tg::nn {

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& options, Generator& gen)
    : options_(options),
      kdim_(options.kdim > 0 ? options.kdim : options.embed_dim),
      vdim_(options.vdim > 0 ? options.vdim : options.embed_dim),
      gen_(options.generator ? options.generator : std::make_shared<Generator>(0)) {
  const std::int64_t E = options.embed_dim, H = options.num_heads;
  if (E <= 0 || H <= 0 || E % H != 0)
    throw std::invalid_argument("MultiheadAttention: embed_dim (" + std::to_string(E) +
                                ") must be a positive multiple of num_heads (" + std::to_string(H) + ")");
  if (!(options.dropout >= 0.0 && options.dropout < 1.0))
    throw std::invalid_argument("MultiheadAttention: dropout must be in [0, 1), got " + std::to_string(options.dropout));
  if (options.kdim < 0 || options.vdim < 0) throw std::invalid_argument("MultiheadAttention: kdim and vdim must be >= 0");
  if (kdim_ == E && vdim_ == E) {
    in_proj_weight = register_parameter("in_proj_weight", Tensor::empty({3 * E, E}));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", Tensor::empty({E, E}));
    k_proj_weight = register_parameter("k_proj_weight", Tensor::empty({E, kdim_}));
    v_proj_weight = register_parameter("v_proj_weight", Tensor::empty({E, vdim_}));
  }
  if (options.bias) in_proj_bias = register_parameter("in_proj_bias", Tensor::zeros({3 * E}));
  out_proj = register_module("out_proj", Linear(E, E, gen, options.bias));
  if (in_proj_weight.defined()) {
    init::xavier_uniform_(in_proj_weight, gen);
  } else {
    init::xavier_uniform_(q_proj_weight, gen);
    init::xavier_uniform_(k_proj_weight, gen);
    init::xavier_uniform_(v_proj_weight, gen);
  }
  if (options.bias) init::zeros_(out_proj->bias);
}

std::string MultiheadAttentionImpl::extra_repr() const {
  return "embed_dim=" + std::to_string(options_.embed_dim) + ", num_heads=" + std::to_string(options_.num_heads) +
         (options_.dropout > 0 ? ", dropout=" + std::to_string(options_.dropout) : std::string()) +
         (options_.batch_first ? ", batch_first=true" : std::string());
}

Tensor additive_mask(const Tensor& mask, DType dtype) {
  if (is_floating(mask.dtype())) return mask.to(dtype);
  return masked_fill(Tensor::zeros(mask.shape(), dtype), mask, -std::numeric_limits<double>::infinity());
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                           const Tensor& key_padding_mask, bool need_weights,
                                                           const Tensor& attn_mask, bool average_attn_weights) {
  const std::int64_t E = options_.embed_dim, H = options_.num_heads, D = E / H;
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("MultiheadAttention: " + why + ": query " + query.shape().str() + ", key " +
                                key.shape().str() + ", value " + value.shape().str());
  };
  const bool batched = query.dim() == 3;
  if (query.dim() != 2 && query.dim() != 3) fail("query must be (L, N, E), (N, L, E) or (L, E)");
  if (key.dim() != query.dim() || value.dim() != query.dim()) fail("query, key and value need the same number of dims");
  if (query.size(-1) != E || key.size(-1) != kdim_ || value.size(-1) != vdim_) fail("feature sizes differ from embed_dim, kdim, vdim");
  // To (N, L, E).
  auto to_nle = [&](const Tensor& t) { return !batched ? unsqueeze(t, 0) : options_.batch_first ? t : transpose(t, 0, 1); };
  const Tensor q = to_nle(query), k = to_nle(key), v = to_nle(value);
  const std::int64_t N = q.size(0), L = q.size(1), S = k.size(1);
  if (k.size(0) != N || v.size(0) != N || v.size(1) != S) fail("batch or source lengths differ");

  // (N, T, E) -> (N, H, T, D)
  auto heads = [&](const Tensor& t, std::int64_t T) { return permute(reshape(t, Shape{N, T, H, D}), {0, 2, 1, 3}); };
  const Tensor qh = heads(linear(q, in_weight(0), in_bias(0)), L);
  const Tensor kh = heads(linear(k, in_weight(1), in_bias(1)), S);
  const Tensor vh = heads(linear(v, in_weight(2), in_bias(2)), S);
  const Tensor mask = combined_mask(attn_mask, key_padding_mask, N, L, S, batched, query, key, value);
  Tensor weights;
  const double p = is_training() ? options_.dropout : 0.0;
  const Tensor attended = scaled_dot_product_attention(qh, kh, vh, mask, p, false, 0.0, gen_.get(),
                                                       need_weights ? &weights : nullptr);  // (N, H, L, D)
  Tensor out = out_proj->forward(reshape(permute(attended, {0, 2, 1, 3}), Shape{N, L, E}));
  out = !batched ? squeeze(out, 0) : options_.batch_first ? out : transpose(out, 0, 1);
  if (!need_weights) return {out, Tensor()};
  if (average_attn_weights) weights = mean(weights, {1});
  if (!batched) weights = squeeze(weights, 0);
  return {out, weights};
}

Tensor MultiheadAttentionImpl::in_weight(int i) const {
  if (in_proj_weight.defined()) return narrow(in_proj_weight, 0, i * options_.embed_dim, options_.embed_dim);
  return i == 0 ? q_proj_weight : i == 1 ? k_proj_weight : v_proj_weight;
}

Tensor MultiheadAttentionImpl::in_bias(int i) const {
  return in_proj_bias.defined() ? narrow(in_proj_bias, 0, i * options_.embed_dim, options_.embed_dim) : Tensor();
}

Tensor MultiheadAttentionImpl::combined_mask(const Tensor& attn_mask, const Tensor& key_padding_mask, std::int64_t N,
                                             std::int64_t L, std::int64_t S, bool batched, const Tensor& query,
                                             const Tensor& key, const Tensor& value) const {
  const std::int64_t H = options_.num_heads;
  const DType dtype = query.dtype();
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("MultiheadAttention: " + why + ": query " + query.shape().str() + ", key " +
                                key.shape().str() + ", value " + value.shape().str());
  };
  Tensor mask;
  if (attn_mask.defined()) {
    if (attn_mask.dim() == 2) {
      if (!(attn_mask.shape() == Shape{L, S})) fail("attn_mask must be (L, S) = (" + std::to_string(L) + ", " + std::to_string(S) + ")");
      mask = additive_mask(attn_mask, dtype);
    } else if (attn_mask.dim() == 3 && attn_mask.shape() == Shape{N * H, L, S}) {
      mask = reshape(additive_mask(attn_mask, dtype), Shape{N, H, L, S});
    } else {
      fail("attn_mask must be (L, S) or (N * num_heads, L, S), got " + attn_mask.shape().str());
    }
  }
  if (key_padding_mask.defined()) {
    const Shape want = batched ? Shape{N, S} : Shape{S};
    if (!(key_padding_mask.shape() == want)) fail("key_padding_mask must be " + want.str() + ", got " + key_padding_mask.shape().str());
    const Tensor pad = reshape(additive_mask(key_padding_mask, dtype), Shape{N, 1, 1, S});
    mask = mask.defined() ? mask + pad : pad;
  }
  return mask;
}

Tensor MultiheadAttentionImpl::forward_packed(const Tensor& query, const PackedTokens& query_tokens, const Tensor& key,
                                              const Tensor& value, const PackedTokens& key_tokens,
                                              const Tensor& key_padding_mask, const Tensor& attn_mask) {
  const std::int64_t E = options_.embed_dim, H = options_.num_heads, D = E / H;
  const std::int64_t N = query_tokens.batch(), L = query_tokens.length(), S = key_tokens.length();
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("MultiheadAttention::forward_packed: " + why + ": query " + query.shape().str() + " (" +
                                std::to_string(query_tokens.tokens()) + " tokens), key " + key.shape().str() + ", value " +
                                value.shape().str() + " (" + std::to_string(key_tokens.tokens()) + " tokens)");
  };
  if (query.dim() != 2 || key.dim() != 2 || value.dim() != 2) fail("query, key and value must be (tokens, features)");
  if (query.size(0) != query_tokens.tokens() || key.size(0) != key_tokens.tokens() || value.size(0) != key_tokens.tokens())
    fail("rows differ from the token counts");
  if (query.size(1) != E || key.size(1) != kdim_ || value.size(1) != vdim_) fail("feature sizes differ from embed_dim, kdim, vdim");
  if (key_tokens.batch() != N) fail("batch sizes differ");
  // Projected on the tokens, then padded to (N, T, E) for the attention, which needs the rows.
  auto heads = [&](const Tensor& x, const PackedTokens& tokens, int i) {
    return permute(reshape(tokens.unpack(linear(x, in_weight(i), in_bias(i))), Shape{N, tokens.length(), H, D}), {0, 2, 1, 3});
  };
  const Tensor qh = heads(query, query_tokens, 0), kh = heads(key, key_tokens, 1), vh = heads(value, key_tokens, 2);
  const Tensor mask = combined_mask(attn_mask, key_padding_mask, N, L, S, true, query, key, value);
  const double p = is_training() ? options_.dropout : 0.0;
  const Tensor attended = scaled_dot_product_attention(qh, kh, vh, mask, p, false, 0.0, gen_.get(), nullptr);  // (N, H, L, D)
  return out_proj->forward(query_tokens.pack(reshape(permute(attended, {0, 2, 1, 3}), Shape{N, L, E})));
}

}  // namespace tg::nn
