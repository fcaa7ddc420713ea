// The Transformer translator (Vaswani et al. 2017) at small sizes, from the nn/ layers:
//   x = dropout(sqrt(d_model) E[y] + P[pos])            (sinusoidal positions, both sides)
//   memory = TransformerEncoder(x_src, key padding = positions past src_valid_len)
//   h = TransformerDecoder(x_tgt, memory, causal mask, memory padding)
//   logits = W h + b, or h Eᵀ with the target embedding tied to the output projection
// Config: embed_size = d_model, num_hiddens = the feed-forward width, num_layers = layers in each
// stack, num_heads, norm_first (pre-LN, with a final LayerNorm on each stack; post-LN has none, as
// the paper), tie_embeddings. Embeddings are drawn with std d_model^-1/2 so the scaled ones have
// unit variance; every other matrix from xavier_uniform, as torch's nn.Transformer.
// Parameter names: encoder.{embedding,layers.N.*,norm}, decoder.{embedding,layers.N.*,norm,dense}
// with the layers' names as torch's (self_attn.in_proj_weight, multihead_attn.*, linear1, norm1...).
//
// Decoding: step() runs TransformerDecoderLayer::forward_step, so each new token costs one position
// through the stack; the layers' key/value caches live in DecoderState::cache (batch on axis 0), so
// beam search reorders them with the rest of the state. state.attention is the cross-attention of
// decoder layer config.attention_layer, averaged over heads or of head config.attention_head.
#include <cmath>
#include <limits>
#include <memory>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "models/translators/limits.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq_impl.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "nn/positional_encoding.h"
#include "nn/transformer.h"

namespace tg::models {

namespace {

// Decoder positions go up to the decoders' max_steps (limits::kMaxSteps); sources are cut to
// num_steps (the data code and encode_sources), so the encoder's table has num_steps rows.
constexpr std::int64_t kMaxPositions = limits::kMaxSteps + 1;
constexpr std::size_t kCachePerLayer = 4;  // self key, self value, memory key, memory value
constexpr std::size_t kSharedPerLayer = 8;  // TransformerDecoderLayerCache's projection weights and biases

nn::TransformerLayerOptions layer_options(const ModelConfig& c, const std::shared_ptr<Generator>& masks) {
  return {.d_model = c.embed_size,
          .nhead = c.num_heads,
          .dim_feedforward = c.num_hiddens,
          .dropout = c.dropout,
          .activation = nn::TransformerActivation::relu,
          .layer_norm_eps = 1e-5,
          .batch_first = true,
          .norm_first = c.norm_first,
          .generator = masks};
}

nn::Embedding scaled_embedding(std::int64_t vocab, std::int64_t d, Generator& gen) {
  auto e = nn::Embedding(vocab, d, gen);
  nn::init::normal_(e->weight, gen, 0.0, 1.0 / std::sqrt(static_cast<double>(d)));
  return e;
}

class TfmEncoder : public nn::Module {
 public:
  TfmEncoder(const ModelConfig& c, Generator& gen, const std::shared_ptr<Generator>& masks) {
    embedding = register_module("embedding", scaled_embedding(c.src_vocab, c.embed_size, gen));
    positions = register_module("positions", nn::SinusoidalPositionalEncoding({.d_model = c.embed_size,
                                                                               .max_len = c.num_steps,
                                                                               .dropout = c.dropout,
                                                                               .batch_first = true,
                                                                               .generator = masks}));
    auto norm = c.norm_first ? nn::LayerNorm(c.embed_size) : nullptr;
    stack = nn::TransformerEncoder(nn::TransformerEncoderLayer(layer_options(c, masks), gen), c.num_layers, norm);
    // The stack's children directly under "encoder" (encoder.layers.0..., encoder.norm).
    register_module("layers", stack->layers);
    if (norm) register_module("norm", norm);
  }
  std::string name() const override { return "TransformerEncoder"; }
  nn::Embedding embedding{nullptr};
  nn::SinusoidalPositionalEncoding positions{nullptr};
  nn::TransformerEncoder stack{nullptr};
};

class TfmDecoder : public nn::Module {
 public:
  TfmDecoder(const ModelConfig& c, Generator& gen, const std::shared_ptr<Generator>& masks) {
    embedding = register_module("embedding", scaled_embedding(c.tgt_vocab, c.embed_size, gen));
    positions = register_module("positions", nn::SinusoidalPositionalEncoding({.d_model = c.embed_size,
                                                                               .max_len = kMaxPositions,
                                                                               .dropout = c.dropout,
                                                                               .batch_first = true,
                                                                               .generator = masks}));
    auto final_norm = c.norm_first ? nn::LayerNorm(c.embed_size) : nullptr;
    stack = nn::TransformerDecoder(nn::TransformerDecoderLayer(layer_options(c, masks), gen), c.num_layers, final_norm);
    register_module("layers", stack->layers);
    if (final_norm) norm = register_module("norm", final_norm);
    if (!c.tie_embeddings) dense = register_module("dense", nn::Linear(c.embed_size, c.tgt_vocab, gen));
  }
  std::string name() const override { return "TransformerDecoder"; }

