#pragma once
// Encoder-decoder translators behind one interface, so that decoding, training, checkpoints and
// the CLI work for every variant, and a new variant is one file plus one line in the registry
// (models/translators/registry.cpp; docs/extending.md, "Adding a translation model"):
//   - d2l:       d2l's Bahdanau-attention chapter model (Seq2SeqAttentionDecoder), PyTorch names.
//   - rnnsearch: the paper's RNNsearch: bidirectional encoder, s_0 = tanh(W_s ←h_1), additive
//                attention with the key projection U_a h_j computed once per sentence, GRU
//                decoder on [E y_{i-1}; c_i], maxout (or linear) deep output from (s_i, E y_{i-1}, c_i).
//   - rnnencdec: the paper's baseline without attention: a fixed context c from the encoder.
//
//   auto model = make_model(config, gen);
//   Tensor logits = model->forward(src, src_valid_len, dec_input);    // teacher forcing, (B, T, V)
//   DecoderState state = model->begin(src, src_valid_len);            // decoding, step by step
//   Tensor step_logits = model->step(y_prev, state);                  // (B, V); state.attention (B, S)
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/tensor.h"
#include "models/translators/options.h"
#include "nn/module.h"

namespace tg {
class Generator;
}

namespace tg::models {

struct ModelSpec;

/// A registered model (models/translators/registry.h), named as on the command line and in
/// config.json. Converts implicitly from its name; an unknown name throws std::invalid_argument
/// listing the registered ones.
class ModelKind {
 public:
  ModelKind();  // the first registered model, d2l
  ModelKind(std::string_view name);  // NOLINT: implicit, parses
  ModelKind(const char* name) : ModelKind(std::string_view(name)) {}  // NOLINT
  ModelKind(const std::string& name) : ModelKind(std::string_view(name)) {}  // NOLINT
  explicit ModelKind(const ModelSpec& spec) : spec_(&spec) {}

  const ModelSpec& spec() const { return *spec_; }
  std::string_view name() const;
  friend bool operator==(const ModelKind& a, const ModelKind& b) { return a.spec_ == b.spec_; }

 private:
  const ModelSpec* spec_;
};
std::ostream& operator<<(std::ostream& os, const ModelKind& kind);

/// Everything that defines a model's architecture; stored as config.json in checkpoints.
struct ModelConfig {
  ModelKind model;                  ///< d2l | rnnsearch | rnnencdec | transformer (the registry)
  std::int64_t src_vocab = 0;
  std::int64_t tgt_vocab = 0;
  std::int64_t embed_size = 32;
  std::int64_t num_hiddens = 32;
  std::int64_t num_layers = 2;      ///< d2l only (rnnsearch/rnnencdec are single-layer, as the paper)
  double dropout = 0.1;              ///< d2l: GRU and attention; rnnsearch: attention weights; transformer: everywhere
  double embedding_dropout = 0.0;    ///< rnnsearch/rnnencdec: on the source and target word embeddings
  double readout_dropout = 0.0;      ///< rnnsearch/rnnencdec: on the output layer's input [s_i; E y_{i-1}; c_i]
  std::int64_t num_steps = 10;      ///< sequence length used for training and decoding
  Readout readout = Readout::maxout;  ///< rnnsearch/rnnencdec output layer
  std::int64_t maxout_units = 0;    ///< maxout output size (0 = num_hiddens / 2, the paper's 500 for 1000)
  AttentionScore attention = AttentionScore::additive;  ///< rnnsearch (dot scores need num_hiddens-sized keys)
  Ablation ablation = Ablation::none;  ///< rnnsearch decoder-path ablations
  // transformer (embed_size = d_model, num_hiddens = feed-forward width, num_layers = layers per stack)
  std::int64_t num_heads = 4;        ///< attention heads (embed_size must be a multiple)
  bool norm_first = false;           ///< pre-LN (LayerNorm before each block, final norms) or the paper's post-LN
  bool tie_embeddings = false;       ///< the output projection is the target embedding (no separate dense);
                                     ///< transformer, and rnnsearch/rnnencdec with maxout units = embed_size
  std::int64_t attention_layer = -1; ///< decoder layer whose cross-attention is reported (-1 = the last)
  std::int64_t attention_head = -1;  ///< that layer's head, or -1 = the mean over heads

  /// Throws std::invalid_argument naming the first bad field, its value and its allowed range
  /// (models/translators/limits.h), e.g. `model config: num_hiddens = 99999999 is out of range
  /// [1, 65536]`; then the model's own rules; then the total parameter count. `where` starts the
  /// message (config.json passes its path).
  void validate(std::string_view where = "model config") const;

  /// This config with every dropout probability 0: the architecture, which the weights and the
  /// eval-mode function depend on (dropout acts only in training).
  ModelConfig without_dropout() const;

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

/// What a decoder carries from step to step. Every tensor has the batch on the axis noted, so
/// beam search can reorder hypotheses generically (reorder()); `shared` is the same for every row.
struct DecoderState {
  Tensor hidden;         ///< (L, B, H) recurrent state
  Tensor memory;         ///< (B, S, D) encoder outputs attended over (values)
  Tensor memory_proj;    ///< (B, S, A) key projection, computed once per sentence
  Tensor valid_len;      ///< (B) i64 source valid lengths
  Tensor context;        ///< (B, D) fixed context (rnnencdec)
  Tensor attention;      ///< (B, S) weights used by the last step (undefined for rnnencdec)
  std::vector<Tensor> cache;  ///< model-defined, batch on axis 0 (transformer: key/value caches)
  std::vector<Tensor> shared;  ///< model-defined, no batch axis, kept as is by reorder() (transformer: the attentions' projection rows, cut once per decode)

