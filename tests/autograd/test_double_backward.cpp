// Higher-order gradients (create_graph): gradgradcheck of every op with a differentiable backward
// (broadcast and masked cases included), Hessian-vector products, a gradient penalty, and the
// errors for an op without one and for a freed graph. float64, fixed seeds.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "gradcheck_util.h"

using namespace tg;
using tg::testing::rand64;

namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor i64(const std::vector<std::int64_t>& v, const Shape& s) { return Tensor::from_vector(v, s); }

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  double lo, hi;
};
}  // namespace

TEST(DoubleBackward, UnaryElementwise) {
  const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return -x; }, -2, 2},
      {"exp", [](const Tensor& x) { return exp(x); }, -1, 1},
      {"log", [](const Tensor& x) { return log(x); }, 0.5, 2},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0.5, 2},
      {"tanh", [](const Tensor& x) { return tanh(x); }, -2, 2},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -3, 3},
      {"relu", [](const Tensor& x) { return relu(x) * x; }, -2, 2},  // relu alone is piecewise linear
      {"square", [](const Tensor& x) { return square(x); }, -2, 2},
      {"pow 3", [](const Tensor& x) { return pow(x, 3.0); }, -2, 2},
      {"pow 2.5", [](const Tensor& x) { return pow(x, 2.5); }, 0.5, 2},
      {"pow -1.5", [](const Tensor& x) { return pow(x, -1.5); }, 0.5, 2},
      {"abs", [](const Tensor& x) { return abs(x) * x; }, -2, 2},
      {"sign", [](const Tensor& x) { return sign(x) + x * x; }, -2, 2},
      {"sin", [](const Tensor& x) { return sin(x); }, -3, 3},
      {"cos", [](const Tensor& x) { return cos(x); }, -3, 3},
      {"erf", [](const Tensor& x) { return erf(x); }, -2, 2},
      {"gelu", [](const Tensor& x) { return gelu(x); }, -3, 3},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluApproximate::tanh); }, -3, 3},
      {"silu", [](const Tensor& x) { return silu(x); }, -3, 3},
      {"softplus", [](const Tensor& x) { return softplus(x, 2.0, 2.0); }, -2, 2},  // both regions
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1) * x; }, -2, 2},
      {"elu", [](const Tensor& x) { return elu(x, 0.7); }, -2, 2},
      {"log1p", [](const Tensor& x) { return log1p(x); }, -0.5, 2},
      {"expm1", [](const Tensor& x) { return expm1(x); }, -1, 1},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.5, 2},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, 0.5, 2},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.5) * x; }, -2, 2},
      {"clamp_min", [](const Tensor& x) { return clamp_min(x, 0.2) * x; }, -2, 2},
      {"clamp_max", [](const Tensor& x) { return clamp_max(x, 0.3) * x; }, -2, 2},
      {"clone", [](const Tensor& x) { return x.clone() * x; }, -2, 2},
  };
  for (const UnaryCase& c : cases) {
    SCOPED_TRACE(c.name);
    Generator gen(11);
    const Tensor x = rand64({3, 4}, gen, c.lo, c.hi);
    auto op = c.op;
    EXPECT_GRADGRADCHECK([op](const std::vector<Tensor>& in) { return op(in[0]); }, {x});
  }
}

TEST(DoubleBackward, ConversionIsTwiceDifferentiable) {
  // Not through gradgradcheck: the float32 round trip rounds the values its finite differences
  // need. Its derivative is exactly 1, so d/dx of d/dx sum(to(x) x) = d/dx (to(x) + x) = 2.
  Generator gen(2);
  const Tensor x = rand64({5}, gen);
  const std::vector<Tensor> g = grad({sum(x.to(DType::f32).to(DType::f64) * x)}, {x}, {}, {.create_graph = true});
  ASSERT_TRUE(g[0].requires_grad());
  const Tensor h = grad({sum(g[0])}, {x})[0];
  EXPECT_EQ(h.to_vector<double>(), std::vector<double>(5, 2.0));
  tape::reset();
}

TEST(DoubleBackward, BinaryElementwiseWithBroadcasting) {
  const std::vector<std::pair<Shape, Shape>> pairs = {{{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{3, 1}, {1, 4}}, {{}, {2, 3}}};
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return (a + b) * (a + b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return (a - b) * a; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b) * a; }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b) * b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
  };
  for (const auto& [name, op] : ops) {
    for (const auto& [sa, sb] : pairs) {
      SCOPED_TRACE(std::string(name) + " " + sa.str() + " " + sb.str());
      Generator gen(5);
      const Tensor a = rand64(sa, gen, 0.5, 2.0), b = rand64(sb, gen, 0.5, 2.0);
      auto f = op;
      EXPECT_GRADGRADCHECK([f](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {a, b});
    }
  }
}

TEST(DoubleBackward, ScalarForms) {
  Generator gen(6);
  const Tensor x = rand64({2, 3}, gen, 0.5, 2.0);
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return (in[0] + 1.5) * (in[0] - 0.5); }, {x});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return (in[0] * 3.0) * (in[0] / 2.0); }, {x});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return (2.0 - in[0]) * in[0]; }, {x});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return 3.0 / in[0]; }, {x});
}

