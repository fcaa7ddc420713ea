// expand/broadcast_to, repeat, flip, roll, tril/triu, pad (ops_shape) and gather, scatter_add,
// index_add, take_along_dim (ops_index): values against hand-worked PyTorch results, float64
// gradchecks, errors. Creation functions (autograd/creation.h) at the end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "autograd/creation.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_shape.h"
#include "autograd/random.h"
#include "error_of.h"
#include "gradcheck_util.h"

using namespace tg;
using tg::testing::error_of;
using tg::testing::expect_error;
using tg::testing::rand64;

namespace {
std::vector<double> values(const Tensor& t) { return t.to(DType::f64).to_vector<double>(); }
Tensor seq(const Shape& shape) { return reshape(Tensor::arange(0, static_cast<double>(shape.numel()), 1, DType::f64), shape); }
Tensor ids(std::vector<std::int64_t> v, const Shape& shape) { return Tensor::from_vector(v, shape); }
}  // namespace

TEST(LayoutOps, ExpandAndBroadcastTo) {
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3, 1});
  EXPECT_EQ(values(expand(x, {3, 2})), (std::vector<double>{1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(expand(x, {2, -1, 4}).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(values(broadcast_to(Tensor::from_vector(std::vector<double>{1, 2}, {2}), {2, 2})), (std::vector<double>{1, 2, 1, 2}));
  EXPECT_EQ(values(expand(ids({4, 5}, {2}), {2, 2})), (std::vector<double>{4, 5, 4, 5}));  // i64 too
  // (3, 1) against the last two dims (2, 2)
  expect_error([&] { expand(x, {3, 2, 2}); }, {"expand: cannot broadcast [3, 1] to [3, 2, 2]"});
  // no -1 in broadcast_to
  expect_error([&] { broadcast_to(x, {-1, 2}); }, {"broadcast_to: cannot broadcast [3, 1] to [-1, 2]"});
  // -1 for a new leading dim
  expect_error([&] { expand(x, {-1, 3, 1}); }, {"expand: cannot broadcast [3, 1] to [-1, 3, 1]"});
  Generator gen(1);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return expand(in[0], {2, 3, -1}); }, {rand64({3, 1}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return broadcast_to(in[0], {2, 4}); }, {rand64({1, 4}, gen)});
}

TEST(LayoutOps, Repeat) {
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3});
  // torch.tensor([1, 2, 3]).repeat(2, 2) == [[1, 2, 3, 1, 2, 3], [1, 2, 3, 1, 2, 3]]
  const Tensor r = repeat(x, {2, 2});
  EXPECT_EQ(r.shape(), (Shape{2, 6}));
  EXPECT_EQ(values(r), (std::vector<double>{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(values(repeat(seq({2, 2}), {1, 2})), (std::vector<double>{0, 1, 0, 1, 2, 3, 2, 3}));
  expect_error([] { repeat(seq({2, 2}), {2}); }, {"repeat: 1 repeats for [2, 2]"});
  expect_error([] { repeat(seq({2, 2}), {1, -1}); }, {"repeat: negative repeat -1 for [2, 2]"});
  expect_error([] { repeat(seq({2, 2}), {1, 1, 1, 1, 1}); }, {"repeat: 5 repeats for [2, 2] (at most 4)"});
  Generator gen(2);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return repeat(in[0], {2, 1, 3}); }, {rand64({2, 2}, gen)});
}

TEST(LayoutOps, FlipAndRoll) {
  const Tensor x = seq({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  EXPECT_EQ(values(flip(x, {1})), (std::vector<double>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(values(flip(x, {0, 1})), (std::vector<double>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(values(roll(x, {1}, {1})), (std::vector<double>{2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(values(roll(x, {-1}, {1})), (std::vector<double>{1, 2, 0, 4, 5, 3}));
  EXPECT_EQ(values(roll(x, {2})), (std::vector<double>{4, 5, 0, 1, 2, 3}));  // flattened
  EXPECT_EQ(values(roll(x, {1, 4}, {0, 1})), (std::vector<double>{5, 3, 4, 2, 0, 1}));
  expect_error([&] { flip(x, {1, -1}); }, {"flip: dim -1 given twice for [2, 3]"});
  expect_error([&] { roll(x, {1, 2}); }, {"roll: without dims, one shift is needed, got 2 for [2, 3]"});
  expect_error([&] { roll(x, {1, 2}, {1}); }, {"roll: 2 shifts for 1 dims of [2, 3]"});
  Generator gen(3);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return flip(in[0], {0, 2}); }, {rand64({2, 3, 2}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return roll(in[0], {5, -1}, {1, 0}); }, {rand64({3, 4}, gen)});
}

TEST(LayoutOps, TrilTriuZeroEverythingOutsideTheTriangle) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, inf, 6, std::nan(""), 8, 9}, {3, 3});
  EXPECT_EQ(values(tril(x)).size(), 9u);
  const std::vector<double> lower = values(tril(x));
  EXPECT_EQ(std::vector<double>(lower.begin(), lower.begin() + 6), (std::vector<double>{1, 0, 0, 4, inf, 0}));
  EXPECT_TRUE(std::isnan(lower[6]));
  EXPECT_EQ(values(triu(x, 1)), (std::vector<double>{0, 2, 3, 0, 0, 6, 0, 0, 0}));  // inf and NaN zeroed
  EXPECT_EQ(values(tril(seq({2, 3}), -1)), (std::vector<double>{0, 0, 0, 3, 0, 0}));
  EXPECT_EQ(values(triu(seq({2, 2, 2}))), (std::vector<double>{0, 1, 0, 3, 4, 5, 0, 7}));  // batched
  expect_error([] { tril(seq({3})); }, {"tril: needs at least 2 dims, got [3]"});
  expect_error([] { triu(seq({3})); }, {"triu: needs at least 2 dims, got [3]"});
  Generator gen(4);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tril(in[0], 1); }, {rand64({2, 3, 4}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return triu(in[0], -1); }, {rand64({4, 3}, gen)});
}

TEST(LayoutOps, PadStartsFromTheLastDimAndCropsWhenNegative) {
  const Tensor x = seq({2, 2});
  const Tensor p = pad(x, {1, 0, 0, 1}, -1.0);  // last dim: 1 before; first dim: 1 after
  EXPECT_EQ(p.shape(), (Shape{3, 3}));
  EXPECT_EQ(values(p), (std::vector<double>{-1, 0, 1, -1, 2, 3, -1, -1, -1}));
  EXPECT_EQ(values(pad(seq({1, 4}), {-1, 1})), (std::vector<double>{1, 2, 3, 0}));
  expect_error([&] { pad(x, {1}); }, {"pad: 1 pad values for [2, 2]"});
  expect_error([&] { pad(x, {-2, -1}); }, {"pad: cropping 2 and 1 from dim 1 of [2, 2]"});
  Generator gen(5);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return pad(in[0], {2, -1, 1, 1}, 3.0); }, {rand64({2, 3}, gen)});
}

TEST(LayoutOps, GatherScatterAddIndexAdd) {
  const Tensor x = seq({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  // torch.gather(x, 1, [[2, 0], [1, 1]]) == [[2, 0], [4, 4]]
  EXPECT_EQ(values(gather(x, 1, ids({2, 0, 1, 1}, {2, 2}))), (std::vector<double>{2, 0, 4, 4}));
  EXPECT_EQ(values(gather(x, 0, ids({1, 0, 1}, {1, 3}))), (std::vector<double>{3, 1, 5}));
  // scatter_add: repeats add up; src larger than index is allowed.
  const Tensor s = scatter_add(Tensor::zeros({2, 3}, DType::f64), 1, ids({0, 0, 2, 1}, {2, 2}), seq({2, 3}) + 1.0);
  EXPECT_EQ(values(s), (std::vector<double>{3, 0, 0, 0, 5, 4}));
  const Tensor a = index_add(Tensor::ones({3, 2}, DType::f64), 0, ids({2, 0, 2}, {3}), seq({3, 2}), 2.0);
  EXPECT_EQ(values(a), (std::vector<double>{5, 7, 1, 1, 1 + 0 + 8, 1 + 2 + 10}));
  expect_error<std::out_of_range>([&] { gather(x, 1, ids({3}, {1, 1})); },
                                  {"gather: index 3 is out of range for axis 1 of size 3 (shape [2, 3])"});
  expect_error([&] { gather(x, 1, ids({0}, {1})); }, {"gather: index needs as many dims as x: x [2, 3], index [1]"});
  expect_error([&] { gather(x, 1, ids({0, 0, 0, 0, 0, 0}, {3, 2})); },
               {"gather: index is larger than x outside dim: x [2, 3], index [3, 2]"});
  // Not int64: the message names the index (ops_index.cpp check_index), not x.
  expect_error([&] { gather(x, 1, Tensor::zeros({2, 2})); }, {"gather: index must be int64, got float32 of shape [2, 2]"});
  expect_error([&] { index_add(x, 0, ids({0}, {1}), seq({2, 3})); },
               {"index_add: source must be x's shape", "x [2, 3], index [1], source [2, 3]"});
  Generator gen(6);
  const Tensor idx = ids({2, 0, 1, 1, 0, 0}, {2, 3});
  EXPECT_GRADCHECK([idx](const std::vector<Tensor>& in) { return gather(in[0], 1, idx) * 2.0; }, {rand64({2, 4}, gen)});
  EXPECT_GRADCHECK([idx](const std::vector<Tensor>& in) { return scatter_add(in[0], 1, idx, in[1]); },
                   {rand64({2, 4}, gen), rand64({3, 3}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return index_add(in[0], 1, ids({1, 1, 0}, {3}), in[1], -0.5); },
                   {rand64({2, 2}, gen), rand64({2, 3}, gen)});
}

// As torch 1.13's scatter_add and index_add: x and src (source) need one dtype, no promotion
// (torch's scatter_add says "Expected self.dtype to be equal to src.dtype"). The messages name
// both operands' dtypes and shapes, as matmul's.
TEST(LayoutOps, ScatterAddAndIndexAddNeedOneDtype) {
  const Tensor idx = ids({0, 0, 2, 1}, {2, 2});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { scatter_add(Tensor::zeros({2, 3}), 1, idx, Tensor::ones({2, 2}, DType::f64)); }),
            "scatter_add: dtypes differ: x float32 [2, 3] and src float64 [2, 2]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { scatter_add(Tensor::zeros({2, 3}, DType::i64), 1, idx, Tensor::ones({2, 2})); }),
            "scatter_add: dtypes differ: x int64 [2, 3] and src float32 [2, 2]");
  // One dtype, any: torch.zeros(2, 3, dtype=torch.long).scatter_add(1, idx, tensor([[1, 2], [3, 4]]))
  // == [[3, 0, 0], [0, 4, 3]]; the same in float32.
  const Tensor si = scatter_add(Tensor::zeros({2, 3}, DType::i64), 1, idx, ids({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(si.dtype(), DType::i64);
  EXPECT_EQ(si.to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 0, 0, 0, 4, 3}));
  const Tensor sf = scatter_add(Tensor::zeros({2, 3}), 1, idx, Tensor::from_values({1, 2, 3, 4}, {2, 2}, DType::f32));
  EXPECT_EQ(sf.dtype(), DType::f32);
  EXPECT_EQ(values(sf), (std::vector<double>{3, 0, 0, 0, 4, 3}));

  const Tensor one = ids({1}, {1});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { index_add(Tensor::zeros({2, 3}), 0, one, Tensor::ones({1, 3}, DType::f64)); }),
            "index_add: dtypes differ: x float32 [2, 3] and source float64 [1, 3]");
  // The dtype error comes before the shape error.
  EXPECT_EQ(error_of<std::invalid_argument>([&] { index_add(Tensor::zeros({2, 3}, DType::f64), 0, one, Tensor::ones({2, 3})); }),
            "index_add: dtypes differ: x float64 [2, 3] and source float32 [2, 3]");
  // Integer tensors: torch adds them, tapegrad's index_add is floating only (docs/ops.md).
  EXPECT_EQ(error_of<std::invalid_argument>([&] { index_add(Tensor::zeros({2, 3}, DType::i64), 0, one, ids({1, 2, 3}, {1, 3})); }),
            "index_add: needs floating tensors: x int64 [2, 3] and source int64 [1, 3]");
  // torch.ones(2, 3).index_add(0, tensor([1]), tensor([[1., 2., 3.]])) == [[1, 1, 1], [2, 3, 4]]
  const Tensor af = index_add(Tensor::ones({2, 3}), 0, one, Tensor::from_values({1, 2, 3}, {1, 3}, DType::f32));
  EXPECT_EQ(af.dtype(), DType::f32);
  EXPECT_EQ(values(af), (std::vector<double>{1, 1, 1, 2, 3, 4}));
}

TEST(LayoutOps, TakeAlongDimBroadcasts) {
  const Tensor x = seq({2, 3});
  // argmax-style use: indices (2, 1) pick one per row.
  EXPECT_EQ(values(take_along_dim(x, ids({2, 0}, {2, 1}), 1)), (std::vector<double>{2, 3}));
  // indices (1, 2) broadcast over x's rows.
  EXPECT_EQ(values(take_along_dim(x, ids({1, 0}, {1, 2}), 1)), (std::vector<double>{1, 0, 4, 3}));
  expect_error([&] { take_along_dim(x, ids({0, 0, 0}, {3, 1}), 1); },
               {"take_along_dim: x [2, 3] and indices [3, 1] do not broadcast outside dim 1"});
  Generator gen(7);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return take_along_dim(in[0], ids({0, 2, 1, 1}, {1, 4}), 0); },
                   {rand64({3, 1}, gen)});
}

TEST(Creation, LikeFunctionsAndRanges) {
  const Tensor x = Tensor::ones({2, 3}, DType::f64);
  EXPECT_EQ(zeros_like(x).shape(), x.shape());
  EXPECT_EQ(zeros_like(x).dtype(), DType::f64);
  EXPECT_EQ(ones_like(x, DType::f32).dtype(), DType::f32);
  EXPECT_EQ(values(full_like(x, 2.5)), std::vector<double>(6, 2.5));
  EXPECT_EQ(empty_like(x).shape(), x.shape());
  EXPECT_FALSE(zeros_like(x.detach().requires_grad_()).requires_grad());
  Generator a(9), b(9);
  EXPECT_EQ(values(rand_like(x, a)), values(Tensor::uniform({2, 3}, 0, 1, b, DType::f64)));
  // a and b have drawn the same numbers so far: randn_like is Tensor::normal(shape, 0, 1) in x's dtype.
  const std::vector<double> normal = values(Tensor::normal({2, 3}, 0.0, 1.0, b, DType::f64));
  EXPECT_EQ(values(randn_like(x, a)), normal);
  EXPECT_NE(normal[0], normal[1]);
  // creation.cpp's messages name the dtype and the shape.
  expect_error([&] { rand_like(Tensor::zeros({2}, DType::i64), a); }, {"rand_like: needs a floating tensor, got int64 [2]"});
  expect_error([&] { randn_like(Tensor::zeros({2}, DType::i64), a); }, {"randn_like: needs a floating tensor, got int64 [2]"});
  EXPECT_EQ(arange(4).dtype(), DType::i64);
  EXPECT_EQ(values(arange(4)), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(values(arange(1.0, 2.0, 0.25, DType::f64)), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(values(linspace(0, 1, 5, DType::f64)), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(values(linspace(-1, 1, 1, DType::f64)), (std::vector<double>{-1}));
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  EXPECT_EQ(values(linspace(0.1, 0.7, 7, DType::f64)).back(), 0.7);  // both ends exact
  expect_error([] { linspace(0, 1, -1); }, {"linspace: steps must be >= 0, got -1"});
  EXPECT_EQ(values(eye(2)), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(values(eye(2, 3)), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(values(full({2}, 7.0)), (std::vector<double>{7, 7}));
  EXPECT_EQ(values(zeros({1})), (std::vector<double>{0}));
}
