// Tensor's methods (autograd/tensor.h, PyTorch's names) against the free functions they forward
// to: the same values, dtype, shape, requires_grad and gradients, and the methods' own checks
// (mm, bmm, mv, dot, t) and defaults (argmax without a dim, slice's absent bounds).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/creation.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "error_of.h"
#include "gradcheck_util.h"

using namespace tg;
using namespace tg::testing;
using namespace tg::indexing;

namespace {

using Fn = std::function<Tensor(const Tensor&)>;

/// x (2, 3, 4) float64 in (0.1, 2.1): positive (log, sqrt, pow) and without ties.
Tensor input() {
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[i] = 0.1 + 2.0 * ((i * 7) % 24) / 24.0;
  return Tensor::from_values(v, {2, 3, 4}, DType::f64).requires_grad_();
}

/// Runs `method` and `free_fn` on fresh copies of input(): equal outputs (bitwise), dtype, shape and
/// requires_grad; for a floating output, equal gradients of sum(out * w) with w fixed.
void expect_same(const std::string& name, const Fn& method, const Fn& free_fn) {
  SCOPED_TRACE(name);
  const Tensor x1 = input(), x2 = input();
  const Tensor a = method(x1), b = free_fn(x2);
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.requires_grad(), b.requires_grad());
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  if (!a.requires_grad()) return;
  const Tensor w = Tensor::arange(0, static_cast<double>(a.numel()), 1, DType::f64).reshape(a.shape()) * 0.25 - 1.0;
  sum(a * w).backward();
  sum(b * w).backward();
  ASSERT_TRUE(x1.grad().defined());
  EXPECT_EQ(x1.grad().to_vector<double>(), x2.grad().to_vector<double>());
}

Tensor other() { return Tensor::from_values({0.5, -1.0, 2.0, 0.25}, {4}, DType::f64); }
Tensor index1() { return Tensor::from_vector(std::vector<std::int64_t>{2, 0, 2}, {3}); }
Tensor mask() {
  return ge(Tensor::from_values({1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1}, {3, 4}, DType::f64), 0.5);
}

}  // namespace

