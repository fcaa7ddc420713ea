#pragma once
// Decoding for every Seq2Seq model: greedy (d2l's predict_seq2seq, batched over many sentences)
// and beam search with length normalisation. Both return, per sentence, the output tokens and the
// attention weights of every decoding step:
//
//   auto out = tg::models::translate(*model, {"go .", "i lost ."}, src_vocab, tgt_vocab,
//                                    tg::models::DecodeOptions().beam_size(4));
//   out[0].text();            // "va !"
//   out[0].attention[i][j];   // weight of source position j when output token i was produced
//
// Source side, as d2l's predict_seq2seq but with the data code's preprocessing: the sentence goes
// through preprocess_nmt and tokenize_nmt, gets `<eos>` appended, and is truncated or padded to
// the model's num_steps; the valid length is the number of tokens plus `<eos>` (at most
// num_steps). Target side: decoding starts from `<bos>` and stops at `<eos>` or after
// max_steps tokens (default num_steps).
//
// Both decoders run under NoGradGuard with the model in eval mode; the model's training mode is
// restored afterwards.
//
// Precision. DecodeOptions::precision(bf16) runs decode() (and so translate() and
// translate_tokens()) inside a tg::autocast::Guard: the matrix products read bf16-rounded operands
// and accumulate in float32 (autograd/autocast.h); the log-softmax, the argmax and the beam's scores
// stay float32/float64. greedy_decode() and beam_search() themselves take the autocast state of the
// thread that calls them and open the same state in every task they run on other threads (autocast
// is thread-local), so a caller's own Guard covers the whole decoding too.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/tensor.h"
#include "models/translators/seq2seq.h"
#include "models/text/text.h"

namespace tg::models {

/// How beam search normalises a finished hypothesis' log-probability by its length (steps = output
/// tokens, plus one for `<eos>` if produced).
enum class LengthPenalty {
  kSteps,  ///< score = log P / steps^alpha (alpha 1: mean log-probability per step)
  kGnmt,   ///< score = log P / ((5 + steps) / 6)^alpha (Wu et al. 2016, GNMT; alpha 0.6 there)
};
/// "steps" / "gnmt".
const char* to_string(LengthPenalty p);
/// Parses "steps" / "gnmt"; throws std::invalid_argument naming `what` otherwise.
LengthPenalty parse_length_penalty(const std::string& name, const std::string& what = "length penalty");

/// "fp32" / "bf16": the names the command line and training.json use.
const char* precision_name(autocast::Precision p);
/// Parses "fp32" / "bf16"; throws std::invalid_argument naming `what` otherwise.
autocast::Precision parse_precision(const std::string& name, const std::string& what = "precision");

/// Options of decode() / translate(). Chainable setters; validate() checks them.
class DecodeOptions {
 public:
  /// Maximum number of output tokens (`<eos>` included), at most limits::kMaxSteps; 0 (default) =
  /// the model's num_steps, or limits::kMaxSteps when max_len_a/max_len_b are set.
  DecodeOptions& max_steps(std::int64_t v) { max_steps_ = v; return *this; }
  /// Per-sentence limit relative to the source, as fairseq's --max-len-a/--max-len-b: a sentence
  /// stops after floor(a * source_len + b) steps (at least 1; at most max_steps), with source_len
  /// its valid length as the model sees it (tokens plus `<eos>`). Both 0 (default): no such limit.
  DecodeOptions& max_len_a(double v) { max_len_a_ = v; return *this; }
  DecodeOptions& max_len_b(std::int64_t v) { max_len_b_ = v; return *this; }
  /// The beam's length normalisation (default kSteps; see LengthPenalty).
  DecodeOptions& length_penalty(LengthPenalty v) { length_penalty_ = v; return *this; }
  /// 1 (default) = greedy decoding; k > 1 = beam search with k hypotheses.
  DecodeOptions& beam_size(std::int64_t v) { beam_size_ = v; return *this; }
  /// Beam search ranks finished hypotheses by log P / steps^alpha, with steps the number of
  /// decoding steps (output tokens, plus one for `<eos>` if it was produced). alpha = 0 ranks by
  /// raw log-probability (favours short outputs), 1 (default) by the mean log-probability per
  /// step.
  DecodeOptions& length_alpha(double v) { length_alpha_ = v; return *this; }
  /// Sentences decoded together by the greedy decoder (default 64). Beam search decodes groups of
  /// max(1, 64 / beam_size) sentences as one batch, whatever this is.
  DecodeOptions& batch_size(std::int64_t v) { batch_size_ = v; return *this; }
  /// Precision of the matrix products (default float32): bf16 decodes inside a
  /// tg::autocast::Guard (see the file comment). Weights are not changed.
  DecodeOptions& precision(autocast::Precision v) { precision_ = v; return *this; }

