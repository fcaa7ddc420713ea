#include "nn/transformer.h"

#include <limits>
#include <stdexcept>
#include <utility>

#include "autograd/autocast.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "nn/init.h"

namespace tg::nn {

Tensor TransformerActivationFn::operator()(const Tensor& x) const {
  if (fn_) return fn_(x);
  switch (kind_) {
    case TransformerActivation::relu: return relu(x);
    case TransformerActivation::gelu: return gelu(x);
    case TransformerActivation::gelu_tanh: return gelu(x, GeluApproximate::tanh);
    case TransformerActivation::silu: return silu(x);
    case TransformerActivation::tanh: return tg::tanh(x);
    case TransformerActivation::sigmoid: return sigmoid(x);
  }
  throw std::logic_error("internal error in TransformerActivationFn: unknown activation");
}

std::string TransformerActivationFn::str() const {
  if (fn_) return "<callable>";
  switch (kind_) {
    case TransformerActivation::relu: return "relu";
    case TransformerActivation::gelu: return "gelu";
    case TransformerActivation::gelu_tanh: return "gelu_tanh";
    case TransformerActivation::silu: return "silu";
    case TransformerActivation::tanh: return "tanh";
    case TransformerActivation::sigmoid: return "sigmoid";
  }
  return "?";
}

namespace {

void check_layer_options(const TransformerLayerOptions& options, const char* layer) {
  if (options.dim_feedforward <= 0)
    throw std::invalid_argument(std::string(layer) + ": dim_feedforward must be positive, got " +
                                std::to_string(options.dim_feedforward));
}

MultiheadAttention make_attention(const TransformerLayerOptions& options, const std::shared_ptr<Generator>& masks,
                                  Generator& gen) {
  return MultiheadAttention(MultiheadAttentionOptions{.embed_dim = options.d_model,
                                                      .num_heads = options.nhead,
                                                      .dropout = options.dropout,
                                                      .batch_first = options.batch_first,
                                                      .generator = masks},
                            gen);
}

std::string layer_repr(const TransformerLayerOptions& options) {
  return "d_model=" + std::to_string(options.d_model) + ", nhead=" + std::to_string(options.nhead) +
         ", dim_feedforward=" + std::to_string(options.dim_feedforward) +
         ", activation=" + options.activation.str() +
         (options.norm_first ? ", norm_first=true" : "");
}

Tensor activate(const Tensor& x, const TransformerActivationFn& activation) { return activation(x); }

/// copy.deepcopy of a layer: built anew from its options (the scratch generator's values are
/// overwritten), then its parameters, their requires_grad and the training mode copied.
template <class Layer>
std::shared_ptr<Layer> clone_layer(const Layer& layer, const char* what) {
  Generator scratch(0);
  auto copy = std::make_shared<Layer>(layer.options(), scratch);
  const NamedTensors from = layer.named_parameters();
  if (!from.empty()) copy->to(from.front().second.dtype());
  copy->load_state_dict(from, what);
  const NamedTensors to = copy->named_parameters();
  for (std::size_t i = 0; i < to.size(); ++i) {
    Tensor p = to[i].second;
    p.requires_grad_(from[i].second.requires_grad());
  }
  copy->train(layer.is_training());
  return copy;
}

// ---- incremental attention (forward_step), from MultiheadAttention's public parameters ----------

/// x (N, T, E) -> (N, H, T, D): the query (part 0), key (1) or value (2) projection of `mha`, its
/// rows of the in-projection kept in `weight` and `bias` (cut on the first call). They are views of
/// the parameters' buffers (split along axis 0), not copies, marked cacheable: under autocast their
/// bf16 copies come from the weight cache, renewed when the parameter changes, and outlive the decode
/// as the parameter's own copy does (a batch-1 product then reads half the bytes of float32).
Tensor project_heads(const MultiheadAttentionImpl& mha, const Tensor& x, int part, Tensor& weight, Tensor& bias) {
  const std::int64_t E = mha.options().embed_dim, H = mha.options().num_heads;
  if (!weight.defined()) {
    weight = split(mha.in_proj_weight, E, 0)[part];
    autocast::mark_cacheable(weight);
    if (mha.in_proj_bias.defined()) bias = split(mha.in_proj_bias, E, 0)[part];
  }
  return permute(reshape(linear(x, weight, bias), Shape{x.size(0), x.size(1), H, E / H}), {0, 2, 1, 3});
}
Tensor project_heads(const MultiheadAttentionImpl& mha, const Tensor& x, int part) {
  Tensor weight, bias;
  return project_heads(mha, x, part, weight, bias);
}

/// attended (N, H, T, D) -> out_proj of (N, T, E).
Tensor merge_heads(const MultiheadAttentionImpl& mha, const Tensor& attended) {
  const Tensor a = permute(attended, {0, 2, 1, 3});
  return mha.out_proj->forward(reshape(a, Shape{a.size(0), a.size(1), mha.options().embed_dim}));
}

}  // namespace

// ---- TransformerEncoderLayer -------------------------------------------------------------------

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options, Generator& gen)
    : options_(options) {
  check_layer_options(options, "TransformerEncoderLayer");
  auto masks = options.generator ? options.generator : std::make_shared<Generator>(0);
  options_.generator = masks;  // clones share it
  self_attn = register_module("self_attn", make_attention(options, masks, gen));
  linear1 = register_module("linear1", Linear(options.d_model, options.dim_feedforward, gen));
  dropout = register_module("dropout", Dropout(options.dropout, masks));
  linear2 = register_module("linear2", Linear(options.dim_feedforward, options.d_model, gen));
  norm1 = register_module("norm1", LayerNorm(options.d_model, options.layer_norm_eps));
  norm2 = register_module("norm2", LayerNorm(options.d_model, options.layer_norm_eps));
  dropout1 = register_module("dropout1", Dropout(options.dropout, masks));
  dropout2 = register_module("dropout2", Dropout(options.dropout, masks));
}