TEST(DoubleBackward, WhereAndMaskedFill) {
  Generator gen(7);
  const Tensor a = rand64({3, 4}, gen), b = rand64({4}, gen);
  for (const DType mask_dtype : {DType::i64, DType::b8}) {  // conditions and masks: bool (PyTorch's) or i64
    SCOPED_TRACE(dtype_name(mask_dtype));
    const Tensor cond = Tensor::from_values({1, 0, 0, 1}, {4}, mask_dtype);  // broadcast over rows
    EXPECT_GRADGRADCHECK(
        [cond](const std::vector<Tensor>& in) { return where(cond, in[0] * in[0], tanh(in[1])) * in[1]; }, {a, b});
    const Tensor mask = Tensor::from_values({0, 1, 1}, {3, 1}, mask_dtype);
    EXPECT_GRADGRADCHECK(
        [mask](const std::vector<Tensor>& in) { return masked_fill(in[0] * in[0], mask, -2.0) * in[0]; }, {a});
  }
}

TEST(DoubleBackward, MatmulAndLinear) {
  Generator gen(8);
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                       {rand64({3, 4}, gen), rand64({4, 2}, gen)});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },  // folded batch
                       {rand64({2, 3, 4}, gen), rand64({4, 2}, gen)});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },  // broadcast batch
                       {rand64({2, 1, 3, 4}, gen), rand64({3, 4, 2}, gen)});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },  // vectors
                       {rand64({4}, gen), rand64({4, 3}, gen)});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return square(matmul(in[0], in[1])); },  // matrix x vector
                       {rand64({3, 4}, gen), rand64({4}, gen)});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return square(matmul(in[0], in[1])); },  // dot product
                       {rand64({4}, gen), rand64({4}, gen)});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },  // shared left matrix
                       {rand64({3, 4}, gen), rand64({2, 4, 2}, gen)});
  EXPECT_GRADGRADCHECK(  // transposed operands read through GEMM flags
      [](const std::vector<Tensor>& in) { return matmul(transpose(in[0], -2, -1), transpose(in[1], -2, -1)); },
      {rand64({2, 4, 3}, gen), rand64({2, 5, 4}, gen)});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return matmul(in[0], transpose(in[1], -2, -1)); },
                       {rand64({4, 3}, gen), rand64({2, 5, 3}, gen)});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                       {rand64({2, 3, 4}, gen), rand64({5, 4}, gen), rand64({5}, gen)});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return tanh(linear(in[0], in[1])); },
                       {rand64({3, 4}, gen), rand64({2, 4}, gen)});
}

TEST(DoubleBackward, Reductions) {
  Generator gen(9);
  const Tensor x = rand64({3, 4}, gen, 0.5, 2.0);  // distinct values: no ties for max/min
  const std::vector<std::pair<const char*, Fn>> fns = {
      {"sum", [](const std::vector<Tensor>& in) { return square(sum(in[0], {1})); }},
      {"sum keepdim", [](const std::vector<Tensor>& in) { return sum(in[0], {0}, true) * in[0]; }},
      {"sum all", [](const std::vector<Tensor>& in) { return sum(in[0]) * in[0]; }},
      {"mean", [](const std::vector<Tensor>& in) { return square(mean(in[0], {0})); }},
      {"var", [](const std::vector<Tensor>& in) { return var(in[0], {1}); }},
      {"std", [](const std::vector<Tensor>& in) { return tg::std(in[0], {0}); }},
      {"logsumexp", [](const std::vector<Tensor>& in) { return logsumexp(in[0], {1}); }},
      {"amax", [](const std::vector<Tensor>& in) { return amax(in[0] * in[0], {1}); }},
      {"amin", [](const std::vector<Tensor>& in) { return amin(in[0] * in[0], {0}); }},
      {"min", [](const std::vector<Tensor>& in) { return min(in[0] * in[0]); }},
      {"max", [](const std::vector<Tensor>& in) { return max(in[0] * in[0]); }},
      {"max dim", [](const std::vector<Tensor>& in) { return std::get<0>(max(in[0] * in[0], 0)); }},
      {"min dim", [](const std::vector<Tensor>& in) { return std::get<0>(min(in[0] * in[0], 1, true)); }},
      {"topk", [](const std::vector<Tensor>& in) { return std::get<0>(topk(in[0] * in[0], 2, 1)); }},
      {"sort", [](const std::vector<Tensor>& in) { return std::get<0>(sort(in[0] * in[0], 1)); }},
      {"norm 2", [](const std::vector<Tensor>& in) { return norm(in[0], 2.0, {1}); }},
      {"norm 1", [](const std::vector<Tensor>& in) { return norm(in[0] * in[0], 1.0); }},
      {"norm 3", [](const std::vector<Tensor>& in) { return norm(in[0], 3.0, {0}, true); }},
      {"norm inf", [](const std::vector<Tensor>& in) { return norm(in[0] * in[0], kInf, {1}); }},
      {"cumsum", [](const std::vector<Tensor>& in) { return cumsum(in[0], 1) * in[0]; }},
      {"prod dim", [](const std::vector<Tensor>& in) { return prod(in[0], 1); }},
      {"prod keepdim", [](const std::vector<Tensor>& in) { return prod(in[0], 0, true) * in[0]; }},  // broadcast
      {"prod all", [](const std::vector<Tensor>& in) { return prod(in[0]); }},
      {"cumprod", [](const std::vector<Tensor>& in) { return cumprod(in[0], 1); }},
      {"cumprod dim 0", [](const std::vector<Tensor>& in) { return cumprod(in[0], 0) * in[0]; }},
  };
  for (const auto& [name, fn] : fns) {
    SCOPED_TRACE(name);
    EXPECT_GRADGRADCHECK(fn, {x});
  }
}