  std::int64_t max_steps() const { return max_steps_; }
  std::int64_t beam_size() const { return beam_size_; }
  double length_alpha() const { return length_alpha_; }
  std::int64_t batch_size() const { return batch_size_; }
  double max_len_a() const { return max_len_a_; }
  std::int64_t max_len_b() const { return max_len_b_; }
  LengthPenalty length_penalty() const { return length_penalty_; }
  autocast::Precision precision() const { return precision_; }
  /// True if max_len_a or max_len_b is set.
  bool relative_max_len() const { return max_len_a_ > 0 || max_len_b_ > 0; }
  /// The step limit of each sentence of a batch with these valid lengths, given the model's
  /// num_steps (the max_steps 0 default).
  std::vector<std::int64_t> step_limits(const std::vector<std::int64_t>& valid_lens, std::int64_t num_steps) const;
  /// Throws std::invalid_argument naming the first bad option.
  void validate() const;

 private:
  std::int64_t max_steps_ = 0;
  std::int64_t beam_size_ = 1;
  double length_alpha_ = 1.0;
  std::int64_t batch_size_ = 64;
  double max_len_a_ = 0.0;
  std::int64_t max_len_b_ = 0;
  LengthPenalty length_penalty_ = LengthPenalty::kSteps;
  autocast::Precision precision_ = autocast::Precision::f32;
};

/// The result of decoding one sentence.
struct Translation {
  std::vector<std::int64_t> ids;     ///< output token ids, without `<eos>`
  std::vector<std::string> tokens;   ///< their target-vocabulary tokens (filled by translate())
  /// Source labels of the attended positions: the source tokens the model saw (unknown words as
  /// `<unk>`) and `<eos>`, truncated to num_steps as the model saw them (filled by translate()).
  std::vector<std::string> source;
  /// Source tokens not in the vocabulary (read as `<unk>`), over the whole input (filled by translate()).
  std::int64_t unknown_tokens = 0;
  /// Source positions before truncation: the input's tokens plus `<eos>` (filled by translate()).
  /// More than source.size() when the input was cut to the model's num_steps.
  std::int64_t source_length = 0;
  bool ended = false;                ///< true if decoding stopped at `<eos>`, false if it hit max_steps
  /// One row per decoding step, the step that produced `<eos>` included (so ids.size() rows, plus
  /// one if `ended`); row i holds the weights used to produce output token i over the valid
  /// source positions (the source tokens and `<eos>`; the padding, which is masked, is dropped).
  /// Empty for models without attention (rnnencdec).
  std::vector<std::vector<float>> attention;
  double log_prob = 0.0;             ///< sum of the log-probabilities of every step (the `<eos>` step included)
  double score = 0.0;                ///< beam: log_prob / its length penalty; greedy: log_prob

