// additive_attention_scores: float64 gradchecks, equality with the composite it replaces (values
// and every gradient), accumulation into an existing key gradient, thread independence, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
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

using tg::DType;
using tg::Generator;
using tg::Shape;
using tg::Tensor;
using tg::testing::max_abs_diff;
using tg::testing::rand64;

// What the fused op replaces (d2l's AdditiveAttention after its projections).
Tensor composite(const Tensor& query, const Tensor& keys, const Tensor& w) {
  const Tensor features = tg::tanh(tg::unsqueeze(query, 2) + tg::unsqueeze(keys, 1));  // (B, Q, K, H)
  return tg::squeeze(tg::matmul(features, tg::unsqueeze(w, 1)), -1);
}

// Values and gradients of sum(scores * weights) w.r.t. query, keys, w.
std::vector<Tensor> value_and_grads(Tensor (*op)(const Tensor&, const Tensor&, const Tensor&), const Tensor& q,
                                    const Tensor& k, const Tensor& w, const Tensor& weights) {
  for (Tensor t : {q, k, w}) t.zero_grad();  // handles: clears the shared tensor's gradient
  const Tensor s = op(q, k, w);
  tg::sum(s * weights).backward();
  return {s.detach(), q.grad(), k.grad(), w.grad()};
}

Tensor fused(const Tensor& q, const Tensor& k, const Tensor& w) { return tg::additive_attention_scores(q, k, w); }

using tg::testing::Contains;

}  // namespace

TEST(AdditiveAttentionScores, Gradcheck) {
  // H = 3 and 13 exercise the scalar tail, 8 and 16 whole SIMD batches; Q > 1 sums over queries.
  const std::vector<std::vector<std::int64_t>> shapes = {{1, 1, 1, 1}, {2, 1, 4, 3}, {3, 2, 5, 8}, {2, 3, 4, 13}, {1, 1, 6, 16}};
  for (const auto& bqkh : shapes) {
    const std::int64_t B = bqkh[0], Q = bqkh[1], K = bqkh[2], H = bqkh[3];
    SCOPED_TRACE("B=" + std::to_string(B) + " Q=" + std::to_string(Q) + " K=" + std::to_string(K) +
                 " H=" + std::to_string(H));
    Generator gen(11);
    const Tensor q = rand64({B, Q, H}, gen), k = rand64({B, K, H}, gen), w = rand64({H}, gen);
    EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return tg::additive_attention_scores(in[0], in[1], in[2]); },
                     {q, k, w});
  }
}

TEST(AdditiveAttentionScores, EqualsTheCompositeInValueAndGradient) {
  for (const DType dtype : {DType::f64, DType::f32}) {
    SCOPED_TRACE(tg::dtype_name(dtype));
    const double tol = dtype == DType::f64 ? 1e-12 : 2e-5;
    Generator gen(12);
    const Tensor q = Tensor::uniform({4, 2, 16}, -1, 1, gen, dtype).requires_grad_();
    const Tensor k = Tensor::uniform({4, 7, 16}, -1, 1, gen, dtype).requires_grad_();
    const Tensor w = Tensor::uniform({16}, -1, 1, gen, dtype).requires_grad_();
    // Masked positions (zero upstream gradient) are skipped by the fused backward.
    std::vector<std::int64_t> mask(4 * 2 * 7);
    for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 == 0;
    const Tensor weights = tg::masked_fill(Tensor::uniform({4, 2, 7}, -1, 1, gen, dtype),
                                           Tensor::from_vector(mask, {4, 2, 7}), 0.0);
    const auto a = value_and_grads(fused, q, k, w, weights);
    const auto b = value_and_grads(composite, q, k, w, weights);
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_LT(max_abs_diff(a[i], b[i]), tol) << "tensor " << i;
  }
}

TEST(AdditiveAttentionScores, AccumulatesIntoTheKeyGradientOfEveryStep) {
  // A decoder attends to the same keys at every step: the key gradient is the sum over steps,
  // also when the keys are an intermediate (a projection) rather than a leaf.
  Generator gen(13);
  const Tensor x = rand64({2, 5, 8}, gen), w = rand64({8}, gen);
  const Tensor q1 = rand64({2, 1, 8}, gen), q2 = rand64({2, 1, 8}, gen);
  // One backward pass over both steps: the intermediate keys' gradient is accumulated (in place,
  // by the second step to run backward) before it reaches x.
  auto one_pass = [&](auto op) {
    Tensor(x).zero_grad();
    const Tensor keys = x * 2.0;
    (tg::sum(tg::square(op(q1, keys, w))) + tg::sum(op(q2, keys, w) * 3.0)).backward();
    return x.grad();
  };
  EXPECT_LT(max_abs_diff(one_pass(fused), one_pass(composite)), 1e-12);
}

