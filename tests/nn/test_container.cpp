// Sequential, ModuleList, ModuleDict: PyTorch's parameter names and order, forward chaining,
// indexing errors, printing, .npz round trip, float64 gradcheck of a Sequential.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/ops_elementwise.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "layer_test_util.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/linear.h"

namespace {

namespace fs = std::filesystem;
using tg::DType;
using tg::Generator;
using tg::Tensor;
using tg::nn::Dropout;
using tg::nn::Linear;
using tg::nn::Module;
using tg::nn::ModuleDict;
using tg::nn::ModuleList;
using tg::nn::ReLU;
using tg::nn::Sequential;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::max_abs_diff;
using tg::nn::testing::parameter_inputs;

std::vector<std::string> names_and_shapes(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, p] : m.named_parameters()) out.push_back(n + " " + p.shape().str());
  return out;
}

// A PyTorch-style model holding containers: keys as torch's state_dict of
//   self.layers = ModuleList([Linear(4, 4), Linear(4, 4)]); self.heads = ModuleDict({...})
class Stack : public Module {
 public:
  explicit Stack(Generator& gen) {
    layers = register_module("layers", ModuleList());
    for (int i = 0; i < 2; ++i) layers->push_back(Linear(4, 4, gen));
    heads = register_module("heads", ModuleDict());
    heads->insert("tag", Linear(4, 3, gen));
    heads->insert("act", ReLU());
    heads->insert("len", Linear(4, 1, gen, false));
  }
  ModuleList layers{nullptr};
  ModuleDict heads{nullptr};
};

TEST(Container, SequentialNamesOrderAndForward) {
  Generator gen(0);
  Sequential seq(Linear(3, 5, gen), ReLU(), Linear(5, 2, gen));
  EXPECT_EQ(names_and_shapes(*seq),
            (std::vector<std::string>{"0.weight [5, 3]", "0.bias [5]", "2.weight [2, 5]", "2.bias [2]"}));
  ASSERT_EQ(seq->size(), 3u);
  const Tensor x = Tensor::uniform({4, 3}, -1, 1, gen);
  auto fc0 = seq->get<Linear>(0), fc2 = seq->get<Linear>(-1);
  const Tensor expected = fc2->forward(tg::relu(fc0->forward(x)));
  EXPECT_EQ(max_abs_diff(seq->forward(x), expected), 0.0);
  EXPECT_EQ(seq[1]->name(), "ReLU");
  EXPECT_THROW(seq->get<Linear>(1), std::invalid_argument);
  EXPECT_EQ(seq->str(),
            "Sequential(\n"
            "  (0): Linear(in_features=3, out_features=5, bias=true)\n"
            "  (1): ReLU()\n"
            "  (2): Linear(in_features=5, out_features=2, bias=true)\n"
            ")");
  // Empty: the identity, as PyTorch.
  Sequential empty;
  EXPECT_EQ(max_abs_diff(empty->forward(x), x), 0.0);
  // Nested Sequential and append; train/eval reach the members.
  Sequential outer;
  auto inner = outer->append(Sequential(Linear(3, 3, gen)));
  auto drop = outer->push_back(Dropout(0.5));
  EXPECT_EQ(names_and_shapes(*outer), (std::vector<std::string>{"0.0.weight [3, 3]", "0.0.bias [3]"}));
  outer->eval();
  EXPECT_FALSE(drop->is_training());
  EXPECT_EQ(max_abs_diff(outer->forward(x), inner->forward(x)), 0.0);
}

TEST(Container, SequentialGradcheckWrtInputAndParameters) {
  Generator gen(1);
  Sequential seq(Linear(3, 4, gen), tg::nn::Tanh(), Linear(4, 2, gen));
  seq->to(DType::f64);
  std::vector<Tensor> inputs{tg::testing::rand64({2, 3}, gen)};
  for (const Tensor& p : parameter_inputs(seq)) inputs.push_back(p);
  ASSERT_EQ(inputs.size(), 5u);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(seq, xs, 1);
        return seq->forward(xs[0]);
      },
      inputs);
}