  /// Number of decoding steps: ids.size() + (ended ? 1 : 0).
  std::int64_t steps() const { return static_cast<std::int64_t>(ids.size()) + (ended ? 1 : 0); }
  /// The output tokens joined by single spaces.
  std::string text() const;
  /// Output labels for attention rows: tokens, then "<eos>" if ended.
  std::vector<std::string> step_labels() const;
};

/// A batch of encoded source sentences.
struct SourceBatch {
  Tensor src;                                ///< i64 (B, num_steps)
  Tensor valid_len;                          ///< i64 (B)
  std::vector<std::vector<std::string>> labels;  ///< per sentence: Translation::source
  std::vector<std::int64_t> unknown;         ///< per sentence: Translation::unknown_tokens
  std::vector<std::int64_t> lengths;         ///< per sentence: Translation::source_length
};

/// The tokens of a raw sentence as the data code makes them: tokenize_nmt(preprocess_nmt(s)).
std::vector<std::string> tokenize_source(const std::string& sentence);

/// Encodes tokenised sentences: ids + `<eos>`, truncated/padded to num_steps (>= 1).
SourceBatch encode_sources(const std::vector<std::vector<std::string>>& sentences, const Vocab& src_vocab,
                           std::int64_t num_steps);

/// Greedy decoding of a batch: at each step the most probable token (the first one on ties) is
/// fed back; rows finish independently and decoding stops once every row has produced `<eos>` or
/// after max_steps steps (> 0). With several threads a batch of at least 64 sentences decodes as
/// one slice per thread, each sentence the same bits as on one thread. Fills ids, ended,
/// log_prob, score, and attention unless keep_attention is false (throughput runs that never look
/// at the weights).
std::vector<Translation> greedy_decode(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                       std::int64_t max_steps, bool keep_attention = true);
/// The same with a step limit per sentence (each >= 1).
std::vector<Translation> greedy_decode(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                       const std::vector<std::int64_t>& step_limits, bool keep_attention = true);

/// Batched beam search: groups of max(1, 64 / k) sentences are searched together, the live
/// hypotheses of all of them as the rows of one batch (DecoderState::reorder follows the
/// survivors and drops the rows of finished sentences); with several threads, groups run at once.
/// The groups do not depend on the thread count, so neither do the results. For each sentence, at
/// each step the 2k best continuations by cumulative log-probability are scanned in order: a
/// continuation ending in `<eos>` that ranks among the first k is finished; the others fill the k
/// live hypotheses. A sentence stops once k hypotheses have finished, no live hypothesis is left,
/// or after its step limit (live hypotheses then count as finished without `<eos>`). The best
/// finished hypothesis by the length-normalised score (LengthPenalty) is returned. beam_size = 1
/// gives the greedy result (the same tokens, attention and log_prob; its score is length-normalised).
std::vector<Translation> beam_search(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                     std::int64_t beam_size, std::int64_t max_steps, double length_alpha = 1.0);
/// The same with options' beam size, length penalty and alpha, and per-sentence step limits.
std::vector<Translation> beam_search(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                     const std::vector<std::int64_t>& step_limits, const DecodeOptions& options);

/// greedy_decode (beam_size 1, in batches of options.batch_size()) or beam_search on encoded
/// sources, with DecodeOptions::step_limits, inside a tg::autocast::Guard of options.precision()
/// (f32 turns off a caller's autocast for the call).
std::vector<Translation> decode(Seq2Seq& model, const Tensor& src, const Tensor& src_valid_len,
                                const DecodeOptions& options = DecodeOptions());

/// Tokenised sentences → translations with tokens and source labels filled in.
std::vector<Translation> translate_tokens(Seq2Seq& model, const std::vector<std::vector<std::string>>& sentences,
                                          const Vocab& src_vocab, const Vocab& tgt_vocab,
                                          const DecodeOptions& options = DecodeOptions());

/// Raw sentences (preprocessed with tokenize_source) → translations.
std::vector<Translation> translate(Seq2Seq& model, const std::vector<std::string>& sentences,
                                   const Vocab& src_vocab, const Vocab& tgt_vocab,
                                   const DecodeOptions& options = DecodeOptions());

}  // namespace tg::models
