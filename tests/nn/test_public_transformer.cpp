// A pre-LN Transformer encoder layer written the way a user would, with the public API only
// (autograd/tapegrad.h, and nn/optim.h for Adam; no nn layer, no private header), its parameters
// plain tensors: it fits a small task, and its whole-model gradcheck and gradgradcheck pass in
// float64 with the default tolerances, with attention both composed (matmul with a transposed
// operand, softmax) and fused (scaled_dot_product_attention).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tapegrad.h"
#include "nn/optim.h"

using namespace tg;

namespace {

// Parameter positions: the layer's parameters are plain tensors in one vector.
enum : int { kLn1W, kLn1B, kWqkv, kBqkv, kWo, kBo, kLn2W, kLn2B, kW1, kB1, kW2, kB2, kNumParams };

struct Sizes {
  std::int64_t d_model, heads, ff;
};

/// Parameters initialised as PyTorch's nn.Linear (uniform in ±1/sqrt(fan_in)) and nn.LayerNorm
/// (weight 1, bias 0), requiring grad.
std::vector<Tensor> make_params(const Sizes& s, Generator& gen, DType dtype) {
  auto uniform = [&](const Shape& shape, std::int64_t fan_in) {
    const double a = 1.0 / std::sqrt(static_cast<double>(fan_in));
    return Tensor::uniform(shape, -a, a, gen, dtype).requires_grad_();
  };
  const std::int64_t D = s.d_model;
  std::vector<Tensor> p(kNumParams);
  p[kLn1W] = Tensor::ones({D}, dtype).requires_grad_();
  p[kLn1B] = Tensor::zeros({D}, dtype).requires_grad_();
  p[kWqkv] = uniform({3 * D, D}, D);
  p[kBqkv] = uniform({3 * D}, D);
  p[kWo] = uniform({D, D}, D);
  p[kBo] = uniform({D}, D);
  p[kLn2W] = Tensor::ones({D}, dtype).requires_grad_();
  p[kLn2B] = Tensor::zeros({D}, dtype).requires_grad_();
  p[kW1] = uniform({s.ff, D}, D);
  p[kB1] = uniform({s.ff}, D);
  p[kW2] = uniform({D, s.ff}, s.ff);
  p[kB2] = uniform({D}, s.ff);
  return p;
}

/// x (B, T, D) -> (B, T, D): h = x + MHA(LN1(x)); out = h + W2 gelu(W1 LN2(h)). Dropout off.
Tensor encoder_layer(const Tensor& x, const Tensor* p, std::int64_t heads, bool fused_attention) {
  const std::int64_t B = x.size(0), T = x.size(1), D = x.size(2), dh = D / heads;
  const Tensor qkv = linear(layer_norm(x, Shape{D}, p[kLn1W], p[kLn1B]), p[kWqkv], p[kBqkv]);  // (B, T, 3D)
  auto split_heads = [&](int k) { return transpose(reshape(narrow(qkv, 2, k * D, D), {B, T, heads, dh}), 1, 2); };
  const Tensor q = split_heads(0), k = split_heads(1), v = split_heads(2);  // (B, heads, T, dh)
  Tensor a;
  if (fused_attention) {
    a = scaled_dot_product_attention(q, k, v);
  } else {
    const Tensor scores = matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(static_cast<double>(dh)));
    a = matmul(softmax(scores, -1), v);
  }
  const Tensor h = x + linear(reshape(transpose(a, 1, 2), {B, T, D}), p[kWo], p[kBo]);
  return h + linear(gelu(linear(layer_norm(h, Shape{D}, p[kLn2W], p[kLn2B]), p[kW1], p[kB1])), p[kW2], p[kB2]);
}

/// gradcheck's input list: x first, then the parameters.
Tensor layer_of(const std::vector<Tensor>& in, std::int64_t heads, bool fused) {
  return encoder_layer(in[0], in.data() + 1, heads, fused);
}

}  // namespace

