#pragma once
// Internal: reductions over (outer, R, inner) views. The summation order inside a row is fixed and
// parallel work is split only across independent outputs (or fixed-size blocks combined in
// order), so results are bitwise identical for any thread count.
#include <vector>

#include "autograd/tensor.h"

namespace tg::kernels {

/// Sum over the given axes (normalised, any order, may be empty = copy).
Tensor sum(const Tensor& x, std::vector<int> axes, bool keepdim);
/// Sums a broadcast result back to `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);
/// Max over one axis; `argmax` (i64, same shape as the result) gets the first maximal index.
Tensor max(const Tensor& x, int axis, bool keepdim, Tensor* argmax);

/// Shape of x with `axes` removed (or set to 1 with keepdim).
Shape reduced_shape(const Shape& shape, const std::vector<int>& axes, bool keepdim);

}  // namespace tg::kernels