TEST(DoubleBackward, ShapeAndIndexOps) {
  Generator gen(10);
  const Tensor x = rand64({3, 4}, gen), y = rand64({3, 4}, gen), z = rand64({2, 4}, gen);
  const Tensor idx = i64({2, 0, 2}, {3});
  const Tensor gidx = i64({0, 2, 1, 1, 3, 0}, {3, 2});
  const std::vector<std::pair<const char*, Fn>> fns = {
      {"reshape", [](const std::vector<Tensor>& in) { return reshape(in[0], {4, 3}) * reshape(in[0], {4, 3}); }},
      {"view", [](const std::vector<Tensor>& in) { return square(view(in[0], {2, 6})); }},
      {"flatten", [](const std::vector<Tensor>& in) { return square(flatten(unsqueeze(in[0], 0), 1)); }},
      {"broadcast_to", [](const std::vector<Tensor>& in) { return square(broadcast_to(in[0], {2, 3, 4})) * in[1]; }},
      {"transpose", [](const std::vector<Tensor>& in) { return transpose(in[0], 0, 1) * transpose(in[0], 0, 1); }},
      {"permute", [](const std::vector<Tensor>& in) { return square(permute(unsqueeze(in[0], 0), {2, 0, 1})); }},
      {"squeeze", [](const std::vector<Tensor>& in) { return square(squeeze(unsqueeze(in[0], 1), 1)); }},
      {"narrow", [](const std::vector<Tensor>& in) { return square(narrow(in[0], 1, 1, 2)); }},
      {"slice step", [](const std::vector<Tensor>& in) { return square(slice(in[0], 1, 0, 4, 2)); }},
      {"concat", [](const std::vector<Tensor>& in) { return square(concat({in[0], in[2]}, 0)); }},
      {"stack", [](const std::vector<Tensor>& in) { return stack({in[0], in[1]}, 1) * stack({in[1], in[0]}, 1); }},
      {"split", [](const std::vector<Tensor>& in) { auto p = split(in[0], 1, 0); return p[0] * p[2]; }},
      {"split sizes", [](const std::vector<Tensor>& in) { auto p = split(in[0], {1, 3}, 1); return p[1] * p[1] * p[0]; }},
      {"split_with_sizes", [](const std::vector<Tensor>& in) {
         auto p = split_with_sizes(in[0], {2, 1}, 0);
         return square(p[0]) * p[1];
       }},
      {"chunk axis 1", [](const std::vector<Tensor>& in) { auto p = chunk(in[0], 2, 1); return p[0] * p[1]; }},
      {"unbind", [](const std::vector<Tensor>& in) { auto p = unbind(in[0], 1); return p[0] * p[3]; }},
      {"expand", [](const std::vector<Tensor>& in) { return square(expand(narrow(in[0], 0, 0, 1), {3, 4})) * in[0]; }},
      {"repeat", [](const std::vector<Tensor>& in) { return square(repeat(in[2], {2, 1})); }},
      {"flip", [](const std::vector<Tensor>& in) { return flip(in[0], {1}) * in[0]; }},
      {"roll", [](const std::vector<Tensor>& in) { return roll(in[0], {1}, {1}) * in[0]; }},
      {"tril", [](const std::vector<Tensor>& in) { return square(tril(in[0], 1)); }},
      {"triu", [](const std::vector<Tensor>& in) { return square(triu(in[0])); }},
      {"pad", [](const std::vector<Tensor>& in) { return square(pad(in[0], {1, 2, 0, 1}, 0.5)); }},
      {"index_select", [idx](const std::vector<Tensor>& in) { return square(index_select(in[0], 1, idx)); }},
      {"gather", [gidx](const std::vector<Tensor>& in) { return square(gather(in[0], 1, gidx)); }},
      {"take_along_dim", [gidx](const std::vector<Tensor>& in) { return square(take_along_dim(in[0], gidx, 1)); }},
      {"scatter_add", [gidx](const std::vector<Tensor>& in) {
         return square(scatter_add(in[0], 1, gidx, in[1])) * in[1];  // src larger than index
       }},
      {"index_add", [idx](const std::vector<Tensor>& in) {
         return square(index_add(in[0], 0, idx, in[1], 0.5));
       }},
  };
  for (const auto& [name, fn] : fns) {
    SCOPED_TRACE(name);
    EXPECT_GRADGRADCHECK(fn, {x, y, z});
  }
}

TEST(DoubleBackward, SoftmaxFamilyEmbeddingDropout) {
  Generator gen(12);
  const Tensor x = rand64({3, 4}, gen, -2, 2);
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return softmax(in[0], -1); }, {x});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return softmax(in[0], 0); }, {x});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return log_softmax(in[0], -1); }, {x});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return log_softmax(in[0], 0); }, {x});
  const Tensor lens = i64({2, 4, 1}, {3});  // one length per row
  EXPECT_GRADGRADCHECK([lens](const std::vector<Tensor>& in) { return masked_softmax(in[0], lens); }, {x});
  const Tensor batch_lens = i64({3, 1}, {2});  // one length per batch entry, shared by its rows
  EXPECT_GRADGRADCHECK([batch_lens](const std::vector<Tensor>& in) { return masked_softmax(in[0], batch_lens); },
                       {rand64({2, 2, 4}, gen)});
  const Tensor targets = i64({1, -100, 3}, {3});  // one row ignored
  EXPECT_GRADGRADCHECK([targets](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets); }, {x});
  const Tensor ids = i64({2, 0, 2, 1}, {2, 2});
  EXPECT_GRADGRADCHECK([ids](const std::vector<Tensor>& in) { return square(embedding(in[0], ids)); },
                       {rand64({3, 2}, gen)});
  EXPECT_GRADGRADCHECK(
      [](const std::vector<Tensor>& in) {
        Generator g(3);  // the same mask at every call
        return square(dropout(in[0], 0.4, g));
      },
      {x});
}

