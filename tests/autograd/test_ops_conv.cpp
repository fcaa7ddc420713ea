// conv1d/conv2d, conv2d_input/conv2d_weight, the pools, batch_norm and group_norm: values against
// direct loops (float32 and float64), float64 gradcheck and gradgradcheck over stride, padding,
// dilation, groups, odd sizes and a batch of 1, thread independence, error messages. Agreement with
// PyTorch itself is tests/nn/test_conv.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/ops_conv.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "error_of.h"
#include "gradcheck_util.h"

namespace {

using namespace tg;
using tg::testing::error_of;
using tg::testing::max_abs_diff;
using tg::testing::rand64;

struct ConvCase {
  Shape x, w;
  bool bias;
  IntPair stride, padding, dilation;
  std::int64_t groups;
};

// Direct convolution: every output element as the sum over its window (zero padding).
std::vector<double> reference_conv(const Tensor& x, const Tensor& w, const Tensor& b, const ConvCase& c) {
  const std::int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0), KH = w.size(2),
                     KW = w.size(3), Cg = C / c.groups, Og = O / c.groups;
  const std::int64_t OH = (H + 2 * c.padding.h - c.dilation.h * (KH - 1) - 1) / c.stride.h + 1;
  const std::int64_t OW = (W + 2 * c.padding.w - c.dilation.w * (KW - 1) - 1) / c.stride.w + 1;
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const std::vector<double> bv = b.defined() ? b.to_vector<double>() : std::vector<double>(O, 0.0);
  std::vector<double> y;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          double s = bv[o];
          const std::int64_t g = o / Og;
          for (std::int64_t c2 = 0; c2 < Cg; ++c2)
            for (std::int64_t i = 0; i < KH; ++i)
              for (std::int64_t j = 0; j < KW; ++j) {
                const std::int64_t ih = oh * c.stride.h - c.padding.h + i * c.dilation.h;
                const std::int64_t iw = ow * c.stride.w - c.padding.w + j * c.dilation.w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += xv[((n * C + g * Cg + c2) * H + ih) * W + iw] * wv[((o * Cg + c2) * KH + i) * KW + j];
              }
          y.push_back(s);
        }
  return y;
}

const std::vector<ConvCase> kConvCases = {
    {{2, 3, 5, 6}, {4, 3, 3, 3}, true, 1, 1, 1, 1},                 // plain, padding 1
    {{1, 4, 7, 6}, {6, 2, 3, 2}, true, {2, 1}, {1, 0}, {1, 2}, 2},  // batch 1, grouped, mixed
    {{3, 4, 5, 5}, {4, 1, 3, 3}, false, 2, 1, 1, 4},                // depthwise, strided
    {{2, 3, 4, 5}, {5, 3, 1, 1}, true, 1, 0, 1, 1},                 // 1x1: the direct path
    {{2, 2, 7, 5}, {3, 2, 2, 3}, true, {3, 2}, {0, 1}, {2, 1}, 1},  // odd sizes, dilation, stride 3
    {{2, 2, 3, 3}, {2, 2, 3, 3}, false, 1, 2, 2, 1},                // padding larger than the image
};

TEST(Conv2d, MatchesDirectLoopsInFloat32AndFloat64) {
  Generator gen(0);
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE(c.x.str() + " * " + c.w.str());
    const Tensor x = Tensor::uniform(c.x, -1, 1, gen, DType::f64), w = Tensor::uniform(c.w, -1, 1, gen, DType::f64);
    const Tensor b = c.bias ? Tensor::uniform({c.w[0]}, -1, 1, gen, DType::f64) : Tensor();
    const std::vector<double> want = reference_conv(x, w, b, c);
    const Tensor y = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    EXPECT_LE(max_abs_diff(y.to_vector<double>(), want), 1e-12);
    const Tensor y32 = conv2d(x.to(DType::f32), w.to(DType::f32), c.bias ? b.to(DType::f32) : Tensor(), c.stride,
                              c.padding, c.dilation, c.groups);
    EXPECT_EQ(y32.dtype(), DType::f32);
    EXPECT_LE(max_abs_diff(y32.to_vector<double>(), want), 1e-5);
  }
}

