// scaled_dot_product_attention (tiled kernel) against its composite softmax(q kᵀ s + mask) v:
// values and every gradient on odd sizes, several key and query blocks, broadcast batch dims,
// causal, float and i64 masks (rows fully masked, rows masked in the first key blocks only),
// dropout (the same draws as the composite), float32 and float64; float64 gradchecks; thread
// independence; the weights path; errors. Key lengths up to kernels::kSaveProbsMaxKeys (128) take
// the path that keeps the probabilities for the backward; longer ones recompute them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/kernels/attention.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "gradcheck_util.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Shape;
using tg::Tensor;
using tg::testing::max_abs_diff;

struct Sdpa {
  Shape q, k, v;
  Tensor mask{};
  bool causal = false;
  double dropout = 0;
  double scale = 0;
};

// The positional overload of the fused or the composed op (both also take options).
using PositionalSdpa = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, bool, double,
                                  Generator*, Tensor*);
PositionalSdpa positional_op(bool fused) {
  return fused ? static_cast<PositionalSdpa>(tg::scaled_dot_product_attention)
               : static_cast<PositionalSdpa>(tg::scaled_dot_product_attention_composed);
}

// Output and gradients of sum(out * r) w.r.t. q, k, v, through the fused or the composed op.
std::vector<Tensor> run(bool fused, const Sdpa& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r,
                        std::uint64_t seed = 5) {
  for (Tensor t : {q, k, v}) t.zero_grad();
  Generator gen(seed);
  const auto op = positional_op(fused);
  const Tensor out = op(q, k, v, c.mask, c.dropout, c.causal, c.scale, &gen, nullptr);
  tg::sum(out * r).backward();
  return {out.detach(), q.grad(), k.grad(), v.grad(), Tensor::scalar(static_cast<double>(gen.next_u64() >> 12), DType::f64)};
}

void expect_fused_equals_composed(const Sdpa& c, DType dtype, const std::string& what) {
  SCOPED_TRACE(what + " " + std::string(tg::dtype_name(dtype)));
  Generator gen(31);
  const Tensor q = Tensor::normal(c.q, 0, 1, gen, dtype).requires_grad_();
  const Tensor k = Tensor::normal(c.k, 0, 1, gen, dtype).requires_grad_();
  const Tensor v = Tensor::normal(c.v, 0, 1, gen, dtype).requires_grad_();
  Sdpa cc = c;
  if (c.mask.defined() && is_floating(c.mask.dtype())) cc.mask = c.mask.to(dtype);
  const Tensor probe = run(false, cc, q, k, v, Tensor::zeros({1}, dtype))[0];
  const Tensor r = Tensor::normal(probe.shape(), 0, 1, gen, dtype);
  const auto a = run(true, cc, q, k, v, r), b = run(false, cc, q, k, v, r);
  const double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_LE(max_abs_diff(a[i], b[i]), tol) << "tensor " << i;
}

}  // namespace

TEST(ScaledDotProductAttentionFused, EqualsTheCompositeOnOddSizesAndBlocks) {
  std::vector<std::pair<std::string, Sdpa>> cases = {
      {"1x1", {{1, 1}, {1, 1}, {1, 1}}},
      {"5x7", {{2, 5, 3}, {2, 7, 3}, {2, 7, 5}}},
      {"blocks", {{2, 3, 140, 13}, {2, 3, 260, 13}, {2, 3, 260, 9}}},
      {"broadcast batch", {{2, 3, 67, 8}, {3, 65, 8}, {1, 3, 65, 4}, Tensor(), false, 0, 0.7}},
      {"causal L<S", {{2, 70, 16}, {2, 130, 16}, {2, 130, 16}, Tensor(), true}},
      {"causal L>S", {{1, 150, 16}, {1, 70, 16}, {1, 70, 16}, Tensor(), true}},
      {"causal square", {{3, 129, 64}, {3, 129, 64}, {3, 129, 64}, Tensor(), true}},
  };
  for (const DType dtype : {DType::f64, DType::f32})
    for (const auto& [name, c] : cases) expect_fused_equals_composed(c, dtype, name);
}

