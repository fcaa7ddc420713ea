// Greedy decoding and beam search over the Seq2Seq step interface.
#include "models/decoding/decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
#include "autograd/parallel.h"
#include "autograd/tape.h"
#include "models/text/data.h"
#include "models/translators/limits.h"

namespace tg::models {

namespace {

void check_sources(const Tensor& src, const Tensor& valid_len, const char* who) {
  if (!src.defined() || src.dim() != 2 || src.dtype() != DType::i64)
    throw std::invalid_argument(std::string(who) + ": src must be i64 (B, S)");
  if (!valid_len.defined() || valid_len.dtype() != DType::i64 || !(valid_len.shape() == Shape{src.size(0)}))
    throw std::invalid_argument(std::string(who) + ": src_valid_len must be i64 (B) for src " + src.shape().str());
}

/// Row-wise log-softmax in double of a (B, V) logits tensor (beam search).
std::vector<std::vector<double>> log_probs(const Tensor& logits) {
  const std::int64_t B = logits.size(0), V = logits.size(1);
  const Tensor x = logits.dtype() == DType::f64 ? logits : logits.to(DType::f32);
  std::vector<std::vector<double>> out(static_cast<std::size_t>(B), std::vector<double>(static_cast<std::size_t>(V)));
  auto fill = [&](const auto* data) {
    for (std::int64_t b = 0; b < B; ++b) {
      const auto* row = data + b * V;
      const double lse = log_sum_exp_row(row, V);
      for (std::int64_t v = 0; v < V; ++v) out[b][v] = static_cast<double>(row[v]) - lse;
    }
  };
  if (x.dtype() == DType::f64) fill(x.data<double>());
  else fill(x.data<float>());
  return out;
}

/// The most likely token of each row of (B, V) logits (the first maximum) and its log-probability,
/// with the normaliser log_probs() uses, read in place (greedy decoding calls this every step).
template <class T>
void best_tokens(const T* x, std::int64_t B, std::int64_t V, std::int64_t* best, double* log_prob) {
  for (std::int64_t b = 0; b < B; ++b) {
    const T* row = x + b * V;
    const double lse = log_sum_exp_row(row, V, &best[b]);
    log_prob[b] = static_cast<double>(row[best[b]]) - lse;
  }
}

/// Row b of the (B, S) attention weights, cut to the first `len` positions.
std::vector<float> attention_row(const std::vector<double>& att, std::int64_t S, std::int64_t b, std::int64_t len) {
  len = std::clamp<std::int64_t>(len, 0, S);
  std::vector<float> row(static_cast<std::size_t>(len));
  for (std::int64_t j = 0; j < len; ++j) row[j] = static_cast<float>(att[b * S + j]);
  return row;
}

Tensor ids_tensor(const std::vector<std::int64_t>& ids) {
  return Tensor::from_vector(ids, {static_cast<std::int64_t>(ids.size())});
}

}  // namespace

void DecodeOptions::validate() const {
  if (max_steps_ < 0 || max_steps_ > limits::kMaxSteps)  // 0 = the model's num_steps
    throw std::invalid_argument("decode: max_steps = " + std::to_string(max_steps_) + " is out of range [0, " +
                                std::to_string(limits::kMaxSteps) + "]");
  if (beam_size_ < 1 || beam_size_ > limits::kMaxBeam)
    throw std::invalid_argument("decode: beam size = " + std::to_string(beam_size_) + " is out of range [1, " +
                                std::to_string(limits::kMaxBeam) + "]");
  if (!std::isfinite(length_alpha_) || length_alpha_ < 0)
    throw std::invalid_argument("decode: length_alpha must be finite and >= 0");
  if (batch_size_ < 1 || batch_size_ > limits::kMaxBatchSize)
    throw std::invalid_argument("decode: batch_size = " + std::to_string(batch_size_) + " is out of range [1, " +
                                std::to_string(limits::kMaxBatchSize) + "]");
}

std::string Translation::text() const {
  std::string s;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i) s += ' ';
    s += tokens[i];
  }
  return s;
}