TEST(TensorMethods, ArithmeticEqualsFreeFunctions) {
  const Tensor o = other();
  expect_same("add", [&](const Tensor& x) { return x.add(o); }, [&](const Tensor& x) { return add(x, o); });
  expect_same("add alpha", [&](const Tensor& x) { return x.add(o, 2.5); }, [&](const Tensor& x) { return x + o * 2.5; });
  expect_same("add scalar", [](const Tensor& x) { return x.add(1.5, 2.0); }, [](const Tensor& x) { return add(x, 3.0); });
  expect_same("sub", [&](const Tensor& x) { return x.sub(o, -0.5); }, [&](const Tensor& x) { return x - o * -0.5; });
  expect_same("sub scalar", [](const Tensor& x) { return x.sub(1.5); }, [](const Tensor& x) { return sub(x, 1.5); });
  expect_same("mul", [&](const Tensor& x) { return x.mul(o); }, [&](const Tensor& x) { return mul(x, o); });
  expect_same("mul scalar", [](const Tensor& x) { return x.mul(3.0); }, [](const Tensor& x) { return x * 3.0; });
  expect_same("div", [&](const Tensor& x) { return x.div(o); }, [&](const Tensor& x) { return div(x, o); });
  expect_same("div scalar", [](const Tensor& x) { return x.div(4.0); }, [](const Tensor& x) { return x / 4.0; });
  expect_same("pow", [](const Tensor& x) { return x.pow(2.5); }, [](const Tensor& x) { return pow(x, 2.5); });
  expect_same("pow tensor", [&](const Tensor& x) { return x.pow(o); }, [&](const Tensor& x) { return pow(x, o); });
  expect_same("maximum", [&](const Tensor& x) { return x.maximum(o); }, [&](const Tensor& x) { return maximum(x, o); });
  expect_same("minimum", [&](const Tensor& x) { return x.minimum(o); }, [&](const Tensor& x) { return minimum(x, o); });
  const std::vector<std::tuple<std::string, Fn, Fn>> unary = {
      {"neg", [](const Tensor& x) { return x.neg(); }, [](const Tensor& x) { return neg(x); }},
      {"exp", [](const Tensor& x) { return x.exp(); }, [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return x.log(); }, [](const Tensor& x) { return log(x); }},
      {"sqrt", [](const Tensor& x) { return x.sqrt(); }, [](const Tensor& x) { return sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return x.rsqrt(); }, [](const Tensor& x) { return rsqrt(x); }},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, [](const Tensor& x) { return tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }, [](const Tensor& x) { return sigmoid(x); }},
      {"relu", [](const Tensor& x) { return (x - 1.0).relu(); }, [](const Tensor& x) { return relu(x - 1.0); }},
      {"abs", [](const Tensor& x) { return (x - 1.0).abs(); }, [](const Tensor& x) { return abs(x - 1.0); }},
      {"sign", [](const Tensor& x) { return (x - 1.0).sign(); }, [](const Tensor& x) { return sign(x - 1.0); }},
      {"square", [](const Tensor& x) { return x.square(); }, [](const Tensor& x) { return square(x); }},
      {"sin", [](const Tensor& x) { return x.sin(); }, [](const Tensor& x) { return sin(x); }},
      {"cos", [](const Tensor& x) { return x.cos(); }, [](const Tensor& x) { return cos(x); }},
      {"erf", [](const Tensor& x) { return x.erf(); }, [](const Tensor& x) { return erf(x); }},
      {"log1p", [](const Tensor& x) { return x.log1p(); }, [](const Tensor& x) { return log1p(x); }},
      {"expm1", [](const Tensor& x) { return x.expm1(); }, [](const Tensor& x) { return expm1(x); }},
      {"reciprocal", [](const Tensor& x) { return x.reciprocal(); }, [](const Tensor& x) { return reciprocal(x); }},
      {"clamp", [](const Tensor& x) { return x.clamp(0.5, 1.5); }, [](const Tensor& x) { return clamp(x, 0.5, 1.5); }},
      {"clamp max only", [](const Tensor& x) { return x.clamp(std::nullopt, 1.0); },
       [](const Tensor& x) { return clamp(x, std::nullopt, 1.0); }},
      {"clamp_min", [](const Tensor& x) { return x.clamp_min(1.0); }, [](const Tensor& x) { return clamp_min(x, 1.0); }},
      {"clamp_max", [](const Tensor& x) { return x.clamp_max(1.0); }, [](const Tensor& x) { return clamp_max(x, 1.0); }},
  };
  for (const auto& [name, m, f] : unary) expect_same(name, m, f);
  const Tensor c = mask();
  expect_same("where", [&](const Tensor& x) { return x.where(c, o); }, [&](const Tensor& x) { return where(c, x, o); });
  expect_same("masked_fill", [&](const Tensor& x) { return x.masked_fill(c, -1.0); },
              [&](const Tensor& x) { return masked_fill(x, c, -1.0); });
}

