#include <gtest/gtest.h>

#include <cstring>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "gradcheck_util.h"

using namespace tg;

namespace {
// A reduction-heavy computation with large tensors so that every kernel takes its parallel path.
std::vector<float> run(int threads) {
  set_num_threads(threads);
  Generator gen(123);
  Tensor w = Tensor::uniform({512, 600}, -0.05, 0.05, gen).requires_grad_();
  Tensor x = Tensor::uniform({256, 600}, -1, 1, gen);
  Tensor h = tanh(linear(x, w));                    // GEMM + transcendental
  Tensor loss = sum(square(h)) + mean(sum(h, {0})) + sum(amax(h, {1}));
  loss.backward();
  std::vector<float> out = w.grad().to_vector<float>();
  out.push_back(static_cast<float>(loss.item()));
  Tensor big = Tensor::uniform({3 << 20}, -1, 1, gen);
  out.push_back(static_cast<float>(sum(big).item()));
  out.push_back(static_cast<float>(sum(exp(big)).item()));
  set_num_threads(0);
  return out;
}
}  // namespace

TEST(Determinism, OneAndTwoThreadsGiveBitwiseEqualResults) {
  const auto a = run(1);
  const auto b = run(2);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}