TEST(Conv2d, UnbatchedInputAndPaddingModes) {
  Generator gen(1);
  const Tensor x = Tensor::uniform({3, 6, 5}, -1, 1, gen, DType::f64), w = Tensor::uniform({2, 3, 3, 3}, -1, 1, gen, DType::f64);
  const Tensor y = conv2d(x, w, Tensor(), 1, 1);
  EXPECT_EQ(y.shape(), (Shape{2, 6, 5}));
  EXPECT_EQ(y.to_vector<double>(), squeeze(conv2d(unsqueeze(x, 0), w, Tensor(), 1, 1), 0).to_vector<double>());
  // 'same' with an odd kernel is padding (k - 1) / 2; 'valid' is no padding.
  EXPECT_EQ(conv2d(x, w, Tensor(), 1, PaddingMode::same).to_vector<double>(), y.to_vector<double>());
  EXPECT_EQ(conv2d(x, w, Tensor(), 1, PaddingMode::valid).shape(), (Shape{2, 4, 3}));
  // An even kernel: the extra row/column of padding goes after, as PyTorch.
  const Tensor w2 = Tensor::uniform({2, 3, 2, 4}, -1, 1, gen, DType::f64);
  const Tensor same = conv2d(x, w2, Tensor(), 1, PaddingMode::same);
  EXPECT_EQ(same.shape(), (Shape{2, 6, 5}));
  const Tensor manual = conv2d(pad(x, {1, 2, 0, 1}), w2);
  EXPECT_LE(max_abs_diff(same.to_vector<double>(), manual.to_vector<double>()), 1e-12);
}

TEST(Conv1d, IsConv2dOverAHeightOfOne) {
  Generator gen(2);
  const Tensor x = Tensor::uniform({2, 4, 11}, -1, 1, gen, DType::f64), w = Tensor::uniform({6, 2, 3}, -1, 1, gen, DType::f64);
  const Tensor b = Tensor::uniform({6}, -1, 1, gen, DType::f64);
  const Tensor y = conv1d(x, w, b, 2, 1, 2, 2);
  const Tensor y2 = squeeze(conv2d(unsqueeze(x, 2), unsqueeze(w, 2), b, {1, 2}, {0, 1}, {1, 2}, 2), 2);
  EXPECT_EQ(y.shape(), (Shape{2, 6, 5}));
  EXPECT_EQ(y.to_vector<double>(), y2.to_vector<double>());
  EXPECT_EQ(conv1d(x, w, b, 1, PaddingMode::same, 1, 2).shape(), (Shape{2, 6, 11}));
  EXPECT_EQ(conv1d(squeeze(narrow(x, 0, 0, 1), 0), w, b, 1, 0, 1, 2).shape(), (Shape{6, 9}));
}

TEST(Conv2d, Gradcheck) {
  Generator gen(3);
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE(c.x.str() + " * " + c.w.str());
    std::vector<Tensor> in{rand64(c.x, gen), rand64(c.w, gen)};
    if (c.bias) in.push_back(rand64({c.w[0]}, gen));
    EXPECT_GRADCHECK(
        [&](const std::vector<Tensor>& v) {
          return conv2d(v[0], v[1], c.bias ? v[2] : Tensor(), c.stride, c.padding, c.dilation, c.groups);
        },
        in);
  }
  // Only the weight requires grad (a first layer): the input gets no gradient.
  Tensor x = Tensor::uniform({2, 3, 4, 4}, -1, 1, gen, DType::f64);
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], Tensor(), 1, 1); },
                   {x, rand64({2, 3, 3, 3}, gen)});
  // 'same' with an even kernel (an explicit pad inside) and conv1d.
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], 1, PaddingMode::same, {2, 1}); },
                   {rand64({1, 2, 5, 4}, gen), rand64({2, 2, 2, 3}, gen), rand64({2}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return conv1d(v[0], v[1], v[2], 2, 2, 1, 2); },
                   {rand64({2, 4, 9}, gen), rand64({4, 2, 4}, gen), rand64({4}, gen)});
}

