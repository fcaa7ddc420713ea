// Module forward hooks: register_forward_pre_hook / register_forward_hook with PyTorch semantics.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "nn/transformer.h"

using namespace tg;
using nn::ForwardHook;
using nn::ForwardPreHook;

namespace {
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST(ModuleHooks, PreHookReplacesInputsPostHookReplacesOutput) {
  Generator gen(1);
  nn::Linear lin(3, 2, gen);
  const Tensor x = Tensor::uniform({4, 3}, -1, 1, gen);
  const std::vector<double> plain = values(lin(x));
  const std::vector<double> doubled = values(lin->forward(x * 2.0) + 1.0);

  std::vector<std::string> seen;
  auto pre = lin->register_forward_pre_hook([&](const nn::Module& m, const std::vector<Tensor>& in) {
    seen.push_back("pre " + m.name() + " " + in[0].shape().str());
    return std::optional<std::vector<Tensor>>(std::vector<Tensor>{in[0] * 2.0});
  });
  auto post = lin->register_forward_hook([&](const nn::Module&, const std::vector<Tensor>& in, const Tensor& out) {
    seen.push_back("post " + std::to_string(in[0].at({0, 0}) == x.at({0, 0}) * 2.0));  // sees the replaced input
    return std::optional<Tensor>(out + 1.0);
  });
  EXPECT_EQ(values(lin(x)), doubled);
  EXPECT_EQ(seen, (std::vector<std::string>{"pre Linear [4, 3]", "post 1"}));
  EXPECT_EQ(values(lin->forward(x)), plain);  // forward() itself runs no hooks, as in PyTorch
  pre.remove();
  post.remove();
  post.remove();  // twice: nothing
  EXPECT_FALSE(lin->has_forward_hooks());
  EXPECT_EQ(values(lin(x)), plain);
}

TEST(ModuleHooks, RunInRegistrationOrderAndNulloptKeeps) {
  nn::Tanh act;
  std::string order;
  act->register_forward_hook([&](const nn::Module&, const std::vector<Tensor>&, const Tensor& out) {
    order += "a";
    return std::optional<Tensor>(out * 10.0);
  });
  act->register_forward_hook([&](const nn::Module&, const std::vector<Tensor>&, const Tensor& out) {
    order += "b";
    EXPECT_NEAR(out.item(), 10.0 * std::tanh(0.5), 1e-6);  // sees the first hook's output
    return std::optional<Tensor>();
  });
  const Tensor y = act(Tensor::scalar(0.5));
  EXPECT_EQ(order, "ab");
  EXPECT_NEAR(y.item(), 10.0 * std::tanh(0.5), 1e-6);
}

TEST(ModuleHooks, GradientsFlowThroughReplacedValues) {
  Generator gen(2);
  auto lin = nn::Linear(3, 1, gen, false);
  Tensor x = Tensor::uniform({2, 3}, -1, 1, gen).requires_grad_();
  sum(lin->forward(x)).backward();
  const std::vector<double> g1 = values(x.grad());
  x.zero_grad();
  lin->register_forward_pre_hook([](const nn::Module&, const std::vector<Tensor>& in) {
    return std::optional<std::vector<Tensor>>(std::vector<Tensor>{in[0] * 3.0});
  });
  sum(lin(x)).backward();
  const std::vector<double> g3 = values(x.grad());
  for (std::size_t i = 0; i < g1.size(); ++i) EXPECT_NEAR(g3[i], 3.0 * g1[i], 1e-6);
}

TEST(ModuleHooks, SequentialRunsItsMembersHooks) {
  Generator gen(3);
  auto relu = nn::ReLU();
  nn::Sequential seq(nn::Linear(2, 2, gen), relu);
  int calls = 0;
  relu->register_forward_hook([&](const nn::Module&, const std::vector<Tensor>&, const Tensor& out) {
    ++calls;
    return std::optional<Tensor>(out * 0.0);
  });
  const Tensor y = seq(Tensor::uniform({1, 2}, -1, 1, gen));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(values(y), (std::vector<double>{0, 0}));
}

TEST(ModuleHooks, PreHookWithWrongInputCountThrows) {
  nn::ReLU relu;
  relu->register_forward_pre_hook([](const nn::Module&, const std::vector<Tensor>& in) {
    return std::optional<std::vector<Tensor>>(std::vector<Tensor>{in[0], in[0]});
  });
  try {
    relu(Tensor::scalar(1.0));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "forward pre-hook of ReLU: returned 2 inputs, forward takes 1");
  }
}

TEST(ModuleHooks, TransformerLayerHooksSeeAllTensorArguments) {
  Generator gen(4);
  nn::TransformerEncoderLayer layer({.d_model = 4, .nhead = 2, .dim_feedforward = 8, .dropout = 0.0}, gen);
  std::vector<bool> defined;
  layer->register_forward_pre_hook([&](const nn::Module&, const std::vector<Tensor>& in) {
    for (const Tensor& t : in) defined.push_back(t.defined());
    return std::optional<std::vector<Tensor>>();
  });
  const Tensor src = Tensor::uniform({3, 1, 4}, -1, 1, gen);
  const Tensor y = layer(src);
  EXPECT_EQ(defined, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(values(y), values(layer->forward(src)));
}

TEST(ModuleHooks, TransformerDecoderLayerHooksSeeAllSixTensors) {
  Generator gen(5);
  nn::TransformerDecoderLayer layer({.d_model = 4, .nhead = 2, .dim_feedforward = 8, .dropout = 0.0}, gen);
  std::vector<bool> defined;
  layer->register_forward_pre_hook([&](const nn::Module&, const std::vector<Tensor>& in) {
    for (const Tensor& t : in) defined.push_back(t.defined());
    return std::optional<std::vector<Tensor>>();
  });
  int post = 0;
  layer->register_forward_hook([&](const nn::Module&, const std::vector<Tensor>&, const Tensor&) {
    ++post;
    return std::optional<Tensor>();
  });
  const Tensor tgt = Tensor::uniform({3, 1, 4}, -1, 1, gen), memory = Tensor::uniform({5, 1, 4}, -1, 1, gen);
  const Tensor mask = nn::Transformer::generate_square_subsequent_mask(3);
  const Tensor y = layer(tgt, memory, mask);
  EXPECT_EQ(defined, (std::vector<bool>{true, true, true, false, false, false}));
  EXPECT_EQ(post, 1);
  EXPECT_EQ(values(y), values(layer->forward(tgt, memory, mask)));
}

TEST(ModuleHooks, HandleOutlivingItsModuleIsHarmless) {
  nn::ModuleHookHandle handle;
  {
    nn::ReLU relu;
    handle = relu->register_forward_hook([](const nn::Module&, const std::vector<Tensor>&, const Tensor&) {
      return std::optional<Tensor>();
    });
  }
  EXPECT_NO_THROW(handle.remove());  // the module is gone: nothing to remove from
  EXPECT_NO_THROW(handle.remove());  // again
  nn::ModuleHookHandle never_registered;
  EXPECT_NO_THROW(never_registered.remove());
}
