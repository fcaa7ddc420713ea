// The bool dtype, comparisons, logical ops, predicates and bool reductions: values (NaN, broadcasting,
// scalar forms, type promotion, empty tensors), masks in where/masked_fill/attention, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "gradcheck_util.h"

using namespace tg;

namespace {

using I = std::vector<std::int64_t>;
using D = std::vector<double>;
using B = std::vector<bool>;
using tg::testing::expect_error;
using tg::testing::passes_gradcheck;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInfD = std::numeric_limits<double>::infinity();

Tensor bools(const B& v, const Shape& s) {
  D d(v.begin(), v.end());
  return Tensor::from_values(d, s, DType::b8);
}

B values(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::b8);
  return t.to_vector<bool>();
}

}  // namespace

// ---- the dtype -----------------------------------------------------------------------------------

TEST(BoolDType, NameSizeCreationAndConversions) {
  EXPECT_EQ(dtype_name(DType::b8), "bool");
  EXPECT_EQ(dtype_size(DType::b8), 1u);
  EXPECT_FALSE(is_floating(DType::b8));
  EXPECT_EQ(values(Tensor::zeros({3}, DType::b8)), B({false, false, false}));
  EXPECT_EQ(values(Tensor::ones({2}, DType::b8)), B({true, true}));
  EXPECT_EQ(values(Tensor::full({2}, 0.5, DType::b8)), B({true, true}));  // nonzero is true
  // To bool: nonzero, NaN and -0 as PyTorch (NaN true, -0 false).
  const Tensor x = Tensor::from_values({0.0, -0.0, 2.5, -1.0, kNaN, kInfD}, {6}, DType::f64);
  EXPECT_EQ(values(x.to(DType::b8)), B({false, false, true, true, true, true}));
  EXPECT_EQ(values(Tensor::from_vector(I{0, 3, -7}, {3}).to(DType::b8)), B({false, true, true}));
  // From bool: 0 / 1.
  const Tensor b = bools({true, false, true}, {3});
  EXPECT_EQ(b.to(DType::f32).to_vector<double>(), D({1, 0, 1}));
  EXPECT_EQ(b.to(DType::i64).to_vector<std::int64_t>(), I({1, 0, 1}));
  EXPECT_EQ(b.at({0}), 1.0);
  EXPECT_EQ(b.at({1}), 0.0);
  EXPECT_EQ(bools({false}, {1}).item(), 0.0);
  // Copies, shape ops and views keep the dtype and the elements.
  const Tensor c = b.clone();
  EXPECT_EQ(values(c), values(b));
  Tensor d = Tensor::zeros({3}, DType::b8);
  d.copy_(b);
  EXPECT_EQ(values(d), values(b));
  const Tensor m = bools({true, false, false, true, true, false}, {2, 3});
  EXPECT_EQ(values(transpose(m, 0, 1)), B({true, true, false, true, false, false}));
  EXPECT_EQ(values(concat({m, m}, 0)).size(), 12u);
  EXPECT_EQ(values(reshape(m, {3, 2})), values(m));
  EXPECT_EQ(values(expand(bools({true, false}, {2, 1}), {2, 2})), B({true, true, false, false}));
  EXPECT_EQ(values(tril(Tensor::ones({2, 2}, DType::b8))), B({true, false, true, true}));
}

TEST(BoolDType, NoGradient) {
  EXPECT_THROW(Tensor::zeros({2}, DType::b8).requires_grad_(), std::invalid_argument);
  Tensor x = Tensor::from_values({1.0, 0.0}, {2}, DType::f64).requires_grad_();
  // Converting to int64 or bool leaves the graph, as PyTorch.
  EXPECT_FALSE(x.to(DType::b8).requires_grad());
  EXPECT_FALSE(x.to(DType::i64).requires_grad());
  EXPECT_FALSE((x > 0.5).requires_grad());
  EXPECT_FALSE(isnan(x).requires_grad());
  EXPECT_THROW(tanh(Tensor::zeros({2}, DType::b8)), std::invalid_argument);
}

