#pragma once
// Attention scoring layers as in d2l.ai (chapter "Attention Scoring Functions"): additive
// (Bahdanau) and dot-product (Luong / scaled, "Attention Is All You Need") attention with d2l's
// masked softmax over valid lengths.
//
// Shapes: queries (B, Q, q), keys (B, K, k), values (B, K, v) -> (B, Q, v). valid_lens is
// undefined (no mask), i64 (B) (one length per batch entry) or i64 (B, Q) (one per query): key
// positions at or beyond the length get score -1e6 before the softmax (finite, so a fully masked
// row gives uniform weights, never NaN), as tg::masked_softmax.
//
// Dropout is applied to the attention weights (training mode only) with masks from a generator
// given in the options and shared with the caller; when null the layer creates its own
// Generator(0).
#include <cstdint>
#include <memory>
#include <string>

#include "autograd/tensor.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace tg {
class Generator;
}

namespace tg::nn {

/// Options of AdditiveAttention. Chainable setters; validated when the layer is built.
class AdditiveAttentionOptions {
 public:
  AdditiveAttentionOptions(std::int64_t key_size, std::int64_t query_size, std::int64_t num_hiddens)
      : key_size_(key_size), query_size_(query_size), num_hiddens_(num_hiddens) {}
  /// Dropout probability on the attention weights (default 0).
  AdditiveAttentionOptions& dropout(double v) { dropout_ = v; return *this; }
  /// Generator of the dropout masks (null: the layer creates its own Generator(0)).
  AdditiveAttentionOptions& generator(std::shared_ptr<Generator> g) { generator_ = std::move(g); return *this; }

  std::int64_t key_size() const { return key_size_; }
  std::int64_t query_size() const { return query_size_; }
  std::int64_t num_hiddens() const { return num_hiddens_; }
  double dropout() const { return dropout_; }
  const std::shared_ptr<Generator>& generator() const { return generator_; }

 private:
  std::int64_t key_size_, query_size_, num_hiddens_;
  double dropout_ = 0.0;
  std::shared_ptr<Generator> generator_;
};

/// d2l's AdditiveAttention: scores = w_v(tanh(W_q q[:, :, None] + W_k k[:, None, :])).squeeze(-1),
/// out = dropout(masked_softmax(scores, valid_lens)) @ values. Children, in PyTorch's order:
/// "W_k" Linear(key_size, num_hiddens, bias=false), "W_q" Linear(query_size, num_hiddens,
/// bias=false), "w_v" Linear(num_hiddens, 1, bias=false) (torch.nn.Linear init from `gen`, in that
/// order) and "dropout" (no parameters).
class AdditiveAttentionImpl : public Module {
 public:
  using options_type = AdditiveAttentionOptions;
  AdditiveAttentionImpl(const AdditiveAttentionOptions& options, Generator& gen);
  AdditiveAttentionImpl(std::int64_t key_size, std::int64_t query_size, std::int64_t num_hiddens, double dropout,
                        Generator& gen);

  /// queries (B, Q, query_size), keys (B, K, key_size), values (B, K, v) -> (B, Q, v).
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values, const Tensor& valid_lens = Tensor());
  /// W_q queries: (B, Q, query_size) -> (B, Q, num_hiddens).
  Tensor project_queries(const Tensor& queries) const;
  /// W_k keys: (B, K, key_size) -> (B, K, num_hiddens). A decoder that attends to the same keys at
  /// every step computes this once per sentence and calls forward_projected().
  Tensor project_keys(const Tensor& keys) const;
  /// forward() with the projections already applied: query_proj (B, Q, H), key_proj (B, K, H).
  /// With `weights`, the weights (B, Q, K) go there instead of into the module, which the call
  /// then leaves untouched: one module may so run on several threads at once (parallel decoding)
  /// in eval mode or with dropout 0 (the dropout generator is shared).
  Tensor forward_projected(const Tensor& query_proj, const Tensor& key_proj, const Tensor& values,
                           const Tensor& valid_lens = Tensor(), Tensor* weights = nullptr);
  /// Weights (B, Q, K) of the last forward, before dropout, detached (for visualisation).
  const Tensor& attention_weights() const { return attention_weights_; }
  const AdditiveAttentionOptions& options() const { return options_; }

  Linear W_k{nullptr}, W_q{nullptr}, w_v{nullptr};
  Dropout dropout{nullptr};

 private:
  AdditiveAttentionOptions options_;
  Tensor attention_weights_;
};
TG_MODULE(AdditiveAttention);

/// Options of DotProductAttention. Chainable setters; validated when the layer is built.
class DotProductAttentionOptions {
 public:
  DotProductAttentionOptions() = default;
  /// Dropout probability on the attention weights (default 0).
  DotProductAttentionOptions& dropout(double v) { dropout_ = v; return *this; }
  /// Divide the scores by sqrt(d) (default true); false gives Luong's plain dot score.
  DotProductAttentionOptions& scaled(bool v) { scaled_ = v; return *this; }
  /// Generator of the dropout masks (null: the layer creates its own Generator(0)).
  DotProductAttentionOptions& generator(std::shared_ptr<Generator> g) { generator_ = std::move(g); return *this; }

  double dropout() const { return dropout_; }
  bool scaled() const { return scaled_; }
  const std::shared_ptr<Generator>& generator() const { return generator_; }

 private:
  double dropout_ = 0.0;
  bool scaled_ = true;
  std::shared_ptr<Generator> generator_;
};

/// Dot-product attention: scores = Q Kᵀ / sqrt(d) (or Q Kᵀ unscaled), then d2l's masked softmax,
/// dropout and weights @ values. No parameters; child "dropout".
class DotProductAttentionImpl : public Module {
 public:
  using options_type = DotProductAttentionOptions;
  explicit DotProductAttentionImpl(const DotProductAttentionOptions& options = DotProductAttentionOptions());
  explicit DotProductAttentionImpl(double dropout, bool scaled = true);

  /// queries (B, Q, d), keys (B, K, d), values (B, K, v) -> (B, Q, v). With `weights`, the
  /// weights go there and the module is left untouched (as AdditiveAttention::forward_projected).
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values, const Tensor& valid_lens = Tensor(),
                 Tensor* weights = nullptr);
  /// Weights (B, Q, K) of the last forward, before dropout, detached (for visualisation).
  const Tensor& attention_weights() const { return attention_weights_; }
  const DotProductAttentionOptions& options() const { return options_; }
  std::string extra_repr() const override;

  Dropout dropout{nullptr};

 private:
  DotProductAttentionOptions options_;
  Tensor attention_weights_;
};
TG_MODULE(DotProductAttention);

}  // namespace tg::nn
