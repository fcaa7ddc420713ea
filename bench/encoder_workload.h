#pragma once
// Workload G of issue 20 (the generic path): one pre-LN Transformer encoder layer written with
// public ops only, trained with Adam on a synthetic regression target. The model, batches and
// training step are shared by bench/bench_encoder.cpp and the allocation test
// (tests/models/training/test_allocations.cpp, at smaller sizes); bench/libtorch/encoder.cpp and
// bench/encoder_reference.py implement the same model and draw the same batches: keep them in step.
//
//   y = x + Wo·MHA(LN1(x));  out = y + W2·gelu(W1·LN2(y))      (pre-LN, dropout 0, exact GELU)
//   MHA: q, k, v = separate linear layers with bias, 4 heads, softmax(q kᵀ / sqrt(64)) v
//   loss = mean((out - target)²), target[b, t] = x[b, (t + 1) mod T] (predict the next vector)
//   Linear weights and biases U(-1/sqrt(in), 1/sqrt(in)) (torch.nn.Linear's default scheme),
//   LayerNorm weight 1, bias 0, eps 1e-5. Adam(lr 1e-3), gradients dropped just before backward.
// Data: x[b, t, d] = 2 u - 1 with u = (splitmix64() >> 40) / 2^24 in row-major (b, t, d) order,
// batch after batch, from splitmix64 seeded with seed * 0x632BE59BD9B4E019 + 12345.
//
// The forward is written twice: with free functions (forward, the original) and with tensor
// methods (forward_methods, line for line as bench/encoder_reference.py; docs/porting.md shows the
// two). Both run the same ops in the same order, so they give the same loss and gradients to the
// last bit (tests/autograd/test_encoder_methods.cpp); bench_encoder --spelling picks one.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/optim.h"

namespace tg::bench::encoder {

/// The layer's and the batch's sizes; workload G is `Sizes{}`.
struct Sizes {
  std::int64_t d_model = 256, heads = 4, ff = 1024, batch = 32, seq = 64;
};
constexpr double kLayerNormEps = 1e-5, kLearningRate = 1e-3;
constexpr int kDefaultSteps = 20, kDefaultWarmup = 3;

inline std::uint64_t data_seed(std::uint64_t seed) { return seed * 0x632BE59BD9B4E019ULL + 12345; }

/// One batch's input (B, T, D) and target, as flat row-major vectors.
inline void make_batch(tg::SplitMix64& rng, std::vector<float>& x, std::vector<float>& target,
                       const Sizes& s = {}) {
  const std::int64_t n = s.batch * s.seq * s.d_model;
  x.resize(n);
  target.resize(n);
  for (std::int64_t i = 0; i < n; ++i)
    x[i] = 2.0f * (static_cast<float>(rng.next() >> 40) * (1.0f / 16777216.0f)) - 1.0f;
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t t = 0; t < s.seq; ++t) {
      const float* src = x.data() + (b * s.seq + (t + 1) % s.seq) * s.d_model;
      std::copy(src, src + s.d_model, target.data() + (b * s.seq + t) * s.d_model);
    }
}

struct Linear {
  tg::Tensor w, b;
  Linear(std::int64_t in, std::int64_t out, tg::Generator& gen) {
    const double k = 1.0 / std::sqrt(static_cast<double>(in));
    w = tg::Tensor::uniform({out, in}, -k, k, gen).requires_grad_();
    b = tg::Tensor::uniform({out}, -k, k, gen).requires_grad_();
  }
  tg::Tensor operator()(const tg::Tensor& x) const { return tg::linear(x, w, b); }
};

struct LayerNormParams {
  tg::Tensor w, b;
  explicit LayerNormParams(std::int64_t d)
      : w(tg::Tensor::ones({d}).requires_grad_()), b(tg::Tensor::zeros({d}).requires_grad_()) {}
  // Composed from public ops, as a model author would write it (biased variance, as PyTorch).
  tg::Tensor operator()(const tg::Tensor& x) const {
    const tg::Tensor centred = x - tg::mean(x, {2}, true);
    const tg::Tensor var = tg::var(x, {2}, tg::Correction{0}, true);
    return centred * tg::rsqrt(var + kLayerNormEps) * w + b;
  }
  // The same with methods: (x - x.mean(-1, keepdim=True)) * (x.var(-1, unbiased=False,
  // keepdim=True) + eps).rsqrt() * w + b.
  tg::Tensor forward_methods(const tg::Tensor& x) const {
    const tg::Tensor centred = x - x.mean(-1, true);
    const tg::Tensor var = x.var(-1, false, true);
    return centred * (var + kLayerNormEps).rsqrt() * w + b;
  }
};

/// Which spelling of the forward a training step runs.
enum class Spelling { free_functions, methods };

