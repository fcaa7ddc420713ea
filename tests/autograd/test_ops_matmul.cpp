#include <gtest/gtest.h>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "gradcheck_util.h"

using namespace tg;
using tg::testing::rand64;

TEST(MatmulOps, Values) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector(std::vector<float>{1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_EQ(matmul(a, b).to_vector<float>(), (std::vector<float>{4, 5, 10, 11}));
  // linear = x Wᵀ + b
  Tensor w = Tensor::from_vector(std::vector<float>{1, 0, 0, 0, 1, 0}, {2, 3});
  Tensor bias = Tensor::from_vector(std::vector<float>{10, 20}, {2});
  EXPECT_EQ(linear(a, w, bias).to_vector<float>(), (std::vector<float>{11, 22, 14, 25}));
  EXPECT_EQ(linear(a, w).to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
}

TEST(MatmulOps, Gradcheck) {
  Generator gen(21);
  auto mm = [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); };
  EXPECT_GRADCHECK(mm, {rand64({3, 4}, gen), rand64({4, 5}, gen)});
  EXPECT_GRADCHECK(mm, {rand64({1, 4}, gen), rand64({4, 1}, gen)});
  EXPECT_GRADCHECK(mm, {rand64({2, 3, 4}, gen), rand64({2, 4, 2}, gen)});
  EXPECT_GRADCHECK(mm, {rand64({2, 3, 4}, gen), rand64({4, 2}, gen)});  // folded leading dims
  auto lin = [](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); };
  EXPECT_GRADCHECK(lin, {rand64({5, 3}, gen), rand64({4, 3}, gen), rand64({4}, gen)});
  EXPECT_GRADCHECK(lin, {rand64({2, 2, 3}, gen), rand64({4, 3}, gen), rand64({4}, gen)});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return linear(v[0], v[1]); }, {rand64({3}, gen), rand64({2, 3}, gen)});
}

TEST(MatmulOps, ShapeErrorsNameBothShapes) {
  try {
    matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("matmul"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4, 5]"), std::string::npos) << m;
  }
  EXPECT_THROW(matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5})), std::invalid_argument);
  try {
    linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[4, 5]"), std::string::npos) << e.what();
  }
}