  /// (..., d_model) -> logits (..., V).
  Tensor readout(const Tensor& h) const { return dense ? dense->forward(h) : linear(h, embedding->weight); }

  nn::Embedding embedding{nullptr};
  nn::SinusoidalPositionalEncoding positions{nullptr};
  nn::TransformerDecoder stack{nullptr};
  nn::LayerNorm norm{nullptr};
  nn::Linear dense{nullptr};
};

class TransformerTranslator : public Seq2Seq {
 public:
  TransformerTranslator(const ModelConfig& c, Generator& gen)
      : Seq2Seq(c), dropout_gen_(std::make_shared<Generator>(gen.next_u64())) {
    encoder = register_module("encoder", std::make_shared<TfmEncoder>(c, gen, dropout_gen_));
    decoder = register_module("decoder", std::make_shared<TfmDecoder>(c, gen, dropout_gen_));
    // The stacks' layers start as clones of one layer: re-draw every matrix (torch's nn.Transformer).
    for (auto* stack : {static_cast<nn::Module*>(encoder->stack->layers.get()),
                        static_cast<nn::Module*>(decoder->stack->layers.get())})
      for (const Tensor& p : stack->parameters())
        if (p.dim() > 1) nn::init::xavier_uniform_(p, gen);
    attention_layer_ = c.attention_layer < 0 ? c.num_layers + c.attention_layer : c.attention_layer;
  }
  std::string name() const override { return "Transformer"; }

  DecoderState begin(const Tensor& src, const Tensor& src_valid_len) override {
    DecoderState state;
    state.valid_len = src_valid_len;
    state.memory = encode(src, src_valid_len);
    state.cache.resize(kCachePerLayer * static_cast<std::size_t>(config_.num_layers));  // filled by step()
    state.shared.resize(kSharedPerLayer * static_cast<std::size_t>(config_.num_layers));
    return state;
  }

  Tensor step(const Tensor& y_prev, DecoderState& state) override {
    const auto L = static_cast<std::size_t>(config_.num_layers);
    if (state.cache.size() != kCachePerLayer * L || state.shared.size() != kSharedPerLayer * L)
      throw std::invalid_argument("transformer step: the state holds " + std::to_string(state.cache.size()) + " + " +
                                  std::to_string(state.shared.size()) + " cache tensors, expected " +
                                  std::to_string(kCachePerLayer * L) + " + " + std::to_string(kSharedPerLayer * L));
    const std::int64_t t = state.cache[0].defined() ? state.cache[0].size(2) : 0;  // positions decoded so far
    Tensor x = embed_target(unsqueeze(y_prev, 1), t);  // (B, 1, d)
    const Tensor pad = padding_mask(state.valid_len, state.memory.size(1), x.dtype());
    Tensor weights;
    for (std::size_t i = 0; i < L; ++i) {
      Tensor* slot = &state.cache[kCachePerLayer * i];
      Tensor* fixed = &state.shared[kSharedPerLayer * i];
      nn::TransformerDecoderLayerCache cache{.self_key = slot[0], .self_value = slot[1], .memory_key = slot[2],
                                             .memory_value = slot[3],
                                             .projection_weights = {fixed[0], fixed[1], fixed[2], fixed[3]},
                                             .projection_biases = {fixed[4], fixed[5], fixed[6], fixed[7]}};
      x = decoder->stack->layer(static_cast<std::int64_t>(i))
              ->forward_step(x, state.memory, cache, pad,
                             static_cast<std::int64_t>(i) == attention_layer_ ? &weights : nullptr);
      slot[0] = std::move(cache.self_key), slot[1] = std::move(cache.self_value);
      slot[2] = std::move(cache.memory_key), slot[3] = std::move(cache.memory_value);
      for (std::size_t j = 0; j < 4; ++j)
        fixed[j] = std::move(cache.projection_weights[j]), fixed[4 + j] = std::move(cache.projection_biases[j]);
    }
    if (decoder->norm) x = decoder->norm->forward(x);
    state.attention = squeeze(pick_heads(weights), 1);  // (B, S)
    return decoder->readout(squeeze(x, 1));
  }

