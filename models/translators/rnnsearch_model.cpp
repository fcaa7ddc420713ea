// RNNsearch (Bahdanau, Cho, Bengio 2014), the paper's attention model.
//   annotations h_j = [→h_j ; ←h_j] from a bidirectional GRU masked by valid lengths
//   s_0 = tanh(W_s ←h_1)
//   e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)   (U_a h_j computed once per sentence), α = masked softmax
//   c_i = Σ_j α_ij h_j
//   s_i = GRU(s_{i-1}, [E y_{i-1} ; c_i])
//   p(y_i) from (s_i, E y_{i-1}, c_i) through the maxout deep output (or a linear readout)
// Dropout (training only): config.dropout on the attention weights; embedding_dropout on E x_j and
// E y_{i-1}; readout_dropout on the output layer's input. The last two are not in the paper.
// tie_embeddings: W_o = the target embedding E (readout.h).
// Parameter names: encoder.{embedding,rnn}, decoder.{init,attention.{W_k,W_q,w_v},embedding,rnn,
// maxout,dense (not when tied)}; the attention's W_k is U_a, W_q is W_a, w_v is v_a.
//
// Ablations (config.ablation) cut one information path of the decoder at a time:
//   zero_init          s_0 = 0 (no encoder-to-decoder state path)
//   state_only_output  the output layer sees only s_i (no c_i, no E y_{i-1} shortcut)
//   no_prev_token      y_{i-1} is used nowhere in the decoder
//   recurrence_only    s_i = f(s_{i-1}): the state sees neither c_i nor y_{i-1}
#include <cmath>
#include <memory>

#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "models/translators/readout.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq_impl.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/rnn.h"

namespace tg::models {

namespace {

class BiEncoder : public nn::Module {
 public:
  BiEncoder(const ModelConfig& c, Generator& gen) {
    embedding = register_module("embedding", nn::Embedding(c.src_vocab, c.embed_size, gen));
    rnn = register_module("rnn", nn::GRU(nn::GRUOptions(c.embed_size, c.num_hiddens).bidirectional(true), gen));
  }
  std::string name() const override { return "BidirectionalEncoder"; }
  nn::Embedding embedding{nullptr};
  nn::GRU rnn{nullptr};
};

// The decoder GRU's input and the readout's input sizes under each ablation.
std::int64_t rnn_input_size(const ModelConfig& c) {
  const std::int64_t H = c.num_hiddens, E = c.embed_size, D = 2 * H;
  return c.ablation == Ablation::recurrence_only ? 1 : c.ablation == Ablation::no_prev_token ? D : E + D;
}
std::int64_t readout_input_size(const ModelConfig& c) {
  const std::int64_t H = c.num_hiddens, E = c.embed_size, D = 2 * H;
  return c.ablation == Ablation::state_only_output ? H : c.ablation == Ablation::no_prev_token ? H + D : H + E + D;
}

class RnnSearchDecoder : public nn::Module {
 public:
  RnnSearchDecoder(const ModelConfig& c, Generator& gen, const std::shared_ptr<Generator>& dropout_gen)
      : ablation_(c.ablation), score_(c.attention) {
    const std::int64_t H = c.num_hiddens, E = c.embed_size, D = 2 * H;
    init = register_module("init", nn::Linear(H, H, gen, /*bias=*/false));
    if (score_ == AttentionScore::additive) {
      attention = register_module(
          "attention",
          nn::AdditiveAttention(nn::AdditiveAttentionOptions(D, H, H).dropout(c.dropout).generator(dropout_gen), gen));
    } else {
      // Dot scores need keys of the query's size: U_a maps annotations to H, once per sentence.
      key_proj = register_module("key_proj", nn::Linear(D, H, gen, /*bias=*/false));
      dot = register_module("attention", nn::DotProductAttention(nn::DotProductAttentionOptions()
                                                                     .scaled(score_ == AttentionScore::scaled_dot)
                                                                     .dropout(c.dropout)
                                                                     .generator(dropout_gen)));
    }
    embedding = register_module("embedding", nn::Embedding(c.tgt_vocab, E, gen));
    rnn = register_module("rnn", nn::GRUCell(rnn_input_size(c), H, gen));
    readout = std::make_unique<DeepOutput>(*this, c.readout == Readout::maxout, readout_input_size(c), maxout_units_of(c),
                                           c.tgt_vocab, gen, c.readout_dropout, dropout_gen,
                                           c.tie_embeddings ? embedding : nullptr);
  }
  std::string name() const override { return "RNNsearchDecoder"; }