TEST(DoubleBackward, Attention) {
  Generator gen(13);
  const Tensor q = rand64({2, 3, 4}, gen), k = rand64({2, 5, 4}, gen), v = rand64({2, 5, 3}, gen);
  EXPECT_GRADGRADCHECK(
      [](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }, {q, k, v});
  const Tensor mask = i64({1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0, 0, 1, 1}, {3, 5});
  EXPECT_GRADGRADCHECK(
      [mask](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], mask); },
      {q, k, v});
  const Tensor additive = rand64({3, 5}, gen, -1, 1);  // a floating mask is added to the scores
  EXPECT_GRADGRADCHECK(
      [additive](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], additive); },
      {q, k, v});
  const Tensor kc = rand64({2, 3, 4}, gen), vc = rand64({2, 3, 3}, gen);
  EXPECT_GRADGRADCHECK(
      [](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), 0.0, /*is_causal=*/true);
      },
      {q, kc, vc});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return additive_attention_scores(in[0], in[1], in[2]); },
                       {q, k, rand64({4}, gen)});
}

// The fused norms' differentiable backward recomputes their composed form (autograd/ops_norm.h).
TEST(DoubleBackward, FusedLayerNormAndRmsNorm) {
  Generator gen(21);
  const Tensor x = rand64({3, 2, 4}, gen), w = rand64({2, 4}, gen), b = rand64({2, 4}, gen);
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0], Shape{2, 4}, in[1], in[2]); },
                       {x, w, b});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0], Shape{4}); }, {x});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return rms_norm(in[0], Shape{4}, in[1], 1e-6); },
                       {x, rand64({4}, gen)});
}

// The public composites themselves (what the fused ops are tested against).
TEST(DoubleBackward, ComposedNormsAndAttention) {
  Generator gen(23);
  const Tensor x = rand64({3, 2, 4}, gen), w = rand64({2, 4}, gen), b = rand64({2, 4}, gen);
  EXPECT_GRADGRADCHECK(
      [](const std::vector<Tensor>& in) { return layer_norm_composed(in[0], Shape{2, 4}, in[1], in[2]); }, {x, w, b});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return rms_norm_composed(in[0], Shape{4}, in[1], 1e-6); },
                       {x, rand64({4}, gen)});
  const Tensor q = rand64({2, 3, 4}, gen), k = rand64({2, 5, 4}, gen), v = rand64({2, 5, 3}, gen);
  const Tensor mask = Tensor::from_values({1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0, 0, 1, 1}, {3, 5}, DType::b8);
  EXPECT_GRADGRADCHECK(
      [mask](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention_composed(in[0], in[1], in[2], mask);
      },
      {q, k, v});
  EXPECT_GRADGRADCHECK(
      [](const std::vector<Tensor>& in) {
        Generator drop(4);  // the same mask at every call
        return scaled_dot_product_attention_composed(in[0], in[1], in[2], Tensor(), 0.3, /*is_causal=*/true, 0.0, &drop);
      },
      {q, rand64({2, 3, 4}, gen), rand64({2, 3, 3}, gen)});
}

// With dropout the differentiable backward rebuilds the forward's mask from its seed: its first
// gradient equals the kernels' (same mask), and the second order passes gradgradcheck with the
// generator reseeded at every call (the same mask each time, as gradgradcheck needs).
TEST(DoubleBackward, AttentionWithDropout) {
  Generator gen(22);
  const Tensor q = rand64({2, 3, 4}, gen), k = rand64({2, 5, 4}, gen), v = rand64({2, 5, 3}, gen);
  for (const bool causal : {false, true}) {
    Generator d1(5), d2(5);
    const Tensor y1 = scaled_dot_product_attention(q, k, v, Tensor(), 0.4, causal, 0.0, &d1);
    const std::vector<Tensor> kernel = tg::grad({sum(y1 * y1)}, {q, k, v});
    const Tensor y2 = scaled_dot_product_attention(q, k, v, Tensor(), 0.4, causal, 0.0, &d2);
    const std::vector<Tensor> graph = tg::grad({sum(y2 * y2)}, {q, k, v}, {}, {.create_graph = true});
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(graph[i].requires_grad());
      const auto a = kernel[i].to_vector<double>(), b = graph[i].to_vector<double>();
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-12) << "input " << i << " element " << j;
    }
    tape::reset();
    EXPECT_GRADGRADCHECK(
        [causal](const std::vector<Tensor>& in) {
          Generator drop(5);
          return scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), 0.4, causal, 0.0, &drop);
        },
        {q, k, v});
  }
  // A bool mask and a broadcast batch beside dropout.
  const Tensor mask = Tensor::from_values({1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1}, {3, 5}, DType::b8);
  EXPECT_GRADGRADCHECK(
      [mask](const std::vector<Tensor>& in) {
        Generator drop(9);
        return scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.3, false, 0.0, &drop);
      },
      {rand64({2, 2, 3, 4}, gen), rand64({2, 1, 5, 4}, gen), rand64({1, 2, 5, 3}, gen)});
}