TEST(ScaledDotProductAttentionFused, EqualsTheCompositeWithMasks) {
  Generator gen(32);
  const std::int64_t L = 70, S = 140;
  // Float masks: per (L, S), broadcast per batch entry over rows (B, 1, 1, S).
  const Tensor float_ls = Tensor::normal({L, S}, 0, 2, gen, DType::f64);
  const Tensor float_pad = Tensor::normal({2, 1, 1, S}, 0, 2, gen, DType::f64);
  // i64 (nonzero = allowed): random, with row 3 allowed only past the first two key blocks (the
  // running max starts at -inf there) and row 5 fully masked (NaN, as PyTorch).
  std::vector<std::int64_t> allowed(L * S);
  for (std::int64_t l = 0; l < L; ++l)
    for (std::int64_t s = 0; s < S; ++s) allowed[l * S + s] = (l * 7 + s * 3) % 5 != 0;
  for (std::int64_t s = 0; s < S; ++s) allowed[3 * S + s] = s >= 130;
  for (std::int64_t s = 0; s < S; ++s) allowed[5 * S + s] = 0;
  const Tensor int_ls = Tensor::from_vector(allowed, {L, S});
  // A float mask with a fully -inf row.
  std::vector<double> inf_row(L * S, 0.0);
  for (std::int64_t s = 0; s < S; ++s) inf_row[9 * S + s] = -INFINITY;
  const Tensor float_inf = Tensor::from_vector(inf_row, {L, S});
  const std::vector<std::pair<std::string, Tensor>> masks = {
      {"float (L, S)", float_ls}, {"float (B, 1, 1, S)", float_pad}, {"i64 (L, S)", int_ls}, {"float -inf row", float_inf}};
  for (const DType dtype : {DType::f64, DType::f32})
    for (const auto& [name, m] : masks)
      expect_fused_equals_composed({{2, 2, L, 12}, {2, 2, S, 12}, {2, 2, S, 7}, m}, dtype, name);
}

TEST(ScaledDotProductAttentionFused, FullyMaskedRowIsNaNAndTheOthersAreNot) {
  Generator gen(33);
  const Tensor q = Tensor::normal({3, 4}, 0, 1, gen, DType::f64), k = Tensor::normal({5, 4}, 0, 1, gen, DType::f64);
  const Tensor v = Tensor::normal({5, 2}, 0, 1, gen, DType::f64);
  const Tensor mask = Tensor::from_vector(std::vector<std::int64_t>{1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}, {3, 5});
  const auto y = tg::scaled_dot_product_attention(q, k, v, mask).to_vector<double>();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(std::isnan(y[i]), i == 2 || i == 3) << i;
}

TEST(ScaledDotProductAttentionFused, DropoutDrawsWhatTheCompositeDraws) {
  for (const DType dtype : {DType::f64, DType::f32}) {
    expect_fused_equals_composed({{2, 2, 70, 8}, {2, 2, 75, 8}, {2, 2, 75, 6}, Tensor(), false, 0.3}, dtype, "dropout");
    expect_fused_equals_composed({{2, 70, 8}, {2, 70, 8}, {2, 70, 6}, Tensor(), true, 0.5}, dtype, "dropout causal");
  }
  // And the generator advances by one draw per call, as the composite's dropout (the fifth tensor
  // of run() is the next draw after the call).
  Generator gen(1);
  const Tensor q = Tensor::normal({4, 3}, 0, 1, gen, DType::f64).requires_grad_();
  const auto a = run(true, {{4, 3}, {4, 3}, {4, 3}, Tensor(), false, 0.2}, q, q, q, q);
  const auto b = run(false, {{4, 3}, {4, 3}, {4, 3}, Tensor(), false, 0.2}, q, q, q, q);
  EXPECT_EQ(a[4].item(), b[4].item());
}

