#pragma once
// Reductions.
// Implemented beside their backward in autograd/ops_reduce.cpp; each
// validates its arguments and throws std::invalid_argument naming the op and the shapes.
#include <cstdint>
#include <limits>
#include <tuple>

#include "autograd/array_ref.h"
#include "autograd/tensor.h"

namespace tg {

// Sums of int64 and bool tensors are int64 (exact; not differentiable), as PyTorch. Unlike the
// ops below, empty `axes` reduces nothing here (torch 1.13's sum(dim=[]) reduces everything: call
// sum(x)), and a mean over an axis of size 0 throws (PyTorch: NaN).
Tensor sum(const Tensor& x);  // over everything, 0-dim result
Tensor sum(const Tensor& x, IntList axes, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, IntList axes, bool keepdim = false);
// In the ops below, as in PyTorch, empty `dims` means every dimension; a negative dim counts from
// the end. Values at ties: amax/amin (and max/min over everything) share the gradient evenly among
// the tied elements; max/min/topk/sort along a dim send it to the index they return.

/// Max over everything (torch.max(x)); ties share the gradient evenly.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
/// Max along `dim` and the index of the first maximum (torch.max(x, dim, keepdim)); the gradient
/// goes to that index. NaN is the maximum of a row holding one (its first index).
std::tuple<Tensor, Tensor> max(const Tensor& x, std::int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Max / min over `dims` (torch.amax / amin); ties share the gradient evenly.
Tensor amax(const Tensor& x, IntList dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntList dims = {}, bool keepdim = false);
/// Index of the first maximum / minimum along `dim` (i64, not differentiable).
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, std::int64_t dim, bool keepdim = false);

// Correction (torch.var's keyword `correction`: the divisor is N - correction) is declared in
// autograd/tensor.h, for Tensor::var and Tensor::std.
/// Variance over `dims` (torch.var(x, dim, unbiased, keepdim)): divisor N - 1 when `unbiased`,
/// else N. A divisor of 0 or less gives inf or NaN, as PyTorch.
Tensor var(const Tensor& x, IntList dims = {}, bool unbiased = true, bool keepdim = false);
Tensor var(const Tensor& x, IntList dims, Correction correction, bool keepdim = false);
/// Standard deviation: sqrt(var) with the same arguments; its gradient is 0 where it is 0, as
/// PyTorch 1.13's.
Tensor std(const Tensor& x, IntList dims = {}, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x, IntList dims, Correction correction, bool keepdim = false);
/// log(sum(exp(x))) over `dims`, without overflow (torch.logsumexp); -inf for a row of -inf.
Tensor logsumexp(const Tensor& x, IntList dims, bool keepdim = false);
/// Product of all elements / along `dim` (torch.prod); the gradient is exact with zeros present.
Tensor prod(const Tensor& x);
Tensor prod(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// The p-norm over `dims` (torch.norm / linalg.vector_norm): (sum |x|^p)^(1/p) for p > 0, max |x|
/// for p = inf. Its gradient at a zero norm is 0, as PyTorch. p <= 0 is rejected (PyTorch's p = 0
/// counts nonzeros; a deviation, not differentiable anyway).
inline constexpr double kInf = std::numeric_limits<double>::infinity();
Tensor norm(const Tensor& x, double p = 2.0, IntList dims = {}, bool keepdim = false);
/// Running sum / product along `dim` (torch.cumsum / cumprod); cumprod's gradient is exact with
/// zeros present.
Tensor cumsum(const Tensor& x, std::int64_t dim);
Tensor cumprod(const Tensor& x, std::int64_t dim);
/// The k largest (or smallest) elements along `dim` and their indices (torch.topk), in order
/// when `sorted`; among equal values, the lower index first.
std::tuple<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, std::int64_t dim = -1, bool largest = true,
                                bool sorted = true);
/// Sorted along `dim` with the indices (torch.sort); stable: equal values keep their order. NaN
/// sorts as the largest value, as PyTorch.
std::tuple<Tensor, Tensor> sort(const Tensor& x, std::int64_t dim = -1, bool descending = false);
/// The indices that sort x along `dim` (torch.argsort; i64, not differentiable).
Tensor argsort(const Tensor& x, std::int64_t dim = -1, bool descending = false);

}  // namespace tg
