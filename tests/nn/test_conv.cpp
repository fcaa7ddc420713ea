// The convolution, pooling and normalisation ops and layers against PyTorch 1.13 values saved by
// tests/data/make_conv_fixture.py (float64; PyTorch is not needed to run this test): outputs and
// the gradients of sum(out * r), to 1e-12 in float64 and 1e-5 (relative to 1 + |torch|) in
// float32; the layers' state_dict names, order and dtypes; BatchNorm's running statistics after
// two training steps and its eval output; layer gradchecks through bind_parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "autograd/ops_conv.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/random.h"
#include "layer_test_util.h"
#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/serialize.h"

namespace {

using namespace tg;
using tg::nn::NamedTensors;
using tg::nn::testing::bind_parameters;
using tg::nn::testing::parameter_inputs;
using tg::testing::rand64;

class ConvFixture : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    for (auto& [name, t] : nn::load_npz(TG_TEST_DATA_DIR "/torch_conv_fixture.npz")) {
      data().emplace(name, t);
      order().push_back(name);
    }
  }
  static std::map<std::string, Tensor>& data() {
    static std::map<std::string, Tensor> d;
    return d;
  }
  static std::vector<std::string>& order() {
    static std::vector<std::string> o;
    return o;
  }
  void TearDown() override {
    std::cout << "[ fixture  ] " << ::testing::UnitTest::GetInstance()->current_test_info()->name()
              << ": max abs error vs PyTorch " << max_err_ << " (float64), " << max_err32_ << " (float32) over "
              << compared_ << " values\n";
  }
  static Tensor get(const std::string& key) {
    auto it = data().find(key);
    if (it == data().end()) throw std::out_of_range("torch_conv_fixture.npz has no '" + key + "'");
    return it->second;
  }
  static bool has(const std::string& key) { return data().count(key) > 0; }
  /// torch's state_dict of a case, in its order.
  static NamedTensors state_of(const std::string& prefix) {
    const std::string p = prefix + ".state.";
    NamedTensors out;
    for (const std::string& n : order())
      if (n.rfind(p, 0) == 0) out.emplace_back(n.substr(p.size()), get(n));
    return out;
  }
  void expect_close(const Tensor& got, const std::string& key, bool f32 = false) {
    const Tensor want = get(key);
    ASSERT_TRUE(got.defined()) << key;
    ASSERT_EQ(got.shape(), want.shape()) << key;
    const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
    const double tol = f32 ? 1e-5 : 1e-12;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double err = std::abs(g[i] - w[i]);
      (f32 ? max_err32_ : max_err_) = std::max(f32 ? max_err32_ : max_err_, err);
      EXPECT_LE(err, tol + tol * std::abs(w[i])) << key << "[" << i << "]: " << g[i] << " vs torch " << w[i];
    }
    compared_ += static_cast<std::int64_t>(g.size());
  }
  /// Runs fn on the case's stored tensors (input, then weight and bias when stored): compares the
  /// output and every gradient of sum(out * r) in float64, and the output in float32.
  void check(const std::string& name, const std::function<Tensor(const std::vector<Tensor>&)>& fn) {
    SCOPED_TRACE(name);
    std::vector<std::string> keys;
    for (const char* k : {"input", "weight", "bias"})
      if (has(name + "." + k)) keys.push_back(k);
    std::vector<Tensor> in, in32;
    for (const auto& k : keys) {
      in.push_back(get(name + "." + k).clone().requires_grad_());
      in32.push_back(get(name + "." + k).to(DType::f32));
    }
    const Tensor out = fn(in);
    expect_close(out, name + ".out");
    sum(out * get(name + ".r")).backward();
    for (std::size_t i = 0; i < keys.size(); ++i) expect_close(in[i].grad(), name + ".grad." + keys[i]);
    const Tensor out32 = fn(in32);
    EXPECT_EQ(out32.dtype(), DType::f32);
    expect_close(out32, name + ".out", true);
  }

  double max_err_ = 0, max_err32_ = 0;
  std::int64_t compared_ = 0;
};

