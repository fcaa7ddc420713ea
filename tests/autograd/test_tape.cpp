#include <gtest/gtest.h>

#include <array>
#include <memory>

#include "autograd/compact_grad.h"
#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_softmax.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "gradcheck_util.h"

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

// ---- gradient terms: one accumulate, the tape picks how ----------------------------------------

namespace {
/// buffer += t, both f64 (the tests' tensors).
void add_f64(Tensor& buffer, const Tensor& t) {
  const double* src = t.data<double>();
  double* dst = buffer.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) dst[i] += src[i];
}

struct TermCalls {
  int make = 0, add_into = 0, compact = 0;
};

/// y = 3x, delivering its gradient 3g as a term that counts which path the tape took.
Tensor triple(const Tensor& x, TermCalls& calls, bool offer_compact = false) {
  return record("triple", x * 3.0, {x}, [&calls, offer_compact](BackwardContext& ctx) {
    struct Term {
      const Tensor& g;
      TermCalls& calls;
      bool offer_compact;
      Tensor make() const {
        ++calls.make;
        return g * 3.0;
      }
      void add_into(Tensor& buffer) const {
        ++calls.add_into;
        add_f64(buffer, g * 3.0);
      }
      std::shared_ptr<CompactGrad> compact() const {
        ++calls.compact;
        if (!offer_compact) return nullptr;
        // 3g = Gᵀ X with G = 3 I (n, n) and X = g (n, m): the low-rank form, exact.
        const std::int64_t n = g.size(0);
        std::vector<double> diag(static_cast<std::size_t>(n * n), 0.0);
        for (std::int64_t i = 0; i < n; ++i) diag[static_cast<std::size_t>(i * n + i)] = 3.0;
        return low_rank_grad(Tensor::from_vector(diag, {n, n}), g);
      }
    };
    ctx.accumulate(0, Term{ctx.grad_output(), calls, offer_compact});
  });
}
}  // namespace

TEST(Tape, GradientTermIsMadeFirstThenAddedInPlace) {
  Tensor x = vec({1, 2}).requires_grad_();
  TermCalls calls;
  sum(triple(x, calls) + triple(x, calls) * 2.0).backward();  // 3 + 6 per element
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{9, 9}));
  EXPECT_EQ(calls.make, 1);      // the first gradient of x: a new tensor
  EXPECT_EQ(calls.add_into, 1);  // the second: added into the first, no temporary
  EXPECT_EQ(calls.compact, 0);   // x does not allow compact gradients: never asked
}

TEST(Tape, GradientTermAddsIntoALeafsExistingGradientAcrossBackwardCalls) {
  Tensor x = vec({1, 2}).requires_grad_();
  TermCalls calls;
  sum(triple(x, calls)).backward();
  const double* before = x.grad().data<double>();
  sum(triple(x, calls)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 6}));
  EXPECT_EQ(x.grad().data<double>(), before);  // the same buffer, added into
  EXPECT_EQ(calls.make, 1);
  EXPECT_EQ(calls.add_into, 1);
}

TEST(Tape, GradientTermOffersItsCompactFormOnlyToALeafThatAllowsIt) {
  Generator gen(3);
  const Tensor init = Tensor::normal({2, 3}, 0, 1, gen, DType::f64);
  Tensor w = init.clone().requires_grad_();
  w.allow_compact_grad();
  TermCalls calls;
  sum(triple(w, calls, /*offer_compact=*/true) * init).backward();  // d/dw = 3 init
  ASSERT_NE(w.compact_grad(), nullptr);
  EXPECT_STREQ(w.compact_grad()->kind(), "low_rank");
  EXPECT_EQ(calls.compact, 1);
  EXPECT_EQ(calls.make + calls.add_into, 0);
  // A second gradient for the same leaf continues densely (the compact one converted, then added).
  sum(triple(w, calls, true) * init).backward();
  EXPECT_EQ(w.compact_grad(), nullptr);
  EXPECT_EQ(calls.compact, 1);
  EXPECT_EQ(calls.add_into, 1);
  const auto got = w.grad().to_vector<double>(), expect = (init * 6.0).to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expect[i], 1e-12);
}

TEST(Tape, CallableGradientTermGetsZerosWhenThereIsNoGradientYet) {
  Tensor x = vec({1, 2, 3}).requires_grad_();
  std::vector<double> seen;
  Tensor y = record("plus_one_grad", x * 1.0, {x}, [&seen](BackwardContext& ctx) {
    ctx.accumulate(0, [&](Tensor& buffer) {
      seen = buffer.to_vector<double>();
      add_f64(buffer, ctx.grad_output());
    });
  });
  sum(y).backward();
  EXPECT_EQ(seen, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1, 1}));
}

// ---- retain_graph, tg::grad, hooks, retain_grad ---------------------------------------------

