// Module: registry, hierarchical names, modes, dtype conversion, printout.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_reduce.h"
#include "autograd/random.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/utils.h"
#include "test_modules.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Tensor;
using tg::nn::Module;
using tg::nn::testing::Linear;
using tg::nn::testing::Mlp;

class Embedding : public Module {
 public:
  Embedding(std::int64_t n, std::int64_t d, Generator& gen) {
    weight = register_parameter("weight", Tensor::normal({n, d}, 0, 1, gen));
  }
  std::string extra_repr() const override {
    return std::to_string(weight.size(0)) + ", " + std::to_string(weight.size(1));
  }
  Tensor weight;
};

class Rnn : public Module {
 public:
  Rnn(std::int64_t in, std::int64_t hidden, Generator& gen) {
    register_parameter("weight_ih_l0", Tensor::uniform({3 * hidden, in}, -0.5, 0.5, gen));
    register_parameter("weight_hh_l0", Tensor::uniform({3 * hidden, hidden}, -0.5, 0.5, gen));
    register_parameter("bias_ih_l0", Tensor::zeros({3 * hidden}));
  }
  std::string extra_repr() const override { return "input_size=4, hidden_size=4"; }
};

class Encoder : public Module {
 public:
  explicit Encoder(Generator& gen) {
    embedding = register_module("embedding", std::make_shared<Embedding>(10, 4, gen));
    rnn = register_module("rnn", std::make_shared<Rnn>(4, 4, gen));
  }
  std::shared_ptr<Embedding> embedding;
  std::shared_ptr<Rnn> rnn;
};

class Decoder : public Module {
 public:
  explicit Decoder(Generator& gen) {
    embedding = register_module("embedding", std::make_shared<Embedding>(10, 4, gen));
    rnn = register_module("rnn", std::make_shared<Rnn>(4, 4, gen));
    dense = register_module("dense", std::make_shared<Linear>(4, 10, gen));
  }
  std::shared_ptr<Embedding> embedding;
  std::shared_ptr<Rnn> rnn;
  std::shared_ptr<Linear> dense;
};

class Seq2Seq : public Module {
 public:
  explicit Seq2Seq(Generator& gen) {
    encoder = register_module("encoder", std::make_shared<Encoder>(gen));
    decoder = register_module("decoder", std::make_shared<Decoder>(gen));
  }
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Decoder> decoder;
};

std::vector<std::string> names_of(const tg::nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [n, _] : named) out.push_back(n);
  return out;
}

