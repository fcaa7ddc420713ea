// Indexing, masking and dropout: values, float64 gradchecks, determinism, error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "error_of.h"
#include "gradcheck_util.h"

using namespace tg;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using I = std::vector<std::int64_t>;
using D = std::vector<double>;
using F = std::vector<float>;

using tg::testing::passes_gradcheck;
using tg::testing::rand64;

using tg::testing::expect_error;

}  // namespace

// ---- index_select / embedding --------------------------------------------------------------------

TEST(IndexOps, IndexSelectValues) {
  Tensor x = Tensor::from_values({1, 2, 3, 4, 5, 6}, {3, 2}, DType::f32);
  Tensor idx = Tensor::from_vector(I{2, 0, 2}, {3});
  Tensor r0 = index_select(x, 0, idx);
  EXPECT_EQ(r0.shape(), Shape({3, 2}));
  EXPECT_EQ(r0.to_vector<float>(), (F{5, 6, 1, 2, 5, 6}));
  Tensor r1 = index_select(x, -1, Tensor::from_vector(I{1, 1, 0}, {3}));
  EXPECT_EQ(r1.shape(), Shape({3, 3}));
  EXPECT_EQ(r1.to_vector<float>(), (F{2, 2, 1, 4, 4, 3, 6, 6, 5}));
  // Middle axis of an int64 tensor; an empty index.
  Tensor xi = Tensor::from_vector(I{0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  EXPECT_EQ(index_select(xi, 1, Tensor::from_vector(I{1}, {1})).to_vector<std::int64_t>(), (I{2, 3, 6, 7}));
  EXPECT_EQ(index_select(xi, 1, Tensor::from_vector(I{1}, {1})).dtype(), DType::i64);
  EXPECT_EQ(index_select(x, 0, Tensor::zeros({0}, DType::i64)).shape(), Shape({0, 2}));
}

TEST(IndexOps, IndexSelectBackwardAddsRepeats) {
  Tensor x = Tensor::from_values({1, 2, 3, 4, 5, 6}, {3, 2}, DType::f64).requires_grad_();
  Tensor y = index_select(x, 0, Tensor::from_vector(I{0, 2, 0, 0}, {4}));
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (D{3, 3, 0, 0, 1, 1}));
}

TEST(IndexOps, IndexSelectGradcheck) {
  Generator gen(11);
  const Tensor rep = Tensor::from_vector(I{1, 0, 1, 3, 1}, {5});
  for (std::int64_t axis : {0, 1, 2, -1}) {
    const Tensor idx = axis == 0 ? Tensor::from_vector(I{1, 0, 1}, {3}) : rep;
    EXPECT_TRUE(passes_gradcheck([axis](const std::vector<Tensor>& v) { return index_select(v[0], axis, v[1]); },
                                 {rand64({2, 4, 4}, gen), idx}))
        << "axis " << axis;
  }
}

TEST(IndexOps, EmbeddingValues) {
  Tensor w = Tensor::from_values({0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {4, 3}, DType::f32);
  Tensor ids = Tensor::from_vector(I{3, 0, 1, 3}, {2, 2});
  Tensor e = embedding(w, ids);
  EXPECT_EQ(e.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(e.to_vector<float>(), (F{30, 31, 32, 0, 1, 2, 10, 11, 12, 30, 31, 32}));
  EXPECT_EQ(embedding(w, Tensor::from_vector(I{2}, {1})).to_vector<float>(), (F{20, 21, 22}));
  EXPECT_EQ(embedding(w, Tensor::scalar(1, DType::i64)).shape(), Shape({3}));
  EXPECT_EQ(embedding(w, Tensor::zeros({2, 0}, DType::i64)).shape(), Shape({2, 0, 3}));
}

TEST(IndexOps, EmbeddingGradcheckWithRepeatedIds) {
  Generator gen(12);
  Tensor ids = Tensor::from_vector(I{2, 0, 2, 4, 2, 0}, {2, 3});
  EXPECT_TRUE(passes_gradcheck([](const std::vector<Tensor>& v) { return embedding(v[0], v[1]); }, {rand64({5, 3}, gen), ids}));
}

TEST(IndexOps, EmbeddingBackwardMatchesSerialScatterAdd) {
  // Large enough that the scatter-add is split across feature chunks and threads; the result must
  // equal a plain loop that adds the rows in id order, bit for bit.
  const std::int64_t V = 40, Dm = 2500, N = 300;
  Generator gen(13);
  Tensor w = Tensor::uniform({V, Dm}, -1, 1, gen, DType::f32).requires_grad_();
  I idv(N);
  for (auto& v : idv) v = static_cast<std::int64_t>(gen.below(V / 4));  // many repeats
  Tensor ids = Tensor::from_vector(idv, {N});
  Tensor seed = Tensor::uniform({N, Dm}, -1, 1, gen, DType::f32);
  embedding(w, ids).backward(seed);
  const F s = seed.to_vector<float>();
  F ref(static_cast<std::size_t>(V * Dm), 0.0f);
  for (std::int64_t k = 0; k < N; ++k)
    for (std::int64_t j = 0; j < Dm; ++j) ref[idv[k] * Dm + j] += s[k * Dm + j];
  EXPECT_EQ(w.grad().to_vector<float>(), ref);
}

// ---- where / masked_fill -------------------------------------------------------------------------

TEST(IndexOps, WhereValues) {
  Tensor a = Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32);
  Tensor b = Tensor::from_values({-1, -2, -3}, {3}, DType::f32);
  Tensor c = Tensor::from_vector(I{1, 0, 1, 0, 0, 7}, {2, 3});
  EXPECT_EQ(where(c, a, b).to_vector<float>(), (F{1, -2, 3, -1, -2, 6}));
  // Float cond: any nonzero (incl. negative) is true; cond broadcast over columns.
  Tensor cf = Tensor::from_values({-0.5, 0}, {2, 1}, DType::f64);
  EXPECT_EQ(where(cf, a, b).to_vector<float>(), (F{1, 2, 3, -1, -2, -3}));
  // All three broadcast: cond (3), a (2, 1), b scalar.
  Tensor r = where(Tensor::from_vector(I{0, 1, 1}, {3}), Tensor::from_values({10, 20}, {2, 1}, DType::f64),
                   Tensor::scalar(0, DType::f64));
  EXPECT_EQ(r.shape(), Shape({2, 3}));
  EXPECT_EQ(r.to_vector<double>(), (D{0, 10, 10, 0, 20, 20}));
  // int64 values.
  Tensor ri = where(Tensor::from_vector(I{1, 0}, {2}), Tensor::from_vector(I{5, 6}, {2}), Tensor::from_vector(I{7, 8}, {2}));
  EXPECT_EQ(ri.dtype(), DType::i64);
  EXPECT_EQ(ri.to_vector<std::int64_t>(), (I{5, 8}));
}

TEST(IndexOps, WhereGradcheckWithBroadcasting) {
  Generator gen(14);
  auto rand_cond = [&](const Shape& s) {
    Tensor c = Tensor::empty(s, DType::i64);
    for (std::int64_t i = 0; i < c.numel(); ++i) c.data<std::int64_t>()[i] = static_cast<std::int64_t>(gen.below(2));
    return c;
  };
  Fn fn = [](const std::vector<Tensor>& v) { return where(v[0], v[1], v[2]); };
  // (cond, a, b): each of them the broadcast one in turn.
  const std::vector<std::vector<Shape>> cases = {
      {{2, 1, 4}, {3, 1}, {4}},     // cond, a and b all broadcast
      {{4}, {2, 3, 4}, {}},          // cond and b broadcast, a full
      {{2, 3, 1}, {1, 4}, {2, 3, 4}},  // a broadcast on both sides
      {{2, 3, 4}, {2, 3, 4}, {3, 1}},  // only b broadcast
  };
  for (const auto& s : cases) {
    EXPECT_TRUE(passes_gradcheck(fn, {rand_cond(s[0]), rand64(s[1], gen), rand64(s[2], gen)}))
        << "cond " << s[0] << " a " << s[1] << " b " << s[2];
  }
  // Float cond that does not require grad; only a requires grad.
  Tensor cf = Tensor::from_values({1, 0, 0.25}, {3}, DType::f64);
  EXPECT_TRUE(passes_gradcheck(fn, {cf, rand64({2, 3}, gen), Tensor::uniform({2, 1}, -1, 1, gen, DType::f64)}));
}

// torch.where(c, a, b) computes in torch.result_type(a, b) (torch 1.13's where_self_out converts
// a and b with .to()), so each input's gradient keeps its own dtype.
TEST(IndexOps, WherePromotesAsTorch) {
  const Tensor c = Tensor::from_values({1, 0, 1}, {3}, DType::b8);
  // torch.where(c, tensor([1.5, 2.5, 3.5]), tensor([.25, .5, .75], dtype=float64)) -> float64
  const Tensor y = where(c, Tensor::from_values({1.5, 2.5, 3.5}, {3}, DType::f32),
                         Tensor::from_values({0.25, 0.5, 0.75}, {3}, DType::f64));
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_EQ(y.to_vector<double>(), (D{1.5, 0.5, 3.5}));
  // float64 with int64 -> float64; int64 with bool -> int64; float32 with bool -> float32.
  const Tensor yi = where(c, Tensor::from_values({0.5, 1.5, 2.5}, {3}, DType::f64), Tensor::from_vector(I{7, 8, 9}, {3}));
  EXPECT_EQ(yi.dtype(), DType::f64);
  EXPECT_EQ(yi.to_vector<double>(), (D{0.5, 8, 2.5}));
  const Tensor ib = where(c, Tensor::from_vector(I{-4, 5, 6}, {3}), Tensor::from_values({1, 1, 0}, {3}, DType::b8));
  EXPECT_EQ(ib.dtype(), DType::i64);
  EXPECT_EQ(ib.to_vector<std::int64_t>(), (I{-4, 1, 6}));
  const Tensor fb = where(c, Tensor::from_values({0.5, 1.5, 2.5}, {3}, DType::f32), Tensor::from_values({1, 1, 0}, {3}, DType::b8));
  EXPECT_EQ(fb.dtype(), DType::f32);
  EXPECT_EQ(fb.to_vector<float>(), (F{0.5, 1, 2.5}));
  // A 0-dim float64 with a float32 vector: float32, as torch.result_type (same category).
  const Tensor z = where(c, Tensor::scalar(0.1, DType::f64), Tensor::from_values({1, 2, 3}, {3}, DType::f32));
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(z.to_vector<float>(), (F{0.1f, 2, 0.1f}));
  // Shapes are checked before any conversion; the message names each dtype and shape.
  EXPECT_EQ(tg::testing::error_of<std::invalid_argument>([] {
              where(Tensor::zeros({4}, DType::b8), Tensor::zeros({5, 3}), Tensor::zeros({5, 3}, DType::f64));
            }),
            "where: shapes cond bool [4], a float32 [5, 3], b float64 [5, 3] cannot be broadcast together");
}

TEST(IndexOps, WhereMixedDtypesGradientsInEachInputsDtype) {
  // cond (2, 3), a (2, 1) float32, b (3) float64; loss = sum(where(c, a, b) * w).
  const Tensor c = Tensor::from_values({1, 0, 1, 0, 0, 1}, {2, 3}, DType::b8);
  const Tensor a = Tensor::from_values({1, 2}, {2, 1}, DType::f32).requires_grad_();
  const Tensor b = Tensor::from_values({10, 20, 30}, {3}, DType::f64).requires_grad_();
  const Tensor w = Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  const Tensor y = where(c, a, b);
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(y.to_vector<double>(), (D{1, 20, 1, 10, 20, 2}));
  sum(y * w).backward();
  // a's gradient: w where c is true, summed over the broadcast columns; b's: w where c is false,
  // summed over the broadcast rows.
  EXPECT_EQ(a.grad().dtype(), DType::f32);
  EXPECT_EQ(a.grad().to_vector<float>(), (F{1 + 3, 6}));
  EXPECT_EQ(b.grad().dtype(), DType::f64);
  EXPECT_EQ(b.grad().to_vector<double>(), (D{4, 2 + 5, 0}));
}

TEST(IndexOps, WhereMixedDtypesGradcheck) {
  // gradcheck needs float64 inputs: the mixed cases are float64 with int64 and with bool (the
  // float32 and float64 case is checked exactly above). The integer side gets no gradient.
  Generator gen(16);
  const Tensor c = Tensor::from_values({1, 0, 0, 1, 1, 0}, {2, 3}, DType::b8);
  const Tensor ids = Tensor::from_vector(I{3, -1, 4}, {3});
  const Tensor mask = Tensor::from_values({0, 1}, {2, 1}, DType::b8);
  EXPECT_TRUE(passes_gradcheck([&](const std::vector<Tensor>& v) { return where(c, v[0], ids); }, {rand64({2, 3}, gen)}));
  EXPECT_TRUE(passes_gradcheck([&](const std::vector<Tensor>& v) { return where(c, mask, v[0]); }, {rand64({1, 3}, gen)}));
}

TEST(IndexOps, MaskedFill) {
  Tensor x = Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32);
  Tensor m = Tensor::from_vector(I{0, 1, 1}, {3});
  EXPECT_EQ(masked_fill(x, m, -1e6).to_vector<float>(), (F{1, -1e6, -1e6, 4, -1e6, -1e6}));
  Tensor mrow = Tensor::from_values({1, 0}, {2, 1}, DType::f32);
  EXPECT_EQ(masked_fill(x, mrow, 0).to_vector<float>(), (F{0, 0, 0, 4, 5, 6}));
  Tensor xi = Tensor::from_vector(I{1, 2, 3}, {3});
  EXPECT_EQ(masked_fill(xi, m, 9).to_vector<std::int64_t>(), (I{1, 9, 9}));
  EXPECT_EQ(masked_fill(xi, m, 9).dtype(), DType::i64);

  Tensor xg = Tensor::from_values({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64).requires_grad_();
  sum(masked_fill(xg, m, 5)).backward();
  EXPECT_EQ(xg.grad().to_vector<double>(), (D{1, 0, 0, 1, 0, 0}));

  Generator gen(15);
  Tensor m3 = Tensor::from_vector(I{1, 0, 0, 1}, {2, 1, 2});
  EXPECT_TRUE(passes_gradcheck([m3](const std::vector<Tensor>& v) { return masked_fill(v[0], m3, 3.5); },
                               {rand64({2, 3, 2}, gen)}));
  // A bool mask, as PyTorch's.
  const Tensor b3 = Tensor::from_values({1, 0, 0, 1}, {2, 1, 2}, DType::b8);
  EXPECT_TRUE(passes_gradcheck([b3](const std::vector<Tensor>& v) { return masked_fill(v[0], b3, 3.5); },
                               {rand64({2, 3, 2}, gen)}));
  EXPECT_TRUE(passes_gradcheck([b3](const std::vector<Tensor>& v) { return where(b3, v[0], v[1]); },
                               {rand64({2, 3, 2}, gen), rand64({3, 1}, gen)}));
}

// ---- dropout -------------------------------------------------------------------------------------

TEST(IndexOps, DropoutStatisticsAndScaling) {
  const double p = 0.3;
  Generator gen(16);
  Tensor x = Tensor::uniform({200, 500}, 0.5, 1.5, gen, DType::f32);
  Generator g(42);
  Tensor y = dropout(x, p, g, true);
  const F xv = x.to_vector<float>(), yv = y.to_vector<float>();
  std::int64_t zeros = 0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0.0f) {
      ++zeros;
    } else {
      EXPECT_EQ(yv[i], xv[i] * static_cast<float>(1.0 / (1.0 - p))) << "element " << i;
    }
  }
  // 100000 Bernoulli(0.3) draws: standard deviation ~0.00145, so 0.01 is ~7 sigma.
  EXPECT_NEAR(static_cast<double>(zeros) / static_cast<double>(xv.size()), p, 0.01);
  // Expected value is preserved (mean of x over surviving elements scaled back).
  EXPECT_NEAR(mean(y).item(), mean(x).item(), 0.01);
}