TEST(Conv2d, Gradgradcheck) {
  Generator gen(4);
  for (std::size_t i : {0, 1, 2, 3, 4}) {
    const ConvCase& c = kConvCases[i];
    SCOPED_TRACE(c.x.str() + " * " + c.w.str());
    std::vector<Tensor> in{rand64(c.x, gen), rand64(c.w, gen)};
    if (c.bias) in.push_back(rand64({c.w[0]}, gen));
    const auto fn = [&](const std::vector<Tensor>& v) {
      return conv2d(v[0], v[1], c.bias ? v[2] : Tensor(), c.stride, c.padding, c.dilation, c.groups);
    };
    const GradcheckReport r = gradgradcheck(fn, in);
    EXPECT_TRUE(r.ok) << r;
  }
  // A genuinely second-order use: conv of a squared conv, so d2/dx dw is not just bilinear.
  const GradcheckReport r = gradgradcheck(
      [](const std::vector<Tensor>& v) { return conv1d(square(conv1d(v[0], v[1], Tensor(), 1, 1)), v[1], v[2], 1, 1); },
      {rand64({1, 2, 6}, gen), rand64({2, 2, 3}, gen), rand64({2}, gen)});
  EXPECT_TRUE(r.ok) << r;
}

TEST(Conv2d, InputAndWeightGradientOpsMatchBackwardAndAreTwiceDifferentiable) {
  Generator gen(5);
  const ConvCase& c = kConvCases[1];
  Tensor x = rand64(c.x, gen), w = rand64(c.w, gen);
  const Tensor y = conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation, c.groups);
  const Tensor gy = Tensor::uniform(y.shape(), -1, 1, gen, DType::f64);
  y.backward(gy);
  const Tensor gx = conv2d_input(x.shape(), w.detach(), gy, c.stride, c.padding, c.dilation, c.groups);
  const Tensor gw = conv2d_weight(x.detach(), w.shape(), gy, c.stride, c.padding, c.dilation, c.groups);
  EXPECT_LE(max_abs_diff(gx.to_vector<double>(), x.grad().to_vector<double>()), 1e-12);
  EXPECT_LE(max_abs_diff(gw.to_vector<double>(), w.grad().to_vector<double>()), 1e-12);
  const Shape xs = c.x, ws = c.w;
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return conv2d_input(xs, v[0], v[1], c.stride, c.padding, c.dilation, c.groups); },
                   {rand64(c.w, gen), rand64(y.shape(), gen)});
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return conv2d_weight(v[0], ws, v[1], c.stride, c.padding, c.dilation, c.groups); },
                   {rand64(c.x, gen), rand64(y.shape(), gen)});
  EXPECT_TRUE(gradgradcheck([&](const std::vector<Tensor>& v) { return conv2d_input(xs, v[0], v[1], c.stride, c.padding, c.dilation, c.groups); },
                            {rand64(c.w, gen), rand64(y.shape(), gen)}));
  EXPECT_TRUE(gradgradcheck([&](const std::vector<Tensor>& v) { return conv2d_weight(v[0], ws, v[1], c.stride, c.padding, c.dilation, c.groups); },
                            {rand64(c.x, gen), rand64(y.shape(), gen)}));
}

