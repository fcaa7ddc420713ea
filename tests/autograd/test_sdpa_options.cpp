// scaled_dot_product_attention's options (torch's keyword arguments through C++20 designated
// initializers): every option gives what the positional form gives (outputs and gradients, fused
// and composed), is_causal equals an explicit causal mask (also when L != S), scale=None against a
// given scale (0 included, as torch), dropout without a generator draws from default_generator(),
// float64 gradcheck and gradgradcheck through the options with masks, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tensor.h"
#include "gradcheck_util.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::ScaledDotProductAttentionOptions;
using tg::Shape;
using tg::Tensor;
using tg::testing::max_abs_diff;

static_assert(std::is_aggregate_v<ScaledDotProductAttentionOptions>, "designated initializers need an aggregate");

struct Inputs {
  Tensor q, k, v, r;  // r: the weights of sum(out * r), the backward's seed
};

Inputs inputs(std::int64_t L, std::int64_t S, std::uint64_t seed = 41) {
  Generator gen(seed);
  Inputs in;
  in.q = Tensor::normal({2, 3, L, 4}, 0, 1, gen, DType::f64).requires_grad_();
  in.k = Tensor::normal({2, 3, S, 4}, 0, 1, gen, DType::f64).requires_grad_();
  in.v = Tensor::normal({2, 3, S, 5}, 0, 1, gen, DType::f64).requires_grad_();
  in.r = Tensor::normal({2, 3, L, 5}, 0, 1, gen, DType::f64);
  return in;
}

// Output and the gradients of q, k and v of one call.
std::vector<Tensor> outputs(const Inputs& in, const std::function<Tensor()>& call) {
  for (Tensor t : {in.q, in.k, in.v}) t.zero_grad();
  const Tensor out = call();
  tg::sum(out * in.r).backward();
  return {out.detach(), in.q.grad(), in.k.grad(), in.v.grad()};
}

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double tol = 0.0) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_LE(max_abs_diff(a[i], b[i]), tol) << "tensor " << i;
}

}  // namespace

TEST(SdpaOptions, EachOptionEqualsThePositionalForm) {
  const Inputs in = inputs(6, 7);
  Generator mgen(42);
  const Tensor float_mask = Tensor::normal({6, 7}, 0, 1, mgen, DType::f64);
  const Tensor i64_mask = tg::tril(Tensor::ones({6, 7}, DType::i64), 1);
  const Tensor bool_mask = Tensor::from_values({1, 0, 1, 1, 0, 1, 1}, {1, 7}, DType::b8);
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "composed");
    // The positional and the options overload of the op under test.
    auto pos = [fused](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double p, bool causal,
                       double scale, Generator* gen, Tensor* w) {
      return fused ? tg::scaled_dot_product_attention(q, k, v, mask, p, causal, scale, gen, w)
                   : tg::scaled_dot_product_attention_composed(q, k, v, mask, p, causal, scale, gen, w);
    };
    auto opt = [fused](const Tensor& q, const Tensor& k, const Tensor& v, const ScaledDotProductAttentionOptions& o) {
      return fused ? tg::scaled_dot_product_attention(q, k, v, o) : tg::scaled_dot_product_attention_composed(q, k, v, o);
    };
    const Tensor &q = in.q, &k = in.k, &v = in.v;
    {
      SCOPED_TRACE("defaults");
      expect_same(outputs(in, [&] { return opt(q, k, v, ScaledDotProductAttentionOptions{}); }),
                  outputs(in, [&] { return pos(q, k, v, Tensor(), 0.0, false, 0.0, nullptr, nullptr); }));
    }
    for (const Tensor& m : {float_mask, i64_mask, bool_mask}) {
      SCOPED_TRACE("attn_mask " + std::string(tg::dtype_name(m.dtype())));
      expect_same(outputs(in, [&] { return opt(q, k, v, {.attn_mask = m}); }),
                  outputs(in, [&] { return pos(q, k, v, m, 0.0, false, 0.0, nullptr, nullptr); }));
    }
    {
      SCOPED_TRACE("is_causal");
      expect_same(outputs(in, [&] { return opt(q, k, v, {.is_causal = true}); }),
                  outputs(in, [&] { return pos(q, k, v, Tensor(), 0.0, true, 0.0, nullptr, nullptr); }));
    }
    {
      SCOPED_TRACE("scale");
      expect_same(outputs(in, [&] { return opt(q, k, v, {.scale = 0.125}); }),
                  outputs(in, [&] { return pos(q, k, v, Tensor(), 0.0, false, 0.125, nullptr, nullptr); }));
    }
    {
      SCOPED_TRACE("dropout_p with a generator");
      Generator g1(7), g2(7);
      expect_same(outputs(in, [&] { return opt(q, k, v, {.dropout_p = 0.3, .generator = &g1}); }),
                  outputs(in, [&] { return pos(q, k, v, Tensor(), 0.3, false, 0.0, &g2, nullptr); }));
      EXPECT_EQ(g1.next_u64(), g2.next_u64());  // the same draws
    }
    {
      SCOPED_TRACE("all of torch's four");
      Generator g1(8), g2(8);
      expect_same(outputs(in,
                          [&] {
                            return opt(q, k, v,
                                       {.attn_mask = float_mask, .dropout_p = 0.1, .scale = 0.5, .generator = &g1});
                          }),
                  outputs(in, [&] { return pos(q, k, v, float_mask, 0.1, false, 0.5, &g2, nullptr); }));
    }
    {
      SCOPED_TRACE("weights");
      Tensor w1, w2;
      expect_same(outputs(in, [&] { return opt(q, k, v, {.attn_mask = bool_mask, .weights = &w1}); }),
                  outputs(in, [&] { return pos(q, k, v, bool_mask, 0.0, false, 0.0, nullptr, &w2); }));
      ASSERT_TRUE(w1.defined());
      EXPECT_EQ(w1.shape(), (Shape{2, 3, 6, 7}));
      EXPECT_EQ(max_abs_diff(w1, w2), 0.0);
    }
  }
}