std::string TransformerEncoderLayerImpl::extra_repr() const { return layer_repr(options_); }

TransformerEncoderLayer TransformerEncoderLayerImpl::clone() const {
  return clone_layer(*this, "TransformerEncoderLayer::clone");
}

Tensor TransformerEncoderLayerImpl::feed_forward(const Tensor& x) {
  const Tensor a = activate(linear1->forward(x), options_.activation);
  return dropout2->forward(linear2->forward(dropout->forward(a)));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const Tensor& src_mask,
                                            const Tensor& src_key_padding_mask) {
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

Tensor TransformerEncoderLayerImpl::forward_packed(const Tensor& src, const PackedTokens& tokens,
                                                   const Tensor& src_mask, const Tensor& src_key_padding_mask) {
  auto self_attention = [&](const Tensor& x) {
    return dropout1->forward(self_attn->forward_packed(x, tokens, x, x, tokens, src_key_padding_mask, src_mask));
  };
  if (options_.norm_first) {
    Tensor x = src + self_attention(norm1->forward(src));
    return x + feed_forward(norm2->forward(x));
  }
  const Tensor x = norm1->forward(src + self_attention(src));
  return norm2->forward(x + feed_forward(x));
}

// ---- TransformerDecoderLayer -------------------------------------------------------------------

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& options, Generator& gen)
    : options_(options) {
  check_layer_options(options, "TransformerDecoderLayer");
  auto masks = options.generator ? options.generator : std::make_shared<Generator>(0);
  options_.generator = masks;
  self_attn = register_module("self_attn", make_attention(options, masks, gen));
  multihead_attn = register_module("multihead_attn", make_attention(options, masks, gen));
  linear1 = register_module("linear1", Linear(options.d_model, options.dim_feedforward, gen));
  dropout = register_module("dropout", Dropout(options.dropout, masks));
  linear2 = register_module("linear2", Linear(options.dim_feedforward, options.d_model, gen));
  norm1 = register_module("norm1", LayerNorm(options.d_model, options.layer_norm_eps));
  norm2 = register_module("norm2", LayerNorm(options.d_model, options.layer_norm_eps));
  norm3 = register_module("norm3", LayerNorm(options.d_model, options.layer_norm_eps));
  dropout1 = register_module("dropout1", Dropout(options.dropout, masks));
  dropout2 = register_module("dropout2", Dropout(options.dropout, masks));
  dropout3 = register_module("dropout3", Dropout(options.dropout, masks));
}

