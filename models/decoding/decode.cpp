// Greedy decoding and beam search over the Seq2Seq step interface.
#include "models/decoding/decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "autograd/error_text.h"
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

const char* to_string(LengthPenalty p) { return p == LengthPenalty::kGnmt ? "gnmt" : "steps"; }

const char* precision_name(autocast::Precision p) {
  switch (p) {
    case autocast::Precision::f32: return "fp32";
    case autocast::Precision::bf16: return "bf16";
  }
  return "?";
}

autocast::Precision parse_precision(const std::string& name, const std::string& what) {
  if (name == "fp32") return autocast::Precision::f32;
  if (name == "bf16") return autocast::Precision::bf16;
  throw std::invalid_argument(what + ": expected fp32 or bf16, got '" + elide(name) + "'");
}

LengthPenalty parse_length_penalty(const std::string& name, const std::string& what) {
  if (name == "steps") return LengthPenalty::kSteps;
  if (name == "gnmt") return LengthPenalty::kGnmt;
  throw std::invalid_argument(what + ": expected steps or gnmt, got '" + name + "'");
}

std::vector<std::int64_t> DecodeOptions::step_limits(const std::vector<std::int64_t>& valid_lens,
                                                     std::int64_t num_steps) const {
  const std::int64_t cap = max_steps_ > 0 ? max_steps_ : relative_max_len() ? limits::kMaxSteps : num_steps;
  std::vector<std::int64_t> out;
  out.reserve(valid_lens.size());
  for (std::int64_t len : valid_lens) {
    std::int64_t limit = cap;
    if (relative_max_len()) {
      const double v = std::floor(max_len_a_ * static_cast<double>(len) + static_cast<double>(max_len_b_));
      limit = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::min<double>(v, static_cast<double>(cap))), 1, cap);
    }
    out.push_back(std::max<std::int64_t>(limit, 1));
  }
  return out;
}

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
  if (!std::isfinite(max_len_a_) || max_len_a_ < 0 || max_len_a_ > limits::kMaxSteps)
    throw std::invalid_argument("decode: max_len_a must be in [0, " + std::to_string(limits::kMaxSteps) + "]");
  if (max_len_b_ < 0 || max_len_b_ > limits::kMaxSteps)
    throw std::invalid_argument("decode: max_len_b = " + std::to_string(max_len_b_) + " is out of range [0, " +
                                std::to_string(limits::kMaxSteps) + "]");
  if (precision_ != autocast::Precision::f32 && precision_ != autocast::Precision::bf16)
    throw std::invalid_argument("decode: precision = " + std::to_string(static_cast<int>(precision_)) +
                                " is not fp32 or bf16");
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
                                     const std::vector<std::int64_t>& limits, bool keep_attention) {
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
  const std::int64_t max_steps = *std::max_element(limits.begin(), limits.end());
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
        if (t + 1 >= limits[b]) {  // this sentence's step limit: stops without <eos>
          done[b] = true;
          --remaining;
        }
      }
    }
  }
  for (auto& tr : out) tr.score = tr.log_prob;
  return out;
}

// Rows per slice when a batch is decoded as slices on several threads. From 32 rows on, a slice
// takes the same kernel paths as the whole batch (the GEMM's skinny path is for at most 4 rows),
// so each row comes out the same bits either way (tests/models/decoding/test_decode.cpp).
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
  return greedy_decode(model, src, src_valid_len, std::vector<std::int64_t>(static_cast<std::size_t>(src.size(0)), max_steps),
                       keep_attention);
}

