// RNNencdec, the paper's baseline (Cho et al. 2014's RNN Encoder-Decoder): no attention.
//   encoder: GRU over the source (masked by valid lengths), summary c = tanh(V h_T)
//   decoder: s_0 = tanh(V' c), s_i = GRU(s_{i-1}, [E y_{i-1} ; c]), output from (s_i, E y_{i-1}, c)
//            through the same deep output as rnnsearch.
// Every step sees the same fixed-size c, however long the sentence: the bottleneck attention
// removes. Dropout (training only, not in the paper): embedding_dropout on the word embeddings,
// readout_dropout on the output layer's input.
#include <memory>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "models/translators/readout.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq_impl.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/rnn.h"

namespace tg::models {

namespace {

class SummaryEncoder : public nn::Module {
 public:
  SummaryEncoder(const ModelConfig& c, Generator& gen) {
    embedding = register_module("embedding", nn::Embedding(c.src_vocab, c.embed_size, gen));
    rnn = register_module("rnn", nn::GRU(nn::GRUOptions(c.embed_size, c.num_hiddens), gen));
    summary = register_module("summary", nn::Linear(c.num_hiddens, c.num_hiddens, gen, false));
  }
  std::string name() const override { return "RNNencdecEncoder"; }
  nn::Embedding embedding{nullptr};
  nn::GRU rnn{nullptr};
  nn::Linear summary{nullptr};
};

class ContextDecoder : public nn::Module {
 public:
  ContextDecoder(const ModelConfig& c, Generator& gen, const std::shared_ptr<Generator>& dropout_gen) {
    const std::int64_t H = c.num_hiddens, E = c.embed_size;
    init = register_module("init", nn::Linear(H, H, gen, false));
    embedding = register_module("embedding", nn::Embedding(c.tgt_vocab, E, gen));
    rnn = register_module("rnn", nn::GRUCell(E + H, H, gen));
    readout = std::make_unique<DeepOutput>(*this, c.readout == Readout::maxout, 2 * H + E, maxout_units_of(c), c.tgt_vocab,
                                           gen, c.readout_dropout, dropout_gen, c.tie_embeddings ? embedding : nullptr);
  }
  std::string name() const override { return "RNNencdecDecoder"; }
  nn::Linear init{nullptr};
  nn::Embedding embedding{nullptr};
  nn::GRUCell rnn{nullptr};
  std::unique_ptr<DeepOutput> readout;
};

class RnnEncDec : public Seq2Seq {
 public:
  // The dropout generator is drawn from `gen` only when there is dropout, after the weights: models
  // without it initialise exactly as before these options existed.
  RnnEncDec(const ModelConfig& c, Generator& gen)
      : Seq2Seq(c), dropout_gen_(std::make_shared<Generator>(0)) {
    encoder = register_module("encoder", std::make_shared<SummaryEncoder>(c, gen));
    decoder = register_module("decoder", std::make_shared<ContextDecoder>(c, gen, dropout_gen_));
    if (c.embedding_dropout > 0 || c.readout_dropout > 0) *dropout_gen_ = Generator(gen.next_u64());
    if (c.embedding_dropout > 0)
      embedding_dropout = register_module("embedding_dropout", nn::Dropout(c.embedding_dropout, dropout_gen_));
  }
  std::string name() const override { return "RNNencdec"; }
  bool has_attention() const override { return false; }

  DecoderState begin(const Tensor& src, const Tensor& src_valid_len) override {
    const Tensor x = permute(embed(encoder->embedding, src, embedding_dropout), {1, 0, 2});
    auto [outputs, h_n] = encoder->rnn->forward(x, Tensor(), src_valid_len);  // h_n: after the last valid token
    DecoderState state;
    state.context = tanh(encoder->summary->forward(squeeze(h_n, 0)));          // c (B, H)
    state.hidden = unsqueeze(tanh(decoder->init->forward(state.context)), 0);  // s_0
    state.valid_len = src_valid_len;
    return state;
  }

  Tensor step(const Tensor& y_prev, DecoderState& state) override {
    const Tensor emb = embed(decoder->embedding, y_prev, embedding_dropout);
    const Tensor s = decoder->rnn->forward(concat({emb, state.context}, -1), squeeze(state.hidden, 0));
    state.hidden = unsqueeze(s, 0);
    return (*decoder->readout)(concat({s, emb, state.context}, -1));
  }

  Tensor forward(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, Tensor*) override {
    return (*decoder->readout)(output_features(src, src_valid_len, dec_input));
  }

  Tensor loss(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, const Tensor& tgt,
              const Tensor& tgt_valid_len, double label_smoothing) override {
    return decoder->readout->loss_at_valid(output_features(src, src_valid_len, dec_input), tgt, tgt_valid_len,
                                           label_smoothing);
  }

  std::shared_ptr<SummaryEncoder> encoder;
  std::shared_ptr<ContextDecoder> decoder;
  nn::Dropout embedding_dropout{nullptr};  // empty when config.embedding_dropout is 0

 private:
  // The readout's input [s_i; E y_{i-1}; c] at every decoder step: (B, T, 2H + E).
  Tensor output_features(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input) {
    DecoderState state = begin(src, src_valid_len);
    const Tensor emb = embed(decoder->embedding, dec_input, embedding_dropout);  // (B, T, E)
    std::vector<Tensor> states;
    Tensor s = squeeze(state.hidden, 0);
    for (std::int64_t t = 0; t < dec_input.size(1); ++t) {
      s = decoder->rnn->forward(concat({squeeze(narrow(emb, 1, t, 1), 1), state.context}, -1), s);
      states.push_back(s);
    }
    const std::int64_t T = dec_input.size(1);
    const Tensor c = unsqueeze(state.context, 1) + Tensor::zeros({1, T, 1}, state.context.dtype());  // (B, T, H)
    return concat({stack(states, 1), emb, c}, -1);
  }

  std::shared_ptr<Generator> dropout_gen_;
};

}  // namespace

const ModelSpec& rnnencdec_model_spec() {
  static const ModelSpec spec{
      .name = "rnnencdec",
      .description = "the paper's RNNencdec baseline: the same encoder, a fixed context, no attention",
      .make = [](const ModelConfig& c, Generator& gen) -> std::shared_ptr<Seq2Seq> { return std::make_shared<RnnEncDec>(c, gen); },
      .validate =
          [](const ModelConfig& c) {
            if (c.num_layers != 1)
              throw std::invalid_argument("rnnencdec has one recurrent layer, as in the paper (num_layers must be 1)");
            if (c.ablation != Ablation::none) throw std::invalid_argument("ablations apply to rnnsearch only");
            if (c.tie_embeddings) DeepOutput::check_tie(c.readout == Readout::maxout, maxout_units_of(c), c.embed_size);
          },
      .default_num_layers = 1,
      .num_parameters =
          [](const ModelConfig& c) {
            const std::int64_t H = c.num_hiddens, E = c.embed_size;
            ParameterCount n;
            n.embedding(c.src_vocab, E).gru(E, H, 1, 1).linear(H, H, false);  // encoder
            n.linear(H, H, false).embedding(c.tgt_vocab, E).gru_cell(E + H, H);  // decoder
            DeepOutput::count(n, c.readout == Readout::maxout, 2 * H + E, maxout_units_of(c), c.tgt_vocab, c.tie_embeddings);
            return n.total();
          },
  };
  return spec;
}

}  // namespace tg::models
