#include "nn/rnn.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_rnn.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "nn/init.h"

namespace tg::nn {

namespace {

std::string shape_str(const Tensor& t) { return t.defined() ? t.shape().str() : "undefined"; }

/// Splits x (steps * rows, cols) into `steps` consecutive (rows, cols) views (torch.unbind of the
/// time axis); one step is x itself (a decoder's call, or one layer's initial state).
PooledVector<Tensor> split_steps(const Tensor& x, std::int64_t steps) {
  const PooledVector<std::int64_t> sizes(static_cast<std::size_t>(steps), x.size(0) / steps);
  return split_with_sizes(x, sizes, 0);
}

/// One GRU step from the precomputed input projection gi = x W_ihᵀ + b_ih (B, 3H).
Tensor gru_step(const Tensor& gi, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh) {
  return gru_cell_fused(gi, linear(h, w_hh, b_hh), h);  // the gates in one pass and one tape node
}

/// One LSTM step from gi = x W_ihᵀ + b_ih (B, 4H).
LSTMState lstm_step(const Tensor& gi, const Tensor& h, const Tensor& c, const Tensor& w_hh, const Tensor& b_hh) {
  const std::int64_t H = h.size(1);
  const Tensor gates = gi + linear(h, w_hh, b_hh);
  const Tensor if_ = sigmoid(narrow(gates, 1, 0, 2 * H));
  const Tensor g = tanh(narrow(gates, 1, 2 * H, H));
  const Tensor o = sigmoid(narrow(gates, 1, 3 * H, H));
  const Tensor c_new = narrow(if_, 1, H, H) * c + narrow(if_, 1, 0, H) * g;
  return {o * tanh(c_new), c_new};
}

void check_cell_sizes(const char* who, std::int64_t input_size, std::int64_t hidden_size) {
  if (input_size <= 0 || hidden_size <= 0)
    throw std::invalid_argument(std::string(who) + ": input_size and hidden_size must be positive, got " +
                                std::to_string(input_size) + " and " + std::to_string(hidden_size));
}

/// Validates a cell's input and state; returns them as 2-D tensors (the state zeros if undefined).
struct CellArgs {
  Tensor x;
  PooledVector<Tensor> states;
  bool unbatched;
};
CellArgs cell_args(const char* who, const Tensor& x, PooledVector<Tensor> states, std::int64_t input_size,
                   std::int64_t hidden_size, DType dtype) {
  if (!x.defined() || (x.dim() != 1 && x.dim() != 2) || x.size(-1) != input_size)
    throw std::invalid_argument(std::string(who) + ": input must be (B, " + std::to_string(input_size) + ") or (" +
                                std::to_string(input_size) + "), got " + shape_str(x));
  if (x.dtype() != dtype)
    throw std::invalid_argument(std::string(who) + ": input is " + std::string(dtype_name(x.dtype())) +
                                " but the parameters are " + std::string(dtype_name(dtype)));
  const bool unbatched = x.dim() == 1;
  CellArgs a{.x = unbatched ? unsqueeze(x, 0) : x, .states = {}, .unbatched = unbatched};
  const Shape want = unbatched ? Shape{hidden_size} : Shape{x.size(0), hidden_size};
  for (auto& s : states) {
    if (!s.defined()) {
      a.states.push_back(Tensor::zeros({a.x.size(0), hidden_size}, dtype));
      continue;
    }
    if (!(s.shape() == want) || s.dtype() != dtype)
      throw std::invalid_argument(std::string(who) + ": state must be " + std::string(dtype_name(dtype)) + " " +
                                  want.str() + " for input " + x.shape().str() + ", got " +
                                  std::string(dtype_name(s.dtype())) + " " + s.shape().str());
    a.states.push_back(unbatched ? unsqueeze(s, 0) : s);
  }
  return a;
}

/// Registers weight_ih, weight_hh, bias_ih, bias_hh (+ suffix) and draws them U(-k, k), k = 1/sqrt(H).
std::vector<Tensor> register_rnn_weights(Module& m, const std::string& suffix, std::int64_t gates_h,
                                         std::int64_t in, std::int64_t hidden, bool bias) {
  std::vector<Tensor> w;
  w.push_back(m.register_parameter("weight_ih" + suffix, Tensor::empty({gates_h, in})));
  w.push_back(m.register_parameter("weight_hh" + suffix, Tensor::empty({gates_h, hidden})));
  if (bias) {
    w.push_back(m.register_parameter("bias_ih" + suffix, Tensor::empty({gates_h})));
    w.push_back(m.register_parameter("bias_hh" + suffix, Tensor::empty({gates_h})));
  }
  return w;
}

void init_uniform(const std::vector<Tensor>& ws, std::int64_t hidden, Generator& gen) {
  const double k = 1.0 / std::sqrt(static_cast<double>(hidden));
  for (const Tensor& w : ws) init::uniform_(w, gen, -k, k);
}

}  // namespace

// ---- cells ---------------------------------------------------------------------------------------

RNNCellBase::RNNCellBase(const char* who, int gates, std::int64_t input_size, std::int64_t hidden_size,
                         Generator& gen, bool bias)
    : input_size_(input_size), hidden_size_(hidden_size) {
  check_cell_sizes(who, input_size, hidden_size);
  auto w = register_rnn_weights(*this, "", gates * hidden_size, input_size, hidden_size, bias);
  weight_ih = w[0], weight_hh = w[1];
  if (bias) bias_ih = w[2], bias_hh = w[3];
  init_uniform(w, hidden_size, gen);
}

std::string RNNCellBase::extra_repr() const {
  return std::to_string(input_size_) + ", " + std::to_string(hidden_size_) + (bias_ih.defined() ? "" : ", bias=false");
}

GRUCellImpl::GRUCellImpl(std::int64_t input_size, std::int64_t hidden_size, Generator& gen, bool bias)
    : RNNCellBase("GRUCell", 3, input_size, hidden_size, gen, bias) {}

Tensor GRUCellImpl::forward(const Tensor& x, const Tensor& h) const {
  const CellArgs a = cell_args("GRUCell", x, {h}, input_size_, hidden_size_, weight_ih.dtype());
  const Tensor h_new = gru_step(linear(a.x, weight_ih, bias_ih), a.states[0], weight_hh, bias_hh);
  return a.unbatched ? squeeze(h_new, 0) : h_new;
}

LSTMCellImpl::LSTMCellImpl(std::int64_t input_size, std::int64_t hidden_size, Generator& gen, bool bias)
    : RNNCellBase("LSTMCell", 4, input_size, hidden_size, gen, bias) {}

LSTMState LSTMCellImpl::forward(const Tensor& x, const LSTMState& state) const {
  const CellArgs a = cell_args("LSTMCell", x, {state.h, state.c}, input_size_, hidden_size_, weight_ih.dtype());
  LSTMState s = lstm_step(linear(a.x, weight_ih, bias_ih), a.states[0], a.states[1], weight_hh, bias_hh);
  if (a.unbatched) s = {squeeze(s.h, 0), squeeze(s.c, 0)};
  return s;
}

// ---- options -------------------------------------------------------------------------------------

void RNNOptions::validate(const char* who) const {
  const std::string w(who);
  if (input_size_ <= 0) throw std::invalid_argument(w + ": input_size must be positive, got " + std::to_string(input_size_));
  if (hidden_size_ <= 0)
    throw std::invalid_argument(w + ": hidden_size must be positive, got " + std::to_string(hidden_size_));
  if (num_layers_ < 1) throw std::invalid_argument(w + ": num_layers must be at least 1, got " + std::to_string(num_layers_));
  if (!(dropout_ >= 0.0 && dropout_ < 1.0))
    throw std::invalid_argument(w + ": dropout must be in [0, 1), got " + std::to_string(dropout_));
}

// ---- multi-layer RNN -----------------------------------------------------------------------------

RNNBase::RNNBase(const RNNOptions& options, int gates, Generator& gen, const char* who)
    : options_(options), gates_(gates), who_(who), gen_(options.generator()) {
  options_.validate(who);
  if (!gen_) gen_ = std::make_shared<Generator>(0);
  const std::int64_t H = options_.hidden_size(), D = options_.bidirectional() ? 2 : 1;
  for (std::int64_t l = 0; l < options_.num_layers(); ++l)
    for (std::int64_t d = 0; d < D; ++d) {
      const std::int64_t in = l == 0 ? options_.input_size() : D * H;
      const std::string suffix = "_l" + std::to_string(l) + (d ? "_reverse" : "");
      for (Tensor& w : register_rnn_weights(*this, suffix, gates * H, in, H, options_.bias())) weights_.push_back(w);
    }
  init_uniform(weights_, H, gen);  // reset_parameters draws in registration order
}

std::string RNNBase::extra_repr() const {
  std::ostringstream os;
  os << options_.input_size() << ", " << options_.hidden_size();
  if (options_.num_layers() != 1) os << ", num_layers=" << options_.num_layers();
  if (!options_.bias()) os << ", bias=false";
  if (options_.batch_first()) os << ", batch_first=true";
  if (options_.dropout() != 0.0) os << ", dropout=" << options_.dropout();
  if (options_.bidirectional()) os << ", bidirectional=true";
  return os.str();
}

RNNBase::Result RNNBase::run(const Tensor& x_in, const Tensor& h0, const Tensor& c0, const Tensor& valid_lens) {
  const std::string who(who_);
  const bool lstm = gates_ == 4;
  const std::int64_t H = options_.hidden_size(), L = options_.num_layers(), D = options_.bidirectional() ? 2 : 1;
  const DType dtype = weights_[0].dtype();
  if (!x_in.defined() || x_in.dim() != 3 || x_in.size(2) != options_.input_size())
    throw std::invalid_argument(who + ": input must be " + (options_.batch_first() ? "(B, T, " : "(T, B, ") +
                                std::to_string(options_.input_size()) + "), got " + shape_str(x_in));
  if (x_in.dtype() != dtype)
    throw std::invalid_argument(who + ": input is " + std::string(dtype_name(x_in.dtype())) +
                                " but the parameters are " + std::string(dtype_name(dtype)));
  const Tensor x = options_.batch_first() ? transpose(x_in, 0, 1) : x_in;
  const std::int64_t T = x.size(0), B = x.size(1);
  if (T == 0 || B == 0) throw std::invalid_argument(who + ": empty input " + x_in.shape().str());
  const Shape state_shape{L * D, B, H};
  for (const Tensor* s : {&h0, &c0})
    if (s->defined() && (!(s->shape() == state_shape) || s->dtype() != dtype))
      throw std::invalid_argument(who + ": initial state must be " + std::string(dtype_name(dtype)) + " " +
                                  state_shape.str() + " (num_layers * directions, B, hidden_size), got " +
                                  std::string(dtype_name(s->dtype())) + " " + s->shape().str());

  // Lengths: steps t < min_len need no mask, steps t >= max_len leave every state unchanged.
  PooledVector<std::int64_t> lens(static_cast<std::size_t>(B), T);  // pooled, as every list below
  if (valid_lens.defined()) {
    if (valid_lens.dtype() != DType::i64 || valid_lens.dim() != 1 || valid_lens.size(0) != B)
      throw std::invalid_argument(who + ": valid_lens must be i64 of shape [" + std::to_string(B) + "], got " +
                                  std::string(dtype_name(valid_lens.dtype())) + " " + valid_lens.shape().str());
    lens.assign(valid_lens.data<std::int64_t>(), valid_lens.data<std::int64_t>() + B);
    for (std::int64_t len : lens)
      if (len < 0 || len > T)
        throw std::invalid_argument(who + ": valid length " + std::to_string(len) + " is outside [0, " +
                                    std::to_string(T) + "]");
  }
  const std::int64_t min_len = *std::min_element(lens.begin(), lens.end());
  const std::int64_t max_len = *std::max_element(lens.begin(), lens.end());
  PooledVector<Tensor> masks(static_cast<std::size_t>(T));  // (B, 1) i64: 1 where t < len[b]
  for (std::int64_t t = min_len; t < max_len; ++t) {
    masks[t] = Tensor::empty({B, 1}, DType::i64);
    std::int64_t* m = masks[t].data<std::int64_t>();
    for (std::int64_t b = 0; b < B; ++b) m[b] = t < lens[b] ? 1 : 0;
  }
  // Made on first use: a decoder calls run() once per step with no lengths and needs neither.
  Tensor zero_out, zero;
  auto zeros_out = [&]() -> const Tensor& { return zero_out.defined() ? zero_out : (zero_out = Tensor::zeros({B, H}, dtype)); };
  auto zero_scalar = [&]() -> const Tensor& { return zero.defined() ? zero : (zero = Tensor::zeros({}, dtype)); };

  // Initial states per (layer, direction), as views of h0 / c0.
  auto initial = [&](const Tensor& s0) {
    if (s0.defined()) return split_steps(reshape(s0, {L * D * B, H}), L * D);
    return PooledVector<Tensor>(static_cast<std::size_t>(L * D), Tensor::zeros({B, H}, dtype));
  };
  const PooledVector<Tensor> h_init = initial(h0), c_init = lstm ? initial(c0) : PooledVector<Tensor>();

  const std::size_t per = options_.bias() ? 4 : 2;
  PooledVector<Tensor> h_last, c_last;
  Tensor layer_in = x;
  for (std::int64_t l = 0; l < L; ++l) {
    if (l > 0) layer_in = dropout(layer_in, options_.dropout(), *gen_, is_training());
    const Tensor flat = reshape(layer_in, {T * B, layer_in.size(2)});
    PooledVector<Tensor> dir_out;
    for (std::int64_t d = 0; d < D; ++d) {
      const std::size_t k = static_cast<std::size_t>(l * D + d);
      const Tensor& w_ih = weights_[k * per];
      const Tensor& w_hh = weights_[k * per + 1];
      const Tensor b_ih = per == 4 ? weights_[k * per + 2] : Tensor();
      const Tensor b_hh = per == 4 ? weights_[k * per + 3] : Tensor();
      // Input projection of every step at once; the loop only multiplies by W_hh. One step (a
      // decoder's call) needs no stack of the outputs below either.
      const PooledVector<Tensor> gi = split_steps(linear(flat, w_ih, b_ih), T);
      Tensor h = h_init[k], c = lstm ? c_init[k] : Tensor();
      PooledVector<Tensor> out(static_cast<std::size_t>(T));
      for (std::int64_t s = 0; s < T; ++s) {
        const std::int64_t t = d == 0 ? s : T - 1 - s;
        if (t >= max_len) {  // padding for every entry: nothing changes
          out[t] = zeros_out();
          continue;
        }
        Tensor h_new, c_new;
        if (lstm) {
          LSTMState st = lstm_step(gi[t], h, c, w_hh, b_hh);
          h_new = st.h, c_new = st.c;
        } else {
          h_new = gru_step(gi[t], h, w_hh, b_hh);
        }
        if (t < min_len) {
          h = h_new, c = c_new, out[t] = h_new;
        } else {  // keep the state of entries already past their end; their output is 0
          out[t] = where(masks[t], h_new, zero_scalar());
          h = where(masks[t], h_new, h);
          if (lstm) c = where(masks[t], c_new, c);
        }
      }
      dir_out.push_back(T == 1 ? unsqueeze(out[0], 0) : stack(out, 0));
      h_last.push_back(h);
      if (lstm) c_last.push_back(c);
    }
    layer_in = D == 1 ? dir_out[0] : concat(dir_out, 2);
  }
  Result r;
  r.output = options_.batch_first() ? transpose(layer_in, 0, 1) : layer_in;
  r.h_n = stack(h_last, 0);
  if (lstm) r.c_n = stack(c_last, 0);
  return r;
}

GRUImpl::GRUImpl(const GRUOptions& options, Generator& gen) : RNNBase(options, 3, gen, "GRU") {}

std::pair<Tensor, Tensor> GRUImpl::forward(const Tensor& x, const Tensor& h0, const Tensor& valid_lens) {
  Result r = run(x, h0, Tensor(), valid_lens);
  return {r.output, r.h_n};
}

LSTMImpl::LSTMImpl(const LSTMOptions& options, Generator& gen) : RNNBase(options, 4, gen, "LSTM") {}

std::pair<Tensor, LSTMState> LSTMImpl::forward(const Tensor& x, const LSTMState& state, const Tensor& valid_lens) {
  Result r = run(x, state.h, state.c, valid_lens);
  return {r.output, {r.h_n, r.c_n}};
}

}  // namespace tg::nn
