#include "nn/transformer.h"

#include <stdexcept>

#include "autograd/ops_elementwise.h"
#include "autograd/random.h"

namespace tg::nn {

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerOptions& options, Generator& gen)
    : options_(options) {
  if (options.dim_feedforward <= 0)
    throw std::invalid_argument("TransformerEncoderLayer: dim_feedforward must be positive, got " +
                                std::to_string(options.dim_feedforward));
  auto masks = options.generator ? options.generator : std::make_shared<Generator>(0);
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(
                                               MultiheadAttentionOptions{.embed_dim = options.d_model,
                                                                         .num_heads = options.nhead,
                                                                         .dropout = options.dropout,
                                                                         .batch_first = options.batch_first,
                                                                         .generator = masks},
                                               gen));
  linear1 = register_module("linear1", std::make_shared<Linear>(options.d_model, options.dim_feedforward, gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(options.dropout, masks));
  linear2 = register_module("linear2", std::make_shared<Linear>(options.dim_feedforward, options.d_model, gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout, masks));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout, masks));
}

std::string TransformerEncoderLayer::extra_repr() const {
  return "d_model=" + std::to_string(options_.d_model) + ", nhead=" + std::to_string(options_.nhead) +
         ", dim_feedforward=" + std::to_string(options_.dim_feedforward) +
         (options_.activation == TransformerActivation::gelu ? ", activation=gelu" : ", activation=relu") +
         (options_.norm_first ? ", norm_first=true" : "");
}

Tensor TransformerEncoderLayer::feed_forward(const Tensor& x) {
  const Tensor h = linear1->forward(x);
  const Tensor a = options_.activation == TransformerActivation::gelu ? gelu(h) : relu(h);
  return dropout2->forward(linear2->forward(dropout->forward(a)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask) {
  auto self_attention = [&](const Tensor& x) {
    return dropout1->forward(std::get<0>(self_attn->forward(x, x, x, src_key_padding_mask, false, src_mask)));
  };
  if (options_.norm_first) {
    Tensor x = src + self_attention(norm1->forward(src));
    return x + feed_forward(norm2->forward(x));
  }
  const Tensor x = norm1->forward(src + self_attention(src));
  return norm2->forward(x + feed_forward(x));
}

}  // namespace tg::nn