TEST(DoubleBackward, LinearTanhSoftmaxCrossEntropy) {
  Generator gen(14);
  const Tensor targets = i64({0, 2, 1, 2}, {4});
  EXPECT_GRADGRADCHECK(
      [targets](const std::vector<Tensor>& in) {
        const Tensor h = tanh(linear(in[0], in[1], in[2]));
        return cross_entropy(log(softmax(linear(h, in[3]), -1)), targets);
      },
      {rand64({4, 3}, gen), rand64({5, 3}, gen), rand64({5}, gen), rand64({3, 5}, gen)});
}

namespace {
// A two-layer MLP's loss as a function of its flattened parameters' tensors.
Tensor mlp_loss(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
  return sum(square(linear(tanh(linear(x, w1, b1)), w2)));
}
}  // namespace

TEST(DoubleBackward, HessianVectorProductMatchesFiniteDifferenceOfGradients) {
  Generator gen(15);
  const Tensor x = Tensor::uniform({5, 3}, -1, 1, gen, DType::f64);
  std::vector<Tensor> params = {rand64({4, 3}, gen), rand64({4}, gen), rand64({2, 4}, gen)};
  std::vector<Tensor> vs;
  for (const Tensor& p : params) vs.push_back(Tensor::uniform(p.shape(), -1, 1, gen, DType::f64));

  // Hv = d/dp <dL/dp, v>, by double backward.
  const Tensor loss = mlp_loss(x, params[0], params[1], params[2]);
  const std::vector<Tensor> g = grad({loss}, params, {}, {.create_graph = true});
  Tensor dot = Tensor::scalar(0.0, DType::f64);
  for (std::size_t k = 0; k < g.size(); ++k) dot = dot + sum(g[k] * vs[k]);
  const std::vector<Tensor> hv = grad({dot}, params);

  // (grad(p + eps v) - grad(p - eps v)) / (2 eps).
  const double eps = 1e-6;
  auto grads_at = [&](double t) {
    std::vector<Tensor> shifted;
    for (std::size_t k = 0; k < params.size(); ++k) shifted.push_back((params[k].detach() + vs[k] * t).requires_grad_());
    return grad({mlp_loss(x, shifted[0], shifted[1], shifted[2])}, shifted);
  };
  const std::vector<Tensor> gp = grads_at(eps), gm = grads_at(-eps);
  for (std::size_t k = 0; k < params.size(); ++k) {
    const std::vector<double> a = hv[k].to_vector<double>(), p = gp[k].to_vector<double>(), m = gm[k].to_vector<double>();
    ASSERT_EQ(a.size(), p.size());
    // Central differences with eps = 1e-6: truncation ~eps^2 (1e-12), rounding ~1e-16 |grad| / eps
    // (gradients here are below ~15): about 1e-9 (a complex-step reference puts it under 2e-9).
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], (p[i] - m[i]) / (2 * eps), 1e-8) << k << " " << i;
  }
  tape::reset();
}

TEST(DoubleBackward, GradientPenaltyIsDifferentiableInTheParameters) {
  // WGAN-GP: (||d critic(x) / dx|| - 1)^2, a function of the critic's parameters through a
  // gradient; gradcheck compares its gradient (a double backward) with finite differences.
  Generator gen(16);
  const Tensor x = Tensor::uniform({3, 4}, -1, 1, gen, DType::f64);
  auto penalty = [x](const std::vector<Tensor>& p) {
    EnableGradGuard enable;  // gradcheck's finite differences run under NoGradGuard
    const Tensor xi = x.detach().requires_grad_();
    const Tensor critic = sum(linear(tanh(linear(xi, p[0], p[1])), p[2]));
    const Tensor gx = grad({critic}, {xi}, {}, {.create_graph = true})[0];
    return sum(square(sqrt(sum(gx * gx, {1})) - 1.0));
  };
  EXPECT_GRADCHECK(penalty, {rand64({5, 4}, gen), rand64({5}, gen), rand64({1, 5}, gen)});

  // And as a training step would use it: backward of the penalty fills the parameters' grad().
  std::vector<Tensor> p = {rand64({5, 4}, gen), rand64({5}, gen), rand64({1, 5}, gen)};
  penalty(p).backward();
  for (const Tensor& t : p) {
    ASSERT_TRUE(t.grad().defined());
    EXPECT_FALSE(t.grad().requires_grad());
  }
  tape::reset();
}

TEST(DoubleBackward, CreateGraphMakesLeafGradientsDifferentiable) {
  Tensor x = Tensor::from_values({0.5, -1.5, 2.0}, {3}, DType::f64).requires_grad_();
  const Tensor y = sum(x * x * x);
  y.backward(Tensor(), std::nullopt, /*create_graph=*/true);
  const Tensor g = x.grad();  // 3 x^2, a graph tensor
  ASSERT_TRUE(g.requires_grad());
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0.75, 6.75, 12.0}));
  x.zero_grad();
  sum(g).backward(Tensor(), /*retain_graph=*/true);  // d/dx sum(3 x^2) = 6 x
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3.0, -9.0, 12.0}));
  EXPECT_FALSE(x.grad().requires_grad());
  // create_graph retains the graph by default: the first-order graph is still walkable.
  x.zero_grad();
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0.75, 6.75, 12.0}));
  tape::reset();

  // Without create_graph the gradient is a plain tensor.
  const Tensor x2 = Tensor::from_values({1.0}, {1}, DType::f64).requires_grad_();
  sum(x2 * x2).backward();
  EXPECT_FALSE(x2.grad().requires_grad());
}

