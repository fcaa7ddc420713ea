// Agreement with PyTorch 1.13 on values saved by tests/data/make_torch_fixture.py (float64): GRU and
// LSTM (multi-layer, bidirectional, packed = valid_lens), d2l's AdditiveAttention, and Adam with
// clip_grad_norm_. PyTorch is not needed to run this test.
//
// Tolerance: every element must satisfy |ours - torch| <= 1e-12 + 1e-12 |torch|. Both sides compute in
// float64 and differ only in summation order: the observed errors are at most ~1.5e-15 (each test
// prints its maximum absolute error), so the bound leaves room for a changed kernel, not a wrong one.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "layer_test_util.h"
#include "nn/attention.h"
#include "nn/linear.h"
#include "nn/optim.h"
#include "nn/rnn.h"
#include "nn/serialize.h"
#include "nn/utils.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Tensor;
using tg::nn::NamedTensors;

constexpr double kTol = 1e-12;

class TorchFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (auto& [name, t] : tg::nn::load_npz(TG_TEST_DATA_DIR "/torch_fixture.npz")) data_->emplace(name, t);
  }
  void TearDown() override {
    std::cout << "[ fixture  ] " << ::testing::UnitTest::GetInstance()->current_test_info()->name()
              << ": max abs error vs PyTorch " << max_err_ << " over " << compared_ << " values\n";
  }

  static const Tensor& get(const std::string& key) {
    auto it = data_->find(key);
    if (it == data_->end()) throw std::out_of_range("torch_fixture.npz has no '" + key + "'");
    return it->second;
  }
  /// A fresh float64 leaf requiring grad, holding the fixture's values.
  static Tensor leaf(const std::string& key) { return get(key).detach().clone().requires_grad_(); }
  /// Every entry "<prefix><name>" that is a parameter of `m`, with the prefix stripped.
  static NamedTensors params_of(const tg::nn::Module& m, const std::string& prefix) {
    NamedTensors out;
    for (const auto& [name, _] : m.named_parameters()) out.emplace_back(name, get(prefix + name));
    return out;
  }

  void expect_close(const Tensor& got, const std::string& key) { expect_close(got, get(key), key); }
  void expect_close(const Tensor& got, const Tensor& want, const std::string& key) {
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
  void expect_param_grads(const tg::nn::Module& m, const std::string& prefix) {
    for (const auto& [name, p] : m.named_parameters()) expect_close(p.grad(), prefix + name);
  }

  static std::unique_ptr<std::map<std::string, Tensor>> data_;
  double max_err_ = 0;
  std::int64_t compared_ = 0;
};
std::unique_ptr<std::map<std::string, Tensor>> TorchFixture::data_ = std::make_unique<std::map<std::string, Tensor>>();

TEST_F(TorchFixture, GRUTwoLayersBidirectional) {
  Generator gen(0);
  tg::nn::GRU gru(tg::nn::GRUOptions(3, 4).num_layers(2).bidirectional(true), gen);
  gru->to(DType::f64);
  gru->load_state_dict(params_of(*gru, "gru."));
  const Tensor x = leaf("gru.input"), h0 = leaf("gru.h0");
  auto [out, h_n] = gru->forward(x, h0);
  tg::add(tg::sum(out * get("gru.r_out")), tg::sum(h_n * get("gru.r_h"))).backward();
  expect_close(out, "gru.out");
  expect_close(h_n, "gru.h_n");
  expect_close(x.grad(), "gru.grad.input");
  expect_close(h0.grad(), "gru.grad.h0");
  expect_param_grads(*gru, "gru.grad.");
}

TEST_F(TorchFixture, GRUValidLensEqualsPackedSequence) {
  Generator gen(0);
  tg::nn::GRU gru(tg::nn::GRUOptions(3, 4).num_layers(2).bidirectional(true), gen);
  gru->to(DType::f64);
  gru->load_state_dict(params_of(*gru, "gru."));
  const Tensor x = leaf("gru_packed.input");
  auto [out, h_n] = gru->forward(x, Tensor(), get("gru_packed.lens"));
  tg::add(tg::sum(out * get("gru_packed.r_out")), tg::sum(h_n * get("gru_packed.r_h"))).backward();
  expect_close(out, "gru_packed.out");
  expect_close(h_n, "gru_packed.h_n");
  expect_close(x.grad(), "gru_packed.grad.input");
  expect_param_grads(*gru, "gru_packed.grad.");
}

/// loss = sum(out * r_out) + sum(h_n * r_h) + 0.5 sum(c_n * r_h), as the script.
Tensor lstm_loss(const Tensor& out, const tg::nn::LSTMState& s, const Tensor& r_out, const Tensor& r_h) {
  return tg::sum(out * r_out) + tg::sum(s.h * r_h) + tg::sum(s.c * r_h) * 0.5;
}