TEST(IndexOps, DropoutDeterminismAndIdentity) {
  Tensor x = Tensor::ones({1000}, DType::f64);
  Generator g1(7), g2(7), g3(8);
  const D a = dropout(x, 0.5, g1).to_vector<double>();
  EXPECT_EQ(a, dropout(x, 0.5, g2).to_vector<double>());
  EXPECT_NE(a, dropout(x, 0.5, g3).to_vector<double>());
  // The mask: one draw of gen seeds splitmix64; output k decides elements 2k (low 32 bits) and
  // 2k + 1 (high 32 bits), dropping when the half is below p 2^32. gen advances by that one draw.
  Generator ref(7);
  std::uint64_t state = ref.next_u64();
  for (std::size_t i = 0; i < a.size(); i += 2) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    EXPECT_EQ(a[i], (z & 0xFFFFFFFFULL) < (1ULL << 31) ? 0.0 : 2.0) << i;
    EXPECT_EQ(a[i + 1], (z >> 32) < (1ULL << 31) ? 0.0 : 2.0) << i + 1;
  }
  EXPECT_EQ(g1.next_u64(), ref.next_u64());
  // Identity (the same tensor, generator untouched) in eval mode and for p == 0.
  Generator g4(9);
  Tensor e = dropout(x, 0.5, g4, false);
  EXPECT_TRUE(e.shares_storage(x));
  EXPECT_EQ(e.to_vector<double>(), x.to_vector<double>());
  EXPECT_EQ(dropout(x, 0.0, g4).to_vector<double>(), x.to_vector<double>());
  Generator fresh(9);
  EXPECT_EQ(g4.next_u64(), fresh.next_u64());
}

