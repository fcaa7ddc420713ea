// tg::nn::gradcheck: a per-parameter float64 gradient check of a whole module.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "autograd/function.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/random.h"
#include "nn/gradcheck.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "nn/transformer.h"

#include "../autograd/error_of.h"

using namespace tg;

namespace {

// x * w with a backward that is wrong by a factor of 2 for w only.
struct BadScale : autograd::Function<BadScale> {
  static Tensor forward(autograd::AutogradContext& ctx, const Tensor& x, const Tensor& w) {
    ctx.save_for_backward({x, w});
    return x * w;
  }
  static autograd::tensor_list backward(autograd::AutogradContext& ctx, autograd::tensor_list g) {
    const auto s = ctx.get_saved_variables();
    return {g[0] * s[1], sum(g[0] * s[0], {0}) * 2.0};
  }
};

class TwoLayers : public nn::Module {
 public:
  explicit TwoLayers(Generator& gen) {
    fc = register_module("fc", nn::Linear(3, 4, gen));
    scale = register_parameter("scale", Tensor::uniform({4}, 0.5, 1.5, gen));
  }
  Tensor forward(const Tensor& x) { return BadScale::apply(tanh(fc->forward(x)), scale); }
  nn::Linear fc{nullptr};
  Tensor scale;
};

}  // namespace

TEST(ModuleGradcheck, PassesForALayerAndReportsEveryTensor) {
  Generator gen(1);
  nn::LayerNorm norm(Shape{5});
  norm->to(DType::f64);
  const Tensor x = Tensor::uniform({3, 5}, -1, 1, gen, DType::f64);
  const nn::ModuleGradcheckReport r = nn::gradcheck(norm, {x});
  EXPECT_TRUE(r.ok) << r;
  ASSERT_EQ(r.tensors.size(), 3u);
  EXPECT_EQ(r.tensors[0].name, "weight");
  EXPECT_EQ(r.tensors[1].name, "bias");
  EXPECT_EQ(r.tensors[2].name, "input 0");
  EXPECT_EQ(r.tensors[2].checked, 15);
  for (const auto& t : r.tensors) {
    EXPECT_EQ(t.checked, t.numel);
    EXPECT_LT(t.max_abs_error, 1e-6);
  }
  EXPECT_NE(r.str().find("3 tensors, 25 entries checked, all passed"), std::string::npos) << r;
}

TEST(ModuleGradcheck, FailsOnlyOnTheWrongParameter) {
  Generator gen(2);
  TwoLayers m(gen);
  m.to(DType::f64);
  const Tensor x = Tensor::uniform({2, 3}, -1, 1, gen, DType::f64);
  const nn::ModuleGradcheckReport r = nn::gradcheck(m, {x});
  EXPECT_FALSE(r.ok);
  // scale, fc.weight, fc.bias, then the input.
  ASSERT_EQ(m.named_parameters().size(), 3u);
  ASSERT_EQ(r.tensors.size(), m.named_parameters().size() + 1);
  EXPECT_EQ(r.tensors.back().name, "input 0");
  for (const auto& t : r.tensors) EXPECT_EQ(t.ok, t.name != "scale") << t.name;
  const auto& bad = r.tensors[0];  // own parameters come first in named_parameters()
  ASSERT_EQ(bad.name, "scale");
  EXPECT_NEAR(bad.analytic, 2 * bad.numeric, 1e-6);
  EXPECT_NE(r.str().find("FAIL"), std::string::npos);
  EXPECT_NE(r.str().find("1 failed"), std::string::npos) << r;
}