TEST(BoolDType, Printing) {
  EXPECT_EQ(bools({true, false}, {2}).str(), "tensor([ True, False], dtype=bool)");
  EXPECT_EQ(bools({true, true}, {2}).str(), "tensor([True, True], dtype=bool)");
  EXPECT_EQ(Tensor::scalar(1, DType::b8).str(), "tensor(True, dtype=bool)");
  EXPECT_EQ(Tensor::zeros({0}, DType::b8).str(), "tensor([], shape=[0], dtype=bool)");
}

// ---- comparisons ---------------------------------------------------------------------------------

TEST(Compare, ValuesWithNaNAndInf) {
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor a = Tensor::from_values({1, 2, 3, kNaN, kNaN, kInfD, -kInfD, -0.0}, {8}, dt);
    const Tensor b = Tensor::from_values({2, 2, 2, 1, kNaN, kInfD, 0, 0.0}, {8}, dt);
    EXPECT_EQ(values(eq(a, b)), B({false, true, false, false, false, true, false, true}));
    EXPECT_EQ(values(ne(a, b)), B({true, false, true, true, true, false, true, false}));
    EXPECT_EQ(values(lt(a, b)), B({true, false, false, false, false, false, true, false}));
    EXPECT_EQ(values(le(a, b)), B({true, true, false, false, false, true, true, true}));
    EXPECT_EQ(values(gt(a, b)), B({false, false, true, false, false, false, false, false}));
    EXPECT_EQ(values(ge(a, b)), B({false, true, true, false, false, true, false, true}));
    // The operators are the same ops.
    EXPECT_EQ(values(a == b), values(eq(a, b)));
    EXPECT_EQ(values(a != b), values(ne(a, b)));
    EXPECT_EQ(values(a < b), values(lt(a, b)));
    EXPECT_EQ(values(a <= b), values(le(a, b)));
    EXPECT_EQ(values(a > b), values(gt(a, b)));
    EXPECT_EQ(values(a >= b), values(ge(a, b)));
  }
}

TEST(Compare, ScalarFormsAndMirroredOperators) {
  const Tensor x = Tensor::from_values({-1, 0, 1, kNaN}, {4}, DType::f64);
  EXPECT_EQ(values(x > 0.0), B({false, false, true, false}));
  EXPECT_EQ(values(0.0 < x), B({false, false, true, false}));
  EXPECT_EQ(values(x <= 0.0), B({true, true, false, false}));
  EXPECT_EQ(values(0.0 >= x), B({true, true, false, false}));
  EXPECT_EQ(values(x >= 0.0), B({false, true, true, false}));
  EXPECT_EQ(values(0.0 <= x), B({false, true, true, false}));
  EXPECT_EQ(values(x < 0.0), B({true, false, false, false}));
  EXPECT_EQ(values(0.0 > x), B({true, false, false, false}));
  EXPECT_EQ(values(x == 1.0), B({false, false, true, false}));
  EXPECT_EQ(values(1.0 == x), B({false, false, true, false}));
  EXPECT_EQ(values(x != 1.0), B({true, true, false, true}));
  EXPECT_EQ(values(1.0 != x), B({true, true, false, true}));
  EXPECT_EQ(values(x != kNaN), B({true, true, true, true}));
  EXPECT_EQ(values(eq(x, kNaN)), B({false, false, false, false}));
  EXPECT_EQ(values(x < kInfD), B({true, true, true, false}));
}