TEST(Module, HierarchicalNamesInRegistrationOrder) {
  Generator gen(1);
  Seq2Seq model(gen);
  const std::vector<std::string> expected = {
      "encoder.embedding.weight", "encoder.rnn.weight_ih_l0", "encoder.rnn.weight_hh_l0",
      "encoder.rnn.bias_ih_l0",   "decoder.embedding.weight", "decoder.rnn.weight_ih_l0",
      "decoder.rnn.weight_hh_l0", "decoder.rnn.bias_ih_l0",   "decoder.dense.weight",
      "decoder.dense.bias"};
  EXPECT_EQ(names_of(model.named_parameters()), expected);
  EXPECT_EQ(model.parameters().size(), expected.size());
  EXPECT_TRUE(model.named_parameters(/*recurse=*/false).empty());
  // The typed pointer returned by register_module is the registered child; handles are shared.
  EXPECT_TRUE(model.parameter("decoder.dense.weight").shares_storage(model.decoder->dense->weight));
  EXPECT_EQ(model.parameter("decoder.dense.weight").impl(), model.decoder->dense->weight.impl());
  for (const auto& p : model.parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_THROW(model.parameter("decoder.nope"), std::out_of_range);

  std::vector<std::string> modules;
  for (const auto& [n, m] : model.named_modules()) modules.push_back(n + "=" + m->name());
  EXPECT_EQ(modules, (std::vector<std::string>{"=Seq2Seq", "encoder=Encoder", "encoder.embedding=Embedding",
                                               "encoder.rnn=Rnn", "decoder=Decoder", "decoder.embedding=Embedding",
                                               "decoder.rnn=Rnn", "decoder.dense=Linear"}));
  ASSERT_EQ(model.children().size(), 2u);
  EXPECT_EQ(model.named_children()[1].first, "decoder");
  EXPECT_EQ(model.children()[0].get(), model.encoder.get());
}

TEST(Module, OwnParametersComeBeforeChildren) {
  Generator gen(2);
  struct Net : Module {
    explicit Net(Generator& g) {
      register_module("child", std::make_shared<Linear>(2, 3, g));
      register_parameter("scale", Tensor::ones({3}));
    }
  } net(gen);
  EXPECT_EQ(names_of(net.named_parameters()), (std::vector<std::string>{"scale", "child.weight", "child.bias"}));
}

TEST(Module, RejectsBadOrDuplicateNames) {
  Generator gen(3);
  Module m;
  m.register_parameter("w", Tensor::zeros({2}));
  EXPECT_THROW(m.register_parameter("w", Tensor::zeros({2})), std::invalid_argument);
  EXPECT_THROW(m.register_module("w", std::make_shared<Linear>(1, 1, gen)), std::invalid_argument);
  EXPECT_THROW(m.register_parameter("a.b", Tensor::zeros({2})), std::invalid_argument);
  EXPECT_THROW(m.register_parameter("", Tensor::zeros({2})), std::invalid_argument);
  EXPECT_THROW(m.register_module("c", std::shared_ptr<Linear>()), std::invalid_argument);
  // A non-leaf is detached, so the parameter is a leaf the optimizer can update.
  Tensor x = Tensor::ones({2}).requires_grad_();
  Tensor p = m.register_parameter("from_op", tg::mul(x, 2.0));
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
  Tensor frozen = m.register_parameter("frozen", Tensor::zeros({5}), /*requires_grad=*/false);
  EXPECT_FALSE(frozen.requires_grad());
  EXPECT_EQ(m.num_parameters(), 2 + 2 + 5);
  EXPECT_EQ(m.num_parameters(/*trainable_only=*/true), 4);
}

TEST(Module, TrainEvalRecurse) {
  Generator gen(4);
  Seq2Seq model(gen);
  for (const auto& [_, m] : model.named_modules()) EXPECT_TRUE(m->is_training());
  model.eval();
  for (const auto& [n, m] : model.named_modules()) EXPECT_FALSE(m->is_training()) << n;
  model.decoder->train();
  EXPECT_FALSE(model.is_training());
  EXPECT_FALSE(model.encoder->rnn->is_training());
  EXPECT_TRUE(model.decoder->dense->is_training());
  model.train(true);
  for (const auto& [n, m] : model.named_modules()) EXPECT_TRUE(m->is_training()) << n;
}

TEST(Module, ApplyVisitsChildrenBeforeTheirParent) {
  Generator gen(12);
  Seq2Seq model(gen);
  std::vector<std::string> order;
  Module& self = model.apply([&](Module& m) { order.push_back(m.name()); });
  EXPECT_EQ(&self, &model);
  // PyTorch's order: each child's subtree, then the module itself.
  EXPECT_EQ(order, (std::vector<std::string>{"Embedding", "Rnn", "Encoder", "Embedding", "Rnn", "Linear", "Decoder",
                                             "Seq2Seq"}));
  // torch's model.apply(init_weights): zero every Linear's bias.
  model.apply([](Module& m) {
    if (auto* linear = dynamic_cast<Linear*>(&m)) tg::nn::init::zeros_(linear->bias);
  });
  for (float b : model.decoder->dense->bias.to_vector<float>()) EXPECT_EQ(b, 0.0f);
  // modules(): this module first, then named_modules()'s order.
  std::vector<std::string> names;
  for (Module* m : model.modules()) names.push_back(m->name());
  EXPECT_EQ(names, (std::vector<std::string>{"Seq2Seq", "Encoder", "Embedding", "Rnn", "Decoder", "Embedding", "Rnn",
                                             "Linear"}));
  EXPECT_EQ(model.modules().front(), &model);
}

TEST(Module, NumParameters) {
  Generator gen(5);
  Seq2Seq model(gen);
  // embedding 10*4, rnn 12*4 + 12*4 + 12, per side; dense 10*4 + 10.
  const std::int64_t rnn = 12 * 4 + 12 * 4 + 12;
  EXPECT_EQ(model.num_parameters(), 2 * (40 + rnn) + 50);
  Mlp mlp(3, 8, 2, gen);
  EXPECT_EQ(mlp.num_parameters(), 3 * 8 + 8 + 8 * 2 + 2);
}

// A submodule registered twice, or a tensor registered under two names (tied weights), is one
// parameter: named_parameters lists it once (torch's remove_duplicate), so optimizers accept the
// model and clip_grad_norm counts and scales its gradient once; state_dict keeps every name.
class Shared : public Module {
 public:
  explicit Shared(Generator& gen) {
    a = register_module("a", std::make_shared<Linear>(2, 2, gen));
    b = register_module("b", a);
    tied = register_parameter("tied", a->weight);
  }
  std::shared_ptr<Linear> a, b;
  Tensor tied;
};

TEST(Module, SharedParametersAreListedOnceAndSavedUnderEveryName) {
  Generator gen(8);
  Shared m(gen);
  std::vector<std::string> names, keys;
  for (const auto& [n, _] : m.named_parameters()) names.push_back(n);
  for (const auto& [n, _] : m.state_dict()) keys.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"tied", "a.bias"}));
  EXPECT_EQ(keys, (std::vector<std::string>{"tied", "a.weight", "a.bias", "b.weight", "b.bias"}));
  EXPECT_EQ(m.num_parameters(), 6);
  EXPECT_EQ(m.parameters().size(), 2u);
  EXPECT_EQ(m.named_modules().size(), 2u);  // "" and "a"
  // named_children() lists the twice-registered child once (torch's), and apply visits it once.
  ASSERT_EQ(m.named_children().size(), 1u);
  EXPECT_EQ(m.named_children()[0].first, "a");
  EXPECT_EQ(m.children().size(), 1u);
  int visits = 0;
  m.apply([&](Module&) { ++visits; });
  EXPECT_EQ(visits, 2);
  EXPECT_NO_THROW(tg::nn::SGD(m.named_parameters(), tg::nn::SGDOptions(0.1)));
  EXPECT_EQ(m.parameter("b.weight").impl(), m.a->weight.impl());
  // clip_grad_norm sees the shared gradient once: norm of (3, 4) is 5, scaled once to norm 1.
  m.a->weight.set_grad(Tensor::from_values({3, 0, 0, 0}, {2, 2}, DType::f32));
  m.a->bias.set_grad(Tensor::from_values({4, 0}, {2}, DType::f32));
  EXPECT_NEAR(tg::nn::clip_grad_norm(m.parameters(), 1.0), 5.0, 1e-6);
  EXPECT_NEAR(m.a->weight.grad().to_vector<double>()[0], 0.6, 1e-6);
  EXPECT_NEAR(m.a->bias.grad().to_vector<double>()[0], 0.8, 1e-6);
  // Every name of the state_dict loads (as a torch state_dict of a tied model does).
  Shared other(gen);
  other.load_state_dict(m.state_dict());
  EXPECT_EQ(other.a->weight.to_vector<float>(), m.a->weight.to_vector<float>());
}

