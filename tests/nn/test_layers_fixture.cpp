// Agreement with PyTorch 1.13 on values saved by tests/data/make_layers_fixture.py (float64): a
// Sequential of Linear, LayerNorm and every activation module, loaded from torch's state_dict keys,
// and a LayerNorm over two dimensions. PyTorch is not needed to run this test.
//
// Tolerance as tests/nn/test_torch_fixture.cpp: |ours - torch| <= 1e-12 + 1e-12 |torch| per element
// (both sides compute in float64; each test prints its maximum absolute error).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tensor.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "nn/serialize.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Tensor;
using tg::nn::NamedTensors;

constexpr double kTol = 1e-12;

class LayersFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (auto& [name, t] : tg::nn::load_npz(TG_TEST_DATA_DIR "/torch_layers_fixture.npz")) data().emplace(name, t);
  }
  static std::map<std::string, Tensor>& data() {
    static std::map<std::string, Tensor> d;
    return d;
  }
  void TearDown() override {
    std::cout << "[ fixture  ] " << ::testing::UnitTest::GetInstance()->current_test_info()->name()
              << ": max abs error vs PyTorch " << max_err_ << " over " << compared_ << " values\n";
  }
  static const Tensor& get(const std::string& key) {
    auto it = data().find(key);
    if (it == data().end()) throw std::out_of_range("torch_layers_fixture.npz has no '" + key + "'");
    return it->second;
  }
  /// The entries "<prefix>state.<name>" with "<prefix>state." stripped, in file order (torch's state_dict).
  static NamedTensors state_of(const std::string& prefix) {
    const std::string p = prefix + "state.";
    NamedTensors out;
    for (const auto& [n, t] : tg::nn::load_npz(TG_TEST_DATA_DIR "/torch_layers_fixture.npz"))
      if (n.rfind(p, 0) == 0) out.emplace_back(n.substr(p.size()), t);
    return out;
  }
  void expect_close(const Tensor& got, const std::string& key) {
    const Tensor& want = get(key);
    ASSERT_TRUE(got.defined()) << key;
    ASSERT_EQ(got.shape(), want.shape()) << key;
    const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double err = std::abs(g[i] - w[i]);
      max_err_ = std::max(max_err_, err);
      EXPECT_LE(err, kTol + kTol * std::abs(w[i])) << key << "[" << i << "]: " << g[i] << " vs torch " << w[i];
    }
    compared_ += static_cast<std::int64_t>(g.size());
  }
  /// Loads torch's state_dict into `m` (names checked both ways), runs it, and compares the output
  /// and the gradients of sum(out * r) w.r.t. the input and every parameter.
  template <class M>
  void check(const M& m, const std::string& prefix) {
    m->to(DType::f64);
    const NamedTensors state = state_of(prefix);
    std::vector<std::string> ours, theirs;
    for (const auto& [n, _] : m->named_parameters()) ours.push_back(n);
    for (const auto& [n, _] : state) theirs.push_back(n);
    ASSERT_EQ(ours, theirs);  // np.savez keeps the state_dict's order, so the order is checked too
    m->load_state_dict(state);
    const Tensor x = get(prefix + "input").detach().clone().requires_grad_();
    const Tensor out = m->forward(x);
    tg::sum(out * get(prefix + "r")).backward();
    expect_close(out, prefix + "out");
    expect_close(x.grad(), prefix + "grad.input");
    for (const auto& [n, p] : m->named_parameters()) expect_close(p.grad(), prefix + "grad." + n);
  }

  double max_err_ = 0;
  std::int64_t compared_ = 0;
};

TEST_F(LayersFixture, SequentialOfLinearLayerNormAndActivations) {
  using namespace tg::nn;
  Generator gen(0);
  Sequential seq(Linear(4, 6, gen), LayerNorm(6), ReLU(),
                 Linear(6, 6, gen), GELU(), Linear(6, 6, gen),
                 GELU(tg::GeluApproximate::tanh), SiLU(),
                 Linear(6, 5, gen), Tanh(), Linear(5, 3, gen),
                 Sigmoid());
  check(seq, "seq.");
}

TEST_F(LayersFixture, LayerNormOverTwoDims) {
  tg::nn::LayerNorm ln(tg::Shape{2, 3}, 1e-3);
  check(ln, "ln2.");
}

}  // namespace