  // Annotations (B, S, 2H) -> keys for the scores, once per sentence.
  Tensor project_memory(const Tensor& memory) const {
    return attention ? attention->project_keys(memory) : key_proj->forward(memory);
  }

  // c_i (B, 2H) from s_{i-1} (B, H); stores the weights (B, S) in state.attention.
  Tensor context(const Tensor& s_prev, DecoderState& state) {
    const Tensor q = unsqueeze(s_prev, 1);  // (B, 1, H)
    Tensor c;
    Tensor weights;  // taken here, not left in the module: decoding may run this on several threads
    if (attention)
      c = attention->forward_projected(attention->project_queries(q), state.memory_proj, state.memory, state.valid_len,
                                       &weights);
    else
      c = dot->forward(q, state.memory_proj, state.memory, state.valid_len, &weights);
    state.attention = squeeze(weights, 1);
    return squeeze(c, 1);
  }

  // s_i from s_{i-1}, E y_{i-1} and c_i, honouring the ablation.
  Tensor next_state(const Tensor& s_prev, const Tensor& emb, const Tensor& c) const {
    if (ablation_ == Ablation::recurrence_only)
      return rnn->forward(Tensor::zeros({s_prev.size(0), 1}, s_prev.dtype()), s_prev);
    if (ablation_ == Ablation::no_prev_token) return rnn->forward(c, s_prev);
    return rnn->forward(concat({emb, c}, -1), s_prev);
  }

  // Output-layer features [s_i ; E y_{i-1} ; c_i] (or the ablated subset), any leading shape.
  Tensor features(const Tensor& s, const Tensor& emb, const Tensor& c) const {
    if (ablation_ == Ablation::state_only_output) return s;
    if (ablation_ == Ablation::no_prev_token) return concat({s, c}, -1);
    return concat({s, emb, c}, -1);
  }

  const Ablation ablation_;
  const AttentionScore score_;
  nn::Linear init{nullptr}, key_proj{nullptr};
  nn::AdditiveAttention attention{nullptr};
  nn::DotProductAttention dot{nullptr};
  nn::Embedding embedding{nullptr};
  nn::GRUCell rnn{nullptr};
  std::unique_ptr<DeepOutput> readout;
};

class RnnSearch : public Seq2Seq {
 public:
  RnnSearch(const ModelConfig& c, Generator& gen) : Seq2Seq(c), dropout_gen_(std::make_shared<Generator>(gen.next_u64())) {
    encoder = register_module("encoder", std::make_shared<BiEncoder>(c, gen));
    decoder = register_module("decoder", std::make_shared<RnnSearchDecoder>(c, gen, dropout_gen_));
    if (c.embedding_dropout > 0)
      embedding_dropout = register_module("embedding_dropout", nn::Dropout(c.embedding_dropout, dropout_gen_));
  }
  std::string name() const override { return "RNNsearch"; }

  DecoderState begin(const Tensor& src, const Tensor& src_valid_len) override {
    const Tensor x = permute(embed(encoder->embedding, src, embedding_dropout), {1, 0, 2});  // (S, B, E)
    auto [outputs, h_n] = encoder->rnn->forward(x, Tensor(), src_valid_len);    // (S, B, 2H), (2, B, H)
    DecoderState state;
    state.memory = permute(outputs, {1, 0, 2});                                 // annotations (B, S, 2H)
    state.memory_proj = decoder->project_memory(state.memory);                  // U_a h_j, once
    state.valid_len = src_valid_len;
    const Tensor backward_first = squeeze(narrow(h_n, 0, 1, 1), 0);             // ←h_1 (B, H)
    const Tensor s0 = config_.ablation == Ablation::zero_init ? Tensor::zeros(backward_first.shape(), backward_first.dtype())
                                                      : tanh(decoder->init->forward(backward_first));
    state.hidden = unsqueeze(s0, 0);                                            // (1, B, H)
    return state;
  }