TEST(DoubleBackward, ThirdOrderThroughGrad) {
  const Tensor x = Tensor::from_values({0.3, 1.2}, {2}, DType::f64).requires_grad_();
  const Tensor y = sum(sin(x));
  const Tensor g1 = grad({y}, {x}, {}, {.create_graph = true})[0];              // cos x
  const Tensor g2 = grad({sum(g1)}, {x}, {}, {.create_graph = true})[0];        // -sin x
  const Tensor g3 = grad({sum(g2)}, {x})[0];                                     // -cos x
  const auto v = g3.to_vector<double>();
  EXPECT_NEAR(v[0], -std::cos(0.3), 1e-15);
  EXPECT_NEAR(v[1], -std::cos(1.2), 1e-15);
  tape::reset();
}

namespace {
struct Cube : tg::autograd::Function<Cube> {
  static Tensor forward(tg::autograd::AutogradContext& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x * x;
  }
  static tg::autograd::tensor_list backward(tg::autograd::AutogradContext& ctx, tg::autograd::tensor_list g) {
    const Tensor x = ctx.get_saved_variables()[0];
    return {g[0] * 3.0 * x * x};
  }
};
}  // namespace

TEST(DoubleBackward, AnOpWithoutDifferentiableBackwardIsAClearError) {
  // An op recorded with a kernel closure only, as a user's own record() call may be.
  auto twice = [](const Tensor& a) {
    return record("twice", a.detach() * 2.0, {a}, [](BackwardContext& ctx) { ctx.accumulate(0, ctx.grad_output() * 2.0); });
  };
  const Tensor x = Tensor::from_values({0.5, 2.0, 3.0}, {3}, DType::f64).requires_grad_();
  tg::testing::expect_error<std::runtime_error>(
      [&] { grad({sum(twice(x * 1.0))}, {x}, {}, {.create_graph = true}); },
      {"twice: double backward (create_graph) is not supported", "no differentiable backward"});
  tape::reset();
  // The same graph without create_graph is fine.
  EXPECT_NO_THROW(grad({sum(twice(x * 1.0))}, {x}));
  tape::reset();
}

// A custom tg::autograd::Function whose backward uses tg ops is differentiable: d²(x³)/dx² = 6x,
// d³/dx³ = 6, and gradgradcheck passes, for one output and for two (one node per output).
struct CubeAndSquare : tg::autograd::Function<CubeAndSquare> {
  static tg::autograd::tensor_list forward(tg::autograd::AutogradContext& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return {x * x * x, x * x};
  }
  static tg::autograd::tensor_list backward(tg::autograd::AutogradContext& ctx, tg::autograd::tensor_list g) {
    const Tensor x = ctx.get_saved_variables()[0];
    return {g[0] * 3.0 * x * x + g[1] * 2.0 * x};
  }
};

TEST(DoubleBackward, CustomFunction) {
  const Tensor x = Tensor::from_values({0.5, -2.0, 3.0}, {3}, DType::f64).requires_grad_();
  const Tensor g1 = grad({sum(Cube::apply(x))}, {x}, {}, {.create_graph = true})[0];  // 3x²
  const Tensor g2 = grad({sum(g1)}, {x}, {}, {.create_graph = true})[0];              // 6x
  const Tensor g3 = grad({sum(g2)}, {x})[0];                                          // 6
  const auto v2 = g2.to_vector<double>(), v3 = g3.to_vector<double>();
  EXPECT_DOUBLE_EQ(v2[0], 3.0);
  EXPECT_DOUBLE_EQ(v2[1], -12.0);
  EXPECT_DOUBLE_EQ(v2[2], 18.0);
  for (double d : v3) EXPECT_DOUBLE_EQ(d, 6.0);
  tape::reset();
  Generator gen(31);
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return Cube::apply(in[0]); }, {rand64({2, 3}, gen)});
  EXPECT_GRADGRADCHECK(
      [](const std::vector<Tensor>& in) {
        const auto out = CubeAndSquare::apply(in[0]);
        return out[0] * 0.5 + out[1] * in[0];
      },
      {rand64({4}, gen)});
}

// A Function that saves its output: under create_graph the saved output is the op's output in the
// graph, so d²(exp x)/dx² = exp x (torch 1.13 gives [1.6487, 2.7183] for x = [0.5, 1]); with two
// outputs, the output whose gradient a backward run handles.
struct ExpSavingOutput : tg::autograd::Function<ExpSavingOutput> {
  static Tensor forward(tg::autograd::AutogradContext& ctx, const Tensor& x) {
    Tensor y = exp(x);
    ctx.save_for_backward({y});
    return y;
  }
  static tg::autograd::tensor_list backward(tg::autograd::AutogradContext& ctx, tg::autograd::tensor_list g) {
    return {g[0] * ctx.get_saved_variables()[0]};
  }
};
struct ExpAndSquareSavingOutputs : tg::autograd::Function<ExpAndSquareSavingOutputs> {
  static tg::autograd::tensor_list forward(tg::autograd::AutogradContext& ctx, const Tensor& x) {
    Tensor e = exp(x), s = x * x;
    ctx.save_for_backward({e, x});
    return {e, s};
  }
  static tg::autograd::tensor_list backward(tg::autograd::AutogradContext& ctx, tg::autograd::tensor_list g) {
    const auto& saved = ctx.get_saved_variables();
    return {g[0] * saved[0] + g[1] * 2.0 * saved[1]};
  }
};

