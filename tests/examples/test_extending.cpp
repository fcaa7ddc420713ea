// The worked examples of docs/extending.md, compiled and run: a `stable_softplus` op and a `Highway`
// layer with their tests. Every ```cpp block of the document is a verbatim part of this file (the
// last test checks it), so the document cannot drift away from code that builds and passes.
//
// In the tree the op would live in namespace tg (autograd/ops.h, autograd/ops_elementwise.cpp) and
// the layer in tg::nn (nn/highway.h, nn/highway.cpp). Here they sit one namespace deeper; name
// lookup finds everything else (Tensor, record, Module, Linear, ...) exactly as it would in the
// tree. The op needs a name tg does not use (not `softplus`): argument-dependent lookup on its
// Tensor argument would find tg::softplus as well and make the call ambiguous.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../nn/layer_test_util.h"  // bind_parameters, parameter_inputs (and rand64, EXPECT_GRADCHECK)
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
#include "child_process.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"

using tg::testing::rand64;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::parameter_inputs;

// ================================ an op: stable_softplus =========================================
namespace tg::docs_example {

/// log(1 + exp(x)) elementwise, without overflow for large |x|. Its derivative is sigmoid(x).
Tensor stable_softplus(const Tensor& x);

namespace {
// The forward kernel: a plain loop over the contiguous elements, written once for float and
// double. max(x, 0) + log1p(exp(-|x|)) equals log(1 + exp(x)) but never overflows.
template <class T>
void softplus_kernel(const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], T(0)) + std::log1p(std::exp(-std::abs(x[i])));
}
}  // namespace

Tensor stable_softplus(const Tensor& x) {
  // 1. Validate: a user error throws std::invalid_argument naming the op.
  if (!is_floating(x.dtype()))
    throw std::invalid_argument("stable_softplus: expects a floating-point tensor, got " + std::string(dtype_name(x.dtype())));
  // 2. Forward into a fresh output (empty(): the kernel writes every element).
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  if (x.dtype() == DType::f32)
    softplus_kernel(x.data<float>(), y.data<float>(), x.numel());
  else
    softplus_kernel(x.data<double>(), y.data<double>(), x.numel());
  // 3. Record it, the backward beside the forward: dL/dx = dL/dy * sigmoid(x). The closure captures
  //    x detached (its values, not its graph). Backward runs with recording off, so the ops used
  //    in it (*, sigmoid) are plain computations. The second closure is the same formula on graph
  //    tensors, run only by a backward with create_graph (recording on): it captures x itself, so
  //    the gradient it delivers stays connected to x and can be differentiated again.
  return record(
      "stable_softplus", y, {x},
      [x = x.detach()](BackwardContext& ctx) { ctx.accumulate(0, ctx.grad_output() * sigmoid(x)); },
      [x](GradGraphContext& ctx) { ctx.accumulate(0, ctx.grad_output() * sigmoid(x)); });
}

TEST(Softplus, Values) {
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = Tensor::from_values({-1000, -2, 0, 0.5, 30, 1000}, {2, 3}, dt);
    const std::vector<double> y = stable_softplus(x).to_vector<double>();
    const std::vector<double> want = {0, std::log1p(std::exp(-2.0)), std::log(2.0), std::log1p(std::exp(0.5)),
                                      30 + std::log1p(std::exp(-30.0)), 1000};
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-6 * (1 + std::abs(want[i])));
  }
  EXPECT_THROW(stable_softplus(Tensor::zeros({2}, DType::i64)), std::invalid_argument);
}