TEST(ScaledDotProductAttentionFused, Gradcheck) {
  Generator gen(34);
  auto r64 = [&](const Shape& s) { return tg::testing::rand64(s, gen); };
  const Tensor q = r64({2, 5, 3}), k = r64({2, 7, 3}), v = r64({2, 7, 4});
  auto sdpa = [](Tensor mask, bool causal, double p) {
    return [mask, causal, p](const std::vector<Tensor>& in) {
      Generator g(9);  // the same dropout mask at every evaluation
      return tg::scaled_dot_product_attention(in[0], in[1], in[2], mask, p, causal, 0.0, &g);
    };
  };
  EXPECT_GRADCHECK(sdpa(Tensor(), false, 0.0), {q, k, v});
  EXPECT_GRADCHECK(sdpa(Tensor(), true, 0.0), {q, k, v});
  EXPECT_GRADCHECK(sdpa(Tensor::normal({5, 7}, 0, 1, gen, DType::f64), false, 0.0), {q, k, v});
  EXPECT_GRADCHECK(sdpa(tg::tril(Tensor::ones({5, 7}, DType::i64), 1), false, 0.0), {q, k, v});
  EXPECT_GRADCHECK(sdpa(Tensor(), false, 0.4), {q, k, v});
  EXPECT_GRADCHECK(sdpa(Tensor::from_values({1, 1, 0, 1, 0, 1, 1}, {1, 7}, DType::b8), false, 0.0), {q, k, v});
  // Broadcast: one key/value set for both batch entries; two key blocks (S = 130).
  EXPECT_GRADCHECK(sdpa(Tensor(), false, 0.0), {r64({2, 3, 2}), r64({130, 2}), r64({130, 2})});
  // The public composite, with respect to q, k and v.
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        Generator g(9);
        return tg::scaled_dot_product_attention_composed(in[0], in[1], in[2], Tensor(), 0.4, true, 0.0, &g);
      },
      {q, k, v});
}

TEST(ScaledDotProductAttentionFused, SameBitsWithOneAndTwoThreads) {
  Generator gen(35);
  // Few problems and many keys: the backward splits the keys between tasks.
  const Tensor q = Tensor::normal({2, 200, 64}, 0, 1, gen).requires_grad_();
  const Tensor k = Tensor::normal({2, 300, 64}, 0, 1, gen).requires_grad_();
  const Tensor v = Tensor::normal({2, 300, 64}, 0, 1, gen).requires_grad_();
  const Tensor r = Tensor::normal({2, 200, 64}, 0, 1, gen);
  tg::set_num_threads(1);
  const auto one = run(true, {}, q, k, v, r);
  tg::set_num_threads(2);
  const auto two = run(true, {}, q, k, v, r);
  tg::set_num_threads(0);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(one[i].to_vector<float>(), two[i].to_vector<float>()) << "tensor " << i;
}

TEST(ScaledDotProductAttentionFused, WeightsPathAndDifferentiableMaskUseTheComposite) {
  Generator gen(36);
  const Tensor q = Tensor::normal({2, 5, 3}, 0, 1, gen, DType::f64), k = Tensor::normal({2, 6, 3}, 0, 1, gen, DType::f64);
  const Tensor v = Tensor::normal({2, 6, 4}, 0, 1, gen, DType::f64);
  Tensor w;
  const Tensor a = tg::scaled_dot_product_attention(q, k, v, Tensor(), 0.0, false, 0.0, nullptr, &w);
  EXPECT_EQ(w.shape(), (Shape{2, 5, 6}));
  EXPECT_LT(max_abs_diff(tg::sum(w, {-1}), Tensor::ones({2, 5}, DType::f64)), 1e-14);
  EXPECT_LT(max_abs_diff(a, tg::scaled_dot_product_attention(q, k, v)), 1e-14);
  const Tensor bias = Tensor::normal({5, 6}, 0, 1, gen, DType::f64).requires_grad_();
  tg::sum(tg::scaled_dot_product_attention(q, k, v, bias)).backward();
  EXPECT_TRUE(bias.grad().defined());
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return tg::scaled_dot_product_attention(q, k, v, in[0]); },
                   {bias});
}

