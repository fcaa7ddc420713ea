// Module holders (nn/module_holder.h) as LibTorch's: TG_MODULE, empty holders, layer(x), hooks
// through the call, registration and conversion to std::shared_ptr.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../autograd/gradcheck_util.h"
#include "autograd/ops_elementwise.h"
#include "autograd/random.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/module_holder.h"
#include "nn/multihead_attention.h"
#include "nn/normalization.h"
#include "nn/rnn.h"
#include "nn/transformer.h"

namespace {

using namespace tg;
using tg::testing::max_abs_diff;

// A user module in LibTorch's style: the class, then one TG_MODULE line.
class GatedImpl : public nn::Module {
 public:
  GatedImpl(std::int64_t d, Generator& gen) {
    fc = register_module("fc", nn::Linear(d, d, gen));
    gate = register_module("gate", nn::Linear(d, d, gen));
  }
  Tensor forward(const Tensor& x) { return sigmoid(gate(x)) * fc(x); }
  nn::Linear fc{nullptr}, gate{nullptr};
};
TG_MODULE(Gated);

// forward of two tensors, no operator(): the holder runs it between the hooks.
class MixImpl : public nn::Module {
 public:
  Tensor forward(const Tensor& a, const Tensor& b) { return a * 2.0 + b; }
};
TG_MODULE(Mix);

// A model holding the user module.
class NetImpl : public nn::Module {
 public:
  explicit NetImpl(Generator& gen) {
    block = register_module("block", Gated(3, gen));
    head = register_module("head", nn::Linear(3, 1, gen));
  }
  Tensor forward(const Tensor& x) { return head(block(x)); }
  Gated block{nullptr};
  nn::Linear head{nullptr};
};
TG_MODULE(Net);

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no exception";
}

TEST(ModuleHolder, EmptyHolderThrowsNamingItsType) {
  nn::Linear fc{nullptr};
  EXPECT_TRUE(fc.is_empty());
  EXPECT_FALSE(fc);
  const std::string expected =
      "Linear: the module holder is empty (declared as `Linear x{nullptr}` and not assigned a module yet)";
  EXPECT_EQ(error_of([&] { fc->forward(Tensor::zeros({1, 1})); }), expected);
  EXPECT_EQ(error_of([&] { fc(Tensor::zeros({1, 1})); }), expected);
  EXPECT_EQ(error_of([&] { (void)fc.ptr(); }), expected);
  EXPECT_THROW((void)*fc, std::logic_error);
  Gated user = nullptr;
  EXPECT_EQ(error_of([&] { (void)user->fc; }),
            "Gated: the module holder is empty (declared as `Gated x{nullptr}` and not assigned a module yet)");
  // Registering an empty holder is refused with the child's name.
  nn::Module parent;
  EXPECT_EQ(error_of([&] { parent.register_module("fc", fc); }), "register_module: 'fc' is null");
  EXPECT_TRUE(static_cast<std::shared_ptr<nn::LinearImpl>>(fc) == nullptr);
}

