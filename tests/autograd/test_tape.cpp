#include <gtest/gtest.h>

#include <array>
#include <memory>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"

using namespace tg;

namespace {
Tensor vec(std::vector<double> v) { return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}); }
}  // namespace

TEST(Tape, BackwardAccumulatesIntoLeaves) {
  Tensor x = vec({1, 2, 3}).requires_grad_();
  Tensor y = sum(x * x);  // dy/dx = 2x
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 4, 6}));
  // A second forward/backward adds to the same .grad until zeroed.
  sum(x * 3.0).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 7, 9}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Tape, InputUsedTwiceGetsBothContributions) {
  Tensor x = vec({2.0}).requires_grad_();
  Tensor y = sum(x * x + x);  // 2x + 1
  y.backward();
  EXPECT_EQ(x.grad().item(), 5.0);
}

TEST(Tape, LeafGradDoesNotAliasOtherGradients) {
  // add's backward passes the same gradient to both inputs; scaling one must not touch the other.
  Tensor a = vec({1, 1}).requires_grad_();
  Tensor b = vec({1, 1}).requires_grad_();
  sum(a + b).backward();
  Tensor ga = a.grad();
  ga.fill_(10);
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1, 1}));
}

TEST(Tape, NonScalarNeedsSeed) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor y = x * 2.0;
  EXPECT_THROW(y.backward(), std::invalid_argument);
  y.backward(vec({1, 10}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 20}));
  tape::reset();
}

TEST(Tape, NoGradRecordsNothing) {
  Tensor x = vec({1, 2}).requires_grad_();
  const auto before = tape::size();
  {
    NoGradGuard guard;
    Tensor y = tanh(x) * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(tape::size(), before);
    EXPECT_THROW(sum(y).backward(), std::runtime_error);
  }
  EXPECT_TRUE(GradMode::enabled());
  EXPECT_TRUE(tanh(x).requires_grad());
  tape::reset();
}

TEST(Tape, DetachCutsTheGraph) {
  Tensor x = vec({3.0}).requires_grad_();
  Tensor y = x * x;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.shares_storage(y));
  sum(d * x).backward();  // d is a constant: d(d*x)/dx = d = 9
  EXPECT_EQ(x.grad().item(), 9.0);
  tape::reset();
}

TEST(Tape, BackwardWithoutGradIsAClearError) {
  Tensor c = vec({1, 2});
  try {
    sum(c).backward();
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not require grad"), std::string::npos) << e.what();
  }
}

TEST(Tape, BackwardTwiceThroughAGraphIsAClearError) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor h = tanh(x);
  Tensor a = sum(h);
  Tensor b = sum(h * 2.0);  // shares h with a
  a.backward();
  // a's pass freed h's node; b still needs it.
  try {
    b.backward();
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("already freed"), std::string::npos) << e.what();
  }
  try {
    a.backward();
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("already freed"), std::string::npos) << e.what();
  }
  tape::reset();
}

TEST(Tape, ResetFreesTheGraph) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor y = sum(tanh(x));
  EXPECT_GT(tape::size(), 0u);
  tape::reset();
  EXPECT_EQ(tape::size(), 0u);
  EXPECT_THROW(y.backward(), std::runtime_error);
}

TEST(Tape, BackwardEmptiesTheTapeAndMemoryStaysFlatOver1000Steps) {
  Generator gen(0);
  Tensor w = Tensor::uniform({64, 32}, -0.1, 0.1, gen).requires_grad_();
  Tensor x = Tensor::uniform({16, 32}, -1, 1, gen);
  auto step = [&] {
    Tensor loss = mean(square(tanh(linear(x, w))));
    loss.backward();
    EXPECT_EQ(tape::size(), 0u);
    w.zero_grad();
  };
  for (int i = 0; i < 10; ++i) step();  // warm up
  const auto bytes = memory::live_bytes();
  const auto buffers = memory::live_buffers();
  for (int i = 0; i < 1000; ++i) step();
  EXPECT_EQ(memory::live_bytes(), bytes);
  EXPECT_EQ(memory::live_buffers(), buffers);
}