std::vector<std::string> Translation::step_labels() const {
  std::vector<std::string> labels = tokens;
  if (ended) labels.push_back(Vocab::reserved_tokens()[Vocab::kEos]);
  return labels;
}

std::vector<std::string> tokenize_source(const std::string& sentence) { return tokenize_nmt(preprocess_nmt(sentence)); }

SourceBatch encode_sources(const std::vector<std::vector<std::string>>& sentences, const Vocab& src_vocab,
                           std::int64_t num_steps) {
  if (num_steps < 1) throw std::invalid_argument("encode_sources: num_steps must be >= 1");
  const auto B = static_cast<std::int64_t>(sentences.size());
  std::vector<std::int64_t> ids, lens;
  ids.reserve(static_cast<std::size_t>(B * num_steps));
  SourceBatch out;
  for (const auto& tokens : sentences) {
    std::vector<std::int64_t> row = src_vocab.ids(tokens);
    std::int64_t unknown = 0;
    for (const std::string& t : tokens) unknown += src_vocab.contains(t) ? 0 : 1;
    out.unknown.push_back(unknown);
    row.push_back(Vocab::kEos);
    out.lengths.push_back(static_cast<std::int64_t>(row.size()));
    const auto len = std::min<std::int64_t>(static_cast<std::int64_t>(row.size()), num_steps);
    row = truncate_pad(std::move(row), num_steps, Vocab::kPad);
    std::vector<std::string> labels;
    for (std::int64_t j = 0; j < len; ++j) labels.push_back(src_vocab.token(row[j]));
    out.labels.push_back(std::move(labels));
    ids.insert(ids.end(), row.begin(), row.end());
    lens.push_back(len);
  }
  out.src = Tensor::from_vector(ids, {B, num_steps});
  out.valid_len = Tensor::from_vector(lens, {B});
  return out;
}

namespace {

// Greedy decoding of a batch whose model is already in eval mode (the mode is shared by the
// slices that run at once, so no slice sets it); grad mode is per thread, so it sets its own.
std::vector<Translation> greedy_rows(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                     std::int64_t max_steps, bool keep_attention) {
  NoGradGuard no_grad;
  const std::int64_t B = src.size(0), S = src.size(1);
  std::vector<Translation> out(static_cast<std::size_t>(B));
  if (B == 0) return out;
  const std::vector<std::int64_t> lens = src_valid_len.to_vector<std::int64_t>();

  DecoderState state = model.begin(src, src_valid_len);
  std::vector<std::int64_t> y(static_cast<std::size_t>(B), Vocab::kBos);
  std::vector<bool> done(static_cast<std::size_t>(B), false);
  std::int64_t remaining = B;
  std::vector<std::int64_t> bests(static_cast<std::size_t>(B));
  std::vector<double> best_lp(static_cast<std::size_t>(B)), att;
  for (std::int64_t t = 0; t < max_steps && remaining > 0; ++t) {
    const Tensor logits = model.step(ids_tensor(y), state);
    const std::int64_t V = logits.size(1);
    if (logits.dtype() == DType::f32) best_tokens(logits.data<float>(), B, V, bests.data(), best_lp.data());
    else best_tokens(logits.to(DType::f64).data<double>(), B, V, bests.data(), best_lp.data());
    att.clear();
    if (keep_attention && state.attention.defined()) att = state.attention.to_vector<double>();
    for (std::int64_t b = 0; b < B; ++b) {
      if (done[b]) continue;  // keeps feeding <eos>; its outputs are ignored
      const std::int64_t best = bests[b];
      Translation& tr = out[b];
      tr.log_prob += best_lp[b];
      if (!att.empty()) tr.attention.push_back(attention_row(att, S, b, lens[b]));
      y[b] = best;
      if (best == Vocab::kEos) {
        tr.ended = true;
        done[b] = true;
        --remaining;
      } else {
        tr.ids.push_back(best);
      }
    }
  }
  for (auto& tr : out) tr.score = tr.log_prob;
  return out;
}

// Rows per slice when a batch is decoded as slices on several threads. From 32 rows on, a slice
// takes the same kernel paths as the whole batch (the GEMM's skinny path is for at most 4 rows),
// so each row comes out the same bits either way (tests/models/test_decode.cpp).
constexpr std::int64_t kMinRowsPerSlice = 32;

}  // namespace