  Tensor forward(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, Tensor* attention) override {
    return decoder->readout(decode_all(src, src_valid_len, dec_input, attention));
  }

  Tensor loss(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, const Tensor& tgt,
              const Tensor& tgt_valid_len, double label_smoothing) override {
    const std::int64_t B = src.size(0), S = src.size(1), T = dec_input.size(1);
    if (!(tgt.shape() == Shape{B, T}) || !(tgt_valid_len.shape() == Shape{B}) || !(src_valid_len.shape() == Shape{B}))
      throw std::invalid_argument("transformer loss: tgt " + tgt.shape().str() + ", tgt_valid_len " +
                                  tgt_valid_len.shape().str() + " and src_valid_len " + src_valid_len.shape().str() +
                                  " do not match src " + src.shape().str() + " and dec_input " + dec_input.shape().str());
    // Only the tokens go through the stacks' position-wise layers; the attention masks keep every
    // token from seeing padding, so the loss is decode_all's at the valid positions.
    const nn::PackedTokens src_tokens(clamped_lengths(src_valid_len, S), S), tgt_tokens(clamped_lengths(tgt_valid_len, T), T);
    const Tensor pad = padding_mask(src_valid_len, S, decoder->embedding->weight.dtype());
    Tensor memory = src_tokens.pack(encoder->positions->forward(encoder->embedding->forward(src) * scale()));
    for (std::int64_t i = 0; i < config_.num_layers; ++i)
      memory = encoder->stack->layer(i)->forward_packed(memory, src_tokens, Tensor(), pad);
    if (encoder->stack->norm) memory = encoder->stack->norm->forward(memory);
    Tensor x = tgt_tokens.pack(embed_target(dec_input, 0));
    const Tensor causal = causal_mask(T, x.dtype());
    for (std::int64_t i = 0; i < config_.num_layers; ++i)
      x = decoder->stack->layer(i)->forward_packed(x, tgt_tokens, memory, src_tokens, causal, Tensor(), Tensor(), pad);
    if (decoder->norm) x = decoder->norm->forward(x);
    const auto readout = [this](const Tensor& h) { return decoder->readout(h); };
    return loss_at_rows(x, tgt, tgt_tokens.index(), readout, label_smoothing);
  }

  std::shared_ptr<TfmEncoder> encoder;
  std::shared_ptr<TfmDecoder> decoder;

 private:
  double scale() const { return std::sqrt(static_cast<double>(config_.embed_size)); }

  Tensor embed_target(const Tensor& ids, std::int64_t start) {
    return decoder->positions->forward(decoder->embedding->forward(ids) * scale(), start);
  }

  // Source positions at or past valid_len may not be attended: an additive float mask (B, S) with a
  // large finite negative (a fully padded row stays finite).
  static Tensor padding_mask(const Tensor& valid_len, std::int64_t S, DType dtype) {
    const std::int64_t B = valid_len.numel();
    Tensor m = Tensor::zeros({B, S}, dtype);
    const std::int64_t* len = valid_len.data<std::int64_t>();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t s = std::max<std::int64_t>(len[b], 0); s < S; ++s) {
        if (dtype == DType::f64) m.data<double>()[b * S + s] = -1e9;
        else m.data<float>()[b * S + s] = -1e9f;
      }
    return m;
  }

  // (T, T) additive mask: position i may attend to j <= i only (filled here, not through
  // generate_square_subsequent_mask's std::vector, so a training step allocates nothing).
  static Tensor causal_mask(std::int64_t T, DType dtype) {
    Tensor m = Tensor::zeros({T, T}, dtype);
    for (std::int64_t i = 0; i < T; ++i)
      for (std::int64_t j = i + 1; j < T; ++j) {
        if (dtype == DType::f64) m.data<double>()[i * T + j] = -1e9;
        else m.data<float>()[i * T + j] = -1e9f;
      }
    return m;
  }