TEST(Module, ToFloat64ConvertsInPlaceKeepingNamesAndHandles) {
  Generator gen(6);
  Mlp mlp(3, 5, 2, gen);
  const auto before = mlp.named_parameters();
  std::vector<std::vector<float>> values;
  for (const auto& [_, t] : before) values.push_back(t.to_vector<float>());
  Tensor member = mlp.fc1->weight;  // a handle held outside the registry

  Tensor x = Tensor::uniform({4, 3}, -1, 1, gen);
  tg::sum(mlp.forward(x)).backward();
  ASSERT_TRUE(member.grad().defined());

  mlp.to(DType::f64);
  const auto after = mlp.named_parameters();
  ASSERT_EQ(names_of(after), names_of(before));
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].second.dtype(), DType::f64) << after[i].first;
    EXPECT_EQ(after[i].second.impl(), before[i].second.impl()) << "registry entry replaced, not converted";
    EXPECT_TRUE(after[i].second.requires_grad());
    EXPECT_FALSE(after[i].second.grad().defined()) << "stale float32 gradient kept";
    const auto v = after[i].second.to_vector<double>();
    for (std::size_t k = 0; k < v.size(); ++k) EXPECT_EQ(v[k], static_cast<double>(values[i][k]));
  }
  EXPECT_EQ(member.dtype(), DType::f64);
  EXPECT_EQ(mlp.fc1->weight.dtype(), DType::f64);

  // The converted model is differentiable in float64: gradcheck through it.
  auto report = tg::gradcheck([&](const std::vector<Tensor>& in) { return mlp.forward(in[0]); },
                              {Tensor::uniform({2, 3}, -1, 1, gen, DType::f64).requires_grad_()});
  EXPECT_TRUE(report) << report;
  mlp.to(DType::f32);
  EXPECT_EQ(mlp.fc2->bias.dtype(), DType::f32);
  EXPECT_THROW(mlp.to(DType::i64), std::invalid_argument);
}

