// Tensor::register_post_accumulate_grad_hook and anomaly mode (tg::detect_anomaly).
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/function.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "error_of.h"

using namespace tg;

namespace {
Tensor vec(std::vector<double> v) { return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}); }

std::string anomaly_message(const Tensor& loss) {
  const std::string m = tg::testing::error_of<std::runtime_error>([&] { loss.backward(); });
  tape::reset();
  return m;
}
}  // namespace

TEST(PostAccumulateGradHook, FiresOncePerBackwardWithTheFinalGradient) {
  Tensor x = vec({1, 2}).requires_grad_();
  std::vector<std::vector<double>> seen;
  x.register_post_accumulate_grad_hook([&](Tensor& t) { seen.push_back(t.grad().to_vector<double>()); });
  sum(x * x + x * 3.0 + exp(x) * 0.0).backward();  // three uses: 2x + 3
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{5, 7}));
  sum(x * 2.0).backward();  // accumulates onto the previous gradient
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<double>{7, 9}));
}

TEST(PostAccumulateGradHook, FiresAsSoonAsTheLeafIsFinalInReverseOrderOfLastUse) {
  Tensor w1 = vec({1, 2}).requires_grad_();
  Tensor w2 = vec({3, 4}).requires_grad_();
  std::vector<std::string> order;
  std::vector<double> w1_grad_when_w2_fired;
  w1.register_post_accumulate_grad_hook([&](Tensor&) { order.push_back("w1"); });
  w2.register_post_accumulate_grad_hook([&](Tensor&) {
    order.push_back("w2");
    w1_grad_when_w2_fired = {w1.grad().defined() ? 1.0 : 0.0};
  });
  Tensor h = tanh(w1 * 2.0);   // w1 used first
  Tensor y = sum(h * w2);      // w2 used last: final before w1 is
  y.backward();
  EXPECT_EQ(order, (std::vector<std::string>{"w2", "w1"}));
  EXPECT_EQ(w1_grad_when_w2_fired, (std::vector<double>{0.0}));  // w2's hook ran mid-backward
}

TEST(PostAccumulateGradHook, MayScaleTheGradientInPlace) {
  Tensor x = vec({1, 2}).requires_grad_();
  x.register_post_accumulate_grad_hook([](Tensor& t) {
    Tensor g = t.grad();
    g.copy_(g * 0.5);  // e.g. averaging over data-parallel workers
  });
  sum(x * 4.0).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2}));
}

TEST(PostAccumulateGradHook, RootLeafUnreachedLeafGradAndRemove) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor unused = vec({1}).requires_grad_();
  int fired_x = 0, fired_unused = 0;
  HookHandle hx = x.register_post_accumulate_grad_hook([&](Tensor&) { ++fired_x; });
  unused.register_post_accumulate_grad_hook([&](Tensor&) { ++fired_unused; });
  x.backward(vec({1, 1}));  // x is the root itself
  EXPECT_EQ(fired_x, 1);
  Tensor other = unused * 2.0;  // recorded, but not on the path of the next backward
  sum(x * 3.0).backward();
  EXPECT_EQ(fired_x, 2);
  EXPECT_EQ(fired_unused, 0);
  (void)tg::grad({sum(x * x)}, {x});  // tg::grad does not accumulate into grad()
  EXPECT_EQ(fired_x, 2);
  hx.remove();
  sum(x * 3.0).backward();
  EXPECT_EQ(fired_x, 2);
  tape::reset();
}

TEST(PostAccumulateGradHook, CompactGradientsAndRetainGraph) {
  Tensor table = Tensor::from_values({1, 2, 3, 4, 5, 6}, {3, 2}, DType::f64).requires_grad_();
  table.allow_compact_grad();
  int fired = 0;
  std::vector<double> grad;
  table.register_post_accumulate_grad_hook([&](Tensor& t) {
    ++fired;
    grad = t.grad().to_vector<double>();
  });
  Tensor ids = Tensor::from_vector(std::vector<std::int64_t>{2, 0, 2}, {3});
  Tensor y = sum(embedding(table, ids));
  y.backward(Tensor(), true);
  y.backward();
  EXPECT_EQ(fired, 2);
  EXPECT_EQ(grad, (std::vector<double>{2, 2, 0, 0, 4, 4}));
}

TEST(PostAccumulateGradHook, OnlyForLeavesThatRequireGrad) {
  Tensor x = vec({1});
  EXPECT_THROW(x.register_post_accumulate_grad_hook([](Tensor&) {}), std::invalid_argument);
  x.requires_grad_();
  Tensor y = x * 2.0;
  EXPECT_THROW(y.register_post_accumulate_grad_hook([](Tensor&) {}), std::invalid_argument);
  tape::reset();
}