// Rows never interact, so a batch of at least 2 x 32 sentences decodes as up to num_threads()
// slices at once, one per thread: the products of one decoding step of a batch of 64 (A: 64 x 32
// by 32 x 96) are far below what splits profitably inside a kernel, so without this a second
// thread would sit idle.
std::vector<Translation> greedy_decode(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                       std::int64_t max_steps, bool keep_attention) {
  check_sources(src, src_valid_len, "greedy_decode");
  if (max_steps < 1) throw std::invalid_argument("greedy_decode: max_steps must be >= 1");
  nn::EvalModeGuard eval(model);
  const std::int64_t B = src.size(0);
  const auto slices = static_cast<int>(std::min<std::int64_t>(num_threads(), B / kMinRowsPerSlice));
  if (slices <= 1) return greedy_rows(model, src, src_valid_len, max_steps, keep_attention);
  std::vector<Translation> out(static_cast<std::size_t>(B));
  run_tasks(slices, [&](int i) {
    const std::int64_t begin = B * i / slices, end = B * (i + 1) / slices;
    std::vector<Translation> slice = greedy_rows(model, narrow(src, 0, begin, end - begin),
                                                 narrow(src_valid_len, 0, begin, end - begin), max_steps, keep_attention);
    std::move(slice.begin(), slice.end(), out.begin() + begin);
  });
  return out;
}

namespace {

struct Hypothesis {
  std::vector<std::int64_t> ids;
  std::vector<std::vector<float>> attention;
  double log_prob = 0.0;
  bool ended = false;
};

Translation beam_one(Seq2Seq& model, const Tensor& src, const Tensor& valid_len, std::int64_t k,
                     std::int64_t max_steps, double alpha) {
  const std::int64_t S = src.size(1);
  const std::int64_t len = valid_len.to_vector<std::int64_t>()[0];
  DecoderState state = model.begin(src, valid_len);
  std::vector<Hypothesis> alive(1);
  std::vector<Hypothesis> finished;
  std::vector<std::int64_t> y{Vocab::kBos};

  struct Candidate {
    double log_prob;
    std::int64_t beam, token;
  };
  for (std::int64_t t = 0; t < max_steps; ++t) {
    const Tensor logits = model.step(ids_tensor(y), state);
    const auto lp = log_probs(logits);
    std::vector<double> att;
    if (state.attention.defined()) att = state.attention.to_vector<double>();

    std::vector<Candidate> cands;
    for (std::size_t b = 0; b < alive.size(); ++b)
      for (std::size_t v = 0; v < lp[b].size(); ++v)
        cands.push_back({.log_prob = alive[b].log_prob + lp[b][v],
                         .beam = static_cast<std::int64_t>(b),
                         .token = static_cast<std::int64_t>(v)});
    // Best first; ties by beam then token, so the order never depends on the sort's internals.
    auto better = [](const Candidate& a, const Candidate& b) {
      if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
      if (a.beam != b.beam) return a.beam < b.beam;
      return a.token < b.token;
    };
    const auto keep = std::min<std::size_t>(cands.size(), static_cast<std::size_t>(2 * k));
    std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(keep), cands.end(), better);

    std::vector<Hypothesis> next;
    std::vector<std::int64_t> parents, next_y;
    for (std::size_t r = 0; r < keep; ++r) {
      const Candidate& c = cands[r];
      const bool is_eos = c.token == Vocab::kEos;
      if (is_eos && r >= static_cast<std::size_t>(k)) continue;
      if (!is_eos && static_cast<std::int64_t>(next.size()) >= k) continue;
      Hypothesis h = alive[c.beam];
      h.log_prob = c.log_prob;
      if (!att.empty()) h.attention.push_back(attention_row(att, S, c.beam, len));
      if (is_eos) {
        h.ended = true;
        finished.push_back(std::move(h));
      } else {
        h.ids.push_back(c.token);
        next.push_back(std::move(h));
        parents.push_back(c.beam);
        next_y.push_back(c.token);
      }
    }
    if (static_cast<std::int64_t>(finished.size()) >= k || next.empty()) break;
    if (t + 1 == max_steps) {
      for (auto& h : next) finished.push_back(std::move(h));
      break;
    }
    state = state.reorder(ids_tensor(parents));
    alive = std::move(next);
    y = std::move(next_y);
  }

