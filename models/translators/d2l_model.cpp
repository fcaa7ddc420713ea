// d2l's "Bahdanau Attention" model (Seq2SeqEncoder + Seq2SeqAttentionDecoder), with the parameter
// names of the PyTorch EncoderDecoder so checkpoints cross between the two.
//
// Encoder: Embedding -> multi-layer GRU over every position (padding included, as in d2l, so the
// outputs equal PyTorch's). Decoder step: query = last layer's previous hidden state; context =
// AdditiveAttention over the encoder outputs (masked by source valid lengths); GRU input =
// [context ; embedding(y_prev)]; dense maps the GRU output to the vocabulary. The only
// departure from d2l's code is that W_k·keys is computed once per sentence instead of every step
// (same values, less work).
#include <memory>

#include "autograd/memory.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq_impl.h"
#include "nn/attention.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/rnn.h"

namespace tg::models {

namespace {

class D2lEncoder : public nn::Module {
 public:
  D2lEncoder(const ModelConfig& c, Generator& gen, const std::shared_ptr<Generator>& dropout_gen) {
    embedding = register_module("embedding", nn::Embedding(c.src_vocab, c.embed_size, gen));
    rnn = register_module("rnn", nn::GRU(nn::GRUOptions(c.embed_size, c.num_hiddens)
                                             .num_layers(c.num_layers)
                                             .dropout(c.dropout)
                                             .generator(dropout_gen),
                                         gen));
  }
  std::string name() const override { return "Seq2SeqEncoder"; }
  nn::Embedding embedding{nullptr};
  nn::GRU rnn{nullptr};
};

class D2lDecoder : public nn::Module {
 public:
  D2lDecoder(const ModelConfig& c, Generator& gen, const std::shared_ptr<Generator>& dropout_gen) {
    const std::int64_t H = c.num_hiddens;
    attention = register_module(
        "attention",
        nn::AdditiveAttention(nn::AdditiveAttentionOptions(H, H, H).dropout(c.dropout).generator(dropout_gen), gen));
    embedding = register_module("embedding", nn::Embedding(c.tgt_vocab, c.embed_size, gen));
    rnn = register_module("rnn", nn::GRU(nn::GRUOptions(c.embed_size + c.num_hiddens, c.num_hiddens)
                                             .num_layers(c.num_layers)
                                             .dropout(c.dropout)
                                             .generator(dropout_gen),
                                         gen));
    dense = register_module("dense", nn::Linear(c.num_hiddens, c.tgt_vocab, gen));
  }
  std::string name() const override { return "Seq2SeqAttentionDecoder"; }
  nn::AdditiveAttention attention{nullptr};
  nn::Embedding embedding{nullptr};
  nn::GRU rnn{nullptr};
  nn::Linear dense{nullptr};
};

class D2lSeq2Seq : public Seq2Seq {
 public:
  D2lSeq2Seq(const ModelConfig& c, Generator& gen)
      : Seq2Seq(c), dropout_gen_(std::make_shared<Generator>(gen.next_u64())) {
    encoder = register_module("encoder", std::make_shared<D2lEncoder>(c, gen, dropout_gen_));
    decoder = register_module("decoder", std::make_shared<D2lDecoder>(c, gen, dropout_gen_));
  }
  std::string name() const override { return "EncoderDecoder"; }
  // d2l's encoder GRU runs over the source pads and its final state starts the decoder; keeping
  // the full width also keeps d2l's dropout draws, so runs stay comparable with d2l's.
  bool padding_is_inert() const override { return false; }

  DecoderState begin(const Tensor& src, const Tensor& src_valid_len) override {
    // (B, S) -> (S, B, E) -> GRU -> outputs (S, B, H), state (L, B, H)
    const Tensor x = permute(encoder->embedding->forward(src), {1, 0, 2});
    auto [outputs, hidden] = encoder->rnn->forward(x);
    DecoderState state;
    state.memory = permute(outputs, {1, 0, 2});  // (B, S, H): keys and values
    state.memory_proj = decoder->attention->project_keys(state.memory);
    state.hidden = hidden;
    state.valid_len = src_valid_len;
    return state;
  }

  Tensor step(const Tensor& y_prev, DecoderState& state) override {
    const Tensor emb = decoder->embedding->forward(y_prev);  // (B, E)
    const Tensor out = advance(emb, state);                 // (B, H)
    return decoder->dense->forward(out);
  }