// A module with buffers, as torch's register_buffer: a running statistic and a step count
// (persistent) and a cache (not persistent), beside a child with parameters.
class WithBuffers : public Module {
 public:
  explicit WithBuffers(Generator& gen) {
    fc = register_module("fc", std::make_shared<Linear>(2, 2, gen));
    stat = register_buffer("stat", Tensor::zeros({2}));
    steps = register_buffer("steps", Tensor::zeros({}, DType::i64));
    cache = register_buffer("cache", Tensor::ones({3}), /*persistent=*/false);
  }
  Tensor forward(const Tensor& x) {
    stat.copy_(stat + 1.0);  // updated in place, as BatchNorm's statistics
    return fc->forward(x) * 2.0;
  }
  std::shared_ptr<Linear> fc;
  Tensor stat, steps, cache;
};

TEST(ModuleBuffers, InStateDictWhenPersistentNeverInParameters) {
  Generator gen(10);
  WithBuffers m(gen);
  EXPECT_EQ(names_of(m.named_parameters()), (std::vector<std::string>{"fc.weight", "fc.bias"}));
  EXPECT_EQ(m.parameters().size(), 2u);
  EXPECT_EQ(m.num_parameters(), 6);
  EXPECT_EQ(names_of(m.named_buffers()), (std::vector<std::string>{"stat", "steps", "cache"}));
  EXPECT_EQ(m.buffers().size(), 3u);
  EXPECT_TRUE(m.named_buffers(/*recurse=*/false).size() == 3u && m.fc->named_buffers().empty());
  // torch's order: a module's parameters, then its persistent buffers, then its children's.
  EXPECT_EQ(names_of(m.state_dict()), (std::vector<std::string>{"stat", "steps", "fc.weight", "fc.bias"}));
  EXPECT_EQ(m.buffer("steps").dtype(), DType::i64);
  EXPECT_EQ(m.buffer("cache").impl(), m.cache.impl());
  EXPECT_THROW(m.buffer("fc.weight"), std::out_of_range);
  EXPECT_THROW(m.parameter("stat"), std::out_of_range);
  // Names are shared with parameters and children; a tensor requiring grad is detached.
  EXPECT_THROW(m.register_buffer("stat", Tensor::zeros({1})), std::invalid_argument);
  EXPECT_THROW(m.register_buffer("fc", Tensor::zeros({1})), std::invalid_argument);
  EXPECT_THROW(m.register_parameter("cache", Tensor::zeros({1})), std::invalid_argument);
  EXPECT_THROW(m.register_buffer("a.b", Tensor::zeros({1})), std::invalid_argument);
  EXPECT_THROW(m.register_buffer("undefined", Tensor()), std::invalid_argument);
  const Tensor w = Tensor::ones({2}).requires_grad_();
  const Tensor b = m.register_buffer("from_leaf", w);
  EXPECT_FALSE(b.requires_grad());
  EXPECT_TRUE(w.requires_grad());
}