TEST(TensorMethods, ComparisonsEqualFreeFunctions) {
  const Tensor o = other();
  expect_same("eq", [](const Tensor& x) { return x.eq(0.1); }, [](const Tensor& x) { return eq(x, 0.1); });
  expect_same("ne", [&](const Tensor& x) { return x.ne(o); }, [&](const Tensor& x) { return ne(x, o); });
  expect_same("lt", [&](const Tensor& x) { return x.lt(o); }, [&](const Tensor& x) { return lt(x, o); });
  expect_same("le", [](const Tensor& x) { return x.le(1.0); }, [](const Tensor& x) { return le(x, 1.0); });
  expect_same("gt", [&](const Tensor& x) { return x.gt(o); }, [&](const Tensor& x) { return gt(x, o); });
  expect_same("ge", [](const Tensor& x) { return x.ge(1.0); }, [](const Tensor& x) { return ge(x, 1.0); });
  expect_same("eq tensor", [&](const Tensor& x) { return x.eq(o); }, [&](const Tensor& x) { return eq(x, o); });
  expect_same("ne scalar", [](const Tensor& x) { return x.ne(0.1); }, [](const Tensor& x) { return ne(x, 0.1); });
  expect_same("lt scalar", [](const Tensor& x) { return x.lt(1.0); }, [](const Tensor& x) { return lt(x, 1.0); });
  expect_same("le tensor", [&](const Tensor& x) { return x.le(o); }, [&](const Tensor& x) { return le(x, o); });
  expect_same("gt scalar", [](const Tensor& x) { return x.gt(1.0); }, [](const Tensor& x) { return gt(x, 1.0); });
  expect_same("ge tensor", [&](const Tensor& x) { return x.ge(o); }, [&](const Tensor& x) { return ge(x, o); });
  const Tensor c = mask();
  expect_same("logical_and", [&](const Tensor& x) { return x.gt(1.0).logical_and(c); },
              [&](const Tensor& x) { return logical_and(gt(x, 1.0), c); });
  expect_same("logical_or", [&](const Tensor& x) { return x.gt(1.0).logical_or(c); },
              [&](const Tensor& x) { return logical_or(gt(x, 1.0), c); });
  expect_same("logical_xor", [&](const Tensor& x) { return x.logical_xor(c); }, [&](const Tensor& x) { return logical_xor(x, c); });
  expect_same("logical_not", [](const Tensor& x) { return x.gt(1.0).logical_not(); },
              [](const Tensor& x) { return logical_not(gt(x, 1.0)); });
  expect_same("isnan", [](const Tensor& x) { return x.isnan(); }, [](const Tensor& x) { return isnan(x); });
  expect_same("isinf", [](const Tensor& x) { return x.isinf(); }, [](const Tensor& x) { return isinf(x); });
  expect_same("isfinite", [](const Tensor& x) { return x.isfinite(); }, [](const Tensor& x) { return isfinite(x); });
  expect_same("any", [](const Tensor& x) { return x.gt(2.0).any(); }, [](const Tensor& x) { return any(gt(x, 2.0)); });
  expect_same("any dim", [](const Tensor& x) { return x.gt(1.5).any(-1, true); },
              [](const Tensor& x) { return any(gt(x, 1.5), -1, true); });
  expect_same("all", [](const Tensor& x) { return x.all(); }, [](const Tensor& x) { return all(x); });
  expect_same("all dim", [](const Tensor& x) { return x.gt(0.5).all(1); }, [](const Tensor& x) { return all(gt(x, 0.5), 1); });
  expect_same("count_nonzero", [](const Tensor& x) { return x.gt(1.0).count_nonzero(); },
              [](const Tensor& x) { return count_nonzero(gt(x, 1.0)); });
  expect_same("count_nonzero dim", [](const Tensor& x) { return x.gt(1.0).count_nonzero(-1); },
              [](const Tensor& x) { return count_nonzero(gt(x, 1.0), {-1}); });
  expect_same("count_nonzero dims", [](const Tensor& x) { return x.gt(1.0).count_nonzero({0, 2}); },
              [](const Tensor& x) { return count_nonzero(gt(x, 1.0), {0, 2}); });
  expect_same("nonzero", [](const Tensor& x) { return x.gt(1.5).nonzero(); }, [](const Tensor& x) { return nonzero(gt(x, 1.5)); });
}