TEST(Compare, Broadcasting) {
  const Tensor a = Tensor::from_values({1, 2}, {2, 1}, DType::f32);
  const Tensor b = Tensor::from_values({0, 1, 2}, {3}, DType::f32);
  const Tensor y = a > b;
  EXPECT_EQ(y.shape(), Shape({2, 3}));
  EXPECT_EQ(values(y), B({true, false, false, true, true, false}));
  // Scalar-shaped operands, leading dims and a middle broadcast dim.
  EXPECT_EQ(values(Tensor::scalar(1.5, DType::f32) < b), B({false, false, true}));
  const Tensor c = Tensor::from_values({0, 1, 2, 3, 4, 5}, {2, 1, 3}, DType::f64);
  const Tensor d = Tensor::from_values({1, 4}, {2, 1}, DType::f64);
  const Tensor e = ge(c, d);  // [2, 2, 3]
  EXPECT_EQ(e.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(values(e), B({false, true, true, false, false, false, true, true, true, false, true, true}));
  // 0-dim against 0-dim stays 0-dim.
  EXPECT_EQ(eq(Tensor::scalar(2), Tensor::scalar(2)).shape(), Shape({}));
}

TEST(Compare, EmptyTensors) {
  EXPECT_EQ(lt(Tensor::zeros({0, 3}), Tensor::zeros({3})).shape(), Shape({0, 3}));
  EXPECT_EQ(lt(Tensor::zeros({2, 0}), Tensor::zeros({1, 1})).shape(), Shape({2, 0}));
  EXPECT_EQ(eq(Tensor::zeros({0}), 1.0).shape(), Shape({0}));
  EXPECT_EQ(logical_and(Tensor::zeros({0}, DType::b8), Tensor::ones({1}, DType::b8)).shape(), Shape({0}));
  EXPECT_EQ(isnan(Tensor::zeros({0, 2})).shape(), Shape({0, 2}));
}

TEST(Compare, TypePromotionAsPyTorch) {
  EXPECT_EQ(result_type(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)), DType::f64);
  EXPECT_EQ(result_type(Tensor::zeros({2}, DType::i64), Tensor::zeros({2})), DType::f32);
  EXPECT_EQ(result_type(Tensor::zeros({2}, DType::b8), Tensor::zeros({2}, DType::i64)), DType::i64);
  EXPECT_EQ(result_type(Tensor::zeros({2}), Tensor::scalar(0, DType::f64)), DType::f32);     // same category: the dimensioned wins
  EXPECT_EQ(result_type(Tensor::zeros({2}, DType::i64), Tensor::scalar(0, DType::f64)), DType::f64);  // higher category
  EXPECT_EQ(result_type(Tensor::scalar(0), Tensor::scalar(0, DType::f64)), DType::f64);
  EXPECT_EQ(result_type(Tensor::zeros({2}, DType::i64), 2.0), DType::i64);
  EXPECT_EQ(result_type(Tensor::zeros({2}, DType::i64), 2.5), DType::f32);
  EXPECT_EQ(result_type(Tensor::zeros({2}, DType::b8), 1.0), DType::i64);
  EXPECT_EQ(result_type(Tensor::zeros({2}, DType::f64), 2.5), DType::f64);

  // f32 vs f64 compares in f64: 0.1f != 0.1.
  const Tensor f = Tensor::from_vector(std::vector<float>{0.1f}, {1});
  EXPECT_EQ(values(eq(f, Tensor::from_vector(D{0.1}, {1}))), B({false}));
  // ... but against a 0-dim f64 tensor or a double scalar, in f32 (as torch): equal.
  EXPECT_EQ(values(eq(f, Tensor::scalar(0.1, DType::f64))), B({true}));
  EXPECT_EQ(values(f == 0.1), B({true}));
  // int64 vs float32 compares in float32: 2^24 + 1 rounds to 2^24.
  const Tensor big = Tensor::from_vector(I{16777217}, {1});
  EXPECT_EQ(values(eq(big, Tensor::from_vector(std::vector<float>{16777216.0f}, {1}))), B({true}));
  EXPECT_EQ(values(eq(big, Tensor::from_vector(D{16777216.0}, {1}))), B({false}));  // f64 is exact
  // int64 vs an integral scalar compares exactly in int64; a fractional one in float32.
  EXPECT_EQ(values(big == 16777216.0), B({false}));
  EXPECT_EQ(values(Tensor::from_vector(I{1, 2, 3}, {3}) > 1.5), B({false, true, true}));
  // bool vs number: bool promotes (true == 1).
  EXPECT_EQ(values(bools({true, false}, {2}) == 1.0), B({true, false}));
  EXPECT_EQ(values(bools({true, false}, {2}) < bools({true, true}, {2})), B({false, true}));
  EXPECT_EQ(values(eq(bools({true, false}, {2}), Tensor::from_values({1, 2}, {2}, DType::f32))), B({true, false}));
}