TEST(AdditiveAttentionScores, SameBitsWithOneAndTwoThreads) {
  Generator gen(14);
  const Tensor q = Tensor::uniform({64, 1, 256}, -1, 1, gen).requires_grad_();
  const Tensor k = Tensor::uniform({64, 30, 256}, -1, 1, gen).requires_grad_();
  const Tensor w = Tensor::uniform({256}, -1, 1, gen).requires_grad_();
  const Tensor weights = Tensor::uniform({64, 1, 30}, -1, 1, gen);
  tg::set_num_threads(1);
  const auto one = value_and_grads(fused, q, k, w, weights);
  tg::set_num_threads(2);
  const auto two = value_and_grads(fused, q, k, w, weights);
  tg::set_num_threads(0);
  for (std::size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(one[i].to_vector<float>(), two[i].to_vector<float>()) << "tensor " << i;
}

TEST(AdditiveAttentionScores, ErrorsNameTheOpAndTheShapes) {
  const Tensor q = Tensor::zeros({2, 1, 4}), k = Tensor::zeros({2, 3, 4}), w = Tensor::zeros({4});
  try {
    tg::additive_attention_scores(q, Tensor::zeros({2, 3, 5}), w);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "additive_attention_scores"));
    EXPECT_TRUE(Contains(e.what(), "[2, 1, 4]"));
    EXPECT_TRUE(Contains(e.what(), "[2, 3, 5]"));
  }
  using tg::testing::expect_error;
  expect_error([&] { tg::additive_attention_scores(q, Tensor::zeros({3, 3, 4}), w); },
               {"additive_attention_scores: expects query (B, Q, H), keys (B, K, H) and w (H)", "query [2, 1, 4]",
                "keys [3, 3, 4]", "w [4]"});
  expect_error([&] { tg::additive_attention_scores(q, k, Tensor::zeros({1, 4})); },
               {"additive_attention_scores: expects query (B, Q, H)", "query [2, 1, 4]", "keys [2, 3, 4]",
                "w [1, 4]"});
}

// One floating dtype for query, keys and w, no promotion (as the other fused ops, linear and
// layer_norm); the messages name each operand's dtype and shape, as linear's.
TEST(AdditiveAttentionScores, DtypeErrorsNameEachOperandsDtypeAndShape) {
  using tg::testing::error_of;
  const Tensor q = Tensor::zeros({2, 1, 4}), k = Tensor::zeros({2, 3, 4}), w = Tensor::zeros({4});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::additive_attention_scores(q, k.to(DType::f64), w); }),
            "additive_attention_scores: dtypes differ: query float32 [2, 1, 4], keys float64 [2, 3, 4], w float32 [4]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::additive_attention_scores(q, k, w.to(DType::f64)); }),
            "additive_attention_scores: dtypes differ: query float32 [2, 1, 4], keys float32 [2, 3, 4], w float64 [4]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::additive_attention_scores(q, k.to(DType::i64), w); }),
            "additive_attention_scores: dtypes differ: query float32 [2, 1, 4], keys int64 [2, 3, 4], w float32 [4]");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              tg::additive_attention_scores(q.to(DType::i64), k.to(DType::i64), w.to(DType::i64));
            }),
            "additive_attention_scores: needs floating tensors: query int64 [2, 1, 4], keys int64 [2, 3, 4], w int64 [4]");
  // A shape error comes first, whatever the dtypes.
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::additive_attention_scores(q, Tensor::zeros({2, 3, 5}, DType::i64), w); }),
            "additive_attention_scores: expects query (B, Q, H), keys (B, K, H) and w (H), got query [2, 1, 4], keys "
            "[2, 3, 5] and w [4]");
  // Accepted: one dtype, float32 or float64. q = 0 and k = 0 give tanh(0) = 0, so every score is
  // w . 0 = 0; with k = atanh(0.5) every score is 0.5 * sum(w) = 0.5 * 4.
  for (const DType dt : {DType::f32, DType::f64}) {
    const Tensor ones = Tensor::ones({4}, dt);
    const Tensor s0 = tg::additive_attention_scores(q.to(dt), k.to(dt), ones);
    EXPECT_EQ(s0.dtype(), dt);
    EXPECT_EQ(s0.shape(), Shape({2, 1, 3}));
    EXPECT_EQ(s0.to_vector<double>(), std::vector<double>(6, 0.0));
    const Tensor s1 = tg::additive_attention_scores(q.to(dt), Tensor::full({2, 3, 4}, std::atanh(0.5), dt), ones);
    for (double v : s1.to_vector<double>()) EXPECT_NEAR(v, 2.0, dt == DType::f64 ? 1e-12 : 1e-5);
  }
}