TEST(IndexOps, DropoutFloatKernelIsTheScalarStream) {
  // float32 takes 8 elements at a time (AVX2); every element must match the stream's scalar rule,
  // at sizes around the vector width, odd sizes, thread splits, and for inf/NaN inputs (a dropped
  // inf still gives NaN, as inf * 0).
  for (const int threads : {1, 2}) {
    set_num_threads(threads);
    for (const std::int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 100003}) {
      for (const double p : {0.1, 0.5, 0.9}) {
        Generator data(static_cast<std::uint64_t>(n));
        Tensor x = Tensor::uniform({n}, -2.0, 2.0, data, DType::f32);
        float* xs = x.data<float>();
        xs[0] = std::numeric_limits<float>::infinity();
        if (n > 5) xs[5] = std::numeric_limits<float>::quiet_NaN();
        Generator g(31), ref(31);
        const F y = dropout(x, p, g).to_vector<float>();
        const std::uint64_t seed = ref.next_u64();
        const float scale = static_cast<float>(1.0 / (1.0 - p));
        const auto threshold = static_cast<std::uint64_t>(p * 0x1.0p32);
        for (std::int64_t i = 0; i < n; ++i) {
          const std::uint64_t r = SplitMix64::at(seed, static_cast<std::uint64_t>(i / 2));
          const std::uint64_t u = i % 2 == 0 ? (r & 0xFFFFFFFFULL) : (r >> 32);
          const float want = xs[i] * (u < threshold ? 0.0f : scale);
          const float got = y[static_cast<std::size_t>(i)];
          if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << "n " << n << " p " << p << " element " << i;
          else EXPECT_EQ(got, want) << "n " << n << " p " << p << " element " << i << " threads " << threads;
        }
      }
    }
  }
  set_num_threads(0);
}