TEST(Softplus, Gradcheck) {
  Generator gen(0);
  // Several shapes, including size-1 dims and a 0-dim tensor.
  for (const Shape& s : {Shape{5}, Shape{2, 1, 3}, Shape{}}) {
    SCOPED_TRACE(s.str());
    EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return stable_softplus(in[0] * 3.0); }, {rand64(s, gen)});
  }
  // Inside a broadcasting expression: the gradient of the (4) input is summed over the rows.
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return stable_softplus(in[0] - in[1]) * in[1]; },
                   {rand64({3, 4}, gen), rand64({4}, gen)});
  // Masked outputs get no gradient; the mask (i64) is passed through, not perturbed.
  const Tensor mask = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 0, 0, 1, 1}, {2, 3});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return masked_fill(stable_softplus(in[0]), in[1], 0.0); },
                   {rand64({2, 3}, gen), mask});
}

TEST(Softplus, MatchesTheCompositeOp) {
  Generator gen(1);
  Tensor x = rand64({4, 5}, gen, -5.0, 5.0);
  const Tensor seed = Tensor::uniform({4, 5}, -1, 1, gen, DType::f64);
  stable_softplus(x).backward(seed);
  const Tensor fused_grad = x.grad();
  x.zero_grad();
  const Tensor composite = log(exp(x) + 1.0);
  composite.backward(seed);
  const std::vector<double> a = stable_softplus(x).to_vector<double>(), b = composite.to_vector<double>();
  const std::vector<double> ga = fused_grad.to_vector<double>(), gb = x.grad().to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-12);
    EXPECT_NEAR(ga[i], gb[i], 1e-12);
  }
}

TEST(Softplus, Gradgradcheck) {
  Generator gen(2);
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& in) { return stable_softplus(in[0] * 3.0); },
                            {rand64({2, 3}, gen)}));
  // With create_graph, the gradient is itself differentiable: d/dx sigmoid(x) = sigmoid'(x).
  const Tensor x = rand64({4}, gen);
  const Tensor g = grad({sum(stable_softplus(x))}, {x}, {}, {.create_graph = true})[0];
  ASSERT_TRUE(g.requires_grad());
  const Tensor gg = grad({sum(g)}, {x})[0];
  const std::vector<double> xs = x.to_vector<double>(), got = gg.to_vector<double>();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double s = 1.0 / (1.0 + std::exp(-xs[i]));
    EXPECT_NEAR(got[i], s * (1.0 - s), 1e-12) << i;
  }
}

}  // namespace tg::docs_example

// ================================ a layer: Highway ===============================================
namespace tg::nn::docs_example {

/// Highway layer (Srivastava et al., 2015): y = t * relu(W_h x + b_h) + (1 - t) * x with the
/// transform gate t = sigmoid(W_t x + b_t). Children "proj" (W_h, b_h) and "gate" (W_t, b_t), each
/// Linear(size, size) initialised as torch.nn.Linear from `gen` (proj first); the gate bias is then
/// set to `gate_bias` (negative: the layer starts close to the identity, so deep stacks train).
class Highway : public Module {
 public:
  Highway(std::int64_t size, Generator& gen, double gate_bias = -1.0);

  /// x (..., size) -> (..., size).
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const {
    return with_forward_hooks(x, [this](const Tensor& v) { return forward(v); });
  }
  std::string extra_repr() const override;

  Linear proj{nullptr}, gate{nullptr};