TEST_F(ConvFixture, Conv2dAndConv1d) {
  check("conv_a", [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], 1, 1); });
  check("conv_b", [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], {2, 1}, {1, 0}, {1, 2}, 2); });
  check("conv_c", [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], Tensor(), 2, 1, 1, 4); });
  check("conv_d", [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2]); });
  check("conv_e", [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], 1, PaddingMode::same, {1, 2}); });
  check("conv1d_a", [](const std::vector<Tensor>& v) { return conv1d(v[0], v[1], v[2], 2, 1, 2); });
  check("conv1d_b", [](const std::vector<Tensor>& v) { return conv1d(v[0], v[1], Tensor(), 1, PaddingMode::same, 1, 2); });
}

TEST_F(ConvFixture, Pooling) {
  check("maxpool_a", [](const std::vector<Tensor>& v) { return max_pool2d(v[0], 3, 2, 1); });
  check("maxpool_b", [](const std::vector<Tensor>& v) { return max_pool2d(v[0], {2, 3}, IntPair{2, 2}, {1, 1}, {2, 1}, true); });
  const auto [values, indices] = max_pool2d_with_indices(get("maxpool_b.input"), {2, 3}, IntPair{2, 2}, {1, 1}, {2, 1}, true);
  EXPECT_EQ(indices.dtype(), DType::i64);
  EXPECT_EQ(indices.to_vector<std::int64_t>(), get("maxpool_b.indices").to_vector<std::int64_t>());
  check("maxpool1d", [](const std::vector<Tensor>& v) { return max_pool1d(v[0], 3, 2, 1, 1, true); });
  check("avgpool_a", [](const std::vector<Tensor>& v) { return avg_pool2d(v[0], 3, 2, 1); });
  check("avgpool_b", [](const std::vector<Tensor>& v) { return avg_pool2d(v[0], {3, 2}, IntPair{2, 3}, {1, 1}, true, false); });
  check("avgpool_c", [](const std::vector<Tensor>& v) { return avg_pool2d(v[0], 2, std::nullopt, 0, true, true, 3); });
  check("avgpool1d", [](const std::vector<Tensor>& v) { return avg_pool1d(v[0], 4, 3, 2, true, false); });
  check("adaptive_a", [](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], {3, 4}); });
  check("adaptive_b", [](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], 5); });
}

TEST_F(ConvFixture, GroupNorm) {
  check("gn", [](const std::vector<Tensor>& v) { return group_norm(v[0], 2, v[1], v[2]); });
  nn::GroupNorm gn(2, 6);
  gn->to(DType::f64);  // first: loading into float32 would round torch's values
  gn->load_state_dict(state_of("gn"), "gn");
  expect_close(gn(get("gn.input")), "gn.out");
}

std::vector<std::string> names_and_dtypes(const NamedTensors& state) {
  std::vector<std::string> out;
  for (const auto& [n, t] : state) out.push_back(n + " " + t.shape().str() + " " + std::string(dtype_name(t.dtype())));
  return out;
}

TEST_F(ConvFixture, StateDictNamesAreTorchs) {
  Generator gen(0);
  // Shapes and names as torch's; dtypes apart from the fixture's float64 storage.
  auto keys = [](const NamedTensors& s) {
    std::vector<std::string> out;
    for (const auto& [n, t] : s) out.push_back(n + " " + t.shape().str());
    return out;
  };
  EXPECT_EQ(keys(nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1), gen)->state_dict()), keys(state_of("Conv2d")));
  EXPECT_EQ(keys(nn::Conv1d(nn::Conv1dOptions(2, 4, 3).bias(false), gen)->state_dict()), keys(state_of("Conv1d")));
  EXPECT_EQ(keys(nn::GroupNorm(2, 6)->state_dict()), keys(state_of("gn")));
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(names_and_dtypes(bn->state_dict()),
            (std::vector<std::string>{"weight [3] float32", "bias [3] float32", "running_mean [3] float32",
                                      "running_var [3] float32", "num_batches_tracked [] int64"}));
  EXPECT_EQ(keys(bn->state_dict()), keys(state_of("bn2d.init")));
  EXPECT_EQ(get("bn2d.init.state.num_batches_tracked").dtype(), DType::i64);
  // Only weight and bias are parameters; the running statistics are buffers, as torch's.
  EXPECT_EQ(names_and_dtypes(bn->named_parameters()),
            (std::vector<std::string>{"weight [3] float32", "bias [3] float32"}));
  EXPECT_EQ(names_and_dtypes(bn->named_buffers()),
            (std::vector<std::string>{"running_mean [3] float32", "running_var [3] float32",
                                      "num_batches_tracked [] int64"}));
  EXPECT_EQ(bn->num_parameters(), 6);
  bn->to(DType::f64);
  EXPECT_EQ(bn->running_var.dtype(), DType::f64);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), DType::i64);
}