TEST(PublicTransformer, FusedAndComposedAttentionAgree) {
  Generator gen(1);
  const Sizes s{8, 2, 16};
  const std::vector<Tensor> p = make_params(s, gen, DType::f64);
  const Tensor x = Tensor::uniform({2, 3, 8}, -1, 1, gen, DType::f64);
  const std::vector<double> a = encoder_layer(x, p.data(), s.heads, true).to_vector<double>();
  const std::vector<double> b = encoder_layer(x, p.data(), s.heads, false).to_vector<double>();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-13) << i;
  tape::reset();
}

// Every parameter and the input, d_model 8, 2 heads, T 3, batch 2, default tolerances.
TEST(PublicTransformer, WholeLayerGradcheckAndGradgradcheck) {
  const Sizes s{8, 2, 16};
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "scaled_dot_product_attention" : "matmul + softmax");
    Generator gen(2);
    std::vector<Tensor> in = {Tensor::uniform({2, 3, 8}, -1, 1, gen, DType::f64).requires_grad_()};
    for (Tensor& t : make_params(s, gen, DType::f64)) in.push_back(t);
    // The LayerNorm affine parameters away from their 1 / 0 initialisation, so that every term of
    // the second derivative is exercised.
    for (int i : {kLn1W, kLn1B, kLn2W, kLn2B})
      in[1 + i] = (in[1 + i].detach() + Tensor::uniform(in[1 + i].shape(), -0.5, 0.5, gen, DType::f64)).requires_grad_();
    std::int64_t numel = 0;
    for (const Tensor& t : in) numel += t.numel();
    auto fn = [&s, fused](const std::vector<Tensor>& xs) { return layer_of(xs, s.heads, fused); };
    const GradcheckReport g = gradcheck(fn, in);
    EXPECT_TRUE(g.ok) << g;
    EXPECT_EQ(g.checked, numel * 2 * 3 * 8);  // the full Jacobian: every input element times every output
    const GradcheckReport gg = gradgradcheck(fn, in);
    EXPECT_TRUE(gg.ok) << gg;
    EXPECT_GT(gg.checked, 0);
    tape::reset();
  }
}

// Fits a fixed target: the outputs of a teacher layer (same sizes, its own random parameters) on
// 16 random sequences of 5 tokens. The student starts from other random parameters; 300 Adam steps
// (lr 1e-2, float32) must bring the mean squared error below 1% of where it started and below 1%
// of what the residual path alone (output = input) gives.
TEST(PublicTransformer, TrainsToFitASmallTask) {
  const Sizes s{16, 2, 32};
  const std::int64_t N = 16, T = 5, D = s.d_model;
  Generator gen(3);
  const Tensor x = Tensor::uniform({N, T, D}, -1, 1, gen, DType::f32);
  Tensor target;
  {
    NoGradGuard no_grad;
    const std::vector<Tensor> teacher = make_params(s, gen, DType::f32);
    target = encoder_layer(x, teacher.data(), s.heads, true);
  }
  std::vector<Tensor> params = make_params(s, gen, DType::f32);
  nn::Adam opt(params, nn::AdamOptions(1e-2));
  auto loss_of = [&] { return mean(square(encoder_layer(x, params.data(), s.heads, true) - target)); };
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    const Tensor loss = loss_of();
    last = loss.item();
    if (step == 0) first = last;
    ASSERT_TRUE(std::isfinite(last)) << "step " << step;
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  {
    NoGradGuard no_grad;
    last = loss_of().item();
  }
  // The residual path alone (output = x) is the other baseline a fit must beat.
  const double identity = mean(square(x - target)).item();
  EXPECT_GT(first, 0.05) << "the untrained student already fits the target";
  EXPECT_LT(last, 0.01 * first) << "loss " << first << " -> " << last;
  EXPECT_LT(last, 0.01 * identity) << "loss " << last << ", output = input gives " << identity;
  tape::reset();
}
