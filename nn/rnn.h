#pragma once
// Recurrent layers as torch.nn.GRUCell, GRU, LSTMCell and LSTM: same parameter names, shapes,
// gate order, initialisation and formulas, so PyTorch state_dicts load unchanged.
//
// GRU (gates r, z, n):  r = σ(W_ir x + b_ir + W_hr h + b_hr),  z = σ(W_iz x + b_iz + W_hz h + b_hz),
//                       n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)),  h' = (1 - z) ⊙ n + z ⊙ h
// LSTM (gates i, f, g, o): i, f, o = σ(W_i* x + b_i* + W_h* h + b_h*), g = tanh(...),
//                       c' = f ⊙ c + i ⊙ g,  h' = o ⊙ tanh(c')
//
// The multi-layer GRU/LSTM compute the input projection x W_ihᵀ + b_ih of a whole layer with one
// matrix product before the time loop; each step then only multiplies the state by W_hh.
//
// Variable lengths: forward() takes optional `valid_lens` (i64, one length per batch entry). At a
// padded step (t >= len[b]) the state of entry b is left unchanged and its output is exactly 0.
// The reverse direction of a bidirectional layer therefore starts at each sequence's last valid
// token. h_n is the state after the last valid token (forward direction) and after t = 0 (reverse
// direction): the same as running each sequence alone, unpadded, and the same as PyTorch with a
// PackedSequence. Without valid_lens every step is run, padding included (as PyTorch and d2l do).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg {
class Generator;
}

namespace tg::nn {

/// Constructor arguments of GRU and LSTM (torch.nn.GRU / LSTM). Chainable setters; validated
/// once, when the layer is built:
///   GRU gru(GRUOptions(32, 64).num_layers(2).dropout(0.1).bidirectional(true), gen);
class RNNOptions {
 public:
  RNNOptions(std::int64_t input_size, std::int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  /// Number of stacked layers (default 1); layer k > 0 reads the (D * H) outputs of layer k - 1.
  RNNOptions& num_layers(std::int64_t v) { num_layers_ = v; return *this; }
  /// Whether the layers have bias_ih / bias_hh (default true).
  RNNOptions& bias(bool v) { bias_ = v; return *this; }
  /// Input and output as (B, T, feature) instead of (T, B, feature). h0/h_n stay (L*D, B, H).
  RNNOptions& batch_first(bool v) { batch_first_ = v; return *this; }
  /// Dropout on the outputs of every layer except the last (training mode only); p in [0, 1), as
  /// nn::Dropout (PyTorch also takes 1).
  RNNOptions& dropout(double v) { dropout_ = v; return *this; }
  /// Adds a reverse-direction pass per layer (D = 2); outputs are [forward, reverse] concatenated.
  RNNOptions& bidirectional(bool v) { bidirectional_ = v; return *this; }
  /// Generator of the between-layer dropout masks, shared with the caller; null (the default)
  /// makes the layer create its own Generator(0).
  RNNOptions& generator(std::shared_ptr<Generator> g) { generator_ = std::move(g); return *this; }

  // Getters, same names as the setters.
  std::int64_t input_size() const { return input_size_; }
  std::int64_t hidden_size() const { return hidden_size_; }
  std::int64_t num_layers() const { return num_layers_; }
  bool bias() const { return bias_; }
  bool batch_first() const { return batch_first_; }
  double dropout() const { return dropout_; }
  bool bidirectional() const { return bidirectional_; }
  const std::shared_ptr<Generator>& generator() const { return generator_; }
  /// Throws std::invalid_argument, prefixed by `who`, naming the first invalid option.
  void validate(const char* who) const;

 private:
  std::int64_t input_size_, hidden_size_;
  std::int64_t num_layers_ = 1;
  bool bias_ = true;
  bool batch_first_ = false;
  double dropout_ = 0.0;
  bool bidirectional_ = false;
  std::shared_ptr<Generator> generator_;
};
using GRUOptions = RNNOptions;
using LSTMOptions = RNNOptions;

/// The (h, c) state of an LSTM; either may be undefined on input (= zeros).
struct LSTMState {
  Tensor h;
  Tensor c;
};

/// What GRUCell and LSTMCell share (torch.nn.RNNCellBase): weight_ih (gates * H, in), weight_hh
/// (gates * H, H), bias_ih and bias_hh (gates * H), registered and initialised U(-1/sqrt(H),
/// 1/sqrt(H)) from `gen` in that order.
class RNNCellBase : public Module {
 public:
  std::string extra_repr() const override;
  std::int64_t input_size() const { return input_size_; }
  std::int64_t hidden_size() const { return hidden_size_; }