TEST(DoubleBackward, CustomFunctionSavingItsOutput) {
  const Tensor x = Tensor::from_values({0.5, 1.0}, {2}, DType::f64).requires_grad_();
  const Tensor g1 = grad({sum(ExpSavingOutput::apply(x))}, {x}, {}, {.create_graph = true})[0];
  ASSERT_TRUE(g1.requires_grad());
  const auto v2 = grad({sum(g1)}, {x})[0].to_vector<double>();
  EXPECT_NEAR(v2[0], std::exp(0.5), 1e-15);
  EXPECT_NEAR(v2[1], std::exp(1.0), 1e-15);
  tape::reset();
  Generator gen(32);
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return ExpSavingOutput::apply(in[0]) * in[0]; }, {rand64({2, 3}, gen)});
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return ExpAndSquareSavingOutputs::apply(in[0])[0]; },
                       {rand64({4}, gen)});
  EXPECT_GRADGRADCHECK(
      [](const std::vector<Tensor>& in) {
        const auto out = ExpAndSquareSavingOutputs::apply(in[0]);
        return out[0] * 0.5 + out[1] * in[0];
      },
      {rand64({4}, gen)});
}

// prod and cumprod at zeros, as torch: the gradient of a row with one zero is the product of the
// others at the zero (0 elsewhere); with two, every first derivative is 0 but the mixed second
// derivative of the two zeros is not. Their differentiable backwards never divide by x there.
TEST(DoubleBackward, ProdAndCumprodWithZeros) {
  const Tensor x = Tensor::from_values({0.7, 0.0, 1.3, -0.9,    // one zero
                                        0.0, 1.1, 0.0, 0.8,     // two zeros
                                        1.2, -0.6, 0.9, 0.0,    // a zero at the end
                                        0.0, 0.5, 1.4, -1.1},   // a zero first
                                       {4, 4}, DType::f64)
                       .requires_grad_();
  const std::vector<std::pair<const char*, Fn>> fns = {
      {"prod dim 1", [](const std::vector<Tensor>& in) { return prod(in[0], 1); }},
      {"prod dim 0 keepdim", [](const std::vector<Tensor>& in) { return prod(in[0], 0, true) * in[0]; }},
      {"prod all, many zeros", [](const std::vector<Tensor>& in) { return prod(in[0]); }},
      {"prod all, two zeros", [](const std::vector<Tensor>& in) { return prod(narrow(in[0], 0, 0, 2)); }},
      {"prod all, one zero", [](const std::vector<Tensor>& in) { return prod(narrow(in[0], 0, 0, 1)); }},
      {"cumprod dim 1", [](const std::vector<Tensor>& in) { return cumprod(in[0], 1); }},
      {"cumprod dim 0", [](const std::vector<Tensor>& in) { return cumprod(in[0], 0) * in[0]; }},
      {"cumprod of a 3-D view", [](const std::vector<Tensor>& in) { return cumprod(reshape(in[0], {2, 2, 4}), 1); }},
  };
  for (const auto& [name, fn] : fns) {
    SCOPED_TRACE(name);
    EXPECT_GRADGRADCHECK(fn, {x});
  }
  // The two-zero row's Hessian by hand: d2 prod / dx0 dx2 = x1 x3, every other entry 0.
  const Tensor row = narrow(x.detach(), 0, 1, 1).clone().requires_grad_();
  const Tensor g = grad({prod(row)}, {row}, {}, {.create_graph = true})[0];
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0, 0, 0, 0}));
  const Tensor h0 = grad({sum(narrow(g, 1, 0, 1))}, {row})[0];  // row 0 of the Hessian
  const std::vector<double> want = {0, 0, 1.1 * 0.8, 0};
  const std::vector<double> got = h0.to_vector<double>();
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << i;
  tape::reset();
}

TEST(DoubleBackward, ProdAndCumprodOfEmptyTensors) {
  const Tensor x = Tensor::zeros({0, 3}, DType::f64).requires_grad_();
  const std::vector<std::function<Tensor(const Tensor&)>> ops = {
      [](const Tensor& a) { return prod(a, 0); }, [](const Tensor& a) { return prod(a, 1); },
      [](const Tensor& a) { return cumprod(a, 0); }, [](const Tensor& a) { return cumprod(a, 1); }};
  for (const auto& op : ops) {
    const Tensor y = op(x);
    const Tensor g = grad({sum(y * y)}, {x}, {}, {.create_graph = true})[0];
    EXPECT_EQ(g.shape(), x.shape());
    EXPECT_EQ(g.dtype(), DType::f64);
    tape::reset();
  }
  // prod over the empty axis is 1 per column, as torch.prod.
  const Tensor y = prod(x, 0);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 1, 1}));
  tape::reset();
}

namespace {
// The GRU cell as composed ops (PyTorch's formula), the reference for the fused cell.
Tensor gru_composed(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  const std::int64_t H = h.size(1);
  const Tensor r = sigmoid(narrow(gi, 1, 0, H) + narrow(gh, 1, 0, H));
  const Tensor z = sigmoid(narrow(gi, 1, H, H) + narrow(gh, 1, H, H));
  const Tensor n = tanh(narrow(gi, 1, 2 * H, H) + r * narrow(gh, 1, 2 * H, H));
  return (1.0 - z) * n + z * h;
}
}  // namespace

