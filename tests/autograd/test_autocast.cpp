// Autocast (autograd/autocast.h): the products under a Guard against float32, forward and backward,
// within the bound of bf16 rounding; scoping, nesting and threads; the weight cache renewed exactly
// when a weight changed.
//
// The bound: rounding an operand to bf16 (8 significant bits, round to nearest even) changes it by
// at most 2^-8 relative, so a product of two rounded operands is off by at most 2^-7 + 2^-16
// relative; the products are exact in float32 and summed in float32 both here and in the float32
// reference, each sum off by at most about K 2^-24 of sum|a b|. So
//   |y_bf16 - y_f32| <= (2^-7 + 2^-16 + 2 K 2^-24) sum_k |a_ik| |b_kj|
// and the same for each gradient, whose operands (the output's gradient among them) are rounded
// too. The sums of |a||b| come from the same op run in float64 on |a|, |b| and |g|.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/kernels/bf16_weights.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "nn/optim.h"

using namespace tg;

namespace {

using Op = std::function<Tensor(const Tensor&, const Tensor&)>;

constexpr double kSumTerms = 4096;  // more than any sum's length below
const double kRel = std::ldexp(1.0, -7) + std::ldexp(1.0, -16) + 2 * kSumTerms * std::ldexp(1.0, -24);

struct Result {
  Tensor y, ga, gb;
};

/// y = op(a, b) and the gradients of sum(y * r), the forward under autocast when `bf16`; backward
/// runs outside the Guard, as torch recommends (the products recorded under it still use bf16).
Result run(const Op& op, const Tensor& A, const Tensor& B, const Tensor& R, bool bf16) {
  Tensor a = A.detach().clone().requires_grad_(), b = B.detach().clone().requires_grad_();
  Tensor y;
  {
    std::optional<autocast::Guard> guard;
    if (bf16) guard.emplace();
    y = op(a, b);
  }
  sum(y * R).backward();
  return {y.detach(), a.grad(), b.grad()};
}

void expect_within(const Tensor& got, const Tensor& want, const Tensor& mass, const char* what) {
  const auto g = got.to_vector<double>(), w = want.to_vector<double>(), m = mass.to_vector<double>();
  ASSERT_EQ(g.size(), w.size()) << what;
  bool differs = false;
  for (std::size_t i = 0; i < g.size(); ++i) {
    ASSERT_LE(std::fabs(g[i] - w[i]), kRel * m[i] + 1e-30) << what << " element " << i;
    differs |= g[i] != w[i];
  }
  EXPECT_TRUE(differs) << what << ": no element changed, so bf16 was not used";
}

void check_op(const Op& op, const Shape& sa, const Shape& sb, unsigned seed) {
  Generator gen(seed);
  const Tensor A = Tensor::normal(sa, 0, 1, gen), B = Tensor::normal(sb, 0, 1, gen);
  const Shape sy = op(A, B).shape();
  const Tensor R = Tensor::normal(sy, 0, 1, gen);
  const Result f32 = run(op, A, B, R, false), ac = run(op, A, B, R, true);
  // The sums of |a||b| (and of |g||b|, |a||g| for the gradients) in float64.
  Tensor a64 = abs(A.to(DType::f64)).requires_grad_(), b64 = abs(B.to(DType::f64)).requires_grad_();
  Tensor y64 = op(a64, b64);
  sum(y64 * abs(R.to(DType::f64))).backward();
  expect_within(ac.y, f32.y, y64.detach(), "forward");
  expect_within(ac.ga, f32.ga, a64.grad(), "grad a");
  expect_within(ac.gb, f32.gb, b64.grad(), "grad b");
}

TEST(Autocast, ScopesNestAndRestore) {
  EXPECT_FALSE(autocast::is_enabled());
  {
    autocast::Guard on;
    EXPECT_TRUE(autocast::is_enabled());
    {
      autocast::Guard off(autocast::Precision::bf16, false);
      EXPECT_FALSE(autocast::is_enabled());
      {
        autocast::Guard again;
        EXPECT_TRUE(autocast::is_enabled());
      }
      EXPECT_FALSE(autocast::is_enabled());
    }
    {
      autocast::Guard f32(autocast::Precision::f32);
      EXPECT_FALSE(autocast::is_enabled());
    }
    EXPECT_TRUE(autocast::is_enabled());
  }
  EXPECT_FALSE(autocast::is_enabled());
}

TEST(Autocast, OtherThreadsAreUnaffected) {
  Generator gen(3);
  const Tensor a = Tensor::normal({7, 9}, 0, 1, gen), b = Tensor::normal({9, 5}, 0, 1, gen);
  const auto plain = matmul(a, b).to_vector<float>();
  autocast::Guard on;
  bool seen = true;
  std::vector<float> there;
  std::thread t([&] {
    seen = autocast::is_enabled();
    there = matmul(a, b).to_vector<float>();
  });
  t.join();
  EXPECT_FALSE(seen);
  EXPECT_EQ(there, plain);
  EXPECT_NE(matmul(a, b).to_vector<float>(), plain);  // this thread's product is in bf16
}

TEST(Autocast, MatmulWithinBf16Bound) {
  check_op([](const Tensor& a, const Tensor& b) { return matmul(a, b); }, {13, 17}, {17, 9}, 1);
  check_op([](const Tensor& a, const Tensor& b) { return matmul(a, b); }, {1, 33}, {33, 65}, 2);  // a decoding row
  check_op([](const Tensor& a, const Tensor& b) { return matmul(a, b); }, {3, 5, 17}, {17, 40}, 3);  // folded
}

TEST(Autocast, TransposedOperandsWithinBf16Bound) {
  // x.transpose(-2, -1) reaches the product as a transpose flag on x.
  check_op([](const Tensor& a, const Tensor& b) { return matmul(a, transpose(b, -2, -1)); }, {11, 19}, {7, 19}, 4);
  check_op([](const Tensor& a, const Tensor& b) { return matmul(transpose(a, -2, -1), b); }, {4, 19, 11}, {4, 19, 6}, 5);
  check_op([](const Tensor& a, const Tensor& b) { return matmul(transpose(a, -2, -1), transpose(b, -2, -1)); },
           {3, 9, 5}, {3, 7, 9}, 6);
}

TEST(Autocast, BroadcastBatchesWithinBf16Bound) {
  check_op([](const Tensor& a, const Tensor& b) { return matmul(a, b); }, {2, 3, 5, 7}, {3, 7, 4}, 7);
  check_op([](const Tensor& a, const Tensor& b) { return matmul(a, b); }, {5, 7}, {4, 7, 6}, 8);   // left shared
  check_op([](const Tensor& a, const Tensor& b) { return matmul(a, b); }, {4, 1, 5, 7}, {3, 7, 2}, 9);
}

TEST(Autocast, LinearWithinBf16Bound) {
  check_op([](const Tensor& x, const Tensor& w) { return linear(x, w); }, {2, 9, 33}, {41, 33}, 10);
  Generator gen(11);
  const Tensor bias = Tensor::normal({41}, 0, 1, gen);
  // The bias is added in float32 after the sum: its terms join the bound's sum of magnitudes.
  const Op with_bias = [&](const Tensor& x, const Tensor& w) {
    return linear(x, w, x.dtype() == DType::f64 ? abs(bias.to(DType::f64)) : bias);
  };
  check_op(with_bias, {31, 33}, {41, 33}, 12);
}

TEST(Autocast, EmptyDimensions) {
  autocast::Guard on;
  // An empty inner dimension gives zeros, or the bias, as in float32.
  EXPECT_EQ(matmul(Tensor::ones({2, 0}), Tensor::ones({0, 3})).to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(matmul(Tensor::ones({9, 0}), Tensor::ones({0, 3})).to_vector<float>(), std::vector<float>(27, 0.0f));
  const Tensor bias = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  EXPECT_EQ(linear(Tensor::ones({2, 0}), Tensor::ones({3, 0}), bias).to_vector<float>(),
            (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(matmul(Tensor::ones({0, 4}), Tensor::ones({4, 3})).numel(), 0);
  EXPECT_EQ(matmul(Tensor::ones({2, 0, 4}), Tensor::ones({2, 4, 3})).numel(), 0);
}

TEST(Autocast, Float64IsUntouched) {
  Generator gen(13);
  const Tensor a = Tensor::normal({6, 10}, 0, 1, gen, DType::f64), b = Tensor::normal({10, 4}, 0, 1, gen, DType::f64);
  const auto plain = matmul(a, b).to_vector<double>(), plain_lin = linear(a, transpose(b, 0, 1)).to_vector<double>();
  autocast::Guard on;
  EXPECT_EQ(matmul(a, b).to_vector<double>(), plain);
  EXPECT_EQ(linear(a, transpose(b, 0, 1)).to_vector<double>(), plain_lin);
}

/// The product of x and a weight with the cache off: the value a cached product must give.
std::vector<float> fresh_linear(const Tensor& x, const Tensor& w) {
  autocast::Guard no_cache(autocast::Precision::bf16, true, false);
  return linear(x, w.detach().clone()).to_vector<float>();
}

TEST(AutocastCache, ReusesAWeightAndGivesTheSameBits) {
  autocast::clear_cache();  // the copies of earlier tests' weights
  Generator gen(14);
  const Tensor x = Tensor::normal({5, 40}, 0, 1, gen);
  Tensor w = Tensor::normal({70, 40}, 0, 1, gen).requires_grad_();
  autocast::Guard on;
  const auto before = autocast::cache_stats();
  const auto y1 = linear(x, w).to_vector<float>();
  const auto y2 = linear(x, w).to_vector<float>();
  const auto after = autocast::cache_stats();
  EXPECT_EQ(after.packs - before.packs, 1);
  EXPECT_EQ(after.hits - before.hits, 1);
  EXPECT_EQ(after.entries, 1);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(y1, fresh_linear(x, w));
}

// The decoders' worker threads each open a Guard over one model: each thread keeps its own copy
// of the shared parameter, and every thread's results agree.
TEST(AutocastCache, ThreadsWithTheirOwnGuardsShareAParameter) {
  Generator gen(16);
  const Tensor x = Tensor::normal({3, 40}, 0, 1, gen);
  Tensor w = Tensor::normal({70, 40}, 0, 1, gen).requires_grad_();
  std::vector<float> expected;
  {
    autocast::Guard on;
    expected = linear(x, w).to_vector<float>();
  }
  constexpr int kThreads = 4, kRounds = 50;
  std::vector<int> agreed(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        autocast::Guard on;  // outermost on this thread
        agreed[t] += linear(x, w).to_vector<float>() == expected;
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(agreed[t], kRounds) << "thread " << t;
  autocast::clear_cache();
}

// The copies outlive the Guard (the next step or decoding call packs nothing); a weight's copy goes
// when the weight's buffer is freed (at the outermost Guard's exit) or at clear_cache().
TEST(AutocastCache, OutlivesTheGuardUntilTheWeightIsFreed) {
  autocast::clear_cache();
  NoGradGuard no_grad;  // no graph holds the weights (decoding)
  Generator gen(15);
  const Tensor x = Tensor::normal({6, 8}, 0, 1, gen);
  Tensor w = Tensor::normal({8, 8}, 0, 1, gen).requires_grad_();
  Tensor v = Tensor::normal({8, 8}, 0, 1, gen).requires_grad_();
  const auto s0 = autocast::cache_stats();
  {
    autocast::Guard on;
    linear(x, w);
    linear(x, v);
    { autocast::Guard inner(autocast::Precision::bf16, false); }
    EXPECT_EQ(autocast::cache_stats().entries, 2);
  }
  EXPECT_EQ(autocast::cache_stats().entries, 2);
  {
    autocast::Guard on;
    linear(x, w);
    const auto s1 = autocast::cache_stats();
    EXPECT_EQ(s1.packs - s0.packs, 2);  // w and v once each: the second Guard reused w's copy
    EXPECT_EQ(s1.hits - s0.hits, 1);
    v = Tensor();  // v's buffer is freed
  }
  EXPECT_EQ(autocast::cache_stats().entries, 1);
  autocast::clear_cache();
  EXPECT_EQ(autocast::cache_stats().entries, 0);
}

// A weight changed in place must never leave a stale copy, and an unchanged one is never repacked:
// the copy is renewed exactly when the weight's version changed (an optimizer step, copy_, an
// in-place op, a write through data() announced with increment_version) or its buffer did
// (set_data), and the renewed copy gives the bits of a fresh packing.
TEST(AutocastCache, RenewedExactlyWhenTheWeightChanges) {
  autocast::clear_cache();
  Generator gen(16);
  const Tensor x = Tensor::normal({6, 40}, 0, 1, gen);
  Tensor w = Tensor::normal({50, 40}, 0, 1, gen).requires_grad_();
  nn::SGD sgd(std::vector<Tensor>{w}, nn::SGDOptions(0.1));
  autocast::Guard on;
  auto product_packs = [&](const char* what) {
    const auto before = autocast::cache_stats();
    const auto y = linear(x, w).to_vector<float>();
    const auto after = autocast::cache_stats();
    EXPECT_EQ(y, fresh_linear(x, w)) << what;
    EXPECT_EQ(after.entries, 1) << what;  // renewed, not added
    EXPECT_EQ(after.hits + after.packs - before.hits - before.packs, 1) << what;
    return after.packs - before.packs;
  };
  EXPECT_EQ(product_packs("first use"), 1);
  EXPECT_EQ(product_packs("unchanged"), 0);
  sum(linear(x, w)).backward();  // a backward alone changes no weight
  EXPECT_EQ(product_packs("after backward"), 0);
  sgd.step();
  EXPECT_EQ(product_packs("after an optimizer step"), 1);
  EXPECT_EQ(product_packs("unchanged after the step"), 0);
  w.copy_(Tensor::normal({50, 40}, 0, 1, gen));  // checkpoint loading, EMA weights
  EXPECT_EQ(product_packs("after copy_"), 1);
  {
    NoGradGuard no_grad;
    w.mul_(0.5);
  }
  EXPECT_EQ(product_packs("after mul_"), 1);
  w.data<float>()[1] += 0.75f;  // one element, announced as autocast.h asks
  autograd::increment_version(w);
  EXPECT_EQ(product_packs("after a write through data()"), 1);
  w.set_data(Tensor::normal({50, 40}, 0, 1, gen));  // a new buffer: a new entry, the old one dropped
  {
    const auto before = autocast::cache_stats();
    EXPECT_EQ(linear(x, w).to_vector<float>(), fresh_linear(x, w));
    EXPECT_EQ(autocast::cache_stats().packs - before.packs, 1);
  }
  autocast::clear_cache();
}

// The backward orientation of a cached weight (matmul's right operand, read by the gradient of the
// left one) is renewed too: gradients after optimizer steps equal those without the cache, bit for bit.
TEST(AutocastCache, BackwardOrientationRenewedAfterAStep) {
  Generator gen(19);
  const Tensor X = Tensor::normal({7, 40}, 0, 1, gen), V0 = Tensor::normal({40, 30}, 0, 1, gen);
  auto run = [&](bool cache) {
    autocast::clear_cache();
    Tensor v = V0.detach().clone().requires_grad_();
    nn::SGD sgd(std::vector<Tensor>{v}, nn::SGDOptions(0.5));
    std::vector<std::vector<float>> out;
    for (int step = 0; step < 3; ++step) {
      Tensor x = X.detach().clone().requires_grad_();
      {
        autocast::Guard on(autocast::Precision::bf16, true, cache);
        const Tensor y = matmul(x, v);
        sum(y * y).backward();
        out.push_back(y.to_vector<float>());
      }
      out.push_back(x.grad().to_vector<float>());
      sgd.step();
      sgd.zero_grad();
    }
    autocast::clear_cache();
    return out;
  };
  EXPECT_EQ(run(true), run(false));
}

// A renewal packs into the entry's old buffers when nothing else holds them (no allocation), and
// into new ones when something does (a retained graph keeps reading the old copy, unchanged).
TEST(AutocastCache, RenewsInPlaceOnlyWhenNothingElseHoldsTheCopy) {
  autocast::clear_cache();
  Generator gen(20);
  Tensor w = Tensor::normal({50, 40}, 0, 1, gen).requires_grad_();
  autocast::Guard on;
  auto lookup = [&] { return kernels::bf16::cached_weight(w, true, 40, 50, 40); };
  const kernels::bf16::PackedB* object = nullptr;
  const std::uint16_t* data = nullptr;
  {
    const auto c = lookup();
    ASSERT_TRUE(c.packed);
    object = c.packed.get(), data = c.packed->data;
  }
  autograd::increment_version(w);
  {
    const auto c = lookup();
    EXPECT_EQ(c.packed.get(), object);
    EXPECT_EQ(c.packed->data, data);
  }
  const auto held = lookup();
  const std::vector<std::uint16_t> before(held.packed->data, held.packed->data + held.packed->bytes() / 2);
  {
    NoGradGuard no_grad;
    w.add_(1.0);
  }
  const auto renewed = lookup();
  EXPECT_NE(renewed.packed.get(), held.packed.get());
  EXPECT_NE(renewed.other.get(), held.other.get());
  EXPECT_EQ(std::vector<std::uint16_t>(held.packed->data, held.packed->data + held.packed->bytes() / 2), before);
  autocast::clear_cache();
}

// A weight used at several steps (a recurrence) packs its backward orientation once; the
// gradients equal those computed without the cache bit for bit.
TEST(AutocastCache, RecurrenceGradientsEqualUncached) {
  Generator gen(17);
  const Tensor h0 = Tensor::normal({6, 24}, 0, 1, gen);  // over kDirectRows: both runs use the packed kernels
  const Tensor W0 = Tensor::normal({24, 24}, 0, 0.3, gen);
  auto grads = [&](bool cache) {
    Tensor w = W0.detach().clone().requires_grad_();
    Tensor h0c = h0.detach().clone().requires_grad_();
    Tensor h = h0c;
    {
      autocast::Guard on(autocast::Precision::bf16, true, cache);
      for (int t = 0; t < 5; ++t) h = tanh(linear(h, w));
    }
    sum(h).backward();
    return std::make_pair(w.grad().to_vector<float>(), h0c.grad().to_vector<float>());
  };
  EXPECT_EQ(grads(true), grads(false));
}

/// linear(x, w) with w's rows rounded and packed for this call (kernels::bf16::pack_b, as the cache
/// packs) and read by gemm_packed at any number of rows: what a product on a cached copy of w's
/// current values must give, bit for bit.
std::vector<float> packed_linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor()) {
  const std::int64_t rows = x.numel() / x.size(-1), K = w.size(1), N = w.size(0);
  const kernels::bf16::PackedB P = kernels::bf16::pack_b(true, K, N, w.data<float>(), K);
  std::vector<float> y(static_cast<std::size_t>(rows * N));
  kernels::bf16::gemm_packed(false, rows, x.data<float>(), K, P, 0.0f, y.data(), N,
                             bias.defined() ? bias.data<float>() : nullptr);
  return y;
}

// is_cacheable: parameters, and buffers marked by mark_cacheable (through any view of them).
TEST(AutocastCache, WhatIsCacheable) {
  Generator gen(21);
  Tensor p = Tensor::normal({6, 4}, 0, 1, gen).requires_grad_();
  const Tensor plain = Tensor::normal({6, 4}, 0, 1, gen);
  EXPECT_TRUE(autocast::is_cacheable(p));
  EXPECT_FALSE(autocast::is_cacheable(plain));
  EXPECT_FALSE(autocast::is_cacheable(Tensor()));
  NoGradGuard no_grad;
  const auto rows = split(plain, 2, 0);  // views sharing plain's buffer
  EXPECT_FALSE(autocast::is_cacheable(rows[1]));
  autocast::mark_cacheable(rows[1]);
  EXPECT_TRUE(autocast::is_cacheable(rows[0]));  // the mark is the buffer's
  EXPECT_TRUE(autocast::is_cacheable(plain));
  EXPECT_FALSE(autocast::is_cacheable(plain.clone()));  // a copy is a new, unmarked buffer
  const Tensor d = Tensor::normal({6, 4}, 0, 1, gen, DType::f64);
  autocast::mark_cacheable(d);
  EXPECT_FALSE(autocast::is_cacheable(d));  // float64 is never converted
  autocast::mark_cacheable(Tensor());       // ignored
}

// A view of some of a parameter's rows (not a leaf that requires grad) is packed once when marked,
// and read in bf16 at one row: the bits of a fresh packing of those rows, not the float32 product
// an unmarked view of one row gets.
TEST(AutocastCache, MarkedRowViewsOfAParameterAreCached) {
  autocast::clear_cache();
  Generator gen(22);
  const Tensor x = Tensor::normal({1, 40}, 0, 1, gen);
  Tensor w = Tensor::normal({90, 40}, 0, 1, gen).requires_grad_();
  Tensor b = Tensor::normal({90}, 0, 1, gen).requires_grad_();
  NoGradGuard no_grad;
  const auto rows = split(w, 30, 0), biases = split(b, 30, 0);
  ASSERT_TRUE(rows[1].shares_storage(w));
  const auto f32 = linear(x, rows[1], biases[1]).to_vector<float>();
  {
    autocast::Guard on;
    EXPECT_EQ(linear(x, rows[1], biases[1]).to_vector<float>(), f32);  // not marked: float32 at one row
    EXPECT_EQ(autocast::cache_stats().entries, 0);
  }
  autocast::mark_cacheable(rows[1]);
  autocast::Guard on;
  const auto s0 = autocast::cache_stats();
  const auto y1 = linear(x, rows[1], biases[1]).to_vector<float>();
  const auto y2 = linear(x, rows[1], biases[1]).to_vector<float>();
  const auto s1 = autocast::cache_stats();
  EXPECT_EQ(s1.packs - s0.packs, 1);
  EXPECT_EQ(s1.hits - s0.hits, 1);
  EXPECT_EQ(s1.entries, 1);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(y1, packed_linear(x, rows[1], biases[1]));
  EXPECT_NE(y1, f32);  // read in bf16
  // Another view of the same buffer is an entry of its own (its own rows), marked already.
  EXPECT_EQ(linear(x, rows[2]).to_vector<float>(), packed_linear(x, rows[2]));
  EXPECT_EQ(autocast::cache_stats().entries, 2);
  autocast::clear_cache();
}

// A marked buffer's copy is renewed exactly when its version changes (an in-place op, copy_, a
// write through data() announced with increment_version), into the bits of a fresh packing; the
// writes reach it through the parameter or through the view itself.
TEST(AutocastCache, MarkedCopyRenewedAfterAnInPlaceWrite) {
  autocast::clear_cache();
  Generator gen(23);
  const Tensor x = Tensor::normal({1, 40}, 0, 1, gen);
  Tensor w = Tensor::normal({60, 40}, 0, 1, gen).requires_grad_();
  nn::SGD sgd(std::vector<Tensor>{w}, nn::SGDOptions(0.1));
  Tensor view;
  {
    NoGradGuard no_grad;
    view = split(w, 20, 0)[2];
  }
  autocast::mark_cacheable(view);
  autocast::Guard on;
  auto product_packs = [&](const char* what) {
    const auto before = autocast::cache_stats();
    const auto y = linear(x, view).to_vector<float>();
    const auto after = autocast::cache_stats();
    EXPECT_EQ(y, packed_linear(x, view)) << what;
    EXPECT_EQ(after.entries, 1) << what;  // renewed, not added
    EXPECT_EQ(after.hits + after.packs - before.hits - before.packs, 1) << what;
    return after.packs - before.packs;
  };
  EXPECT_EQ(product_packs("first use"), 1);
  EXPECT_EQ(product_packs("unchanged"), 0);
  {
    NoGradGuard no_grad;
    w.mul_(0.5);  // the parameter, in place
  }
  EXPECT_EQ(product_packs("after the parameter's mul_"), 1);
  EXPECT_EQ(product_packs("unchanged after mul_"), 0);
  {
    autocast::Guard off(autocast::Precision::f32);  // w itself stays out of the cache
    sum(linear(x, w)).backward();
  }
  sgd.step();
  EXPECT_EQ(product_packs("after an optimizer step"), 1);
  {
    NoGradGuard no_grad;
    view.add_(1.0);  // the view itself, in place
  }
  EXPECT_EQ(product_packs("after the view's add_"), 1);
  view.copy_(Tensor::normal({20, 40}, 0, 1, gen));
  EXPECT_EQ(product_packs("after copy_"), 1);
  view.data<float>()[3] += 0.75f;
  autograd::increment_version(view);
  EXPECT_EQ(product_packs("after a write through data()"), 1);
  autocast::clear_cache();
}

// A marked buffer that is freed leaves no copy to be served: a new buffer of the same shape, at the
// freed one's address (the caching allocator hands the block out again) and at version 0 as it was,
// is not marked, so its one-row product runs in float32 without touching the cache; marked in turn,
// it gets a copy of its own values.
TEST(AutocastCache, MarkedCopyNeverServedForAFreedAndReusedBuffer) {
  autocast::clear_cache();
  Generator gen(24);
  const Tensor x = Tensor::normal({1, 40}, 0, 1, gen);
  const Tensor A = Tensor::normal({50, 40}, 0, 1, gen), B = Tensor::normal({50, 40}, 0, 1, gen);
  NoGradGuard no_grad;
  autocast::Guard on;
  Tensor c = Tensor::empty({50, 40});
  detail::copy_elements(c, A);  // leaves the version at 0
  autocast::mark_cacheable(c);
  EXPECT_EQ(c._version(), 0u);
  EXPECT_EQ(linear(x, c).to_vector<float>(), packed_linear(x, A));
  const void* address = c.data<float>();
  c = Tensor();  // freed
  Tensor d = Tensor::empty({50, 40});
  ASSERT_EQ(static_cast<const void*>(d.data<float>()), address) << "the allocator did not reuse the block";
  detail::copy_elements(d, B);
  EXPECT_EQ(d._version(), 0u);
  EXPECT_FALSE(autocast::is_cacheable(d));
  const auto s0 = autocast::cache_stats();
  std::vector<float> f32;
  {
    autocast::Guard off(autocast::Precision::f32);
    f32 = linear(x, d).to_vector<float>();
  }
  EXPECT_EQ(linear(x, d).to_vector<float>(), f32);
  const auto s1 = autocast::cache_stats();
  EXPECT_EQ(s1.hits, s0.hits);
  EXPECT_EQ(s1.packs, s0.packs);
  autocast::mark_cacheable(d);
  EXPECT_EQ(linear(x, d).to_vector<float>(), packed_linear(x, B));
  const auto s2 = autocast::cache_stats();
  EXPECT_EQ(s2.packs - s1.packs, 1);
  EXPECT_EQ(s2.hits, s1.hits);
  EXPECT_EQ(s2.entries, 1);  // the freed buffer's entry was dropped at the miss
  autocast::clear_cache();
}

TEST(Autocast, OneAndTwoThreadsIdentical) {
  Generator gen(18);
  const Tensor X = Tensor::normal({300, 200}, 0, 1, gen), W0 = Tensor::normal({520, 200}, 0, 1, gen);
  auto step = [&](int threads) {
    set_num_threads(threads);
    Tensor w = W0.detach().clone().requires_grad_(), x = X.detach().clone().requires_grad_();
    Tensor y;
    {
      autocast::Guard on;
      y = linear(x, w);
    }
    sum(y * y).backward();
    set_num_threads(0);
    return std::make_tuple(y.to_vector<float>(), x.grad().to_vector<float>(), w.grad().to_vector<float>());
  };
  EXPECT_EQ(step(1), step(2));
}

TEST(Autocast, ReportsItsKernelPath) {
  const std::string path = autocast::bf16_path();
  EXPECT_EQ(autocast::bf16_hardware(), tg::kernels::bf16::hardware());
  EXPECT_FALSE(path.empty());
}

}  // namespace