TEST(ModuleHolder, CallEqualsForwardForBuiltInLayers) {
  Generator gen(1);
  const Tensor x = Tensor::uniform({2, 4}, -1, 1, gen);
  nn::Linear fc(4, 3, gen);
  EXPECT_EQ(max_abs_diff(fc(x), fc->forward(x)), 0.0);
  nn::LayerNorm ln(4);
  EXPECT_EQ(max_abs_diff(ln(x), ln->forward(x)), 0.0);
  nn::ReLU relu;  // default-constructible modules: `nn::ReLU relu;` holds one
  EXPECT_FALSE(relu.is_empty());
  EXPECT_EQ(max_abs_diff(relu(x), relu->forward(x)), 0.0);
  nn::Sequential seq(nn::Linear(4, 5, gen), nn::Tanh(), nn::Linear(5, 2, gen));
  EXPECT_EQ(max_abs_diff(seq(x), seq->forward(x)), 0.0);
  nn::Conv2d conv(nn::Conv2dOptions(2, 3, 3).padding(1), gen);
  const Tensor image = Tensor::uniform({1, 2, 5, 5}, -1, 1, gen);
  EXPECT_EQ(max_abs_diff(conv(image), conv->forward(image)), 0.0);
  // Several results and default arguments: forward's return type, through the holder.
  nn::GRU gru(nn::GRUOptions(4, 3), gen);
  const Tensor seq_x = Tensor::uniform({5, 2, 4}, -1, 1, gen);
  auto [out, h_n] = gru(seq_x);
  EXPECT_EQ(max_abs_diff(out, gru->forward(seq_x).first), 0.0);
  EXPECT_EQ(h_n.shape(), (Shape{1, 2, 3}));
  // An options struct as a braced list (the module declares options_type).
  nn::MultiheadAttention mha({.embed_dim = 4, .num_heads = 2}, gen);
  const Tensor q = Tensor::uniform({3, 2, 4}, -1, 1, gen);
  auto [attended, weights] = mha(q, q, q);
  EXPECT_EQ(max_abs_diff(attended, std::get<0>(mha->forward(q, q, q))), 0.0);
  EXPECT_EQ(weights.shape(), (Shape{2, 3, 3}));
}

TEST(ModuleHolder, UserModuleWithOneLineRegistersAndCalls) {
  Generator gen(2);
  Net net(gen);
  std::vector<std::string> names;
  for (const auto& [n, p] : net->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"block.fc.weight", "block.fc.bias", "block.gate.weight",
                                             "block.gate.bias", "head.weight", "head.bias"}));
  const Tensor x = Tensor::uniform({2, 3}, -1, 1, gen);
  const Tensor want = net->head->forward(sigmoid(net->block->gate->forward(x)) * net->block->fc->forward(x));
  EXPECT_EQ(max_abs_diff(net(x), want), 0.0);
  EXPECT_EQ(max_abs_diff(net(x), net->forward(x)), 0.0);
  // The name drops "Impl", as the built-in layers' (LinearImpl prints as Linear).
  std::ostringstream os;
  os << net;
  EXPECT_EQ(os.str().rfind("Net(\n  (block): Gated(\n    (fc): Linear(in_features=3", 0), 0u) << os.str();
  EXPECT_EQ(net->block->name(), "Gated");
}

TEST(ModuleHolder, RegisterReturnsAHolderSharingTheModule) {
  Generator gen(3);
  nn::Module parent;
  nn::Linear fc = parent.register_module("fc", nn::Linear(2, 2, gen));
  EXPECT_EQ(parent.named_children().at(0).second.get(), fc.get());
  // A copy is another handle to the same module, as a Python reference.
  nn::Linear alias = fc;
  EXPECT_EQ(alias.get(), fc.get());
  EXPECT_EQ(alias->weight.impl(), fc->weight.impl());
  // shared_ptrs still register, and a holder goes where a shared_ptr is expected.
  auto raw = parent.register_module("raw", std::make_shared<nn::LinearImpl>(2, 1, gen));
  nn::Linear wrapped = raw;
  EXPECT_EQ(wrapped.get(), raw.get());
  std::shared_ptr<nn::Module> base = fc;
  std::shared_ptr<nn::LinearImpl> typed = fc;
  EXPECT_EQ(base.get(), typed.get());
  EXPECT_EQ(fc.ptr().get(), fc.get());
  EXPECT_EQ(&*fc, fc.get());
  // Typed access to container members as holders.
  nn::ModuleList list({nn::Linear(2, 2, gen), nn::ReLU()});
  nn::Linear first = list->get<nn::Linear>(0);
  EXPECT_EQ(first.get(), list[0].get());
  EXPECT_THROW(list->get<nn::Linear>(1), std::invalid_argument);
}

