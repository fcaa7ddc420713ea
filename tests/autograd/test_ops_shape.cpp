// Shape ops: values (every dtype), views vs copies, float64 gradchecks, error messages.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "gradcheck_util.h"

using namespace tg;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using I = std::vector<std::int64_t>;
using D = std::vector<double>;

using tg::testing::passes_gradcheck;
using tg::testing::rand64;

// 0, 1, 2, ... as int64 of the given shape.
Tensor iota64(const Shape& shape) {
  I v(static_cast<std::size_t>(shape.numel()));
  std::iota(v.begin(), v.end(), 0);
  return Tensor::from_vector(v, shape);
}

// Naive permutation: out[i_0..i_n] = x[i at perm positions], element by element.
D permute_reference(const Tensor& x, const std::vector<int>& perm) {
  const Shape& s = x.shape();
  const int n = s.size();
  std::vector<std::int64_t> in_stride(n, 1);
  for (int d = n - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * s[d + 1];
  const D xv = x.to_vector<double>();
  D out(xv.size());
  for (std::int64_t flat = 0; flat < x.numel(); ++flat) {
    std::int64_t rem = flat, off = 0;
    for (int i = n - 1; i >= 0; --i) {
      const std::int64_t size = s[perm[i]];
      off += (rem % size) * in_stride[perm[i]];
      rem /= size;
    }
    out[flat] = xv[off];
  }
  return out;
}

using tg::testing::expect_error;

}  // namespace

// ---- views ---------------------------------------------------------------------------------------

TEST(ShapeOps, FlattenValuesAndViews) {
  Tensor x = iota64({2, 3, 4});
  EXPECT_EQ(flatten(x).shape(), Shape({24}));
  EXPECT_EQ(flatten(x, 1).shape(), Shape({2, 12}));
  EXPECT_EQ(flatten(x, 0, 1).shape(), Shape({6, 4}));
  EXPECT_EQ(flatten(x, -2, -1).shape(), Shape({2, 12}));
  EXPECT_EQ(flatten(x, 1, 1).shape(), Shape({2, 3, 4}));
  EXPECT_EQ(flatten(Tensor::scalar(5.0)).shape(), Shape({1}));
  Tensor f = flatten(x, 0, 1);
  EXPECT_TRUE(f.shares_storage(x));
  EXPECT_EQ(f.dtype(), DType::i64);
  EXPECT_EQ(f.to_vector<std::int64_t>(), x.to_vector<std::int64_t>());
}

TEST(ShapeOps, UnsqueezeSqueeze) {
  Tensor x = Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32);
  EXPECT_EQ(unsqueeze(x, 0).shape(), Shape({1, 2, 3}));
  EXPECT_EQ(unsqueeze(x, 2).shape(), Shape({2, 3, 1}));
  EXPECT_EQ(unsqueeze(x, -1).shape(), Shape({2, 3, 1}));
  EXPECT_EQ(unsqueeze(x, -3).shape(), Shape({1, 2, 3}));
  EXPECT_EQ(unsqueeze(Tensor::scalar(1.0), 0).shape(), Shape({1}));
  EXPECT_TRUE(unsqueeze(x, 1).shares_storage(x));

  Tensor y = Tensor::zeros({1, 3, 1, 2}, DType::i64);
  EXPECT_EQ(squeeze(y).shape(), Shape({3, 2}));
  EXPECT_EQ(squeeze(y, 0).shape(), Shape({3, 1, 2}));
  EXPECT_EQ(squeeze(y, -2).shape(), Shape({1, 3, 2}));
  EXPECT_EQ(squeeze(Tensor::zeros({1, 1})).shape(), Shape({}));
  EXPECT_EQ(squeeze(unsqueeze(x, 1), 1).to_vector<float>(), x.to_vector<float>());
  // An axis whose size is not 1 is kept, as torch.squeeze(x, dim).
  EXPECT_EQ(squeeze(y, 1).shape(), Shape({1, 3, 1, 2}));
  EXPECT_EQ(squeeze(x, 0).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(squeeze(x, 0).shape(), x.shape());
}

TEST(ShapeOps, ViewsGradcheck) {
  Generator gen(1);
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return flatten(v[0], 1) * 2.0; }, {rand64({2, 3, 2}, gen)}));
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return squeeze(unsqueeze(v[0], -1) * 3.0, 2); },
                               {rand64({2, 3}, gen)}));
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return squeeze(v[0]) * 3.0; }, {rand64({1, 3, 1}, gen)}));
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return view(v[0], {3, 4}) * 2.0; }, {rand64({2, 6}, gen)}));
}