TEST(Container, ModuleListAndModuleDictNames) {
  Generator gen(2);
  Stack m(gen);
  EXPECT_EQ(names_and_shapes(m),
            (std::vector<std::string>{"layers.0.weight [4, 4]", "layers.0.bias [4]", "layers.1.weight [4, 4]",
                                      "layers.1.bias [4]", "heads.tag.weight [3, 4]", "heads.tag.bias [3]",
                                      "heads.len.weight [1, 4]"}));
  ASSERT_EQ(m.layers->size(), 2u);
  int visited = 0;
  for (const auto& layer : *m.layers) {
    EXPECT_EQ(layer->name(), "Linear");
    ++visited;
  }
  EXPECT_EQ(visited, 2);
  EXPECT_EQ(m.layers->get<Linear>(-2).get(), (*m.layers)[0].get());
  EXPECT_EQ(m.heads->keys(), (std::vector<std::string>{"tag", "act", "len"}));
  EXPECT_TRUE(m.heads->contains("act"));
  EXPECT_FALSE(m.heads->contains("nope"));
  EXPECT_EQ(m.heads->get<Linear>("tag")->out_features(), 3);

  // Replacing a key keeps its place (PyTorch's md[key] = module).
  m.heads->insert("tag", Linear(4, 5, gen));
  EXPECT_EQ(m.heads->keys(), (std::vector<std::string>{"tag", "act", "len"}));
  EXPECT_EQ(m.parameter("heads.tag.weight").shape(), (tg::Shape{5, 4}));
  auto named = m.named_modules();
  ASSERT_EQ(named.size(), 8u);  // "", layers, layers.0, layers.1, heads, heads.tag, heads.act, heads.len
  EXPECT_EQ(named[2].first, "layers.0");
  EXPECT_EQ(named[7].first, "heads.len");
}

TEST(Container, ClearErrors) {
  Generator gen(3);
  ModuleList list;
  list->push_back(ReLU());
  try {
    (void)list[3];
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "ModuleList: index 3 is out of range for size 1");
  }
  EXPECT_THROW((void)list[-2], std::out_of_range);
  EXPECT_EQ(list[-1].get(), list[0].get());
  try {
    list->get<Linear>(0);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "ModuleList: member '0' is a ReLU");
  }
  EXPECT_THROW(list->push_back(Linear(nullptr)), std::invalid_argument);
  Sequential seq;
  EXPECT_THROW((void)seq[0], std::out_of_range);
  ModuleDict dict;
  dict->insert("a", ReLU());
  try {
    (void)dict["b"];
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "ModuleDict: no key 'b' (keys: a)");
  }
  // One module under two keys: two entries (torch's len), one child.
  dict->insert("b", dict["a"]);
  EXPECT_EQ(dict->size(), 2u);
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(dict->contains("b"));
  EXPECT_EQ(dict->named_children().size(), 1u);
  EXPECT_THROW(dict->insert("x.y", ReLU()), std::invalid_argument);
  EXPECT_THROW(dict->insert("", ReLU()), std::invalid_argument);
}

TEST(Container, StateDictRoundTripThroughNpz) {
  Generator gen(4);
  Stack a(gen), b(gen);
  const fs::path path = fs::temp_directory_path() / ("tg_nn_container_" + std::to_string(::getpid()) + ".npz");
  a.save(path.string());
  b.load(path.string());
  fs::remove(path);
  const auto sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_EQ(max_abs_diff(sa[i].second, sb[i].second), 0.0) << sa[i].first;
  }
  // A checkpoint of a different structure is refused with the names.
  Generator gen2(5);
  Sequential other(Linear(4, 4, gen2));
  try {
    other->load_state_dict(a.state_dict());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.0.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