  auto normalised = [&](const Hypothesis& h) {
    const double steps = static_cast<double>(h.ids.size()) + (h.ended ? 1.0 : 0.0);
    return h.log_prob / std::pow(std::max(steps, 1.0), alpha);
  };
  // The first best in finishing order wins ties (stable, like the greedy decoder's argmax).
  const Hypothesis* best = &finished.front();
  for (const auto& h : finished)
    if (normalised(h) > normalised(*best)) best = &h;
  Translation tr;
  tr.ids = best->ids;
  tr.attention = best->attention;
  tr.ended = best->ended;
  tr.log_prob = best->log_prob;
  tr.score = normalised(*best);
  return tr;
}

}  // namespace

std::vector<Translation> beam_search(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                     std::int64_t beam_size, std::int64_t max_steps, double length_alpha) {
  check_sources(src, src_valid_len, "beam_search");
  DecodeOptions().beam_size(beam_size).max_steps(max_steps).length_alpha(length_alpha).validate();
  if (max_steps < 1) throw std::invalid_argument("beam_search: max_steps must be >= 1");
  nn::EvalModeGuard eval(model);
  // Sentences are independent searches: with several threads, each takes a contiguous share of
  // them (a sentence's search is the same code on any thread, so the same bits; tested).
  const std::int64_t B = src.size(0);
  std::vector<Translation> out(static_cast<std::size_t>(B));
  if (B == 0) return out;
  const auto shares = static_cast<int>(std::min<std::int64_t>(num_threads(), B));
  run_tasks(shares, [&](int i) {
    NoGradGuard no_grad;  // per thread
    for (std::int64_t b = B * i / shares; b < B * (i + 1) / shares; ++b)
      out[static_cast<std::size_t>(b)] = beam_one(model, narrow(src, 0, b, 1), narrow(src_valid_len, 0, b, 1), beam_size,
                                                  max_steps, length_alpha);
  });
  return out;
}

std::vector<Translation> decode(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                const DecodeOptions& options) {
  options.validate();
  check_sources(src, src_valid_len, "decode");
  const std::int64_t max_steps = options.max_steps() > 0 ? options.max_steps() : model.config().num_steps;
  if (options.beam_size() > 1)
    return beam_search(model, src, src_valid_len, options.beam_size(), max_steps, options.length_alpha());
  std::vector<Translation> out;
  const std::int64_t B = src.size(0), bs = options.batch_size();
  for (std::int64_t start = 0; start < B; start += bs) {
    const std::int64_t n = std::min(bs, B - start);
    auto part = greedy_decode(model, narrow(src, 0, start, n), narrow(src_valid_len, 0, start, n), max_steps);
    for (auto& tr : part) out.push_back(std::move(tr));
  }
  return out;
}

std::vector<Translation> translate_tokens(Seq2Seq& model, const std::vector<std::vector<std::string>>& sentences,
                                          const Vocab& src_vocab, const Vocab& tgt_vocab,
                                          const DecodeOptions& options) {
  SourceBatch batch = encode_sources(sentences, src_vocab, model.config().num_steps);
  std::vector<Translation> out = decode(model, batch.src, batch.valid_len, options);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].tokens = tgt_vocab.to_tokens(out[i].ids);
    out[i].source = std::move(batch.labels[i]);
    out[i].unknown_tokens = batch.unknown[i];
    out[i].source_length = batch.lengths[i];
  }
  return out;
}

std::vector<Translation> translate(Seq2Seq& model, const std::vector<std::string>& sentences,
                                   const Vocab& src_vocab, const Vocab& tgt_vocab, const DecodeOptions& options) {
  std::vector<std::vector<std::string>> tokens;
  tokens.reserve(sentences.size());
  for (const auto& s : sentences) tokens.push_back(tokenize_source(s));
  return translate_tokens(model, tokens, src_vocab, tgt_vocab, options);
}

}  // namespace tg::models