std::string TransformerDecoderLayerImpl::extra_repr() const { return layer_repr(options_); }

TransformerDecoderLayer TransformerDecoderLayerImpl::clone() const {
  return clone_layer(*this, "TransformerDecoderLayer::clone");
}

Tensor TransformerDecoderLayerImpl::feed_forward(const Tensor& x) {
  const Tensor a = activate(linear1->forward(x), options_.activation);
  return dropout3->forward(linear2->forward(dropout->forward(a)));
}

template <class SelfBlock, class CrossBlock>
Tensor TransformerDecoderLayerImpl::residual_blocks(Tensor x, const SelfBlock& self_block,
                                                    const CrossBlock& cross_block) {
  if (options_.norm_first) {
    x = x + self_block(norm1->forward(x));
    x = x + cross_block(norm2->forward(x));
    return x + feed_forward(norm3->forward(x));
  }
  x = norm1->forward(x + self_block(x));
  x = norm2->forward(x + cross_block(x));
  return norm3->forward(x + feed_forward(x));
}

Tensor TransformerDecoderLayerImpl::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                            const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                            const Tensor& memory_key_padding_mask, Tensor* memory_weights) {
  auto self_block = [&](const Tensor& x) {
    return dropout1->forward(std::get<0>(self_attn->forward(x, x, x, tgt_key_padding_mask, false, tgt_mask)));
  };
  auto cross_block = [&](const Tensor& x) {
    auto [out, weights] = multihead_attn->forward(x, memory, memory, memory_key_padding_mask, memory_weights != nullptr,
                                                  memory_mask, /*average_attn_weights=*/false);
    if (memory_weights) *memory_weights = weights;
    return dropout2->forward(out);
  };
  return residual_blocks(tgt, self_block, cross_block);
}

Tensor TransformerDecoderLayerImpl::forward_packed(const Tensor& tgt, const PackedTokens& tgt_tokens,
                                                   const Tensor& memory, const PackedTokens& memory_tokens,
                                                   const Tensor& tgt_mask, const Tensor& memory_mask,
                                                   const Tensor& tgt_key_padding_mask,
                                                   const Tensor& memory_key_padding_mask) {
  auto self_block = [&](const Tensor& x) {
    return dropout1->forward(self_attn->forward_packed(x, tgt_tokens, x, x, tgt_tokens, tgt_key_padding_mask, tgt_mask));
  };
  auto cross_block = [&](const Tensor& x) {
    return dropout2->forward(
        multihead_attn->forward_packed(x, tgt_tokens, memory, memory, memory_tokens, memory_key_padding_mask, memory_mask));
  };
  return residual_blocks(tgt, self_block, cross_block);
}

