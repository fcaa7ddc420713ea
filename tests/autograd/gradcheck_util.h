#pragma once
// Shared helpers for the op tests: fixed-seed float64 inputs and gradcheck / gradgradcheck assertions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"

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

#define EXPECT_GRADGRADCHECK(fn, ...)                                     \
  do {                                                                    \
    const auto report_ = ::tg::gradgradcheck(fn, __VA_ARGS__);            \
    EXPECT_TRUE(report_.ok) << report_;                                   \
    EXPECT_GT(report_.checked, 0);                                        \
  } while (0)

/// gtest predicate form of EXPECT_GRADCHECK: EXPECT_TRUE(passes_gradcheck(fn, inputs)).
inline ::testing::AssertionResult passes_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                                   const std::vector<Tensor>& inputs) {
  const GradcheckReport r = gradcheck(fn, inputs);
  if (!r.ok) return ::testing::AssertionFailure() << r;
  if (r.checked == 0) return ::testing::AssertionFailure() << "gradcheck compared no entries";
  return ::testing::AssertionSuccess();
}

/// The larger of a running worst error and a new one, where a NaN error is an infinite one
/// (std::max(worst, NaN) returns worst, so a NaN result would pass an accuracy bound).
inline double max_or_inf(double worst, double err) { return std::isnan(err) ? INFINITY : std::max(worst, err); }

/// max |x - y| over all elements. Equal values (the same infinity, or NaN in both) differ by 0;
/// a NaN in only one of them is an infinite difference (std::max would pass over it), as are
/// different sizes.
inline double max_abs_diff(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) return INFINITY;
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i]))) continue;
    const double d = std::abs(x[i] - y[i]);
    m = std::isnan(d) ? INFINITY : std::max(m, d);
    if (m == INFINITY) break;
  }
  return m;
}

/// max_abs_diff of two tensors, compared in double whatever the dtypes (shapes must match).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (!(a.shape() == b.shape())) return INFINITY;
  return max_abs_diff(a.to_vector<double>(), b.to_vector<double>());
}

/// gtest predicate: `text` contains `part` (the test binary does not link gmock).
inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

/// Runs fn and expects an exception of type E whose message contains every one of `parts`.
template <class E = std::invalid_argument>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception thrown; expected one mentioning " << parts[0];
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

}  // namespace tg::testing