  Tensor weight_ih, weight_hh, bias_ih, bias_hh;  ///< biases undefined when bias = false

 protected:
  RNNCellBase(const char* who, int gates, std::int64_t input_size, std::int64_t hidden_size, Generator& gen, bool bias);

  std::int64_t input_size_, hidden_size_;
};

/// torch.nn.GRUCell: parameters weight_ih (3H, in), weight_hh (3H, H), bias_ih (3H), bias_hh (3H),
/// all U(-1/sqrt(H), 1/sqrt(H)) from `gen` in that order.
class GRUCellImpl : public RNNCellBase {
 public:
  GRUCellImpl(std::int64_t input_size, std::int64_t hidden_size, Generator& gen, bool bias = true);
  /// x (B, in) or (in), h (B, H) or (H) or undefined (= zeros) -> h' of h's shape.
  Tensor forward(const Tensor& x, const Tensor& h = Tensor()) const;
};
TG_MODULE(GRUCell);

/// torch.nn.LSTMCell: weight_ih (4H, in), weight_hh (4H, H), bias_ih (4H), bias_hh (4H), gate
/// order i, f, g, o; all U(-1/sqrt(H), 1/sqrt(H)) from `gen` in that order.
class LSTMCellImpl : public RNNCellBase {
 public:
  LSTMCellImpl(std::int64_t input_size, std::int64_t hidden_size, Generator& gen, bool bias = true);
  /// x (B, in) or (in), state (B, H) each or undefined (= zeros) -> {h', c'}.
  LSTMState forward(const Tensor& x, const LSTMState& state = {}) const;
};
TG_MODULE(LSTMCell);

/// What GRU and LSTM share: options, the parameters weight_ih_l{k}[_reverse], weight_hh_l{k}[...],
/// bias_ih_l{k}[...], bias_hh_l{k}[...] registered in PyTorch's order (layer 0 forward, layer 0
/// reverse, layer 1 ...), each U(-1/sqrt(H), 1/sqrt(H)) in that order, and the time loop.
class RNNBase : public Module {
 public:
  using options_type = RNNOptions;
  const RNNOptions& options() const { return options_; }
  /// The dropout-mask generator (never null).
  const std::shared_ptr<Generator>& generator() const { return gen_; }
  std::string extra_repr() const override;

 protected:
  RNNBase(const RNNOptions& options, int gates, Generator& gen, const char* who);
  /// Runs every layer; `c0` is used (and `c_n` returned) only by the LSTM.
  struct Result {
    Tensor output, h_n, c_n;
  };
  Result run(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& valid_lens);

 private:
  RNNOptions options_;
  int gates_;           // 3 (GRU) or 4 (LSTM)
  const char* who_;     // "GRU" / "LSTM" for error messages
  std::shared_ptr<Generator> gen_;
  std::vector<Tensor> weights_;  // registration order; 4 (or 2 without bias) per layer and direction
};

/// torch.nn.GRU over (T, B, input_size) (or (B, T, input_size) with batch_first).
class GRUImpl : public RNNBase {
 public:
  GRUImpl(const GRUOptions& options, Generator& gen);
  /// h0 (L*D, B, H) or undefined (= zeros); valid_lens i64 (B) or undefined (see the file
  /// comment). Returns {output (T, B, D*H) (batch-first if so configured), h_n (L*D, B, H)}.
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& h0 = Tensor(),
                                    const Tensor& valid_lens = Tensor());
};
TG_MODULE(GRU);

/// torch.nn.LSTM over (T, B, input_size) (or (B, T, input_size) with batch_first); no proj_size.
class LSTMImpl : public RNNBase {
 public:
  LSTMImpl(const LSTMOptions& options, Generator& gen);
  /// state: (h0, c0), each (L*D, B, H) or undefined (= zeros); valid_lens as for GRU.
  /// Returns {output (T, B, D*H), {h_n, c_n} each (L*D, B, H)}.
  std::pair<Tensor, LSTMState> forward(const Tensor& x, const LSTMState& state = {},
                                       const Tensor& valid_lens = Tensor());
};
TG_MODULE(LSTM);

}  // namespace tg::nn