// ---- transpose / permute -------------------------------------------------------------------------

TEST(ShapeOps, TransposeValues) {
  Tensor x = Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32);
  Tensor t = transpose(x, 0, 1);
  EXPECT_EQ(t.shape(), Shape({3, 2}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_FALSE(t.shares_storage(x));
  EXPECT_EQ(transpose(x, -1, -2).to_vector<float>(), t.to_vector<float>());
  EXPECT_EQ(transpose(x, 1, 1).to_vector<float>(), x.to_vector<float>());

  Tensor xi = iota64({2, 3, 4});
  Tensor ti = transpose(xi, 0, 2);
  EXPECT_EQ(ti.dtype(), DType::i64);
  EXPECT_EQ(ti.shape(), Shape({4, 3, 2}));
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 4; ++k) EXPECT_EQ(ti.at({k, j, i}), xi.at({i, j, k}));
  // A size-1 dimension in the middle.
  Tensor s = Tensor::from_values({1, 2, 3}, {3, 1}, DType::f64);
  EXPECT_EQ(transpose(s, 0, 1).shape(), Shape({1, 3}));
  EXPECT_EQ(transpose(s, 0, 1).to_vector<double>(), (D{1, 2, 3}));
}

TEST(ShapeOps, PermuteValuesAllPaths) {
  Tensor x = iota64({2, 3, 4});
  Tensor p = permute(x, {2, 0, 1});
  EXPECT_EQ(p.shape(), Shape({4, 2, 3}));
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 4; ++k) EXPECT_EQ(p.at({k, i, j}), x.at({i, j, k}));
  EXPECT_EQ(permute(x, {-1, 0, 1}).to_vector<std::int64_t>(), p.to_vector<std::int64_t>());
  EXPECT_EQ(permute(x, {0, 1, 2}).to_vector<std::int64_t>(), x.to_vector<std::int64_t>());
  EXPECT_EQ(permute(Tensor::scalar(7.0), {}).item(), 7.0);

  // Larger shapes exercise the row-copy path (inner dim kept), the tiled path (inner dim moved,
  // sizes not multiples of the tile) and merged dimensions, in every dtype.
  Generator gen(2);
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{67, 45}, {1, 0}},          {{5, 37, 3}, {1, 0, 2}},      {{3, 40, 33}, {0, 2, 1}},
      {{4, 5, 6, 7}, {3, 1, 2, 0}}, {{2, 3, 1, 35}, {3, 2, 0, 1}}, {{6, 1, 70}, {2, 1, 0}},
      {{3, 4, 5, 6}, {2, 3, 0, 1}}, {{0, 4}, {1, 0}},
      // k.transpose(-2, -1) of attention: 8x8 register blocks (4-byte dtypes) with edges both ways.
      {{2, 3, 43, 19}, {0, 1, 3, 2}}};
  for (const auto& [shape, perm] : cases) {
    Tensor xf = Tensor::uniform(shape, -1, 1, gen, DType::f64);
    const std::vector<std::int64_t> order(perm.begin(), perm.end());
    for (DType dt : {DType::f32, DType::f64, DType::i64}) {
      Tensor xd = dt == DType::i64 ? iota64(shape) : xf.to(dt);
      Tensor y = permute(xd, order);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(y.to_vector<double>(), permute_reference(xd, perm)) << shape.str() << " dtype " << dtype_name(dt);
    }
  }
}

TEST(ShapeOps, PermuteLargeParallel) {
  // Big enough to split across threads on both copy paths (rows kept / tiled transpose).
  Generator gen(6);
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{300, 700}, {1, 0}}, {{16, 300, 40}, {1, 0, 2}}, {{3, 130, 250}, {2, 0, 1}}};
  for (const auto& [shape, perm] : cases) {
    Tensor x = Tensor::uniform(shape, -1, 1, gen, DType::f32);
    Tensor y = permute(x, std::vector<std::int64_t>(perm.begin(), perm.end()));
    EXPECT_EQ(y.to_vector<double>(), permute_reference(x, perm)) << shape.str();
  }
}

