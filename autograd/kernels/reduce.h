#pragma once
// Reductions over (outer, R, inner) views, for ops (installed). The summation order inside a row is fixed and
// parallel work is split only across independent outputs (or fixed-size blocks combined in
// order), so results are bitwise identical for any thread count.
#include <algorithm>
#include <initializer_list>

#include "autograd/tensor.h"

namespace tg::kernels {

/// A set of axes, stored inline (at most Shape::kMaxDims): reductions allocate nothing for them.
class Axes {
 public:
  Axes() = default;
  Axes(std::initializer_list<int> axes) {
    for (int a : axes) push_back(a);
  }
  void push_back(int a) { v_[n_++] = a; }
  void pop_back() { --n_; }
  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int front() const { return v_[0]; }
  int back() const { return v_[n_ - 1]; }
  int operator[](int i) const { return v_[i]; }
  const int* begin() const { return v_; }
  const int* end() const { return v_ + n_; }
  bool contains(int a) const { return std::find(begin(), end(), a) != end(); }
  /// Sorted, duplicates removed.
  void normalize() {
    std::sort(v_, v_ + n_);
    n_ = static_cast<int>(std::unique(v_, v_ + n_) - v_);
  }

 private:
  int v_[Shape::kMaxDims] = {};
  int n_ = 0;
};

/// Sum over the given axes (normalised, any order, may be empty = copy).
Tensor sum(const Tensor& x, Axes axes, bool keepdim);
/// Sums a broadcast result back to `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);
/// The same for a gradient nothing else holds: returned as it is when no sum is needed, so that a
/// leaf's accumulation can take the buffer instead of copying it.
Tensor sum_to(Tensor&& g, const Shape& shape);
/// Max over one axis; `argmax` (i64, same shape as the result) gets the first maximal index.
Tensor max(const Tensor& x, int axis, bool keepdim, Tensor* argmax);

/// log(sum_i exp(x[i])) of one contiguous row (vectorised exp in x's precision, sum in double): the
/// log-softmax normaliser greedy and beam decoding share, so both score a token identically.
/// With `argmax`, also writes the first index of the row's maximum. Defined in ops_softmax.cpp,
/// beside the softmax row primitives it shares.
double log_sum_exp(const float* x, std::int64_t n, std::int64_t* argmax = nullptr);
double log_sum_exp(const double* x, std::int64_t n, std::int64_t* argmax = nullptr);

/// Sum of exp(x[i] - m) over x[0, n), with the terms written to y unless y is null (y may be x);
/// the tail goes through the same vector exp. The exponentials of softmax, log_softmax and the
/// fused attention. Defined in ops_softmax.cpp, beside the softmax row primitives.
float exp_shift_sum(const float* x, float* y, std::int64_t n, float m);
double exp_shift_sum(const double* x, double* y, std::int64_t n, double m);

/// Sum of x[0, n) in a fixed order (four SIMD accumulators, then lanes, then the tail): the row sum
/// of sum() and of the fused norms, so both add a row the same way.
float sum_contiguous(const float* x, std::int64_t n);
double sum_contiguous(const double* x, std::int64_t n);
/// Maximum of x[0, n) (-inf when n = 0): the row maximum of softmax, log_sum_exp and the fused
/// attention, one loop for all three.
float max_contiguous(const float* x, std::int64_t n);
double max_contiguous(const double* x, std::int64_t n);

/// Shape of x with `axes` removed (or set to 1 with keepdim).
Shape reduced_shape(const Shape& shape, const Axes& axes, bool keepdim);

}  // namespace tg::kernels