// torch: is_causal=True is attn_mask = ones(L, S).tril() (top-left aligned), for L = S, L < S and L > S.
TEST(SdpaOptions, IsCausalEqualsAnExplicitCausalMask) {
  for (const auto& [L, S] : {std::pair<std::int64_t, std::int64_t>{6, 6}, {4, 9}, {9, 4}, {70, 130}}) {
    SCOPED_TRACE("L " + std::to_string(L) + ", S " + std::to_string(S));
    const Inputs in = inputs(L, S, 43);
    const Tensor causal = tg::tril(Tensor::ones({L, S}, DType::i64));
    const Tensor causal_bool = causal.to(DType::b8);
    const Tensor &q = in.q, &k = in.k, &v = in.v;
    const auto want = outputs(in, [&] { return tg::scaled_dot_product_attention(q, k, v, {.attn_mask = causal_bool}); });
    expect_same(outputs(in, [&] { return tg::scaled_dot_product_attention(q, k, v, {.is_causal = true}); }), want, 1e-12);
    expect_same(outputs(in, [&] { return tg::scaled_dot_product_attention(q, k, v, {.attn_mask = causal}); }), want, 1e-12);
    expect_same(outputs(in, [&] { return tg::scaled_dot_product_attention_composed(q, k, v, {.is_causal = true}); }), want,
                1e-12);
  }
}

// scale=None is 1/sqrt(E); a given scale is used as it is: 0 gives uniform weights (the mean of the
// values), where the positional form reads 0 as None.
TEST(SdpaOptions, ScaleNoneAndGivenScales) {
  const Inputs in = inputs(5, 6);
  const auto none = tg::scaled_dot_product_attention(in.q, in.k, in.v, {.scale = std::nullopt});
  EXPECT_LE(max_abs_diff(none, tg::scaled_dot_product_attention(in.q, in.k, in.v, {.scale = 0.5})), 1e-15);  // E = 4
  EXPECT_LE(max_abs_diff(none, tg::scaled_dot_product_attention(in.q, in.k, in.v)), 0.0);
  for (const bool fused : {true, false}) {
    const Tensor zero = fused ? tg::scaled_dot_product_attention(in.q, in.k, in.v, {.scale = 0.0})
                              : tg::scaled_dot_product_attention_composed(in.q, in.k, in.v, {.scale = 0.0});
    const Tensor mean_v = tg::expand(tg::mean(in.v, {-2}, true), {2, 3, 5, 5});
    EXPECT_LE(max_abs_diff(zero, mean_v), 1e-14) << (fused ? "fused" : "composed");
    const Tensor negative = fused ? tg::scaled_dot_product_attention(in.q, in.k, in.v, {.scale = -0.5})
                                  : tg::scaled_dot_product_attention_composed(in.q, in.k, in.v, {.scale = -0.5});
    EXPECT_LE(max_abs_diff(negative, tg::scaled_dot_product_attention_composed(-in.q, in.k, in.v, {.scale = 0.5})), 1e-14);
  }
}

