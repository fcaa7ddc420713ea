// Workload G (bench/encoder_workload.h) written with tensor methods, as the PyTorch reference
// reads, against the free-function spelling: the same ops in the same order, so the same losses
// and gradients to the last bit, step after step of Adam.
#include <gtest/gtest.h>

#include <vector>

#include "autograd/random.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "bench/encoder_workload.h"
#include "nn/optim.h"

using namespace tg::bench::encoder;

TEST(EncoderMethods, SameLossesAndGradientsAsTheFreeFunctions) {
  const Sizes s{.d_model = 16, .heads = 4, .ff = 32, .batch = 3, .seq = 5};
  tg::Generator g1(4), g2(4);
  const EncoderLayer free_layer(s, g1), method_layer(s, g2);
  tg::nn::Adam free_opt(free_layer.named_parameters(), tg::nn::AdamOptions(kLearningRate));
  tg::nn::Adam method_opt(method_layer.named_parameters(), tg::nn::AdamOptions(kLearningRate));
  tg::SplitMix64 rng{data_seed(4)};
  std::vector<float> xs, ts;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    make_batch(rng, xs, ts, s);
    const tg::Tensor x = tg::Tensor::from_vector(xs, {s.batch, s.seq, s.d_model});
    const tg::Tensor target = tg::Tensor::from_vector(ts, {s.batch, s.seq, s.d_model});
    EXPECT_EQ(free_layer.forward(x).to_vector<float>(), method_layer.forward_methods(x).to_vector<float>());
    tg::tape::reset();
    const tg::Tensor a = train_step(free_layer, free_opt, x, target, nullptr, Spelling::free_functions);
    const tg::Tensor b = train_step(method_layer, method_opt, x, target, nullptr, Spelling::methods);
    EXPECT_EQ(a.item(), b.item());
    const auto fp = free_layer.named_parameters(), mp = method_layer.named_parameters();
    for (std::size_t i = 0; i < fp.size(); ++i) {
      SCOPED_TRACE(fp[i].first);
      EXPECT_EQ(fp[i].second.grad().to_vector<float>(), mp[i].second.grad().to_vector<float>());
      EXPECT_EQ(fp[i].second.to_vector<float>(), mp[i].second.to_vector<float>());
    }
  }
}