TEST(Conv2d, SameResultOnOneAndTwoThreads) {
  Generator gen(6);
  const Tensor x0 = Tensor::uniform({9, 3, 12, 11}, -1, 1, gen), w0 = Tensor::uniform({8, 3, 3, 3}, -1, 1, gen);
  const Tensor b0 = Tensor::uniform({8}, -1, 1, gen), seed = Tensor::uniform({9, 8, 12, 11}, -1, 1, gen);
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    const Tensor y = conv2d(x, w, b, 1, 1);
    y.backward(seed);
    std::vector<float> all = y.to_vector<float>();
    for (const Tensor& g : {x.grad(), w.grad(), b.grad()})
      for (float v : g.to_vector<float>()) all.push_back(v);
    runs.push_back(all);
  }
  set_num_threads(0);
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(Conv2d, ErrorsNameTheOpAndShapes) {
  const Tensor x = Tensor::zeros({2, 4, 5, 5}), w = Tensor::zeros({8, 3, 3, 3});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { conv2d(x, w); }),
            "conv2d: input [2, 4, 5, 5] has 4 channels, but weight [8, 3, 3, 3] with groups=1 expects 3");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { conv2d(Tensor::zeros({2, 5, 5, 5}), Tensor::zeros({8, 2, 3, 3}), Tensor(), 1, 0, 1, 2); }),
            "conv2d: input [2, 5, 5, 5] has 5 channels, not divisible by groups=2");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { conv2d(Tensor::zeros({1, 3, 2, 2}), w); }),
            "conv2d: padded input size (2 x 2) (input [1, 3, 2, 2], padding (0, 0)) is smaller than the dilated "
            "kernel (3 x 3) (weight [8, 3, 3, 3])");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { conv1d(Tensor::zeros({1, 3, 4}), Tensor::zeros({2, 3, 3}), Tensor(), 1, 0, 2); }),
            "conv1d: padded input length 4 (input [1, 3, 4], padding 0) is smaller than the dilated kernel 5 "
            "(weight [2, 3, 3])");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { conv2d(Tensor::zeros({2, 4, 5, 5}), Tensor::zeros({6, 2, 3, 3}), Tensor(), 1, 0, 1, 4); }),
            "conv2d: out_channels 6 of weight [6, 2, 3, 3] are not divisible by groups=4");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { conv2d(x, Tensor::zeros({8, 4, 3, 3}), Tensor::zeros({7})); }),
            "conv2d: bias [7] does not match out_channels 8 of weight [8, 4, 3, 3]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { conv2d(x, Tensor::zeros({8, 4, 3, 3}), Tensor(), 2, PaddingMode::same); }),
            "conv2d: padding='same' is not supported for strided convolutions");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { conv2d(Tensor::zeros({4, 5}), w); }),
            "conv2d: expects an input (N, C, H, W) or (C, H, W), got [4, 5]");
  EXPECT_THROW(conv2d(x, Tensor::zeros({8, 4, 3, 3}, DType::f64)), std::invalid_argument);  // dtype mismatch
  EXPECT_THROW(conv2d(Tensor::zeros({2, 4, 5, 5}, DType::i64), Tensor::zeros({8, 4, 3, 3}, DType::i64)),
               std::invalid_argument);
  EXPECT_THROW(conv2d(x, Tensor::zeros({8, 4, 3, 3}), Tensor(), 0), std::invalid_argument);
  EXPECT_THROW(conv2d_input({2, 4, 5, 5}, Tensor::zeros({8, 4, 3, 3}), Tensor::zeros({2, 8, 4, 3})), std::invalid_argument);
}

// ---- pooling -------------------------------------------------------------------------------------

// Max pooling by direct loops: value and the first maximal position (-inf padding).
void reference_max_pool(const Tensor& x, IntPair k, IntPair s, IntPair p, IntPair d, std::int64_t OH, std::int64_t OW,
                        std::vector<double>& y, std::vector<double>& idx) {
  const std::int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const std::vector<double> xv = x.to_vector<double>();
  for (std::int64_t q = 0; q < P; ++q)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        double best = -INFINITY;
        std::int64_t at = -1;
        for (std::int64_t i = 0; i < k.h; ++i)
          for (std::int64_t j = 0; j < k.w; ++j) {
            const std::int64_t ih = oh * s.h - p.h + i * d.h, iw = ow * s.w - p.w + j * d.w;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            if (at < 0 || xv[(q * H + ih) * W + iw] > best) best = xv[(q * H + ih) * W + iw], at = ih * W + iw;
          }
        y.push_back(best);
        idx.push_back(double(at));
      }
}

// Inputs in halves, so that windows hold ties.
Tensor halves(const Shape& s, Generator& gen) {
  const std::vector<double> u = Tensor::uniform(s, -3, 3, gen, DType::f64).to_vector<double>();
  std::vector<double> v;
  for (double e : u) v.push_back(std::round(e * 2) / 2);
  return Tensor::from_vector(v, s);
}

