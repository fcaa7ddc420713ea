#pragma once
// Comparisons, logical ops, predicates and bool reductions, as PyTorch 1.13: results are bool (b8)
// tensors (count_nonzero and the sum of a bool tensor: int64) that never require grad, with NumPy
// broadcasting. Implemented in autograd/ops_compare.cpp over the kernels of
// autograd/kernels/compare.h; each validates its arguments and throws std::invalid_argument naming
// the op and the shapes.
//
// Type promotion, as torch.result_type: the two operands are compared in a common dtype, bool <
// int64 < floating by category (int64 vs float32 compares in float32, float32 vs float64 in
// float64); a 0-dim tensor takes part only when its category is higher than the other operand's
// (an f32 tensor against a 0-dim f64 tensor compares in f32, as PyTorch). A double scalar `s` is a
// Python number: an integer when it is integral (and fits int64), else a float; against a tensor of
// a lower category it promotes to int64 or float32 (PyTorch's default dtype), otherwise it is
// converted to the tensor's dtype (so an f32 tensor's 0.1f == 0.1 is true, as in PyTorch).
// Deviation: PyTorch tells `2` from `2.0` (an int64 tensor against 2.0 compares in float32);
// C++ passes both as double, so an integral scalar always compares as an integer (exact).
//
// NaN compares unequal to everything (ne is true), as IEEE and PyTorch.
#include <cstdint>

#include "autograd/array_ref.h"
#include "autograd/tensor.h"

namespace tg {

/// The smaller dtype that holds both (torch.promote_types): bool < int64 < float32 < float64.
DType promote_types(DType a, DType b);
/// The dtype an elementwise op on a and b computes in (torch.result_type, rules above).
DType result_type(const Tensor& a, const Tensor& b);
/// The dtype of an op between tensor a and a scalar s (torch.result_type(a, s)).
DType result_type(const Tensor& a, double s);

/// a == b, a != b, a < b, a <= b, a > b, a >= b elementwise with broadcasting (torch.eq, ...).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);

/// Elementwise comparisons, as torch.Tensor's operators: they return bool tensors, so a Tensor is
/// never compared for identity with ==; use Tensor::impl() or shares_storage() for that.
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double s);
Tensor operator!=(const Tensor& a, double s);
Tensor operator<(const Tensor& a, double s);
Tensor operator<=(const Tensor& a, double s);
Tensor operator>(const Tensor& a, double s);
Tensor operator>=(const Tensor& a, double s);
Tensor operator==(double s, const Tensor& a);
Tensor operator!=(double s, const Tensor& a);
Tensor operator<(double s, const Tensor& a);
Tensor operator<=(double s, const Tensor& a);
Tensor operator>(double s, const Tensor& a);
Tensor operator>=(double s, const Tensor& a);

/// Logical ops of any dtypes (nonzero, NaN included, is true) with broadcasting (torch.logical_and, ...).
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);

/// Elementwise NaN / ±inf / neither tests (torch.isnan, isinf, isfinite); for int64 and bool
/// tensors all false / false / true.
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);

/// Whether any / every element is nonzero (NaN counts as nonzero), over everything or along `dim`
/// (torch.any / torch.all; any dtype in, bool out). Over an empty range: any false, all true.
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, std::int64_t dim, bool keepdim = false);
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Number of nonzero elements over `dims` (empty: every dim) as int64 (torch.count_nonzero).
Tensor count_nonzero(const Tensor& x, IntList dims = {});
/// The indices of the nonzero elements in row-major order, as an (n, x.dim()) int64 tensor
/// (torch.nonzero; a 0-dim x gives (n, 0)).
Tensor nonzero(const Tensor& x);

}  // namespace tg
