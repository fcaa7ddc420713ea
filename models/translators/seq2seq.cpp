// The shared parts of every translator: configuration checks, building a model, the default
// step-by-step teacher forcing, the decoder-state reordering used by beam search, and the loss.
#include "models/translators/seq2seq.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_softmax.h"
#include "autograd/random.h"
#include "models/translators/limits.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq_impl.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/packed_tokens.h"

namespace tg::models {

ModelConfig ModelConfig::without_dropout() const {
  ModelConfig c = *this;
  c.dropout = c.embedding_dropout = c.readout_dropout = 0.0;
  return c;
}

void ModelConfig::validate(std::string_view where) const {
  const std::string prefix = std::string(where) + ": ";
  auto check = [&](const char* field, std::int64_t value, std::int64_t lo, std::int64_t hi) {
    if (value < lo || value > hi)
      throw std::invalid_argument(prefix + field + " = " + std::to_string(value) + " is out of range [" +
                                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
  };
  check("src_vocab", src_vocab, limits::kMinVocab, limits::kMaxVocab);
  check("tgt_vocab", tgt_vocab, limits::kMinVocab, limits::kMaxVocab);
  check("embed_size", embed_size, 1, limits::kMaxWidth);
  check("num_hiddens", num_hiddens, 1, limits::kMaxWidth);
  check("num_layers", num_layers, 1, limits::kMaxLayers);
  auto check_probability = [&](const char* field, double p) {
    if (p >= 0 && p < 1) return;  // NaN fails too
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, p).ptr;
    throw std::invalid_argument(prefix + field + " = " + std::string(text, end) + " is out of range [0, 1)");
  };
  check_probability("dropout", dropout);
  check_probability("embedding_dropout", embedding_dropout);
  check_probability("readout_dropout", readout_dropout);
  check("num_steps", num_steps, 1, limits::kMaxSteps);
  check("maxout_units", maxout_units, 0, limits::kMaxWidth);
  check("num_heads", num_heads, 1, limits::kMaxWidth);
  check("attention_layer", attention_layer, -limits::kMaxLayers, limits::kMaxLayers);
  check("attention_head", attention_head, -1, limits::kMaxWidth);
  const ModelSpec& spec = model.spec();
  if (spec.validate) {
    try {
      spec.validate(*this);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(prefix + e.what());
    }
  }
  if (spec.num_parameters) {
    const std::int64_t n = spec.num_parameters(*this);
    if (n > limits::kMaxParameters)
      throw std::invalid_argument(prefix + "the sizes give " + std::to_string(n) +
                                  " parameters, more than the limit " + std::to_string(limits::kMaxParameters));
  }
}

DecoderState DecoderState::reorder(const Tensor& index) const {
  DecoderState out;
  auto pick = [&](const Tensor& t, std::int64_t axis) { return t.defined() ? index_select(t, axis, index) : Tensor(); };
  out.hidden = pick(hidden, 1);
  out.memory = pick(memory, 0);
  out.memory_proj = pick(memory_proj, 0);
  out.valid_len = pick(valid_len, 0);
  out.context = pick(context, 0);
  out.attention = pick(attention, 0);
  out.cache.reserve(cache.size());
  for (const Tensor& t : cache) out.cache.push_back(pick(t, 0));
  out.shared = shared;
  return out;
}

Tensor Seq2Seq::forward(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, Tensor* attention) {
  DecoderState state = begin(src, src_valid_len);
  PooledVector<Tensor> logits, weights;
  const std::int64_t T = dec_input.size(1);
  logits.reserve(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) {
    logits.push_back(step(squeeze(narrow(dec_input, 1, t, 1), 1), state));
    if (attention && state.attention.defined()) weights.push_back(state.attention);
  }
  if (attention && !weights.empty()) *attention = stack(weights, 1);
  return stack(logits, 1);
}

void allow_compact_grads(Seq2Seq& model, bool on) {
  for (auto& [name, m] : model.named_modules()) {
    if (auto* e = dynamic_cast<nn::EmbeddingImpl*>(m)) e->weight.allow_compact_grad(on);
    if (auto* l = dynamic_cast<nn::LinearImpl*>(m); l && name == "decoder.dense") l->weight.allow_compact_grad(on);
  }
}

std::shared_ptr<Seq2Seq> make_model(const ModelConfig& config, Generator& gen) {
  config.validate();
  return config.model.spec().make(config, gen);
}

Tensor smoothed_cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing) {
  if (!(label_smoothing >= 0 && label_smoothing < 1))
    throw std::invalid_argument("smoothed_cross_entropy: label_smoothing = " + std::to_string(label_smoothing) +
                                " is out of range [0, 1)");
  const Tensor nll = cross_entropy(logits, labels);
  if (label_smoothing == 0) return nll;
  // The uniform part: mean over rows and classes of -log p (every row here is a counted target).
  return nll * (1 - label_smoothing) - mean(log_softmax(logits, -1)) * label_smoothing;
}

