#pragma once
// Shared helpers for the op tests: fixed-seed float64 inputs and a gradcheck assertion.
#include <gtest/gtest.h>

#include "autograd/tapegrad.h"

namespace tg::testing {

inline Tensor rand64(const Shape& shape, Generator& gen, double lo = -1.0, double hi = 1.0) {
  return Tensor::uniform(shape, lo, hi, gen, DType::f64).requires_grad_();
}

#define EXPECT_GRADCHECK(fn, ...)                                         \
  do {                                                                    \
    const auto report_ = ::tg::gradcheck(fn, __VA_ARGS__);                \
    EXPECT_TRUE(report_.ok) << report_;                                   \
    EXPECT_GT(report_.checked, 0);                                        \
  } while (0)

}  // namespace tg::testing