// Two training steps from torch's initial state, then eval: outputs, gradients, running statistics.
template <class BN>
void check_batchnorm(ConvFixture* f, const std::string& name, const BN& bn) {
  SCOPED_TRACE(name);
  bn->to(DType::f64);
  bn->load_state_dict(f->state_of(name + ".init"), name);
  const std::uint32_t mean_version = bn->running_mean._version(), var_version = bn->running_var._version(),
                      count_version = bn->num_batches_tracked._version();
  for (const char* step : {".step1", ".step2"}) {
    Tensor x = f->get(name + step + ".input").clone().requires_grad_();
    bn->zero_grad();
    const Tensor out = bn(x);
    f->expect_close(out, name + step + ".out");
    sum(out * f->get(name + step + ".r")).backward();
    f->expect_close(x.grad(), name + step + ".grad.input");
    f->expect_close(bn->weight.grad(), name + step + ".grad.weight");
    f->expect_close(bn->bias.grad(), name + step + ".grad.bias");
  }
  const NamedTensors trained = f->state_of(name + ".trained");
  const NamedTensors ours = bn->state_dict();
  ASSERT_EQ(names_and_dtypes(ours).size(), trained.size());
  for (std::size_t i = 0; i < trained.size(); ++i) {
    EXPECT_EQ(ours[i].first, trained[i].first);
    f->expect_close(ours[i].second, name + ".trained.state." + trained[i].first);
  }
  EXPECT_EQ(bn->num_batches_tracked.dtype(), DType::i64);
  EXPECT_EQ(bn->num_batches_tracked.template to_vector<std::int64_t>(), std::vector<std::int64_t>{2});
  // Each training step writes the buffers in place and bumps their versions, as torch's.
  EXPECT_EQ(bn->running_mean._version(), mean_version + 2);
  EXPECT_EQ(bn->running_var._version(), var_version + 2);
  EXPECT_EQ(bn->num_batches_tracked._version(), count_version + 2);
  bn->eval();
  const std::vector<double> before = bn->running_mean.template to_vector<double>();
  f->expect_close(bn(f->get(name + ".eval.input")), name + ".eval.out");
  EXPECT_EQ(bn->running_mean.template to_vector<double>(), before);  // eval leaves the statistics alone
  EXPECT_EQ(bn->running_mean._version(), mean_version + 2);
}

TEST_F(ConvFixture, BatchNormRunningStatsAfterTwoStepsAndEval) {
  nn::BatchNorm2d bn2d(3);
  check_batchnorm(this, "bn2d", bn2d);
  nn::BatchNorm1d bn1d(nn::BatchNormOptions(4).momentum(std::nullopt));  // cumulative average
  check_batchnorm(this, "bn1d", bn1d);
  nn::BatchNorm1d bn1d3(nn::BatchNormOptions(3).eps(1e-3).momentum(0.3));
  check_batchnorm(this, "bn1d3", bn1d3);
}