  Tensor step(const Tensor& y_prev, DecoderState& state) override {
    const Tensor emb = embed(decoder->embedding, y_prev, embedding_dropout);
    const Tensor s_prev = squeeze(state.hidden, 0);
    const Tensor c = decoder->context(s_prev, state);
    const Tensor s = decoder->next_state(s_prev, emb, c);
    state.hidden = unsqueeze(s, 0);
    return (*decoder->readout)(decoder->features(s, emb, c));
  }

  Tensor forward(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, Tensor* attention) override {
    return (*decoder->readout)(output_features(src, src_valid_len, dec_input, attention));
  }

  Tensor loss(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, const Tensor& tgt,
              const Tensor& tgt_valid_len, double label_smoothing) override {
    return decoder->readout->loss_at_valid(output_features(src, src_valid_len, dec_input, nullptr), tgt, tgt_valid_len,
                                           label_smoothing);
  }

  std::shared_ptr<BiEncoder> encoder;
  std::shared_ptr<RnnSearchDecoder> decoder;
  nn::Dropout embedding_dropout{nullptr};  // empty when config.embedding_dropout is 0

 private:
  // The readout's input at every decoder step under teacher forcing: (B, T, features).
  Tensor output_features(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, Tensor* attention) {
    DecoderState state = begin(src, src_valid_len);
    const Tensor emb = embed(decoder->embedding, dec_input, embedding_dropout);  // (B, T, E)
    PooledVector<Tensor> states, contexts, weights;  // pooled: a training step allocates nothing from the system
    states.reserve(static_cast<std::size_t>(dec_input.size(1)));
    contexts.reserve(static_cast<std::size_t>(dec_input.size(1)));
    Tensor s = squeeze(state.hidden, 0);
    for (std::int64_t t = 0; t < dec_input.size(1); ++t) {
      const Tensor e = squeeze(narrow(emb, 1, t, 1), 1);
      const Tensor c = decoder->context(s, state);
      s = decoder->next_state(s, e, c);
      states.push_back(s);
      contexts.push_back(c);
      if (attention) weights.push_back(state.attention);
    }
    if (attention) *attention = stack(weights, 1);
    return decoder->features(stack(states, 1), emb, stack(contexts, 1));  // the readout runs once on all steps
  }

  std::shared_ptr<Generator> dropout_gen_;
};

}  // namespace

const ModelSpec& rnnsearch_model_spec() {
  static const ModelSpec spec{
      .name = "rnnsearch",
      .description = "the paper's RNNsearch: bidirectional GRU encoder, additive attention, maxout output",
      .make = [](const ModelConfig& c, Generator& gen) -> std::shared_ptr<Seq2Seq> { return std::make_shared<RnnSearch>(c, gen); },
      .validate =
          [](const ModelConfig& c) {
            if (c.num_layers != 1)
              throw std::invalid_argument("rnnsearch has one recurrent layer, as in the paper (num_layers must be 1)");
            if (c.tie_embeddings) DeepOutput::check_tie(c.readout == Readout::maxout, maxout_units_of(c), c.embed_size);
          },
      .default_num_layers = 1,
      .num_parameters =
          [](const ModelConfig& c) {
            const std::int64_t H = c.num_hiddens, E = c.embed_size, D = 2 * H;
            ParameterCount n;
            n.embedding(c.src_vocab, E).gru(E, H, 1, 2);                       // encoder
            n.linear(H, H, false);                                             // decoder.init
            if (c.attention == AttentionScore::additive) n.additive_attention(D, H, H);
            else n.linear(D, H, false);                                        // key_proj
            n.embedding(c.tgt_vocab, E).gru_cell(rnn_input_size(c), H);
            DeepOutput::count(n, c.readout == Readout::maxout, readout_input_size(c), maxout_units_of(c), c.tgt_vocab,
                              c.tie_embeddings);
            return n.total();
          },
  };
  return spec;
}

}  // namespace tg::models
