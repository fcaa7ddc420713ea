#pragma once
// A fake Seq2Seq whose next-token distribution is scripted as a function of the source's first
// token and the tokens emitted so far, for testing the decoders without training anything.
// Its attention at step t puts weight 1 on source position t mod valid_len.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_shape.h"
#include "models/text/text.h"
#include "models/translators/seq2seq.h"

namespace tg::models::testing {

/// probabilities over the target vocabulary given (source first token, prefix without <bos>).
using Script = std::function<std::vector<double>(std::int64_t src0, const std::vector<std::int64_t>& prefix)>;

class ScriptedModel : public Seq2Seq {
 public:
  static constexpr std::int64_t kMaxPrefix = 32;

  ScriptedModel(ModelConfig config, Script script) : Seq2Seq(std::move(config)), script_(std::move(script)) {
    register_parameter("dummy", Tensor::zeros({1}));
  }

  DecoderState begin(const Tensor& src, const Tensor& src_valid_len) override {
    const std::int64_t B = src.size(0), S = src.size(1);
    DecoderState st;
    st.memory = reshape(src.to(DType::f32), {B, S, 1});
    st.valid_len = src_valid_len;
    st.hidden = Tensor::zeros({1, B, kMaxPrefix + 1});  // [length, tokens...]
    ++begin_calls;
    return st;
  }

  Tensor step(const Tensor& y_prev, DecoderState& st) override {
    const std::int64_t B = y_prev.size(0), S = st.memory.size(1), V = config_.tgt_vocab;
    std::vector<float> h = st.hidden.to_vector<float>();
    const std::vector<float> mem = st.memory.to_vector<float>();
    const std::vector<std::int64_t> y = y_prev.to_vector<std::int64_t>();
    const std::vector<std::int64_t> len = st.valid_len.to_vector<std::int64_t>();
    std::vector<float> logits(static_cast<std::size_t>(B * V)), att(static_cast<std::size_t>(B * S), 0.0f);
    for (std::int64_t b = 0; b < B; ++b) {
      float* row = h.data() + b * (kMaxPrefix + 1);
      const auto n = static_cast<std::int64_t>(row[0]);
      std::vector<std::int64_t> prefix;
      for (std::int64_t i = 0; i < n; ++i) prefix.push_back(static_cast<std::int64_t>(row[1 + i]));
      if (y[b] != Vocab::kBos) {
        prefix.push_back(y[b]);
        row[1 + n] = static_cast<float>(y[b]);
        row[0] = static_cast<float>(n + 1);
      }
      const auto p = script_(static_cast<std::int64_t>(mem[b * S]), prefix);
      for (std::int64_t v = 0; v < V; ++v) logits[b * V + v] = static_cast<float>(std::log(p[v]));
      att[b * S + static_cast<std::int64_t>(prefix.size()) % len[b]] = 1.0f;
    }
    st.hidden = Tensor::from_vector(h, st.hidden.shape());
    st.attention = Tensor::from_vector(att, {B, S});
    ++step_calls;
    return Tensor::from_vector(logits, {B, V});
  }

  // Atomic: the decoders call begin() and step() from several threads at once.
  std::atomic<int> begin_calls{0};
  std::atomic<int> step_calls{0};

 private:
  Script script_;
};

}  // namespace tg::models::testing