TEST(TensorMethods, ReductionsEqualFreeFunctions) {
  const std::vector<std::tuple<std::string, Fn, Fn>> cases = {
      {"sum", [](const Tensor& x) { return x.sum(); }, [](const Tensor& x) { return sum(x); }},
      {"sum dim", [](const Tensor& x) { return x.sum(-1); }, [](const Tensor& x) { return sum(x, {-1}); }},
      {"sum dims keepdim", [](const Tensor& x) { return x.sum({0, 2}, true); }, [](const Tensor& x) { return sum(x, {0, 2}, true); }},
      {"mean", [](const Tensor& x) { return x.mean(); }, [](const Tensor& x) { return mean(x); }},
      {"mean dim", [](const Tensor& x) { return x.mean(1, true); }, [](const Tensor& x) { return mean(x, {1}, true); }},
      {"mean dims", [](const Tensor& x) { return x.mean({0, 1}); }, [](const Tensor& x) { return mean(x, {0, 1}); }},
      {"max", [](const Tensor& x) { return x.max(); }, [](const Tensor& x) { return max(x); }},
      {"max dim", [](const Tensor& x) { return std::get<0>(x.max(1)); }, [](const Tensor& x) { return std::get<0>(max(x, 1)); }},
      {"max dim indices", [](const Tensor& x) { return std::get<1>(x.max(-1, true)); },
       [](const Tensor& x) { return std::get<1>(max(x, -1, true)); }},
      {"min", [](const Tensor& x) { return x.min(); }, [](const Tensor& x) { return min(x); }},
      {"min dim", [](const Tensor& x) { return std::get<0>(x.min(0)); }, [](const Tensor& x) { return std::get<0>(min(x, 0)); }},
      {"amax", [](const Tensor& x) { return x.amax(); }, [](const Tensor& x) { return amax(x); }},
      {"amax dim", [](const Tensor& x) { return x.amax(-1); }, [](const Tensor& x) { return amax(x, {-1}); }},
      {"amin dims", [](const Tensor& x) { return x.amin({0, 2}, true); }, [](const Tensor& x) { return amin(x, {0, 2}, true); }},
      {"amin dim", [](const Tensor& x) { return x.amin(1); }, [](const Tensor& x) { return amin(x, {1}); }},
      {"argmax dim", [](const Tensor& x) { return x.argmax(1); }, [](const Tensor& x) { return argmax(x, 1); }},
      {"argmin dim", [](const Tensor& x) { return x.argmin(-1, true); }, [](const Tensor& x) { return argmin(x, -1, true); }},
      {"var", [](const Tensor& x) { return x.var(); }, [](const Tensor& x) { return var(x); }},
      {"var dim", [](const Tensor& x) { return x.var(-1, false, true); }, [](const Tensor& x) { return var(x, {-1}, false, true); }},
      {"var correction", [](const Tensor& x) { return x.var({1, 2}, Correction{0}); },
       [](const Tensor& x) { return var(x, {1, 2}, Correction{0}); }},
      {"var dim correction", [](const Tensor& x) { return x.var(2, Correction{2}, true); },
       [](const Tensor& x) { return var(x, {2}, Correction{2}, true); }},
      {"std", [](const Tensor& x) { return x.std(); }, [](const Tensor& x) { return tg::std(x); }},
      {"std dim", [](const Tensor& x) { return x.std(0); }, [](const Tensor& x) { return tg::std(x, {0}); }},
      {"std correction", [](const Tensor& x) { return x.std({2}, Correction{0}, true); },
       [](const Tensor& x) { return tg::std(x, {2}, Correction{0}, true); }},
      {"std dim correction", [](const Tensor& x) { return x.std(1, Correction{0}); },
       [](const Tensor& x) { return tg::std(x, {1}, Correction{0}); }},
      {"logsumexp", [](const Tensor& x) { return x.logsumexp({0, 2}); }, [](const Tensor& x) { return logsumexp(x, {0, 2}); }},
      {"logsumexp dim", [](const Tensor& x) { return x.logsumexp(-1, true); }, [](const Tensor& x) { return logsumexp(x, {-1}, true); }},
      {"prod", [](const Tensor& x) { return x.prod(); }, [](const Tensor& x) { return prod(x); }},
      {"prod dim", [](const Tensor& x) { return x.prod(1, true); }, [](const Tensor& x) { return prod(x, 1, true); }},
      {"norm", [](const Tensor& x) { return x.norm(); }, [](const Tensor& x) { return norm(x); }},
      {"norm dims", [](const Tensor& x) { return x.norm(3.0, {0, 2}); }, [](const Tensor& x) { return norm(x, 3.0, {0, 2}); }},
      {"norm dim", [](const Tensor& x) { return x.norm(kInf, -1, true); }, [](const Tensor& x) { return norm(x, kInf, {-1}, true); }},
      {"cumsum", [](const Tensor& x) { return x.cumsum(1); }, [](const Tensor& x) { return cumsum(x, 1); }},
      {"cumprod", [](const Tensor& x) { return x.cumprod(-1); }, [](const Tensor& x) { return cumprod(x, -1); }},
      {"topk", [](const Tensor& x) { return std::get<0>(x.topk(2)); }, [](const Tensor& x) { return std::get<0>(topk(x, 2)); }},
      {"topk args", [](const Tensor& x) { return std::get<1>(x.topk(2, 1, false, true)); },
       [](const Tensor& x) { return std::get<1>(topk(x, 2, 1, false, true)); }},
      {"sort", [](const Tensor& x) { return std::get<0>(x.sort()); }, [](const Tensor& x) { return std::get<0>(sort(x)); }},
      {"sort descending", [](const Tensor& x) { return std::get<1>(x.sort(0, true)); },
       [](const Tensor& x) { return std::get<1>(sort(x, 0, true)); }},
      {"argsort", [](const Tensor& x) { return x.argsort(1, true); }, [](const Tensor& x) { return argsort(x, 1, true); }},
  };
  for (const auto& [name, m, f] : cases) expect_same(name, m, f);
}

