#pragma once
// Reductions.
// Implemented beside their backward in autograd/ops_reduce.cpp; each
// validates its arguments and throws std::invalid_argument naming the op and the shapes.
#include <cstdint>

#include "autograd/array_ref.h"
#include "autograd/tensor.h"

namespace tg {

Tensor sum(const Tensor& x);  // over everything, 0-dim result
Tensor sum(const Tensor& x, IntList axes, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, IntList axes, bool keepdim = false);
/// Max over everything; the gradient goes to the first maximal element.
Tensor max(const Tensor& x);
/// Max over the axes; the gradient goes to the first maximal element along them.
Tensor max(const Tensor& x, IntList axes, bool keepdim = false);
/// Index of the first maximum along `axis` (i64, not differentiable).
Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdim = false);

}  // namespace tg