TEST(ModuleBuffers, SavedLoadedAndConvertedButNotTrained) {
  Generator gen(11);
  WithBuffers a(gen), b(gen);
  const Tensor x = Tensor::uniform({3, 2}, -1, 1, gen);
  tg::sum(a.forward(x)).backward();
  EXPECT_FALSE(a.stat.grad().defined());  // no gradient reaches a buffer
  tg::nn::SGD opt(a.named_parameters(), tg::nn::SGDOptions(0.1));
  opt.step();
  EXPECT_EQ(a.stat.to_vector<float>(), (std::vector<float>{1, 1}));  // the forward's update only
  a.steps.data<std::int64_t>()[0] = 7;
  a.cache.copy_(Tensor::full({3}, 5.0));
  // A state_dict round trip carries the persistent buffers, not the cache.
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.stat.to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(b.steps.to_vector<std::int64_t>(), std::vector<std::int64_t>{7});
  EXPECT_EQ(b.cache.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  // A file without a persistent buffer is refused with its name; a non-persistent one is unexpected.
  tg::nn::NamedTensors no_stat;
  for (const auto& [n, t] : a.state_dict())
    if (n != "stat") no_stat.emplace_back(n, t);
  no_stat.emplace_back("cache", Tensor::ones({3}));
  try {
    b.load_state_dict(no_stat, "ck.npz");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("stat"), std::string::npos) << what;
    EXPECT_NE(what.find("cache"), std::string::npos) << what;
  }
  // to(): floating buffers follow, in place (the members see it); integer ones stay.
  const Tensor stat_handle = a.stat;
  a.to(DType::f64);
  EXPECT_EQ(stat_handle.dtype(), DType::f64);
  EXPECT_EQ(a.cache.dtype(), DType::f64);
  EXPECT_EQ(a.steps.dtype(), DType::i64);
  EXPECT_EQ(a.stat.to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_FALSE(a.stat.requires_grad());
}

TEST(Module, ZeroGradDropsAllGradients) {
  Generator gen(7);
  Mlp mlp(2, 3, 1, gen);
  tg::sum(mlp.forward(Tensor::ones({1, 2}))).backward();
  for (const auto& p : mlp.parameters()) EXPECT_TRUE(p.grad().defined());
  mlp.zero_grad();
  for (const auto& p : mlp.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, PrintoutIsATreeLikePyTorch) {
  Generator gen(8);
  Seq2Seq model(gen);
  const std::string expected =
      "Seq2Seq(\n"
      "  (encoder): Encoder(\n"
      "    (embedding): Embedding(10, 4)\n"
      "    (rnn): Rnn(input_size=4, hidden_size=4)\n"
      "  )\n"
      "  (decoder): Decoder(\n"
      "    (embedding): Embedding(10, 4)\n"
      "    (rnn): Rnn(input_size=4, hidden_size=4)\n"
      "    (dense): Linear(in_features=4, out_features=10, bias=true)\n"
      "  )\n"
      ")";
  EXPECT_EQ(model.str(), expected);
  std::ostringstream os;
  os << *model.decoder->dense;
  EXPECT_EQ(os.str(), "Linear(in_features=4, out_features=10, bias=true)");
  EXPECT_EQ(Module().str(), "Module()");
}

}  // namespace