  Tensor forward(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, Tensor* attention) override {
    return decoder->dense->forward(decoder_outputs(src, src_valid_len, dec_input, attention));  // (B, T, V) in one product
  }

  // The dense layer only at valid target positions (same loss and gradients as d2l's masked loss
  // over all positions; a third of the positions are pads when lengths are uniform in [3, T]).
  Tensor loss(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, const Tensor& tgt,
              const Tensor& tgt_valid_len, double label_smoothing) override {
    return loss_at_valid_positions(decoder_outputs(src, src_valid_len, dec_input, nullptr), tgt, tgt_valid_len,
                                   [this](const Tensor& rows) { return decoder->dense->forward(rows); }, label_smoothing);
  }

  std::shared_ptr<D2lEncoder> encoder;
  std::shared_ptr<D2lDecoder> decoder;

 private:
  // The last GRU layer's outputs (B, T, H) under teacher forcing.
  Tensor decoder_outputs(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, Tensor* attention) {
    DecoderState state = begin(src, src_valid_len);
    const Tensor emb = decoder->embedding->forward(dec_input);  // (B, T, E), all steps at once
    PooledVector<Tensor> outputs, weights;  // pooled: a training step allocates nothing from the system
    outputs.reserve(static_cast<std::size_t>(dec_input.size(1)));
    for (std::int64_t t = 0; t < dec_input.size(1); ++t) {
      outputs.push_back(advance(squeeze(narrow(emb, 1, t, 1), 1), state));
      if (attention) weights.push_back(state.attention);
    }
    if (attention) *attention = stack(weights, 1);
    return stack(outputs, 1);
  }

  // One decoder step up to the GRU output (B, H); updates hidden and attention.
  Tensor advance(const Tensor& emb, DecoderState& state) {
    const std::int64_t L = state.hidden.size(0);
    const Tensor query = narrow(state.hidden, 0, L - 1, 1);                       // (1, B, H)
    const Tensor query_proj = decoder->attention->project_queries(permute(query, {1, 0, 2}));  // (B, 1, H)
    Tensor weights;  // taken here, not left in the module: decoding may run this on several threads
    const Tensor context = decoder->attention->forward_projected(query_proj, state.memory_proj, state.memory,
                                                                 state.valid_len, &weights);  // (B, 1, H)
    state.attention = squeeze(weights, 1);                                                      // (B, S)
    const Tensor x = concat({squeeze(context, 1), emb}, -1);                       // (B, H + E), context first
    auto [out, hidden] = decoder->rnn->forward(unsqueeze(x, 0), state.hidden);    // (1, B, H)
    state.hidden = hidden;
    return squeeze(out, 0);
  }

  std::shared_ptr<Generator> dropout_gen_;
};

}  // namespace

const ModelSpec& d2l_model_spec() {
  static const ModelSpec spec{
      .name = "d2l",
      .description = "d2l's Bahdanau-attention chapter model (PyTorch parameter names)",
      .make = [](const ModelConfig& c, Generator& gen) -> std::shared_ptr<Seq2Seq> { return std::make_shared<D2lSeq2Seq>(c, gen); },
      .validate =
          [](const ModelConfig& c) {
            if (c.attention != AttentionScore::additive)
              throw std::invalid_argument("the d2l model uses additive attention");
            if (c.ablation != Ablation::none) throw std::invalid_argument("ablations apply to rnnsearch only");
            if (c.embedding_dropout != 0 || c.readout_dropout != 0)
              throw std::invalid_argument("embedding_dropout and readout_dropout apply to rnnsearch and rnnencdec only "
                                          "(d2l's dropout is on its GRU layers and attention)");
            if (c.tie_embeddings)
              throw std::invalid_argument("tie_embeddings applies to rnnsearch, rnnencdec and transformer only (d2l's "
                                          "output layer reads its GRU state, not an embedding)");
          },
      .default_num_layers = 2,
      .num_parameters =
          [](const ModelConfig& c) {
            const std::int64_t H = c.num_hiddens, E = c.embed_size;
            ParameterCount n;
            n.embedding(c.src_vocab, E).gru(E, H, c.num_layers, 1);  // encoder
            n.additive_attention(H, H, H).embedding(c.tgt_vocab, E).gru(E + H, H, c.num_layers, 1).linear(H, c.tgt_vocab);
            return n.total();
          },
  };
  return spec;
}

}  // namespace tg::models