 private:
  std::int64_t size_;
};

Highway::Highway(std::int64_t size, Generator& gen, double gate_bias) : size_(size) {
  // Registration order is state_dict order: proj.weight, proj.bias, gate.weight, gate.bias.
  proj = register_module("proj", Linear(size, size, gen));  // throws for size <= 0
  gate = register_module("gate", Linear(size, size, gen));
  init::constant_(gate->bias, gate_bias);
}

Tensor Highway::forward(const Tensor& x) const {
  const Tensor t = sigmoid(gate->forward(x));  // Linear::forward checks the last dimension
  return t * relu(proj->forward(x)) + (1.0 - t) * x;
}

std::string Highway::extra_repr() const { return "size=" + std::to_string(size_); }

TEST(Highway, NamesShapesAndInit) {
  Generator gen(0);
  Highway layer(8, gen);
  std::vector<std::string> names;
  for (const auto& [name, p] : layer.named_parameters()) names.push_back(name + " " + p.shape().str());
  EXPECT_EQ(names, (std::vector<std::string>{"proj.weight [8, 8]", "proj.bias [8]", "gate.weight [8, 8]",
                                             "gate.bias [8]"}));
  for (double b : layer.gate->bias.to_vector<double>()) EXPECT_EQ(b, -1.0);
  EXPECT_EQ(layer.str().rfind("Highway(\n  size=8\n  (proj): Linear(in_features=8", 0), 0u) << layer.str();
  EXPECT_THROW(Highway(0, gen), std::invalid_argument);
  EXPECT_THROW(layer.forward(Tensor::zeros({2, 7})), std::invalid_argument);
}

TEST(Highway, ValueMatchesTheFormula) {
  Generator gen(1);
  Highway layer(3, gen, 0.5);
  const Tensor x = Tensor::uniform({2, 3}, -1, 1, gen);
  const Tensor y = layer.forward(x);
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t o = 0; o < 3; ++o) {
      double h = layer.proj->bias.at({o}), t = layer.gate->bias.at({o});
      for (std::int64_t k = 0; k < 3; ++k) {
        h += layer.proj->weight.at({o, k}) * x.at({i, k});
        t += layer.gate->weight.at({o, k}) * x.at({i, k});
      }
      t = 1 / (1 + std::exp(-t));
      EXPECT_NEAR(y.at({i, o}), t * std::max(h, 0.0) + (1 - t) * x.at({i, o}), 1e-6);
    }
}

TEST(Highway, ForwardHooksRunWhenTheLayerIsCalled) {
  Generator gen(3);
  Highway layer(3, gen);
  int calls = 0;
  layer.register_forward_hook([&](const Module&, const std::vector<Tensor>&, const Tensor& out) {
    ++calls;
    return out * 2.0;  // a hook's tensor replaces the output, as PyTorch's
  });
  const Tensor x = Tensor::uniform({2, 3}, -1, 1, gen);
  const Tensor called = layer(x);
  EXPECT_EQ(calls, 1);
  const Tensor plain = layer.forward(x);  // forward() itself runs no hook
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(called.to_vector<float>(), (plain * 2.0).to_vector<float>());
}

TEST(Highway, GradcheckWrtInputAndParameters) {
  Generator gen(2);
  Highway layer(3, gen, 0.0);
  layer.to(DType::f64);  // gradcheck runs in float64
  std::vector<Tensor> inputs{rand64({2, 4, 3}, gen)};                       // xs[0]: the input
  for (const Tensor& p : parameter_inputs(layer)) inputs.push_back(p);  // xs[1..4]: the parameters
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(layer, xs, 1);  // the layer's parameters now alias xs[1], xs[2], ...
        return layer.forward(xs[0]);
      },
      inputs);
}

}  // namespace tg::nn::docs_example

// ================================ the document matches this file =================================
namespace {

using tg::testing::read_file;

TEST(ExtendingDoc, EveryCodeBlockIsPartOfThisFile) {
  const std::string doc = read_file(TG_SOURCE_DIR "/docs/extending.md");
  const std::string self = read_file(TG_SOURCE_DIR "/tests/examples/test_extending.cpp");
  ASSERT_FALSE(doc.empty());
  ASSERT_FALSE(self.empty());
  int blocks = 0;
  const std::string open = "```cpp\n";
  for (std::size_t pos = doc.find(open); pos != std::string::npos; pos = doc.find(open, pos)) {
    const std::size_t start = pos + open.size(), end = doc.find("```", start);
    ASSERT_NE(end, std::string::npos) << "unterminated code block";
    const std::string code = doc.substr(start, end - start);
    EXPECT_NE(self.find(code), std::string::npos) << "a block of docs/extending.md is not in this file:\n" << code;
    ++blocks;
    pos = end + 3;
  }
  EXPECT_GE(blocks, 6);  // declaration, op, op tests, class, definitions, layer tests
}

}  // namespace