TEST(MaxPool2d, ValuesAndFirstMaximumIndices) {
  Generator gen(7);
  struct Case {
    Shape x;
    IntPair k, s, p, d;
    bool ceil;
    Shape out;
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 7, 9}, 3, 2, 1, 1, false, {2, 3, 4, 5}},
                                         {{1, 2, 8, 7}, {2, 3}, 2, 1, {2, 1}, true, {1, 2, 5, 4}},
                                         {{1, 1, 5, 5}, 2, 2, 0, 1, true, {1, 1, 3, 3}},
                                         {{1, 1, 6, 6}, 3, 2, 1, 1, true, {1, 1, 4, 4}}}) {
    SCOPED_TRACE(c.x.str());
    const Tensor x = halves(c.x, gen);
    for (DType dt : {DType::f32, DType::f64}) {
      const auto [y, idx] = max_pool2d_with_indices(x.to(dt), c.k, c.s, c.p, c.d, c.ceil);
      ASSERT_EQ(y.shape(), c.out);
      std::vector<double> want, want_idx;
      reference_max_pool(x, c.k, c.s, c.p, c.d, c.out[2], c.out[3], want, want_idx);
      EXPECT_EQ(y.to_vector<double>(), want);
      EXPECT_EQ(idx.to_vector<double>(), want_idx);
      EXPECT_EQ(idx.dtype(), DType::i64);
    }
  }
  // The gradient of a window of ties goes to its first maximum only.
  Tensor x = Tensor::from_values({1, 1, 1, 1}, {1, 1, 2, 2}, DType::f64).requires_grad_();
  max_pool2d(x, 2).backward(Tensor::ones({1, 1, 1, 1}, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 0, 0}));
  // NaN wins, as in PyTorch.
  const Tensor nan = Tensor::from_values({1, NAN, 3, 2}, {1, 1, 2, 2}, DType::f64);
  EXPECT_TRUE(std::isnan(max_pool2d(nan, 2).item()));
}

TEST(MaxPool, GradcheckAndGradgradcheck) {
  Generator gen(8);
  // Distinct values (a permutation scaled), so that no window has a tie within the perturbation.
  auto distinct = [&](const Shape& s) {
    std::vector<double> v;
    for (std::int64_t i = 0; i < s.numel(); ++i) v.push_back(double((i * 7919) % s.numel()) * 0.1);
    return Tensor::from_vector(v, s).requires_grad_();
  };
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return max_pool2d(v[0], 3, 2, 1); }, {distinct({2, 2, 7, 6})});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return max_pool2d(v[0], {2, 3}, IntPair{1, 2}, {1, 0}, {2, 1}, true); },
                   {distinct({1, 2, 6, 7})});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return max_pool1d(v[0], 3, 2, 1, 1, true); }, {distinct({2, 3, 8})});
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& v) { return max_pool2d(v[0] * v[0], 2); }, {distinct({1, 2, 4, 6})}));
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& v) { return max_pool1d(v[0], 2); }, {distinct({2, 2, 6})}));
}

TEST(AvgPool, ValuesFollowTheDivisorRules) {
  // 3x3 of 1..9, kernel 2, stride 2, padding 1: windows clipped by the padding.
  const Tensor x = Tensor::from_values({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, DType::f64);
  EXPECT_EQ(avg_pool2d(x, 2, 2, 1).to_vector<double>(), (std::vector<double>{0.25, 5.0 / 4, 11.0 / 4, 7}));
  EXPECT_EQ(avg_pool2d(x, 2, 2, 1, false, false).to_vector<double>(), (std::vector<double>{1, 2.5, 5.5, 7}));
  EXPECT_EQ(avg_pool2d(x, 2, 2, 1, false, true, 3).to_vector<double>(), (std::vector<double>{1.0 / 3, 5.0 / 3, 11.0 / 3, 28.0 / 3}));
  // ceil_mode: the last row/column of windows, cut by the input's end, is divided by what is left.
  EXPECT_EQ(avg_pool2d(x, 2, 2, 0, true).to_vector<double>(), (std::vector<double>{3, 4.5, 7.5, 9}));
  // Adaptive: 3 -> 2 windows [0, 2), [1, 3).
  EXPECT_EQ(adaptive_avg_pool2d(x, 2).to_vector<double>(), (std::vector<double>{3, 4, 6, 7}));
  EXPECT_EQ(adaptive_avg_pool2d(x, {1, 3}).to_vector<double>(), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(avg_pool1d(Tensor::from_values({1, 2, 3, 4, 5}, {1, 1, 5}, DType::f32), 2).to_vector<double>(),
            (std::vector<double>{1.5, 3.5}));
  EXPECT_EQ(avg_pool2d(squeeze(x, 0), 3).shape(), (Shape{1, 1, 1}));
}

TEST(AvgPool, GradcheckAndGradgradcheck) {
  Generator gen(9);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return avg_pool2d(v[0], 3, 2, 1); }, {rand64({2, 2, 7, 6}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return avg_pool2d(v[0], {3, 2}, IntPair{2, 3}, 1, true, false); },
                   {rand64({1, 2, 8, 9}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return avg_pool1d(v[0], 4, 3, 2, true, false); }, {rand64({2, 2, 11}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], {3, 4}); }, {rand64({2, 2, 7, 10}, gen)});
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& v) { return avg_pool2d(v[0] * v[0], 2, 1, 1, false, false); },
                            {rand64({1, 2, 4, 5}, gen)}));
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(square(v[0]), 3); },
                            {rand64({1, 1, 5, 4}, gen)}));
}

