// Type promotion of the binary elementwise ops as PyTorch 1.13's, and dtype errors that name the
// dtypes and shapes. Expected values marked "torch 1.13.1" were printed by /usr/bin/python3 with
// Debian's python3-torch 1.13.1 (the expression is beside each).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/ops_compare.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "gradcheck_util.h"

using namespace tg;
using tg::testing::expect_error;
using tg::testing::rand64;

TEST(DtypeErrors, MatmulAndLinearNameDtypesAndShapes) {
  expect_error([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 4}, DType::f64)); },
               {"matmul: dtypes differ: float32 [2, 3] and float64 [3, 4]"});
  expect_error([] { matmul(Tensor::zeros({2, 3}, DType::i64), Tensor::zeros({3, 4}, DType::i64)); },
               {"matmul: needs floating tensors: int64 [2, 3] and int64 [3, 4]"});
  expect_error([] { linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}, DType::f64), Tensor::zeros({4})); },
               {"linear: dtypes differ: input float32 [2, 3], weight float64 [4, 3], bias float32 [4]"});
  expect_error([] { linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}), Tensor::zeros({4}, DType::f64)); },
               {"linear: dtypes differ", "bias float64 [4]"});
  expect_error([] { linear(Tensor::zeros({2, 3}, DType::i64), Tensor::zeros({4, 3}, DType::i64), Tensor()); },
               {"linear: needs floating tensors: input int64 [2, 3], weight int64 [4, 3], bias none"});
}