TEST(Anomaly, InfinityNamesTheOpNodeAndScope) {
  Tensor x = vec({0.0, 1.0}).requires_grad_();
  detect_anomaly guard;
  Tensor y;
  {
    AnomalyScope outer("encoder");
    AnomalyScope inner("layer1");
    y = sum(log(x) * 2.0);  // d log(x) / dx = 1 / 0 = inf
  }
  const std::string m = anomaly_message(y);
  EXPECT_NE(m.find("backward of 'log'"), std::string::npos) << m;
  EXPECT_NE(m.find("tape node 0"), std::string::npos) << m;
  EXPECT_NE(m.find("recorded in \"encoder/layer1\""), std::string::npos) << m;
  EXPECT_NE(m.find("infinity in the gradient of input 0 (shape [2] float64)"), std::string::npos) << m;
}

TEST(Anomaly, NaNAfterFiniteOpsAndNoScope) {
  Tensor x = vec({0.0, 4.0}).requires_grad_();
  detect_anomaly guard;
  Tensor y = sum(sqrt(x) * 0.0);  // mul's backward gives zeros, sqrt's 0 / 0
  const std::string m = anomaly_message(y);
  EXPECT_NE(m.find("backward of 'sqrt'"), std::string::npos) << m;
  EXPECT_NE(m.find("NaN"), std::string::npos) << m;
  EXPECT_NE(m.find("no AnomalyScope"), std::string::npos) << m;
}

TEST(Anomaly, CheckedInABackwardWithCreateGraph) {
  Tensor x = vec({0.0, 4.0}).requires_grad_();
  detect_anomaly guard;
  const std::string m = tg::testing::error_of<std::runtime_error>(
      [&] { grad({sum(sqrt(x))}, {x}, {}, {.create_graph = true}); });  // d sqrt(x) / dx = inf at 0
  tape::reset();
  EXPECT_NE(m.find("backward of 'sqrt'"), std::string::npos) << m;
  EXPECT_NE(m.find("infinity"), std::string::npos) << m;
}

TEST(Anomaly, OffByDefaultAndGuardRestores) {
  EXPECT_FALSE(is_anomaly_enabled());
  {
    detect_anomaly on;
    EXPECT_TRUE(is_anomaly_enabled());
    {
      detect_anomaly off(false);
      EXPECT_FALSE(is_anomaly_enabled());
    }
    EXPECT_TRUE(is_anomaly_enabled());
  }
  EXPECT_FALSE(is_anomaly_enabled());
  Tensor x = vec({0.0}).requires_grad_();
  sum(sqrt(x) * 0.0).backward();  // off: no check, the NaN arrives
  EXPECT_TRUE(std::isnan(x.grad().item()));
}

TEST(Anomaly, FiniteGradientsPassAndMatchNormalMode) {
  Tensor w = Tensor::from_values({0.1, -0.2, 0.3, 0.4, 0.5, -0.6}, {2, 3}, DType::f64).requires_grad_();
  Tensor x = Tensor::from_values({1, 2, 3}, {1, 3}, DType::f64);
  sum(tanh(linear(x, w))).backward();
  const std::vector<double> expected = w.grad().to_vector<double>();
  w.zero_grad();
  {
    detect_anomaly guard;
    sum(tanh(linear(x, w))).backward();
  }
  EXPECT_EQ(w.grad().to_vector<double>(), expected);
}

namespace {
struct BadOp : autograd::Function<BadOp> {
  static Tensor forward(autograd::AutogradContext&, const Tensor& x) { return x * 1.0; }
  static autograd::tensor_list backward(autograd::AutogradContext&, autograd::tensor_list g) {
    return {g[0] * std::nan("")};
  }
};
}  // namespace

TEST(Anomaly, NamesACustomFunction) {
  Tensor x = vec({1.0}).requires_grad_();
  detect_anomaly guard;
  const std::string m = anomaly_message(sum(BadOp::apply(x)));
  EXPECT_NE(m.find("BadOp"), std::string::npos) << m;
}

TEST(TapeReachable, FindsTheLeavesAPathFromTheRootLeadsTo) {
  Tensor a = vec({1, 2}).requires_grad_();
  Tensor b = vec({3, 4}).requires_grad_();
  Tensor c = vec({5, 6}).requires_grad_();
  Tensor off = c * 2.0;                  // recorded, but not on the root's path
  Tensor y = sum(tanh(a * 3.0) * b);
  EXPECT_EQ(tape::reachable(y, {a, b, c, Tensor()}), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(tape::reachable(a, {a, b}), (std::vector<bool>{true, false}));  // a leaf root reaches itself
  EXPECT_EQ(tape::reachable(vec({1}), {a}), (std::vector<bool>{false}));   // no graph at all
  y.backward();
  EXPECT_EQ(tape::reachable(y, {a, b}), (std::vector<bool>{false, false}));  // graph freed
  (void)off;
  tape::reset();
}