TEST(ScaledDotProductAttentionFused, ErrorsNameTheOpAndTheShapes) {
  using tg::testing::expect_error;
  const Tensor q = Tensor::zeros({2, 5, 4}), k = Tensor::zeros({2, 6, 4}), v = Tensor::zeros({2, 6, 3});
  expect_error([&] { tg::scaled_dot_product_attention(q, k.to(DType::f64), v); },
               {"scaled_dot_product_attention", "float64", "[2, 5, 4]", "[2, 6, 4]"});
  expect_error([&] { tg::scaled_dot_product_attention(q, k, v, Tensor::zeros({5, 7})); },
               {"scaled_dot_product_attention", "attn_mask", "[5, 7]"});
  expect_error([&] { tg::scaled_dot_product_attention(q, Tensor::zeros({3, 6, 4}), Tensor::zeros({3, 6, 3})); },
               {"scaled_dot_product_attention", "batch", "[3, 6, 4]"});
  expect_error([&] { tg::scaled_dot_product_attention(q, k, Tensor::zeros({2, 7, 3})); },
               {"scaled_dot_product_attention", "length", "[2, 7, 3]"});
}

TEST(ScaledDotProductAttentionFused, EmptyKeysAndEmptyQueries) {
  Generator gen(37);
  const Tensor q = Tensor::normal({2, 3, 4}, 0, 1, gen, DType::f64);
  // No keys: the composite's empty sum (zeros), as torch's composite gives.
  const Tensor none = tg::scaled_dot_product_attention(q, Tensor::zeros({2, 0, 4}, DType::f64), Tensor::zeros({2, 0, 5}, DType::f64));
  EXPECT_EQ(none.shape(), (Shape{2, 3, 5}));
  EXPECT_LT(max_abs_diff(none, Tensor::zeros({2, 3, 5}, DType::f64)), 1e-300);
  const Tensor k = Tensor::normal({2, 6, 4}, 0, 1, gen, DType::f64);
  EXPECT_EQ(tg::scaled_dot_product_attention(Tensor::zeros({2, 0, 4}, DType::f64), k, k).shape(), (Shape{2, 0, 4}));
}

TEST(ScaledDotProductAttentionFused, GradientOfValueOrKeyAlone) {
  Generator gen(38);
  const Tensor q = Tensor::normal({2, 5, 3}, 0, 1, gen, DType::f64), k0 = Tensor::normal({2, 7, 3}, 0, 1, gen, DType::f64);
  const Tensor v0 = Tensor::normal({2, 7, 4}, 0, 1, gen, DType::f64), r = Tensor::normal({2, 5, 4}, 0, 1, gen, DType::f64);
  for (const int which : {1, 2}) {
    const Tensor k = which == 1 ? k0.detach().clone().requires_grad_() : k0;
    const Tensor v = which == 2 ? v0.detach().clone().requires_grad_() : v0;
    const Tensor& leaf = which == 1 ? k : v;
    auto grad = [&](bool fused) {
      Tensor(leaf).zero_grad();
      const auto op = positional_op(fused);
      tg::sum(op(q, k, v, Tensor(), 0.0, true, 0.0, nullptr, nullptr) * r).backward();
      return leaf.grad();
    };
    EXPECT_LT(max_abs_diff(grad(true), grad(false)), 1e-12) << "input " << which;
  }
}