TEST(DoubleBackward, FusedGruCell) {
  Generator gen(23);
  for (auto [B, H] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 4}, {2, 9}}) {
    SCOPED_TRACE("B=" + std::to_string(B) + " H=" + std::to_string(H));
    EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return gru_cell_fused(in[0] * 2.0, in[1] * 2.0, in[2]); },
                         {rand64({B, 3 * H}, gen), rand64({B, 3 * H}, gen), rand64({B, H}, gen)});
  }
  // As in a GRU step: gh = h W_hhᵀ, so h reaches the cell twice.
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return gru_cell_fused(in[0], linear(in[2], in[1]), in[2]); },
                       {rand64({2, 9}, gen), rand64({9, 3}, gen), rand64({2, 3}, gen)});
  // Only some inputs require grad: the others are constants of the rebuilt composite.
  const Tensor gi = rand64({2, 6}, gen).detach(), gh = rand64({2, 6}, gen).detach();
  EXPECT_GRADGRADCHECK([gi](const std::vector<Tensor>& in) { return gru_cell_fused(gi, in[0], in[1]); },
                       {gh.clone().requires_grad_(), rand64({2, 2}, gen)});
  EXPECT_GRADGRADCHECK([gi, gh](const std::vector<Tensor>& in) { return gru_cell_fused(gi, gh, in[0]); },
                       {rand64({2, 2}, gen)});
}

// Third order through the fused cell equals the composite's: its differentiable backward is
// differentiable again (the gates' derivatives are written in their own values).
TEST(DoubleBackward, FusedGruCellThirdOrderMatchesTheComposite) {
  Generator gen(24);
  const Tensor gi = rand64({2, 9}, gen), gh = rand64({2, 9}, gen), h = rand64({2, 3}, gen);
  const Tensor w = Tensor::uniform({2, 3}, -1, 1, gen, DType::f64);
  auto third = [&](auto cell) {
    const std::vector<Tensor> in = {gi, gh, h};
    std::vector<Tensor> g1 = grad({sum(cell(gi, gh, h) * w)}, in, {}, {.create_graph = true});
    std::vector<Tensor> g2 = grad({sum(g1[0] * g1[1]) + sum(g1[2] * g1[2])}, in, {}, {.create_graph = true});
    std::vector<Tensor> g3 = grad({sum(g2[0] * g2[1]) + sum(g2[2] * h)}, in);
    tape::reset();
    return g3;
  };
  const auto fused = third([](const Tensor& a, const Tensor& b, const Tensor& c) { return gru_cell_fused(a, b, c); });
  const auto composed = third(gru_composed);
  for (int i = 0; i < 3; ++i) EXPECT_LT(tg::testing::max_abs_diff(fused[i], composed[i]), 1e-12) << i;
}

TEST(DoubleBackward, BackwardThroughAFreedGraphIsAClearError) {
  const Tensor x = Tensor::from_values({0.5, 2.0}, {2}, DType::f64).requires_grad_();
  const Tensor y = sum(tanh(x));
  const Tensor g = grad({y}, {x}, {}, {.retain_graph = false, .create_graph = true})[0];
  // g's graph runs through tanh's node, which that pass freed (retain_graph = false).
  tg::testing::expect_error<std::runtime_error>([&] { sum(g).backward(); },
                                                {"backward through the graph a second time", "retain_graph = true"});
  tape::reset();
  const Tensor y2 = sum(tanh(x));
  y2.backward();
  tg::testing::expect_error<std::runtime_error>([&] { y2.backward(); },
                                                {"backward through the graph a second time", "retain_graph = true"});
  tape::reset();
}

TEST(DoubleBackward, GradgradcheckCatchesAWrongSecondDerivative) {
  // A backward whose graph misses a dependence on x: x * detach(tanh(x)) has the analytic
  // gradient detach(tanh(x)) + ..., constant for the second backward, while the numerical
  // derivative of that gradient in x is not zero.
  Generator gen(17);
  const Tensor x = rand64({3}, gen);
  const auto bad = gradgradcheck([](const std::vector<Tensor>& in) { return in[0] * tanh(in[0]).detach(); }, {x});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.message.find("gradgradcheck"), std::string::npos) << bad.message;
  tape::reset();
}

TEST(DoubleBackward, HooksAndIntermediateTargetsUnderCreateGraph) {
  // A hook computing with ops and an op output as a tg::grad target both record during a
  // create_graph walk (the tape grows while it is walked); the results stay differentiable.
  Tensor x = Tensor::from_values({0.5, -1.0, 2.0}, {3}, DType::f64).requires_grad_();
  Tensor h = x * x;
  h.register_hook([](const Tensor& g) { return g * 2.0 + 0.0; });
  Tensor y = sum(sin(h));
  const std::vector<Tensor> g = grad({y}, {h, x}, {}, {.create_graph = true});
  ASSERT_TRUE(g[0].requires_grad());
  ASSERT_TRUE(g[1].requires_grad());
  // dy/dx with the hook doubling dy/dh: 2 cos(x^2) 2x. Its derivative 4 cos(x^2) - 8 x^2 sin(x^2)
  // passes through h again in the second backward, where the hook doubles the sin term too.
  const Tensor d2 = grad({sum(g[1])}, {x})[0];
  const std::vector<double> xv = {0.5, -1.0, 2.0}, gv = g[1].to_vector<double>(), dv = d2.to_vector<double>();
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const double v = xv[i];
    EXPECT_NEAR(gv[i], 4 * v * std::cos(v * v), 1e-14);
    EXPECT_NEAR(dv[i], 4 * std::cos(v * v) - 16 * v * v * std::sin(v * v), 1e-13);
  }
  tape::reset();
}