TEST(ModuleGradcheck, SubsamplesWithAFixedSeedAndRestoresGradients) {
  Generator gen(3);
  nn::Linear lin(6, 5, gen);
  lin->to(DType::f64);
  const Tensor x = Tensor::uniform({4, 6}, -1, 1, gen, DType::f64);
  Tensor marker = Tensor::full({5, 6}, 7.0, DType::f64);
  lin->weight.set_grad(marker);
  nn::ModuleGradcheckOptions opt;
  opt.max_entries = 4;
  const auto a = nn::gradcheck(lin, {x}, opt);
  const auto b = nn::gradcheck(lin, {x}, opt);
  EXPECT_TRUE(a.ok) << a;
  // weight, bias, input 0 (every one larger than 4 entries).
  ASSERT_EQ(a.tensors.size(), lin->named_parameters().size() + 1);
  ASSERT_EQ(b.tensors.size(), a.tensors.size());
  for (std::size_t k = 0; k < a.tensors.size(); ++k) {
    EXPECT_EQ(a.tensors[k].checked, 4);
    EXPECT_EQ(a.tensors[k].max_abs_error, b.tensors[k].max_abs_error);  // same entries
    EXPECT_EQ(a.tensors[k].worst_element, b.tensors[k].worst_element) << a.tensors[k].name;
  }
  EXPECT_EQ(lin->weight.grad().to_vector<double>(), marker.to_vector<double>());
  EXPECT_FALSE(lin->bias.grad().defined());
}

TEST(ModuleGradcheck, ArbitraryForwardAndMultiTensorForward) {
  Generator gen(4);
  nn::TransformerEncoderLayer layer({.d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0}, gen);
  layer->to(DType::f64);
  const Tensor src = Tensor::uniform({3, 2, 4}, -1, 1, gen, DType::f64);
  nn::ModuleGradcheckOptions opt;
  opt.max_entries = 6;
  const auto r = nn::gradcheck(layer, {src}, opt);
  EXPECT_TRUE(r.ok) << r;
  EXPECT_EQ(r.tensors.size(), layer->named_parameters().size() + 1);
  const auto s = nn::gradcheck(layer, [&](const std::vector<Tensor>& in) { return sum(layer->forward(in[0])); }, {src}, opt);
  EXPECT_TRUE(s.ok) << s;

  // Two tensors: forward(tgt, memory) of a decoder layer; both inputs are checked, after the parameters.
  // (gelu: no kink for the finite differences to straddle.)
  nn::TransformerDecoderLayer dec({.d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0,
                                   .activation = nn::TransformerActivation::gelu},
                                  gen);
  dec->to(DType::f64);
  const Tensor tgt = Tensor::uniform({2, 2, 4}, -1, 1, gen, DType::f64);
  const Tensor memory = Tensor::uniform({3, 2, 4}, -1, 1, gen, DType::f64);
  const auto d = nn::gradcheck(dec, {tgt, memory}, opt);
  EXPECT_TRUE(d.ok) << d;
  ASSERT_EQ(d.tensors.size(), dec->named_parameters().size() + 2);
  EXPECT_EQ(d.tensors[d.tensors.size() - 2].name, "input 0");
  EXPECT_EQ(d.tensors.back().name, "input 1");
  EXPECT_EQ(d.tensors.back().numel, memory.numel());
  EXPECT_EQ(d.tensors.back().checked, 6);

  // Four tensors: the wrapper calls forward with one to three only.
  const Tensor tgt_mask = Tensor::zeros({2, 2}, DType::f64), memory_mask = Tensor::zeros({2, 3}, DType::f64);
  EXPECT_EQ(tg::testing::error_of<std::invalid_argument>([&] { nn::gradcheck(dec, {tgt, memory, tgt_mask, memory_mask}, opt); }),
            "nn::gradcheck: TransformerDecoderLayer::forward does not take 4 tensors returning a Tensor; pass a function");
}

TEST(ModuleGradcheck, Float32ParameterIsRefused) {
  Generator gen(5);
  nn::Linear lin(2, 2, gen);
  try {
    nn::gradcheck(lin, {Tensor::zeros({1, 2}, DType::f64)});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "nn::gradcheck: parameter 'weight' is float32; convert the module with to(DType::f64) first");
  }
}