Tensor TransformerDecoderLayerImpl::forward_step(const Tensor& tgt, const Tensor& memory,
                                                 TransformerDecoderLayerCache& cache,
                                                 const Tensor& memory_key_padding_mask, Tensor* memory_weights) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("TransformerDecoderLayer::forward_step: " + why + ": tgt " + tgt.shape().str() +
                                ", memory " + memory.shape().str());
  };
  if (is_training() && options_.dropout > 0)
    fail("no attention dropout in incremental decoding; call eval() (or train with forward())");
  const std::int64_t E = options_.d_model;
  if (tgt.dim() != 3 || memory.dim() != 3 || tgt.size(2) != E || memory.size(2) != E)
    fail("tgt and memory must be batched with d_model = " + std::to_string(E) + " features");
  const bool bf = options_.batch_first;
  const Tensor x0 = bf ? tgt : transpose(tgt, 0, 1), mem = bf ? memory : transpose(memory, 0, 1);  // (N, T, E)
  const std::int64_t N = x0.size(0), T_new = x0.size(1), S = mem.size(1);
  if (mem.size(0) != N) fail("batch sizes differ");
  if (cache.self_key.defined() && cache.self_key.size(0) != N) fail("the cache holds another batch size");
  if (cache.memory_key.defined() && cache.memory_key.size(2) != S) fail("the cache holds another memory");

  auto self_block = [&](const Tensor& h) {
    auto project = [&](int part) {
      return project_heads(*self_attn, h, part, cache.projection_weights[part], cache.projection_biases[part]);
    };
    Tensor k = project(1), v = project(2);
    const std::int64_t T0 = cache.length();
    if (T0 > 0) {
      k = concat({cache.self_key, k}, 2);
      v = concat({cache.self_value, v}, 2);
    }
    cache.self_key = k;
    cache.self_value = v;
    // scaled_dot_product_attention's i64 mask: nonzero = may attend; new row i sees T0 + i and before.
    const Tensor allowed = T_new > 1 ? tril(Tensor::ones({T_new, T0 + T_new}, DType::i64), T0) : Tensor();
    return dropout1->forward(
        merge_heads(*self_attn, scaled_dot_product_attention(project(0), k, v, allowed)));
  };
  auto cross_block = [&](const Tensor& h) {
    if (!cache.memory_key.defined()) {
      cache.memory_key = project_heads(*multihead_attn, mem, 1);
      cache.memory_value = project_heads(*multihead_attn, mem, 2);
    }
    Tensor mask;
    if (memory_key_padding_mask.defined()) {
      if (!(memory_key_padding_mask.shape() == Shape{N, S}))
        fail("memory_key_padding_mask must be (N, S), got " + memory_key_padding_mask.shape().str());
      mask = reshape(additive_mask(memory_key_padding_mask, h.dtype()), Shape{N, 1, 1, S});
    }
    const Tensor q = project_heads(*multihead_attn, h, 0, cache.projection_weights[3], cache.projection_biases[3]);
    return dropout2->forward(merge_heads(
        *multihead_attn, scaled_dot_product_attention(q, cache.memory_key, cache.memory_value, mask, 0.0,
                                                        false, 0.0, nullptr, memory_weights)));
  };
  const Tensor x = residual_blocks(x0, self_block, cross_block);
  return bf ? x : transpose(x, 0, 1);
}

// ---- stacks ------------------------------------------------------------------------------------

namespace {

void check_num_layers(std::int64_t num_layers, const char* stack) {
  if (num_layers <= 0)
    throw std::invalid_argument(std::string(stack) + ": num_layers must be positive, got " + std::to_string(num_layers));
}

}  // namespace

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerEncoderLayer& encoder_layer, std::int64_t num_layers,
                                               LayerNorm final_norm) {
  check_num_layers(num_layers, "TransformerEncoder");
  layers = register_module("layers", ModuleList());
  for (std::int64_t i = 0; i < num_layers; ++i) layers_.push_back(layers->push_back(encoder_layer->clone()));
  if (final_norm) norm = register_module("norm", std::move(final_norm));
}

Tensor TransformerEncoderImpl::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask) {
  Tensor x = src;
  for (const auto& layer : layers_) x = layer->forward(x, mask, src_key_padding_mask);
  return norm ? norm->forward(x) : x;
}

TransformerDecoderImpl::TransformerDecoderImpl(const TransformerDecoderLayer& decoder_layer, std::int64_t num_layers,
                                               LayerNorm final_norm) {
  check_num_layers(num_layers, "TransformerDecoder");
  layers = register_module("layers", ModuleList());
  for (std::int64_t i = 0; i < num_layers; ++i) layers_.push_back(layers->push_back(decoder_layer->clone()));
  if (final_norm) norm = register_module("norm", std::move(final_norm));
}

Tensor TransformerDecoderImpl::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                       const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                       const Tensor& memory_key_padding_mask) {
  Tensor x = tgt;
  for (const auto& layer : layers_)
    x = layer->forward(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask);
  return norm ? norm->forward(x) : x;
}