TEST(ModuleHolder, CallRunsForwardHooks) {
  Generator gen(4);
  // A built-in layer: its operator(), which runs the hooks.
  nn::Linear fc(2, 2, gen);
  int calls = 0;
  fc->register_forward_hook([&](const nn::Module&, const std::vector<Tensor>&, const Tensor& out) {
    ++calls;
    return std::optional<Tensor>(out * 0.0);
  });
  const Tensor x = Tensor::uniform({1, 2}, -1, 1, gen);
  EXPECT_EQ(max_abs_diff(fc(x), Tensor::zeros({1, 2})), 0.0);
  EXPECT_EQ(calls, 1);
  (void)fc->forward(x);  // forward() runs none, as PyTorch's
  EXPECT_EQ(calls, 1);

  // A user module without operator(): the holder runs forward between its hooks.
  Gated gated(2, gen);
  std::vector<std::string> seen;
  gated->register_forward_pre_hook([&](const nn::Module& m, const std::vector<Tensor>& in) {
    seen.push_back("pre " + m.name() + " " + std::to_string(in.size()));
    return std::optional<std::vector<Tensor>>(std::vector<Tensor>{in[0] * 0.0});
  });
  gated->register_forward_hook([&](const nn::Module&, const std::vector<Tensor>&, const Tensor& out) {
    seen.push_back("post");
    return std::optional<Tensor>(out + 1.0);
  });
  const Tensor y = gated(x);
  EXPECT_EQ(seen, (std::vector<std::string>{"pre Gated 1", "post"}));
  EXPECT_EQ(max_abs_diff(y, gated->forward(Tensor::zeros({1, 2})) + 1.0), 0.0);
  (void)gated->forward(x);  // forward() itself: no hooks
  EXPECT_EQ(seen.size(), 2u);

  // Several tensor arguments: the hooks see them all, in order.
  Mix mix;
  std::vector<double> firsts;
  mix->register_forward_pre_hook([&](const nn::Module&, const std::vector<Tensor>& in) {
    for (const Tensor& t : in) firsts.push_back(t.item());
    return std::optional<std::vector<Tensor>>(std::vector<Tensor>{in[1], in[0]});  // swapped
  });
  EXPECT_EQ(mix(Tensor::scalar(1.0), Tensor::scalar(10.0)).item(), 21.0);  // 10 * 2 + 1
  EXPECT_EQ(firsts, (std::vector<double>{1.0, 10.0}));
}

TEST(ModuleHolder, TrainEvalAndApplyReachEveryModuleThroughHolders) {
  Generator gen(5);
  // A user module holding a ModuleList that holds a Sequential with a Dropout.
  Net net(gen);
  nn::ModuleList blocks = net->register_module("blocks", nn::ModuleList());
  nn::Dropout drop(0.5);
  blocks->push_back(nn::Sequential(nn::Linear(3, 3, gen), drop));
  auto modes = [&] {
    std::vector<bool> out;
    net->apply([&](nn::Module& m) { out.push_back(m.is_training()); });
    return out;
  };
  const std::size_t count = net->modules().size();
  EXPECT_EQ(count, 9u);  // net, block, fc, gate, head, blocks, the Sequential, its Linear, the Dropout
  EXPECT_EQ(modes(), std::vector<bool>(count, true));
  net->eval();
  EXPECT_EQ(modes(), std::vector<bool>(count, false));
  EXPECT_FALSE(drop->is_training());
  blocks->train();  // a subtree only
  EXPECT_FALSE(net->is_training());
  EXPECT_TRUE(drop->is_training());
  net->train();
  EXPECT_EQ(modes(), std::vector<bool>(count, true));
}

TEST(ModuleHolder, ModuleWithoutDefaultConstructorNeedsNullptr) {
  static_assert(std::is_constructible_v<nn::Linear, std::nullptr_t>);
  static_assert(std::is_convertible_v<nn::Linear, std::shared_ptr<nn::Module>>);
  static_assert(!std::is_convertible_v<nn::Linear, std::shared_ptr<nn::ReLUImpl>>);
  static_assert(nn::ModuleHolderType<nn::Linear> && !nn::ModuleHolderType<std::shared_ptr<nn::LinearImpl>>);
  nn::ReLU empty = nullptr;
  EXPECT_TRUE(empty.is_empty());
  // Transformer keeps its static helper on the holder, as torch's nn.Transformer.
  EXPECT_EQ(nn::Transformer::generate_square_subsequent_mask(2).shape(), (Shape{2, 2}));
}

}  // namespace