TEST_F(TorchFixture, LSTMTwoLayersWithState) {
  Generator gen(0);
  tg::nn::LSTM lstm(tg::nn::LSTMOptions(3, 4).num_layers(2), gen);
  lstm->to(DType::f64);
  lstm->load_state_dict(params_of(*lstm, "lstm."));
  const Tensor x = leaf("lstm.input"), h0 = leaf("lstm.h0"), c0 = leaf("lstm.c0");
  auto [out, s] = lstm->forward(x, {h0, c0});
  lstm_loss(out, s, get("lstm.r_out"), get("lstm.r_h")).backward();
  expect_close(out, "lstm.out");
  expect_close(s.h, "lstm.h_n");
  expect_close(s.c, "lstm.c_n");
  expect_close(x.grad(), "lstm.grad.input");
  expect_close(h0.grad(), "lstm.grad.h0");
  expect_close(c0.grad(), "lstm.grad.c0");
  expect_param_grads(*lstm, "lstm.grad.");
}

TEST_F(TorchFixture, LSTMBidirectionalValidLensEqualsPackedSequence) {
  Generator gen(0);
  tg::nn::LSTM lstm(tg::nn::LSTMOptions(3, 4).bidirectional(true), gen);
  lstm->to(DType::f64);
  lstm->load_state_dict(params_of(*lstm, "lstm_bi."));
  const Tensor x = leaf("lstm_bi.input");
  auto [out, s] = lstm->forward(x, {}, get("lstm_bi.lens"));
  lstm_loss(out, s, get("lstm_bi.r_out"), get("lstm_bi.r_h")).backward();
  expect_close(out, "lstm_bi.out");
  expect_close(s.h, "lstm_bi.h_n");
  expect_close(s.c, "lstm_bi.c_n");
  expect_close(x.grad(), "lstm_bi.grad.input");
  expect_param_grads(*lstm, "lstm_bi.grad.");
}

TEST_F(TorchFixture, AdditiveAttentionWithValidLens) {
  for (const std::string c : {"attn1", "attn2"}) {
    Generator gen(0);
    tg::nn::AdditiveAttention attn(3, 4, 6, 0.0, gen);
    attn->to(DType::f64);
    attn->load_state_dict(params_of(*attn, "attn."));
    attn->eval();
    const Tensor q = leaf(c + ".queries"), k = leaf(c + ".keys"), v = leaf(c + ".values");
    const Tensor out = attn->forward(q, k, v, get(c + ".valid_lens"));
    tg::sum(out * get(c + ".r")).backward();
    expect_close(out, c + ".out");
    expect_close(attn->attention_weights(), c + ".weights");
    expect_close(q.grad(), c + ".grad.queries");
    expect_close(k.grad(), c + ".grad.keys");
    expect_close(v.grad(), c + ".grad.values");
    expect_param_grads(*attn, c + ".grad.");
  }
}

/// nn.Sequential(Linear(4, 8), Tanh(), Linear(8, 2)): children "0" and "2" as in its state_dict.
class Mlp : public tg::nn::Module {
 public:
  explicit Mlp(Generator& gen) {
    fc1 = register_module("0", tg::nn::Linear(4, 8, gen));
    fc2 = register_module("2", tg::nn::Linear(8, 2, gen));
  }
  Tensor forward(const Tensor& x) const { return fc2->forward(tg::tanh(fc1->forward(x))); }
  tg::nn::Linear fc1{nullptr}, fc2{nullptr};
};

TEST_F(TorchFixture, AdamWithClipGradNormTenSteps) {
  Generator gen(0);
  Mlp mlp(gen);
  mlp.to(DType::f64);
  mlp.load_state_dict(params_of(mlp, "adam.init."));
  tg::nn::Adam opt(mlp.named_parameters(), tg::nn::AdamOptions(0.05));
  const Tensor x = get("adam.x"), y = get("adam.y");
  const Tensor norms = get("adam.grad_norms");
  for (std::int64_t step = 0; step < 10; ++step) {
    opt.zero_grad();
    tg::mean(tg::square(mlp.forward(x) - y)).backward();
    const double norm = tg::nn::clip_grad_norm(mlp.parameters(), 1.0);
    const double want = norms.at({step});
    max_err_ = std::max(max_err_, std::abs(norm - want));
    ++compared_;
    EXPECT_LE(std::abs(norm - want), kTol + kTol * std::abs(want)) << "step " << step;
    opt.step();
    for (const auto& [name, p] : mlp.named_parameters())
      expect_close(p, tg::reshape(tg::narrow(get("adam.params." + name), 0, step, 1), p.shape()),
                   "adam.params." + name + " after step " + std::to_string(step + 1));
  }
}

}  // namespace
