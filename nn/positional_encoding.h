#pragma once
// Position information for attention models: the fixed sinusoidal encoding of Vaswani et al. (2017)
// as PyTorch's Transformer tutorial writes it (PositionalEncoding(d_model, dropout, max_len)), and a
// learned position embedding table. Both add the positions to their input and apply dropout:
// forward(x, start) = dropout(x + P[start : start + T]), where T is x's sequence length.
#include <cstdint>
#include <memory>
#include <string>

#include "autograd/tensor.h"
#include "nn/dropout.h"
#include "nn/module.h"

namespace tg {
class Generator;
}

namespace tg::nn {

/// Options of SinusoidalPositionalEncoding and LearnedPositionalEmbedding.
struct PositionalEncodingOptions {
  std::int64_t d_model;
  std::int64_t max_len = 5000;  ///< positions available: start + T <= max_len
  double dropout = 0.1;         ///< applied after the addition (the tutorial's default)
  bool batch_first = false;     ///< x is (T, N, E) by default, (N, T, E) with batch_first; (T, E) unbatched
  std::shared_ptr<Generator> generator{};  ///< dropout masks (null: the module's own Generator(0))
};

/// The (max_len, d_model) sinusoidal table: P[p, 2i] = sin(p w_i), P[p, 2i + 1] = cos(p w_i) with
/// w_i = exp(2i * -ln(10000) / d_model), computed in double (the tutorial's formula; an odd d_model
/// has one more sine column than cosine columns).
Tensor sinusoidal_position_table(std::int64_t max_len, std::int64_t d_model, DType dtype = DType::f32);

/// Fixed sinusoidal positions. The table is buffer "pe", registered non-persistent: not a parameter
/// (no gradient) and not in the state_dict, since it is a function of d_model and max_len (the
/// tutorial's persistent "pe", of shape (max_len, 1, d_model), is an unexpected key to
/// load_state_dict). The buffer is float64 (exact for float64 inputs) and follows to(); while it is
/// float64, a float32 input uses a float32 copy made at construction.
class SinusoidalPositionalEncodingImpl : public Module {
 public:
  using options_type = PositionalEncodingOptions;
  explicit SinusoidalPositionalEncodingImpl(const PositionalEncodingOptions& options);

  /// dropout(x + table[start : start + T]); start > 0 for incremental decoding. Throws
  /// std::invalid_argument when x's last dim is not d_model or the positions exceed max_len.
  Tensor forward(const Tensor& x, std::int64_t start = 0);
  Tensor operator()(const Tensor& x, std::int64_t start = 0) { return forward(x, start); }
  /// The table, buffer "pe": (max_len, d_model), float64 unless to() converted it.
  const Tensor& pe() const { return pe_; }
  const PositionalEncodingOptions& options() const { return options_; }
  std::string extra_repr() const override;

  Dropout dropout{nullptr};

 private:
  PositionalEncodingOptions options_;
  Tensor pe_;    // buffer "pe"
  Tensor pe32_;  // the float64 table rounded to float32, for float32 inputs while pe_ is float64
};
TG_MODULE(SinusoidalPositionalEncoding);

/// Learned positions: parameter "weight" (max_len, d_model) ~ N(0, 1) from `gen`, as an
/// nn.Embedding(max_len, d_model) (so such a PyTorch table loads with load_state_dict).
class LearnedPositionalEmbeddingImpl : public Module {
 public:
  using options_type = PositionalEncodingOptions;
  LearnedPositionalEmbeddingImpl(const PositionalEncodingOptions& options, Generator& gen);

  /// dropout(x + weight[start : start + T]); errors as SinusoidalPositionalEncoding.
  Tensor forward(const Tensor& x, std::int64_t start = 0);
  Tensor operator()(const Tensor& x, std::int64_t start = 0) { return forward(x, start); }
  const PositionalEncodingOptions& options() const { return options_; }
  std::string extra_repr() const override;

  Tensor weight;  ///< (max_len, d_model)
  Dropout dropout{nullptr};

 private:
  PositionalEncodingOptions options_;
};
TG_MODULE(LearnedPositionalEmbedding);

}  // namespace tg::nn