// Short key ranges keep the forward's probabilities for the backward (S <= kSaveProbsMaxKeys);
// one key more recomputes them. Both against the composite, at and around the boundary, with
// bool and float masks (fully masked rows, a row allowed only its last key), causal, dropout.
TEST(ScaledDotProductAttentionFused, KeptProbabilitiesEqualTheCompositeAroundTheOneBlockBoundary) {
  constexpr std::int64_t kMax = tg::kernels::kSaveProbsMaxKeys;
  static_assert(kMax == 128, "the cases below straddle S = 128");
  Generator gen(39);
  for (const std::int64_t S : {std::int64_t{1}, std::int64_t{65}, kMax - 1, kMax, kMax + 1, std::int64_t{200}}) {
    const std::int64_t L = 70;
    std::vector<double> allowed(L * S);
    for (std::int64_t l = 0; l < L; ++l)
      for (std::int64_t s = 0; s < S; ++s) allowed[l * S + s] = (l * 7 + s * 3) % 5 != 0 || S == 1;
    for (std::int64_t s = 0; s < S; ++s) allowed[2 * S + s] = s == S - 1;  // only the last key
    for (std::int64_t s = 0; s < S; ++s) allowed[4 * S + s] = 0;           // none: NaN, as PyTorch
    const Tensor bool_ls = Tensor::from_values(allowed, {L, S}, DType::b8);
    std::vector<double> additive(L * S);
    for (std::int64_t i = 0; i < L * S; ++i) additive[i] = allowed[i] != 0 ? 0.5 * std::sin(double(i)) : -INFINITY;
    const Tensor float_ls = Tensor::from_vector(additive, {L, S});
    const Tensor float_pad = Tensor::normal({2, 1, 1, S}, 0, 2, gen, DType::f64);
    const Shape q{2, 2, L, 16}, k{2, 2, S, 16}, v{2, 2, S, 8};
    const std::vector<std::pair<std::string, Sdpa>> cases = {
        {"plain", {q, k, v, Tensor()}},
        {"bool (L, S)", {q, k, v, bool_ls}},
        {"float (L, S) with -inf", {q, k, v, float_ls}},
        {"float (B, 1, 1, S)", {q, k, v, float_pad}},
        {"causal L<S", {q, k, v, Tensor(), true}},
        {"causal L>S", {{2, 150, 16}, {2, S, 16}, {2, S, 8}, Tensor(), true}},
        {"causal square", {{3, S, 16}, {3, S, 16}, {3, S, 8}, Tensor(), true}},
        {"dropout", {q, k, v, Tensor(), false, 0.3}},
        {"dropout causal", {{2, S, 16}, {2, S, 16}, {2, S, 8}, Tensor(), true, 0.4}},
        {"dropout bool", {q, k, v, bool_ls, false, 0.2}},
    };
    for (const DType dtype : {DType::f64, DType::f32})
      for (const auto& [name, c] : cases) expect_fused_equals_composed(c, dtype, name + ", S = " + std::to_string(S));
  }
}

// Whether the forward keeps the probabilities depends on whether a gradient is recorded; the
// output must not. And the kept path gives the same bits with one and two threads.
TEST(ScaledDotProductAttentionFused, KeptProbabilitiesChangeNoBitsOfTheOutputOrAcrossThreads) {
  Generator gen(40);
  for (const bool causal : {false, true})
    for (const double p : {0.0, 0.25}) {
      SCOPED_TRACE("causal " + std::to_string(causal) + ", dropout " + std::to_string(p));
      const Tensor q = Tensor::normal({3, 4, 128, 64}, 0, 1, gen).requires_grad_();
      const Tensor k = Tensor::normal({3, 4, 128, 64}, 0, 1, gen).requires_grad_();
      const Tensor v = Tensor::normal({3, 4, 128, 64}, 0, 1, gen).requires_grad_();
      const Tensor r = Tensor::normal({3, 4, 128, 64}, 0, 1, gen);
      Tensor plain;
      {
        tg::NoGradGuard no_grad;
        Generator g(5);
        plain = tg::scaled_dot_product_attention(q, k, v, Tensor(), p, causal, 0.0, &g);
      }
      const Sdpa c{{}, {}, {}, Tensor(), causal, p};
      tg::set_num_threads(1);
      const auto one = run(true, c, q, k, v, r);
      tg::set_num_threads(2);
      const auto two = run(true, c, q, k, v, r);
      tg::set_num_threads(0);
      EXPECT_EQ(plain.to_vector<float>(), one[0].to_vector<float>());
      for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(one[i].to_vector<float>(), two[i].to_vector<float>()) << "tensor " << i;
    }
}