  /// Keeps batch rows `index` (i64, 1-D), in that order, in every defined tensor.
  DecoderState reorder(const Tensor& index) const;
};

class Seq2Seq : public nn::Module {
 public:
  explicit Seq2Seq(ModelConfig config) : config_(std::move(config)) {}
  const ModelConfig& config() const { return config_; }

  /// Encodes a batch and returns the decoder's initial state. src: i64 (B, S); src_valid_len: i64 (B).
  /// The decoders call begin() and step() from several threads at once, each thread with its own
  /// state (greedy_decode's slices, beam_search's shares of sentences): in eval mode, neither may
  /// modify the model (e.g. take attention weights through the state, not a module member).
  virtual DecoderState begin(const Tensor& src, const Tensor& src_valid_len) = 0;
  /// One decoder step from the previous tokens y_prev (i64 (B)): returns logits (B, V) and
  /// advances `state` (state.attention = this step's weights).
  virtual Tensor step(const Tensor& y_prev, DecoderState& state) = 0;
  /// Teacher forcing: logits (B, T, V) for decoder inputs dec_input (i64 (B, T), <bos> then the
  /// shifted target). The default runs step() T times; models override it to batch work across
  /// steps. If `attention` is given it receives (B, T, S) weights.
  virtual Tensor forward(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input,
                         Tensor* attention = nullptr);
  /// The training loss of teacher forcing: sequence_loss(forward(src, src_valid_len, dec_input),
  /// tgt, tgt_valid_len, label_smoothing). The built-in models compute the readout only at the valid target
  /// positions (the vocabulary GEMM is most of a step's work, and pads are a large share of the
  /// positions: docs/performance_history.md), with the same value and gradients (tested).
  virtual Tensor loss(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, const Tensor& tgt,
                      const Tensor& tgt_valid_len, double label_smoothing = 0.0);
  /// Whether step() produces attention weights.
  virtual bool has_attention() const { return true; }
  /// True when source positions past src_valid_len and target positions past tgt_valid_len
  /// cannot change the loss (the encoder is masked by valid lengths, the decoder is causal and
  /// the loss masked), so train() may cut a batch to its longest valid row: same loss, less work
  /// (most on tasks with short targets such as `primes`). d2l's encoder reads its pads.
  virtual bool padding_is_inert() const { return true; }

 protected:
  ModelConfig config_;
};

/// Builds config.model (validated first), initialised from `gen`. Dropout masks come from a
/// generator the model owns, seeded from `gen`.
std::shared_ptr<Seq2Seq> make_model(const ModelConfig& config, Generator& gen);

/// Lets backward keep the gradients of the embedding tables and of the vocabulary projection (the
/// module "decoder.dense" in every built-in model) in compact form (autograd/compact_grad.h): the
/// rows a batch used, and the projection's input and output gradients instead of its out x in
/// product. Clipping and the optimizers read them without ever building the dense gradients, so
/// training follows the same trajectory with less memory (figures in docs/performance_history.md); it
/// costs two Gram products for the norm. Worth it for large vocabularies; off by default.
void allow_compact_grads(Seq2Seq& model, bool on = true);

/// Names of the registered models, in registry order.
std::vector<std::string> model_names();

/// Mean cross-entropy over the valid target tokens: logits (B, T, V), target i64 (B, T),
/// target_valid_len i64 (B); positions t >= valid length are ignored. With label_smoothing ε the
/// target distribution is (1 - ε) one-hot + ε / V uniform, as torch's CrossEntropyLoss.
Tensor sequence_loss(const Tensor& logits, const Tensor& target, const Tensor& target_valid_len,
                     double label_smoothing = 0.0);

/// Mean over rows of the cross-entropy of logits (N, V) against labels i64 (N) smoothed by ε in
/// [0, 1): (1 - ε) cross_entropy + ε mean over rows and classes of -log_softmax (torch's
/// label_smoothing). ε = 0 is exactly cross_entropy. Throws std::invalid_argument for ε outside [0, 1).
Tensor smoothed_cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing);

/// Row-major flat indices b * T + t of the valid target positions (t < target_valid_len[b]) of a
/// (B, T) target: i64 (N) with N = the number of valid tokens (nn::PackedTokens' index of the
/// clamped lengths).
Tensor valid_positions(const Tensor& target_valid_len, std::int64_t T);

/// valid_len (B) with each entry limited to [0, T], as the models read valid lengths.
Tensor clamped_lengths(const Tensor& valid_len, std::int64_t T);

/// d2l's decoder input: <bos> followed by the target shifted right by one (last token dropped).
Tensor teacher_forcing_input(const Tensor& target, std::int64_t bos_id);

}  // namespace tg::models