// torch draws SDPA's dropout from its default generator; so do the options without a generator
// (one draw per call, as with a generator given), and the positional form still asks for one.
TEST(SdpaOptions, DropoutWithoutAGeneratorDrawsFromTheDefaultGenerator) {
  const Inputs in = inputs(5, 6);
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "composed");
    auto opt = [&](const ScaledDotProductAttentionOptions& o) {
      return fused ? tg::scaled_dot_product_attention(in.q, in.k, in.v, o)
                   : tg::scaled_dot_product_attention_composed(in.q, in.k, in.v, o);
    };
    tg::manual_seed(123);
    const auto a = outputs(in, [&] { return opt({.dropout_p = 0.4}); });
    const std::uint64_t after_a = tg::default_generator().next_u64();
    Generator g(123);
    const auto b = outputs(in, [&] { return opt({.dropout_p = 0.4, .generator = &g}); });
    expect_same(a, b);
    EXPECT_EQ(after_a, g.next_u64());
    // Without dropout nothing is drawn.
    tg::manual_seed(5);
    opt({.attn_mask = tg::tril(Tensor::ones({5, 6}, DType::i64))});
    EXPECT_EQ(tg::default_generator().next_u64(), Generator(5).next_u64());
  }
  tg::manual_seed(Generator::kDefaultSeed);
  tg::testing::expect_error([&] { tg::scaled_dot_product_attention(in.q, in.k, in.v, Tensor(), 0.4); },
                            {"scaled_dot_product_attention", "generator"});
}

TEST(SdpaOptions, GradcheckAndGradgradcheckThroughTheOptionsWithMasks) {
  Generator gen(44);
  auto r64 = [&](const Shape& s) { return tg::testing::rand64(s, gen); };
  const Tensor q = r64({2, 4, 3}), k = r64({2, 5, 3}), v = r64({2, 5, 2});
  const Tensor bool_mask =  // no row without an allowed key
      Tensor::from_values({1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1}, {4, 5}, DType::b8);
  const Tensor float_mask = Tensor::normal({1, 5}, 0, 1, gen, DType::f64);
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "composed");
    auto with = [fused](ScaledDotProductAttentionOptions o) {
      return [fused, o](const std::vector<Tensor>& in) {
        Generator g(9);  // the same dropout mask at every evaluation
        ScaledDotProductAttentionOptions oo = o;
        if (oo.dropout_p > 0) oo.generator = &g;
        return fused ? tg::scaled_dot_product_attention(in[0], in[1], in[2], oo)
                     : tg::scaled_dot_product_attention_composed(in[0], in[1], in[2], oo);
      };
    };
    for (const auto& o : {ScaledDotProductAttentionOptions{.attn_mask = bool_mask, .scale = 0.7},
                          ScaledDotProductAttentionOptions{.attn_mask = float_mask, .dropout_p = 0.3},
                          ScaledDotProductAttentionOptions{.is_causal = true, .scale = 1.5}}) {
      EXPECT_GRADCHECK(with(o), {q, k, v});
      EXPECT_GRADGRADCHECK(with(o), {q, k, v});
    }
    // A floating mask that requires grad gets one, through the options too.
    auto mask_input = [fused](const std::vector<Tensor>& in) {
      return fused ? tg::scaled_dot_product_attention(in[0], in[1], in[2], {.attn_mask = in[3], .scale = 0.6})
                   : tg::scaled_dot_product_attention_composed(in[0], in[1], in[2], {.attn_mask = in[3], .scale = 0.6});
    };
    EXPECT_GRADCHECK(mask_input, {q, k, v, r64({4, 5})});
    EXPECT_GRADGRADCHECK(mask_input, {q, k, v, r64({4, 5})});
  }
}

TEST(SdpaOptions, ErrorsAsThePositionalForm) {
  const Inputs in = inputs(5, 6);
  const Tensor mask = tg::tril(Tensor::ones({5, 6}, DType::i64));
  tg::testing::expect_error(
      [&] { tg::scaled_dot_product_attention(in.q, in.k, in.v, {.attn_mask = mask, .is_causal = true}); },
      {"scaled_dot_product_attention", "is_causal and attn_mask"});
  tg::testing::expect_error([&] { tg::scaled_dot_product_attention(in.q, in.k, in.v, {.dropout_p = 1.0}); },
                            {"scaled_dot_product_attention", "dropout_p"});
  tg::testing::expect_error(
      [&] { tg::scaled_dot_product_attention(in.q, in.k, in.v, {.attn_mask = Tensor::zeros({5, 7})}); },
      {"scaled_dot_product_attention", "attn_mask", "[5, 7]"});
}