TEST(Compare, LargeTensorsMatchAcrossThreadCounts) {
  Generator gen(5);
  const Tensor a = Tensor::uniform({300, 1111}, -1, 1, gen, DType::f32);
  const Tensor b = Tensor::uniform({1111}, -1, 1, gen, DType::f32);
  const int saved = num_threads();
  set_num_threads(1);
  const B one = values(lt(a, b));
  const B flat1 = values(a > 0.0);
  set_num_threads(2);
  const B two = values(lt(a, b));
  const B flat2 = values(a > 0.0);
  set_num_threads(saved);
  EXPECT_EQ(one, two);
  EXPECT_EQ(flat1, flat2);
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < va.size(); ++i) wrong += one[i] != (va[i] < vb[i % 1111]);
  EXPECT_EQ(wrong, 0);
}

TEST(Compare, Errors) {
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  expect_error([&] { eq(a, b); }, {"eq", "[2, 3]", "[4]"});
  expect_error([&] { (void)(a < b); }, {"lt", "[2, 3]", "[4]"});
  expect_error([&] { logical_and(a, b); }, {"logical_and", "[2, 3]", "[4]"});
  expect_error([&] { gt(Tensor(), b); }, {"gt", "undefined"});
  expect_error([&] { any(a, 2); }, {"any", "2"});
  expect_error([&] { count_nonzero(a, {0, 0}); }, {"count_nonzero", "twice", "[2, 3]"});
  // Bool tensors in floating-only ops: the op and the dtype.
  expect_error([&] { tanh(Tensor::zeros({2}, DType::b8)); }, {"tanh", "bool"});
  expect_error([&] { mean(Tensor::zeros({2, 5}, DType::b8)); }, {"mean", "bool", "[2, 5]"});
  expect_error([&] { sub(Tensor::zeros({2}, DType::b8), Tensor::zeros({2}, DType::b8)); }, {"sub", "bool"});  // as torch
  // Mixed dtypes promote (tests/autograd/test_ops_index.cpp); a shape error names dtypes and shapes.
  expect_error([&] { where(Tensor::ones({2}, DType::b8), a, Tensor::zeros({3}, DType::f64)); },
               {"where: shapes cond bool [2], a float32 [2, 3], b float64 [3] cannot be broadcast together"});
  expect_error([&] { masked_fill(a, Tensor::ones({4}, DType::b8), 0); }, {"masked_fill", "[4]", "[2, 3]"});
}

// ---- logical ops and predicates ------------------------------------------------------------------

TEST(Logical, TruthTablesBroadcastingAndMixedDtypes) {
  const Tensor a = bools({false, false, true, true}, {4}), b = bools({false, true, false, true}, {4});
  EXPECT_EQ(values(logical_and(a, b)), B({false, false, false, true}));
  EXPECT_EQ(values(logical_or(a, b)), B({false, true, true, true}));
  EXPECT_EQ(values(logical_xor(a, b)), B({false, true, true, false}));
  EXPECT_EQ(values(logical_not(a)), B({true, true, false, false}));
  // Any dtype: nonzero (NaN included) is true.
  const Tensor f = Tensor::from_values({0, kNaN, -2}, {3}, DType::f64);
  EXPECT_EQ(values(logical_not(f)), B({true, false, false}));
  EXPECT_EQ(values(logical_and(f, Tensor::from_vector(I{1, 1, 0}, {3}))), B({false, true, false}));
  const Tensor col = bools({true, false}, {2, 1});
  EXPECT_EQ(values(logical_or(col, bools({false, true, false}, {3}))), B({true, true, true, false, true, false}));
  EXPECT_EQ(values(logical_not(Tensor::scalar(0, DType::b8))), B({true}));
}