TEST(Tape, ForwardOnlyLoopStaysFlatWithReset) {
  Generator gen(0);
  Tensor w = Tensor::uniform({8, 8}, -1, 1, gen).requires_grad_();
  const auto bytes = memory::live_bytes();
  for (int i = 0; i < 1000; ++i) {
    Tensor y = tanh(matmul(w, w));
    tape::reset();
  }
  EXPECT_EQ(tape::size(), 0u);
  EXPECT_EQ(memory::live_bytes(), bytes);
}

TEST(Tape, RequiresGradOnlyOnFloatingLeaves) {
  Tensor x = vec({1}).requires_grad_();
  Tensor y = x * 2.0;
  EXPECT_FALSE(y.is_leaf());
  EXPECT_THROW(y.requires_grad_(false), std::logic_error);
  EXPECT_THROW(Tensor::zeros({2}, DType::i64).requires_grad_(), std::invalid_argument);
  tape::reset();
}

TEST(Tape, BackwardFreesDeadBranchesButKeepsLiveOnes) {
  Tensor x = vec({1, 2}).requires_grad_();
  {
    Tensor unused = exp(tanh(x));  // computed and dropped: nothing can backward through it
  }
  Tensor kept = sigmoid(x);        // still held: must stay differentiable
  Tensor loss = sum(x * x);
  loss.backward();
  EXPECT_EQ(tape::size(), 1u);     // only sigmoid's node is left
  kept.backward(vec({1, 1}));
  EXPECT_EQ(tape::size(), 0u);
  // 2x from the loss plus sigmoid'(x) from the second pass.
  const auto g = x.grad().to_vector<double>();
  EXPECT_NEAR(g[0], 2 + 0.19661193324148185, 1e-12);
  EXPECT_NEAR(g[1], 4 + 0.10499358540350662, 1e-12);
}

TEST(Tape, TrainingStepsWithDeadBranchesKeepMemoryFlat) {
  Generator gen(0);
  Tensor w = Tensor::uniform({16, 16}, -0.1, 0.1, gen).requires_grad_();
  Tensor x = Tensor::uniform({4, 16}, -1, 1, gen);
  auto step = [&] {
    Tensor h = tanh(linear(x, w));
    {
      Tensor side = max(h);  // a diagnostic the loss does not use, dropped before backward
      (void)side.item();
    }
    mean(square(h)).backward();
    w.zero_grad();
  };
  for (int i = 0; i < 5; ++i) step();
  const auto bytes = memory::live_bytes();
  for (int i = 0; i < 500; ++i) step();
  EXPECT_EQ(tape::size(), 0u);
  EXPECT_EQ(memory::live_bytes(), bytes);
}

TEST(Tape, BackwardClosuresOfAnySizeRunAndFreeWhatTheyCaptured) {
  // A closure larger than BackwardFn's inline buffer lives in a pooled block; both kinds must run
  // once and release their captures when the node is freed.
  const auto buffers = memory::live_buffers();
  {
    Tensor x = vec({1, 2}).requires_grad_();
    std::array<double, 64> big{};  // 512 B of captures
    big[63] = 3.0;
    static_assert(sizeof(big) > BackwardFn::kInlineBytes);
    Tensor saved = Tensor::full({1000}, 1.0);  // captured by both closures
    Tensor y = record("big", x * 1.0, {x}, [big, saved](BackwardContext& ctx) {
      ctx.accumulate(0, ctx.grad_output() * big[63]);
    });
    Tensor z = record("small", y * 1.0, {y}, [saved](BackwardContext& ctx) { ctx.accumulate(0, ctx.grad_output() * 2.0); });
    saved = Tensor();
    EXPECT_EQ(memory::live_buffers(), buffers + 4);  // x, x * 1, y * 1, and saved (held by the closures)
    sum(z).backward();
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 6}));
  }
  EXPECT_EQ(memory::live_buffers(), buffers);
  EXPECT_EQ(tape::size(), 0u);
}

TEST(Tape, BackwardFnMovesAndResets) {
  int calls = 0;
  auto counter = std::make_shared<int>(0);
  BackwardFn f = [&calls, counter](BackwardContext&) { ++calls; };
  EXPECT_TRUE(static_cast<bool>(f));
  EXPECT_EQ(counter.use_count(), 2);
  BackwardFn g = std::move(f);
  EXPECT_FALSE(static_cast<bool>(f));
  EXPECT_EQ(counter.use_count(), 2);
  g = nullptr;
  EXPECT_EQ(counter.use_count(), 1);
  (void)calls;
}