TEST(Pooling, ErrorsNameTheOpAndShapes) {
  const Tensor x = Tensor::zeros({1, 2, 3, 3});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { max_pool2d(x, 2, std::nullopt, 2); }),
            "max_pool2d: padding (2, 2) must be non-negative and at most half of kernel_size (2, 2)");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { max_pool2d(x, 4); }),
            "max_pool2d: input [1, 2, 3, 3] is too small for kernel_size (4, 4) (dilation (1, 1), padding (0, 0)): "
            "the output would be (0, 0)");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { max_pool1d(Tensor::zeros({2, 3, 4, 5}), 2); }),
            "max_pool1d: expects an input (N, C, L) or (C, L), got [2, 3, 4, 5]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { avg_pool1d(Tensor::zeros({1, 2, 3}), 5); }),
            "avg_pool1d: input [1, 2, 3] is too small for kernel_size 5 (dilation 1, padding 0): the output would be 0");
  EXPECT_THROW(adaptive_avg_pool2d(x, 0), std::invalid_argument);
  EXPECT_THROW(avg_pool2d(Tensor::zeros({1, 2, 3, 3}, DType::i64), 2), std::invalid_argument);
}

// ---- batch_norm, group_norm ---------------------------------------------------------------------------

TEST(BatchNorm, TrainingMatchesTheFormulaAndUpdatesRunningStats) {
  Generator gen(10);
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = Tensor::uniform({3, 2, 4}, -2, 3, gen, dt);
    const Tensor w = Tensor::from_values({1.5, 0.5}, {2}, dt), b = Tensor::from_values({0.25, -1}, {2}, dt);
    Tensor rm = Tensor::from_values({0.5, -0.5}, {2}, dt), rv = Tensor::from_values({2, 1}, {2}, dt);
    const Tensor y = batch_norm(x, rm, rv, w, b, true, 0.2, 1e-3);
    const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
    for (int c = 0; c < 2; ++c) {
      double m = 0, v = 0;
      for (int n = 0; n < 3; ++n)
        for (int i = 0; i < 4; ++i) m += xv[(n * 2 + c) * 4 + i] / 12;
      for (int n = 0; n < 3; ++n)
        for (int i = 0; i < 4; ++i) v += (xv[(n * 2 + c) * 4 + i] - m) * (xv[(n * 2 + c) * 4 + i] - m);
      const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
      for (int n = 0; n < 3; ++n)
        for (int i = 0; i < 4; ++i) {
          const int k = (n * 2 + c) * 4 + i;
          EXPECT_NEAR(yv[k], (xv[k] - m) / std::sqrt(v / 12 + 1e-3) * w.at({c}) + b.at({c}), tol);
        }
      EXPECT_NEAR(rm.at({c}), 0.8 * (c ? -0.5 : 0.5) + 0.2 * m, tol);
      EXPECT_NEAR(rv.at({c}), 0.8 * (c ? 1 : 2) + 0.2 * v / 11, tol);  // unbiased into running_var
    }
    // Eval uses the running statistics.
    const Tensor e = batch_norm(x, rm, rv, w, b, false, 0.2, 1e-3);
    EXPECT_NEAR(e.at({1, 1, 2}), (x.at({1, 1, 2}) - rm.at({1})) / std::sqrt(rv.at({1}) + 1e-3) * 0.5 - 1, 1e-5);
  }
}