TEST(Logical, Predicates) {
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = Tensor::from_values({0, -1.5, kNaN, kInfD, -kInfD, 1e300}, {6}, dt);  // 1e300 is inf in f32
    const bool big_inf = dt == DType::f32;
    EXPECT_EQ(values(isnan(x)), B({false, false, true, false, false, false}));
    EXPECT_EQ(values(isinf(x)), B({false, false, false, true, true, big_inf}));
    EXPECT_EQ(values(isfinite(x)), B({true, true, false, false, false, !big_inf}));
  }
  const Tensor i = Tensor::from_vector(I{0, 5}, {2});
  EXPECT_EQ(values(isnan(i)), B({false, false}));
  EXPECT_EQ(values(isinf(i)), B({false, false}));
  EXPECT_EQ(values(isfinite(bools({true, false}, {2}))), B({true, true}));
}

// ---- bool reductions -----------------------------------------------------------------------------

TEST(BoolReduce, AnyAllCountNonzeroSum) {
  const Tensor m = bools({true, false, false, false, false, false}, {2, 3});
  EXPECT_EQ(values(any(m)), B({true}));
  EXPECT_EQ(any(m).shape(), Shape({}));
  EXPECT_EQ(values(all(m)), B({false}));
  EXPECT_EQ(values(any(m, 1)), B({true, false}));
  EXPECT_EQ(values(all(m, 0)), B({false, false, false}));
  EXPECT_EQ(any(m, -1, true).shape(), Shape({2, 1}));
  EXPECT_EQ(values(all(Tensor::ones({2, 3}, DType::b8), 1)), B({true, true}));
  // Floating input: NaN counts as nonzero, as torch.any/all.
  EXPECT_EQ(values(all(Tensor::from_values({kNaN, 1}, {2}, DType::f32))), B({true}));
  EXPECT_EQ(values(any(Tensor::from_values({0, -0.0}, {2}, DType::f64))), B({false}));
  // Empty: any false, all true.
  EXPECT_EQ(values(any(Tensor::zeros({2, 0}, DType::b8), 1)), B({false, false}));
  EXPECT_EQ(values(all(Tensor::zeros({2, 0}, DType::b8), 1)), B({true, true}));
  EXPECT_EQ(values(all(Tensor::zeros({0}))), B({true}));
  // count_nonzero and sum of bools: int64.
  const Tensor c = count_nonzero(Tensor::from_values({0, 1, 2, 0, 0, 3}, {2, 3}, DType::f64), {1});
  EXPECT_EQ(c.dtype(), DType::i64);
  EXPECT_EQ(c.to_vector<std::int64_t>(), I({2, 1}));
  EXPECT_EQ(count_nonzero(m).item(), 1);
  const Tensor s = sum(bools({true, true, false, true}, {2, 2}));
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.item(), 3);
  EXPECT_EQ(sum(bools({true, true, false, true}, {2, 2}), {0}).to_vector<std::int64_t>(), I({1, 2}));
  EXPECT_EQ(sum(bools({true, true, false, true}, {2, 2}), {1}, true).shape(), Shape({2, 1}));
  // int64 sums are exact beyond 2^53.
  const Tensor big = Tensor::from_vector(I{(std::int64_t{1} << 53) + 1, 2}, {2});
  EXPECT_EQ(sum(big).to_vector<std::int64_t>(), I({(std::int64_t{1} << 53) + 3}));
  EXPECT_EQ(sum(Tensor::zeros({0}, DType::b8)).to_vector<std::int64_t>(), I({0}));
}