  Tensor encode(const Tensor& src, const Tensor& src_valid_len) {
    const Tensor x = encoder->positions->forward(encoder->embedding->forward(src) * scale());
    return encoder->stack->forward(x, Tensor(), padding_mask(src_valid_len, src.size(1), x.dtype()));
  }

  // Per-head weights (B, H, T, S) -> (B, T, S): the mean over heads or the configured head.
  Tensor pick_heads(const Tensor& w) const {
    if (config_.attention_head < 0) return mean(w, {1});
    return squeeze(narrow(w, 1, config_.attention_head, 1), 1);
  }

  // The decoder's last hidden states (B, T, d) under teacher forcing.
  Tensor decode_all(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, Tensor* attention) {
    const Tensor memory = encode(src, src_valid_len);
    Tensor x = embed_target(dec_input, 0);
    const Tensor causal = causal_mask(dec_input.size(1), x.dtype());
    const Tensor pad = padding_mask(src_valid_len, src.size(1), x.dtype());
    Tensor weights;
    for (std::int64_t i = 0; i < config_.num_layers; ++i)
      x = decoder->stack->layer(i)->forward(x, memory, causal, Tensor(), Tensor(), pad,
                                            attention && i == attention_layer_ ? &weights : nullptr);
    if (attention) *attention = pick_heads(weights);
    return decoder->norm ? decoder->norm->forward(x) : x;
  }

  std::shared_ptr<Generator> dropout_gen_;
  std::int64_t attention_layer_ = 0;
};

}  // namespace

const ModelSpec& transformer_model_spec() {
  static const ModelSpec spec{
      .name = "transformer",
      .description = "Vaswani et al.'s Transformer: sinusoidal positions, multi-head self- and cross-attention "
                     "stacks (num_layers each), feed-forward width num_hiddens",
      .make = [](const ModelConfig& c, Generator& gen) -> std::shared_ptr<Seq2Seq> {
        return std::make_shared<TransformerTranslator>(c, gen);
      },
      .validate =
          [](const ModelConfig& c) {
            if (c.embedding_dropout != 0 || c.readout_dropout != 0)
              throw std::invalid_argument("embedding_dropout and readout_dropout apply to rnnsearch and rnnencdec only "
                                          "(the transformer's dropout is on its embeddings and every sublayer)");
            if (c.embed_size % c.num_heads != 0)
              throw std::invalid_argument("transformer: embed_size (d_model) = " + std::to_string(c.embed_size) +
                                          " is not a multiple of num_heads = " + std::to_string(c.num_heads));
            if (c.attention_layer < -c.num_layers || c.attention_layer >= c.num_layers)
              throw std::invalid_argument("transformer: attention_layer = " + std::to_string(c.attention_layer) +
                                          " is not a decoder layer (num_layers = " + std::to_string(c.num_layers) +
                                          "; -1 = the last)");
            if (c.attention_head >= c.num_heads)
              throw std::invalid_argument("transformer: attention_head = " + std::to_string(c.attention_head) +
                                          " is not a head (num_heads = " + std::to_string(c.num_heads) +
                                          "; -1 = the mean over heads)");
            if (c.ablation != Ablation::none)
              throw std::invalid_argument("transformer: ablation is an rnnsearch option (must be none)");
          },
      .default_num_layers = 2,
      .num_parameters =
          [](const ModelConfig& c) {
            const std::int64_t d = c.embed_size, F = c.num_hiddens;
            auto attention = [&](ParameterCount& n) {  // in_proj (3d x d + 3d) and out_proj
              n.linear(d, ParameterCount::mul(3, d)).linear(d, d);
            };
            auto norm = [&](ParameterCount& n) { n.layer_norm(d); };
            ParameterCount n;
            n.embedding(c.src_vocab, d);
            for (std::int64_t l = 0; l < c.num_layers; ++l) {
              attention(n);
              n.linear(d, F).linear(F, d);
              norm(n), norm(n);
            }
            if (c.norm_first) norm(n);
            n.embedding(c.tgt_vocab, d);
            for (std::int64_t l = 0; l < c.num_layers; ++l) {
              attention(n), attention(n);
              n.linear(d, F).linear(F, d);
              norm(n), norm(n), norm(n);
            }
            if (c.norm_first) norm(n);
            if (!c.tie_embeddings) n.linear(d, c.tgt_vocab);
            return n.total();
          },
  };
  return spec;
}

}  // namespace tg::models