std::vector<Translation> greedy_decode(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                       const std::vector<std::int64_t>& step_limits, bool keep_attention) {
  check_sources(src, src_valid_len, "greedy_decode");
  const std::int64_t B = src.size(0);
  if (static_cast<std::int64_t>(step_limits.size()) != B)
    throw std::invalid_argument("greedy_decode: " + std::to_string(step_limits.size()) + " step limits for " +
                                std::to_string(B) + " sentences");
  for (std::int64_t v : step_limits)
    if (v < 1) throw std::invalid_argument("greedy_decode: step limits must be >= 1");
  nn::EvalModeGuard eval(model);
  const auto slices = static_cast<int>(std::min<std::int64_t>(num_threads(), B / kMinRowsPerSlice));
  if (slices <= 1) return greedy_rows(model, src, src_valid_len, step_limits, keep_attention);
  std::vector<Translation> out(static_cast<std::size_t>(B));
  const bool autocast_on = autocast::is_enabled();  // the caller's, carried into every task (thread-local)
  run_tasks(slices, [&](int i) {
    const autocast::Guard precision(autocast_on ? autocast::Precision::bf16 : autocast::Precision::f32);
    const std::int64_t begin = B * i / slices, end = B * (i + 1) / slices;
    const std::vector<std::int64_t> limits(step_limits.begin() + begin, step_limits.begin() + end);
    std::vector<Translation> slice = greedy_rows(model, narrow(src, 0, begin, end - begin),
                                                 narrow(src_valid_len, 0, begin, end - begin), limits, keep_attention);
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

// One sentence's search within a group.
struct SentenceBeam {
  std::vector<Hypothesis> alive{1};  // starts with the empty hypothesis
  std::vector<Hypothesis> finished;
  std::int64_t limit = 0;            // step limit
  std::int64_t len = 0;              // source valid length (attention rows are cut to it)
  bool done = false;
};

double length_penalty(LengthPenalty p, double steps, double alpha) {
  if (p == LengthPenalty::kGnmt) return std::pow((5.0 + steps) / 6.0, alpha);
  return std::pow(std::max(steps, 1.0), alpha);
}

// Beam search over a group of sentences whose live hypotheses share one batch: the rows of the
// batch are the live hypotheses of the unfinished sentences, in sentence order.
std::vector<Translation> beam_group(Seq2Seq& model, const Tensor& src, const Tensor& valid_len,
                                    const std::vector<std::int64_t>& limits, std::int64_t k, double alpha,
                                    LengthPenalty penalty) {
  const std::int64_t G = src.size(0), S = src.size(1);
  const std::vector<std::int64_t> lens = valid_len.to_vector<std::int64_t>();
  std::vector<SentenceBeam> beams(static_cast<std::size_t>(G));
  for (std::int64_t g = 0; g < G; ++g) beams[g].limit = limits[g], beams[g].len = lens[g];
  DecoderState state = model.begin(src, valid_len);
  std::vector<std::int64_t> y(static_cast<std::size_t>(G), Vocab::kBos);

  struct Candidate {
    double log_prob;
    std::int64_t beam, token;
  };
  // Best first; ties by beam then token, so the order never depends on the sort's internals.
  auto better = [](const Candidate& a, const Candidate& b) {
    if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
    if (a.beam != b.beam) return a.beam < b.beam;
    return a.token < b.token;
  };
  std::vector<Candidate> cands;
  for (std::int64_t t = 0;; ++t) {
    const Tensor logits = model.step(ids_tensor(y), state);
    const auto lp = log_probs(logits);
    std::vector<double> att;
    if (state.attention.defined()) att = state.attention.to_vector<double>();

    std::vector<std::int64_t> parents, next_y;
    std::int64_t row0 = 0;  // first batch row of the current sentence
    for (SentenceBeam& sb : beams) {
      if (sb.done) continue;
      const auto rows = static_cast<std::int64_t>(sb.alive.size());
      cands.clear();
      for (std::int64_t b = 0; b < rows; ++b)
        for (std::size_t v = 0; v < lp[row0 + b].size(); ++v)
          cands.push_back({.log_prob = sb.alive[b].log_prob + lp[row0 + b][v], .beam = b,
                           .token = static_cast<std::int64_t>(v)});
      const auto keep = std::min<std::size_t>(cands.size(), static_cast<std::size_t>(2 * k));
      std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(keep), cands.end(), better);

      std::vector<Hypothesis> next;
      std::vector<std::int64_t> my_parents, my_y;
      for (std::size_t r = 0; r < keep; ++r) {
        const Candidate& c = cands[r];
        const bool is_eos = c.token == Vocab::kEos;
        if (is_eos && r >= static_cast<std::size_t>(k)) continue;
        if (!is_eos && static_cast<std::int64_t>(next.size()) >= k) continue;
        Hypothesis h = sb.alive[c.beam];
        h.log_prob = c.log_prob;
        if (!att.empty()) h.attention.push_back(attention_row(att, S, row0 + c.beam, sb.len));
        if (is_eos) {
          h.ended = true;
          sb.finished.push_back(std::move(h));
        } else {
          h.ids.push_back(c.token);
          next.push_back(std::move(h));
          my_parents.push_back(row0 + c.beam);
          my_y.push_back(c.token);
        }
      }
      row0 += rows;
      if (static_cast<std::int64_t>(sb.finished.size()) >= k || next.empty()) {
        sb.done = true;
      } else if (t + 1 >= sb.limit) {
        for (auto& h : next) sb.finished.push_back(std::move(h));
        sb.done = true;
      } else {
        sb.alive = std::move(next);
        parents.insert(parents.end(), my_parents.begin(), my_parents.end());
        next_y.insert(next_y.end(), my_y.begin(), my_y.end());
      }
    }
    if (parents.empty()) break;  // every sentence is done
    state = state.reorder(ids_tensor(parents));
    y = std::move(next_y);
  }

  std::vector<Translation> out(static_cast<std::size_t>(G));
  for (std::int64_t g = 0; g < G; ++g) {
    const auto& finished = beams[g].finished;
    auto normalised = [&](const Hypothesis& h) {
      const double steps = static_cast<double>(h.ids.size()) + (h.ended ? 1.0 : 0.0);
      return h.log_prob / length_penalty(penalty, steps, alpha);
    };
    // The first best in finishing order wins ties (stable, like the greedy decoder's argmax).
    const Hypothesis* best = &finished.front();
    for (const auto& h : finished)
      if (normalised(h) > normalised(*best)) best = &h;
    Translation& tr = out[g];
    tr.ids = best->ids;
    tr.attention = best->attention;
    tr.ended = best->ended;
    tr.log_prob = best->log_prob;
    tr.score = normalised(*best);
  }
  return out;
}

// Hypothesis rows per beam-search batch: groups of max(1, kBeamRows / k) sentences.
constexpr std::int64_t kBeamRows = 64;

}  // namespace

std::vector<Translation> beam_search(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                     std::int64_t beam_size, std::int64_t max_steps, double length_alpha) {
  check_sources(src, src_valid_len, "beam_search");
  const DecodeOptions options = DecodeOptions().beam_size(beam_size).max_steps(max_steps).length_alpha(length_alpha);
  options.validate();
  if (max_steps < 1) throw std::invalid_argument("beam_search: max_steps must be >= 1");
  return beam_search(model, src, src_valid_len, std::vector<std::int64_t>(static_cast<std::size_t>(src.size(0)), max_steps),
                     options);
}

std::vector<Translation> beam_search(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                     const std::vector<std::int64_t>& step_limits, const DecodeOptions& options) {
  check_sources(src, src_valid_len, "beam_search");
  options.validate();
  const std::int64_t B = src.size(0), k = options.beam_size();
  if (static_cast<std::int64_t>(step_limits.size()) != B)
    throw std::invalid_argument("beam_search: " + std::to_string(step_limits.size()) + " step limits for " +
                                std::to_string(B) + " sentences");
  for (std::int64_t v : step_limits)
    if (v < 1) throw std::invalid_argument("beam_search: step limits must be >= 1");
  nn::EvalModeGuard eval(model);
  std::vector<Translation> out(static_cast<std::size_t>(B));
  if (B == 0) return out;
  // Fixed groups, whatever the thread count, so every result is the same bits on any number of
  // threads; the threads take groups in turn.
  const std::int64_t per_group = std::max<std::int64_t>(1, kBeamRows / k);
  const std::int64_t groups = (B + per_group - 1) / per_group;
  const auto shares = static_cast<int>(std::min<std::int64_t>(num_threads(), groups));
  const bool autocast_on = autocast::is_enabled();  // the caller's, carried into every task (thread-local)
  run_tasks(shares, [&](int i) {
    NoGradGuard no_grad;  // per thread
    const autocast::Guard precision(autocast_on ? autocast::Precision::bf16 : autocast::Precision::f32);
    for (std::int64_t g = i; g < groups; g += shares) {
      const std::int64_t begin = g * per_group, n = std::min(per_group, B - begin);
      const std::vector<std::int64_t> limits(step_limits.begin() + begin, step_limits.begin() + begin + n);
      auto part = beam_group(model, narrow(src, 0, begin, n), narrow(src_valid_len, 0, begin, n), limits, k,
                             options.length_alpha(), options.length_penalty());
      std::move(part.begin(), part.end(), out.begin() + begin);
    }
  });
  return out;
}

std::vector<Translation> decode(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                const DecodeOptions& options) {
  options.validate();
  check_sources(src, src_valid_len, "decode");
  const autocast::Guard precision(options.precision());
  const std::vector<std::int64_t> limits =
      options.step_limits(src_valid_len.to_vector<std::int64_t>(), model.config().num_steps);
  if (options.beam_size() > 1) return beam_search(model, src, src_valid_len, limits, options);
  std::vector<Translation> out;
  const std::int64_t B = src.size(0), bs = options.batch_size();
  for (std::int64_t start = 0; start < B; start += bs) {
    const std::int64_t n = std::min(bs, B - start);
    auto part = greedy_decode(model, narrow(src, 0, start, n), narrow(src_valid_len, 0, start, n),
                              std::vector<std::int64_t>(limits.begin() + start, limits.begin() + start + n));
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