TEST(BoolReduce, Nonzero) {
  const Tensor nz = nonzero(bools({false, true, false, true, true, false}, {2, 3}));
  EXPECT_EQ(nz.dtype(), DType::i64);
  EXPECT_EQ(nz.shape(), Shape({3, 2}));
  EXPECT_EQ(nz.to_vector<std::int64_t>(), I({0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(nonzero(Tensor::from_values({0, kNaN, 2}, {3}, DType::f32)).to_vector<std::int64_t>(), I({1, 2}));
  EXPECT_EQ(nonzero(Tensor::zeros({2, 2})).shape(), Shape({0, 2}));
  EXPECT_EQ(nonzero(Tensor::scalar(3)).shape(), Shape({1, 0}));
  EXPECT_EQ(nonzero(Tensor::zeros({0, 4})).shape(), Shape({0, 2}));
}

// ---- bool masks in where, masked_fill and attention ----------------------------------------------

TEST(BoolMasks, WhereAndMaskedFill) {
  const Tensor x = Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  const Tensor m = bools({true, false, true}, {3});
  EXPECT_EQ(masked_fill(x, m, -1).to_vector<double>(), D({-1, 2, -1, -1, 5, -1}));
  EXPECT_EQ(where(m, x, Tensor::scalar(0, DType::f64)).to_vector<double>(), D({1, 0, 3, 4, 0, 6}));
  // The same as the old i64 convention, and as a comparison's result.
  EXPECT_EQ(masked_fill(x, Tensor::from_vector(I{1, 0, 1}, {3}), -1).to_vector<double>(),
            masked_fill(x, m, -1).to_vector<double>());
  EXPECT_EQ(masked_fill(x, x > 3.5, 0).to_vector<double>(), D({1, 2, 3, 0, 0, 0}));
  EXPECT_EQ(values(where(m, bools({true, true, true}, {3}), bools({false, false, false}, {3}))), B({true, false, true}));
  // Gradients flow through the unmasked positions only.
  Generator gen(3);
  EXPECT_TRUE(passes_gradcheck([&](const std::vector<Tensor>& in) { return masked_fill(in[0], m, 7.0); },
                               {tg::testing::rand64({2, 3}, gen)}));
  EXPECT_TRUE(passes_gradcheck([&](const std::vector<Tensor>& in) { return where(in[0] > 0.0, in[0], in[1]); },
                               {tg::testing::rand64({2, 3}, gen), tg::testing::rand64({3}, gen)}));
}

TEST(BoolMasks, ScaledDotProductAttention) {
  Generator gen(11);
  const Tensor q = Tensor::uniform({2, 4, 3}, -1, 1, gen, DType::f64);
  const Tensor k = Tensor::uniform({2, 5, 3}, -1, 1, gen, DType::f64);
  const Tensor v = Tensor::uniform({2, 5, 2}, -1, 1, gen, DType::f64);
  // true = may attend (PyTorch): a causal-like bool mask equals is_causal and the i64 form.
  const Tensor allowed = tril(Tensor::ones({4, 5}, DType::b8));
  const Tensor a = scaled_dot_product_attention(q, k, v, allowed);
  const Tensor b = scaled_dot_product_attention(q, k, v, allowed.to(DType::i64));
  const Tensor c = scaled_dot_product_attention(q, k, v, masked_fill(Tensor::zeros({4, 5}, DType::f64),
                                                                     logical_not(allowed), -kInfD));
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  EXPECT_EQ(a.to_vector<double>(), c.to_vector<double>());
  // is_causal (top-left aligned, as torch: query l sees keys s <= l, so key 4 is seen by none of
  // the 4 queries). The causal kernel stops at the diagonal instead of adding exp(-inf) = 0 terms,
  // so allow rounding; a bottom-right alignment (s <= l + 1) would differ by O(0.1).
  const Tensor causal = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
  EXPECT_EQ(causal.shape(), a.shape());
  EXPECT_LE(tg::testing::max_abs_diff(a, causal), 1e-14);
  // Broadcast (2, 1, 5) key mask.
  const Tensor keys = bools({true, true, false, true, false, true, true, true, true, true}, {2, 1, 5});
  EXPECT_EQ(scaled_dot_product_attention(q, k, v, keys).shape(), Shape({2, 4, 2}));
  EXPECT_TRUE(passes_gradcheck(
      [&](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], keys); },
      {tg::testing::rand64({2, 4, 3}, gen), tg::testing::rand64({2, 5, 3}, gen), tg::testing::rand64({2, 5, 2}, gen)}));
}