Tensor TransformerDecoderImpl::forward_step(const Tensor& tgt, const Tensor& memory, TransformerDecoderCache& cache,
                                            const Tensor& memory_key_padding_mask) {
  if (cache.layers.empty()) cache.layers.resize(layers_.size());
  if (cache.layers.size() != layers_.size())
    throw std::invalid_argument("TransformerDecoder::forward_step: the cache has " + std::to_string(cache.layers.size()) +
                                " layers, the decoder " + std::to_string(layers_.size()));
  Tensor x = tgt;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    x = layers_[i]->forward_step(x, memory, cache.layers[i], memory_key_padding_mask);
  return norm ? norm->forward(x) : x;
}

// ---- Transformer -------------------------------------------------------------------------------

TransformerImpl::TransformerImpl(const TransformerOptions& options, Generator& gen) : options_(options) {
  const TransformerLayerOptions layer{.d_model = options.d_model,
                                      .nhead = options.nhead,
                                      .dim_feedforward = options.dim_feedforward,
                                      .dropout = options.dropout,
                                      .activation = options.activation,
                                      .layer_norm_eps = options.layer_norm_eps,
                                      .batch_first = options.batch_first,
                                      .norm_first = options.norm_first,
                                      .generator = options.generator ? options.generator
                                                                     : std::make_shared<Generator>(0)};
  encoder = register_module("encoder",
                            TransformerEncoder(TransformerEncoderLayer(layer, gen), options.num_encoder_layers,
                                               LayerNorm(options.d_model, options.layer_norm_eps)));
  decoder = register_module("decoder",
                            TransformerDecoder(TransformerDecoderLayer(layer, gen), options.num_decoder_layers,
                                               LayerNorm(options.d_model, options.layer_norm_eps)));
  for (const Tensor& p : parameters())
    if (p.dim() > 1) init::xavier_uniform_(p, gen);
}

std::string TransformerImpl::extra_repr() const {
  return "d_model=" + std::to_string(options_.d_model) + ", nhead=" + std::to_string(options_.nhead) +
         ", num_encoder_layers=" + std::to_string(options_.num_encoder_layers) +
         ", num_decoder_layers=" + std::to_string(options_.num_decoder_layers) +
         (options_.norm_first ? ", norm_first=true" : "") + (options_.batch_first ? ", batch_first=true" : "");
}

Tensor TransformerImpl::forward(const Tensor& src, const Tensor& tgt, const TransformerMasks& masks) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("Transformer: " + why + ": src " + src.shape().str() + ", tgt " + tgt.shape().str());
  };
  if (src.dim() != tgt.dim() || (src.dim() != 2 && src.dim() != 3)) fail("src and tgt must both be batched or unbatched");
  const int batch_axis = options_.batch_first ? 0 : 1;
  if (src.dim() == 3 && src.size(batch_axis) != tgt.size(batch_axis)) fail("the batch sizes of src and tgt differ");
  if (src.size(-1) != options_.d_model || tgt.size(-1) != options_.d_model)
    fail("the feature sizes of src and tgt must be d_model = " + std::to_string(options_.d_model));
  const Tensor memory = encoder->forward(src, masks.src_mask, masks.src_key_padding_mask);
  return decoder->forward(tgt, memory, masks.tgt_mask, masks.memory_mask, masks.tgt_key_padding_mask,
                          masks.memory_key_padding_mask);
}

Tensor TransformerImpl::generate_square_subsequent_mask(std::int64_t sz, DType dtype) {
  if (sz < 0) throw std::invalid_argument("Transformer::generate_square_subsequent_mask: sz must be >= 0, got " + std::to_string(sz));
  std::vector<double> values(static_cast<std::size_t>(sz * sz), 0.0);
  for (std::int64_t i = 0; i < sz; ++i)
    for (std::int64_t j = i + 1; j < sz; ++j) values[i * sz + j] = -std::numeric_limits<double>::infinity();
  return Tensor::from_values(values, {sz, sz}, dtype);
}

}  // namespace tg::nn