TEST(TensorMethods, ArgmaxWithoutDimIsOverTheFlattenedTensor) {
  const Tensor x = input();
  const Tensor i = x.argmax();
  EXPECT_EQ(i.dim(), 0);
  EXPECT_EQ(i.item(), argmax(reshape(x, {-1}), 0).item());
  EXPECT_EQ(x.argmin(std::nullopt, true).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(x.argmin(std::nullopt, true).item(), argmin(reshape(x, {-1}), 0).item());
}

TEST(TensorMethods, ShapeOpsEqualFreeFunctions) {
  const std::vector<std::tuple<std::string, Fn, Fn>> cases = {
      {"view", [](const Tensor& x) { return x.view({4, -1}); }, [](const Tensor& x) { return view(x, {4, -1}); }},
      {"reshape", [](const Tensor& x) { return x.reshape({6, 4}); }, [](const Tensor& x) { return reshape(x, {6, 4}); }},
      {"view_as", [](const Tensor& x) { return x.view_as(Tensor::zeros({3, 8})); }, [](const Tensor& x) { return view(x, {3, 8}); }},
      {"reshape_as", [](const Tensor& x) { return x.reshape_as(Tensor::zeros({24})); }, [](const Tensor& x) { return reshape(x, {24}); }},
      {"flatten", [](const Tensor& x) { return x.flatten(); }, [](const Tensor& x) { return flatten(x); }},
      {"flatten 1", [](const Tensor& x) { return x.flatten(1); }, [](const Tensor& x) { return flatten(x, 1); }},
      {"transpose", [](const Tensor& x) { return x.transpose(1, 2); }, [](const Tensor& x) { return transpose(x, 1, 2); }},
      {"transpose last", [](const Tensor& x) { return x.transpose(-2, -1); }, [](const Tensor& x) { return transpose(x, -2, -1); }},
      {"t", [](const Tensor& x) { return x.flatten(1).t(); }, [](const Tensor& x) { return transpose(flatten(x, 1), 0, 1); }},
      {"t 1-D", [](const Tensor& x) { return x.flatten().t(); }, [](const Tensor& x) { return flatten(x); }},
      {"permute", [](const Tensor& x) { return x.permute({2, 0, 1}); }, [](const Tensor& x) { return permute(x, {2, 0, 1}); }},
      {"unsqueeze", [](const Tensor& x) { return x.unsqueeze(-1); }, [](const Tensor& x) { return unsqueeze(x, -1); }},
      {"squeeze", [](const Tensor& x) { return x.unsqueeze(1).squeeze(); }, [](const Tensor& x) { return squeeze(unsqueeze(x, 1)); }},
      {"squeeze dim", [](const Tensor& x) { return x.unsqueeze(0).squeeze(0); }, [](const Tensor& x) { return squeeze(unsqueeze(x, 0), 0); }},
      {"expand", [](const Tensor& x) { return x.unsqueeze(0).expand({3, -1, -1, -1}); },
       [](const Tensor& x) { return expand(unsqueeze(x, 0), {3, 2, 3, 4}); }},
      {"expand_as", [](const Tensor& x) { return x.sum(0).expand_as(Tensor::zeros({2, 3, 4})); },
       [](const Tensor& x) { return expand(sum(x, {0}), {2, 3, 4}); }},
      {"broadcast_to", [](const Tensor& x) { return x.broadcast_to({5, 2, 3, 4}); }, [](const Tensor& x) { return broadcast_to(x, {5, 2, 3, 4}); }},
      {"repeat", [](const Tensor& x) { return x.repeat({1, 2, 1}); }, [](const Tensor& x) { return repeat(x, {1, 2, 1}); }},
      {"flip", [](const Tensor& x) { return x.flip({0, 2}); }, [](const Tensor& x) { return flip(x, {0, 2}); }},
      {"roll", [](const Tensor& x) { return x.roll({1, -1}, {0, 2}); }, [](const Tensor& x) { return roll(x, {1, -1}, {0, 2}); }},
      {"roll one", [](const Tensor& x) { return x.roll(-1, 1); }, [](const Tensor& x) { return roll(x, {-1}, {1}); }},
      {"roll flat", [](const Tensor& x) { return x.roll({5}); }, [](const Tensor& x) { return roll(x, {5}); }},
      {"tril", [](const Tensor& x) { return x.tril(); }, [](const Tensor& x) { return tril(x); }},
      {"triu", [](const Tensor& x) { return x.triu(1); }, [](const Tensor& x) { return triu(x, 1); }},
      {"contiguous", [](const Tensor& x) { return x.contiguous() * 1.0; }, [](const Tensor& x) { return x * 1.0; }},
      {"narrow", [](const Tensor& x) { return x.narrow(2, 1, 2); }, [](const Tensor& x) { return narrow(x, 2, 1, 2); }},
      {"slice", [](const Tensor& x) { return x.slice(2, 1, std::nullopt, 2); }, [](const Tensor& x) { return slice(x, 2, 1, 4, 2); }},
      {"slice default", [](const Tensor& x) { return x.slice(); }, [](const Tensor& x) { return slice(x, 0, 0, 2); }},
      {"slice negative", [](const Tensor& x) { return x.slice(1, -2); }, [](const Tensor& x) { return slice(x, 1, 1, 3); }},
      {"select", [](const Tensor& x) { return x.select(1, -1); }, [](const Tensor& x) { return select(x, 1, -1); }},
      {"split", [](const Tensor& x) { return x.split(3, 2)[1]; }, [](const Tensor& x) { return split(x, 3, 2)[1]; }},
      {"split sizes", [](const Tensor& x) { return x.split({1, 2}, 1)[1]; }, [](const Tensor& x) { return split(x, {1, 2}, 1)[1]; }},
      {"split_with_sizes", [](const Tensor& x) { return x.split_with_sizes({3, 1}, -1)[0]; },
       [](const Tensor& x) { return split_with_sizes(x, {3, 1}, -1)[0]; }},
      {"chunk", [](const Tensor& x) { return x.chunk(2)[1]; }, [](const Tensor& x) { return chunk(x, 2)[1]; }},
      {"unbind", [](const Tensor& x) { return x.unbind(1)[2]; }, [](const Tensor& x) { return unbind(x, 1)[2]; }},
  };
  for (const auto& [name, m, f] : cases) expect_same(name, m, f);
  EXPECT_EQ(input().split(3, 2).size(), 2u);
  EXPECT_EQ(input().chunk(3, 1).size(), 3u);
  EXPECT_TRUE(input().is_contiguous());
  EXPECT_EQ(input().sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(error_of<std::invalid_argument>([] { input().t(); }),
            "t: expects a tensor with <= 2 dimensions, got shape [2, 3, 4] (use transpose(dim0, dim1))");
}

TEST(TensorMethods, IndexingEqualsFreeFunctions) {
  const Tensor idx = index1();
  const Tensor c = mask();
  const Tensor v = Tensor::from_values({9, 8, 7, 6}, {4}, DType::f64).requires_grad_();
  const std::vector<std::tuple<std::string, Fn, Fn>> cases = {
      {"index", [](const Tensor& x) { return x.index({Slice(), -1, Slice(1, None)}); },
       [](const Tensor& x) { return index(x, {Slice(), -1, Slice(1, None)}); }},
      {"index vector", [](const Tensor& x) { return x.index(std::vector<TensorIndex>{0, Ellipsis, None}); },
       [](const Tensor& x) { return index(x, {0, Ellipsis, None}); }},
      {"index mask", [&](const Tensor& x) { return x.index({1, c}); }, [&](const Tensor& x) { return index(x, {1, c}); }},
      {"index tensor", [&](const Tensor& x) { return x.index({Slice(), idx}); }, [&](const Tensor& x) { return index(x, {Slice(), idx}); }},
      {"index_put", [&](const Tensor& x) { return x.index_put({Slice(), idx}, v); },
       [&](const Tensor& x) { return index_put(x, {Slice(), idx}, v); }},
      {"index_put accumulate", [&](const Tensor& x) { return x.index_put(std::vector<TensorIndex>{0, idx}, v, true); },
       [&](const Tensor& x) { return index_put(x, {0, idx}, v, true); }},
      {"index_select", [&](const Tensor& x) { return x.index_select(1, idx); }, [&](const Tensor& x) { return index_select(x, 1, idx); }},
      {"gather", [](const Tensor& x) { return x.gather(2, Tensor::from_vector(std::vector<std::int64_t>(12, 3), {2, 3, 2})); },
       [](const Tensor& x) { return gather(x, 2, Tensor::from_vector(std::vector<std::int64_t>(12, 3), {2, 3, 2})); }},
      {"scatter_add", [](const Tensor& x) { return x.scatter_add(2, Tensor::from_vector(std::vector<std::int64_t>(6, 1), {2, 3, 1}), x * 2.0); },
       [](const Tensor& x) { return scatter_add(x, 2, Tensor::from_vector(std::vector<std::int64_t>(6, 1), {2, 3, 1}), x * 2.0); }},
      {"index_add", [&](const Tensor& x) { return x.index_add(1, idx, x * 3.0, 0.5); },
       [&](const Tensor& x) { return index_add(x, 1, idx, x * 3.0, 0.5); }},
      {"take_along_dim", [](const Tensor& x) { return x.take_along_dim(Tensor::zeros({1, 3, 2}, DType::i64), 2); },
       [](const Tensor& x) { return take_along_dim(x, Tensor::zeros({1, 3, 2}, DType::i64), 2); }},
      {"masked_select", [&](const Tensor& x) { return x.masked_select(c); }, [&](const Tensor& x) { return masked_select(x, c); }},
  };
  for (const auto& [name, m, f] : cases) expect_same(name, m, f);
}

TEST(TensorMethods, ProductsAndSoftmaxEqualFreeFunctions) {
  const Tensor w = Tensor::from_values({1, -2, 0.5, 3, 0.25, -1, 2, 1.5}, {4, 2}, DType::f64);
  const Tensor v4 = Tensor::from_values({1, -2, 0.5, 3}, {4}, DType::f64);
  expect_same("matmul", [&](const Tensor& x) { return x.matmul(w); }, [&](const Tensor& x) { return matmul(x, w); });
  expect_same("mm", [&](const Tensor& x) { return x.flatten(0, 1).mm(w); }, [&](const Tensor& x) { return matmul(flatten(x, 0, 1), w); });
  expect_same("bmm", [](const Tensor& x) { return x.bmm(x.transpose(1, 2)); },
              [](const Tensor& x) { return matmul(x, transpose(x, 1, 2)); });
  expect_same("mv", [&](const Tensor& x) { return x.select(0, 0).mv(v4); }, [&](const Tensor& x) { return matmul(select(x, 0, 0), v4); });
  expect_same("dot", [&](const Tensor& x) { return x.flatten().narrow(0, 0, 4).dot(v4); },
              [&](const Tensor& x) { return matmul(narrow(flatten(x), 0, 0, 4), v4); });
  expect_same("softmax", [](const Tensor& x) { return x.softmax(-1); }, [](const Tensor& x) { return softmax(x, -1); });
  expect_same("log_softmax", [](const Tensor& x) { return x.log_softmax(1); }, [](const Tensor& x) { return log_softmax(x, 1); });
  const Tensor x = input();
  EXPECT_EQ(error_of<std::invalid_argument>([&] { x.mm(w); }), "mm: expects two 2-D matrices, got shapes [2, 3, 4] and [4, 2]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { x.bmm(w); }),
            "bmm: expects two 3-D tensors with the same batch size, got shapes [2, 3, 4] and [4, 2]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { x.bmm(Tensor::zeros({3, 4, 2}, DType::f64)); }),
            "bmm: expects two 3-D tensors with the same batch size, got shapes [2, 3, 4] and [3, 4, 2]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { w.mv(w); }), "mv: expects a 2-D matrix and a 1-D vector, got shapes [4, 2] and [4, 2]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { w.dot(v4); }), "dot: expects two 1-D tensors, got shapes [4, 2] and [4]");
}

TEST(TensorMethods, SamplingConversionsAndCreation) {
  const Tensor p = Tensor::from_values({0.1, 0.2, 0.7, 0.5, 0.5, 0.0}, {2, 3}, DType::f64);
  Generator g1(7), g2(7);
  EXPECT_EQ(p.multinomial(2, true, g1).to_vector<std::int64_t>(), multinomial(p, 2, true, g2).to_vector<std::int64_t>());
  EXPECT_EQ(p.bernoulli(g1).to_vector<double>(), bernoulli(p, g2).to_vector<double>());
  EXPECT_EQ(p.bernoulli(0.5, g1).to_vector<double>(), bernoulli(p, 0.5, g2).to_vector<double>());
  manual_seed(3);
  const Tensor a = p.multinomial(1);
  manual_seed(3);
  EXPECT_EQ(a.to_vector<std::int64_t>(), multinomial(p, 1).to_vector<std::int64_t>());
  manual_seed(4);
  const Tensor b = p.bernoulli();
  manual_seed(4);
  EXPECT_EQ(b.to_vector<double>(), bernoulli(p).to_vector<double>());
  manual_seed(5);
  const Tensor c = p.bernoulli(0.25);
  manual_seed(5);
  EXPECT_EQ(c.to_vector<double>(), bernoulli(p, 0.25).to_vector<double>());

  const Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{1, 2}, {2});
  EXPECT_EQ(ids.to(p).dtype(), DType::f64);
  EXPECT_EQ(ids.type_as(Tensor::zeros({1})).dtype(), DType::f32);
  EXPECT_EQ(ids.type_as(p).to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_FALSE(ids.is_floating_point());
  EXPECT_TRUE(p.is_floating_point());
  EXPECT_EQ(p.new_zeros({2}).to_vector<double>(), (std::vector<double>{0, 0}));
  EXPECT_EQ(p.new_ones({1, 2}).shape(), (Shape{1, 2}));
  EXPECT_EQ(p.new_ones({1}).dtype(), DType::f64);
  EXPECT_EQ(ids.new_full({3}, 4).to_vector<std::int64_t>(), (std::vector<std::int64_t>{4, 4, 4}));
  EXPECT_EQ(ids.new_empty({2, 2}).dtype(), DType::i64);
}

TEST(TensorMethods, ChainLikePyTorch) {
  // q.view(B, T, H, dh).transpose(1, 2) and friends read as in Python.
  Generator gen(0);
  const Tensor x = rand64({2, 5, 8}, gen);
  const Tensor heads = x.view({2, 5, 2, 4}).transpose(1, 2);
  EXPECT_EQ(heads.shape(), (Shape{2, 2, 5, 4}));
  const Tensor att = heads.matmul(heads.transpose(-2, -1)).mul(0.5).softmax(-1);
  const Tensor out = att.matmul(heads).transpose(1, 2).contiguous().view({2, 5, 8});
  const Tensor ref = reshape(transpose(matmul(softmax(matmul(transpose(reshape(x, {2, 5, 2, 4}), 1, 2),
                                                                  transpose(transpose(reshape(x, {2, 5, 2, 4}), 1, 2), -2, -1)) * 0.5, -1),
                                              transpose(reshape(x, {2, 5, 2, 4}), 1, 2)), 1, 2), {2, 5, 8});
  EXPECT_EQ(out.to_vector<double>(), ref.to_vector<double>());
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return in[0].sum(-1).pow(2.0).mean(); }, {rand64({2, 3}, gen)});
}