TEST(BatchNorm, GradcheckAndGradgradcheck) {
  Generator gen(11);
  const Tensor none;
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return batch_norm(v[0], none, none, v[1], v[2], true); },
                   {rand64({3, 2, 3, 2}, gen), rand64({2}, gen, 0.5, 1.5), rand64({2}, gen)});
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return batch_norm(v[0], none, none, Tensor(), Tensor(), true); },
                   {rand64({4, 3}, gen)});
  const Tensor rm = Tensor::uniform({2}, -1, 1, gen, DType::f64), rv = Tensor::uniform({2}, 0.5, 2, gen, DType::f64);
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return batch_norm(v[0], rm, rv, v[1], v[2], false); },
                   {rand64({2, 2, 3}, gen), rand64({2}, gen), rand64({2}, gen)});
  EXPECT_TRUE(gradgradcheck([&](const std::vector<Tensor>& v) { return batch_norm(v[0], none, none, v[1], v[2], true); },
                            {rand64({3, 2, 2}, gen), rand64({2}, gen, 0.5, 1.5), rand64({2}, gen)}));
  EXPECT_TRUE(gradgradcheck([&](const std::vector<Tensor>& v) { return batch_norm(v[0], rm, rv, v[1], v[2], false); },
                            {rand64({2, 2, 3}, gen), rand64({2}, gen), rand64({2}, gen)}));
}

TEST(GroupNorm, MatchesLayerNormPerGroupAndGradchecks) {
  Generator gen(12);
  const Tensor x = Tensor::uniform({2, 4, 3}, -1, 2, gen, DType::f64);
  const Tensor w = Tensor::uniform({4}, 0.5, 1.5, gen, DType::f64), b = Tensor::uniform({4}, -1, 1, gen, DType::f64);
  const Tensor y = group_norm(x, 2, w, b, 1e-4);
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (int n = 0; n < 2; ++n)
    for (int g = 0; g < 2; ++g) {
      double m = 0, v = 0;
      for (int i = 0; i < 6; ++i) m += xv[n * 12 + g * 6 + i] / 6;
      for (int i = 0; i < 6; ++i) v += (xv[n * 12 + g * 6 + i] - m) * (xv[n * 12 + g * 6 + i] - m) / 6;
      for (int i = 0; i < 6; ++i) {
        const int c = g * 2 + i / 3;
        EXPECT_NEAR(yv[n * 12 + g * 6 + i], (xv[n * 12 + g * 6 + i] - m) / std::sqrt(v + 1e-4) * w.at({c}) + b.at({c}), 1e-12);
      }
    }
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return group_norm(v[0], 3, v[1], v[2]); },
                   {rand64({2, 6, 2, 2}, gen), rand64({6}, gen), rand64({6}, gen)});
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& v) { return group_norm(v[0], 2, v[1], v[2]); },
                            {rand64({1, 4, 3}, gen), rand64({4}, gen), rand64({4}, gen)}));
}

TEST(BatchNormAndGroupNorm, ErrorsNameTheOpAndShapes) {
  const Tensor none;
  EXPECT_EQ(error_of<std::invalid_argument>([&] { batch_norm(Tensor::zeros({1, 3}), none, none, none, none, true); }),
            "batch_norm: expected more than 1 value per channel when training, got input [1, 3]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { batch_norm(Tensor::zeros({2, 3}), none, none); }),
            "batch_norm: running_mean and running_var are required when not training (input [2, 3])");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { batch_norm(Tensor::zeros({2, 3}), Tensor::zeros({4}), Tensor::ones({3})); }),
            "batch_norm: running_mean [4] does not match the 3 channels of input [2, 3]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { group_norm(Tensor::zeros({2, 6, 3}), 4); }),
            "group_norm: input [2, 6, 3] has 6 channels, not divisible by num_groups=4");
}

}  // namespace