struct EncoderLayer {
  Sizes sizes;
  LayerNormParams ln1, ln2;
  Linear q, k, v, o, ff1, ff2;
  EncoderLayer(const Sizes& s, tg::Generator& gen)
      : sizes(s), ln1(s.d_model), ln2(s.d_model), q(s.d_model, s.d_model, gen), k(s.d_model, s.d_model, gen),
        v(s.d_model, s.d_model, gen), o(s.d_model, s.d_model, gen), ff1(s.d_model, s.ff, gen),
        ff2(s.ff, s.d_model, gen) {}

  tg::nn::NamedTensors named_parameters() const {
    return {{"ln1.weight", ln1.w}, {"ln1.bias", ln1.b}, {"q.weight", q.w},     {"q.bias", q.b},
            {"k.weight", k.w},     {"k.bias", k.b},     {"v.weight", v.w},     {"v.bias", v.b},
            {"o.weight", o.w},     {"o.bias", o.b},     {"ln2.weight", ln2.w}, {"ln2.bias", ln2.b},
            {"ff1.weight", ff1.w}, {"ff1.bias", ff1.b}, {"ff2.weight", ff2.w}, {"ff2.bias", ff2.b}};
  }

  tg::Tensor forward(const tg::Tensor& x) const {
    const std::int64_t B = x.size(0), T = x.size(1), D = sizes.d_model, H = sizes.heads, dh = D / H;
    auto heads = [&](const tg::Tensor& t) { return tg::transpose(tg::reshape(t, {B, T, H, dh}), 1, 2); };
    const tg::Tensor a = ln1(x);
    const tg::Tensor qh = heads(q(a)), kh = heads(k(a)), vh = heads(v(a));                 // (B, H, T, dh)
    const tg::Tensor scores = tg::matmul(qh, tg::transpose(kh, 2, 3)) * (1.0 / std::sqrt(static_cast<double>(dh)));
    const tg::Tensor ctx = tg::matmul(tg::softmax(scores, -1), vh);                          // (B, H, T, dh)
    const tg::Tensor y = x + o(tg::reshape(tg::transpose(ctx, 1, 2), {B, T, D}));
    return y + ff2(tg::gelu(ff1(ln2(y))));
  }

  // The forward of bench/encoder_reference.py, line for line: self.q is this->q, torch.matmul is
  // tg::matmul, and the layer norms are written with methods too.
  tg::Tensor forward_methods(const tg::Tensor& x) const {
    const std::int64_t B = x.size(0), T = x.size(1), D = sizes.d_model, HEADS = sizes.heads, dh = D / HEADS;
    auto heads = [&](const tg::Tensor& t) { return t.reshape({B, T, HEADS, dh}).transpose(1, 2); };
    const tg::Tensor a = ln1.forward_methods(x);
    const tg::Tensor q = heads(this->q(a)), k = heads(this->k(a)), v = heads(this->v(a));
    const tg::Tensor w = tg::softmax(tg::matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(dh)), -1);
    const tg::Tensor y = x + o(tg::matmul(w, v).transpose(1, 2).reshape({B, T, D}));
    return y + ff2(tg::gelu(ff1(ln2.forward_methods(y))));
  }

  tg::Tensor forward(const tg::Tensor& x, Spelling spelling) const {
    return spelling == Spelling::methods ? forward_methods(x) : forward(x);
  }
};

/// Seconds spent in each phase of train_step.
struct StepTimes {
  double forward_and_loss = 0, backward = 0, adam = 0;
};

/// The loss of workload G: mean((out - target)^2); with methods, ((out - target).pow(2)).mean() as
/// in bench/encoder_reference.py (pow(2) is square: the same op).
inline tg::Tensor loss_of(const EncoderLayer& layer, const tg::Tensor& x, const tg::Tensor& target,
                          Spelling spelling = Spelling::free_functions) {
  if (spelling == Spelling::methods) return (layer.forward_methods(x) - target).pow(2).mean();
  return tg::mean(tg::square(layer.forward(x) - target));
}

/// One training step of workload G: forward and loss, zero_grad, backward, Adam. Returns the loss;
/// adds each phase's seconds to `times` when given.
inline tg::Tensor train_step(const EncoderLayer& layer, tg::nn::Adam& optimizer, const tg::Tensor& x,
                             const tg::Tensor& target, StepTimes* times = nullptr,
                             Spelling spelling = Spelling::free_functions) {
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  auto t = Clock::now();
  tg::Tensor loss = loss_of(layer, x, target, spelling);
  if (times) times->forward_and_loss += since(t), t = Clock::now();
  optimizer.zero_grad();
  loss.backward();
  if (times) times->backward += since(t), t = Clock::now();
  optimizer.step();
  if (times) times->adam += since(t);
  return loss;
}

}  // namespace tg::bench::encoder