Tensor sequence_loss(const Tensor& logits, const Tensor& target, const Tensor& target_valid_len,
                     double label_smoothing) {
  if (logits.dim() != 3 || target.dim() != 2 || logits.size(0) != target.size(0) || logits.size(1) != target.size(1))
    throw std::invalid_argument("sequence_loss: logits " + logits.shape().str() + " do not match target " +
                                target.shape().str());
  const std::int64_t B = target.size(0), T = target.size(1);
  if (!(target_valid_len.shape() == Shape{B}))
    throw std::invalid_argument("sequence_loss: target_valid_len " + target_valid_len.shape().str() + " for batch " +
                                std::to_string(B));
  // Positions at or beyond each row's valid length become ignore_index.
  Tensor masked = target.detach().clone();
  std::int64_t* m = masked.data<std::int64_t>();
  const std::int64_t* len = target_valid_len.data<std::int64_t>();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = len[b]; t < T; ++t) m[b * T + t] = -100;
  if (label_smoothing == 0)
    return cross_entropy(reshape(logits, {B * T, logits.size(2)}), reshape(masked, {B * T}), -100);
  const Tensor rows = valid_positions(target_valid_len, T);
  return smoothed_cross_entropy(index_select(reshape(logits, {B * T, logits.size(2)}), 0, rows),
                                index_select(reshape(target.detach(), {B * T}), 0, rows), label_smoothing);
}

Tensor Seq2Seq::loss(const Tensor& src, const Tensor& src_valid_len, const Tensor& dec_input, const Tensor& tgt,
                     const Tensor& tgt_valid_len, double label_smoothing) {
  return sequence_loss(forward(src, src_valid_len, dec_input), tgt, tgt_valid_len, label_smoothing);
}

Tensor valid_positions(const Tensor& target_valid_len, std::int64_t T) {
  return nn::PackedTokens(clamped_lengths(target_valid_len, T), T).index();
}

Tensor clamped_lengths(const Tensor& valid_len, std::int64_t T) {
  Tensor out = Tensor::empty({valid_len.numel()}, DType::i64);
  const std::int64_t* len = valid_len.data<std::int64_t>();
  std::int64_t* clamped = out.data<std::int64_t>();
  for (std::int64_t b = 0; b < valid_len.numel(); ++b) clamped[b] = std::clamp<std::int64_t>(len[b], 0, T);
  return out;
}

Tensor teacher_forcing_input(const Tensor& target, std::int64_t bos_id) {
  const std::int64_t B = target.size(0), T = target.size(1);
  Tensor out = Tensor::empty({B, T}, DType::i64);
  const std::int64_t* y = target.data<std::int64_t>();
  std::int64_t* x = out.data<std::int64_t>();
  for (std::int64_t b = 0; b < B; ++b) {
    x[b * T] = bos_id;
    for (std::int64_t t = 1; t < T; ++t) x[b * T + t] = y[b * T + t - 1];
  }
  return out;
}

}  // namespace tg::models