TEST(IndexOps, DropoutGradcheck) {
  Generator gen(17);
  EXPECT_TRUE(passes_gradcheck(
      [](const std::vector<Tensor>& v) {
        Generator g(123);  // re-created on every call: every evaluation draws the same mask
        return dropout(v[0], 0.4, g, true);
      },
      {rand64({3, 5}, gen)}));
  Tensor xg = Tensor::ones({8}, DType::f64).requires_grad_();
  Generator g(5);
  Tensor y = dropout(xg, 0.25, g);
  sum(y).backward();
  EXPECT_EQ(xg.grad().to_vector<double>(), y.detach().to_vector<double>());  // x = 1: grad equals the mask
}

TEST(IndexOps, DropoutKeepsNoMaskAndHasTheSameBitsOnAnyThreadCount) {
  // Odd and above the parallel grain: the forward and the backward split the stream over threads.
  const std::int64_t n = 300001;
  Generator data(18);
  Tensor x = Tensor::uniform({n}, -1.0, 1.0, data, DType::f32).requires_grad_();
  const Tensor w = Tensor::uniform({n}, -1.0, 1.0, data, DType::f32);
  auto run = [&](int threads, F* y_out, F* grad_out) {
    set_num_threads(threads);
    x.zero_grad();
    Generator g(21);
    const std::int64_t live = memory::live_bytes();
    Tensor y = dropout(x, 0.25, g);
    // Only y was allocated: the backward draws the mask again from the seed.
    EXPECT_EQ(memory::live_bytes() - live, n * 4) << threads << " threads";
    sum(y * w).backward();
    *y_out = y.detach().to_vector<float>();
    *grad_out = x.grad().to_vector<float>();
  };
  F y1, g1, y2, g2;
  run(1, &y1, &g1);
  run(2, &y2, &g2);
  set_num_threads(0);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(g1, g2);
  // The gradient is w times the forward's mask: 0 where y is 0 (x is never 0 here), else w / 0.75.
  const F xv = x.detach().to_vector<float>(), wv = w.to_vector<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const bool dropped = y1[i] == 0.0f;
    if (!dropped) {
      ASSERT_EQ(y1[i], xv[i] * static_cast<float>(1.0 / 0.75)) << i;
    }
    ASSERT_EQ(g1[i], dropped ? 0.0f * wv[i] : wv[i] * static_cast<float>(1.0 / 0.75)) << i;
  }
}