TEST(Tape, RetainGraphLetsASecondBackwardWalkTheSameGraph) {
  Tensor x = vec({1, 2, 3}).requires_grad_();
  Tensor y = sum(tanh(x) * x);
  y.backward({}, /*retain_graph=*/true);
  const std::vector<double> once = x.grad().to_vector<double>();
  y.backward();  // the graph is still there; this pass frees it
  const std::vector<double> twice = x.grad().to_vector<double>();
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_DOUBLE_EQ(twice[i], 2 * once[i]);
  EXPECT_THROW(y.backward(), std::runtime_error);  // freed now
  EXPECT_EQ(tape::size(), 0u);
}

TEST(Tape, RetainGraphKeepsACrossEntropyBackwardRepeatable) {
  // cross_entropy's backward overwrites its saved logits when nothing else holds them; a kept
  // graph must not let it, or the second pass reads its own gradient.
  Tensor w = Tensor::from_vector(std::vector<double>{0.5, -1.0, 2.0, 0.25, 1.5, -0.5}, {2, 3}).requires_grad_();
  const Tensor target = Tensor::from_vector(std::vector<std::int64_t>{2, 0}, {2});
  Tensor loss = cross_entropy(w * 2.0, target);
  loss.backward({}, true);
  const std::vector<double> once = w.grad().to_vector<double>();
  loss.backward();
  const std::vector<double> twice = w.grad().to_vector<double>();
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_DOUBLE_EQ(twice[i], 2 * once[i]);
}

TEST(Tape, GradReturnsGradientsWithoutTouchingGradOfAnyLeaf) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor w = vec({3, 4}).requires_grad_();
  Tensor y = sum(x * w * x);  // dy/dx = 2 w x, dy/dw = x²
  const std::vector<Tensor> g = tg::grad({y}, {x});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{6, 16}));
  EXPECT_FALSE(g[0].requires_grad());
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());  // not asked for: untouched
  EXPECT_EQ(tape::size(), 0u);       // freed, as without retain_graph
}

TEST(Tape, GradOfAnIntermediateAndSeveralOutputs) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor h = x * 3.0;          // an op output as an input of grad
  Tensor a = sum(h * h);       // da/dh = 2h
  Tensor b = sum(h);           // db/dh = 1
  const std::vector<Tensor> g = tg::grad({a, b}, {h, x}, {Tensor(), Tensor::scalar(10.0, DType::f64)});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{16, 22}));  // 2h + 10
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{48, 66}));  // 3 (2h + 10)
}

TEST(Tape, GradMatchesBackwardAndChecksItsArguments) {
  Generator gen(5);
  Tensor x = Tensor::normal({3, 4}, 0, 1, gen, DType::f64).requires_grad_();
  Tensor w = Tensor::normal({4, 2}, 0, 1, gen, DType::f64).requires_grad_();
  Tensor y = sum(tanh(matmul(x, w)));
  const std::vector<Tensor> g = tg::grad({y}, {x, w}, {}, {.retain_graph = true});
  y.backward();
  EXPECT_EQ(g[0].to_vector<double>(), x.grad().to_vector<double>());
  EXPECT_EQ(g[1].to_vector<double>(), w.grad().to_vector<double>());

  Tensor unused = vec({1}).requires_grad_();
  Tensor z = sum(x * 2.0);
  EXPECT_THROW(tg::grad({z}, {unused}, {}, {.retain_graph = true}), std::invalid_argument);
  const std::vector<Tensor> g2 = tg::grad({z}, {x, unused}, {}, {.allow_unused = true});
  EXPECT_TRUE(g2[0].defined());
  EXPECT_FALSE(g2[1].defined());
  EXPECT_THROW(tg::grad({sum(x * 1.0)}, {vec({1})}), std::invalid_argument);  // does not require grad
  EXPECT_THROW(tg::grad({x * 1.0}, {x}), std::invalid_argument);             // not one element, no seed
  tape::reset();
}

TEST(Tape, HooksSeeAndReplaceGradientsInOrderAndCanBeRemoved) {
  Tensor x = vec({1, 2}).requires_grad_();
  std::vector<std::vector<double>> seen;
  HookHandle first = x.register_hook([&](const Tensor& g) {
    seen.push_back(g.to_vector<double>());
    return g * 10.0;  // replaces the gradient
  });
  x.register_hook([&](const Tensor& g) {
    seen.push_back(g.to_vector<double>());  // sees the first hook's result
    return Tensor();                        // keeps it
  });
  sum(x * 3.0).backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::vector<double>{3, 3}));
  EXPECT_EQ(seen[1], (std::vector<double>{30, 30}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{30, 30}));

  first.remove();
  first.remove();  // twice: nothing
  x.zero_grad();
  seen.clear();
  sum(x * 3.0).backward();
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 3}));
}

