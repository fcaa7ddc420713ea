#pragma once
// Kernels with bool results: comparisons, logical ops and elementwise predicates (plain loops the
// compiler vectorises, TBB for large tensors). No autograd; the ops in autograd/ops_compare.cpp
// promote dtypes and validate before calling them. Installed for ops written outside the repository.
#include "autograd/kernels/reduce.h"
#include "autograd/tensor.h"

namespace tg::kernels {

enum class Compare { eq, ne, lt, le, gt, ge };
enum class Logical { land, lor, lxor };
enum class Predicate {
  isnan,     // x != x
  isinf,     // |x| == inf
  isfinite,  // neither NaN nor inf
  nonzero,   // x != 0 (NaN is nonzero)
};

/// NumPy-broadcast comparison of a and b, which must have one dtype (any); a b8 result. `name` is
/// the op named in shape errors.
Tensor compare(Compare op, const Tensor& a, const Tensor& b, const char* name);
/// NumPy-broadcast logical op of two b8 tensors; a b8 result.
Tensor logical(Logical op, const Tensor& a, const Tensor& b, const char* name);
/// The predicate of every element of x (any dtype); a b8 result of x's shape.
Tensor predicate(Predicate op, const Tensor& x);
/// Sum of an i64 or b8 tensor over `axes` (normalised; empty = none), as i64: counting for bools.
/// Exact (integer arithmetic, wrapping on overflow like PyTorch's int64 sum).
Tensor sum_integral(const Tensor& x, const Axes& axes, bool keepdim);

}  // namespace tg::kernels