// ---- errors --------------------------------------------------------------------------------------

TEST(IndexOps, Errors) {
  Tensor x = Tensor::zeros({5, 3});
  expect_error<std::out_of_range>([&] { index_select(x, 0, Tensor::from_vector(I{1, 7}, {2})); },
                                  {"index_select", "index 7", "size 5", "[5, 3]"});
  expect_error<std::out_of_range>([&] { index_select(x, 1, Tensor::from_vector(I{-1}, {1})); },
                                  {"index_select", "index -1", "size 3"});
  expect_error([&] { index_select(x, 0, Tensor::from_vector(I{1, 2}, {1, 2})); }, {"index_select", "1-D", "[1, 2]"});
  expect_error([&] { index_select(x, 0, Tensor::zeros({2})); }, {"index_select", "int64", "[2]"});
  expect_error([&] { index_select(x, 2, Tensor::from_vector(I{0}, {1})); }, {"index_select", "axis 2", "[5, 3]"});
  expect_error<std::out_of_range>([&] { embedding(x, Tensor::from_vector(I{0, 5}, {1, 2})); },
                                  {"embedding", "index 5", "size 5", "[5, 3]"});
  expect_error([&] { embedding(Tensor::zeros({5}), Tensor::from_vector(I{0}, {1})); }, {"embedding", "2-D", "[5]"});
  expect_error([&] { embedding(x, Tensor::zeros({2})); }, {"embedding", "int64"});
  expect_error([&] { where(Tensor::zeros({4}), x, x); }, {"where", "[4]", "[5, 3]"});
  expect_error([&] { masked_fill(x, Tensor::zeros({2, 5, 3}), 0); }, {"masked_fill", "[2, 5, 3]", "[5, 3]"});
  expect_error([&] { masked_fill(x, Tensor::zeros({2}), 0); }, {"masked_fill", "[2]", "[5, 3]"});
  Generator g(1);
  expect_error([&] { dropout(x, 1.0, g); }, {"dropout", "[0, 1)"});
  expect_error([&] { dropout(x, -0.1, g); }, {"dropout", "[0, 1)"});
}