TEST(Tape, HookOnAnOpOutputSeesItsWholeGradientOnceAndChangesWhatFlowsOn) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor h = x * 2.0;
  int calls = 0;
  std::vector<double> seen;
  h.register_hook([&](const Tensor& g) {
    ++calls;
    seen = g.to_vector<double>();
    return Tensor::zeros(g.shape(), g.dtype());  // nothing reaches x
  });
  sum(h * 3.0 + h).backward();  // h used twice: one call with the sum, 4 per element
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<double>{4, 4}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0}));
}

TEST(Tape, HookOnAParameterDisablesCompactGradientsAndSeesTheDenseOne) {
  Generator gen(2);
  Tensor w = Tensor::normal({8, 6}, 0, 1, gen, DType::f64).requires_grad_();
  w.allow_compact_grad();
  const Tensor x = Tensor::normal({2, 6}, 0, 1, gen, DType::f64);
  std::vector<double> seen;
  w.register_hook([&](const Tensor& g) {
    seen = g.to_vector<double>();
    return Tensor();
  });
  sum(linear(x, w)).backward();
  EXPECT_EQ(w.compact_grad(), nullptr);
  EXPECT_EQ(seen, w.grad().to_vector<double>());
}

TEST(Tape, HookErrorsAreClear) {
  Tensor c = vec({1});
  EXPECT_THROW(c.register_hook([](const Tensor& g) { return g; }), std::invalid_argument);  // no grad
  Tensor x = vec({1, 2}).requires_grad_();
  x.register_hook([](const Tensor&) { return Tensor::zeros({3}, DType::f64); });
  try {
    sum(x * 1.0).backward();
    FAIL() << "a hook returning the wrong shape must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("register_hook"), std::string::npos) << e.what();
  }
  tape::reset();
}

// torch.autograd 1.13's behaviour in the corners an engine audit compared (values from torch).
TEST(Tape, EngineCornersAsTorch) {
  {  // an input listed twice gets its gradient twice
    Tensor x = vec({1, 2}).requires_grad_();
    const auto g = grad({sum(x * x)}, {x, x});
    EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{2, 4}));
    EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{2, 4}));
  }
  {  // a retained gradient is a copy, and adds up over backwards
    Tensor x = vec({1, 2}).requires_grad_();
    Tensor z = x * 2.0;
    z.retain_grad();
    Tensor y = sum(z * z);
    y.backward({}, true);
    y.backward();
    EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{8, 16}));
    Tensor w = x * 3.0;
    w.retain_grad();
    Tensor s = vec({1, 1});
    w.backward(s);
    s.fill_(7.0);
    EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{1, 1}));
    // set_grad and zero_grad on an op's output act on its grad(), not on backward's pending sum
    w.zero_grad();
    EXPECT_FALSE(w.grad().defined());
    x.zero_grad();
    Tensor v = x * 2.0;
    v.set_grad(vec({10, 10}));
    sum(v).backward();
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2}));
    EXPECT_EQ(v.grad().to_vector<double>(), (std::vector<double>{10, 10}));
  }
  {  // requires_grad_(true) on an op's output is a no-op; a leaf switched off after use gets nothing
    Tensor x = vec({1, 2}).requires_grad_();
    Tensor z = x * 2.0;
    EXPECT_NO_THROW(z.requires_grad_(true));
    EXPECT_THROW(z.requires_grad_(false), std::logic_error);
    Tensor y = sum(z);
    x.requires_grad_(false);
    y.backward();
    EXPECT_FALSE(x.grad().defined());
  }
  {  // a float64 seed for a float32 root is converted
    Tensor x = Tensor::from_values({1, 2}, {2}, DType::f32).requires_grad_();
    (x * 2.0).backward(Tensor::ones({2}, DType::f64));
    EXPECT_EQ(x.grad().dtype(), DType::f32);
    EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 2}));
  }
  {  // gradcheck leaves the caller's graph alone
    Tensor w = vec({0.5, 1.5}).requires_grad_();
    Tensor y = sum(exp(w));
    EXPECT_TRUE(tg::testing::passes_gradcheck([](const std::vector<Tensor>& in) { return tanh(in[0]); }, {vec({0.1, 0.2}).requires_grad_()}));
    y.backward();
    EXPECT_NEAR(w.grad().to_vector<double>()[1], std::exp(1.5), 1e-12);
  }
  tape::reset();
}

TEST(Tape, RetainGradKeepsAnOpOutputsGradient) {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor h = x * 2.0;
  Tensor k = x * 5.0;
  h.retain_grad();
  EXPECT_TRUE(h.retains_grad());
  EXPECT_FALSE(x.retains_grad());  // a leaf keeps its gradient anyway
  sum(h * h + k).backward();
  EXPECT_EQ(h.grad().to_vector<double>(), (std::vector<double>{4, 8}));  // 2h
  EXPECT_FALSE(k.grad().defined());  // not retained
}