// The kernels with and without kept probabilities give the same bits: the kept ones are the values
// the backward would recompute (S = 65 and 128 with causal's blocks of 64 span two key blocks).
TEST(ScaledDotProductAttentionFused, KeptProbabilitiesAreBitForBitTheRecomputedOnes) {
  namespace k = tg::kernels;
  const std::int64_t BH = 3, L = 70, E = 16, Ev = 8;
  std::uint64_t state = 41;
  auto uniform = [&] {  // splitmix64 in [-2, 2)
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return static_cast<float>((z ^ (z >> 31)) >> 40) / float(1 << 24) * 4.0f - 2.0f;
  };
  for (const std::int64_t S : {std::int64_t{1}, std::int64_t{65}, std::int64_t{128}})
    for (const int variant : {0, 1, 2, 3, 4}) {  // plain, causal, additive mask, allow mask, dropout
      SCOPED_TRACE("S = " + std::to_string(S) + ", variant " + std::to_string(variant));
      std::vector<float> q(BH * L * E), kk(BH * S * E), v(BH * S * Ev), dout(BH * L * Ev), add(L * S);
      std::vector<std::int64_t> allow(L * S);
      for (auto* x : {&q, &kk, &v, &dout, &add})
        for (float& e : *x) e = uniform();
      for (std::int64_t i = 0; i < L * S; ++i) allow[i] = (i * 7) % 5 != 0;
      for (std::int64_t s = 0; s < S; ++s) allow[4 * S + s] = 0;  // a row with no allowed key
      std::vector<std::int64_t> q_off(BH), k_off(BH), v_off(BH), m_off(BH, 0);
      for (std::int64_t b = 0; b < BH; ++b) q_off[b] = b * L * E, k_off[b] = b * S * E, v_off[b] = b * S * Ev;
      k::AttentionProblem<float> p;
      p.BH = BH, p.L = L, p.S = S, p.E = E, p.Ev = Ev;
      p.q = q.data(), p.k = kk.data(), p.v = v.data();
      p.q_off = q_off.data(), p.k_off = k_off.data(), p.v_off = v_off.data();
      p.scale = 0.25f;
      p.causal = variant == 1;
      p.mask_kind = variant == 2 ? k::AttentionMaskKind::additive
                    : variant == 3 ? k::AttentionMaskKind::allow
                                   : k::AttentionMaskKind::none;
      p.mask_add = add.data(), p.mask_allow = allow.data(), p.mask_off = m_off.data(), p.mask_sl = S, p.mask_ss = 1;
      p.dropout_p = variant == 4 ? 0.3 : 0.0;
      p.seed = 77;
      std::vector<float> out[2], lse[2], dq[2], dk[2], dv[2], probs(BH * L * S, -1.0f);
      for (int kept = 0; kept < 2; ++kept) {
        out[kept].resize(BH * L * Ev), lse[kept].resize(BH * L);
        dq[kept].resize(BH * L * E), dk[kept].resize(BH * S * E), dv[kept].resize(BH * S * Ev);
        float* pr = kept ? probs.data() : nullptr;
        k::attention_forward(p, out[kept].data(), lse[kept].data(), pr);
        k::attention_backward(p, out[kept].data(), lse[kept].data(), dout.data(), dq[kept].data(), dk[kept].data(),
                              dv[kept].data(), pr);
      }
      auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
      };
      EXPECT_TRUE(same_bits(out[0], out[1]));
      EXPECT_TRUE(same_bits(lse[0], lse[1]));
      EXPECT_TRUE(same_bits(dq[0], dq[1]));
      EXPECT_TRUE(same_bits(dk[0], dk[1]));
      EXPECT_TRUE(same_bits(dv[0], dv[1]));
      // And they are probabilities: rows sum to 1 (NaN for the row with no allowed key), 0 where masked.
      for (std::int64_t row = 0; row < BH * L; ++row) {
        const std::int64_t l = row % L;
        double total = 0;
        bool any_allowed = false;
        for (std::int64_t s = 0; s < S; ++s) {
          const float x = probs[row * S + s];
          const bool blocked = (p.causal && s > l) || (variant == 3 && allow[l * S + s] == 0);
          if (blocked) {
            EXPECT_TRUE(x == 0.0f || std::isnan(x));
          }
          any_allowed = any_allowed || !blocked;
          total += x;
        }
        if (any_allowed) {
          EXPECT_NEAR(total, 1.0, 1e-5) << "row " << row;
        } else {
          EXPECT_TRUE(std::isnan(total)) << "row " << row;
        }
      }
    }
}