TEST(ConvLayers, InitReprAndErrors) {
  Generator gen(1);
  nn::Conv2d conv(nn::Conv2dOptions(4, 6, {3, 2}).stride(2).padding(1).groups(2), gen);
  EXPECT_EQ(conv->weight.shape(), (Shape{6, 2, 3, 2}));
  // kaiming_uniform(a = sqrt(5)): U(±1/sqrt(fan_in)), fan_in = 2 * 3 * 2; the bias the same bound.
  const double bound = 1 / std::sqrt(12.0);
  for (const Tensor& t : {conv->weight, conv->bias})
    for (double v : t.to_vector<double>()) EXPECT_LE(std::abs(v), bound);
  EXPECT_EQ(conv->str(), "Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), groups=2)");
  EXPECT_EQ(nn::Conv1d(nn::Conv1dOptions(2, 3, 5).padding(PaddingMode::same).bias(false), gen)->str(),
            "Conv1d(2, 3, kernel_size=(5,), stride=(1,), padding=same, bias=false)");
  EXPECT_EQ(nn::MaxPool2d(2)->str(), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=false)");
  EXPECT_EQ(nn::AvgPool2d(nn::AvgPool2dOptions({3, 2}).stride(1))->str(), "AvgPool2d(kernel_size=(3, 2), stride=1, padding=0)");
  EXPECT_EQ(nn::AdaptiveAvgPool2d({1, 1})->str(), "AdaptiveAvgPool2d(output_size=1)");
  EXPECT_EQ(nn::BatchNorm2d(8)->str(), "BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)");
  EXPECT_EQ(nn::GroupNorm(2, 8)->str(), "GroupNorm(2, 8, eps=1e-05, affine=true)");
  EXPECT_THROW(nn::Conv2d(nn::Conv2dOptions(3, 4, 3).groups(2), gen), std::invalid_argument);
  EXPECT_THROW(nn::GroupNorm(3, 8), std::invalid_argument);
  nn::BatchNorm2d bn(3);
  EXPECT_THROW(bn(Tensor::zeros({2, 3, 4})), std::invalid_argument);
  EXPECT_THROW(conv(Tensor::zeros({1, 3, 5, 5})), std::invalid_argument);  // 3 channels, not 4
  // Without tracked statistics, eval normalises with the batch's.
  nn::BatchNorm1d untracked(nn::BatchNormOptions(2).track_running_stats(false));
  EXPECT_FALSE(untracked->running_mean.defined());
  untracked->eval();
  const Tensor y = untracked(Tensor::from_values({1, 2, 3, 6}, {2, 2}, DType::f32));
  EXPECT_NEAR(y.at({0, 0}), -1.0, 1e-4);
  EXPECT_NEAR(y.at({1, 1}), 1.0, 1e-4);
}

TEST(ConvLayers, GradcheckWrtInputAndParameters) {
  Generator gen(2);
  nn::Conv2d conv(nn::Conv2dOptions(4, 4, 3).stride({1, 2}).padding(1).dilation({2, 1}).groups(2), gen);
  conv->to(DType::f64);
  std::vector<Tensor> in{rand64({2, 4, 5, 5}, gen)};
  for (const Tensor& p : parameter_inputs(conv)) in.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(conv, xs, 1);
        return conv(xs[0]);
      },
      in);
  nn::Conv1d conv1(nn::Conv1dOptions(2, 3, 3).padding(PaddingMode::same), gen);
  conv1->to(DType::f64);
  std::vector<Tensor> in1{rand64({2, 2, 6}, gen)};
  for (const Tensor& p : parameter_inputs(conv1)) in1.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(conv1, xs, 1);
        return conv1(xs[0]);
      },
      in1);
  nn::GroupNorm gn(2, 4);
  gn->to(DType::f64);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(gn, xs, 1);
        return gn(xs[0]);
      },
      {rand64({2, 4, 3}, gen), rand64({4}, gen), rand64({4}, gen)});
  // BatchNorm2d in training: weight and bias are checked; the running statistics (buffers) change
  // at every call but do not enter a training-mode output.
  nn::BatchNorm2d bn(2);
  bn->to(DType::f64);
  std::vector<Tensor> inb{rand64({3, 2, 2, 2}, gen), rand64({2}, gen, 0.5, 1.5), rand64({2}, gen)};
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(bn, xs, 1);
        return bn(xs[0]);
      },
      inb);
  // A Conv2d + BatchNorm2d + MaxPool2d block, end to end.
  nn::Conv2d c2(nn::Conv2dOptions(2, 3, 3).padding(1), gen);
  nn::MaxPool2d pool(2);
  c2->to(DType::f64);
  std::vector<Tensor> in2{rand64({2, 2, 4, 4}, gen)};
  for (const Tensor& p : parameter_inputs(c2)) in2.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& xs) {
        bind_parameters(c2, xs, 1);
        return pool(tg::batch_norm(c2(xs[0]), Tensor(), Tensor(), Tensor(), Tensor(), true));
      },
      in2);
}

}  // namespace