TEST(ShapeOps, TransposePermuteGradcheck) {
  Generator gen(3);
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return transpose(v[0], 0, 2); }, {rand64({2, 3, 4}, gen)}));
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return transpose(v[0], -1, 1); }, {rand64({2, 3, 4}, gen)}));
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return permute(v[0], {2, 0, 1}); }, {rand64({2, 3, 4}, gen)}));
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return permute(v[0], {1, 2, 0}) * v[1]; },
                               {rand64({2, 3, 4}, gen), rand64({3, 4, 2}, gen)}));
}

// ---- concat / stack ------------------------------------------------------------------------------

TEST(ShapeOps, ConcatValues) {
  Tensor a = Tensor::from_values({1, 2, 3, 4}, {2, 2}, DType::f32);
  Tensor b = Tensor::from_values({5, 6}, {1, 2}, DType::f32);
  Tensor c = Tensor::from_values({7, 8}, {2, 1}, DType::f32);
  Tensor r0 = concat({a, b}, 0);
  EXPECT_EQ(r0.shape(), Shape({3, 2}));
  EXPECT_EQ(r0.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Tensor r1 = concat({a, c}, -1);
  EXPECT_EQ(r1.shape(), Shape({2, 3}));
  EXPECT_EQ(r1.to_vector<float>(), (std::vector<float>{1, 2, 7, 3, 4, 8}));
  // int64, three pieces, one empty along the axis.
  Tensor i0 = Tensor::from_vector(I{1, 2}, {1, 2}), i1 = Tensor::zeros({0, 2}, DType::i64),
         i2 = Tensor::from_vector(I{3, 4, 5, 6}, {2, 2});
  Tensor ri = concat({i0, i1, i2}, 0);
  EXPECT_EQ(ri.dtype(), DType::i64);
  EXPECT_EQ(ri.shape(), Shape({3, 2}));
  EXPECT_EQ(ri.to_vector<std::int64_t>(), (I{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(concat({a}, 1).to_vector<float>(), a.to_vector<float>());
  // Middle axis of a 3-D tensor.
  Tensor x = iota64({2, 1, 2}), y = iota64({2, 2, 2});
  EXPECT_EQ(concat({x, y}, 1).to_vector<std::int64_t>(), (I{0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 6, 7}));
}

TEST(ShapeOps, StackValues) {
  Tensor a = Tensor::from_vector(I{1, 2, 3}, {3}), b = Tensor::from_vector(I{4, 5, 6}, {3});
  Tensor s0 = stack({a, b}, 0);
  EXPECT_EQ(s0.shape(), Shape({2, 3}));
  EXPECT_EQ(s0.to_vector<std::int64_t>(), (I{1, 2, 3, 4, 5, 6}));
  Tensor s1 = stack({a, b}, 1);
  EXPECT_EQ(s1.shape(), Shape({3, 2}));
  EXPECT_EQ(s1.to_vector<std::int64_t>(), (I{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(stack({a, b}, -1).to_vector<std::int64_t>(), s1.to_vector<std::int64_t>());
  Tensor m = Tensor::from_values({1, 2, 3, 4}, {2, 2}, DType::f64), n = Tensor::from_values({5, 6, 7, 8}, {2, 2}, DType::f64);
  Tensor s2 = stack({m, n}, 1);
  EXPECT_EQ(s2.shape(), Shape({2, 2, 2}));
  EXPECT_EQ(s2.to_vector<double>(), (D{1, 2, 5, 6, 3, 4, 7, 8}));
  EXPECT_EQ(stack({Tensor::scalar(1.0), Tensor::scalar(2.0)}).to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(ShapeOps, ConcatStackGradcheck) {
  Generator gen(4);
  Fn cat0 = [](const std::vector<Tensor>& v) { return concat(v, 0); };
  Fn cat1 = [](const std::vector<Tensor>& v) { return concat(v, 1); };
  Fn cat2 = [](const std::vector<Tensor>& v) { return concat(v, -1); };
  EXPECT_TRUE(passes_gradcheck(cat0, {rand64({1, 3, 2}, gen), rand64({2, 3, 2}, gen), rand64({3, 3, 2}, gen)}));
  EXPECT_TRUE(passes_gradcheck(cat1, {rand64({2, 1, 2}, gen), rand64({2, 3, 2}, gen)}));
  EXPECT_TRUE(passes_gradcheck(cat2, {rand64({2, 3, 3}, gen), rand64({2, 3, 1}, gen), rand64({2, 3, 2}, gen)}));
  // Only some inputs require grad; one input used twice.
  Tensor fixed = Tensor::uniform({2, 2}, -1, 1, gen, DType::f64);
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return concat({v[0], v[1], v[0]}, 0); },
                               {rand64({1, 2}, gen), fixed}));
  for (std::int64_t axis : {0, 1, 2, -1}) {
    EXPECT_TRUE(passes_gradcheck([axis](const std::vector<Tensor>& v) { return stack(v, axis); },
                                 {rand64({2, 3}, gen), rand64({2, 3}, gen), rand64({2, 3}, gen)}))
        << "stack axis " << axis;
  }
}

// ---- narrow / slice ------------------------------------------------------------------------------

TEST(ShapeOps, NarrowValues) {
  Tensor x = iota64({3, 4});
  EXPECT_EQ(narrow(x, 0, 1, 2).to_vector<std::int64_t>(), (I{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(narrow(x, 1, 1, 2).to_vector<std::int64_t>(), (I{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(narrow(x, -1, -2, 2).to_vector<std::int64_t>(), (I{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(narrow(x, 1, 4, 0).shape(), Shape({3, 0}));
  Tensor n = narrow(x, 0, 0, 3);
  EXPECT_EQ(n.to_vector<std::int64_t>(), x.to_vector<std::int64_t>());
  EXPECT_FALSE(n.shares_storage(x));
  Tensor f = Tensor::from_values({1, 2, 3, 4, 5, 6}, {1, 6}, DType::f32);
  EXPECT_EQ(narrow(f, 1, 2, 3).to_vector<float>(), (std::vector<float>{3, 4, 5}));
}

TEST(ShapeOps, SliceValues) {
  Tensor x = iota64({2, 6});
  EXPECT_EQ(slice(x, 1, 0, 6, 2).to_vector<std::int64_t>(), (I{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(slice(x, 1, 1, 6, 2).to_vector<std::int64_t>(), (I{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(slice(x, 1, 1, 5, 3).to_vector<std::int64_t>(), (I{1, 4, 7, 10}));
  EXPECT_EQ(slice(x, 1, -2, 6).to_vector<std::int64_t>(), (I{4, 5, 10, 11}));
  EXPECT_EQ(slice(x, -1, 0, -4).to_vector<std::int64_t>(), (I{0, 1, 6, 7}));
  EXPECT_EQ(slice(x, 1, -100, 100, 4).to_vector<std::int64_t>(), (I{0, 4, 6, 10}));  // clamped
  EXPECT_EQ(slice(x, 0, 1, 2).to_vector<std::int64_t>(), (I{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(slice(x, 1, 4, 2).shape(), Shape({2, 0}));  // start after end: empty
  EXPECT_EQ(slice(x, 1, 7, 9).shape(), Shape({2, 0}));  // both beyond the end
  EXPECT_EQ(slice(x, 1, 3, 3, 2).shape(), Shape({2, 0}));
  Tensor big = Tensor::arange(0, 300000, 1, DType::f32);  // long strided copy, split across threads
  const auto bv = slice(reshape(big, {1000, 300}), 0, 5, 1000, 7).to_vector<float>();
  ASSERT_EQ(bv.size(), 143u * 300u);
  for (std::size_t r = 0; r < 143; ++r)
    for (std::size_t j = 0; j < 300; j += 37) EXPECT_EQ(bv[r * 300 + j], static_cast<float>((5 + 7 * r) * 300 + j));
  Tensor y = Tensor::from_values({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {6, 1, 2}, DType::f64);
  Tensor s = slice(y, 0, 1, 6, 2);  // rows 1, 3, 5 of a 3-D tensor
  EXPECT_EQ(s.shape(), Shape({3, 1, 2}));
  EXPECT_EQ(s.to_vector<double>(), (D{3, 4, 7, 8, 11, 12}));
}

TEST(ShapeOps, NarrowSliceGradcheck) {
  Generator gen(5);
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return narrow(v[0], 1, 1, 2); }, {rand64({2, 4, 3}, gen)}));
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return narrow(v[0], 0, 2, 1); }, {rand64({3, 2}, gen)}));
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return slice(v[0], 1, 0, 5, 2); }, {rand64({2, 5, 2}, gen)}));
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return slice(v[0], -1, -4, 100, 2); }, {rand64({3, 5}, gen)}));
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return slice(v[0], 0, 1, -1); }, {rand64({4, 3}, gen)}));
  // Overlapping slices of one input: gradients add up.
  EXPECT_TRUE(passes_gradcheck(
      [](const std::vector<Tensor>& v) { return slice(v[0], 0, 0, 4, 2) * slice(v[0], 0, 1, 3); }, {rand64({4, 2}, gen)}));
}

// ---- errors --------------------------------------------------------------------------------------

TEST(ShapeOps, Errors) {
  Tensor x = Tensor::zeros({2, 3});
  expect_error([&] { transpose(x, 0, 2); }, {"transpose", "axis 2", "[2, 3]"});
  expect_error([&] { permute(x, {0}); }, {"permute", "[2, 3]"});
  expect_error([&] { permute(x, {0, 0}); }, {"permute", "repeats", "[2, 3]"});
  expect_error([&] { permute(x, {0, 5}); }, {"permute", "[2, 3]"});
  expect_error([&] { concat({x, Tensor::zeros({3, 3})}, 1); }, {"concat", "[2, 3]", "[3, 3]"});
  expect_error([&] { concat({x, Tensor::zeros({2, 3, 1})}, 0); }, {"concat", "[2, 3]", "[2, 3, 1]"});
  expect_error([&] { concat({x, Tensor::zeros({2, 3}, DType::i64)}, 0); }, {"concat", "float32", "int64"});
  expect_error([&] { concat({}, 0); }, {"concat"});
  expect_error([&] { concat({x}, 2); }, {"concat", "axis 2", "[2, 3]"});
  expect_error([&] { stack({x, Tensor::zeros({3, 2})}); }, {"stack", "[2, 3]", "[3, 2]"});
  expect_error([&] { stack({x}, 3); }, {"stack", "axis 3", "[2, 3]"});
  expect_error([&] { narrow(x, 1, 2, 2); }, {"narrow", "[2, 3]"});
  expect_error([&] { narrow(x, 0, 0, -1); }, {"narrow", "[2, 3]"});
  expect_error([&] { slice(x, 1, 0, 3, 0); }, {"slice", "step", "[2, 3]"});
  expect_error([&] { slice(x, 2, 0, 1); }, {"slice", "axis 2", "[2, 3]"});
  expect_error([&] { squeeze(x, 2); }, {"squeeze", "axis 2", "[2, 3]"});
  expect_error([&] { unsqueeze(x, 3); }, {"unsqueeze", "axis 3", "[2, 3]"});
  expect_error([&] { flatten(x, 1, 0); }, {"flatten", "[2, 3]"});
}

// ---- split, split_with_sizes, chunk, unbind ----------------------------------------------------

namespace {

std::vector<Shape> shapes_of(const PooledVector<Tensor>& pieces) {
  std::vector<Shape> out;
  for (const Tensor& p : pieces) out.push_back(p.shape());
  return out;
}

// Weighted sum of every piece, so each piece's gradient differs.
Tensor weighted_sum(const PooledVector<Tensor>& pieces) {
  Tensor total = Tensor::zeros({}, pieces[0].dtype());
  for (std::size_t i = 0; i < pieces.size(); ++i) total = total + sum(square(pieces[i]) * static_cast<double>(i + 1));
  return total;
}

}  // namespace

TEST(SplitOps, ShapesFollowPyTorch) {
  const Tensor x = iota64({7, 3});
  EXPECT_EQ(shapes_of(split(x, 3)), (std::vector<Shape>{{3, 3}, {3, 3}, {1, 3}}));
  EXPECT_EQ(shapes_of(split(x, 2, 1)), (std::vector<Shape>{{7, 2}, {7, 1}}));
  EXPECT_EQ(shapes_of(split(x, 10)), (std::vector<Shape>{{7, 3}}));
  EXPECT_EQ(shapes_of(split(x, {2, 0, 5})), (std::vector<Shape>{{2, 3}, {0, 3}, {5, 3}}));
  EXPECT_EQ(shapes_of(split_with_sizes(x, {1, 2}, -1)), (std::vector<Shape>{{7, 1}, {7, 2}}));
  EXPECT_EQ(shapes_of(chunk(x, 3)), (std::vector<Shape>{{3, 3}, {3, 3}, {1, 3}}));
  EXPECT_EQ(shapes_of(chunk(iota64({6, 3}), 4)), (std::vector<Shape>{{2, 3}, {2, 3}, {2, 3}}));  // fewer, as torch
  EXPECT_EQ(shapes_of(chunk(iota64({0, 3}), 2)), (std::vector<Shape>{{0, 3}, {0, 3}}));
  EXPECT_EQ(shapes_of(split(iota64({0, 3}), 0)), (std::vector<Shape>{{0, 3}}));
  EXPECT_EQ(shapes_of(unbind(x, 1)), (std::vector<Shape>{{7}, {7}, {7}}));
  EXPECT_EQ(shapes_of(unbind(x)).size(), 7u);
}

TEST(SplitOps, ValuesAndViews) {
  const Tensor x = iota64({4, 3});
  const auto rows = split(x, 3);
  EXPECT_EQ(rows[1].to_vector<std::int64_t>(), (I{9, 10, 11}));
  EXPECT_TRUE(rows[0].shares_storage(x));  // along axis 0: views
  const auto cols = split(x, {1, 2}, 1);
  EXPECT_EQ(cols[0].to_vector<std::int64_t>(), (I{0, 3, 6, 9}));
  EXPECT_EQ(cols[1].to_vector<std::int64_t>(), (I{1, 2, 4, 5, 7, 8, 10, 11}));
  EXPECT_EQ(unbind(x, 1)[2].to_vector<std::int64_t>(), (I{2, 5, 8, 11}));
  EXPECT_EQ(unbind(x, 0)[3].to_vector<std::int64_t>(), (I{9, 10, 11}));
  EXPECT_EQ(split(x, 4)[0].impl(), x.impl());  // one piece that is all of x: x itself
  // Size-1 leading axes keep pieces contiguous: still views.
  const Tensor y = iota64({1, 6, 2});
  EXPECT_TRUE(split(y, 2, 1)[1].shares_storage(y));
}

TEST(SplitOps, Gradcheck) {
  Generator gen(31);
  for (const Shape& s : {Shape{5, 3}, Shape{2, 5, 3}, Shape{1, 4, 2}}) {
    const Tensor x = rand64(s, gen);
    for (std::int64_t axis = -s.size(); axis < s.size(); ++axis) {
      SCOPED_TRACE("shape " + s.str() + " axis " + std::to_string(axis));
      EXPECT_TRUE(passes_gradcheck([axis](const std::vector<Tensor>& in) { return weighted_sum(split(in[0], 2, axis)); }, {x}));
      EXPECT_TRUE(passes_gradcheck([axis](const std::vector<Tensor>& in) { return weighted_sum(chunk(in[0], 3, axis)); }, {x}));
      EXPECT_TRUE(passes_gradcheck([axis](const std::vector<Tensor>& in) { return weighted_sum(unbind(in[0], axis)); }, {x}));
    }
  }
  // Only some pieces used; a piece used twice; x also used directly.
  const Tensor x = rand64({6, 2}, gen);
  EXPECT_TRUE(passes_gradcheck(
      [](const std::vector<Tensor>& in) {
        const auto p = split(in[0], {1, 3, 2});
        return sum(p[1] * p[1]) + sum(p[1]) + sum(in[0] * 0.5);
      },
      {x}));
}

TEST(SplitOps, GradientEqualsTheSumOfThePiecesGradients) {
  Generator gen(32);
  Tensor x = rand64({6, 4}, gen).requires_grad_();
  weighted_sum(unbind(x, 0)).backward();
  // d/dx of sum_i (i+1) sum(x_i^2) = 2 (i+1) x_i, row by row.
  const auto xv = x.to_vector<double>(), gv = x.grad().to_vector<double>();
  for (std::size_t k = 0; k < xv.size(); ++k) EXPECT_DOUBLE_EQ(gv[k], 2.0 * static_cast<double>(k / 4 + 1) * xv[k]);
}

TEST(SplitOps, Errors) {
  const Tensor x = iota64({4, 3});
  tg::testing::expect_error([&] { split(x, 0); }, {"split", "[4, 3]"});
  tg::testing::expect_error([&] { split(x, -1); }, {"split", "positive"});
  tg::testing::expect_error([&] { split(x, {1, 2}); }, {"split_with_sizes", "sum to 4"});
  tg::testing::expect_error([&] { split(x, {5, -1}); }, {"split_with_sizes", "[5, -1]"});
  tg::testing::expect_error([&] { chunk(x, 0); }, {"chunk", "positive"});
  tg::testing::expect_error([&] { unbind(x, 2); }, {"unbind", "axis 2"});
  tg::testing::expect_error([&] { unbind(Tensor::scalar(1.0)); }, {"unbind", "0-dimensional"});
}
